/* cuda_kernels.cuh - what the own kernels (.cu files) share: float <-> the
 * three activation types, launch geometry, dtype dispatch.
 *
 * Every kernel computes in float32 (double where a sum over many values
 * needs it) and rounds once to the output type with round-to-nearest-even
 * (__float2bfloat16_rn, __float2half_rn), the host reference's rounding
 * (model/layout.h). */
#ifndef TB_CUDA_KERNELS_CUH
#define TB_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "model/cuda/cuda_index.h"
#include "model/cuda/cuda_internal.h"
#include "model/layout.h"

/* float <-> T */
__device__ __forceinline__ float cu_ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float cu_ld(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float cu_ld(const __half *p, size_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void cu_st(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void cu_st(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void cu_st(__half *p, size_t i, float v) { p[i] = __float2half_rn(v); }

/* Threads per block of the elementwise kernels, and a grid for n elements
 * (grid-stride loops cover the rest). */
#define CU_THREADS 256
static inline unsigned cu_blocks(size_t n) {
    size_t b = (n + CU_THREADS - 1) / CU_THREADS;
    if (b > 65535u * 8u) b = 65535u * 8u;
    return b ? (unsigned)b : 1u;
}

#define CU_FOR(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Calls F<T>(args...) with T the C++ type of dtype dt. */
#define CU_DISPATCH(dt, F, ...)                                                      \
    do {                                                                             \
        switch (dt) {                                                                \
        case TB_F32: F<float>(__VA_ARGS__); break;                                   \
        case TB_BF16: F<__nv_bfloat16>(__VA_ARGS__); break;                          \
        case TB_F16: F<__half>(__VA_ARGS__); break;                                  \
        default: TB_FATAL("cuda: no kernel for %s", tb_dtype_name(dt));              \
        }                                                                            \
    } while (0)

#endif
