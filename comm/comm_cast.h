/* comm_cast.h - the casts of the bf16 gradient compression hook, on a
 * stream (comm_cast.cu): float32 -> bfloat16 (round to nearest even) before
 * the all-reduce, bfloat16 -> float32 after it, as PyTorch DDP's
 * bf16_compress_hook. stream is a cudaStream_t. */
#ifndef TB_COMM_CAST_H
#define TB_COMM_CAST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
void tb_comm_cast_f32_to_bf16(const float *src, uint16_t *dst, size_t n, void *stream);
void tb_comm_cast_bf16_to_f32(const uint16_t *src, float *dst, size_t n, void *stream);
#ifdef __cplusplus
}
#endif

#endif
