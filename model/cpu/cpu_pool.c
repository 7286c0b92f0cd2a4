/* cpu_pool.c - max pooling and global average pooling on the CPU.
 *
 * Max pooling follows PyTorch's CPU kernel exactly: padding counts as -inf,
 * the window is scanned kh outer, kw inner, and a value replaces the
 * current maximum when it is strictly greater (or NaN), so ties go to the
 * first. The backward pass recomputes that argmax from x instead of keeping
 * indices. One thread owns a whole (n, c) plane, so the scatter in the
 * backward pass never races.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/log.h"
#include "model/cpu/cpu_internal.h"
#include "model/cpu/cpu_kern.h"

static void pool_check(const char *op, const tb_pool_geom *g, const tb_tensor *x,
                       const tb_tensor *y) {
    cpu_check(x, op, "x");
    cpu_check(y, op, "y");
    if (g->k < 1 || g->stride < 1 || g->pad < 0 || g->pad > g->k / 2)
        TB_FATAL("cpu %s: bad pool geometry k=%d stride=%d pad=%d (pad must be <= k/2)", op,
                 g->k, g->stride, g->pad);
    int ho = (x->h + 2 * g->pad - g->k) / g->stride + 1;
    int wo = (x->w + 2 * g->pad - g->k) / g->stride + 1;
    if (x->h + 2 * g->pad < g->k || x->w + 2 * g->pad < g->k || y->n != x->n || y->c != x->c ||
        y->h != ho || y->w != wo)
        TB_FATAL("cpu %s: x [%d,%d,%d,%d] and y [%d,%d,%d,%d] do not fit max pool k=%d "
                 "stride=%d pad=%d",
                 op, x->n, x->c, x->h, x->w, y->n, y->c, y->h, y->w, g->k, g->stride, g->pad);
}

/* One output row of one plane: for outputs ow in [ow0, ow0+nw) the window
 * maximum m[] and, when idx is not NULL, its index ih*W + iw in the plane.
 * Every output still sees its window in kh-outer, kw-inner order; looping
 * over the outputs innermost lets the compiler overlap them. */
#define POOL_CHUNK 256
static void pool_row(const tb_real *plane, int H, int W, int Wo, const tb_pool_geom *g, int oh,
                     int ow0, int nw, tb_real *m, int *idx) {
    int h0 = oh * g->stride - g->pad;
    int h1 = h0 + g->k < H ? h0 + g->k : H;
    if (h0 < 0) h0 = 0;
    for (int j = 0; j < nw; j++) {
        int w0 = (ow0 + j) * g->stride - g->pad;
        m[j] = -INFINITY;
        if (idx) idx[j] = h0 * W + (w0 < 0 ? 0 : w0); /* first in-bounds element */
    }
    for (int ih = h0; ih < h1; ih++) {
        const tb_real *row = plane + (size_t)ih * W;
        for (int kw = 0; kw < g->k; kw++) {
            /* outputs whose column ow*s - pad + kw lies inside [0, W) */
            int off = kw - g->pad;
            int lo = off < 0 ? (-off + g->stride - 1) / g->stride : 0;
            int hi = W - 1 - off >= 0 ? (W - 1 - off) / g->stride + 1 : 0;
            if (hi > Wo) hi = Wo;
            if (lo < ow0) lo = ow0;
            if (hi > ow0 + nw) hi = ow0 + nw;
            for (int ow = lo; ow < hi; ow++) {
                int iw = ow * g->stride + off;
                tb_real v = row[iw];
                int better = v > m[ow - ow0] || v != v; /* strict '>', NaN wins */
                m[ow - ow0] = better ? v : m[ow - ow0];
                if (idx) idx[ow - ow0] = better ? ih * W + iw : idx[ow - ow0];
            }
        }
    }
}

void cpu_maxpool_forward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                         const tb_tensor *y) {
    pool_check("maxpool_forward", g, x, y);
    const int H = x->h, W = x->w, Ho = y->h, Wo = y->w;
    const int planes = x->n * x->c;
    const tb_real *xd = x->data; /* [N,C,H,W] */
    tb_real *yd = y->data;       /* [N,C,Ho,Wo] */

#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int pl = 0; pl < planes; pl++) {
        const tb_real *xp = xd + (size_t)pl * H * W;
        tb_real *yp = yd + (size_t)pl * Ho * Wo;
        tb_real m[POOL_CHUNK];
        for (int oh = 0; oh < Ho; oh++) {
            for (int ow0 = 0; ow0 < Wo; ow0 += POOL_CHUNK) {
                int nw = Wo - ow0 < POOL_CHUNK ? Wo - ow0 : POOL_CHUNK;
                pool_row(xp, H, W, Wo, g, oh, ow0, nw, m, NULL);
                memcpy(yp + (size_t)oh * Wo + ow0, m, (size_t)nw * sizeof(tb_real));
            }
        }
    }
}

void cpu_maxpool_backward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                          const tb_tensor *y, const tb_tensor *dy, const tb_tensor *dx,
                          int accumulate) {
    const char *op = "maxpool_backward";
    pool_check(op, g, x, y);
    cpu_check(dy, op, "dy");
    cpu_check(dx, op, "dx");
    cpu_check_same_shape(y, dy, op, "y", "dy");
    cpu_check_same_shape(x, dx, op, "x", "dx");
    const int H = x->h, W = x->w, Ho = y->h, Wo = y->w;
    const int planes = x->n * x->c;
    const tb_real *xd = x->data;   /* [N,C,H,W] */
    const tb_real *dyd = dy->data; /* [N,C,Ho,Wo] */
    tb_real *dxd = dx->data;       /* [N,C,H,W] */

#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int pl = 0; pl < planes; pl++) {
        const tb_real *xp = xd + (size_t)pl * H * W;
        const tb_real *dyp = dyd + (size_t)pl * Ho * Wo;
        tb_real *dxp = dxd + (size_t)pl * H * W;
        tb_real m[POOL_CHUNK];
        int idx[POOL_CHUNK];
        if (!accumulate) memset(dxp, 0, (size_t)H * W * sizeof(tb_real));
        for (int oh = 0; oh < Ho; oh++) {
            for (int ow0 = 0; ow0 < Wo; ow0 += POOL_CHUNK) {
                int nw = Wo - ow0 < POOL_CHUNK ? Wo - ow0 : POOL_CHUNK;
                pool_row(xp, H, W, Wo, g, oh, ow0, nw, m, idx);
                for (int j = 0; j < nw; j++) dxp[idx[j]] += dyp[(size_t)oh * Wo + ow0 + j];
            }
        }
    }
}

void cpu_avgpool_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y) {
    const char *op = "avgpool_forward";
    cpu_check(x, op, "x");
    cpu_check(y, op, "y");
    if (y->n != x->n || y->c != x->c || y->h != 1 || y->w != 1 || x->h * x->w < 1)
        TB_FATAL("cpu %s: x [%d,%d,%d,%d] needs y [%d,%d,1,1], got [%d,%d,%d,%d]", op, x->n,
                 x->c, x->h, x->w, x->n, x->c, y->n, y->c, y->h, y->w);
    const size_t HW = (size_t)x->h * x->w;
    const int planes = x->n * x->c;
    const tb_real *xd = x->data; /* [N,C,H,W] */
    tb_real *yd = y->data;       /* [N,C,1,1] */
    const cpu_kern *k = cpu_kern_get();

#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int pl = 0; pl < planes; pl++) {
        double lanes[CPU_KERN_LANES] = {0};
        k->sum(xd + (size_t)pl * HW, HW, lanes);
        yd[pl] = (tb_real)(cpu_kern_lanes_sum(lanes) / (double)HW);
    }
}

void cpu_avgpool_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *dx,
                          int accumulate) {
    const char *op = "avgpool_backward";
    cpu_check(dy, op, "dy");
    cpu_check(dx, op, "dx");
    if (dy->n != dx->n || dy->c != dx->c || dy->h != 1 || dy->w != 1 || dx->h * dx->w < 1)
        TB_FATAL("cpu %s: dx [%d,%d,%d,%d] needs dy [%d,%d,1,1], got [%d,%d,%d,%d]", op, dx->n,
                 dx->c, dx->h, dx->w, dx->n, dx->c, dy->n, dy->c, dy->h, dy->w);
    const size_t HW = (size_t)dx->h * dx->w;
    const int planes = dx->n * dx->c;
    const tb_real *dyd = dy->data; /* [N,C,1,1] */
    tb_real *dxd = dx->data;       /* [N,C,H,W] */

#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int pl = 0; pl < planes; pl++) {
        const tb_real v = dyd[pl] / (tb_real)HW;
        tb_real *dxp = dxd + (size_t)pl * HW;
        if (accumulate) {
#pragma omp simd
            for (size_t i = 0; i < HW; i++) dxp[i] += v;
        } else {
#pragma omp simd
            for (size_t i = 0; i < HW; i++) dxp[i] = v;
        }
    }
}
