/* cuda_hold.cu - a stream held for a given time, for measuring: one thread
 * spins on the device's global timer, so that the host queues the timed
 * work behind it and the events around that work time the device alone,
 * not the host's calls that queue it (cuda_bn_tune.c: a round of eager
 * BatchNorm calls, where a training step replays them from a CUDA graph). */
#include "core/gpu_spin.cuh"
#include "model/cuda/cuda_kernels.cuh"

__global__ void hold_k(unsigned long long ns) { tb_gpu_spin_ns(ns, 1000); }

/* The hold's kernel loaded now: under lazy loading (CUDA's default since
 * 12.2) a module loads at its kernel's first launch or attribute query, and
 * a first hold queued right after a barrier across ranks (allreduce-bench,
 * preflight) would otherwise start each rank late by its own load time. */
extern "C" void cu_hold_load(void) {
    cudaFuncAttributes a;
    TB_CUDA_CHECK(cudaFuncGetAttributes(&a, hold_k));
}

extern "C" void cu_hold_stream(cudaStream_t st, float ms) {
    if (!(ms > 0.0f)) return;
    hold_k<<<1, 1, 0, st>>>((unsigned long long)((double)ms * 1e6));
    TB_CUDA_CHECK_LAUNCH("a stream held for a measurement");
}
