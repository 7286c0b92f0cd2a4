/* gpu_spin.cuh - one device thread busy for a given time on the GPU's
 * global timer (nanoseconds), sleeping sleep_ns between reads: what holds
 * a stream while the host queues work behind it (model/cuda/cuda_hold.cu,
 * a measurement's hold) or keeps queued work waiting (data/gpu_resize.cu,
 * --nvjpeg stall=MS). For .cu files only. */
#ifndef TB_GPU_SPIN_CUH
#define TB_GPU_SPIN_CUH

__device__ __forceinline__ void tb_gpu_spin_ns(unsigned long long ns, unsigned sleep_ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(sleep_ns);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

#endif
