/* comm_cast.cu - the bf16 compression hook's casts (see comm_cast.h). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "comm/comm_cast.h"

/* nvcc reads the C header of core/ as C++: C linkage, and C11's
 * _Noreturn spelled the C++ way (as model/cuda/cuda_internal.h does). */
#if !defined(_Noreturn)
#define _Noreturn [[noreturn]]
#endif
extern "C" {
#include "core/cuda_check.h"
}

__global__ void f32_to_bf16(const float *src, __nv_bfloat16 *dst, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void bf16_to_f32(const __nv_bfloat16 *src, float *dst, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __bfloat162float(src[i]);
}

static unsigned blocks_for(size_t n) {
    size_t b = (n + 255) / 256;
    return (unsigned)(b < 4096 ? (b ? b : 1) : 4096);
}

extern "C" void tb_comm_cast_f32_to_bf16(const float *src, uint16_t *dst, size_t n, void *stream) {
    if (!n) return;
    f32_to_bf16<<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(src, (__nv_bfloat16 *)dst, n);
    TB_CUDA_CHECK_LAUNCH("the float32 -> bfloat16 gradient cast");
}

extern "C" void tb_comm_cast_bf16_to_f32(const uint16_t *src, float *dst, size_t n, void *stream) {
    if (!n) return;
    bf16_to_f32<<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>((const __nv_bfloat16 *)src, dst, n);
    TB_CUDA_CHECK_LAUNCH("the bfloat16 -> float32 gradient cast");
}
