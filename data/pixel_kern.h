/* pixel_kern.h - the loader's per-pixel hot loops, one table per vector
 * level (core/cpu_dispatch.h): the two passes of the Pillow-exact
 * resize (data/resample.h) and the output stores (normalise to float32
 * NCHW / NHWC, or pack RGBX to RGB bytes).
 *
 * data/pixel_kern.c is compiled once per level (baseline SSE2, avx2,
 * avx512); every level computes the same bytes and floats, bit for bit:
 * the resize in exact integer arithmetic (Pillow's 22-bit weights), the
 * normalisation as ((float)v / 255 - mean) / std in IEEE float32 with no
 * fused multiply-add (tests/test_cpu_dispatch.c holds every level to a
 * scalar reference). */
#ifndef TB_PIXEL_KERN_H
#define TB_PIXEL_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "data/resample.h"

typedef struct {
    /* Horizontal pass over `rows` rows: row r of `in` (in_stride bytes
     * apart) starts at input pixel x = ix0; out gets ax->nout RGBX pixels
     * per row, out_stride bytes apart. */
    void (*hpass)(const uint8_t *in, int in_stride, int ix0, int rows, const tb_axis *ax, uint8_t *out,
                  int out_stride);
    /* Vertical pass: row r of `in` is input y = iy0 + r; width4 bytes per
     * row (RGBX); output row y of ay->nout mirrored left-right when flip;
     * acc: scratch of width4 int32. */
    void (*vpass)(const uint8_t *in, int in_stride, int iy0, int width4, const tb_axis *ay, int flip, uint8_t *out,
                  int out_stride, int32_t *acc);
    /* npx RGBX pixels to float32 planes r, g, b: ((float)v / 255 - mean[c]) / std[c] */
    void (*store_f32_planar)(const uint8_t *rgbx, size_t npx, const float mean[3], const float std[3], float *r,
                             float *g, float *b);
    /* the same values interleaved: o[3i + c] */
    void (*store_f32_packed)(const uint8_t *rgbx, size_t npx, const float mean[3], const float std[3], float *o);
    /* RGBX to RGB bytes: o[3i + c] = rgbx[4i + c] */
    void (*store_u8_packed)(const uint8_t *rgbx, size_t npx, uint8_t *o);
} tb_pixel_kern;

/* The table of the level the loops run at (tb_cpu_level()). */
const tb_pixel_kern *tb_pixel_kern_get(void);
/* The table of a level this binary carries (tests, benchmarks); NULL if none. */
const tb_pixel_kern *tb_pixel_kern_of(int level);

#endif
