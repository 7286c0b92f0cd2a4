/* layout.h - where element (n,c,h,w) lives in each layout, and the 16-bit
 * float formats, written once for the host and the device.
 *
 * The CPU backend's convert/input ops and the CUDA kernels (model/cuda, the
 * same functions compiled by nvcc as __host__ __device__) both use these,
 * so the host tests of the index math (tests/test_cuda_host.c) test the
 * arithmetic the GPU runs.
 *
 * 16-bit formats, round to nearest even, as __float2bfloat16_rn and
 * __float2half_rn do (NaN stays a quiet NaN, overflow becomes Inf, fp16
 * keeps subnormals):
 *   bfloat16  1 sign, 8 exponent, 7 mantissa bits (float32's range)
 *   float16   1 sign, 5 exponent, 10 mantissa bits (max 65504)
 */
#ifndef TB_LAYOUT_H
#define TB_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/backend.h"

#ifdef __CUDACC__
#define TB_HD __host__ __device__
#else
#define TB_HD
#endif

/* Offset of element (n,c,h,w) of a [N,C,H,W] tensor stored in layout l. */
static inline TB_HD size_t tb_layout_offset(tb_layout l, int C, int H, int W, int n, int c,
                                            int h, int w) {
    return l == TB_NCHW ? (((size_t)n * C + c) * H + h) * W + w
                        : (((size_t)n * H + h) * W + w) * C + c;
}

/* The inverse: element index i of a [N,C,H,W] tensor stored in layout l. */
static inline TB_HD void tb_layout_coords(tb_layout l, int C, int H, int W, size_t i, int *n,
                                          int *c, int *h, int *w) {
    if (l == TB_NCHW) {
        *w = (int)(i % (size_t)W);
        i /= (size_t)W;
        *h = (int)(i % (size_t)H);
        i /= (size_t)H;
        *c = (int)(i % (size_t)C);
        *n = (int)(i / (size_t)C);
    } else {
        *c = (int)(i % (size_t)C);
        i /= (size_t)C;
        *w = (int)(i % (size_t)W);
        i /= (size_t)W;
        *h = (int)(i % (size_t)H);
        *n = (int)(i / (size_t)H);
    }
}

/* The same two in 32-bit arithmetic, for tensors of fewer than 2^31
 * elements (the GPU's conversion and input kernels: a 64-bit division is
 * several times the instructions of a 32-bit one). */
static inline TB_HD uint32_t tb_layout_offset32(tb_layout l, uint32_t C, uint32_t H, uint32_t W, uint32_t n,
                                                uint32_t c, uint32_t h, uint32_t w) {
    return l == TB_NCHW ? ((n * C + c) * H + h) * W + w : ((n * H + h) * W + w) * C + c;
}

static inline TB_HD void tb_layout_coords32(tb_layout l, uint32_t C, uint32_t H, uint32_t W, uint32_t i,
                                            uint32_t *n, uint32_t *c, uint32_t *h, uint32_t *w) {
    if (l == TB_NCHW) {
        *w = i % W, i /= W;
        *h = i % H, i /= H;
        *c = i % C, *n = i / C;
    } else {
        *c = i % C, i /= C;
        *w = i % W, i /= W;
        *h = i % H, *n = i / H;
    }
}

/* Channel of element index i (HW = H*W). */
static inline TB_HD int tb_layout_channel(tb_layout l, int C, size_t HW, size_t i) {
    return l == TB_NCHW ? (int)((i / HW) % (size_t)C) : (int)(i % (size_t)C);
}

/* ---- float32 <-> bfloat16 / float16 bits (host reference) ----------------------- */

static inline uint32_t tb_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float tb_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t tb_f32_to_bf16(float f) {
    uint32_t u = tb_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                          /* to nearest even */
    return (uint16_t)(u >> 16);
}

static inline float tb_bf16_to_f32(uint16_t b) { return tb_f32_from_bits((uint32_t)b << 16); }

static inline uint16_t tb_f32_to_f16(float f) {
    uint32_t u = tb_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: rounds to Inf */
    if (a < 0x38800000u) {                                  /* below 2^-14: subnormal or 0 */
        if (a < 0x33000000u) return sign;                   /* below 2^-25: rounds to 0 */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;                          /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a - 0x38000000u; /* rebias 127 -> 15, exponent in bits 23.. */
    uint32_t q = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

static inline float tb_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return tb_f32_from_bits(sign | 0x7f800000u | (m << 13));
    if (e == 0) { /* zero or subnormal: m * 2^-24 */
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return tb_f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

/* Element i of a host buffer of dtype d, as double; and the store back
 * (rounding to d). For the CPU backend's convert op and the tests. */
static inline double tb_host_load(const void *p, tb_dtype d, size_t i) {
    switch (d) {
    case TB_F32: return ((const float *)p)[i];
    case TB_F64: return ((const double *)p)[i];
    case TB_BF16: return tb_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return tb_f16_to_f32(((const uint16_t *)p)[i]);
    }
}

static inline void tb_host_store(void *p, tb_dtype d, size_t i, double v) {
    switch (d) {
    case TB_F32: ((float *)p)[i] = (float)v; break;
    case TB_F64: ((double *)p)[i] = v; break;
    case TB_BF16: ((uint16_t *)p)[i] = tb_f32_to_bf16((float)v); break;
    default: ((uint16_t *)p)[i] = tb_f32_to_f16((float)v); break;
    }
}

#endif
