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

/* float <-> T: a value (cu_f, cu_to<T>), and element i of an array */
__device__ __forceinline__ float cu_f(float v) { return v; }
__device__ __forceinline__ float cu_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float cu_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T cu_to(float v);
template <> __device__ __forceinline__ float cu_to<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 cu_to<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half cu_to<__half>(float v) { return __float2half_rn(v); }
template <typename T> __device__ __forceinline__ float cu_ld(const T *p, size_t i) { return cu_f(p[i]); }
template <typename T> __device__ __forceinline__ void cu_st(T *p, size_t i, float v) { p[i] = cu_to<T>(v); }

/* The ReLU mask the own BatchNorm kernels keep from forward to backward
 * (cu_bn_mask_bytes, cuda_index.h): one byte per 16-byte word of y, bit k
 * set where the word's element k was kept by the ReLU: not y <= 0 (y > 0,
 * or NaN), the test the backward otherwise makes on y itself. */
template <typename T, int V> __device__ __forceinline__ unsigned cu_relu_keep_bits(const T *e) {
    unsigned m = 0;
#pragma unroll
    for (int k = 0; k < V; k++) m |= (cu_f(e[k]) <= 0.0f ? 0u : 1u) << k;
    return m;
}

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
