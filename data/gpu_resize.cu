/* gpu_resize.cu - --decode gpu's crop + resize kernels: the two passes of
 * Pillow's BILINEAR resample over a batch of decoded regions, one thread
 * per output pixel (3 channels), the arithmetic of data/gpu_resize.h
 * (tb_rs_h, tb_rs_v), which the host tests run against the CPU path. */
#include <cuda_runtime.h>
#include <stdint.h>

#if defined(__cplusplus) && !defined(_Noreturn)
#define _Noreturn [[noreturn]]
#endif
extern "C" {
#include "core/cuda_check.h"
#include "core/gpu_spin.cuh"
#include "data/gpu_resize.h"
}

#define RS_THREADS 256

/* Horizontal pass: sample blockIdx.y, (row, column) from the flat index. */
__global__ void rs_horizontal(const tb_rs_desc *desc, const int32_t *tab, int S, const uint8_t *src, uint8_t *tmp) {
    const tb_rs_desc d = desc[blockIdx.y];
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)d.rows * S) return;
    const int r = (int)(i / S), x = (int)(i % S);
    uint8_t *o = tmp + d.tmp_off + ((size_t)r * S + x) * 3;
    for (int c = 0; c < 3; c++) o[c] = tb_rs_h(&d, tab, S, src, r, x, c);
}

/* Vertical pass into the batch row d.dst_row of dst [batch][S][S][3]. */
__global__ void rs_vertical(const tb_rs_desc *desc, const int32_t *tab, int S, const uint8_t *tmp, uint8_t *dst) {
    const tb_rs_desc d = desc[blockIdx.y];
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)S * S) return;
    const int y = (int)(i / S), x = (int)(i % S);
    uint8_t *o = dst + ((size_t)d.dst_row * S * S + (size_t)y * S + x) * 3;
    for (int c = 0; c < 3; c++) o[c] = tb_rs_v(&d, tab, S, tmp, y, x, c);
}

/* One thread that keeps the stream busy for ns nanoseconds of the device's
 * global timer (--nvjpeg stall=MS: a test of the hardware call's barrier). */
__global__ void rs_stall(unsigned long long ns) { tb_gpu_spin_ns(ns, 100000); }

extern "C" void tb_rs_stall(int ms, cudaStream_t stream) {
    if (ms <= 0) return;
    rs_stall<<<1, 1, 0, stream>>>((unsigned long long)ms * 1000000ull);
    TB_CUDA_CHECK_LAUNCH("rs_stall");
}

/* n samples; max_rows: the largest d.rows among them. Queued on stream. */
extern "C" void tb_rs_launch(const tb_rs_desc *d_desc, int n, const int32_t *d_tab, int S, const uint8_t *d_src,
                             uint8_t *d_tmp, uint8_t *d_dst, int max_rows, cudaStream_t stream) {
    if (n <= 0) return;
    int64_t hx = ((int64_t)max_rows * S + RS_THREADS - 1) / RS_THREADS;
    int64_t vx = ((int64_t)S * S + RS_THREADS - 1) / RS_THREADS;
    rs_horizontal<<<dim3((unsigned)hx, (unsigned)n), RS_THREADS, 0, stream>>>(d_desc, d_tab, S, d_src, d_tmp);
    TB_CUDA_CHECK_LAUNCH("rs_horizontal");
    rs_vertical<<<dim3((unsigned)vx, (unsigned)n), RS_THREADS, 0, stream>>>(d_desc, d_tab, S, d_tmp, d_dst);
    TB_CUDA_CHECK_LAUNCH("rs_vertical");
}
