/* cuda_conv.c - convolution on cuDNN (the counterpart of cpu/cpu_conv.c).
 *
 *   forward          cudnnConvolutionForward         y  = conv(x, w)
 *   backward data    cudnnConvolutionBackwardData    dx (+)= convT(dy, w)   (beta 0 or 1)
 *   backward filter  cudnnConvolutionBackwardFilter  dw (+)= corr(x, dy)
 *
 * A plan per conv node holds the filter and convolution descriptors and one
 * entry per batch size it has run: the x/y descriptors and, per direction,
 * the algorithm chosen, its math type and workspace. The entry for the
 * largest batch is made by conv_plan, on the real buffers the graph gave it
 * (cudnnFind*AlgorithmEx times every algorithm there); an entry for a
 * smaller batch (an epoch's last step) is made on its first forward, on the
 * same buffers, when overwriting y, dy, dx and dw is harmless. Choosing:
 * the fastest measured algorithm (or cuDNN's first heuristic pick with
 * --no-autotune) that ran, fits the workspace limit, is deterministic under
 * --deterministic, and keeps the precision asked for: float32 takes only
 * FMA kernels (no TF32), tf32 allows tensor-op TF32 but never the fp16
 * down-conversion, 16-bit takes tensor-op kernels. The shared workspace
 * grows to the largest choice while planning.
 *
 * Each direction also gets a plan on cuDNN's graph (backend) API
 * (cuda_conv_graph.c; backward data one per beta, overwrite and
 * accumulate; an accumulating filter gradient, which the model never asks
 * for, runs legacy), chosen under the same rules and measured on the same
 * buffers; it runs instead of the legacy algorithm when it measured faster
 * (TB_CONV_API=auto, the default), whenever it exists (graph), or never
 * (legacy). The legacy choice is always made: it runs where the graph API
 * refused the shape, and for a call whose buffers are less aligned than
 * the graph plan assumed.
 *
 * A conv with few input channels and no input gradient (ResNet's stem) may
 * run on copies padded to 4 or 8 channels instead (TB_STEM_PAD,
 * cuda_conv_pad.c): a second plan of this kind on the padded geometry,
 * which the calls pass on to. The plan's types: cuda_conv_plan.h; its
 * description in words: cuda_conv_describe.c.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/cuda_conv_plan.h"

/* ---- descriptors --------------------------------------------------------------- */

static cudnnTensorFormat_t fmt(tb_layout l) {
    return l == TB_NCHW ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
}

void cu_conv_set_descs(const tb_conv_geom *g, tb_dtype dt, tb_layout l, int n, int h, int w,
                       cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y,
                       cudnnFilterDescriptor_t f, cudnnConvolutionDescriptor_t conv) {
    int ho = (h + 2 * g->pad - g->k) / g->stride + 1, wo = (w + 2 * g->pad - g->k) / g->stride + 1;
    cudnnDataType_t d = cu_cudnn_dtype(dt);
    if (x) TB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, fmt(l), d, n, g->cin, h, w));
    if (y) TB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, fmt(l), d, n, g->cout, ho, wo));
    /* NCHW filters are KCRS (OIHW), NHWC filters KRSC (OHWI): backend.h's weight layouts */
    if (f) TB_CUDNN_CHECK(cudnnSetFilter4dDescriptor(f, d, fmt(l), g->cout, g->cin, g->k, g->k));
    if (conv)
        TB_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, g->pad, g->pad, g->stride, g->stride,
                                                       1, 1, CUDNN_CROSS_CORRELATION,
                                                       CUDNN_DATA_FLOAT));
}

/* The math type the search starts from, and whether a result's math type
 * keeps the precision asked for. */
static cudnnMathType_t search_math(const cu_state *st, tb_dtype dt) {
    if (dt != TB_F32) return CUDNN_TENSOR_OP_MATH;
    return st->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH; /* DEFAULT allows TF32 on Ampere+ */
}

/* relaxed: for IEEE float32, also accept a result cuDNN reports as
 * DEFAULT_MATH (the second pass of cu_conv_pick, with a warning) */
static int math_ok(tb_dtype dt, int tf32, cudnnMathType_t m, int relaxed) {
    /* down-conversion to fp16: a no-op for fp16, range loss for bf16, precision loss for fp32 */
    if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return dt == TB_F16;
    if (dt == TB_F32 && !tf32) return m == CUDNN_FMA_MATH || (relaxed && m == CUDNN_DEFAULT_MATH);
    return 1;
}

int cu_conv_pick(const cu_conv_perf *r, int n, tb_dtype dt, int tf32, int deterministic,
                 size_t ws_limit, cudnnMathType_t *math, int *relaxed_out) {
    for (int relaxed = 0; relaxed < 2; relaxed++)
        for (int i = 0; i < n; i++) {
            /* cuDNN 9 reports refusals as categories with details (3002, ...):
             * only SUCCESS is a measured, runnable row */
            if (r[i].status != CUDNN_STATUS_SUCCESS) continue;
            if (r[i].memory > ws_limit) continue;
            if (deterministic && r[i].det != CUDNN_DETERMINISTIC) continue;
            if (!math_ok(dt, tf32, r[i].math, relaxed)) continue;
            /* IEEE float32 runs with FMA math whatever the row says: that is
             * the math the search ran under, and DEFAULT would allow TF32 */
            *math = dt == TB_F32 && !tf32 ? CUDNN_FMA_MATH : r[i].math;
            *relaxed_out = relaxed;
            return i;
        }
    return -1;
}

int cu_conv_pick_checked(cu_conv_perf *r, int n, tb_dtype dt, int tf32, int deterministic, size_t ws_limit,
                         cudnnMathType_t *math, int *relaxed, cu_conv_ws_fn ws, void *ctx) {
    for (;;) {
        int i = cu_conv_pick(r, n, dt, tf32, deterministic, ws_limit, math, relaxed);
        if (i < 0 || !ws) return i;
        size_t bytes = 0;
        if (ws(ctx, r[i].algo, *math, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= ws_limit) {
            if (bytes > r[i].memory) r[i].memory = bytes;
            return i;
        }
        r[i].status = CUDNN_STATUS_NOT_SUPPORTED; /* cuDNN refuses it as it would run: the next row */
    }
}

/* ---- choosing algorithms ---------------------------------------------------------------
 * The three directions differ only in their types; each perf array is
 * reduced to cu_conv_perf {algo, status, time, memory, determinism, mathType}. */
#define PERF_ROWS(dst, src, n)                                                                  \
    do {                                                                                        \
        for (int i_ = 0; i_ < (n); i_++) {                                                      \
            (dst)[i_].algo = (int)(src)[i_].algo;                                               \
            (dst)[i_].status = (src)[i_].status;                                                \
            (dst)[i_].time = (src)[i_].time;                                                    \
            (dst)[i_].memory = (src)[i_].memory;                                                \
            (dst)[i_].det = (src)[i_].determinism;                                              \
            (dst)[i_].math = (src)[i_].mathType;                                                \
        }                                                                                       \
    } while (0)

static const char *dir_name[3] = {"forward", "backward data", "backward filter"};

/* What cu_conv_pick_checked asks cuDNN: direction dir's workspace for an
 * algorithm under a math type (set on that direction's descriptor). */
typedef struct {
    cudnnHandle_t h;
    const conv_plan *p;
    const conv_entry *e;
    int dir;
    cudnnConvolutionDescriptor_t conv;
} ws_query;

static cudnnStatus_t query_ws(void *ctx, int algo, cudnnMathType_t math, size_t *bytes) {
    const ws_query *q = ctx;
    cudnnStatus_t s = cudnnSetConvolutionMathType(q->conv, math);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    switch (q->dir) {
    case 0:
        return cudnnGetConvolutionForwardWorkspaceSize(q->h, q->e->x, q->p->f, q->conv, q->e->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    case 1:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(q->h, q->p->f, q->e->y, q->conv, q->e->x,
                                                            (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    default:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(q->h, q->e->x, q->e->y, q->conv, q->p->f,
                                                              (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    }
}

/* The plan cache's entry name of direction dir. */
static void conv_key(const conv_plan *p, const conv_entry *e, int dir, char *key, size_t len) {
    cu_pc_conv_key(key, len, &p->g, p->dtype, p->layout, e->n, p->h, p->w, dir);
}

/* The plan cache's measured row for direction dir, checked as a fresh one
 * is: 1 (rows[0], *n = 1), or 0 after dropping a row that no longer passes. */
static int cached_row(cu_state *st, const conv_plan *p, const conv_entry *e, int dir, int measure, cu_conv_perf *rows,
                      int *n) {
    char key[160];
    conv_key(p, e, dir, key, sizeof key);
    if (!measure || !cu_pc_conv_row(st, key, rows)) return 0;
    const conv_choice *c = dir == 0 ? &e->fwd : dir == 1 ? &e->data : &e->filter;
    cudnnMathType_t math;
    int relaxed = 0;
    ws_query q = {st->cudnn, p, e, dir, c->conv};
    if (cu_conv_pick_checked(rows, 1, p->dtype, st->tf32, st->deterministic, st->ws_limit, &math, &relaxed, query_ws,
                             &q) == 0) {
        *n = 1;
        return 1;
    }
    cu_pc_conv_drop(st, key);
    return 0;
}

/* The first acceptable row (rows come sorted best first) whose workspace,
 * asked of cuDNN for the math type it will run with, fits: cudnnGet*_v7's
 * memory column is the heuristics' estimate, and a Find row's was measured
 * under the search's math type, while the call checks the workspace it is
 * given against cudnnGet*WorkspaceSize's answer. Measured choices go to the
 * plan cache (one found there is put back unchanged: nothing is made). */
static void pick(cu_state *st, const conv_plan *p, const conv_entry *e, int dir, cu_conv_perf *r, int n,
                 int measured, conv_choice *c) {
    static int warned;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    int relaxed = 0;
    ws_query q = {st->cudnn, p, e, dir, c->conv};
    int i = cu_conv_pick_checked(r, n, p->dtype, st->tf32, st->deterministic, st->ws_limit, &math, &relaxed,
                                 query_ws, &q);
    if (i < 0)
        tb_die("cuda conv %d->%d k%d s%d (%s %s): cuDNN offers no %s algorithm that is %s%s and "
               "fits the workspace limit of %.0f MiB; raise the limit or drop --deterministic",
               p->g.cin, p->g.cout, p->g.k, p->g.stride, tb_dtype_name(p->dtype),
               tb_layout_name(p->layout), dir_name[dir],
               p->dtype == TB_F32 && !st->tf32 ? "IEEE float32" : "usable",
               st->deterministic ? " and deterministic" : "", (double)st->ws_limit / 1048576.0);
    if (relaxed && !warned++)
        tb_warn("cuda conv: cuDNN reports no FMA-only %s algorithm for a float32 conv (%d->%d "
                "k%d); taking one marked DEFAULT_MATH and running it with FMA math",
                dir_name[dir], p->g.cin, p->g.cout, p->g.k);
    c->algo = r[i].algo;
    c->math = math;
    c->ws = r[i].memory;
    c->ms = measured ? r[i].time : -1.0f;
    TB_CUDNN_CHECK(cudnnSetConvolutionMathType(c->conv, c->math));
    char key[160];
    conv_key(p, e, dir, key, sizeof key);
    cu_pc_conv_keep(st, key, c->algo, c->math, c->ws, c->ms, r[i].det == CUDNN_DETERMINISTIC);
}

/* The graph-API plans of direction d (beta 0, and 1 for data: the model
 * accumulates data gradients where branches meet, never filter gradients,
 * graph.c; an accumulating filter call runs the legacy algorithm) on the
 * plan's buffers, kept when cu_conv_take_graph prefers them to the legacy
 * choice made before. Timing writes y, dx or dw, as Find does. */
static void choose_graph(cu_state *st, const conv_plan *p, conv_entry *e, int d, int measure, void *tws,
                         size_t tws_bytes) {
    conv_choice *c = d == 0 ? &e->fwd : d == 1 ? &e->data : &e->filter;
    for (int b = 0; b < 2; b++) {
        c->graph[b] = NULL;
        c->graph_ms[b] = -1.0f;
        c->graph_engine[b] = -1;
    }
    if (st->conv_api == TB_CUDA_CONV_LEGACY) return;
    for (int b = 0; b < (d == 1 ? 2 : 1); b++) {
        cu_cgraph_req r = {(cu_conv_dir)d, (float)b, &p->g, p->dtype, p->layout, e->n, p->h, p->w,
                           st->tf32, st->deterministic,
                           d == 1 ? p->dxb : p->xb, d == 2 ? p->dwb : p->wb, d == 0 ? p->yb : p->dyb,
                           measure && tws, tws, tws_bytes};
        cu_cgraph *g = cu_cgraph_plan(st, &r);
        if (!g) continue;
        c->graph_ms[b] = cu_cgraph_ms(g);
        c->graph_engine[b] = cu_cgraph_engine(g);
        if (cu_conv_take_graph(st->conv_api, 1, cu_cgraph_ms(g), c->ms))
            c->graph[b] = g;
        else
            cu_cgraph_free(g);
    }
}

/* Chooses the algorithms of entry e. measure: time them on the plan's
 * buffers (cudnnFind*Ex writes y, dx and dw), else cuDNN's heuristics. */
static void choose(tb_backend *be, conv_plan *p, conv_entry *e, int measure) {
    cu_state *st = cu_state_of(be);
    cudnnHandle_t h = st->cudnn;
    cu_conv_perf rows[CONV_ALGOS];
    int n = 0;
    size_t fws = 0;
    void *ws = measure ? cu_find_workspace(st, &fws) : NULL;
    /* cudnnFind*Ex overwrites y, dx and dw: whatever queued work still
     * reads them (the last steps' all-reduce and SGD read dw) ends first,
     * whichever stream cuDNN measures on */
    if (measure) TB_CUDA_CHECK(cudaStreamSynchronize(st->stream));
    cudnnMathType_t m0 = search_math(st, p->dtype);
    conv_choice *cs[3] = {&e->fwd, &e->data, &e->filter};
    for (int d = 0; d < 3; d++) TB_CUDNN_CHECK(cudnnSetConvolutionMathType(cs[d]->conv, m0));

    {
        cudnnConvolutionFwdAlgoPerf_t pr[CONV_ALGOS];
        if (!cached_row(st, p, e, 0, measure, rows, &n)) {
            if (measure)
                TB_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
                    h, e->x, p->xb, p->f, p->wb, e->fwd.conv, e->y, p->yb, CONV_ALGOS, &n, pr, ws, fws));
            else
                TB_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, e->x, p->f, e->fwd.conv, e->y,
                                                                      CONV_ALGOS, &n, pr));
            PERF_ROWS(rows, pr, n);
        }
        pick(st, p, e, 0, rows, n, measure, &e->fwd);
    }
    if (e->has_data) {
        cudnnConvolutionBwdDataAlgoPerf_t pr[CONV_ALGOS];
        if (!cached_row(st, p, e, 1, measure, rows, &n)) {
            if (measure)
                TB_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
                    h, p->f, p->wb, e->y, p->dyb, e->data.conv, e->x, p->dxb, CONV_ALGOS, &n, pr, ws, fws));
            else
                TB_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                    h, p->f, e->y, e->data.conv, e->x, CONV_ALGOS, &n, pr));
            PERF_ROWS(rows, pr, n);
        }
        pick(st, p, e, 1, rows, n, measure, &e->data);
    }
    {
        cudnnConvolutionBwdFilterAlgoPerf_t pr[CONV_ALGOS];
        if (!cached_row(st, p, e, 2, measure, rows, &n)) {
            if (measure)
                TB_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
                    h, e->x, p->xb, e->y, p->dyb, e->filter.conv, p->f, p->dwb, CONV_ALGOS, &n, pr, ws,
                    fws));
            else
                TB_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                    h, e->x, e->y, e->filter.conv, p->f, CONV_ALGOS, &n, pr));
            PERF_ROWS(rows, pr, n);
        }
        pick(st, p, e, 2, rows, n, measure, &e->filter);
    }
    size_t need = 0;
    for (int d = 0; d < 3; d++) {
        if (d == 1 && !e->has_data) continue;
        choose_graph(st, p, e, d, measure, ws, fws);
        if (cs[d]->ws > need) need = cs[d]->ws;
        for (int b = 0; b < 2; b++)
            if (cs[d]->graph[b] && cu_cgraph_ws(cs[d]->graph[b]) > need) need = cu_cgraph_ws(cs[d]->graph[b]);
    }
    cu_workspace(st, need);
}

static conv_entry *new_entry(tb_backend *be, conv_plan *p, int n, int measure) {
    cu_not_capturing(be, "preparing a convolution for a new batch size");
    if (p->ne == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 4;
        p->e = realloc(p->e, (size_t)p->cap * sizeof *p->e);
        if (!p->e) TB_FATAL("out of host memory");
    }
    conv_entry *e = &p->e[p->ne++];
    memset(e, 0, sizeof *e);
    e->n = n;
    e->has_data = p->dxb != NULL;
    TB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x));
    TB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->y));
    conv_choice *cs[3] = {&e->fwd, &e->data, &e->filter};
    for (int d = 0; d < 3; d++) {
        TB_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&cs[d]->conv));
        cu_conv_set_descs(&p->g, p->dtype, p->layout, n, p->h, p->w, NULL, NULL, NULL, cs[d]->conv);
    }
    cu_conv_set_descs(&p->g, p->dtype, p->layout, n, p->h, p->w, e->x, e->y, NULL, NULL);
    choose(be, p, e, measure);
    return e;
}

/* The entry for batch n: made now when missing and measure_ok (in forward),
 * from heuristics otherwise (a backward pass at a batch size that never ran
 * forward must not overwrite gradients it is accumulating into). */
static conv_entry *entry_for(tb_backend *be, conv_plan *p, int n, int measure_ok) {
    for (int i = 0; i < p->ne; i++)
        if (p->e[i].n == n) return &p->e[i];
    if (n > p->max_n)
        TB_FATAL("cuda conv: batch %d is larger than the %d this plan was made for", n, p->max_n);
    return new_entry(be, p, n, measure_ok && cu_state_of(be)->autotune);
}

/* ---- the table's entries ----------------------------------------------------------------- */

void *cu_conv_plan(tb_backend *be, const tb_conv_geom *g, const tb_tensor *x,
                   const tb_tensor *w, const tb_tensor *y, const tb_tensor *dx,
                   const tb_tensor *dw, const tb_tensor *dy) {
    const char *op = "conv_plan";
    cu_check(x, op, "x");
    cu_check(w, op, "w");
    cu_check(y, op, "y");
    cu_check(dw, op, "dw");
    cu_check(dy, op, "dy");
    if (dx) cu_check_same(x, dx, op, "x", "dx");
    cu_check_same(y, dy, op, "y", "dy");
    if (w->dtype != x->dtype || w->layout != x->layout || dw->dtype != x->dtype ||
        dw->layout != x->layout || y->dtype != x->dtype || y->layout != x->layout)
        TB_FATAL("cuda %s: x, w, dw and y must share dtype and layout", op);
    /* the legacy API indexes tensors with int (PyTorch splits the batch beyond it) */
    if (tb_tensor_numel(x) > (size_t)INT_MAX || tb_tensor_numel(y) > (size_t)INT_MAX)
        tb_die("cuda conv %d->%d k%d: batch %d gives tensors of more than 2^31-1 elements, "
               "beyond cuDNN's 32-bit indexing; use a smaller --batch-size",
               g->cin, g->cout, g->k, x->n);
    conv_plan *p = calloc(1, sizeof *p);
    if (!p) TB_FATAL("out of host memory");
    p->g = *g;
    p->dtype = x->dtype;
    p->layout = x->layout;
    p->h = x->h;
    p->w = x->w;
    p->max_n = x->n;
    p->xb = x->data;
    p->wb = w->data;
    p->yb = y->data;
    p->dxb = dx ? dx->data : NULL;
    p->dwb = dw->data;
    p->dyb = dy->data;
    TB_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->f));
    cu_conv_set_descs(g, p->dtype, p->layout, x->n, x->h, x->w, NULL, NULL, p->f, NULL);
    new_entry(be, p, x->n, cu_state_of(be)->autotune);
    if (!dx) p->pad = cu_conv_pad_plan(be, g, x, w, y, dw, dy, cu_conv_plan_ms(p));
    return p;
}

float cu_conv_plan_ms(const void *plan) {
    const conv_plan *p = plan;
    const conv_entry *e = &p->e[0];
    float t[3] = {cu_conv_choice_ms(&e->fwd), e->has_data ? cu_conv_choice_ms(&e->data) : 0.0f,
                  cu_conv_choice_ms(&e->filter)};
    if (t[0] < 0 || t[1] < 0 || t[2] < 0) return -1.0f;
    return t[0] + t[1] + t[2];
}

void cu_conv_plan_free(tb_backend *be, void *plan) {
    conv_plan *p = plan;
    if (!p) return;
    cu_conv_pad_free(be, p->pad);
    for (int i = 0; i < p->ne; i++) {
        TB_CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->e[i].x));
        TB_CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->e[i].y));
        TB_CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->e[i].fwd.conv));
        TB_CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->e[i].data.conv));
        TB_CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->e[i].filter.conv));
        conv_choice *cs[3] = {&p->e[i].fwd, &p->e[i].data, &p->e[i].filter};
        for (int d = 0; d < 3; d++)
            for (int b = 0; b < 2; b++) cu_cgraph_free(cs[d]->graph[b]);
    }
    TB_CUDNN_CHECK(cudnnDestroyFilterDescriptor(p->f));
    free(p->e);
    free(p);
}

/* Checks a call's tensors against the plan and returns the entry for its batch. */
static conv_entry *call_entry(tb_backend *be, conv_plan *p, const char *op, const tb_conv_geom *g,
                              const tb_tensor *x, const tb_tensor *w, const tb_tensor *y,
                              int measure_ok) {
    cu_check(x, op, "x");
    cu_check(w, op, "w");
    cu_check(y, op, "y");
    if (!p) TB_FATAL("cuda %s: no plan (conv_plan was not called for this node)", op);
    int ho = (p->h + 2 * g->pad - g->k) / g->stride + 1, wo = (p->w + 2 * g->pad - g->k) / g->stride + 1;
    if (memcmp(g, &p->g, sizeof *g) != 0 || x->c != g->cin || x->h != p->h || x->w != p->w ||
        y->c != g->cout || y->h != ho || y->w != wo || y->n != x->n || w->n != g->cout ||
        w->c != g->cin || w->h != g->k || w->w != g->k)
        TB_FATAL("cuda %s: x [%d,%d,%d,%d], w [%d,%d,%d,%d], y [%d,%d,%d,%d] do not fit the plan "
                 "(conv %d->%d k=%d stride=%d pad=%d at %dx%d)",
                 op, x->n, x->c, x->h, x->w, w->n, w->c, w->h, w->w, y->n, y->c, y->h, y->w,
                 p->g.cin, p->g.cout, p->g.k, p->g.stride, p->g.pad, p->h, p->w);
    if (x->dtype != p->dtype || x->layout != p->layout || w->dtype != p->dtype ||
        w->layout != p->layout || y->dtype != p->dtype || y->layout != p->layout)
        TB_FATAL("cuda %s: tensors are not %s %s as planned", op, tb_dtype_name(p->dtype),
                 tb_layout_name(p->layout));
    cu_end_planning(cu_state_of(be));
    return entry_for(be, p, x->n, measure_ok);
}

void cu_conv_forward(tb_backend *be, void *plan, const tb_conv_geom *g, const tb_tensor *x,
                     const tb_tensor *w, const tb_tensor *y) {
    conv_plan *p = plan;
    if (p && p->pad) {
        cu_conv_pad_forward(be, p->pad, g, x, w, y);
        return;
    }
    conv_entry *e = call_entry(be, p, "conv_forward", g, x, w, y, 1);
    cu_state *st = cu_state_of(be);
    if (e->fwd.graph[0] && cu_cgraph_run(st, e->fwd.graph[0], x->data, w->data, y->data)) return;
    const float one = 1.0f, zero = 0.0f;
    TB_CUDNN_CHECK(cudnnConvolutionForward(st->cudnn, &one, e->x, x->data, p->f, w->data,
                                           e->fwd.conv, (cudnnConvolutionFwdAlgo_t)e->fwd.algo,
                                           st->ws, st->ws_bytes, &zero, e->y, y->data));
}

void cu_conv_backward_data(tb_backend *be, void *plan, const tb_conv_geom *g,
                           const tb_tensor *dy, const tb_tensor *w, const tb_tensor *dx,
                           int accumulate) {
    conv_plan *p = plan;
    conv_entry *e = call_entry(be, p, "conv_backward_data", g, dx, w, dy, 0);
    if (!e->has_data)
        TB_FATAL("cuda conv_backward_data: the plan was made without an input gradient");
    cu_state *st = cu_state_of(be);
    cu_cgraph *gp = e->data.graph[accumulate ? 1 : 0];
    if (gp && cu_cgraph_run(st, gp, dx->data, w->data, dy->data)) return;
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    TB_CUDNN_CHECK(cudnnConvolutionBackwardData(
        st->cudnn, &one, p->f, w->data, e->y, dy->data, e->data.conv,
        (cudnnConvolutionBwdDataAlgo_t)e->data.algo, st->ws, st->ws_bytes, &beta, e->x, dx->data));
}

void cu_conv_backward_filter(tb_backend *be, void *plan, const tb_conv_geom *g,
                             const tb_tensor *x, const tb_tensor *dy, const tb_tensor *dw,
                             int accumulate) {
    conv_plan *p = plan;
    if (p && p->pad) {
        cu_conv_pad_backward_filter(be, p->pad, g, x, dy, dw, accumulate);
        return;
    }
    conv_entry *e = call_entry(be, p, "conv_backward_filter", g, x, dw, dy, 0);
    cu_state *st = cu_state_of(be);
    cu_cgraph *gp = e->filter.graph[accumulate ? 1 : 0];
    if (gp && cu_cgraph_run(st, gp, x->data, dw->data, dy->data)) return;
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    TB_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        st->cudnn, &one, e->x, x->data, e->y, dy->data, e->filter.conv,
        (cudnnConvolutionBwdFilterAlgo_t)e->filter.algo, st->ws, st->ws_bytes, &beta, p->f,
        dw->data));
}
