/* resample.c - Pillow's BILINEAR resample, 8-bit RGBX (see resample.h). The
 * coefficient code follows precompute_coeffs() and normalize_coeffs_8bpc()
 * of Pillow's Resample.c step for step, so that the weights are the same
 * doubles rounded the same way. */
#include "data/resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE4_1__)
#include <smmintrin.h>
#endif

#include "src/core/log.h"

static double bilinear_filter(double x) {
    if (x < 0.0) x = -x;
    if (x < 1.0) return 1.0 - x;
    return 0.0;
}

void tb_axis_plan(tb_axis *a, int in_size, double in0, double in1, int out_size, int out0, int nout) {
    TB_ASSERT(in_size > 0 && out_size > 0 && nout > 0 && out0 >= 0 && out0 + nout <= out_size);
    double scale = (in1 - in0) / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale; /* BILINEAR's support is 1 */
    int ksize = (int)ceil(support) * 2 + 1;
    if (nout > a->cap_out) {
        free(a->first);
        free(a->taps);
        free(a->pfirst);
        a->first = malloc((size_t)nout * sizeof *a->first);
        a->taps = malloc((size_t)nout * sizeof *a->taps);
        a->pfirst = malloc((size_t)nout * sizeof *a->pfirst);
        a->cap_out = nout;
    }
    if ((int64_t)nout * ksize > a->cap_coef) {
        free(a->coef);
        free(a->pcoef);
        free(a->psplit);
        a->coef = malloc((size_t)nout * (size_t)ksize * sizeof *a->coef);
        a->pcoef = malloc((size_t)nout * (size_t)ksize * sizeof *a->pcoef);
        a->psplit = aligned_alloc(16, (size_t)nout * (size_t)(ksize + 1) / 2 * 16 * sizeof *a->psplit);
        a->cap_coef = nout * ksize;
    }
    if (!a->first || !a->taps || !a->coef || !a->pfirst || !a->pcoef || !a->psplit)
        TB_FATAL("out of host memory for resampling weights");
    a->nout = nout;
    a->ksize = ksize;
    a->in_lo = in_size;
    a->in_hi = 0;
    a->identity = 1;
    double k[ksize];
    for (int o = 0; o < nout; o++) {
        int xx = out0 + o;
        double center = in0 + (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        for (int x = 0; x < xmax; x++) {
            double w = bilinear_filter((x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        for (int x = 0; x < xmax; x++)
            if (ww != 0.0) k[x] /= ww;
        int32_t *kk = a->coef + (size_t)o * ksize;
        for (int x = 0; x < xmax; x++)
            kk[x] = k[x] < 0 ? (int32_t)(-0.5 + k[x] * (1 << TB_RESAMPLE_BITS))
                             : (int32_t)(0.5 + k[x] * (1 << TB_RESAMPLE_BITS));
        /* zero weights at either end change no sum: drop them, so that the
         * inputs read (and decoded) are only those that count */
        int lo = 0, hi = xmax;
        while (hi > lo && kk[hi - 1] == 0) hi--;
        while (lo < hi && kk[lo] == 0) lo++;
        if (lo == hi) { /* all weights zero (cannot happen for a box inside the input) */
            lo = 0;
            hi = xmax > 0 ? 1 : 0;
        }
        if (lo > 0) memmove(kk, kk + lo, (size_t)(hi - lo) * sizeof *kk);
        a->first[o] = xmin + lo;
        a->taps[o] = hi - lo;
        if (a->taps[o] > 0) {
            if (a->first[o] < a->in_lo) a->in_lo = a->first[o];
            if (a->first[o] + a->taps[o] > a->in_hi) a->in_hi = a->first[o] + a->taps[o];
        }
        if (a->taps[o] != 1 || kk[0] != (1 << TB_RESAMPLE_BITS) || a->first[o] != a->first[0] + o)
            a->identity = 0;
    }
    if (a->in_hi <= a->in_lo) TB_FATAL("resample plan reads no input (in %d, box %g..%g, out %d)", in_size, in0, in1,
                                       out_size);
    int kpad = 1;
    for (int o = 0; o < nout; o++)
        if (a->taps[o] > kpad) kpad = a->taps[o];
    a->kpad = kpad; /* <= in_hi - in_lo */
    for (int o = 0; o < nout; o++) {
        int f = a->first[o];
        if (f + kpad > a->in_hi) f = a->in_hi - kpad;
        int32_t *pk = a->pcoef + (size_t)o * kpad;
        const int32_t *kk = a->coef + (size_t)o * ksize;
        for (int t = 0; t < kpad; t++) {
            int src = f + t - a->first[o];
            pk[t] = src >= 0 && src < a->taps[o] ? kk[src] : 0;
        }
        a->pfirst[o] = f;
        int pairs = (kpad + 1) / 2;
        for (int q = 0; q < pairs; q++) {
            int16_t *d = a->psplit + ((size_t)o * pairs + q) * 16;
            int32_t k0 = pk[2 * q], k1 = 2 * q + 1 < kpad ? pk[2 * q + 1] : 0;
            for (int c = 0; c < 4; c++) {
                d[2 * c] = (int16_t)(k0 >> 11);
                d[2 * c + 1] = (int16_t)(k1 >> 11);
                d[8 + 2 * c] = (int16_t)(k0 & 2047);
                d[8 + 2 * c + 1] = (int16_t)(k1 & 2047);
            }
        }
    }
}

void tb_axis_free(tb_axis *a) {
    free(a->first);
    free(a->taps);
    free(a->coef);
    free(a->pfirst);
    free(a->pcoef);
    free(a->psplit);
    memset(a, 0, sizeof *a);
}

static inline uint8_t clip8(int32_t v) {
    v >>= TB_RESAMPLE_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Horizontal pass over `rows` rows: in row r points at input x = ix0; out
 * rows of ax->nout RGBX pixels. K taps per output (the padded weights);
 * with K a constant the compiler unrolls the tap loop.
 *
 * With SSE4.1 two taps are one 16-bit multiply-add for all four channels:
 * the two pixels' bytes are interleaved (R0 R1 G0 G1 ...) and multiplied
 * with the weights' high and low 11-bit halves; hi * 2^11 + lo is the
 * same integer sum as the scalar loop, so the result is identical. */
static inline __attribute__((always_inline)) void hpass(const uint8_t *in, int in_stride, int ix0, int rows,
                                                        const tb_axis *ax, uint8_t *out, int out_stride,
                                                        const int K) {
    const int nout = ax->nout;
#if defined(__SSE4_1__)
    const int pairs = (K + 1) / 2;
    const __m128i pair_bytes = _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i half = _mm_set1_epi32(1 << (TB_RESAMPLE_BITS - 1));
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = in + (size_t)r * in_stride;
        uint8_t *o = out + (size_t)r * out_stride;
        for (int x = 0; x < nout; x++) {
            const uint8_t *p = row + (size_t)(ax->pfirst[x] - ix0) * 4;
            const __m128i *k = (const __m128i *)(const void *)(ax->psplit + (size_t)x * pairs * 16);
            __m128i hi = _mm_setzero_si128(), lo = _mm_setzero_si128();
            for (int q = 0; q < pairs; q++) {
                __m128i px;
                if (2 * q + 1 < K) { /* two pixels */
                    px = _mm_loadl_epi64((const __m128i *)(const void *)(p + 8 * q));
                } else { /* the last, odd tap: one pixel, no read past it */
                    int32_t one;
                    memcpy(&one, p + 8 * q, 4);
                    px = _mm_cvtsi32_si128(one);
                }
                px = _mm_cvtepu8_epi16(_mm_shuffle_epi8(px, pair_bytes));
                hi = _mm_add_epi32(hi, _mm_madd_epi16(px, _mm_load_si128(k + 2 * q)));
                lo = _mm_add_epi32(lo, _mm_madd_epi16(px, _mm_load_si128(k + 2 * q + 1)));
            }
            __m128i s = _mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(hi, 11), lo), half);
            s = _mm_srai_epi32(s, TB_RESAMPLE_BITS);
            s = _mm_packus_epi16(_mm_packs_epi32(s, s), s); /* clamp to 0..255 */
            int32_t v = _mm_cvtsi128_si32(s);
            memcpy(o + 4 * x, &v, 4);
        }
    }
#else
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = in + (size_t)r * in_stride;
        uint8_t *o = out + (size_t)r * out_stride;
        for (int x = 0; x < nout; x++) {
            const uint8_t *p = row + (size_t)(ax->pfirst[x] - ix0) * 4;
            const int32_t *k = ax->pcoef + (size_t)x * K;
            int32_t s[4];
            for (int c = 0; c < 4; c++) s[c] = 1 << (TB_RESAMPLE_BITS - 1);
            for (int t = 0; t < K; t++)
                for (int c = 0; c < 4; c++) s[c] += p[4 * t + c] * k[t];
            for (int c = 0; c < 4; c++) o[4 * x + c] = clip8(s[c]);
        }
    }
#endif
}

static void pass_horizontal(const uint8_t *in, int in_stride, int ix0, int rows, const tb_axis *ax, uint8_t *out,
                            int out_stride) {
    switch (ax->kpad) {
    case 1: hpass(in, in_stride, ix0, rows, ax, out, out_stride, 1); break;
    case 2: hpass(in, in_stride, ix0, rows, ax, out, out_stride, 2); break;
    case 3: hpass(in, in_stride, ix0, rows, ax, out, out_stride, 3); break;
    case 4: hpass(in, in_stride, ix0, rows, ax, out, out_stride, 4); break;
    case 5: hpass(in, in_stride, ix0, rows, ax, out, out_stride, 5); break;
    case 6: hpass(in, in_stride, ix0, rows, ax, out, out_stride, 6); break;
    case 7: hpass(in, in_stride, ix0, rows, ax, out, out_stride, 7); break;
    case 8: hpass(in, in_stride, ix0, rows, ax, out, out_stride, 8); break;
    default: hpass(in, in_stride, ix0, rows, ax, out, out_stride, ax->kpad); break;
    }
}

/* Vertical pass: in row r is input y = iy0 + r, RGBX, `width4` bytes used
 * per row; acc is scratch of width4 int32. With SSE4.1, 16 bytes of a row
 * at a time with their sums kept in registers over the taps, two rows per
 * 16-bit multiply-add (bytes of the two rows interleaved, weights split in
 * 11-bit halves as in the horizontal pass); the tail is plain code. */
static void pass_vertical(const uint8_t *in, int in_stride, int iy0, int width4, const tb_axis *ay, int flip,
                          uint8_t *out, int out_stride, int32_t *acc) {
    const int npx = width4 / 4;
    for (int y = 0; y < ay->nout; y++) {
        const int32_t *k = ay->coef + (size_t)y * ay->ksize;
        const int n = ay->taps[y];
        const uint8_t *base = in + (size_t)(ay->first[y] - iy0) * in_stride;
        uint8_t *o = out + (size_t)y * out_stride;
        int i = 0;
#if defined(__SSE4_1__)
        const __m128i half = _mm_set1_epi32(1 << (TB_RESAMPLE_BITS - 1)), zero = _mm_setzero_si128();
        for (; i + 16 <= width4; i += 16) {
            __m128i h0 = zero, h1 = zero, h2 = zero, h3 = zero, l0 = zero, l1 = zero, l2 = zero, l3 = zero;
            for (int t = 0; t < n; t += 2) {
                const uint8_t *ra = base + (size_t)t * in_stride + i;
                __m128i a = _mm_loadu_si128((const __m128i *)(const void *)ra);
                __m128i b = t + 1 < n ? _mm_loadu_si128((const __m128i *)(const void *)(ra + in_stride)) : zero;
                int32_t k0 = k[t], k1 = t + 1 < n ? k[t + 1] : 0;
                __m128i kh = _mm_set1_epi32((int32_t)(((uint32_t)(k1 >> 11) << 16) | (uint32_t)(k0 >> 11)));
                __m128i kl = _mm_set1_epi32((int32_t)(((uint32_t)(k1 & 2047) << 16) | (uint32_t)(k0 & 2047)));
                __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
                __m128i w0 = _mm_unpacklo_epi8(ab_lo, zero), w1 = _mm_unpackhi_epi8(ab_lo, zero);
                __m128i w2 = _mm_unpacklo_epi8(ab_hi, zero), w3 = _mm_unpackhi_epi8(ab_hi, zero);
                h0 = _mm_add_epi32(h0, _mm_madd_epi16(w0, kh));
                h1 = _mm_add_epi32(h1, _mm_madd_epi16(w1, kh));
                h2 = _mm_add_epi32(h2, _mm_madd_epi16(w2, kh));
                h3 = _mm_add_epi32(h3, _mm_madd_epi16(w3, kh));
                l0 = _mm_add_epi32(l0, _mm_madd_epi16(w0, kl));
                l1 = _mm_add_epi32(l1, _mm_madd_epi16(w1, kl));
                l2 = _mm_add_epi32(l2, _mm_madd_epi16(w2, kl));
                l3 = _mm_add_epi32(l3, _mm_madd_epi16(w3, kl));
            }
#define TB_FINISH(h, l) \
    _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(h, 11), l), half), TB_RESAMPLE_BITS)
            __m128i s01 = _mm_packs_epi32(TB_FINISH(h0, l0), TB_FINISH(h1, l1));
            __m128i s23 = _mm_packs_epi32(TB_FINISH(h2, l2), TB_FINISH(h3, l3));
#undef TB_FINISH
            __m128i px = _mm_packus_epi16(s01, s23); /* 4 RGBX pixels, clamped */
            if (!flip) {
                _mm_storeu_si128((__m128i *)(void *)(o + i), px);
            } else { /* pixels i/4 .. i/4+3 go to npx-1-i/4 .. npx-4-i/4, reversed */
                px = _mm_shuffle_epi32(px, _MM_SHUFFLE(0, 1, 2, 3));
                _mm_storeu_si128((__m128i *)(void *)(o + 4 * (npx - 4 - i / 4)), px);
            }
        }
#endif
        if (i < width4) { /* the rest (or all, without SSE4.1) */
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

/* Copies n RGBX pixels, mirrored when flip. */
static void copy_row(const uint8_t *in, int n, int flip, uint8_t *o) {
    if (!flip)
        memcpy(o, in, (size_t)n * 4);
    else
        for (int x = 0; x < n; x++) memcpy(o + 4 * (n - 1 - x), in + 4 * x, 4);
}

void tb_resample_rgbx(const uint8_t *src, int src_stride, int sx, int sy, const tb_axis *ax, const tb_axis *ay,
                      int flip, uint8_t *dst, int dst_stride, uint8_t **tmp, size_t *tmp_cap) {
    TB_ASSERT(ax->in_lo >= sx && ay->in_lo >= sy);
    const int width4 = ax->nout * 4;
    const int rows = ay->in_hi - ay->in_lo;
    const uint8_t *rows_in = src + (size_t)(ay->in_lo - sy) * src_stride;
    size_t need = (size_t)rows * width4 + (size_t)width4 * sizeof(int32_t) + 64;
    if (need > *tmp_cap) {
        free(*tmp);
        *tmp_cap = need + need / 4;
        *tmp = malloc(*tmp_cap);
        if (!*tmp) TB_FATAL("out of host memory for resampling");
    }
    int32_t *acc = (int32_t *)(void *)(((uintptr_t)(*tmp + (size_t)rows * width4) + 63) & ~(uintptr_t)63);
    if (ay->identity) { /* no vertical pass: rows map one to one */
        const uint8_t *h = rows_in;
        int stride = src_stride;
        if (!ax->identity) { /* horizontal pass into scratch */
            pass_horizontal(rows_in, src_stride, sx, ay->nout, ax, *tmp, width4);
            h = *tmp;
            stride = width4;
        } else {
            h += (size_t)(ax->in_lo - sx) * 4;
        }
        for (int y = 0; y < ay->nout; y++)
            copy_row(h + (size_t)y * stride, ax->nout, flip, dst + (size_t)y * dst_stride);
    } else if (ax->identity) { /* vertical pass only, from the source */
        pass_vertical(rows_in + (size_t)(ax->in_lo - sx) * 4, src_stride, ay->in_lo, width4, ay, flip, dst,
                      dst_stride, acc);
    } else {
        pass_horizontal(rows_in, src_stride, sx, rows, ax, *tmp, width4);
        pass_vertical(*tmp, width4, ay->in_lo, width4, ay, flip, dst, dst_stride, acc);
    }
}
