/* test_cpu_ops.c - every op of the CPU backend against an independent
 * reference.
 *
 * Forward passes are compared, element by element, with naive direct loops
 * in double precision. Backward passes are compared with central finite
 * differences of L = sum(r .* y) for a random r: L is evaluated with the
 * double reference forward (so the differences are accurate to ~1e-9), and
 * the float op's analytic gradient, run with dy = r, must match at a sample
 * of entries of every input and parameter. Gradients are checked in both
 * modes: overwrite (output pre-filled with NaN, so a stray read shows) and
 * accumulate (output pre-filled with random data that must be added to).
 *
 * A check passes when |got - ref| <= atol + rtol * |ref| for every entry;
 * each check prints one line, and the program exits 1 if any fails.
 * Tolerances (float32 ops, inputs and r of order 1):
 *   exact ops (ReLU and max pool forward)        atol 0,    rtol 0
 *   forward, SGD, ties vs double reference       atol 1e-5, rtol 1e-5
 *   backward vs finite differences (h = 1e-6)    atol 1e-4, rtol 1e-4
 * Observed errors are 5x to 100x below these: float rounding over sums of
 * up to a few thousand terms (largest: conv dw over 4 images of 33x32,
 * ~2e-5 on values ~20). The finite differences themselves are good to
 * ~1e-8 (L is linear or smooth in double; ReLU and max pool inputs are
 * kept away from their kinks).
 */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cpu/cpu_backend.h"
#include "model/cpu/cpu_internal.h" /* to force the conv code paths */
#include "core/log.h"
#include "core/rng.h"

#define FWD_ATOL 1e-5
#define FWD_RTOL 1e-5
#define FD_ATOL 1e-4
#define FD_RTOL 1e-4
#define FD_H 1e-6          /* finite-difference step (double reference) */
#define FD_SAMPLES 400     /* entries checked per gradient at most */

static int g_checks, g_failed;
static tb_rng g_rng;

/* ---- reporting ------------------------------------------------------------- */

static void report(const char *what, double maxabs, double maxrel, int ok) {
    g_checks++;
    if (!ok) g_failed++;
    printf("%-64s maxabs %9.2e  maxrel %9.2e  %s\n", what, maxabs, maxrel, ok ? "PASS" : "FAIL");
    fflush(stdout);
}

/* got[idx[i]] against ref[i] (+ base[idx[i]] when base), i < n; idx NULL:
 * the identity. */
static int check_at(const char *what, const float *got, const size_t *idx, const double *ref,
                    size_t n, const double *base, double atol, double rtol) {
    double maxabs = 0.0, maxrel = 0.0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        size_t j = idx ? idx[i] : i;
        double r = ref[i] + (base ? base[j] : 0.0);
        double e = fabs((double)got[j] - r);
        if (!(e <= atol + rtol * fabs(r))) ok = 0; /* NaN fails */
        if (!(e <= maxabs)) maxabs = e;
        if (r != 0.0 && !(e / fabs(r) <= maxrel)) maxrel = e / fabs(r);
    }
    report(what, maxabs, maxrel, ok);
    return ok;
}

static int check_all(const char *what, const float *got, const double *ref, size_t n,
                     double atol, double rtol) {
    return check_at(what, got, NULL, ref, n, NULL, atol, rtol);
}

/* ---- data ---------------------------------------------------------------------- */

/* n uniform values in [lo, hi), rounded to float: d gets the same values. */
static void fill_uniform(float *f, double *d, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(lo + (hi - lo) * tb_rng_uniform(&g_rng));
        if (d) d[i] = f[i];
    }
}

static void fill_nan(float *f, size_t n) {
    for (size_t i = 0; i < n; i++) f[i] = NAN;
}

static double *dalloc(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) tb_die("test: out of memory");
    return p;
}

static tb_tensor tensor(void *data, int n, int c, int h, int w) {
    tb_tensor t = {data, n, c, h, w, TB_F32, TB_NCHW};
    return t;
}

/* Up to FD_SAMPLES entry indices of an n-entry tensor: all when few. */
static size_t pick(size_t n, size_t *idx) {
    if (n <= FD_SAMPLES) {
        for (size_t i = 0; i < n; i++) idx[i] = i;
        return n;
    }
    for (size_t i = 0; i < FD_SAMPLES; i++) idx[i] = (size_t)tb_rng_below(&g_rng, n);
    return FD_SAMPLES;
}

/* Central differences of L (reading v through ctx) at the entries idx. */
typedef double (*loss_fn)(void *ctx);
static void fd(loss_fn L, void *ctx, double *v, const size_t *idx, size_t ns, double *g) {
    for (size_t i = 0; i < ns; i++) {
        double save = v[idx[i]];
        v[idx[i]] = save + FD_H;
        double lp = L(ctx);
        v[idx[i]] = save - FD_H;
        double lm = L(ctx);
        v[idx[i]] = save;
        g[i] = (lp - lm) / (2.0 * FD_H);
    }
}

static double dot(const double *a, const double *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ---- expected failures ----------------------------------------------------------- */

static jmp_buf g_jmp;
static volatile int g_expect_fatal;

static void abort_hook(int code) {
    if (g_expect_fatal) longjmp(g_jmp, 1);
    exit(code);
}

/* Runs stmt, which must end in tb_die / TB_FATAL (its message is printed). */
#define EXPECT_FATAL(what, stmt)                                                   \
    do {                                                                           \
        printf("# expecting an error from: %s\n", what);                           \
        fflush(stdout);                                                            \
        g_expect_fatal = 1;                                                        \
        if (setjmp(g_jmp) == 0) {                                                  \
            stmt;                                                                  \
            g_expect_fatal = 0;                                                    \
            report(what, 0.0, 0.0, 0);                                             \
        } else {                                                                   \
            g_expect_fatal = 0;                                                    \
            report(what, 0.0, 0.0, 1);                                             \
        }                                                                          \
    } while (0)

/* ==== convolution ================================================================ */

typedef struct {
    int n, cin, cout, h, w, k, s, p;
} conv_case;

static int conv_out(int in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }

static void ref_conv(const conv_case *c, const double *x, const double *w, double *y) {
    int ho = conv_out(c->h, c->k, c->s, c->p), wo = conv_out(c->w, c->k, c->s, c->p);
    for (int n = 0; n < c->n; n++)
        for (int co = 0; co < c->cout; co++)
            for (int oh = 0; oh < ho; oh++)
                for (int ow = 0; ow < wo; ow++) {
                    double s = 0.0;
                    for (int ci = 0; ci < c->cin; ci++)
                        for (int kh = 0; kh < c->k; kh++)
                            for (int kw = 0; kw < c->k; kw++) {
                                int ih = oh * c->s - c->p + kh, iw = ow * c->s - c->p + kw;
                                if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w) continue;
                                s += x[((size_t)(n * c->cin + ci) * c->h + ih) * c->w + iw] *
                                     w[((size_t)(co * c->cin + ci) * c->k + kh) * c->k + kw];
                            }
                    y[((size_t)(n * c->cout + co) * ho + oh) * wo + ow] = s;
                }
}

typedef struct {
    const conv_case *c;
    double *x, *w, *r, *y;
    size_t ny;
} conv_ctx;

static double conv_loss(void *p) {
    conv_ctx *t = p;
    ref_conv(t->c, t->x, t->w, t->y);
    return dot(t->r, t->y, t->ny);
}

/* The conv paths a backend state can be pushed into. */
typedef struct {
    const char *name;
    int threads, min_cols;
    size_t ws_cap;
} conv_mode;

static void test_conv(const conv_case *c, const conv_mode *modes, int nmodes) {
    int ho = conv_out(c->h, c->k, c->s, c->p), wo = conv_out(c->w, c->k, c->s, c->p);
    size_t nx = (size_t)c->n * c->cin * c->h * c->w;
    size_t nw = (size_t)c->cout * c->cin * c->k * c->k;
    size_t ny = (size_t)c->n * c->cout * ho * wo;
    char tag[80], what[160];
    snprintf(tag, sizeof tag, "N%d %d->%d %dx%d k%d s%d p%d", c->n, c->cin, c->cout, c->h, c->w,
             c->k, c->s, c->p);

    /* reference values and gradients, shared by all modes */
    double *xd = dalloc(nx), *wd = dalloc(nw), *rd = dalloc(ny), *yref = dalloc(ny);
    double *ybuf = dalloc(ny), *Dx = dalloc(nx), *Dw = dalloc(nw);
    float *xf = malloc(nx * 4), *wf = malloc(nw * 4), *rf = malloc(ny * 4);
    float *dxinit = malloc(nx * 4), *dwinit = malloc(nw * 4);
    fill_uniform(xf, xd, nx, -1, 1);
    fill_uniform(wf, wd, nw, -1, 1);
    fill_uniform(rf, rd, ny, -1, 1);
    fill_uniform(dxinit, Dx, nx, -1, 1);
    fill_uniform(dwinit, Dw, nw, -1, 1);
    ref_conv(c, xd, wd, yref);
    size_t *ix = malloc(FD_SAMPLES * sizeof *ix), *iw = malloc(FD_SAMPLES * sizeof *iw);
    double *gx = dalloc(FD_SAMPLES), *gw = dalloc(FD_SAMPLES);
    size_t sx = pick(nx, ix), sw = pick(nw, iw);
    conv_ctx ctx = {c, xd, wd, rd, ybuf, ny};
    fd(conv_loss, &ctx, xd, ix, sx, gx);
    fd(conv_loss, &ctx, wd, iw, sw, gw);

    for (int m = 0; m < nmodes; m++) {
        tb_backend_opts opts = {.threads = modes[m].threads};
        tb_backend *be = tb_cpu_backend_create(&opts);
        cpu_state *st = cpu_state_of(be);
        if (modes[m].min_cols) st->conv_min_cols = modes[m].min_cols;
        if (modes[m].ws_cap) st->ws_cap_bytes = modes[m].ws_cap;
        float *x = be->alloc(be, nx * 4), *w = be->alloc(be, nw * 4), *y = be->alloc(be, ny * 4);
        float *dy = be->alloc(be, ny * 4), *dx = be->alloc(be, nx * 4), *dw = be->alloc(be, nw * 4);
        be->copy_h2d(be, x, xf, nx * 4);
        be->copy_h2d(be, w, wf, nw * 4);
        be->copy_h2d(be, dy, rf, ny * 4);
        tb_tensor tx = tensor(x, c->n, c->cin, c->h, c->w);
        tb_tensor tw = tensor(w, c->cout, c->cin, c->k, c->k);
        tb_tensor ty = tensor(y, c->n, c->cout, ho, wo);
        tb_tensor tdy = tensor(dy, c->n, c->cout, ho, wo);
        tb_tensor tdx = tensor(dx, c->n, c->cin, c->h, c->w);
        tb_tensor tdw = tensor(dw, c->cout, c->cin, c->k, c->k);
        tb_conv_geom g = {c->cin, c->cout, c->k, c->s, c->p};
        void *plan = be->conv_plan(be, &g, &tx, &tw, &ty, &tdx, &tdw, &tdy);

        fill_nan(y, ny);
        be->conv_forward(be, plan, &g, &tx, &tw, &ty);
        snprintf(what, sizeof what, "conv fwd        %s [%s]", tag, modes[m].name);
        check_all(what, y, yref, ny, FWD_ATOL, FWD_RTOL);

        for (int acc = 0; acc <= 1; acc++) {
            if (acc) memcpy(dx, dxinit, nx * 4);
            else fill_nan(dx, nx);
            be->conv_backward_data(be, plan, &g, &tdy, &tw, &tdx, acc);
            snprintf(what, sizeof what, "conv bwd data   %s acc%d [%s]", tag, acc, modes[m].name);
            check_at(what, dx, ix, gx, sx, acc ? Dx : NULL, FD_ATOL, FD_RTOL);

            if (acc) memcpy(dw, dwinit, nw * 4);
            else fill_nan(dw, nw);
            be->conv_backward_filter(be, plan, &g, &tx, &tdy, &tdw, acc);
            snprintf(what, sizeof what, "conv bwd filter %s acc%d [%s]", tag, acc, modes[m].name);
            check_at(what, dw, iw, gw, sw, acc ? Dw : NULL, FD_ATOL, FD_RTOL);
        }
        be->conv_plan_free(be, plan);
        be->release(be, x), be->release(be, w), be->release(be, y);
        be->release(be, dy), be->release(be, dx), be->release(be, dw);
        be->destroy(be);
    }
    free(xd), free(wd), free(rd), free(yref), free(ybuf), free(Dx), free(Dw);
    free(xf), free(wf), free(rf), free(dxinit), free(dwinit);
    free(ix), free(iw), free(gx), free(gw);
}

static void test_convs(void) {
    static const conv_case cases[] = {
        {3, 4, 5, 7, 5, 3, 1, 1},    /* 3x3, odd image */
        {3, 3, 6, 9, 11, 7, 2, 3},   /* the stem: 7x7 stride 2 pad 3 */
        {3, 6, 4, 5, 7, 1, 1, 0},    /* 1x1: no im2col */
        {3, 4, 8, 6, 6, 1, 1, 0},    /* 1x1 widening: filter split by Cout */
        {3, 6, 8, 7, 5, 1, 2, 0},    /* 1x1 stride 2 (downsample) */
        {3, 5, 4, 7, 5, 3, 2, 1},    /* 3x3 stride 2 */
        {3, 2, 3, 5, 4, 3, 2, 3},    /* pad 3 > k/2 */
        {3, 2, 3, 4, 4, 3, 1, 0},    /* no padding */
        {1, 3, 4, 6, 5, 3, 1, 1},    /* N=1 < threads */
        {3, 16, 12, 7, 5, 3, 1, 1},  /* channels enough for filter bands */
        {3, 12, 16, 6, 7, 3, 2, 1},  /* ... with stride 2 */
        {3, 8, 32, 5, 5, 1, 1, 0},   /* 1x1 widening, filter bands by Cout */
        {2, 3, 4, 33, 32, 3, 1, 1},  /* one image per GEMM */
        {4, 5, 3, 33, 32, 1, 1, 0},  /* 1x1, one image per GEMM */
    };
    static const conv_mode modes[] = {
        {"T2", 2, 0, 0},                     /* defaults: images grouped when small */
        {"T2 per-image", 2, 1, 0},           /* one image per GEMM, bands for odd N */
        {"T3 tiny scratch", 3, 1, 4096},     /* many bands to fit 4 KB of scratch */
        {"T1 grouped", 1, 1 << 30, 0},       /* the whole batch in one GEMM */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_conv(&cases[i], modes, (int)(sizeof modes / sizeof modes[0]));
}

/* ==== batch norm ==================================================================== */

typedef struct {
    int n, c, h, w, relu, has_z;
    double offset; /* added to x: a mean far from 0 */
} bn_case;

/* y = act(gamma*(x-mean)/sqrt(var+eps) + beta + z) with batch statistics;
 * mean and biased var per channel returned when asked. */
static void ref_bn_train(const bn_case *b, const double *x, const double *gamma,
                         const double *beta, const double *z, double *y, double *mean_out,
                         double *var_out) {
    size_t hw = (size_t)b->h * b->w, M = (size_t)b->n * hw;
    for (int c = 0; c < b->c; c++) {
        double s = 0.0, ss = 0.0;
        for (int n = 0; n < b->n; n++)
            for (size_t i = 0; i < hw; i++) s += x[((size_t)n * b->c + c) * hw + i];
        double mean = s / M;
        for (int n = 0; n < b->n; n++)
            for (size_t i = 0; i < hw; i++) {
                double d = x[((size_t)n * b->c + c) * hw + i] - mean;
                ss += d * d;
            }
        double var = ss / M, invstd = 1.0 / sqrt(var + 1e-5);
        if (mean_out) mean_out[c] = mean;
        if (var_out) var_out[c] = var;
        for (int n = 0; n < b->n; n++)
            for (size_t i = 0; i < hw; i++) {
                size_t o = ((size_t)n * b->c + c) * hw + i;
                double v = gamma[c] * (x[o] - mean) * invstd + beta[c] + (z ? z[o] : 0.0);
                y[o] = b->relu && v < 0.0 ? 0.0 : v;
            }
    }
}

typedef struct {
    const bn_case *b;
    double *x, *gamma, *beta, *z, *r, *y;
    size_t ny;
} bn_ctx;

static double bn_loss(void *p) {
    bn_ctx *t = p;
    ref_bn_train(t->b, t->x, t->gamma, t->beta, t->z, t->y, NULL, NULL);
    return dot(t->r, t->y, t->ny);
}

static void test_bn(tb_backend *be, const bn_case *b) {
    const int C = b->c;
    const size_t hw = (size_t)b->h * b->w, n = (size_t)b->n * C * hw, M = (size_t)b->n * hw;
    char tag[96], what[160];
    snprintf(tag, sizeof tag, "[%d,%d,%d,%d]%s%s%s", b->n, C, b->h, b->w,
             b->relu ? " relu" : "", b->has_z ? " +z" : "", b->offset != 0.0 ? " offset" : "");

    double *xd = dalloc(n), *zd = dalloc(n), *rd = dalloc(n), *yref = dalloc(n), *ybuf = dalloc(n);
    double *gd = dalloc(C), *bd = dalloc(C), *rm0 = dalloc(C), *rv0 = dalloc(C);
    double *mean = dalloc(C), *var = dalloc(C), *ref = dalloc(n > (size_t)C ? n : (size_t)C);
    double *Dx = dalloc(n), *Dz = dalloc(n);
    float *x = be->alloc(be, n * 4), *z = be->alloc(be, n * 4), *y = be->alloc(be, n * 4);
    float *dy = be->alloc(be, n * 4), *dx = be->alloc(be, n * 4), *dz = be->alloc(be, n * 4);
    float *gamma = be->alloc(be, C * 4), *beta = be->alloc(be, C * 4);
    float *rm = be->alloc(be, C * 4), *rv = be->alloc(be, C * 4);
    float *smean = be->alloc(be, C * 4), *sinv = be->alloc(be, C * 4);
    float *dgamma = be->alloc(be, C * 4), *dbeta = be->alloc(be, C * 4);
    float *dxinit = malloc(n * 4), *dzinit = malloc(n * 4);
    fill_uniform(x, xd, n, -1 + b->offset, 1 + b->offset);
    fill_uniform(z, zd, n, -1, 1);
    fill_uniform(dy, rd, n, -1, 1);
    fill_uniform(gamma, gd, C, 0.5, 1.5);
    fill_uniform(beta, bd, C, -0.5, 0.5);
    fill_uniform(rm, rm0, C, -0.2, 0.2);
    fill_uniform(rv, rv0, C, 0.5, 2.0);
    fill_uniform(dxinit, Dx, n, -1, 1);
    fill_uniform(dzinit, Dz, n, -1, 1);

    tb_tensor tx = tensor(x, b->n, C, b->h, b->w), tz = tensor(z, b->n, C, b->h, b->w);
    tb_tensor ty = tensor(y, b->n, C, b->h, b->w), tdy = tensor(dy, b->n, C, b->h, b->w);
    tb_tensor tdx = tensor(dx, b->n, C, b->h, b->w), tdz = tensor(dz, b->n, C, b->h, b->w);
    tb_bn_args a = {&tx, b->has_z ? &tz : NULL, &ty, b->relu, gamma, beta, rm, rv, smean, sinv,
                    0.1, 1e-5, NULL, NULL, 0, 0};

    /* forward, training: output, saved statistics, running statistics */
    fill_nan(y, n);
    be->bn_forward_train(be, &a);
    ref_bn_train(b, xd, gd, bd, b->has_z ? zd : NULL, yref, mean, var);
    snprintf(what, sizeof what, "bn fwd train y           %s", tag);
    check_all(what, y, yref, n, FWD_ATOL, FWD_RTOL);
    snprintf(what, sizeof what, "bn fwd train save_mean   %s", tag);
    check_all(what, smean, mean, C, FWD_ATOL, FWD_RTOL);
    for (int c = 0; c < C; c++) ref[c] = 1.0 / sqrt(var[c] + 1e-5);
    snprintf(what, sizeof what, "bn fwd train save_invstd %s", tag);
    check_all(what, sinv, ref, C, FWD_ATOL, FWD_RTOL);
    for (int c = 0; c < C; c++) ref[c] = 0.9 * rm0[c] + 0.1 * mean[c];
    snprintf(what, sizeof what, "bn running_mean          %s", tag);
    check_all(what, rm, ref, C, FWD_ATOL, FWD_RTOL);
    for (int c = 0; c < C; c++) ref[c] = 0.9 * rv0[c] + 0.1 * var[c] * M / (M - 1);
    snprintf(what, sizeof what, "bn running_var (unbiased) %s", tag);
    check_all(what, rv, ref, C, FWD_ATOL, FWD_RTOL);

    /* backward from the saved statistics, against differences of the
     * training forward */
    bn_ctx ctx = {b, xd, gd, bd, b->has_z ? zd : NULL, rd, ybuf, n};
    size_t *idx = malloc(FD_SAMPLES * sizeof *idx), *ic = malloc(FD_SAMPLES * sizeof *ic);
    double *gx = dalloc(FD_SAMPLES), *gz = dalloc(FD_SAMPLES);
    double *gg = dalloc(C), *gb = dalloc(C);
    size_t s = pick(n, idx), sc = pick(C, ic);
    fd(bn_loss, &ctx, xd, idx, s, gx);
    if (b->has_z) fd(bn_loss, &ctx, zd, idx, s, gz);
    fd(bn_loss, &ctx, gd, ic, sc, gg);
    fd(bn_loss, &ctx, bd, ic, sc, gb);
    for (int acc = 0; acc <= 1; acc++) {
        if (acc) memcpy(dx, dxinit, n * 4), memcpy(dz, dzinit, n * 4);
        else fill_nan(dx, n), fill_nan(dz, n);
        fill_nan(dgamma, C), fill_nan(dbeta, C);
        tb_bn_grads gr = {&tdy, &tdx, b->has_z ? &tdz : NULL, acc, acc, dgamma, dbeta};
        be->bn_backward(be, &a, &gr);
        snprintf(what, sizeof what, "bn bwd dx acc%d    %s", acc, tag);
        check_at(what, dx, idx, gx, s, acc ? Dx : NULL, FD_ATOL, FD_RTOL);
        if (b->has_z) {
            snprintf(what, sizeof what, "bn bwd dz acc%d    %s", acc, tag);
            check_at(what, dz, idx, gz, s, acc ? Dz : NULL, FD_ATOL, FD_RTOL);
        }
        snprintf(what, sizeof what, "bn bwd dgamma     %s", tag);
        check_at(what, dgamma, ic, gg, sc, NULL, FD_ATOL, FD_RTOL);
        snprintf(what, sizeof what, "bn bwd dbeta      %s", tag);
        check_at(what, dbeta, ic, gb, sc, NULL, FD_ATOL, FD_RTOL);
    }

    /* inference: running statistics (as updated above), left untouched */
    float *rm1 = malloc(C * 4), *rv1 = malloc(C * 4);
    memcpy(rm1, rm, C * 4), memcpy(rv1, rv, C * 4);
    fill_nan(y, n);
    be->bn_forward_infer(be, &a);
    for (int c = 0; c < b->c; c++)
        for (int nn = 0; nn < b->n; nn++)
            for (size_t i = 0; i < hw; i++) {
                size_t o = ((size_t)nn * C + c) * hw + i;
                double v = gd[c] * (xd[o] - rm[c]) / sqrt((double)rv[c] + 1e-5) + bd[c] +
                           (b->has_z ? zd[o] : 0.0);
                ref[o] = b->relu && v < 0.0 ? 0.0 : v;
            }
    snprintf(what, sizeof what, "bn fwd infer y    %s", tag);
    check_all(what, y, ref, n, FWD_ATOL, FWD_RTOL);
    snprintf(what, sizeof what, "bn fwd infer leaves running stats %s", tag);
    report(what, 0.0, 0.0, !memcmp(rm, rm1, C * 4) && !memcmp(rv, rv1, C * 4));

    free(rm1), free(rv1), free(idx), free(ic), free(gx), free(gz), free(gg), free(gb);
    free(xd), free(zd), free(rd), free(yref), free(ybuf), free(gd), free(bd), free(rm0);
    free(rv0), free(mean), free(var), free(ref), free(Dx), free(Dz), free(dxinit), free(dzinit);
    float *fs[] = {x, z, y, dy, dx, dz, gamma, beta, rm, rv, smean, sinv, dgamma, dbeta};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) be->release(be, fs[i]);
}

static void test_bns(tb_backend *be) {
    static const bn_case cases[] = {
        {3, 4, 7, 5, 0, 0, 0.0}, {3, 4, 7, 5, 1, 0, 0.0}, {3, 4, 7, 5, 0, 1, 0.0},
        {3, 4, 7, 5, 1, 1, 0.0}, {2, 3, 1, 1, 0, 0, 0.0}, {3, 5, 6, 6, 1, 1, 8.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_bn(be, &cases[i]);
}

/* ==== ReLU and add ==================================================================== */

typedef struct {
    double *x, *r;
    size_t n;
} relu_ctx;

static double relu_loss(void *p) {
    relu_ctx *t = p;
    double s = 0.0;
    for (size_t i = 0; i < t->n; i++) s += t->r[i] * (t->x[i] > 0.0 ? t->x[i] : 0.0);
    return s;
}

static void test_relu(tb_backend *be) {
    const int N = 3, C = 4, H = 7, W = 5;
    const size_t n = (size_t)N * C * H * W;
    double *xd = dalloc(n), *rd = dalloc(n), *ref = dalloc(n), *D = dalloc(n), *g = dalloc(n);
    float *x = be->alloc(be, n * 4), *y = be->alloc(be, n * 4), *dy = be->alloc(be, n * 4);
    float *dx = be->alloc(be, n * 4), *init = malloc(n * 4);
    fill_uniform(x, xd, n, -1, 1);
    for (size_t i = 0; i < n; i++) /* keep away from the kink at 0 */
        if (fabs(xd[i]) < 0.05) {
            x[i] = (float)(xd[i] + (xd[i] < 0 ? -0.05 : 0.05));
            xd[i] = x[i];
        }
    fill_uniform(dy, rd, n, -1, 1);
    fill_uniform(init, D, n, -1, 1);
    tb_tensor tx = tensor(x, N, C, H, W), ty = tensor(y, N, C, H, W);
    tb_tensor tdy = tensor(dy, N, C, H, W), tdx = tensor(dx, N, C, H, W);

    be->relu_forward(be, &tx, &ty);
    for (size_t i = 0; i < n; i++) ref[i] = xd[i] > 0.0 ? xd[i] : 0.0;
    check_all("relu fwd (exact)", y, ref, n, 0.0, 0.0);

    size_t *idx = malloc(n * sizeof *idx);
    size_t s = pick(n, idx);
    relu_ctx ctx = {xd, rd, n};
    fd(relu_loss, &ctx, xd, idx, s, g);
    for (int acc = 0; acc <= 1; acc++) {
        if (acc) memcpy(dx, init, n * 4);
        else fill_nan(dx, n);
        be->relu_backward(be, &ty, &tdy, &tdx, acc);
        check_at(acc ? "relu bwd acc1" : "relu bwd acc0", dx, idx, g, s, acc ? D : NULL, FD_ATOL,
                 FD_RTOL);
    }
    free(xd), free(rd), free(ref), free(D), free(g), free(init), free(idx);
    be->release(be, x), be->release(be, y), be->release(be, dy), be->release(be, dx);
}

typedef struct {
    double *a, *b, *r;
    size_t n;
} add_ctx;

static double add_loss(void *p) {
    add_ctx *t = p;
    double s = 0.0;
    for (size_t i = 0; i < t->n; i++) s += t->r[i] * (t->a[i] + t->b[i]);
    return s;
}

static void test_add(tb_backend *be) {
    const int N = 3, C = 4, H = 7, W = 5;
    const size_t n = (size_t)N * C * H * W;
    double *ad = dalloc(n), *bd = dalloc(n), *rd = dalloc(n), *ref = dalloc(n), *D = dalloc(n);
    double *ga = dalloc(n), *gb = dalloc(n);
    float *a = be->alloc(be, n * 4), *b = be->alloc(be, n * 4), *y = be->alloc(be, n * 4);
    float *dy = be->alloc(be, n * 4), *da = be->alloc(be, n * 4), *db = be->alloc(be, n * 4);
    float *init = malloc(n * 4);
    fill_uniform(a, ad, n, -1, 1);
    fill_uniform(b, bd, n, -1, 1);
    fill_uniform(dy, rd, n, -1, 1);
    fill_uniform(init, D, n, -1, 1);
    tb_tensor ta = tensor(a, N, C, H, W), tb = tensor(b, N, C, H, W), ty = tensor(y, N, C, H, W);
    tb_tensor tdy = tensor(dy, N, C, H, W), tda = tensor(da, N, C, H, W);
    tb_tensor tdb = tensor(db, N, C, H, W);

    be->add_forward(be, &ta, &tb, &ty);
    for (size_t i = 0; i < n; i++) ref[i] = ad[i] + bd[i];
    check_all("add fwd", y, ref, n, FWD_ATOL, FWD_RTOL);

    size_t *idx = malloc(n * sizeof *idx);
    size_t s = pick(n, idx);
    add_ctx ctx = {ad, bd, rd, n};
    fd(add_loss, &ctx, ad, idx, s, ga);
    fd(add_loss, &ctx, bd, idx, s, gb);
    for (int acc = 0; acc <= 1; acc++) { /* a and b in opposite modes */
        if (acc) memcpy(da, init, n * 4), fill_nan(db, n);
        else fill_nan(da, n), memcpy(db, init, n * 4);
        be->add_backward(be, &tdy, &tda, acc, &tdb, !acc);
        check_at(acc ? "add bwd da acc1" : "add bwd da acc0", da, idx, ga, s, acc ? D : NULL,
                 FD_ATOL, FD_RTOL);
        check_at(acc ? "add bwd db acc0" : "add bwd db acc1", db, idx, gb, s, acc ? NULL : D,
                 FD_ATOL, FD_RTOL);
    }
    fill_nan(da, n);
    be->add_backward(be, &tdy, &tda, 0, NULL, 0);
    check_at("add bwd da acc0, db NULL", da, idx, ga, s, NULL, FD_ATOL, FD_RTOL);
    free(ad), free(bd), free(rd), free(ref), free(D), free(ga), free(gb), free(init), free(idx);
    be->release(be, a), be->release(be, b), be->release(be, y);
    be->release(be, dy), be->release(be, da), be->release(be, db);
}

/* ==== pooling =========================================================================== */

typedef struct {
    int n, c, h, w, k, s, p;
} pool_case;

static void ref_maxpool(const pool_case *q, const double *x, double *y) {
    int ho = conv_out(q->h, q->k, q->s, q->p), wo = conv_out(q->w, q->k, q->s, q->p);
    for (int pl = 0; pl < q->n * q->c; pl++)
        for (int oh = 0; oh < ho; oh++)
            for (int ow = 0; ow < wo; ow++) {
                double m = -INFINITY;
                for (int kh = 0; kh < q->k; kh++)
                    for (int kw = 0; kw < q->k; kw++) {
                        int ih = oh * q->s - q->p + kh, iw = ow * q->s - q->p + kw;
                        if (ih >= 0 && ih < q->h && iw >= 0 && iw < q->w)
                            m = fmax(m, x[((size_t)pl * q->h + ih) * q->w + iw]);
                    }
                y[((size_t)pl * ho + oh) * wo + ow] = m;
            }
}

typedef struct {
    const pool_case *q;
    double *x, *r, *y;
    size_t ny;
} pool_ctx;

static double maxpool_loss(void *p) {
    pool_ctx *t = p;
    ref_maxpool(t->q, t->x, t->y);
    return dot(t->r, t->y, t->ny);
}

static void test_maxpool(tb_backend *be, const pool_case *q) {
    int ho = conv_out(q->h, q->k, q->s, q->p), wo = conv_out(q->w, q->k, q->s, q->p);
    size_t nx = (size_t)q->n * q->c * q->h * q->w, ny = (size_t)q->n * q->c * ho * wo;
    char tag[64], what[160];
    snprintf(tag, sizeof tag, "[%d,%d,%d,%d] k%d s%d p%d", q->n, q->c, q->h, q->w, q->k, q->s,
             q->p);
    double *xd = dalloc(nx), *rd = dalloc(ny), *yref = dalloc(ny), *ybuf = dalloc(ny);
    double *D = dalloc(nx), *g = dalloc(nx);
    float *x = be->alloc(be, nx * 4), *y = be->alloc(be, ny * 4), *dy = be->alloc(be, ny * 4);
    float *dx = be->alloc(be, nx * 4), *init = malloc(nx * 4);
    /* distinct negative values 0.01 apart, shuffled: no ties, and a padding
     * that counted as 0 would win */
    for (size_t i = 0; i < nx; i++) xd[i] = -3.0 + 0.01 * (double)i;
    for (size_t i = nx; i > 1; i--) {
        size_t j = (size_t)tb_rng_below(&g_rng, i);
        double t = xd[i - 1];
        xd[i - 1] = xd[j];
        xd[j] = t;
    }
    for (size_t i = 0; i < nx; i++) x[i] = (float)xd[i], xd[i] = x[i];
    fill_uniform(dy, rd, ny, -1, 1);
    fill_uniform(init, D, nx, -1, 1);
    tb_tensor tx = tensor(x, q->n, q->c, q->h, q->w), ty = tensor(y, q->n, q->c, ho, wo);
    tb_tensor tdy = tensor(dy, q->n, q->c, ho, wo), tdx = tensor(dx, q->n, q->c, q->h, q->w);
    tb_pool_geom pg = {q->k, q->s, q->p};

    fill_nan(y, ny);
    be->maxpool_forward(be, &pg, &tx, &ty);
    ref_maxpool(q, xd, yref);
    snprintf(what, sizeof what, "maxpool fwd (exact) %s", tag);
    check_all(what, y, yref, ny, 0.0, 0.0);

    size_t *idx = malloc(nx * sizeof *idx);
    size_t s = pick(nx, idx);
    pool_ctx ctx = {q, xd, rd, ybuf, ny};
    fd(maxpool_loss, &ctx, xd, idx, s, g);
    for (int acc = 0; acc <= 1; acc++) {
        if (acc) memcpy(dx, init, nx * 4);
        else fill_nan(dx, nx);
        be->maxpool_backward(be, &pg, &tx, &ty, &tdy, &tdx, acc);
        snprintf(what, sizeof what, "maxpool bwd acc%d %s", acc, tag);
        check_at(what, dx, idx, g, s, acc ? D : NULL, FD_ATOL, FD_RTOL);
    }

    /* ties: constant input sends each window's gradient to its first
     * in-bounds element (top-left of the clipped window) */
    for (size_t i = 0; i < nx; i++) x[i] = 1.5f;
    be->maxpool_forward(be, &pg, &tx, &ty);
    for (size_t i = 0; i < nx; i++) g[i] = 0.0;
    for (int pl = 0; pl < q->n * q->c; pl++)
        for (int oh = 0; oh < ho; oh++)
            for (int ow = 0; ow < wo; ow++) {
                int ih = oh * q->s - q->p, iw = ow * q->s - q->p;
                if (ih < 0) ih = 0;
                if (iw < 0) iw = 0;
                g[((size_t)pl * q->h + ih) * q->w + iw] += rd[((size_t)pl * ho + oh) * wo + ow];
            }
    fill_nan(dx, nx);
    be->maxpool_backward(be, &pg, &tx, &ty, &tdy, &tdx, 0);
    snprintf(what, sizeof what, "maxpool bwd ties -> first %s", tag);
    check_all(what, dx, g, nx, FWD_ATOL, FWD_RTOL);

    free(xd), free(rd), free(yref), free(ybuf), free(D), free(g), free(init), free(idx);
    be->release(be, x), be->release(be, y), be->release(be, dy), be->release(be, dx);
}

typedef struct {
    double *x, *r;
    int planes;
    size_t hw;
} avg_ctx;

static double avgpool_loss(void *p) {
    avg_ctx *t = p;
    double L = 0.0;
    for (int pl = 0; pl < t->planes; pl++) {
        double s = 0.0;
        for (size_t i = 0; i < t->hw; i++) s += t->x[pl * t->hw + i];
        L += t->r[pl] * s / (double)t->hw;
    }
    return L;
}

static void test_avgpool(tb_backend *be) {
    const int N = 3, C = 5, H = 7, W = 5, planes = N * C;
    const size_t hw = (size_t)H * W, nx = (size_t)planes * hw;
    double *xd = dalloc(nx), *rd = dalloc(planes), *ref = dalloc(planes), *D = dalloc(nx);
    double *g = dalloc(nx);
    float *x = be->alloc(be, nx * 4), *y = be->alloc(be, planes * 4);
    float *dy = be->alloc(be, planes * 4), *dx = be->alloc(be, nx * 4), *init = malloc(nx * 4);
    fill_uniform(x, xd, nx, -1, 1);
    fill_uniform(dy, rd, planes, -1, 1);
    fill_uniform(init, D, nx, -1, 1);
    tb_tensor tx = tensor(x, N, C, H, W), ty = tensor(y, N, C, 1, 1);
    tb_tensor tdy = tensor(dy, N, C, 1, 1), tdx = tensor(dx, N, C, H, W);

    be->avgpool_forward(be, &tx, &ty);
    for (int pl = 0; pl < planes; pl++) {
        double s = 0.0;
        for (size_t i = 0; i < hw; i++) s += xd[pl * hw + i];
        ref[pl] = s / (double)hw;
    }
    check_all("avgpool fwd", y, ref, planes, FWD_ATOL, FWD_RTOL);

    size_t *idx = malloc(nx * sizeof *idx);
    size_t s = pick(nx, idx);
    avg_ctx ctx = {xd, rd, planes, hw};
    fd(avgpool_loss, &ctx, xd, idx, s, g);
    for (int acc = 0; acc <= 1; acc++) {
        if (acc) memcpy(dx, init, nx * 4);
        else fill_nan(dx, nx);
        be->avgpool_backward(be, &tdy, &tdx, acc);
        check_at(acc ? "avgpool bwd acc1" : "avgpool bwd acc0", dx, idx, g, s, acc ? D : NULL,
                 FD_ATOL, FD_RTOL);
    }
    free(xd), free(rd), free(ref), free(D), free(g), free(init), free(idx);
    be->release(be, x), be->release(be, y), be->release(be, dy), be->release(be, dx);
}

/* ==== linear ============================================================================= */

typedef struct {
    double *x, *w, *b, *r;
    int N, K, M;
} lin_ctx;

static void ref_linear(const lin_ctx *t, double *y) {
    for (int n = 0; n < t->N; n++)
        for (int m = 0; m < t->M; m++) {
            double s = t->b[m];
            for (int k = 0; k < t->K; k++) s += t->x[n * t->K + k] * t->w[m * t->K + k];
            y[n * t->M + m] = s;
        }
}

static double linear_loss(void *p) {
    lin_ctx *t = p;
    double L = 0.0;
    for (int n = 0; n < t->N; n++)
        for (int m = 0; m < t->M; m++) {
            double s = t->b[m];
            for (int k = 0; k < t->K; k++) s += t->x[n * t->K + k] * t->w[m * t->K + k];
            L += t->r[n * t->M + m] * s;
        }
    return L;
}

static void test_linear(tb_backend *be) {
    const int N = 3, C = 4, H = 2, W = 3, K = C * H * W, M = 7;
    const size_t nx = (size_t)N * K, nw = (size_t)M * K, ny = (size_t)N * M;
    double *xd = dalloc(nx), *wd = dalloc(nw), *bd = dalloc(M), *rd = dalloc(ny);
    double *ref = dalloc(ny), *D = dalloc(nx), *gx = dalloc(nx), *gw = dalloc(nw), *gb = dalloc(M);
    float *x = be->alloc(be, nx * 4), *w = be->alloc(be, nw * 4), *b = be->alloc(be, M * 4);
    float *y = be->alloc(be, ny * 4), *dy = be->alloc(be, ny * 4), *dx = be->alloc(be, nx * 4);
    float *dw = be->alloc(be, nw * 4), *db = be->alloc(be, M * 4), *init = malloc(nx * 4);
    fill_uniform(x, xd, nx, -1, 1);
    fill_uniform(w, wd, nw, -1, 1);
    fill_uniform(b, bd, M, -1, 1);
    fill_uniform(dy, rd, ny, -1, 1);
    fill_uniform(init, D, nx, -1, 1);
    tb_tensor tx = tensor(x, N, C, H, W), tw = tensor(w, M, K, 1, 1), ty = tensor(y, N, M, 1, 1);
    tb_tensor tdy = tensor(dy, N, M, 1, 1), tdx = tensor(dx, N, C, H, W);
    tb_tensor tdw = tensor(dw, M, K, 1, 1);

    lin_ctx ctx = {xd, wd, bd, rd, N, K, M};
    fill_nan(y, ny);
    be->linear_forward(be, &tx, &tw, b, &ty);
    ref_linear(&ctx, ref);
    check_all("linear fwd x[3,4,2,3] w[7,24]", y, ref, ny, FWD_ATOL, FWD_RTOL);

    size_t *ix = malloc(nx * sizeof *ix), *iw = malloc(nw * sizeof *iw), *ib = malloc(M * sizeof *ib);
    size_t sx = pick(nx, ix), sw = pick(nw, iw), sb = pick(M, ib);
    fd(linear_loss, &ctx, xd, ix, sx, gx);
    fd(linear_loss, &ctx, wd, iw, sw, gw);
    fd(linear_loss, &ctx, bd, ib, sb, gb);
    for (int acc = 0; acc <= 1; acc++) {
        if (acc) memcpy(dx, init, nx * 4);
        else fill_nan(dx, nx);
        fill_nan(dw, nw), fill_nan(db, M);
        be->linear_backward(be, &tx, &tw, &tdy, &tdx, acc, &tdw, db);
        check_at(acc ? "linear bwd dx acc1" : "linear bwd dx acc0", dx, ix, gx, sx, acc ? D : NULL,
                 FD_ATOL, FD_RTOL);
        check_at("linear bwd dw", dw, iw, gw, sw, NULL, FD_ATOL, FD_RTOL);
        check_at("linear bwd db", db, ib, gb, sb, NULL, FD_ATOL, FD_RTOL);
    }
    fill_nan(dw, nw), fill_nan(db, M);
    be->linear_backward(be, &tx, &tw, &tdy, NULL, 0, &tdw, db);
    check_at("linear bwd dw, dx NULL", dw, iw, gw, sw, NULL, FD_ATOL, FD_RTOL);
    check_at("linear bwd db, dx NULL", db, ib, gb, sb, NULL, FD_ATOL, FD_RTOL);

    free(xd), free(wd), free(bd), free(rd), free(ref), free(D), free(gx), free(gw), free(gb);
    free(init), free(ix), free(iw), free(ib);
    float *fs[] = {x, w, b, y, dy, dx, dw, db};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) be->release(be, fs[i]);
}

/* ==== softmax cross-entropy ============================================================ */

typedef struct {
    double *l;
    const int32_t *labels;
    int N, M;
    double eps;
} xent_ctx;

/* PyTorch's definition, straight from the formula, in double. */
static double xent_loss(void *p) {
    xent_ctx *t = p;
    double total = 0.0;
    for (int n = 0; n < t->N; n++) {
        const double *l = t->l + (size_t)n * t->M;
        double mx = l[0], se = 0.0;
        for (int c = 1; c < t->M; c++) mx = fmax(mx, l[c]);
        for (int c = 0; c < t->M; c++) se += exp(l[c] - mx);
        double lse = mx + log(se), smooth = 0.0;
        for (int c = 0; c < t->M; c++) smooth += (lse - l[c]) / t->M;
        total += (1.0 - t->eps) * (lse - l[t->labels[n]]) + t->eps * smooth;
    }
    return total / t->N;
}

static void test_xent(tb_backend *be, double eps, double gscale, double spread) {
    const int N = 5, M = 7;
    const size_t n = (size_t)N * M;
    char what[160];
    double *ld = dalloc(n), *g = dalloc(n);
    float *l = be->alloc(be, n * 4), *dl = be->alloc(be, n * 4);
    /* the loss-gradient scale as data parallelism (grad_scale) and fp16
     * loss scaling (loss_scale) make it: their product scales dlogits */
    tb_step_scalars *sc = be->alloc(be, sizeof *sc);
    memset(sc, 0, sizeof *sc);
    sc->grad_scale = (float)(gscale * 4);
    sc->loss_scale = 0.25f;
    float *loss = &sc->loss;
    int32_t labels[5];
    fill_uniform(l, ld, n, -spread, spread);
    for (int i = 0; i < N; i++) labels[i] = (int32_t)tb_rng_below(&g_rng, M);
    labels[0] = M - 1; /* both ends of the range */
    labels[1] = 0;
    tb_tensor tl = tensor(l, N, M, 1, 1), tdl = tensor(dl, N, M, 1, 1);

    fill_nan(dl, n);
    be->softmax_xent(be, &tl, labels, (float)eps, sc, &tdl);
    xent_ctx ctx = {ld, labels, N, M, eps};
    double ref = xent_loss(&ctx);
    snprintf(what, sizeof what, "softmax_xent loss eps %.2f logits +-%g", eps, spread);
    check_all(what, loss, &ref, 1, FWD_ATOL, FWD_RTOL);

    size_t *idx = malloc(n * sizeof *idx);
    size_t s = pick(n, idx);
    fd(xent_loss, &ctx, ld, idx, s, g);
    for (size_t i = 0; i < s; i++) g[i] *= gscale;
    snprintf(what, sizeof what, "softmax_xent dlogits eps %.2f scale %g logits +-%g", eps, gscale,
             spread);
    check_at(what, dl, idx, g, s, NULL, FD_ATOL * gscale, FD_RTOL);

    labels[3] = M; /* out of range must be fatal */
    snprintf(what, sizeof what, "softmax_xent label %d of %d classes is fatal", M, M);
    EXPECT_FATAL(what, be->softmax_xent(be, &tl, labels, (float)eps, sc, &tdl));
    labels[3] = -1;
    EXPECT_FATAL("softmax_xent label -1 is fatal",
                 be->softmax_xent(be, &tl, labels, (float)eps, sc, &tdl));
    free(ld), free(g), free(idx);
    be->release(be, l), be->release(be, dl), be->release(be, sc);
}

/* ==== SGD ================================================================================ */

static void test_sgd(tb_backend *be, float momentum, int nesterov) {
    enum { P = 53, STEPS = 3 };
    /* three segments with their own decay; [10,12) and [50,53) belong to
     * none and must not move */
    const tb_sgd_segment segs[3] = {{0, 10, 0.1f}, {12, 18, 0.0f}, {30, 20, 5e-4f}};
    const struct {
        double lr, grad_scale;
    } a = {0.1f, 0.5f};
    /* lr and the unscale 1/loss_scale come from the device scalars */
    tb_step_scalars *sc = be->alloc(be, sizeof *sc);
    memset(sc, 0, sizeof *sc);
    sc->lr = (float)a.lr;
    sc->loss_scale = (float)(1.0 / a.grad_scale);
    const tb_sgd_op op = {momentum, nesterov, 1, sc};
    char what[160];
    float *p = be->alloc(be, P * 4), *gr = be->alloc(be, P * 4), *buf = be->alloc(be, P * 4);
    double *pd = dalloc(P), *bd = dalloc(P), *gd = dalloc(P);
    fill_uniform(p, pd, P, -1, 1);
    be->zero(be, buf, P * 4);
    for (int step = 0; step < STEPS; step++) {
        fill_uniform(gr, gd, P, -1, 1);
        be->sgd_update(be, &op, segs, 3, p, gr, momentum != 0.0f ? buf : NULL);
        for (int s = 0; s < 3; s++) /* the scalar reference */
            for (size_t i = segs[s].offset; i < segs[s].offset + segs[s].count; i++) {
                double g = gd[i] * a.grad_scale + (double)segs[s].weight_decay * pd[i];
                bd[i] = (double)momentum * bd[i] + g;
                double stepv = momentum == 0.0f ? g : nesterov ? g + (double)momentum * bd[i] : bd[i];
                pd[i] -= (double)a.lr * stepv;
            }
        snprintf(what, sizeof what, "sgd params step %d momentum %.1f nesterov %d", step + 1,
                 (double)momentum, nesterov);
        check_all(what, p, pd, P, FWD_ATOL, FWD_RTOL);
        if (momentum != 0.0f) {
            snprintf(what, sizeof what, "sgd momentum buffer step %d momentum %.1f nesterov %d",
                     step + 1, (double)momentum, nesterov);
            check_all(what, buf, bd, 50, FWD_ATOL, FWD_RTOL);
        }
    }
    /* an overflowed step (found_inf set) changes nothing */
    float *p0 = malloc(P * 4), *b0 = malloc(P * 4);
    memcpy(p0, p, P * 4), memcpy(b0, buf, P * 4);
    fill_uniform(gr, gd, P, -1, 1);
    sc->found_inf = 1;
    be->sgd_update(be, &op, segs, 3, p, gr, momentum != 0.0f ? buf : NULL);
    snprintf(what, sizeof what, "sgd skips the update on found_inf, momentum %.1f nesterov %d",
             (double)momentum, nesterov);
    report(what, 0.0, 0.0, !memcmp(p, p0, P * 4) && !memcmp(buf, b0, P * 4));
    free(p0), free(b0);
    free(pd), free(bd), free(gd);
    be->release(be, p), be->release(be, gr), be->release(be, buf), be->release(be, sc);
}

/* ==== the contract around the ops ====================================================== */

static void test_backend_contract(tb_backend *be) {
    report("backend name is cpu, caps NCHW|F32", 0.0, 0.0,
           !strcmp(be->name, "cpu") && be->caps == (TB_CAP_NCHW | TB_CAP_F32));
    float *x = be->alloc(be, 3 * 4 * 5 * 5 * 4), *y = be->alloc(be, 3 * 4 * 5 * 5 * 4);
    report("alloc is 64-byte aligned", 0.0, 0.0,
           ((uintptr_t)x % 64) == 0 && ((uintptr_t)y % 64) == 0);
    tb_tensor tx = tensor(x, 3, 4, 5, 5), ty = tensor(y, 3, 4, 5, 5);
    tx.dtype = TB_BF16;
    EXPECT_FATAL("relu_forward rejects bfloat16", be->relu_forward(be, &tx, &ty));
    tx.dtype = TB_F32;
    ty.layout = TB_NHWC;
    EXPECT_FATAL("relu_forward rejects NHWC", be->relu_forward(be, &tx, &ty));
    ty.layout = TB_NCHW;
    tb_conv_geom g = {4, 4, 3, 1, 1};
    tb_tensor tw = tensor(x, 4, 4, 3, 3);
    tw.dtype = TB_F16;
    EXPECT_FATAL("conv_forward rejects float16 weights",
                 be->conv_forward(be, NULL, &g, &tx, &tw, &ty));
    tb_tensor tbad = tensor(y, 3, 4, 4, 5);
    tw.dtype = TB_F32;
    EXPECT_FATAL("conv_forward rejects a wrong output shape",
                 be->conv_forward(be, NULL, &g, &tx, &tw, &tbad));
    be->release(be, x), be->release(be, y);
}

int main(void) {
    tb_set_abort_hook(abort_hook);
    tb_rng_seed(&g_rng, 20240601, 1);
    printf("# test_cpu_ops: CPU backend ops vs double-precision references\n");
    printf("# pass: |got - ref| <= atol + rtol*|ref|; forward atol %g rtol %g; "
           "finite differences (h %g) atol %g rtol %g\n",
           FWD_ATOL, FWD_RTOL, FD_H, FD_ATOL, FD_RTOL);

    tb_backend_opts opts = {.threads = 2};
    tb_backend *be = tb_cpu_backend_create(&opts);
    test_backend_contract(be);
    test_convs();
    test_bns(be);
    test_relu(be);
    test_add(be);
    static const pool_case pools[] = {
        {3, 2, 7, 5, 3, 2, 1}, /* the ResNet stem pool on an odd image */
        {3, 2, 6, 7, 2, 2, 0}, /* a column left over */
        {2, 3, 5, 5, 3, 1, 1}, /* overlapping windows, stride 1 */
        {1, 2, 3, 601, 3, 2, 1}, /* a row wider than the kernel's chunk of outputs */
    };
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) test_maxpool(be, &pools[i]);
    test_avgpool(be);
    test_linear(be);
    test_xent(be, 0.0, 1.0, 3.0);
    test_xent(be, 0.1, 1.0, 3.0);
    test_xent(be, 0.1, 0.5 / 1024, 3.0);
    test_xent(be, 0.1, 1.0, 80.0); /* large logits: needs the max shift */
    test_sgd(be, 0.9f, 0);
    test_sgd(be, 0.9f, 1);
    test_sgd(be, 0.0f, 0);
    be->destroy(be);

    printf("%d passed, %d failed\n", g_checks - g_failed, g_failed);
    return g_failed ? 1 : 0;
}
