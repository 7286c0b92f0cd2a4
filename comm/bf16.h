/* bf16.h - float32 <-> bfloat16 on the host, round to nearest even: the
 * gradient compression hook's rounding (comm_cast.cu does the same on the
 * device with __float2bfloat16_rn), the MPI path's bf16 sum, and the host
 * test that measures what bf16 all-reduces cost in accuracy. */
#ifndef TB_BF16_H
#define TB_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint16_t tb_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float tb_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
