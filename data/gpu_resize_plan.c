/* gpu_resize_plan.c - host side of the GPU crop + resize: Pillow's weights
 * per sample (tb_axis_plan, as the CPU path at DCT scale 1), packed for the
 * kernels, and a host run of the kernels' arithmetic (see gpu_resize.h). */
#include "data/gpu_resize.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "data/resample.h"

struct tb_rs_planner {
    int S;
    tb_axis ax, ay;
    int32_t *tab;
    size_t len, cap;
    size_t scratch;            /* bytes of horizontal-pass rows so far */
};

tb_rs_planner *tb_rs_planner_create(int S) {
    tb_rs_planner *p = calloc(1, sizeof *p);
    if (!p) TB_FATAL("out of host memory");
    p->S = S;
    return p;
}

void tb_rs_planner_destroy(tb_rs_planner *p) {
    if (!p) return;
    tb_axis_free(&p->ax);
    tb_axis_free(&p->ay);
    free(p->tab);
    free(p);
}

void tb_rs_begin(tb_rs_planner *p) {
    p->len = 0;
    p->scratch = 0;
}

static int32_t *grow(tb_rs_planner *p, size_t n) {
    if (p->len + n > p->cap) {
        size_t cap = (p->len + n) * 2;
        int32_t *t = realloc(p->tab, cap * sizeof *t);
        if (!t) TB_FATAL("out of host memory for resize tables");
        p->tab = t;
        p->cap = cap;
    }
    int32_t *at = p->tab + p->len;
    p->len += n;
    return at;
}

void tb_rs_plan(tb_rs_planner *p, const tb_geometry *g, int W, int H, int margin, int dst_row, tb_rs_desc *d,
                tb_rs_region *need) {
    const int S = p->S;
    TB_ASSERT(g->size == S);
    /* as tb_sample_render at num = 8: the clip's own pixels, box [0, len) */
    tb_axis_plan(&p->ax, g->clip.width, 0.0, (double)g->clip.width, g->out_w, g->out_x0, S);
    tb_axis_plan(&p->ay, g->clip.height, 0.0, (double)g->clip.height, g->out_h, g->out_y0, S);
    const tb_axis *ax = &p->ax, *ay = &p->ay;
    memset(d, 0, sizeof *d);
    d->kx = ax->kpad;
    d->ky = ay->ksize;
    d->in_lo_y = ay->in_lo;
    d->rows = ay->in_hi - ay->in_lo;
    d->dst_row = dst_row;
    d->tmp_off = (int64_t)p->scratch;
    p->scratch += (size_t)d->rows * S * 3;
    d->tab = (int32_t)p->len;
    int32_t *t = grow(p, tb_rs_tab_len(S, d->kx, d->ky));
    for (int x = 0; x < S; x++) t[x] = ax->pfirst[x];
    memcpy(t + S, ax->pcoef, (size_t)S * d->kx * sizeof *t);
    int32_t *yf = t + S + (size_t)S * d->kx, *yt = yf + S, *yc = yt + S;
    for (int y = 0; y < S; y++) {
        yf[y] = ay->first[y];
        yt[y] = ay->taps[y];
    }
    memcpy(yc, ay->coef, (size_t)S * d->ky * sizeof *yc);
    int x0 = g->clip.left + ax->in_lo - margin, x1 = g->clip.left + ax->in_hi + margin;
    int y0 = g->clip.top + ay->in_lo - margin, y1 = g->clip.top + ay->in_hi + margin;
    need->x0 = x0 < 0 ? 0 : x0;
    need->y0 = y0 < 0 ? 0 : y0;
    need->x1 = x1 > W ? W : x1;
    need->y1 = y1 > H ? H : y1;
}

void tb_rs_place(const tb_geometry *g, int rx0, int ry0, int64_t src_off, int pitch, tb_rs_desc *d) {
    d->src_off = src_off;
    d->src_pitch = pitch;
    d->sx = rx0 - g->clip.left;
    d->sy = ry0 - g->clip.top;
}

void tb_rs_layout(const tb_geometry *g, tb_rs_region r, size_t *used, tb_rs_desc *d) {
    TB_ASSERT(r.x1 > r.x0 && r.y1 > r.y0);
    size_t off = (*used + TB_RS_ALIGN - 1) / TB_RS_ALIGN * TB_RS_ALIGN;
    int pitch = 3 * (r.x1 - r.x0);
    tb_rs_place(g, r.x0, r.y0, (int64_t)off, pitch, d);
    *used = off + (size_t)pitch * (size_t)(r.y1 - r.y0);
}

const int32_t *tb_rs_tables(const tb_rs_planner *p, size_t *len) {
    *len = p->len;
    return p->tab;
}

size_t tb_rs_scratch_bytes(const tb_rs_planner *p) { return p->scratch; }

void tb_rs_run_host(const tb_rs_desc *d, int n, const int32_t *tab, int S, const uint8_t *src_base, uint8_t *tmp,
                    uint8_t *dst) {
    for (int i = 0; i < n; i++) {
        const tb_rs_desc *di = &d[i];
        for (int r = 0; r < di->rows; r++)
            for (int x = 0; x < S; x++)
                for (int c = 0; c < 3; c++)
                    tmp[di->tmp_off + ((size_t)r * S + x) * 3 + c] = tb_rs_h(di, tab, S, src_base, r, x, c);
        uint8_t *o = dst + (size_t)di->dst_row * S * S * 3;
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++)
                for (int c = 0; c < 3; c++) o[((size_t)y * S + x) * 3 + c] = tb_rs_v(di, tab, S, tmp, y, x, c);
    }
}
