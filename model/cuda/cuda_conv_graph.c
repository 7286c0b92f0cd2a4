/* cuda_conv_graph.c - one convolution direction on cuDNN's graph (backend)
 * API: descriptors, engine heuristics, timing, the plan, execution.
 *
 * Design. cuda_conv.c keeps, per conv node and batch size, the legacy
 * algorithm of each direction (always chosen: it is the fallback) and asks
 * this file for a graph-API plan of the same direction:
 *   forward          y  = conv(x, w)                 beta 0
 *   backward data    dx = convT(dy, w) + beta dx     beta 0 and 1
 *   backward filter  dw = corr(x, dy) + beta dw      beta 0 and 1
 * beta is an attribute of the operation, so accumulating is its own plan.
 * Every plan sees the same three tensors by role, with fixed unique ids:
 * X (x or dx) = 1, W (w or dw) = 2, Y (y or dy) = 3; dimensions in N,C,H,W
 * order (filters K,C,R,S) and the strides of the layout (NCHW, or NHWC with
 * KRSC filters), byte alignment = the buffer's, capped at 16.
 *
 * Planning (cu_cgraph_plan, never inside a CUDA graph capture): one
 * operation graph of one CONVOLUTION_* node (compute type float), engine
 * configs from heuristics mode A then FALLBACK, in that order. A config is
 * skipped when its engine's notes break the precision asked for
 * (cu_cgraph_reject: the same rules as the legacy chooser, and no engine
 * compiled at run time), when its plan
 * does not finalize, or when its workspace passes the limit. With
 * measuring (autotune, on buffers it may overwrite) the first
 * CG_CANDIDATES plans that pass are run once and then timed over CG_REPS
 * runs with CUDA events on the compute stream; the fastest is kept.
 * Without, the first that passes is kept. Any error while planning returns
 * NULL: the direction stays on its legacy algorithm, and the first time
 * each reason occurs one "# cuda conv:" line says so.
 *
 * Execution (cu_cgraph_run): cudnnBackendExecute with a variant pack of the
 * three pointers and the shared workspace, remade only when a pointer
 * changes; capturable like the legacy calls (it only queues kernels on the
 * handle's stream). A pointer less aligned than the plan assumed returns 0
 * (the caller runs the legacy algorithm); a failing execute is fatal.
 *
 * Every descriptor is created and destroyed through cuda_engine.c's
 * cu_be_create()/cu_be_destroy(), which count them: cu_cgraph_live() is
 * the balance (tests). The heuristics, the engines' notes, plans, packs
 * and timing are cuda_engine.c's, shared with the fused graphs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/cuda_engine.h"
#include "model/cuda/cuda_internal.h"
#include "model/plan_cache.h"

#define CG_CANDIDATES 8 /* plans finalized and timed per direction */
#define CG_HEUR_MAX CU_BE_HEUR_MAX /* engine configs taken from each heuristics mode */
#define CG_REPS 3       /* timed runs per plan, after one untimed */

enum { UID_X = 1, UID_W = 2, UID_Y = 3 };

struct cu_cgraph {
    cudnnBackendDescriptor_t t[3], conv, op, graph, cfg, plan, pack;
    const void *pack_ptr[3]; /* the pointers the variant pack holds */
    void *pack_ws;
    uint32_t align[3];
    size_t ws;
    float ms; /* measured, or -1 */
    long long engine;
    char knobs[160];
};

/* Descriptors are counted by cuda_engine.c (cu_be_live). */
#define create cu_be_create
#define destroy cu_be_destroy

long cu_cgraph_live(void) { return cu_be_live(); }

/* ---- pure parts (tests/test_cuda_host.c) --------------------------------------------- */

static void set_tensor(cu_cg_tensor *t, tb_layout l, int64_t n, int64_t c, int64_t h, int64_t w) {
    t->dim[0] = n, t->dim[1] = c, t->dim[2] = h, t->dim[3] = w;
    if (l == TB_NCHW) {
        t->stride[0] = c * h * w, t->stride[1] = h * w, t->stride[2] = w, t->stride[3] = 1;
    } else {
        t->stride[0] = h * w * c, t->stride[1] = 1, t->stride[2] = w * c, t->stride[3] = c;
    }
}

void cu_cgraph_tensors(const tb_conv_geom *g, tb_layout l, int n, int h, int w, cu_cg_tensor t[3]) {
    int ho = (h + 2 * g->pad - g->k) / g->stride + 1, wo = (w + 2 * g->pad - g->k) / g->stride + 1;
    set_tensor(&t[0], l, n, g->cin, h, w);
    set_tensor(&t[1], l, g->cout, g->cin, g->k, g->k); /* KCRS; NHWC's strides make it KRSC */
    set_tensor(&t[2], l, n, g->cout, ho, wo);
}

const char *cu_cgraph_reject(const int *num, int nnum, const int *beh, int nbeh, tb_dtype dt, int tf32,
                             int deterministic) {
    for (int i = 0; i < nnum; i++) {
        if (num[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC && deterministic) return "non-deterministic";
        /* fp16 inputs: a no-op, as TENSOR_OP_MATH_ALLOW_CONVERSION in the legacy chooser */
        if (num[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS && dt != TB_F16)
            return "down-converts its inputs";
        /* float32 data on tensor cores is TF32 */
        if (num[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && dt == TB_F32 && !tf32)
            return "TF32 tensor cores on IEEE float32";
        /* the compute type asked for is float */
        if (num[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) return "reduced-precision reduction";
    }
    for (int i = 0; i < nbeh; i++) {
        if (beh[i] == CUDNN_BEHAVIOR_NOTE_REQUIRES_FILTER_INT8x32_REORDER ||
            beh[i] == CUDNN_BEHAVIOR_NOTE_REQUIRES_BIAS_INT8x32_REORDER)
            return "needs an int8x32 reorder";
        /* compiled by NVRTC when its plan is finalized: seconds per shape at
         * start-up, for 53 convs x 3 directions x batch sizes; a plain conv
         * has precompiled engines (PyTorch's sm90 kernels are among them) */
        if (beh[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return "compiled at run time (start-up cost)";
    }
    return NULL;
}

int cu_conv_take_graph(int api, int have_graph, float graph_ms, float legacy_ms) {
    if (!have_graph || api == TB_CUDA_CONV_LEGACY) return 0;
    if (api == TB_CUDA_CONV_GRAPH) return 1;
    if (graph_ms < 0 || legacy_ms < 0) return 1; /* unmeasured: the graph API's heuristics */
    return graph_ms < legacy_ms;
}

/* ---- building ------------------------------------------------------------------------- */

/* The tensors, the convolution and the operation of request r into c
 * (t, conv, op); needs no device. */
static cudnnStatus_t make_op(cu_cgraph *c, const cu_cgraph_req *r, cu_err *err) {
    cu_cg_tensor t[3];
    cu_cgraph_tensors(r->g, r->layout, r->n, r->h, r->w, t);
    cudnnDataType_t dt = cu_cudnn_dtype(r->dtype);
    for (int i = 0; i < 3; i++) {
        cudnnStatus_t s =
            cu_be_tensor(&c->t[i], t[i].dim, t[i].stride, dt, UID_X + i, (int64_t)c->align[i], 0, 0, err);
        if (s != CUDNN_STATUS_SUCCESS) return s;
    }
    cudnnStatus_t s = cu_be_conv_desc(r->g->stride, r->g->pad, &c->conv, err);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cu_be_conv_op((int)r->dir, r->beta, c->conv, c->t[0], c->t[1], c->t[2], &c->op, err);
    return s;
}

static void free_parts(cu_cgraph *c) {
    destroy(&c->pack);
    destroy(&c->plan);
    destroy(&c->cfg);
    destroy(&c->graph);
    destroy(&c->op);
    destroy(&c->conv);
    for (int i = 2; i >= 0; i--) destroy(&c->t[i]);
}

void cu_cgraph_free(cu_cgraph *c) {
    if (!c) return;
    free_parts(c);
    free(c);
}

static uint32_t align16(const void *p) {
    uint32_t a = cu_ptr_align(p);
    return a > 16 ? 16 : a;
}

int cu_cgraph_check_op(const cu_cgraph_req *r, char *why, size_t len) {
    cu_cgraph c;
    memset(&c, 0, sizeof c);
    cu_err err = {NULL, CUDNN_STATUS_SUCCESS};
    const void *p[3] = {r->bx, r->bw, r->by};
    for (int i = 0; i < 3; i++) c.align[i] = align16(p[i]);
    cudnnStatus_t s = make_op(&c, r, &err);
    if (s != CUDNN_STATUS_SUCCESS && why)
        snprintf(why, len, "%s: %s (%d)", err.why, cudnnGetErrorString(err.s), (int)err.s);
    free_parts(&c);
    return s == CUDNN_STATUS_SUCCESS;
}

/* ---- heuristics, notes, plans ------------------------------------------------------------ */

static void knobs_of(cu_cgraph *c) { cu_be_knobs(c->cfg, c->knobs, sizeof c->knobs); }

static cudnnStatus_t make_pack(cudnnBackendDescriptor_t *pack, const void *const p[3], void *ws) {
    int64_t uids[3] = {UID_X, UID_W, UID_Y};
    void *ptrs[3] = {(void *)p[0], (void *)p[1], (void *)p[2]};
    return cu_be_make_pack(pack, 3, uids, ptrs, ws);
}

/* The first time a reason occurs: one line. */
static void say(const cu_cgraph_req *r, const char *why, cudnnStatus_t s) {
    static const char *said[32];
    static int nsaid;
    for (int i = 0; i < nsaid; i++)
        if (said[i] == why) return;
    if (nsaid < 32) said[nsaid++] = why;
    static const char *dir[3] = {"forward", "backward data", "backward filter"};
    tb_info("# cuda conv: graph API: %s (%s, %d) for conv %d->%d k%d s%d %s %s %s n=%d; such directions run "
            "the legacy algorithm",
            why, cudnnGetErrorString(s), (int)s, r->g->cin, r->g->cout, r->g->k, r->g->stride,
            tb_dtype_name(r->dtype), tb_layout_name(r->layout), dir[r->dir], r->n);
}

/* ---- the plan cache (model/plan_cache.h): engine, knobs, workspace, time ------------------------ */

static void cache_key(const cu_cgraph_req *r, const cu_cgraph *c, char *key, size_t len) {
    static const char *dir[3] = {"fwd", "data", "filter"};
    snprintf(key, len, "cgraph %s b%g %d->%d k%d s%d p%d %s %s n%d %dx%d a%u,%u,%u m%d", dir[r->dir], (double)r->beta,
             r->g->cin, r->g->cout, r->g->k, r->g->stride, r->g->pad, tb_dtype_name(r->dtype),
             tb_layout_name(r->layout), r->n, r->h, r->w, c->align[0], c->align[1], c->align[2], r->measure != 0);
}

/* The cached engine of r rebuilt on c's graph and checked like a fresh one:
 * 1, or 0 (nothing cached; or it no longer builds: dropped, one line). */
static int from_cache(cu_state *st, cu_cgraph *c, const cu_cgraph_req *r) {
    tb_plan_cache *pc = cu_plan_cache(st);
    char key[200], knobs[160] = "";
    cache_key(r, c, key, sizeof key);
    const char *v = pc ? tb_pc_get(pc, key) : NULL;
    long long engine = -1, idx = -1;
    size_t ws = 0;
    float ms = -1;
    if (!v) return 0;
    cudnnStatus_t s = CUDNN_STATUS_BAD_PARAM;
    if (sscanf(v, "engine %lld knobs %159s ws %zu ms %f", &engine, knobs, &ws, &ms) == 4) {
        if (strcmp(knobs, "-") == 0) knobs[0] = '\0';
        s = cu_be_cfg_from(c->graph, engine, knobs, &c->cfg);
        if (s == CUDNN_STATUS_SUCCESS &&
            cu_be_engine_check(c->cfg, r->dtype, r->tf32, r->deterministic, 0, &idx, NULL, NULL))
            s = CUDNN_STATUS_NOT_SUPPORTED; /* its notes no longer pass */
        if (s == CUDNN_STATUS_SUCCESS) s = cu_be_make_plan(st->cudnn, c->cfg, &c->plan, &c->ws);
    }
    /* the search's own workspace bounds (cu_be_search): a cached engine a fresh search would refuse is planned again */
    if (s == CUDNN_STATUS_SUCCESS && (c->ws > st->ws_limit || (r->measure && c->ws > r->tws_bytes)))
        s = CUDNN_STATUS_NOT_SUPPORTED;
    if (s != CUDNN_STATUS_SUCCESS) {
        destroy(&c->plan);
        destroy(&c->cfg);
        tb_pc_drop(pc, key);
        tb_info("# plan cache: %s: the cached engine %lld no longer builds here (%s); planning it again", key, engine,
                cudnnGetErrorString(s));
        return 0;
    }
    c->engine = engine, c->ms = ms;
    knobs_of(c);
    return 1;
}

static void to_cache(cu_state *st, const cu_cgraph *c, const cu_cgraph_req *r) {
    tb_plan_cache *pc = cu_plan_cache(st);
    if (!pc || strcmp(c->knobs, "?") == 0) return; /* knobs unread or too long to store (cu_be_knobs) */
    char key[200], v[256];
    cache_key(r, c, key, sizeof key);
    snprintf(v, sizeof v, "engine %lld knobs %s ws %zu ms %.4f", c->engine, c->knobs[0] ? c->knobs : "-", c->ws,
             (double)c->ms);
    tb_pc_put(pc, key, v);
}

cu_cgraph *cu_cgraph_plan(cu_state *st, const cu_cgraph_req *r) {
    cu_cgraph *c = calloc(1, sizeof *c);
    if (!c) TB_FATAL("out of host memory");
    c->ms = -1.0f;
    c->engine = -1;
    cu_err err = {NULL, CUDNN_STATUS_SUCCESS};
    const void *p[3] = {r->bx, r->bw, r->by};
    for (int i = 0; i < 3; i++) c->align[i] = align16(p[i]);
    if (make_op(c, r, &err) != CUDNN_STATUS_SUCCESS) goto fail;
    if (cu_be_op_graph(st->cudnn, &c->op, 1, &c->graph, &err) != CUDNN_STATUS_SUCCESS) goto fail;
    if (from_cache(st, c, r)) return c;
    int64_t uids[3] = {UID_X, UID_W, UID_Y};
    void *ptrs[3] = {(void *)p[0], (void *)p[1], (void *)p[2]};
    cu_be_search_req q = {r->dtype, r->tf32, r->deterministic, 0, st->ws_limit, CG_HEUR_MAX, CG_CANDIDATES, CG_REPS,
                          r->measure, 3, uids, ptrs, r->tws, r->tws_bytes, 0};
    cu_be_pick pick;
    cu_be_search(st->cudnn, st->stream, c->graph, &q, &pick, &err);
    if (!pick.plan) goto fail;
    c->plan = pick.plan, c->cfg = pick.cfg, c->ws = pick.ws, c->ms = pick.ms, c->engine = pick.engine;
    knobs_of(c);
    to_cache(st, c, r);
    return c;
fail:
    say(r, err.why, err.s);
    cu_cgraph_free(c);
    return NULL;
}

/* ---- execution ------------------------------------------------------------------------------- */

int cu_cgraph_run(cu_state *st, cu_cgraph *c, const void *x, const void *w, const void *y) {
    const void *p[3] = {x, w, y};
    for (int i = 0; i < 3; i++)
        if (cu_ptr_align(p[i]) < c->align[i]) {
            static int said;
            if (!said++)
                tb_info("# cuda conv: graph API: a buffer is less aligned than its plan assumed (%u < %u bytes); "
                        "such calls run the legacy algorithm",
                        cu_ptr_align(p[i]), c->align[i]);
            return 0;
        }
    if (c->ws > st->ws_bytes)
        TB_FATAL("cuda conv: the workspace (%zu bytes) is smaller than a graph-API plan's %zu", st->ws_bytes,
                 c->ws);
    if (!c->pack || memcmp(p, c->pack_ptr, sizeof p) != 0 || c->pack_ws != st->ws) {
        destroy(&c->pack);
        TB_CUDNN_CHECK(make_pack(&c->pack, p, st->ws));
        memcpy(c->pack_ptr, p, sizeof p);
        c->pack_ws = st->ws;
    }
    TB_CUDNN_CHECK(cudnnBackendExecute(st->cudnn, c->plan, c->pack));
    return 1;
}

float cu_cgraph_ms(const cu_cgraph *c) { return c->ms; }
size_t cu_cgraph_ws(const cu_cgraph *c) { return c->ws; }
long long cu_cgraph_engine(const cu_cgraph *c) { return c->engine; }

int cu_cgraph_describe(const cu_cgraph *c, char *buf, size_t len) {
    if (c->ms >= 0)
        return snprintf(buf, len, "graph-api engine %lld [%s] (%.1f MiB, %.3f ms)", c->engine, c->knobs,
                        (double)c->ws / 1048576.0, (double)c->ms);
    return snprintf(buf, len, "graph-api engine %lld [%s] (%.1f MiB, heuristic)", c->engine, c->knobs,
                    (double)c->ws / 1048576.0);
}
