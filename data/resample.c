/* resample.c - Pillow's BILINEAR resample, 8-bit RGBX (see resample.h). The
 * coefficient code follows precompute_coeffs() and normalize_coeffs_8bpc()
 * of Pillow's Resample.c step for step, so that the weights are the same
 * doubles rounded the same way. The passes themselves are the vector
 * level's (data/pixel_kern.h). */
#include "data/resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "data/pixel_kern.h"

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
    const int nout4 = (nout + 3) / 4 * 4; /* pfirst and psplit: whole groups of 4 outputs */
    if (nout4 > a->cap_out) {
        free(a->first);
        free(a->taps);
        free(a->pfirst);
        a->first = malloc((size_t)nout4 * sizeof *a->first);
        a->taps = malloc((size_t)nout4 * sizeof *a->taps);
        a->pfirst = malloc((size_t)nout4 * sizeof *a->pfirst);
        a->cap_out = nout4;
    }
    if ((int64_t)nout4 * ksize > a->cap_coef) {
        free(a->coef);
        free(a->pcoef);
        free(a->psplit);
        a->coef = malloc((size_t)nout4 * (size_t)ksize * sizeof *a->coef);
        a->pcoef = malloc((size_t)nout4 * (size_t)ksize * sizeof *a->pcoef);
        /* (ksize + 1) / 2 pairs x 16 words per output, 64-byte aligned */
        a->psplit = aligned_alloc(64, (size_t)nout4 * (size_t)(ksize + 1) / 2 * 16 * sizeof *a->psplit);
        a->cap_coef = nout4 * ksize;
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
    }
    /* the hi and lo halves, for groups of 4 outputs (pixel_kern.c): group
     * g, pair of taps q: 64 words, the 4 outputs' hi words (k[2q], k[2q+1])
     * x 4 channels, then their lo words likewise; outputs past nout read
     * where the last one does, with zero weights */
    const int pairs = (kpad + 1) / 2;
    for (int o = nout; o < nout4; o++) a->pfirst[o] = a->pfirst[nout - 1];
    for (int o = 0; o < nout4; o++) {
        const int32_t *pk = a->pcoef + (size_t)o * kpad;
        for (int q = 0; q < pairs; q++) {
            int16_t *d = a->psplit + ((size_t)(o / 4) * pairs + q) * 64 + (size_t)(o % 4) * 8;
            int32_t k0 = o < nout ? pk[2 * q] : 0, k1 = o < nout && 2 * q + 1 < kpad ? pk[2 * q + 1] : 0;
            for (int c = 0; c < 4; c++) {
                d[2 * c] = (int16_t)(k0 >> 11);
                d[2 * c + 1] = (int16_t)(k1 >> 11);
                d[32 + 2 * c] = (int16_t)(k0 & 2047);
                d[32 + 2 * c + 1] = (int16_t)(k1 & 2047);
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
    const tb_pixel_kern *k = tb_pixel_kern_get();
    if (ay->identity) { /* no vertical pass: rows map one to one */
        const uint8_t *h = rows_in;
        int stride = src_stride;
        if (!ax->identity) { /* horizontal pass into scratch */
            k->hpass(rows_in, src_stride, sx, ay->nout, ax, *tmp, width4);
            h = *tmp;
            stride = width4;
        } else {
            h += (size_t)(ax->in_lo - sx) * 4;
        }
        for (int y = 0; y < ay->nout; y++)
            copy_row(h + (size_t)y * stride, ax->nout, flip, dst + (size_t)y * dst_stride);
    } else if (ax->identity) { /* vertical pass only, from the source */
        k->vpass(rows_in + (size_t)(ax->in_lo - sx) * 4, src_stride, ay->in_lo, width4, ay, flip, dst, dst_stride,
                 acc);
    } else {
        k->hpass(rows_in, src_stride, sx, rows, ax, *tmp, width4);
        k->vpass(*tmp, width4, ay->in_lo, width4, ay, flip, dst, dst_stride, acc);
    }
}
