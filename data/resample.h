/* resample.h - antialiased resize of 8-bit RGBX pixels with the arithmetic
 * of Pillow's Image.resize(size, BILINEAR, box) (libImaging/Resample.c): a
 * triangle filter whose support widens by the downscale factor, weights
 * normalised per output pixel and rounded to 22-bit fixed point, two
 * separable passes (horizontal first) with rounding to 8 bits in between.
 * For the same input pixels the R, G, B output is bit-identical to Pillow's.
 *
 * Pixels are RGBX (4 bytes, the 4th unused): libjpeg-turbo writes them at
 * no extra cost, and one pixel is one 4-lane integer multiply-add. The
 * passes run at the CPU's vector level (data/pixel_kern.h), each level
 * giving the same bytes.
 *
 * Each axis is planned on its own (tb_axis), and may compute only a window
 * of the outputs (a centre crop of the resized image), reading only the
 * inputs that window needs. */
#ifndef TB_RESAMPLE_H
#define TB_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

#define TB_RESAMPLE_BITS 22 /* Pillow's PRECISION_BITS for 8-bit images */

typedef struct {
    int nout;        /* outputs computed */
    int ksize;       /* taps reserved per output */
    int *first;      /* [nout] first input index read by each output */
    int *taps;       /* [nout] inputs read */
    int32_t *coef;   /* [nout][ksize] weights, TB_RESAMPLE_BITS fraction bits */
    int in_lo, in_hi;/* every input read lies in [in_lo, in_hi) */
    int identity;    /* output o is input in_lo + o, unchanged */
    /* The same weights padded with zeros to kpad taps for every output
     * (window moved left at the right edge), so that the horizontal pass
     * runs a fixed-length, unrolled loop; sums are unchanged. */
    int kpad;
    int *pfirst;     /* [nout rounded up to 4] (past nout: pfirst[nout-1]) */
    int32_t *pcoef;  /* [nout][kpad] */
    /* The padded weights split as k = hi * 2^11 + lo (both < 2^12), laid
     * out for 16-bit multiply-adds on groups of 4 outputs (pixel_kern.c):
     * group g, pair of taps q: 64 words, the hi words (k[2q], k[2q+1]) x 4
     * channels of outputs 4g..4g+3, then their lo words; zero past nout. */
    int16_t *psplit; /* [ceil(nout/4)][(kpad+1)/2][64], 64-byte aligned */
    int cap_out, cap_coef;
} tb_axis;

/* Plans one axis. Inputs are pixels [0, in_size) (the picture Pillow
 * resizes: the crop, or the whole image); the box [in0, in1) of that axis
 * (Pillow's `box`, in input pixels) is resized to out_size pixels, of which
 * outputs [out0, out0 + nout) are computed. Reuses a's buffers. */
void tb_axis_plan(tb_axis *a, int in_size, double in0, double in1, int out_size, int out0, int nout);
void tb_axis_free(tb_axis *a);

/* Resizes: src points at input pixel (sx, sy) of the axes' input space
 * (RGBX, src_stride bytes per row) and must hold at least the inputs
 * [ax.in_lo, ax.in_hi) x [ay.in_lo, ay.in_hi); dst receives ay.nout rows of
 * ax.nout RGBX pixels, dst_stride bytes apart, mirrored left-right when
 * `flip`. *tmp (capacity *tmp_cap) is scratch, grown as needed. */
void tb_resample_rgbx(const uint8_t *src, int src_stride, int sx, int sy, const tb_axis *ax, const tb_axis *ay,
                      int flip, uint8_t *dst, int dst_stride, uint8_t **tmp, size_t *tmp_cap);

#endif
