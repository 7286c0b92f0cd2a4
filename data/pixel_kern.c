/* pixel_kern.c - the loader's per-pixel loops for one vector level (see
 * pixel_kern.h); compiled once per level by cmake/TbDispatch.cmake, which
 * sets TB_ISA_SUFFIX and the level's -m flags. The code picks its widest
 * path from what the compiler may use: __AVX512BW__ (avx512), __AVX2__
 * (avx2), __SSE2__ (baseline x86-64), else plain C.
 *
 * The resize passes multiply 8-bit pixels by Pillow's 22-bit weights split
 * as k = hi * 2^11 + lo (both < 2^12) with 16-bit multiply-adds (pmaddwd):
 * the two halves' sums recombine to the exact int32 sum of the scalar
 * loop, so every level gives the same bytes. */
#include "data/pixel_kern.h"

#include <string.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "core/cpu_dispatch.h"

static inline uint8_t clip8(int32_t v) {
    v >>= TB_RESAMPLE_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* ---- horizontal pass -------------------------------------------------------------- */

/* Weights of output x, pair of taps q: psplit + hsplit_at(x, q, pairs) holds
 * the 8 hi words (k0 k1 x 4 channels); the lo words follow 32 words later
 * (resample.h: groups of 4 outputs). */
static inline size_t hsplit_at(int x, int q, int pairs) {
    return ((size_t)(x >> 2) * pairs + q) * 64 + (size_t)(x & 3) * 8;
}

#if defined(__SSE2__) && !defined(__AVX2__) /* the baseline path's helpers */
/* Two pixels at p (one, zero-padded, when `one`), as 8 words R0 R1 G0 G1 B0 B1 X0 X1. */
static inline __m128i pair_words_sse2(const uint8_t *p, int one) {
    __m128i px;
    if (!one) {
        px = _mm_loadl_epi64((const __m128i *)(const void *)p);
    } else {
        int32_t v;
        memcpy(&v, p, 4);
        px = _mm_cvtsi32_si128(v);
    }
    __m128i w = _mm_unpacklo_epi8(px, _mm_setzero_si128());
    return _mm_unpacklo_epi16(w, _mm_srli_si128(w, 8));
}

/* (hi << 11) + lo + 1/2, then >> 22, clamped to 0..255: 4 int32 -> 4 bytes. */
static inline int32_t finish4_sse2(__m128i hi, __m128i lo) {
    __m128i s = _mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(hi, 11), lo), _mm_set1_epi32(1 << (TB_RESAMPLE_BITS - 1)));
    s = _mm_srai_epi32(s, TB_RESAMPLE_BITS);
    s = _mm_packus_epi16(_mm_packs_epi32(s, s), s);
    return _mm_cvtsi128_si32(s);
}
#endif

#if defined(__AVX2__)
/* Two pixels of each of two outputs: 128 bits [p0 pair | p1 pair] of bytes. */
static inline __m128i pair_bytes2(const uint8_t *p0, const uint8_t *p1, int one) {
    if (!one) {
        __m128i a = _mm_loadl_epi64((const __m128i *)(const void *)p0);
        return _mm_unpacklo_epi64(a, _mm_loadl_epi64((const __m128i *)(const void *)p1));
    }
    int32_t a, b;
    memcpy(&a, p0, 4);
    memcpy(&b, p1, 4);
    return _mm_unpacklo_epi64(_mm_cvtsi32_si128(a), _mm_cvtsi32_si128(b));
}
#endif

/* One row range of the horizontal pass with K taps per output (a constant
 * after inlining, so the tap loop unrolls). */
static inline __attribute__((always_inline)) void hpass_k(const uint8_t *in, int in_stride, int ix0, int rows,
                                                          const tb_axis *ax, uint8_t *out, int out_stride,
                                                          const int K) {
    const int nout = ax->nout, pairs = (K + 1) / 2;
    (void)pairs; /* unused in plain C */
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = in + (size_t)r * in_stride;
        uint8_t *o = out + (size_t)r * out_stride;
        int x = 0;
#if defined(__AVX512BW__)
        /* 4 outputs at once: 512 bits = 4 outputs x (hi or lo) x 4 channels x 2 taps */
        const __m128i il = _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
        const __m512i half512 = _mm512_set1_epi32(1 << (TB_RESAMPLE_BITS - 1));
        for (; x < nout; x += 4) {
            const uint8_t *p0 = row + (size_t)(ax->pfirst[x] - ix0) * 4, *p1 = row + (size_t)(ax->pfirst[x + 1] - ix0) * 4;
            const uint8_t *p2 = row + (size_t)(ax->pfirst[x + 2] - ix0) * 4, *p3 = row + (size_t)(ax->pfirst[x + 3] - ix0) * 4;
            const int16_t *kw = ax->psplit + hsplit_at(x, 0, pairs);
            __m512i hi = _mm512_setzero_si512(), lo = _mm512_setzero_si512();
            for (int q = 0; q < pairs; q++) {
                const int one = 2 * q + 1 >= K;
                __m128i a = _mm_shuffle_epi8(pair_bytes2(p0 + 8 * q, p1 + 8 * q, one), il);
                __m128i b = _mm_shuffle_epi8(pair_bytes2(p2 + 8 * q, p3 + 8 * q, one), il);
                __m512i v = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
                hi = _mm512_add_epi32(hi, _mm512_madd_epi16(v, _mm512_loadu_si512(kw + (size_t)q * 64)));
                lo = _mm512_add_epi32(lo, _mm512_madd_epi16(v, _mm512_loadu_si512(kw + (size_t)q * 64 + 32)));
            }
            __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(hi, 11), lo), half512);
            s = _mm512_max_epi32(_mm512_srai_epi32(s, TB_RESAMPLE_BITS), _mm512_setzero_si512());
            __m128i px = _mm512_cvtusepi32_epi8(s); /* 4 RGBX pixels, clamped to 255 */
            int n = nout - x < 4 ? nout - x : 4;
            _mm_mask_storeu_epi8(o + 4 * x, (__mmask16)((1u << (4 * n)) - 1), px);
        }
#elif defined(__AVX2__)
        /* 2 outputs at once, one per 128-bit lane */
        const __m128i il = _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
        const __m256i half256 = _mm256_set1_epi32(1 << (TB_RESAMPLE_BITS - 1));
        for (; x < nout; x += 2) {
            const uint8_t *p0 = row + (size_t)(ax->pfirst[x] - ix0) * 4, *p1 = row + (size_t)(ax->pfirst[x + 1] - ix0) * 4;
            const int16_t *kw = ax->psplit + hsplit_at(x, 0, pairs);
            __m256i hi = _mm256_setzero_si256(), lo = _mm256_setzero_si256();
            for (int q = 0; q < pairs; q++) {
                __m128i ab = _mm_shuffle_epi8(pair_bytes2(p0 + 8 * q, p1 + 8 * q, 2 * q + 1 >= K), il);
                __m256i v = _mm256_cvtepu8_epi16(ab);
                hi = _mm256_add_epi32(hi, _mm256_madd_epi16(v, _mm256_loadu_si256((const __m256i *)(const void *)(kw + (size_t)q * 64))));
                lo = _mm256_add_epi32(lo, _mm256_madd_epi16(v, _mm256_loadu_si256((const __m256i *)(const void *)(kw + (size_t)q * 64 + 32))));
            }
            __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo), half256);
            s = _mm256_srai_epi32(s, TB_RESAMPLE_BITS);
            s = _mm256_packus_epi16(_mm256_packs_epi32(s, s), s); /* per lane: 4 bytes at 0..3 */
            int32_t v0 = _mm256_cvtsi256_si32(s), v1 = _mm_cvtsi128_si32(_mm256_extracti128_si256(s, 1));
            memcpy(o + 4 * x, &v0, 4);
            if (x + 1 < nout) memcpy(o + 4 * x + 4, &v1, 4);
        }
#elif defined(__SSE2__)
        for (; x < nout; x++) {
            const uint8_t *p = row + (size_t)(ax->pfirst[x] - ix0) * 4;
            const int16_t *kw = ax->psplit + hsplit_at(x, 0, pairs);
            __m128i hi = _mm_setzero_si128(), lo = _mm_setzero_si128();
            for (int q = 0; q < pairs; q++) {
                __m128i w = pair_words_sse2(p + 8 * q, 2 * q + 1 >= K);
                hi = _mm_add_epi32(hi, _mm_madd_epi16(w, _mm_load_si128((const __m128i *)(const void *)(kw + (size_t)q * 64))));
                lo = _mm_add_epi32(lo, _mm_madd_epi16(w, _mm_load_si128((const __m128i *)(const void *)(kw + (size_t)q * 64 + 32))));
            }
            int32_t v = finish4_sse2(hi, lo);
            memcpy(o + 4 * x, &v, 4);
        }
#endif
        for (; x < nout; x++) { /* plain C (no SSE2) */
            const uint8_t *p = row + (size_t)(ax->pfirst[x] - ix0) * 4;
            const int32_t *k = ax->pcoef + (size_t)x * K;
            int32_t s[4];
            for (int c = 0; c < 4; c++) s[c] = 1 << (TB_RESAMPLE_BITS - 1);
            for (int t = 0; t < K; t++)
                for (int c = 0; c < 4; c++) s[c] += p[4 * t + c] * k[t];
            for (int c = 0; c < 4; c++) o[4 * x + c] = clip8(s[c]);
        }
    }
}

static void hpass(const uint8_t *in, int in_stride, int ix0, int rows, const tb_axis *ax, uint8_t *out,
                  int out_stride) {
    switch (ax->kpad) {
    case 1: hpass_k(in, in_stride, ix0, rows, ax, out, out_stride, 1); break;
    case 2: hpass_k(in, in_stride, ix0, rows, ax, out, out_stride, 2); break;
    case 3: hpass_k(in, in_stride, ix0, rows, ax, out, out_stride, 3); break;
    case 4: hpass_k(in, in_stride, ix0, rows, ax, out, out_stride, 4); break;
    case 5: hpass_k(in, in_stride, ix0, rows, ax, out, out_stride, 5); break;
    case 6: hpass_k(in, in_stride, ix0, rows, ax, out, out_stride, 6); break;
    case 7: hpass_k(in, in_stride, ix0, rows, ax, out, out_stride, 7); break;
    case 8: hpass_k(in, in_stride, ix0, rows, ax, out, out_stride, 8); break;
    default: hpass_k(in, in_stride, ix0, rows, ax, out, out_stride, ax->kpad); break;
    }
}

/* ---- vertical pass ------------------------------------------------------------------ */

/* One chunk of a row, 16 / 32 / 64 bytes (4 / 8 / 16 RGBX pixels) at byte i:
 * the sums of n rows (base, stride apart) with weights k, two rows per
 * multiply-add (their bytes interleaved), kept in registers over the taps;
 * stored at o + i, or reversed at the mirrored place when flip. The same
 * body at each width (the unpacks and packs work per 128-bit lane, so the
 * bytes come out in order). */
#define TB_VCHUNK(NAME, VEC, LOADU, STOREU, ZERO, SET1, UNPLO, UNPHI, MADD, ADD, SLLI, SRAI, PACKS, PACKUS, REV, \
                  BYTES)                                                                                        \
    static inline void NAME(const uint8_t *base, int stride, const int32_t *k, int n, int i, int npx, int flip,   \
                            uint8_t *o) {                                                                       \
        const VEC zero = ZERO(), half = SET1(1 << (TB_RESAMPLE_BITS - 1));                                      \
        VEC h0 = zero, h1 = zero, h2 = zero, h3 = zero, l0 = zero, l1 = zero, l2 = zero, l3 = zero;             \
        for (int t = 0; t < n; t += 2) {                                                                        \
            const uint8_t *ra = base + (size_t)t * stride + i;                                                  \
            VEC a = LOADU((const void *)ra);                                                                    \
            VEC b = t + 1 < n ? LOADU((const void *)(ra + stride)) : zero;                                      \
            int32_t k0 = k[t], k1 = t + 1 < n ? k[t + 1] : 0;                                                   \
            VEC kh = SET1((int32_t)(((uint32_t)(k1 >> 11) << 16) | (uint32_t)(k0 >> 11)));                      \
            VEC kl = SET1((int32_t)(((uint32_t)(k1 & 2047) << 16) | (uint32_t)(k0 & 2047)));                    \
            VEC ab_lo = UNPLO(a, b), ab_hi = UNPHI(a, b);                                                       \
            VEC w0 = UNPLO(ab_lo, zero), w1 = UNPHI(ab_lo, zero), w2 = UNPLO(ab_hi, zero),                      \
                w3 = UNPHI(ab_hi, zero);                                                                        \
            h0 = ADD(h0, MADD(w0, kh));                                                                         \
            h1 = ADD(h1, MADD(w1, kh));                                                                         \
            h2 = ADD(h2, MADD(w2, kh));                                                                         \
            h3 = ADD(h3, MADD(w3, kh));                                                                         \
            l0 = ADD(l0, MADD(w0, kl));                                                                         \
            l1 = ADD(l1, MADD(w1, kl));                                                                         \
            l2 = ADD(l2, MADD(w2, kl));                                                                         \
            l3 = ADD(l3, MADD(w3, kl));                                                                         \
        }                                                                                                       \
        VEC s0 = SRAI(ADD(ADD(SLLI(h0, 11), l0), half), TB_RESAMPLE_BITS);                                      \
        VEC s1 = SRAI(ADD(ADD(SLLI(h1, 11), l1), half), TB_RESAMPLE_BITS);                                      \
        VEC s2 = SRAI(ADD(ADD(SLLI(h2, 11), l2), half), TB_RESAMPLE_BITS);                                      \
        VEC s3 = SRAI(ADD(ADD(SLLI(h3, 11), l3), half), TB_RESAMPLE_BITS);                                      \
        VEC px = PACKUS(PACKS(s0, s1), PACKS(s2, s3)); /* BYTES/4 RGBX pixels, clamped */                       \
        if (!flip)                                                                                              \
            STOREU((void *)(o + i), px);                                                                        \
        else                                                                                                    \
            STOREU((void *)(o + 4 * (npx - BYTES / 4 - i / 4)), REV(px));                                       \
    }

#if defined(__SSE2__)
#define TB_LD128(p) _mm_loadu_si128((const __m128i *)(p))
#define TB_ST128(p, v) _mm_storeu_si128((__m128i *)(p), v)
#define TB_REV128(v) _mm_shuffle_epi32(v, _MM_SHUFFLE(0, 1, 2, 3))
TB_VCHUNK(vchunk16, __m128i, TB_LD128, TB_ST128, _mm_setzero_si128, _mm_set1_epi32, _mm_unpacklo_epi8,
          _mm_unpackhi_epi8, _mm_madd_epi16, _mm_add_epi32, _mm_slli_epi32, _mm_srai_epi32, _mm_packs_epi32,
          _mm_packus_epi16, TB_REV128, 16)
#endif
#if defined(__AVX2__)
#define TB_LD256(p) _mm256_loadu_si256((const __m256i *)(p))
#define TB_ST256(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define TB_REV256(v) _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0))
TB_VCHUNK(vchunk32, __m256i, TB_LD256, TB_ST256, _mm256_setzero_si256, _mm256_set1_epi32, _mm256_unpacklo_epi8,
          _mm256_unpackhi_epi8, _mm256_madd_epi16, _mm256_add_epi32, _mm256_slli_epi32, _mm256_srai_epi32,
          _mm256_packs_epi32, _mm256_packus_epi16, TB_REV256, 32)
#endif
#if defined(__AVX512BW__)
#define TB_REV512(v) _mm512_permutexvar_epi32(_mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), v)
TB_VCHUNK(vchunk64, __m512i, _mm512_loadu_si512, _mm512_storeu_si512, _mm512_setzero_si512, _mm512_set1_epi32,
          _mm512_unpacklo_epi8, _mm512_unpackhi_epi8, _mm512_madd_epi16, _mm512_add_epi32, _mm512_slli_epi32,
          _mm512_srai_epi32, _mm512_packs_epi32, _mm512_packus_epi16, TB_REV512, 64)
#endif

static void vpass(const uint8_t *in, int in_stride, int iy0, int width4, const tb_axis *ay, int flip, uint8_t *out,
                  int out_stride, int32_t *acc) {
    const int npx = width4 / 4;
    for (int y = 0; y < ay->nout; y++) {
        const int32_t *k = ay->coef + (size_t)y * ay->ksize;
        const int n = ay->taps[y];
        const uint8_t *base = in + (size_t)(ay->first[y] - iy0) * in_stride;
        uint8_t *o = out + (size_t)y * out_stride;
        int i = 0;
#if defined(__AVX512BW__)
        for (; i + 64 <= width4; i += 64) vchunk64(base, in_stride, k, n, i, npx, flip, o);
#endif
#if defined(__AVX2__)
        for (; i + 32 <= width4; i += 32) vchunk32(base, in_stride, k, n, i, npx, flip, o);
#endif
#if defined(__SSE2__)
        for (; i + 16 <= width4; i += 16) vchunk16(base, in_stride, k, n, i, npx, flip, o);
#endif
        if (i < width4) { /* the rest (or all, without SSE2) */
            for (int m = i; m < width4; m++) acc[m] = 1 << (TB_RESAMPLE_BITS - 1);
            for (int t = 0; t < n; t++) {
                const uint8_t *row = base + (size_t)t * in_stride;
                const int32_t kt = k[t];
                for (int m = i; m < width4; m++) acc[m] += row[m] * kt;
            }
            for (int m = i; m < width4; m += 4) {
                int x = m / 4, d = flip ? npx - 1 - x : x;
                for (int c = 0; c < 4; c++) o[4 * d + c] = clip8(acc[m + c]);
            }
        }
    }
}

/* ---- output stores ------------------------------------------------------------------- */

/* ((float)v / 255 - m) / s at each width, from pixels loaded 4 bytes each:
 * the channel is (p >> shift) & 255. Divisions stay divisions (no
 * -ffast-math, no contraction): every width gives the scalar expression's
 * float32. */
#define TB_NORM(NAME, VEC, VECI, LOADU, STOREU, SET1I, SET1, AND, SRLI, CVT, DIV, SUB, PX)                 \
    static inline size_t NAME(const uint8_t *rgbx, size_t npx, const float mean[3], const float std[3],   \
                              float *const out[3]) {                                                    \
        const VECI m255 = SET1I(255);                                                                   \
        const VEC k255 = SET1(255.0f);                                                                  \
        size_t i = 0;                                                                                   \
        for (; i + PX <= npx; i += PX) {                                                                \
            VECI p = LOADU((const void *)(rgbx + 4 * i));                                               \
            for (int c = 0; c < 3; c++) {                                                               \
                VEC x = DIV(CVT(AND(c ? SRLI(p, 8 * c) : p, m255)), k255);                              \
                STOREU(out[c] + i, DIV(SUB(x, SET1(mean[c])), SET1(std[c])));                           \
            }                                                                                           \
        }                                                                                               \
        return i;                                                                                       \
    }
/* only the level's widest (the tail is plain C) */
#if defined(__SSE2__) && !defined(__AVX2__)
TB_NORM(norm4, __m128, __m128i, TB_LD128, _mm_storeu_ps, _mm_set1_epi32, _mm_set1_ps, _mm_and_si128, _mm_srli_epi32,
        _mm_cvtepi32_ps, _mm_div_ps, _mm_sub_ps, 4)
#endif
#if defined(__AVX2__) && !defined(__AVX512BW__)
TB_NORM(norm8, __m256, __m256i, TB_LD256, _mm256_storeu_ps, _mm256_set1_epi32, _mm256_set1_ps, _mm256_and_si256,
        _mm256_srli_epi32, _mm256_cvtepi32_ps, _mm256_div_ps, _mm256_sub_ps, 8)
#endif
#if defined(__AVX512BW__)
TB_NORM(norm16, __m512, __m512i, _mm512_loadu_si512, _mm512_storeu_ps, _mm512_set1_epi32, _mm512_set1_ps,
        _mm512_and_si512, _mm512_srli_epi32, _mm512_cvtepi32_ps, _mm512_div_ps, _mm512_sub_ps, 16)
#endif

static void store_f32_planar(const uint8_t *rgbx, size_t npx, const float mean[3], const float std[3], float *r,
                             float *g, float *b) {
    float *const out[3] = {r, g, b};
    size_t i = 0;
#if defined(__AVX512BW__)
    i = norm16(rgbx, npx, mean, std, out);
#elif defined(__AVX2__)
    i = norm8(rgbx, npx, mean, std, out);
#elif defined(__SSE2__)
    i = norm4(rgbx, npx, mean, std, out);
#endif
    for (; i < npx; i++)
        for (int c = 0; c < 3; c++) out[c][i] = ((float)rgbx[4 * i + c] / 255.0f - mean[c]) / std[c];
}

static void store_f32_packed(const uint8_t *rgbx, size_t npx, const float mean[3], const float std[3], float *o) {
    const float m0 = mean[0], m1 = mean[1], m2 = mean[2], s0 = std[0], s1 = std[1], s2 = std[2];
    for (size_t i = 0; i < npx; i++) {
        o[3 * i + 0] = ((float)rgbx[4 * i + 0] / 255.0f - m0) / s0;
        o[3 * i + 1] = ((float)rgbx[4 * i + 1] / 255.0f - m1) / s1;
        o[3 * i + 2] = ((float)rgbx[4 * i + 2] / 255.0f - m2) / s2;
    }
}

static void store_u8_packed(const uint8_t *rgbx, size_t npx, uint8_t *o) {
    size_t i = 0;
#if defined(__AVX2__)
    /* 4 pixels per shuffle: 12 of the 16 bytes written are kept */
    const __m128i pick = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    for (; i + 6 <= npx; i += 4) /* the store's 4 spare bytes land on pixel i+4's, written next */
        _mm_storeu_si128((__m128i *)(void *)(o + 3 * i),
                         _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(rgbx + 4 * i)), pick));
#endif
    for (; i < npx; i++) {
        o[3 * i + 0] = rgbx[4 * i + 0];
        o[3 * i + 1] = rgbx[4 * i + 1];
        o[3 * i + 2] = rgbx[4 * i + 2];
    }
}

const tb_pixel_kern TB_ISA_FN(tb_pixel_kern) = {hpass, vpass, store_f32_planar, store_f32_packed, store_u8_packed};

/* ---- the choice (once, in the baseline object) ------------------------------------------ */
#if defined(TB_ISA_IS_baseline)
#if defined(TB_CPU_DISPATCH_X86)
extern const tb_pixel_kern tb_pixel_kern_avx2, tb_pixel_kern_avx512;
static const tb_pixel_kern *const k_tables[TB_ISA_NLEVELS] = {&tb_pixel_kern_baseline, &tb_pixel_kern_avx2,
                                                              &tb_pixel_kern_avx512};
#else
static const tb_pixel_kern *const k_tables[TB_ISA_NLEVELS] = {&tb_pixel_kern_baseline, NULL, NULL};
#endif

const tb_pixel_kern *tb_pixel_kern_of(int level) {
    return level >= 0 && level < TB_ISA_NLEVELS ? k_tables[level] : NULL;
}

const tb_pixel_kern *tb_pixel_kern_get(void) { return k_tables[tb_cpu_level()]; }
#endif
