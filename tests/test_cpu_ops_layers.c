/* test_cpu_ops_layers.c - test_cpu_ops' ReLU, add, pooling, linear,
 * softmax cross-entropy, SGD and the backend contract against double
 * references and finite differences (method in test_cpu_ops.c). */
#include "tests/test_cpu_ops.h"

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

void test_relu(tb_backend *be) {
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

void test_add(tb_backend *be) {
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

void test_maxpool(tb_backend *be, const pool_case *q) {
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

void test_avgpool(tb_backend *be) {
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

void test_linear(tb_backend *be) {
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

void test_xent(tb_backend *be, double eps, double gscale, double spread) {
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

void test_sgd(tb_backend *be, float momentum, int nesterov) {
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

void test_backend_contract(tb_backend *be) {
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
