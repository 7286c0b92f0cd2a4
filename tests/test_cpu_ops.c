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
#include "tests/test_cpu_ops.h"

int g_checks, g_failed;
tb_rng g_rng;
jmp_buf g_jmp;
volatile int g_expect_fatal;

/* ==== convolution ================================================================ */

typedef struct {
    int n, cin, cout, h, w, k, s, p;
} conv_case;

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
                    0.1, 1e-5, NULL, NULL, 0, 0, 0};

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
