/* fused_ops.c - the backend table's fused convolution + BatchNorm ops on the
 * GPU (the counterpart of cpu/cpu_fused.c; backend.h "fused convolution +
 * BatchNorm"; the graphs: model/fused_desc.h).
 *
 * A plan per conv node holds one entry per batch size (the largest made by
 * fconv_plan on the real buffers, smaller ones on their first forward),
 * each with the shared plans (fused_plan.c) of up to four graphs:
 *   CONV_STATS  [relu(x*s+b)] -> conv fprop -> y, GEN_STATS -> sum, sqsum
 *   WGRAD_PRO   relu(x*s+b) -> conv wgrad with dy -> dw
 *   DGRAD_DBN   conv dgrad -> dReLU (mask from bn(x)) -> dr, BN_BWD_WEIGHTS
 *               -> dgamma, dbeta (the coefficients it also writes are not
 *               read: bn_input_grad's kernel derives dx from dgamma and
 *               dbeta itself, one convention less to trust)
 *   FINALIZE    BN_FINALIZE_STATISTICS, checked once against the own kernel
 *               on synthetic sums when planned (a different convention, say
 *               the biased variance in the running update, moves the node to
 *               the own kernel with one line)
 * The prologue graphs try the fd_variant list in order (float or 16-bit scale and bias; float or 16-bit
 * intermediates): the first that plans is kept, and a 16-bit scale/bias is rounded from bn_finalize's float one
 * before each run. fconv_plan reports what planned (got); the graph moves nodes down where something is missing
 * (model/graph_fused.c). A graph that a smaller batch lacks runs as the unfused ops instead (the "composition":
 * the prologue materialised into xp by the apply kernel, the node's conv_plan, the own statistics and BN
 * weight-gradient kernels), so every call has a path; the first time each kind of graph is missing one "# cuda
 * fused:" line names it and cuDNN's reason. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/fused_cuda.h"

typedef struct {
    int n;
    cu_fgraph *g[FD_G_KINDS]; /* NULL: the composition runs that part */
    int variant[FD_G_KINDS];
    cu_fpack pk[FD_G_KINDS];
    int fin_tried;
    double fin_momentum, fin_eps; /* what the finalize graph was planned with (by value in it) */
    int pad4; /* CONV_STATS reads x and w padded from 3 to 4 channels */
} fentry;

typedef struct {
    tb_conv_geom g;
    tb_dtype dt;
    tb_layout l;
    int h, w, max_n, pro;
    unsigned got;
    void *conv_plan;
    void *bufs[FD_R_COUNT]; /* the largest batch's buffers by role (timing other batch sizes) */
    tb_tensor xp;           /* where the composition writes pro(x) */
    void *sb_io;            /* [2][cin] the prologue's scale and bias in the activation dtype */
    float *scratch;         /* [2][cout] finalize's next running stats, [3][cin] dgrad's coefficients */
    int fin_own;            /* the finalize graph disagreed with the own kernel: never use it */
    void *xpad, *wpad;      /* the stem's input and filter padded to 4 channels (pad4 entries) */
    fentry *e;
    int ne, cap;
} fplan;

/* ---- one line the first time each kind of graph is missing ------------------------------------ */

static void say_missing(const char *label, fd_kind k, tb_dtype dt, const cu_err *err) {
    static unsigned said; /* bit (kind * 4 + dtype) */
    unsigned bit = 1u << (k * 4 + (int)dt);
    if (said & bit) return;
    said |= bit;
    tb_info("# cuda fused: no engine for %s: %s (%s); %s", label, err->why ? err->why : "no plan",
            cudnnGetErrorString(err->s),
            k == FD_G_FINALIZE ? "BN finalize runs on the own kernel"
                               : "such nodes run unfused (--fuse bn), or as the unfused ops at that batch size");
}

/* ---- planning ------------------------------------------------------------------------------------ */

static cu_fk_shape shape_of(const tb_tensor *t) {
    cu_fk_shape s = {t->dtype, t->layout, t->n, t->c, t->h, t->w};
    return s;
}

static fd_conv_problem problem(const fplan *p, int n, int prologue) {
    fd_conv_problem q = {p->g, p->dt, p->l, n, p->h, p->w, prologue};
    return q;
}

static int pad4_ok(const fplan *p) { return p->g.cin == 3 && !p->pro && p->l == TB_NHWC && p->dt != TB_F32; }

/* Graph kind k of entry e: the first variant that plans (prologue graphs),
 * measured (or run once) on the largest batch's buffers as how says. */
static void plan_kind(cu_state *st, fplan *p, fentry *e, fd_kind k, const cu_fgraph_req *how) {
    if (st->fused_force & (1u << k)) return;
    /* {io, ...} variants are {float, float} again when io is float32 */
    int variants = p->dt != TB_F32 && (k == FD_G_WGRAD_PRO || (k == FD_G_CONV_STATS && p->pro)) ? FD_VARIANTS : 1;
    cu_err first = {NULL, CUDNN_STATUS_SUCCESS};
    char label[128] = "", why[192];
    for (int v = 0; v < variants; v++) {
        fd_graph d;
        fd_conv_problem q = problem(p, e->n, p->pro);
        int rc = k == FD_G_CONV_STATS  ? fd_build_conv_stats(&d, &q, fd_variant_nth(v), why, sizeof why)
                 : k == FD_G_WGRAD_PRO ? fd_build_wgrad_pro(&d, &q, fd_variant_nth(v), why, sizeof why)
                                       : fd_build_dgrad_dbn(&d, &q, why, sizeof why);
        if (rc == 0 && fd_check(&d, why, sizeof why) != 0) rc = -1;
        if (rc != 0) TB_FATAL("cuda fused: a graph description failed its checks: %s", why);
        void *bufs[FD_R_COUNT];
        memcpy(bufs, p->bufs, sizeof bufs);
        if (v > 0) bufs[FD_R_SCALE] = p->sb_io, bufs[FD_R_BIAS] = (char *)p->sb_io + p->g.cin * tb_dtype_size(p->dt);
        cu_fgraph_req r = *how;
        r.desc = &d, r.ptr = bufs;
        cu_err err = {NULL, CUDNN_STATUS_SUCCESS};
        e->g[k] = cu_fgraph_get(st, &r, &err);
        if (e->g[k]) {
            e->variant[k] = v;
            return;
        }
        if (!first.why) first = err, snprintf(label, sizeof label, "%s", d.label);
    }
    if (!(k == FD_G_CONV_STATS && pad4_ok(p))) say_missing(label, k, p->dt, &first); /* the stem tries 4 channels */
}

/* The stem (3 input channels, no prologue, NHWC, 16-bit): its conv + statistics on copies padded to 4
 * channels, as MLPerf pads its input, when the 3-channel graph does not plan or measures slower. */
static void plan_pad4(cu_state *st, fplan *p, fentry *e, const cu_fgraph_req *how) {
    if (e->g[FD_G_CONV_STATS] && !how->measure) return; /* g3 planned, nothing to time g4 against */
    size_t es = tb_dtype_size(p->dt);
    size_t xb = (size_t)p->max_n * 4 * p->h * p->w * es, wb = (size_t)p->g.cout * 4 * p->g.k * p->g.k * es;
    if (!p->xpad) p->xpad = cu_malloc(st, xb, "the stem's 4-channel input");
    if (!p->wpad) p->wpad = cu_malloc(st, wb, "the stem's 4-channel filter");
    /* the real x (its n) and w padded into them: g4 is measured on the values g3 was (a zero filter draws
     * less power and may clock higher), and a forward pads them again before each run */
    cu_pad_channels(st->stream, p->dt, (size_t)e->n * p->h * p->w, 3, 4, p->bufs[FD_R_X], p->xpad, 0.0f);
    cu_pad_channels(st->stream, p->dt, (size_t)p->g.cout * p->g.k * p->g.k, 3, 4, p->bufs[FD_R_W], p->wpad, 0.0f);
    fd_graph d;
    fd_conv_problem q = problem(p, e->n, 0);
    char why[192];
    q.g.cin = 4;
    if (fd_build_conv_stats(&d, &q, fd_variant_nth(0), why, sizeof why) != 0 || fd_check(&d, why, sizeof why) != 0)
        TB_FATAL("cuda fused: a graph description failed its checks: %s", why);
    void *bufs[FD_R_COUNT];
    memcpy(bufs, p->bufs, sizeof bufs);
    bufs[FD_R_X] = p->xpad, bufs[FD_R_W] = p->wpad;
    cu_fgraph_req r = *how;
    r.desc = &d, r.ptr = bufs;
    cu_err err = {NULL, CUDNN_STATUS_SUCCESS};
    cu_fgraph *g4 = cu_fgraph_get(st, &r, &err), *g3 = e->g[FD_G_CONV_STATS];
    if (!g4) {
        if (!g3) say_missing(d.label, FD_G_CONV_STATS, p->dt, &err);
        return;
    }
    const int timed = how->measure && g3 && cu_fgraph_ms(g4) >= 0 && cu_fgraph_ms(g3) >= 0; /* + a forward's pads */
    const float pads = timed ? cu_pad_xw_ms(st->stream, p->dt, (size_t)e->n * p->h * p->w,
                                            (size_t)p->g.cout * p->g.k * p->g.k, 3, 4, p->bufs[FD_R_X], p->xpad,
                                            p->bufs[FD_R_W], p->wpad) : 0.0f;
    if (g3 && !(timed && cu_fgraph_ms(g4) + pads < cu_fgraph_ms(g3))) {
        cu_fgraph_put(st, g4); /* the 3-channel graph runs (unmeasured: no reason to pad) */
        return;
    }
    cu_fgraph_put(st, g3);
    e->g[FD_G_CONV_STATS] = g4;
    e->pad4 = 1;
    static int said;
    if (!said++) tb_info("# cuda fused: the stem's conv + statistics reads its input padded from 3 to 4 channels (%s)",
                         g3 ? "measured faster, its pads included" : "no engine for 3");
}

/* The finalize graph g against the own kernel on synthetic sums: -1 when it
 * agrees, the index into what[] of the first result that differs, or 6 when
 * g could not run (why says how). */
static int finalize_check(cu_state *st, cu_fgraph *g, const tb_bn_finalize_args *fa, char *why, size_t len) {
    /* 22 [C] vectors of synthetic inputs and both results, each at a
     * 16-byte boundary (P floats apart) as the graph's buffers were planned */
    int C = fa->C, P = (C + 3) & ~3;
    float *h = calloc((size_t)22 * P, sizeof *h),
          *dev = cu_malloc(st, (size_t)22 * P * sizeof *dev, "the finalize check");
    if (!h) TB_FATAL("out of host memory");
    for (int c = 0; c < C; c++) {
        double mean = 0.5 + 0.01 * (c % 97) - 0.3 * (c % 3), var = 0.2 + 0.003 * (c % 89);
        h[c] = (float)(fa->count * mean), h[P + c] = (float)(fa->count * (mean * mean + var));
        h[2 * P + c] = 1.0f + 0.01f * (float)(c % 13), h[3 * P + c] = 0.05f * (float)(c % 7) - 0.1f;
        h[4 * P + c] = h[14 * P + c] = 0.1f * (float)(c % 5),
                  h[5 * P + c] = h[15 * P + c] = 0.5f + 0.1f * (float)(c % 4);
    }
    /* on the compute stream (non-blocking: a legacy-stream copy would not order against it) */
    TB_CUDA_CHECK(cudaMemcpyAsync(dev, h, (size_t)22 * P * sizeof *h, cudaMemcpyHostToDevice, st->stream));
    float *D = dev;
    void *cb[FD_R_COUNT] = {NULL};
    cb[FD_R_SUM] = D, cb[FD_R_SQSUM] = D + P, cb[FD_R_GAMMA] = D + 2 * P, cb[FD_R_BETA] = D + 3 * P;
    cb[FD_R_RUN_MEAN] = D + 4 * P, cb[FD_R_RUN_VAR] = D + 5 * P, cb[FD_R_EQ_SCALE] = D + 6 * P;
    cb[FD_R_EQ_BIAS] = D + 7 * P, cb[FD_R_MEAN] = D + 8 * P, cb[FD_R_INVSTD] = D + 9 * P;
    cb[FD_R_NEXT_MEAN] = D + 10 * P, cb[FD_R_NEXT_VAR] = D + 11 * P;
    cu_fpack pk = {0};
    cudnnStatus_t s = cu_fgraph_try(st, g, &pk, cb, why, len);
    cu_fpack_free(&pk);
    int bad = -1;
    if (s != CUDNN_STATUS_SUCCESS) {
        size_t n = strlen(why);
        snprintf(why + n, len - n, ": %s", cudnnGetErrorString(s));
        (void)cudaGetLastError();
        bad = 6;
    } else {
        cu_fk_finalize(st->stream, C, fa->count, D, D + P, D + 2 * P, D + 3 * P, D + 14 * P, D + 15 * P, D + 18 * P,
                       D + 19 * P, D + 16 * P, D + 17 * P, fa->momentum, fa->eps);
        TB_CUDA_CHECK(cudaMemcpyAsync(h, dev, (size_t)22 * P * sizeof *h, cudaMemcpyDeviceToHost, st->stream));
        TB_CUDA_CHECK(cudaStreamSynchronize(st->stream));
        /* graph: scale 6, bias 7, mean 8, invstd 9, next mean 10, next var 11; own: 16, 17, 18, 19, 14, 15 */
        static const int gi[6] = {6, 7, 8, 9, 10, 11}, oi[6] = {16, 17, 18, 19, 14, 15};
        for (int k = 0; k < 6 && bad < 0; k++)
            for (int c = 0; c < C; c++) {
                double x = h[gi[k] * P + c], y = h[oi[k] * P + c];
                if (!(fabs(x - y) <= 1e-3 * fabs(y) + 1e-5)) {
                    bad = k;
                    break;
                }
            }
    }
    TB_CUDA_CHECK(cudaStreamSynchronize(st->stream));
    free(h);
    cu_free(st, dev);
    return bad;
}

/* The finalize graph of entry e (count values per channel): eps and momentum by value as float, then as double
 * (the legacy sample's form), the first that plans, runs and agrees with the own kernel (finalize_check); none
 * leaves e, and the plan's later entries, on the own kernel. */
static void plan_finalize(tb_backend *be, fplan *p, fentry *e, const tb_bn_finalize_args *fa) {
    cu_state *st = cu_state_of(be);
    e->fin_tried = 1;
    e->fin_momentum = fa->momentum, e->fin_eps = fa->eps;
    if (p->fin_own || (st->fused_force & (1u << FD_G_FINALIZE))) return;
    fd_graph d;
    char why[192], label[128] = "", ran[256] = "";
    cu_err err = {NULL, CUDNN_STATUS_SUCCESS}, first = err;
    void *bufs[FD_R_COUNT] = {NULL};
    bufs[FD_R_SUM] = (void *)fa->sum, bufs[FD_R_SQSUM] = (void *)fa->sqsum, bufs[FD_R_GAMMA] = (void *)fa->gamma;
    bufs[FD_R_BETA] = (void *)fa->beta, bufs[FD_R_RUN_MEAN] = fa->running_mean, bufs[FD_R_RUN_VAR] = fa->running_var;
    bufs[FD_R_EQ_SCALE] = fa->scale, bufs[FD_R_EQ_BIAS] = fa->bias, bufs[FD_R_MEAN] = fa->save_mean;
    bufs[FD_R_INVSTD] = fa->save_invstd, bufs[FD_R_NEXT_MEAN] = p->scratch, bufs[FD_R_NEXT_VAR] = p->scratch + fa->C;
    static const char *what[6] = {"scale",        "bias",          "saved mean", "saved 1/std",
                                  "running mean", "running variance"}; /* by finalize_check's index */
    int planned = 0, bad = -1;
    for (int v = 0; v < 2; v++) {
        if (fd_build_finalize(&d, fa->C, (int64_t)fa->count, fa->momentum, fa->eps, v, why, sizeof why) != 0) {
            if (!first.why) { /* no description: reported below with what was tried */
                first.why = why, first.s = CUDNN_STATUS_BAD_PARAM;
                snprintf(label, sizeof label, "the BN finalize of %d channels", fa->C);
            }
            break;
        }
        cu_fgraph_req r = {&d, bufs, 0, NULL, 0, 0};
        cu_fgraph *g = cu_fgraph_get(st, &r, &err);
        if (!g) {
            if (!first.why) first = err, snprintf(label, sizeof label, "%s", d.label);
            continue;
        }
        planned = 1;
        bad = finalize_check(st, g, fa, ran, sizeof ran);
        if (bad < 0) {
            e->g[FD_G_FINALIZE] = g;
            return;
        }
        snprintf(label, sizeof label, "%s", d.label);
        cu_fgraph_put(st, g);
    }
    if (!planned) {
        say_missing(label, FD_G_FINALIZE, TB_F32, &first);
        return;
    }
    if (bad == 6)
        tb_info("# cuda fused: cuDNN's BN finalize planned but did not run (%s); BN finalize runs on the own kernel",
                ran);
    else
        tb_info("# cuda fused: cuDNN's BN finalize (%s) disagrees with backend.h's BatchNorm on the %s (momentum "
                "%.2g, unbiased running variance); BN finalize runs on the own kernel",
                label, what[bad], fa->momentum);
    p->fin_own = 1;
}

/* The graphs of batch size n. may_run (the buffers may be written now): measured, or under
 * --no-autotune run once, so that an engine that plans but will not run falls to the next. */
static fentry *new_entry(tb_backend *be, fplan *p, int n, int may_run, const tb_bn_finalize_args *fin) {
    cu_state *st = cu_state_of(be);
    cu_not_capturing(be, "preparing a fused convolution for a new batch size");
    if (p->ne == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 4;
        p->e = realloc(p->e, (size_t)p->cap * sizeof *p->e);
        if (!p->e) TB_FATAL("out of host memory");
    }
    fentry *e = &p->e[p->ne++];
    memset(e, 0, sizeof *e);
    e->n = n;
    cu_fgraph_req how = {NULL, NULL, may_run && st->autotune, NULL, 0, may_run && !st->autotune};
    if (may_run) {
        how.tws = cu_find_workspace(st, &how.tws_bytes);
        TB_CUDA_CHECK(cudaStreamSynchronize(st->stream)); /* the runs overwrite y, dw, dr, dgamma */
    }
    plan_kind(st, p, e, FD_G_CONV_STATS, &how);
    if (pad4_ok(p) && !(st->fused_force & (1u << FD_G_CONV_STATS))) plan_pad4(st, p, e, &how);
    if (p->pro) {
        plan_kind(st, p, e, FD_G_WGRAD_PRO, &how);
        plan_kind(st, p, e, FD_G_DGRAD_DBN, &how);
    }
    if (fin) plan_finalize(be, p, e, fin);
    return e;
}

static fentry *entry_for(tb_backend *be, fplan *p, int n, int measure_ok) {
    for (int i = 0; i < p->ne; i++)
        if (p->e[i].n == n) return &p->e[i];
    if (n > p->max_n) TB_FATAL("cuda fused conv: batch %d is larger than the %d its plan was made for", n, p->max_n);
    return new_entry(be, p, n, measure_ok, NULL);
}

static void *cu_fconv_plan(tb_backend *be, const tb_fconv_args *a, unsigned want, unsigned *got) {
    const char *op = "fconv_plan";
    cu_state *st = cu_state_of(be);
    cu_check(a->x, op, "x");
    cu_check(a->w, op, "w");
    cu_check(a->y, op, "y");
    if (a->pro && (!a->xp || !a->dr || !a->dx || !a->conv_plan))
        TB_FATAL("cuda %s: a prologue needs xp, dr, dx and the conv plan", op);
    fplan *p = calloc(1, sizeof *p);
    if (!p) TB_FATAL("out of host memory");
    p->g = *a->g, p->dt = a->x->dtype, p->l = a->x->layout;
    p->h = a->x->h, p->w = a->x->w, p->max_n = a->x->n, p->pro = a->pro != NULL;
    p->conv_plan = a->conv_plan;
    if (a->xp) {
        p->xp = *a->xp;
        cu_branch_xp_reserve(st, tb_tensor_numel(a->xp) * tb_dtype_size(a->xp->dtype));
    }
    void **b = p->bufs;
    b[FD_R_X] = a->x->data, b[FD_R_W] = a->w->data, b[FD_R_Y] = a->y->data;
    b[FD_R_SUM] = a->sum, b[FD_R_SQSUM] = a->sqsum;
    if (a->dy) b[FD_R_DY] = a->dy->data;
    if (a->dw) b[FD_R_DW] = a->dw->data;
    size_t cin = (size_t)p->g.cin, cout = (size_t)p->g.cout;
    p->scratch = cu_malloc(st, (2 * cout + 3 * cin) * sizeof(float), "the fused conv's scratch");
    p->sb_io = cu_malloc(st, 2 * cin * tb_dtype_size(p->dt), "the fused conv's 16-bit scale and bias");
    if (a->pro) {
        b[FD_R_SCALE] = (void *)a->pro->scale, b[FD_R_BIAS] = (void *)a->pro->bias;
        b[FD_R_MEAN] = (void *)a->pro->mean, b[FD_R_INVSTD] = (void *)a->pro->invstd;
        b[FD_R_GAMMA] = (void *)a->pro->gamma, b[FD_R_BETA] = (void *)a->pro->beta;
        b[FD_R_DR] = a->dr->data, b[FD_R_DGAMMA] = a->dgamma, b[FD_R_DBETA] = a->dbeta;
        b[FD_R_COEF_A] = p->scratch + 2 * cout, b[FD_R_COEF_B] = p->scratch + 2 * cout + cin;
        b[FD_R_COEF_C] = p->scratch + 2 * cout + 2 * cin;
    }
    /* the composition's scratch at the largest batch: sized now, never inside a step */
    cu_fk_shape ys = shape_of(a->y), xs = shape_of(a->x);
    cu_scratch(be, cu_fk_sums_scratch(&ys));
    if (a->pro) cu_scratch(be, cu_fk_sums_scratch(&xs));
    fentry *e = new_entry(be, p, p->max_n, 1, a->fin);
    unsigned have = (e->g[FD_G_CONV_STATS] ? TB_FCONV_FWD : 0) | (e->g[FD_G_WGRAD_PRO] ? TB_FCONV_WGRAD : 0) |
                    (e->g[FD_G_DGRAD_DBN] ? TB_FCONV_DGRAD : 0);
    /* forced compositions count as present: the test switch exercises them in the fused schedule */
    unsigned forced = ((st->fused_force >> FD_G_CONV_STATS) & 1 ? TB_FCONV_FWD : 0) |
                      ((st->fused_force >> FD_G_WGRAD_PRO) & 1 ? TB_FCONV_WGRAD : 0) |
                      ((st->fused_force >> FD_G_DGRAD_DBN) & 1 ? TB_FCONV_DGRAD : 0);
    *got = p->got = want & (have | forced);
    return p;
}

static void cu_fconv_plan_free(tb_backend *be, void *plan) {
    fplan *p = plan;
    if (!p) return;
    cu_state *st = cu_state_of(be);
    for (int i = 0; i < p->ne; i++)
        for (int k = 0; k < FD_G_KINDS; k++) {
            cu_fpack_free(&p->e[i].pk[k]);
            cu_fgraph_put(st, p->e[i].g[k]);
        }
    cu_free(st, p->scratch);
    cu_free(st, p->sb_io);
    if (p->xpad) cu_free(st, p->xpad), cu_free(st, p->wpad);
    free(p->e);
    free(p);
}

static void cu_fconv_plan_describe(tb_backend *be, void *plan, char *buf, size_t len) {
    (void)be;
    fplan *p = plan;
    static const char *names[FD_G_KINDS] = {"conv+stats", "finalize", "wgrad", "dgrad+dbn"};
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; p && i < p->ne && used + 1 < len; i++) {
        used += (size_t)snprintf(buf + used, len - used, "%sn=%d:", i ? "; " : "", p->e[i].n);
        for (int k = 0; k < FD_G_KINDS && used + 1 < len; k++) {
            if (k != FD_G_CONV_STATS && k != FD_G_FINALIZE && !p->pro) continue;
            used += (size_t)snprintf(buf + used, len - used, " %s ", names[k]);
            if (used + 1 >= len) break;
            if (p->e[i].g[k] && k == FD_G_CONV_STATS && p->e[i].pad4)
                used += (size_t)snprintf(buf + used, len - used, "(input padded to 4 channels) ");
            if (used + 1 >= len) break;
            if (p->e[i].g[k])
                used += (size_t)cu_fgraph_describe(p->e[i].g[k], buf + used, len - used);
            else
                used += (size_t)snprintf(buf + used, len - used, "%s",
                                         k == FD_G_FINALIZE ? (p->e[i].fin_tried ? "own kernel" : "-") : "unfused ops");
        }
    }
    if (used >= len) buf[len - 1] = '\0';
}

/* ---- running ------------------------------------------------------------------------------------- */

static void call_check(const fplan *p, const tb_fconv_args *a, const char *op) {
    if (!p) TB_FATAL("cuda %s: no plan (fconv_plan was not called for this node)", op);
    cu_check(a->x, op, "x");
    if (a->x->c != p->g.cin || a->x->h != p->h || a->x->w != p->w || a->x->dtype != p->dt || a->x->layout != p->l ||
        memcmp(a->g, &p->g, sizeof p->g) != 0 || (a->pro != NULL) != p->pro)
        TB_FATAL("cuda %s: the call does not fit the plan (conv %d->%d k%d at %dx%d %s)", op, p->g.cin, p->g.cout,
                 p->g.k, p->h, p->w, p->pro ? "with a prologue" : "without a prologue");
}

/* The buffers by role for this call; with a 16-bit prologue variant the
 * float scale and bias are rounded into sb_io first. */
static void call_bufs(tb_backend *be, fplan *p, const tb_fconv_args *a, int variant, void **b) {
    memset(b, 0, FD_R_COUNT * sizeof *b);
    b[FD_R_X] = a->x->data, b[FD_R_W] = a->w->data;
    if (a->y) b[FD_R_Y] = a->y->data;
    if (a->dy) b[FD_R_DY] = a->dy->data;
    if (a->dw) b[FD_R_DW] = a->dw->data;
    if (a->dr) b[FD_R_DR] = a->dr->data;
    b[FD_R_SUM] = a->sum, b[FD_R_SQSUM] = a->sqsum, b[FD_R_DGAMMA] = a->dgamma, b[FD_R_DBETA] = a->dbeta;
    b[FD_R_COEF_A] = p->bufs[FD_R_COEF_A], b[FD_R_COEF_B] = p->bufs[FD_R_COEF_B], b[FD_R_COEF_C] = p->bufs[FD_R_COEF_C];
    if (!a->pro) return;
    b[FD_R_MEAN] = (void *)a->pro->mean, b[FD_R_INVSTD] = (void *)a->pro->invstd;
    b[FD_R_GAMMA] = (void *)a->pro->gamma, b[FD_R_BETA] = (void *)a->pro->beta;
    if (variant == 0) {
        b[FD_R_SCALE] = (void *)a->pro->scale, b[FD_R_BIAS] = (void *)a->pro->bias;
    } else {
        cu_fk_to_dtype(cu_stream(be), p->dt, p->g.cin, a->pro->scale, a->pro->bias, p->sb_io);
        b[FD_R_SCALE] = p->sb_io, b[FD_R_BIAS] = (char *)p->sb_io + p->g.cin * tb_dtype_size(p->dt);
    }
}

/* The composition's pro(x): relu(x * scale + bias) into xp (n of the call);
 * inside a weight-gradient branch into the second stream's own buffer, as
 * the data gradient's composition writes xp beside it (cuda_branch.c). */
static const tb_tensor *prologue_into_xp(tb_backend *be, fplan *p, const tb_fconv_args *a, tb_tensor *xp) {
    cu_state *st = cu_state_of(be);
    *xp = p->xp;
    xp->n = a->x->n;
    if (st->in_branch) {
        size_t need = tb_tensor_numel(xp) * tb_dtype_size(xp->dtype);
        if (need > st->side_xp_bytes)
            TB_FATAL("cuda fconv: the second stream's pro(x) buffer holds %zu bytes, %zu needed", st->side_xp_bytes,
                     need);
        xp->data = st->side_xp;
    }
    cu_fk_shape s = shape_of(a->x);
    cu_fk_apply(cu_stream(be), &s, a->x->data, a->pro->scale, a->pro->bias, NULL, NULL, NULL, 1, xp->data, NULL);
    return xp;
}

static void cu_fconv_forward(tb_backend *be, void *plan, const tb_fconv_args *a) {
    const char *op = "fconv_forward";
    fplan *p = plan;
    call_check(p, a, op);
    cu_end_planning(cu_state_of(be));
    fentry *e = entry_for(be, p, a->x->n, 1);
    if (!a->sum || !a->sqsum) TB_FATAL("cuda %s: sum or sqsum is NULL", op);
    if (e->g[FD_G_CONV_STATS]) {
        void *b[FD_R_COUNT];
        call_bufs(be, p, a, e->variant[FD_G_CONV_STATS], b);
        if (e->pad4) { /* the input and the filter (changed by every update) into their 4-channel copies */
            cudaStream_t s = cu_stream(be);
            cu_pad_channels(s, p->dt, (size_t)a->x->n * p->h * p->w, 3, 4, a->x->data, p->xpad, 0.0f);
            cu_pad_channels(s, p->dt, (size_t)p->g.cout * p->g.k * p->g.k, 3, 4, a->w->data, p->wpad, 0.0f);
            b[FD_R_X] = p->xpad, b[FD_R_W] = p->wpad;
        }
        cu_fgraph_run(cu_state_of(be), e->g[FD_G_CONV_STATS], &e->pk[FD_G_CONV_STATS], b);
        return;
    }
    tb_tensor xp;
    const tb_tensor *src = a->pro ? prologue_into_xp(be, p, a, &xp) : a->x;
    cu_conv_forward(be, p->conv_plan, a->g, src, a->w, a->y);
    cu_fk_shape s = shape_of(a->y);
    cu_fk_sums(cu_stream(be), &s, a->y->data, a->sum, a->sqsum, cu_scratch(be, cu_fk_sums_scratch(&s)));
}

static void cu_fconv_backward_filter(tb_backend *be, void *plan, const tb_fconv_args *a) {
    const char *op = "fconv_backward_filter";
    fplan *p = plan;
    call_check(p, a, op);
    if (!a->pro) TB_FATAL("cuda %s: needs the folded BatchNorm", op);
    fentry *e = entry_for(be, p, a->x->n, 0);
    if (e->g[FD_G_WGRAD_PRO]) {
        void *b[FD_R_COUNT];
        call_bufs(be, p, a, e->variant[FD_G_WGRAD_PRO], b);
        cu_fgraph_run(cu_state_of(be), e->g[FD_G_WGRAD_PRO], &e->pk[FD_G_WGRAD_PRO], b);
        return;
    }
    tb_tensor xp;
    cu_conv_backward_filter(be, p->conv_plan, a->g, prologue_into_xp(be, p, a, &xp), a->dy, a->dw, 0);
}

static void cu_fconv_backward_data(tb_backend *be, void *plan, const tb_fconv_args *a) {
    const char *op = "fconv_backward_data";
    fplan *p = plan;
    call_check(p, a, op);
    if (!a->pro || !a->dr || !a->dgamma || !a->dbeta)
        TB_FATAL("cuda %s: needs the folded BatchNorm, dr, dgamma, dbeta", op);
    cu_check(a->dr, op, "dr");
    cu_check_same(a->x, a->dr, op, "x", "dr");
    fentry *e = entry_for(be, p, a->x->n, 0);
    if (e->g[FD_G_DGRAD_DBN]) {
        void *b[FD_R_COUNT];
        call_bufs(be, p, a, 0, b);
        cu_fgraph_run(cu_state_of(be), e->g[FD_G_DGRAD_DBN], &e->pk[FD_G_DGRAD_DBN], b);
        return;
    }
    /* the composition: dr = convT(dy, w), masked by pro(x), and the BN weight gradients */
    tb_tensor xp;
    prologue_into_xp(be, p, a, &xp);
    cu_conv_backward_data(be, p->conv_plan, a->g, a->dy, a->w, a->dr, 0);
    cu_fk_shape s = shape_of(a->x);
    cu_fk_dbn(cu_stream(be), &s, a->dr->data, a->x->data, xp.data, a->pro->mean, a->pro->invstd, a->dgamma, a->dbeta,
              cu_scratch(be, cu_fk_sums_scratch(&s)));
}

static void cu_bn_input_grad(tb_backend *be, const tb_fconv_args *a) {
    const char *op = "bn_input_grad";
    if (!a->pro || !a->dr || !a->dx || !a->dgamma || !a->dbeta)
        TB_FATAL("cuda %s: needs the folded BatchNorm, dr, dx, dgamma, dbeta", op);
    cu_check(a->x, op, "x");
    cu_check(a->dx, op, "dx");
    cu_check_same(a->x, a->dx, op, "x", "dx");
    cu_check_same(a->x, a->dr, op, "x", "dr");
    const tb_bn_fold *f = a->pro;
    cu_fk_shape s = shape_of(a->x);
    cu_fk_bn_dx(cu_stream(be), &s, a->dr->data, a->x->data, f->mean, f->invstd, f->gamma, a->dgamma, a->dbeta,
                a->dx->data, a->accumulate_dx);
}

static void cu_bn_finalize(tb_backend *be, void *plan, const tb_bn_finalize_args *a) {
    fplan *p = plan;
    if (!p) TB_FATAL("cuda bn_finalize: no fused conv plan");
    if (a->count < 2) TB_FATAL("cuda bn_finalize: training batch norm needs more than 1 value per channel");
    cu_state *st = cu_state_of(be);
    int hw = ((p->h + 2 * p->g.pad - p->g.k) / p->g.stride + 1) * ((p->w + 2 * p->g.pad - p->g.k) / p->g.stride + 1);
    int n = (int)(a->count / hw);
    if (a->C != p->g.cout || (double)n * hw != a->count)
        TB_FATAL("cuda bn_finalize: C %d, count %.0f do not fit the plan", a->C, a->count);
    fentry *e = entry_for(be, p, n, 0);
    if (!e->fin_tried) {
        cu_not_capturing(be, "planning a BN finalize for a new batch size"); /* allocates, copies, waits */
        plan_finalize(be, p, e, a);
    }
    if (e->g[FD_G_FINALIZE] && (a->momentum != e->fin_momentum || a->eps != e->fin_eps)) {
        cu_not_capturing(be, "a BatchNorm's momentum or eps changed"); /* by value in the graph: plan again */
        cu_fgraph_put(st, e->g[FD_G_FINALIZE]);
        cu_fpack_free(&e->pk[FD_G_FINALIZE]);
        e->g[FD_G_FINALIZE] = NULL;
        plan_finalize(be, p, e, a);
    }
    if (e->g[FD_G_FINALIZE]) {
        void *b[FD_R_COUNT] = {NULL};
        b[FD_R_SUM] = (void *)a->sum, b[FD_R_SQSUM] = (void *)a->sqsum, b[FD_R_GAMMA] = (void *)a->gamma;
        b[FD_R_BETA] = (void *)a->beta, b[FD_R_RUN_MEAN] = a->running_mean, b[FD_R_RUN_VAR] = a->running_var;
        b[FD_R_EQ_SCALE] = a->scale, b[FD_R_EQ_BIAS] = a->bias, b[FD_R_MEAN] = a->save_mean;
        b[FD_R_INVSTD] = a->save_invstd, b[FD_R_NEXT_MEAN] = p->scratch, b[FD_R_NEXT_VAR] = p->scratch + a->C;
        cu_fgraph_run(st, e->g[FD_G_FINALIZE], &e->pk[FD_G_FINALIZE], b);
        /* the updated running statistics went to scratch (no in-place update assumed) */
        size_t bytes = (size_t)a->C * sizeof(float);
        TB_CUDA_CHECK(cudaMemcpyAsync(a->running_mean, p->scratch, bytes, cudaMemcpyDeviceToDevice, st->stream));
        TB_CUDA_CHECK(cudaMemcpyAsync(a->running_var, p->scratch + a->C, bytes, cudaMemcpyDeviceToDevice, st->stream));
        return;
    }
    cu_fk_finalize(st->stream, a->C, a->count, a->sum, a->sqsum, a->gamma, a->beta, a->running_mean, a->running_var,
                   a->save_mean, a->save_invstd, a->scale, a->bias, a->momentum, a->eps);
}

static void cu_bn_apply(tb_backend *be, const tb_bn_apply_args *a) {
    const char *op = "bn_apply";
    cu_check_xyz(op, a->x, a->y, a->z);
    if ((a->zscale != NULL) != (a->zbias != NULL) || (a->zscale && !a->z))
        TB_FATAL("cuda %s: zscale and zbias go together, with z", op);
    cu_fk_shape s = shape_of(a->x);
    void *mask = cu_bn_apply_mask(be, a->bn_plan, a->reserve, a->reserve_bytes, a->x, a->relu);
    int wrote = cu_fk_apply(cu_stream(be), &s, a->x->data, a->scale, a->bias, a->z ? a->z->data : NULL, a->zscale,
                            a->zbias, a->relu, a->y->data, mask);
    cu_bn_apply_masked(a->bn_plan, a->x->n, wrote);
}

void cu_fused_table(tb_backend *be, const tb_backend_opts *opts) {
    cu_state *st = cu_state_of(be);
    snprintf(st->plan_cache_dir, sizeof st->plan_cache_dir, "%s", opts && opts->plan_cache ? opts->plan_cache : "");
    be->fconv_plan = cu_fconv_plan;
    be->fconv_plan_free = cu_fconv_plan_free;
    be->fconv_plan_describe = cu_fconv_plan_describe;
    be->fconv_forward = cu_fconv_forward;
    be->bn_finalize = cu_bn_finalize;
    be->bn_apply = cu_bn_apply;
    be->fconv_backward_filter = cu_fconv_backward_filter;
    be->fconv_backward_data = cu_fconv_backward_data;
    be->bn_input_grad = cu_bn_input_grad;
    be->plan_session = cu_plan_session;
    be->choice_get = cu_choice_get;
    be->choice_put = cu_choice_put;
}

void tb_cuda_fused_force(tb_backend *be, unsigned kinds) { cu_state_of(be)->fused_force = kinds; }
