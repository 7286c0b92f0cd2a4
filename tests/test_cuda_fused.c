/* test_cuda_fused.c - --fuse graph on the GPU. Exits 77 (skipped, with a
 * SKIP line) without a CUDA device.
 *
 *   test_cuda_fused        every fused op against the CPU backend's twins
 *                          (model/cpu/cpu_fused.c, composed of the CPU's
 *                          unfused ops) on the same inputs: conv + statistics
 *                          with and without the BN prologue, BN finalize,
 *                          the filter gradient with the prologue, the data
 *                          gradient + ReLU mask + BN weight gradients (dx
 *                          accumulated), bn_apply with a residual and with a
 *                          folded shortcut BN (and the ReLU mask it leaves
 *                          for its node's backward); ResNet-50 shapes (1x1, 3x3,
 *                          3x3/2, the 1x1/2 shortcut, the stem with 3 and 4
 *                          input channels) in
 *                          bf16 and fp16 NHWC, each at its plan's batch and a
 *                          smaller one on the same plan, each twice: on
 *                          cuDNN's fused graphs where they plan (the path is
 *                          printed: which graphs, which variant) and on the
 *                          forced unfused composition (tb_cuda_fused_force)
 *   test_cuda_fused step   a whole training step of ResNet-50 (64 px, batch
 *                          64) fused against unfused on the GPU, in fp32
 *                          (no TF32) and in bf16 and fp16, the 16-bit steps
 *                          judged against the fp32 step: test_cuda_fused_step.c
 *   test_cuda_fused refused  --no-autotune's trial run at plan time: the fp16
 *                          shapes with the first engine's run refused (the
 *                          next plans), then every run refused (unfused)
 *
 * Tolerances. Op outputs: |gpu - cpu| <= tol * max|cpu| + tol * |cpu|
 * (test_cuda_ops' rule), tol 1.5e-2 for bf16 and 6e-3 for fp16 on 16-bit
 * outputs (one rounding of an output plus the products' accumulation
 * order), 1e-4 on float statistics computed from the same rounded inputs;
 * per-channel sums against tol * sum|y|. Inputs put every BN output at
 * least 0.1 from the ReLU's threshold, so the GPU's mask (from (x - mean) *
 * invstd * gamma + beta) and the CPU's (from x * scale + bias) agree: a
 * flipped element would move dx by a whole value. The rule's bound on one
 * element lies between tol * max and 2 tol * max (at the largest element):
 * dgamma's (2 tol) between 3 % and 6 % of the largest |dgamma| in bf16,
 * 1.2 % and 2.4 % in fp16. The planted error sits where the bound is
 * loosest: a dgamma's largest channel 10 % off must fail at each
 * precision's dgamma tolerance (so an error of 10 % of the largest
 * |dgamma| fails in any channel; 5 % there passes bf16's bound).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/cpu/cpu_backend.h"
#include "model/cuda/cuda_backend.h"
#include "model/layout.h"
#include "tests/test_cuda_fused.h"

int tb_test_failures = 0, tb_test_checks = 0; /* shared with test_cuda_fused_step.c */
static tb_backend *g_cpu, *g_gpu;
static tb_rng g_rng;

/* ---- tensors: host float NCHW values, moved with the backend's convert --------------------------- */

typedef struct {
    float *h;       /* [n,c,h,w] float32 NCHW, representable in the dtype */
    tb_tensor c, g; /* CPU float32 NCHW copy; GPU copy in dtype and layout */
} twin;

static float round_dt(tb_dtype dt, float v) {
    return dt == TB_BF16 ? tb_bf16_to_f32(tb_f32_to_bf16(v)) : dt == TB_F16 ? tb_f16_to_f32(tb_f32_to_f16(v)) : v;
}

static twin mk(int n, int c, int h, int w, tb_dtype dt, tb_layout l, const float *vals) {
    twin t;
    size_t ne = (size_t)n * c * h * w;
    t.h = malloc(ne * sizeof *t.h);
    for (size_t i = 0; i < ne; i++) t.h[i] = round_dt(dt, vals ? vals[i] : (float)(2 * tb_rng_uniform(&g_rng) - 1));
    tb_tensor tc = {g_cpu->alloc(g_cpu, ne * 4), n, c, h, w, TB_F32, TB_NCHW};
    tb_tensor tg = {g_gpu->alloc(g_gpu, ne * tb_dtype_size(dt)), n, c, h, w, dt, l};
    memcpy(tc.data, t.h, ne * 4);
    tb_tensor st = {g_gpu->alloc(g_gpu, ne * 4), n, c, h, w, TB_F32, TB_NCHW};
    g_gpu->copy_h2d(g_gpu, st.data, t.h, ne * 4);
    g_gpu->convert(g_gpu, &st, &tg, 0);
    g_gpu->sync(g_gpu);
    g_gpu->release(g_gpu, st.data);
    t.c = tc, t.g = tg;
    return t;
}

/* The GPU tensor t (any dtype/layout) as float32 NCHW on the host. */
static float *down(const tb_tensor *t) {
    size_t ne = tb_tensor_numel(t);
    tb_tensor st = {g_gpu->alloc(g_gpu, ne * 4), t->n, t->c, t->h, t->w, TB_F32, TB_NCHW};
    g_gpu->convert(g_gpu, t, &st, 0);
    float *out = malloc(ne * 4);
    g_gpu->copy_d2h(g_gpu, out, st.data, ne * 4);
    g_gpu->release(g_gpu, st.data);
    return out;
}

static void drop(twin *t) {
    g_cpu->release(g_cpu, t->c.data);
    g_gpu->release(g_gpu, t->g.data);
    free(t->h);
}

typedef struct {
    int n;
    float *c, *g;
} vec;

static vec mkv(int n, const float *vals) {
    vec v = {n, g_cpu->alloc(g_cpu, (size_t)n * 4), g_gpu->alloc(g_gpu, (size_t)n * 4)};
    for (int i = 0; i < n; i++) v.c[i] = vals ? vals[i] : 0.0f;
    g_gpu->copy_h2d(g_gpu, v.g, v.c, (size_t)n * 4);
    return v;
}

static void dropv(vec *v) {
    g_cpu->release(g_cpu, v->c);
    g_gpu->release(g_gpu, v->g);
}

/* got vs ref: |got - ref| <= tol * max|ref| + tol * |ref|, or (scale) tol * scale[i], for every element; the
 * largest error in *err, max|ref| in *mx. */
static int within(const float *got, const float *ref, size_t n, double tol, const double *scale, double *err,
                  double *mx) {
    *mx = 0, *err = 0;
    for (size_t i = 0; i < n; i++) *mx = fmax(*mx, fabs(ref[i]));
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]), lim = scale ? tol * scale[i] : tol * *mx + tol * fabs(ref[i]);
        if (!(e <= lim)) ok = 0;
        if (!(e <= *err)) *err = e;
    }
    return ok;
}

static int cmp(const char *what, const float *got, const float *ref, size_t n, double tol, const double *scale) {
    double mx, err;
    int ok = within(got, ref, n, tol, scale, &err, &mx);
    TB_CHECK(ok, "%s: err %.2e of max %.2e (tol %.1e)", what, err, mx, tol);
    printf("%-78s err %9.2e of max %9.2e  %s\n", what, err, mx, ok ? "PASS" : "FAIL");
    return ok;
}

static int cmp_t(const char *what, const twin *t, double tol) {
    float *g = down(&t->g);
    int ok = cmp(what, g, t->c.data, tb_tensor_numel(&t->c), tol, NULL);
    free(g);
    return ok;
}

static int cmp_v(const char *what, const vec *v, double tol, const double *scale) {
    float *g = malloc((size_t)v->n * 4);
    g_gpu->copy_d2h(g_gpu, g, v->g, (size_t)v->n * 4);
    int ok = cmp(what, g, v->c, (size_t)v->n, tol, scale);
    free(g);
    return ok;
}

/* ---- the ops ------------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int n, n2, cin, cout, k, stride, pad, h, w, pro;
} fcase;

static const fcase k_cases[] = {
    {"3x3 64->64, BN prologue", 8, 5, 64, 64, 3, 1, 1, 28, 28, 1},
    {"1x1 64->256, BN prologue", 8, 5, 64, 256, 1, 1, 0, 28, 28, 1},
    {"3x3/2 128->128, BN prologue", 8, 5, 128, 128, 3, 2, 1, 28, 28, 1},
    {"shortcut 1x1/2 256->512", 8, 5, 256, 512, 1, 2, 0, 14, 14, 0},
    {"stem 7x7/2 3->64 (padded to 4 where that plans)", 8, 5, 3, 64, 7, 2, 3, 56, 56, 0},
    {"stem 7x7/2 4->64", 8, 5, 4, 64, 7, 2, 3, 56, 56, 0},
};

typedef struct {
    const char *name;
    tb_dtype dt;
    double tol; /* 16-bit outputs */
} fprec;

static const fprec k_precs[] = {{"bf16 NHWC", TB_BF16, 1.5e-2}, {"fp16 NHWC", TB_F16, 6e-3}};

static int g_graph_cases[2]; /* per precision: cases whose conv + statistics ran on a fused graph */

/* Host values of a folded BN over C channels (scale = gamma invstd, bias =
 * beta - mean scale) and x whose BN output sits at least 0.1 from zero. */
static void fold_values(int C, float *mean, float *invstd, float *gamma, float *beta, float *scale, float *bias) {
    for (int c = 0; c < C; c++) {
        mean[c] = (float)(tb_rng_uniform(&g_rng) - 0.5);
        invstd[c] = (float)(0.5 + tb_rng_uniform(&g_rng));
        gamma[c] = (float)(0.5 + tb_rng_uniform(&g_rng));
        beta[c] = (float)(tb_rng_uniform(&g_rng) - 0.5);
        scale[c] = gamma[c] * invstd[c];
        bias[c] = beta[c] - mean[c] * scale[c];
    }
}

static float *x_values(int n, int C, int hw, const float *scale, const float *bias, tb_dtype dt) {
    float *x = malloc((size_t)n * C * hw * sizeof *x);
    for (int a = 0; a < n; a++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < hw; i++) {
                float v, xv;
                do { /* v in +-[0.1, 2], after x is rounded */
                    double u = 0.1 + 1.9 * tb_rng_uniform(&g_rng);
                    v = (float)(tb_rng_uniform(&g_rng) < 0.5 ? -u : u);
                    xv = round_dt(dt, scale ? (v - bias[c]) / scale[c] : v);
                    v = scale ? xv * scale[c] + bias[c] : xv;
                } while (fabsf(v) < 0.1f);
                x[((size_t)a * C + c) * hw + i] = xv;
            }
    return x;
}

static tb_tensor at_n(tb_tensor t, int n) { return t.n = n, t; }

typedef struct {
    twin x, w, y, dy, dw, dx, dr, xp;
    vec sum, sqsum, mean, invstd, gamma, beta, scale, bias, dgamma, dbeta;
    vec g_o, b_o, rm, rv, sm, si, sc_o, bi_o; /* the output BN's finalize */
} bufs;

/* fa for backend dev (0 CPU, 1 GPU) from b */
static tb_bn_finalize_args fin_args(bufs *b, int dev, int C, double count) {
    tb_bn_finalize_args f = {C,
                             count,
                             dev ? b->sum.g : b->sum.c,
                             dev ? b->sqsum.g : b->sqsum.c,
                             dev ? b->g_o.g : b->g_o.c,
                             dev ? b->b_o.g : b->b_o.c,
                             dev ? b->rm.g : b->rm.c,
                             dev ? b->rv.g : b->rv.c,
                             dev ? b->sm.g : b->sm.c,
                             dev ? b->si.g : b->si.c,
                             dev ? b->sc_o.g : b->sc_o.c,
                             dev ? b->bi_o.g : b->bi_o.c,
                             0.1,
                             1e-5};
    return f;
}

/* One pass (batch n on plans made at b's batch) of every fused op, GPU vs CPU. */
static void run_ops(const fcase *fc, const fprec *pr, bufs *b, void *gplan, int n, const char *tag) {
    tb_conv_geom geom = {fc->cin, fc->cout, fc->k, fc->stride, fc->pad};
    tb_tensor T[2][8]; /* per device: x, w, y, dy, dw, dx, dr, xp at batch n */
    twin *tw[8] = {&b->x, &b->w, &b->y, &b->dy, &b->dw, &b->dx, &b->dr, &b->xp};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 8; i++)
            T[d][i] = i == 1 || i == 4 ? (d ? tw[i]->g : tw[i]->c) : at_n(d ? tw[i]->g : tw[i]->c, n);
    tb_bn_fold f[2];
    tb_fconv_args a[2];
    for (int d = 0; d < 2; d++) {
        tb_bn_fold fd = {d ? b->scale.g : b->scale.c,   d ? b->bias.g : b->bias.c,   d ? b->mean.g : b->mean.c,
                         d ? b->invstd.g : b->invstd.c, d ? b->gamma.g : b->gamma.c, d ? b->beta.g : b->beta.c};
        f[d] = fd;
        memset(&a[d], 0, sizeof a[d]);
        a[d].g = &geom, a[d].x = &T[d][0], a[d].pro = fc->pro ? &f[d] : NULL, a[d].w = &T[d][1], a[d].y = &T[d][2];
        a[d].sum = d ? b->sum.g : b->sum.c, a[d].sqsum = d ? b->sqsum.g : b->sqsum.c;
        a[d].dy = &T[d][3], a[d].dw = &T[d][4], a[d].dx = &T[d][5], a[d].accumulate_dx = 1, a[d].dr = &T[d][6];
        a[d].dgamma = d ? b->dgamma.g : b->dgamma.c, a[d].dbeta = d ? b->dbeta.g : b->dbeta.c;
        a[d].xp = &T[d][7];
    }
    char what[160];
    double tol = pr->tol;
    g_cpu->fconv_forward(g_cpu, NULL, &a[0]);
    g_gpu->fconv_forward(g_gpu, gplan, &a[1]);
    /* compare views of batch n */
    twin yv = b->y;
    yv.c = T[0][2], yv.g = T[1][2];
    snprintf(what, sizeof what, "  %s n=%d: y = conv(%sx)", tag, n, fc->pro ? "pro " : "");
    cmp_t(what, &yv, tol);
    int C = fc->cout, hw = T[0][2].h * T[0][2].w;
    double *abs_sum = calloc((size_t)C, sizeof *abs_sum), *abs_sq = calloc((size_t)C, sizeof *abs_sq);
    const float *yc = T[0][2].data;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            for (int k = 0; k < hw; k++) {
                double v = yc[((size_t)i * C + c) * hw + k];
                abs_sum[c] += fabs(v), abs_sq[c] += v * v;
            }
    snprintf(what, sizeof what, "  %s n=%d: sum of y per channel (of sum |y|)", tag, n);
    cmp_v(what, &b->sum, 2 * tol, abs_sum);
    snprintf(what, sizeof what, "  %s n=%d: sum of y^2 per channel", tag, n);
    cmp_v(what, &b->sqsum, 4 * tol, abs_sq);
    free(abs_sum), free(abs_sq);
    /* finalize the CPU's sums on both */
    g_gpu->copy_h2d(g_gpu, b->sum.g, b->sum.c, (size_t)C * 4);
    g_gpu->copy_h2d(g_gpu, b->sqsum.g, b->sqsum.c, (size_t)C * 4);
    tb_bn_finalize_args fa0 = fin_args(b, 0, C, (double)n * hw), fa1 = fin_args(b, 1, C, (double)n * hw);
    g_cpu->bn_finalize(g_cpu, NULL, &fa0);
    g_gpu->bn_finalize(g_gpu, gplan, &fa1);
    vec *fo[6] = {&b->sm, &b->si, &b->sc_o, &b->bi_o, &b->rm, &b->rv};
    static const char *fn[6] = {"saved mean", "saved 1/std", "scale", "bias", "running mean", "running var"};
    for (int k = 0; k < 6; k++) {
        snprintf(what, sizeof what, "  %s n=%d: finalize %s", tag, n, fn[k]);
        cmp_v(what, fo[k], 1e-4, NULL);
    }
    if (!fc->pro) return;
    g_cpu->fconv_backward_filter(g_cpu, NULL, &a[0]);
    g_gpu->fconv_backward_filter(g_gpu, gplan, &a[1]);
    snprintf(what, sizeof what, "  %s n=%d: dw = corr(pro x, dy)", tag, n);
    cmp_t(what, &b->dw, 2 * tol);
    g_cpu->fconv_backward_data(g_cpu, NULL, &a[0]);
    g_gpu->fconv_backward_data(g_gpu, gplan, &a[1]);
    g_cpu->bn_input_grad(g_cpu, &a[0]);
    g_gpu->bn_input_grad(g_gpu, &a[1]);
    twin v6 = b->dr, v5 = b->dx;
    v6.c = T[0][6], v6.g = T[1][6], v5.c = T[0][5], v5.g = T[1][5];
    snprintf(what, sizeof what, "  %s n=%d: dr = convT(dy, w) * relu mask", tag, n);
    cmp_t(what, &v6, tol);
    snprintf(what, sizeof what, "  %s n=%d: dx += BN input gradient", tag, n);
    cmp_t(what, &v5, 2 * tol);
    snprintf(what, sizeof what, "  %s n=%d: dgamma", tag, n);
    cmp_v(what, &b->dgamma, 2 * tol, NULL);
    snprintf(what, sizeof what, "  %s n=%d: dbeta", tag, n);
    cmp_v(what, &b->dbeta, 2 * tol, NULL);
}

static void make_bufs(const fcase *fc, const fprec *pr, bufs *b) {
    int cin = fc->cin, cout = fc->cout, n = fc->n, hw = fc->h * fc->w;
    int ho = (fc->h + 2 * fc->pad - fc->k) / fc->stride + 1, wo = (fc->w + 2 * fc->pad - fc->k) / fc->stride + 1;
    float *m = malloc(6 * (size_t)cin * sizeof *m);
    fold_values(cin, m, m + cin, m + 2 * cin, m + 3 * cin, m + 4 * cin, m + 5 * cin);
    float *xv = x_values(n, cin, hw, fc->pro ? m + 4 * cin : NULL, fc->pro ? m + 5 * cin : NULL, pr->dt);
    size_t nw = (size_t)cout * cin * fc->k * fc->k;
    float *wv = malloc(nw * sizeof *wv);
    for (size_t i = 0; i < nw; i++) wv[i] = (float)((2 * tb_rng_uniform(&g_rng) - 1) / sqrt(cin * fc->k * fc->k));
    size_t ny = (size_t)n * cout * ho * wo, nx = (size_t)n * cin * hw;
    float *zero = calloc(ny > nx ? ny : nx, sizeof *zero);
    b->x = mk(n, cin, fc->h, fc->w, pr->dt, TB_NHWC, xv);
    b->w = mk(cout, cin, fc->k, fc->k, pr->dt, TB_NHWC, wv);
    b->y = mk(n, cout, ho, wo, pr->dt, TB_NHWC, zero);
    b->dy = mk(n, cout, ho, wo, pr->dt, TB_NHWC, NULL);
    b->dw = mk(cout, cin, fc->k, fc->k, pr->dt, TB_NHWC, zero);
    b->dx = mk(n, cin, fc->h, fc->w, pr->dt, TB_NHWC, NULL);
    b->dr = mk(n, cin, fc->h, fc->w, pr->dt, TB_NHWC, zero);
    b->xp = mk(n, cin, fc->h, fc->w, pr->dt, TB_NHWC, zero);
    vec *vi[6] = {&b->mean, &b->invstd, &b->gamma, &b->beta, &b->scale, &b->bias};
    for (int k = 0; k < 6; k++) *vi[k] = mkv(cin, m + k * cin);
    b->dgamma = mkv(cin, NULL), b->dbeta = mkv(cin, NULL);
    b->sum = mkv(cout, NULL), b->sqsum = mkv(cout, NULL);
    float *o = malloc(4 * (size_t)cout * sizeof *o);
    for (int c = 0; c < cout; c++)
        o[c] = (float)(0.5 + tb_rng_uniform(&g_rng)), o[cout + c] = (float)(tb_rng_uniform(&g_rng) - 0.5),
        o[2 * cout + c] = (float)(0.2 * tb_rng_uniform(&g_rng)),
        o[3 * cout + c] = (float)(0.5 + tb_rng_uniform(&g_rng));
    b->g_o = mkv(cout, o), b->b_o = mkv(cout, o + cout), b->rm = mkv(cout, o + 2 * cout),
    b->rv = mkv(cout, o + 3 * cout);
    b->sm = mkv(cout, NULL), b->si = mkv(cout, NULL), b->sc_o = mkv(cout, NULL), b->bi_o = mkv(cout, NULL);
    free(m), free(xv), free(wv), free(zero), free(o);
}

static void free_bufs(bufs *b) {
    twin *t[8] = {&b->x, &b->w, &b->y, &b->dy, &b->dw, &b->dx, &b->dr, &b->xp};
    vec *v[18] = {&b->sum,   &b->sqsum, &b->mean, &b->invstd, &b->gamma, &b->beta, &b->scale, &b->bias, &b->dgamma,
                  &b->dbeta, &b->g_o,   &b->b_o,  &b->rm,     &b->rv,    &b->sm,   &b->si,    &b->sc_o, &b->bi_o};
    for (int i = 0; i < 8; i++) drop(t[i]);
    for (int i = 0; i < 18; i++) dropv(v[i]);
}

/* Whether a plan's description shows conv + statistics on a fused graph (3 channels, or padded to 4). */
static int graph_reached(const char *desc) {
    return strstr(desc, " conv+stats engine") || strstr(desc, " conv+stats (input padded to 4 channels) engine");
}

/* One case against the CPU twins; 1 when its conv + statistics ran on a fused graph. first_path (may be
 * NULL): the plan's description at its first batch size. */
static int run_case(const fcase *fc, int pi, int forced, char *first_path, size_t len) {
    const fprec *pr = &k_precs[pi];
    tb_cuda_fused_force(g_gpu, forced ? 0xFu : 0u);
    bufs b;
    make_bufs(fc, pr, &b);
    tb_conv_geom geom = {fc->cin, fc->cout, fc->k, fc->stride, fc->pad};
    /* the node's conv plan on the conv's own input (xp with a prologue), as the graph makes it */
    tb_tensor *cin_t = fc->pro ? &b.xp.g : &b.x.g;
    void *cplan = g_gpu->conv_plan(g_gpu, &geom, cin_t, &b.w.g, &b.y.g, fc->pro ? &b.dr.g : NULL, &b.dw.g, &b.dy.g);
    tb_bn_fold f = {b.scale.g, b.bias.g, b.mean.g, b.invstd.g, b.gamma.g, b.beta.g};
    tb_bn_finalize_args fa = fin_args(&b, 1, fc->cout, (double)fc->n * b.y.g.h * b.y.g.w);
    tb_fconv_args a;
    memset(&a, 0, sizeof a);
    a.g = &geom, a.x = &b.x.g, a.pro = fc->pro ? &f : NULL, a.w = &b.w.g, a.y = &b.y.g, a.sum = b.sum.g;
    a.sqsum = b.sqsum.g, a.dy = &b.dy.g, a.dw = &b.dw.g, a.dx = &b.dx.g, a.dr = &b.dr.g, a.xp = &b.xp.g;
    a.dgamma = b.dgamma.g, a.dbeta = b.dbeta.g, a.conv_plan = cplan, a.fin = &fa;
    unsigned want = TB_FCONV_FWD | (fc->pro ? TB_FCONV_WGRAD | TB_FCONV_DGRAD : 0), got = 0;
    void *gplan = g_gpu->fconv_plan(g_gpu, &a, want, &got);
    char desc[2048], tag[160];
    g_gpu->fconv_plan_describe(g_gpu, gplan, desc, sizeof desc);
    printf("# %s %s (%s): got %s%s%s; path: %s\n", pr->name, fc->name, forced ? "forced composition" : "graphs",
           got & TB_FCONV_FWD ? "fwd " : "", got & TB_FCONV_WGRAD ? "wgrad " : "", got & TB_FCONV_DGRAD ? "dgrad" : "",
           desc);
    int reached = !forced && graph_reached(desc);
    g_graph_cases[pi] += reached;
    if (first_path) snprintf(first_path, len, "%s", desc);
    if (forced) TB_CHECK(got == want, "%s %s: a forced composition reports every op present", pr->name, fc->name);
    snprintf(tag, sizeof tag, "%s %s %s", pr->name, fc->name, forced ? "(composition)" : "");
    run_ops(fc, pr, &b, gplan, fc->n, tag);
    run_ops(fc, pr, &b, gplan, fc->n2, tag); /* a smaller batch on the same plans */
    g_gpu->fconv_plan_free(g_gpu, gplan);
    g_gpu->conv_plan_free(g_gpu, cplan);
    free_bufs(&b);
    tb_cuda_fused_force(g_gpu, 0);
    return reached;
}

/* bn_apply: plain, with a residual, with a folded shortcut BN; ReLU or not. */
static void test_apply(int pi) {
    const fprec *pr = &k_precs[pi];
    int n = 4, C = 72, h = 9, w = 7; /* C % 8 == 0: the 16-byte path; odd sizes elsewhere */
    for (int shape = 0; shape < 2; shape++, C = 13) {
        twin x = mk(n, C, h, w, pr->dt, TB_NHWC, NULL), z = mk(n, C, h, w, pr->dt, TB_NHWC, NULL);
        twin y = mk(n, C, h, w, pr->dt, TB_NHWC, NULL);
        float *v = malloc(4 * (size_t)C * sizeof *v);
        for (int i = 0; i < 4 * C; i++) v[i] = (float)(2 * tb_rng_uniform(&g_rng) - 1);
        vec s = mkv(C, v), bb = mkv(C, v + C), zs = mkv(C, v + 2 * C), zb = mkv(C, v + 3 * C);
        for (int mode = 0; mode < 3; mode++)
            for (int relu = 0; relu < 2; relu++) {
                tb_bn_apply_args a0 = {&x.c,   s.c,  bb.c, mode ? &z.c : NULL, mode == 2 ? zs.c : NULL,
                                       mode == 2 ? zb.c : NULL, relu, &y.c, NULL, NULL, 0};
                tb_bn_apply_args a1 = {&x.g,   s.g,  bb.g, mode ? &z.g : NULL, mode == 2 ? zs.g : NULL,
                                       mode == 2 ? zb.g : NULL, relu, &y.g, NULL, NULL, 0};
                g_cpu->bn_apply(g_cpu, &a0);
                g_gpu->bn_apply(g_gpu, &a1);
                char what[160];
                snprintf(what, sizeof what, "%s bn_apply C=%d %s%s", pr->name, C,
                         mode == 0   ? "x*s+b"
                         : mode == 1 ? "x*s+b+z"
                                     : "x*s+b+z*zs+zb",
                         relu ? " relu" : "");
                cmp_t(what, &y, pr->tol);
            }
        drop(&x), drop(&z), drop(&y);
        dropv(&s), dropv(&bb), dropv(&zs), dropv(&zb);
        free(v);
    }
}

/* bn_apply of a BatchNorm node (its plan and reserve: a block's end under
 * --fuse graph) writes the own kernels' ReLU mask where the 16-byte path
 * runs (C % 8 == 0) and nowhere else; the node's backward (the own kernels:
 * its statistics come from elsewhere) from that mask gives the bits of the
 * backward from y (cuda_bn.c's test switch off); a planted all-ones mask
 * (every element kept) changes dx, so the backward does read it. */
static void test_apply_mask(int pi) {
    const fprec *pr = &k_precs[pi];
    const int n = 4, h = 9, w = 7;
    for (int C = 72; C; C = C == 72 ? 13 : 0) {
        twin x = mk(n, C, h, w, pr->dt, TB_NHWC, NULL), z = mk(n, C, h, w, pr->dt, TB_NHWC, NULL);
        twin y = mk(n, C, h, w, pr->dt, TB_NHWC, NULL), dy = mk(n, C, h, w, pr->dt, TB_NHWC, NULL);
        twin dx = mk(n, C, h, w, pr->dt, TB_NHWC, NULL), dz = mk(n, C, h, w, pr->dt, TB_NHWC, NULL);
        float *v = malloc(8 * (size_t)C * sizeof *v);
        for (int i = 0; i < 8 * C; i++) v[i] = (float)(0.5 + tb_rng_uniform(&g_rng)); /* gamma, invstd > 0 */
        for (int i = 0; i < 3 * C; i++) v[i] -= 1.0f; /* scale, bias, mean in [-0.5, 0.5) */
        vec s = mkv(C, v), bb = mkv(C, v + C), mean = mkv(C, v + 2 * C), invstd = mkv(C, v + 3 * C);
        vec gamma = mkv(C, v + 4 * C), beta = mkv(C, v + 5 * C), rm = mkv(C, v + 6 * C), rv = mkv(C, v + 7 * C);
        vec dg = mkv(C, NULL), db = mkv(C, NULL);
        tb_bn_args a = {&x.g, &z.g, &y.g, 1, gamma.g, beta.g, rm.g, rv.g, mean.g, invstd.g,
                        0.1, 1e-5, NULL, NULL, 0, 1, 0};
        a.plan = g_gpu->bn_plan(g_gpu, &a, &a.reserve_bytes);
        a.reserve = a.reserve_bytes ? g_gpu->alloc(g_gpu, a.reserve_bytes) : NULL;
        tb_bn_apply_args ap = {&x.g, s.g, bb.g, &z.g, NULL, NULL, 1, &y.g, a.plan, a.reserve, a.reserve_bytes};
        g_gpu->bn_apply(g_gpu, &ap);
        const int want = C % 8 == 0 ? n : 0, got = tb_cuda_bn_plan_masked(a.plan);
        TB_CHECK(got == want, "%s bn_apply C=%d of a BN node: its ReLU mask written for batch %d (want %d)", pr->name,
                 C, got, want);
        float *out[3][4] = {{NULL}};
        for (int run = 0; want && run < 3; run++) { /* the mask, y (switch off), the planted all-ones mask */
            tb_cuda_bn_relu_mask(g_gpu, run != 1);
            if (run == 2) {
                unsigned char *ones = malloc(a.reserve_bytes);
                memset(ones, 0xff, a.reserve_bytes);
                g_gpu->copy_h2d(g_gpu, a.reserve, ones, a.reserve_bytes);
                free(ones);
            }
            tb_bn_grads g = {&dy.g, &dx.g, &dz.g, 0, 0, dg.g, db.g};
            g_gpu->bn_backward(g_gpu, &a, &g);
            out[run][0] = down(&dx.g), out[run][1] = down(&dz.g);
            out[run][2] = malloc((size_t)C * 4), out[run][3] = malloc((size_t)C * 4);
            g_gpu->copy_d2h(g_gpu, out[run][2], dg.g, (size_t)C * 4);
            g_gpu->copy_d2h(g_gpu, out[run][3], db.g, (size_t)C * 4);
        }
        tb_cuda_bn_relu_mask(g_gpu, 1);
        const size_t ne = (size_t)n * C * h * w;
        static const char *names[4] = {"dx", "dz", "dgamma", "dbeta"};
        for (int k = 0; want && k < 4; k++)
            TB_CHECK(memcmp(out[0][k], out[1][k], (k < 2 ? ne : (size_t)C) * 4) == 0,
                     "%s C=%d: the applied BN's backward %s from bn_apply's ReLU mask = from y, bit for bit", pr->name,
                     C, names[k]);
        size_t differ = 0;
        for (size_t i = 0; want && i < ne; i++) differ += out[2][0][i] != out[1][0][i];
        if (want)
            TB_CHECK(differ > 0, "%s C=%d: a planted all-ones ReLU mask changes dx (%zu of %zu elements)", pr->name, C,
                     differ, ne);
        for (int run = 0; run < 3; run++)
            for (int k = 0; k < 4; k++) free(out[run][k]);
        if (a.reserve) g_gpu->release(g_gpu, a.reserve);
        g_gpu->bn_plan_free(g_gpu, a.plan);
        drop(&x), drop(&z), drop(&y), drop(&dy), drop(&dx), drop(&dz);
        vec *vs[] = {&s, &bb, &mean, &invstd, &gamma, &beta, &rm, &rv, &dg, &db};
        for (int i = 0; i < 10; i++) dropv(vs[i]);
        free(v);
    }
}

/* The planted error (see the header): a dgamma whose largest channel is 10 % off, which the rule must fail at
 * each precision's dgamma tolerance. The same 64 draws as before: the op cases' inputs stay as they were. */
static void test_planted(void) {
    float ref[64], got[64];
    int top = 0;
    for (int i = 0; i < 64; i++) {
        ref[i] = (float)(tb_rng_uniform(&g_rng) - 0.5);
        if (fabsf(ref[i]) > fabsf(ref[top])) top = i;
    }
    for (int pi = 0; pi < 2; pi++) {
        memcpy(got, ref, sizeof got);
        got[top] = ref[top] * 1.10f;
        double tol = 2 * k_precs[pi].tol, err, mx;
        int ok = within(got, ref, 64, tol, NULL, &err, &mx);
        char what[160];
        snprintf(what, sizeof what, "planted: %s dgamma, its largest channel 10 %% off (bound there %.1f %% of it)",
                 k_precs[pi].name, 200 * tol);
        printf("%-78s err %9.2e of max %9.2e  %s\n", what, err, mx,
               ok ? "PASS (NOT caught)" : "FAIL (caught, as it must)");
        TB_CHECK(!ok, "the %s dgamma tolerance catches a planted 10 %% error in its largest channel", k_precs[pi].name);
    }
}

/* What test_cuda_fused_refused.c runs: case c of k_cases in fp16 on gpu, not forced. */
int test_cuda_fused_ncases(void) { return (int)(sizeof k_cases / sizeof k_cases[0]); }

int test_cuda_fused_case(tb_backend *gpu, int c, char *first_path, size_t len) {
    g_gpu = gpu;
    return run_case(&k_cases[c], 1, 0, first_path, len);
}

int main(int argc, char **argv) {
    char why[256];
    if (tb_cuda_device_count(why, sizeof why) <= 0) {
        printf("SKIP: test_cuda_fused needs a CUDA device: %s\n", why);
        return 77;
    }
    tb_rng_seed(&g_rng, 30, 1);
    tb_backend_opts co = {.threads = 4}, go = {0};
    int step = argc > 1 && strcmp(argv[1], "step") == 0, refused = argc > 1 && strcmp(argv[1], "refused") == 0;
    go.no_autotune = step; /* the step: heuristic choices (fewer plans to time; the same math) */
    g_cpu = tb_cpu_backend_create(&co);
    if (refused) {
        test_cuda_fused_refused();
        g_cpu->destroy(g_cpu);
        return tb_test_exit("cuda_fused_refused");
    }
    char err[256];
    g_gpu = tb_cuda_backend_create(&go, err, sizeof err);
    if (!g_gpu) {
        printf("SKIP: %s\n", err);
        return 77;
    }
    if (step) {
        test_cuda_fused_step(g_gpu, &g_rng);
    } else {
        test_planted();
        for (int pi = 0; pi < 2; pi++) {
            for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++)
                for (int forced = 0; forced < 2; forced++) run_case(&k_cases[c], pi, forced, NULL, 0);
            test_apply(pi);
        }
        for (int pi = 0; pi < 2; pi++) test_apply_mask(pi); /* after: the cases above draw what they always drew */
        printf("# fused graphs reached (conv + statistics on a cuDNN graph): bf16 %d of %zu shapes, fp16 %d of %zu\n",
               g_graph_cases[0], sizeof k_cases / sizeof k_cases[0], g_graph_cases[1],
               sizeof k_cases / sizeof k_cases[0]);
        /* fp16 NHWC is every cuDNN sample's configuration: no fused graph at all there is a finding to fail on */
        TB_CHECK(g_graph_cases[1] > 0, "fp16: some shape's conv + statistics runs on cuDNN's fused graph");
    }
    g_gpu->destroy(g_gpu);
    g_cpu->destroy(g_cpu);
    return tb_test_exit(step ? "cuda_fused_step" : "cuda_fused");
}
