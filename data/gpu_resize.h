/* gpu_resize.h - the GPU decode path's crop + resize, with the arithmetic of
 * data/resample.c (Pillow's BILINEAR: the same 22-bit weights, horizontal
 * pass then vertical, rounding to 8 bits in between), so that for the same
 * decoded pixels the GPU's S x S output is bit-identical to the CPU path's.
 *
 * The weights are planned on the host by tb_axis_plan exactly as the CPU
 * path plans them (DCT scale 1: the GPU decodes at full size), packed per
 * sample into one int32 table array (tb_rs_desc says where), uploaded, and
 * read by two kernels (data/gpu_resize.cu). The per-pixel functions below
 * are the kernels' bodies; they compile for host and device, and
 * tb_rs_run_host runs them on the host, which is how CI tests the packing
 * and the arithmetic against tb_resample_rgbx.
 *
 * Pixels are RGB, 3 bytes (nvJPEG's NVJPEG_OUTPUT_RGBI). Plain C, also read
 * by nvcc. */
#ifndef TB_GPU_RESIZE_H
#define TB_GPU_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TB_RS_HD static __host__ __device__ __forceinline__
#else
#define TB_RS_HD static inline
#endif

#define TB_RS_BITS 22 /* TB_RESAMPLE_BITS */

/* One sample's resize: where its decoded pixels and tables are. */
typedef struct {
    int64_t src_off;    /* byte offset of its decoded region in the decode buffer */
    int64_t tmp_off;    /* byte offset of its horizontal-pass rows in the scratch */
    int32_t src_pitch;  /* bytes per decoded row */
    int32_t sx, sy;     /* clip-relative coordinates of the region's first pixel */
    int32_t in_lo_y;    /* first clip row read */
    int32_t rows;       /* clip rows read: [in_lo_y, in_lo_y + rows) */
    int32_t kx, ky;     /* taps per output: horizontal (padded), vertical (stride) */
    int32_t tab;        /* offset, in int32, of its tables in the table array */
    int32_t dst_row;    /* sample index in the batch */
} tb_rs_desc;

/* Tables of a sample, at tab[d->tab]: xfirst[S], xcoef[S][kx], yfirst[S],
 * ytaps[S], ycoef[S][ky] (clip-relative input indices). */
TB_RS_HD const int32_t *tb_rs_xfirst(const tb_rs_desc *d, const int32_t *tab, int S) {
    (void)S;
    return tab + d->tab;
}
TB_RS_HD const int32_t *tb_rs_xcoef(const tb_rs_desc *d, const int32_t *tab, int S) { return tab + d->tab + S; }
TB_RS_HD const int32_t *tb_rs_yfirst(const tb_rs_desc *d, const int32_t *tab, int S) {
    return tab + d->tab + S + (size_t)S * d->kx;
}
TB_RS_HD const int32_t *tb_rs_ytaps(const tb_rs_desc *d, const int32_t *tab, int S) {
    return tab + d->tab + 2 * S + (size_t)S * d->kx;
}
TB_RS_HD const int32_t *tb_rs_ycoef(const tb_rs_desc *d, const int32_t *tab, int S) {
    return tab + d->tab + 3 * S + (size_t)S * d->kx;
}
/* int32 values of one sample's tables. */
static inline size_t tb_rs_tab_len(int S, int kx, int ky) { return (size_t)3 * S + (size_t)S * kx + (size_t)S * ky; }

TB_RS_HD uint8_t tb_rs_clip8(int32_t v) {
    v >>= TB_RS_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Horizontal pass: channel c of output column x for clip row in_lo_y + r. */
TB_RS_HD uint8_t tb_rs_h(const tb_rs_desc *d, const int32_t *tab, int S, const uint8_t *src_base, int r, int x,
                         int c) {
    const uint8_t *row = src_base + d->src_off + (int64_t)(d->in_lo_y + r - d->sy) * d->src_pitch;
    const int32_t first = tb_rs_xfirst(d, tab, S)[x];
    const int32_t *k = tb_rs_xcoef(d, tab, S) + (size_t)x * d->kx;
    int32_t s = 1 << (TB_RS_BITS - 1);
    for (int t = 0; t < d->kx; t++) s += (int32_t)row[(int64_t)(first + t - d->sx) * 3 + c] * k[t];
    return tb_rs_clip8(s);
}

/* Vertical pass: channel c of output (y, x), from the horizontal rows. */
TB_RS_HD uint8_t tb_rs_v(const tb_rs_desc *d, const int32_t *tab, int S, const uint8_t *tmp_base, int y, int x,
                         int c) {
    const uint8_t *rows = tmp_base + d->tmp_off;
    const int32_t first = tb_rs_yfirst(d, tab, S)[y], n = tb_rs_ytaps(d, tab, S)[y];
    const int32_t *k = tb_rs_ycoef(d, tab, S) + (size_t)y * d->ky;
    int32_t s = 1 << (TB_RS_BITS - 1);
    for (int t = 0; t < n; t++) s += (int32_t)rows[((size_t)(first + t - d->in_lo_y) * S + x) * 3 + c] * k[t];
    return tb_rs_clip8(s);
}

#ifndef __CUDACC__
#include "data/transform.h"

/* Host side: plans the samples of a batch and packs their tables. */
typedef struct tb_rs_planner tb_rs_planner;
tb_rs_planner *tb_rs_planner_create(int S);
void tb_rs_planner_destroy(tb_rs_planner *p);
/* Starts a batch: no sample, empty tables, scratch offset 0. */
void tb_rs_begin(tb_rs_planner *p);

/* The image rectangle [x0, x1) x [y0, y1) a sample must have decoded. */
typedef struct {
    int x0, y0, x1, y1;
} tb_rs_region;

/* Plans the resize of geometry g of a W x H image into batch row dst_row:
 * fills *d (all but src_off, src_pitch, sx, sy: tb_rs_place sets them) and
 * *need, the inputs the weights read widened by `margin` pixels and
 * clamped to the image. */
void tb_rs_plan(tb_rs_planner *p, const tb_geometry *g, int W, int H, int margin, int dst_row, tb_rs_desc *d,
                tb_rs_region *need);
/* The decoded region of d's image starts at image pixel (rx0, ry0), at
 * src_off in the decode buffer, pitch bytes per row. */
void tb_rs_place(const tb_geometry *g, int rx0, int ry0, int64_t src_off, int pitch, tb_rs_desc *d);

/* The decode buffer's layout, one for nvJPEG and the host emulation: the
 * rectangle r of a sample's image that is decoded (its plan's `need` where
 * the decoder takes a region, else the whole image) goes at the first
 * TB_RS_ALIGN-byte boundary at or past *used, in rows of 3 * width bytes
 * (NVJPEG_OUTPUT_RGBI writes channel[0] only, pitch[0] >= 3 * width: no
 * padding), and *used moves past it. Sets d's src_off, src_pitch, sx, sy
 * (tb_rs_place); *used is then the buffer's size in bytes. */
#define TB_RS_ALIGN 256
void tb_rs_layout(const tb_geometry *g, tb_rs_region r, size_t *used, tb_rs_desc *d);
/* The packed tables so far and their length (int32 values); the scratch the
 * horizontal rows need (bytes). */
const int32_t *tb_rs_tables(const tb_rs_planner *p, size_t *len);
size_t tb_rs_scratch_bytes(const tb_rs_planner *p);

/* Runs both passes on the host (the kernels' arithmetic): dst receives
 * [dst_row][S][S][3]; tmp must hold tb_rs_scratch_bytes. */
void tb_rs_run_host(const tb_rs_desc *d, int n, const int32_t *tab, int S, const uint8_t *src_base, uint8_t *tmp,
                    uint8_t *dst);
#endif

#endif
