/* test_cuda_ops.c - every op of the CUDA backend, forward and backward,
 * against the CPU backend (itself checked against double precision and
 * finite differences by test_cpu_ops) on the same random inputs, at several
 * shapes and batch sizes, in every precision and layout the CUDA backend
 * computes. Exits 77 (skipped) when no CUDA device is visible.
 *
 * Inputs are drawn in float32, rounded to the precision under test, and the
 * CPU (float32 NCHW) gets exactly those values, so the comparison measures
 * the GPU's arithmetic, not input rounding. A check passes when, for every
 * element, |gpu - cpu| <= tol * max|cpu| + tol * |cpu| with tol by precision:
 *   fp32 (TF32 off)  1e-5     for a sum of K <= 1024 products; a longer one
 *                    x sqrt(K/1024)  (tol_sum): each side's float32 rounding
 *                             of a K-term sum is ~u sqrt(K) of its size
 *                             (u = 2^-24, errors of random sign), and 1e-5
 *                             is ~5 u sqrt(1024): the same multiple for any
 *                             K. K: conv fwd cin k^2, bwd data cout k^2,
 *                             bwd filter n ho wo; linear fwd in, dx out, dw
 *                             batch. The first GPU run (H100) had the layer1
 *                             3x3 filter gradient (K = 8x56x56 = 25088,
 *                             cuDNN's WINOGRAD_NONFUSED) at 4.10e-03 of max
 *                             2.28e+02 (1.8e-5; allowed now 4.9e-5) and at
 *                             n4 (K = 12544) 2.74e-03 of 1.49e+02 (1.8e-5;
 *                             now 3.5e-5); a wrong index or a lost batch
 *                             element is off by O(1)
 *   tf32             2e-3     10-bit mantissas: ~5e-4 of an output's typical
 *                             size; 2e-3 of the largest leaves room for tails
 *   bf16             1e-2     8-bit mantissas on output (inputs equal)
 *   fp16             4e-3     11-bit mantissas on output
 * Ops whose arithmetic is the CPU's to the bit (SGD in float32, convert,
 * input_u8, input_rows, the loss scaler) must be exact; max pooling, forward
 * and backward (ties, NaN, -inf, accumulate), must equal the CPU's result
 * rounded once to the dtype. Each check prints one line; the exit status is 1 if any failed.
 */
#include "tests/test_cuda_ops.h"

tb_backend *g_cpu, *g_gpu, *g_gpu_tf32;
tb_rng g_rng;
int g_checks, g_failed;

/* ==== convolution ================================================================================ */

typedef struct {
    int n, cin, cout, h, w, k, s, p;
} conv_case;

/* g_graph_choices: conv choices (batch size x direction x beta) the graph
 * API took over a precision's cases run with TB_CUDA_CONV_GRAPH. */
static int g_graph_choices;

/* api: TB_CUDA_CONV_GRAPH (the graph API wherever it has a plan, else the
 * legacy algorithm) or TB_CUDA_CONV_LEGACY (never the graph API). */
static void test_conv(const prec *p, const conv_case *c, int api) {
    tb_backend *gb = gpu_for(p);
    tb_cuda_conv_api(gb, api);
    int ho = (c->h + 2 * c->p - c->k) / c->s + 1, wo = (c->w + 2 * c->p - c->k) / c->s + 1;
    tb_conv_geom g = {c->cin, c->cout, c->k, c->s, c->p};
    pair x = mk(p, c->n, c->cin, c->h, c->w, 0, -1, 1), w = mk(p, c->cout, c->cin, c->k, c->k, 0, -1, 1);
    pair y = mk(p, c->n, c->cout, ho, wo, 2, 0, 0), dy = mk(p, c->n, c->cout, ho, wo, 0, -1, 1);
    pair dx = mk(p, c->n, c->cin, c->h, c->w, 0, -1, 1), dw = mk(p, c->cout, c->cin, c->k, c->k, 2, 0, 0);
    void *gplan = gb->conv_plan(gb, &g, &x.gpu, &w.gpu, &y.gpu, &dx.gpu, &dw.gpu, &dy.gpu);
    void *cplan = g_cpu->conv_plan(g_cpu, &g, &x.cpu, &w.cpu, &y.cpu, &dx.cpu, &dw.cpu, &dy.cpu);
    char what[200], desc[1024];
    /* the plan's own batch, then a smaller one on the same plan (prepared lazily) */
    for (int pass = 0; pass < 2; pass++) {
        int n = pass == 0 ? c->n : (c->n + 1) / 2;
        if (pass == 1 && n == c->n) break;
        pair *ts[] = {&x, &y, &dy, &dx};
        for (int i = 0; i < 4; i++) ts[i]->cpu.n = ts[i]->gpu.n = ts[i]->n = n;
        /* a new batch size is prepared (and measured, overwriting y, dx, dw) on
         * its first forward: do that before the buffers are compared */
        gb->conv_forward(gb, gplan, &g, &x.gpu, &w.gpu, &y.gpu);
        upload(&dx);
        for (int dev = 0; dev < 2; dev++) {
            tb_backend *be = dev ? gb : g_cpu;
            void *plan = dev ? gplan : cplan;
            tb_tensor *tx = dev ? &x.gpu : &x.cpu, *tw = dev ? &w.gpu : &w.cpu;
            be->conv_forward(be, plan, &g, tx, tw, dev ? &y.gpu : &y.cpu);
            be->conv_backward_data(be, plan, &g, dev ? &dy.gpu : &dy.cpu, tw, dev ? &dx.gpu : &dx.cpu, 1);
            be->conv_backward_filter(be, plan, &g, tx, dev ? &dy.gpu : &dy.cpu, dev ? &dw.gpu : &dw.cpu, 0);
        }
        char tag[64];
        snprintf(tag, sizeof tag, "%s %s", p->name, api == TB_CUDA_CONV_LEGACY ? "legacy" : "graph");
        /* terms per output: fwd cin k^2, bwd data (at most) cout k^2, bwd filter n ho wo */
        double k_fwd = (double)c->cin * c->k * c->k, k_data = (double)c->cout * c->k * c->k,
               k_filter = (double)n * ho * wo;
        snprintf(what, sizeof what, "conv n%d %d->%d %dx%d k%d s%d p%d fwd %s", n, c->cin, c->cout,
                 c->h, c->w, c->k, c->s, c->p, tag);
        same(what, &y, tol_sum(p, k_fwd));
        snprintf(what, sizeof what, "conv n%d %d->%d k%d s%d bwd data (accumulate) %s", n, c->cin,
                 c->cout, c->k, c->s, tag);
        same(what, &dx, tol_sum(p, k_data));
        snprintf(what, sizeof what, "conv n%d %d->%d k%d s%d bwd filter %s", n, c->cin, c->cout,
                 c->k, c->s, tag);
        same(what, &dw, tol_sum(p, k_filter));
        /* overwrite mode of backward data */
        gb->conv_backward_data(gb, gplan, &g, &dy.gpu, &w.gpu, &dx.gpu, 0);
        g_cpu->conv_backward_data(g_cpu, cplan, &g, &dy.cpu, &w.cpu, &dx.cpu, 0);
        snprintf(what, sizeof what, "conv n%d %d->%d k%d s%d bwd data (overwrite) %s", n, c->cin,
                 c->cout, c->k, c->s, tag);
        same(what, &dx, tol_sum(p, k_data));
    }
    gb->conv_plan_describe(gb, gplan, desc, sizeof desc);
    printf("#   algorithms: %s\n", desc);
    int on_graph = tb_cuda_conv_plan_on_graph(gplan);
    printf("#   path: %d choice%s on the graph API\n", on_graph, on_graph == 1 ? "" : "s");
    if (api == TB_CUDA_CONV_LEGACY) {
        snprintf(what, sizeof what, "conv %d->%d k%d s%d %s: TB_CONV_API=legacy runs no graph plan", c->cin,
                 c->cout, c->k, c->s, p->name);
        report(what, on_graph, 0, on_graph == 0);
    } else {
        g_graph_choices += on_graph;
    }
    tb_cuda_conv_api(gb, TB_CUDA_CONV_AUTO);
    gb->conv_plan_free(gb, gplan);
    g_cpu->conv_plan_free(g_cpu, cplan);
    x.n = dx.n = y.n = dy.n = c->n;
    drop(&x), drop(&w), drop(&y), drop(&dy), drop(&dx), drop(&dw);
}

/* 1 when the GPU copy of t is within tol of the CPU's by same()'s rule; nothing reported */
static int quietly_same(const pair *t, double tol) {
    float *g = download(t);
    const float *r = t->cpu.data;
    size_t n = tb_tensor_numel(&t->cpu);
    double top = 0;
    for (size_t i = 0; i < n; i++) top = fmax(top, fabs(r[i]));
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)g[i] - r[i]) <= tol * top + tol * fabs(r[i])) && g[i] != r[i]) ok = 0;
    free(g);
    return ok;
}

/* The stem (3 input channels, no input gradient) on copies padded to mode
 * channels (cuda_conv_pad.c; 4 or 8 forced, -1 auto: whatever measured
 * fastest): forward and filter gradient (overwrite and accumulate) against
 * the CPU's 3-channel conv, at the planned batch, a smaller one prepared by
 * its forward, and twice with new input and no forward (its filter
 * gradient pads the input itself: --fuse graph's stem never runs this
 * forward). Forced, the plan must say it pads; then a planted error (the
 * added channels filled with 1, not 0) must fail the forward's check. */
static void test_conv_pad(const prec *p, int mode) {
    tb_backend *gb = gpu_for(p);
    tb_cuda_conv_pad(gb, mode);
    const conv_case c = {4, 3, 32, 40, 36, 7, 2, 3};
    int ho = (c.h + 2 * c.p - c.k) / c.s + 1, wo = (c.w + 2 * c.p - c.k) / c.s + 1;
    tb_conv_geom g = {c.cin, c.cout, c.k, c.s, c.p};
    pair x = mk(p, c.n, c.cin, c.h, c.w, 0, -1, 1), w = mk(p, c.cout, c.cin, c.k, c.k, 0, -1, 1);
    pair y = mk(p, c.n, c.cout, ho, wo, 2, 0, 0), dy = mk(p, c.n, c.cout, ho, wo, 0, -1, 1);
    pair dw = mk(p, c.cout, c.cin, c.k, c.k, 2, 0, 0);
    void *gplan = gb->conv_plan(gb, &g, &x.gpu, &w.gpu, &y.gpu, NULL, &dw.gpu, &dy.gpu);
    void *cplan = g_cpu->conv_plan(g_cpu, &g, &x.cpu, &w.cpu, &y.cpu, NULL, &dw.cpu, &dy.cpu);
    int padded = tb_cuda_conv_plan_padded(gplan);
    char what[200], desc[1024];
    gb->conv_plan_describe(gb, gplan, desc, sizeof desc);
    printf("#   TB_STEM_PAD=%s: %s\n", mode < 0 ? "auto" : mode == 4 ? "4" : "8", desc);
    if (mode > 0) {
        snprintf(what, sizeof what, "conv stem %s: TB_STEM_PAD=%d pads the input to %d channels (%d)", p->name, mode,
                 mode, padded);
        report(what, padded, mode, padded == mode);
    }
    double k_fwd = (double)c.cin * c.k * c.k;
    /* forward and filter gradient at the planned batch and a smaller one; then new values in x and the filter
     * gradient alone, at the forward's last batch (the same buffer and size: a kept copy would be stale) and
     * at a new one */
    const int batches[4] = {c.n, 2, 2, 3};
    for (int pass = 0; pass < 4; pass++) {
        int n = batches[pass];
        pair *ts[] = {&x, &y, &dy};
        for (int i = 0; i < 3; i++) ts[i]->cpu.n = ts[i]->gpu.n = ts[i]->n = n;
        if (pass >= 2) { /* new values in x, no forward: the filter gradient must pad them itself */
            for (size_t i = 0; i < tb_tensor_numel(&x.cpu); i++)
                x.host[i] = round_to(p->dt, (float)(2.0 * tb_rng_uniform(&g_rng) - 1.0));
            upload(&x);
        }
        for (int dev = 0; dev < 2; dev++) {
            tb_backend *be = dev ? gb : g_cpu;
            void *plan = dev ? gplan : cplan;
            tb_tensor *tx = dev ? &x.gpu : &x.cpu;
            if (pass < 2) be->conv_forward(be, plan, &g, tx, dev ? &w.gpu : &w.cpu, dev ? &y.gpu : &y.cpu);
            be->conv_backward_filter(be, plan, &g, tx, dev ? &dy.gpu : &dy.cpu, dev ? &dw.gpu : &dw.cpu, 0);
        }
        if (pass < 2) {
            snprintf(what, sizeof what, "conv stem n%d fwd %s, padded to %d", n, p->name, padded);
            same(what, &y, tol_sum(p, k_fwd));
        }
        snprintf(what, sizeof what, "conv stem n%d bwd filter%s %s, padded to %d", n, pass >= 2 ? " (no fwd)" : "",
                 p->name, padded);
        same(what, &dw, tol_sum(p, (double)n * ho * wo));
        gb->conv_backward_filter(gb, gplan, &g, &x.gpu, &dy.gpu, &dw.gpu, 1);
        g_cpu->conv_backward_filter(g_cpu, cplan, &g, &x.cpu, &dy.cpu, &dw.cpu, 1);
        snprintf(what, sizeof what, "conv stem n%d bwd filter (accumulate) %s, padded to %d", n, p->name, padded);
        same(what, &dw, tol_sum(p, (double)n * ho * wo));
    }
    if (mode > 0) { /* planted: the added channels hold 1 */
        tb_cuda_conv_pad_fill(gb, 1.0f);
        gb->conv_forward(gb, gplan, &g, &x.gpu, &w.gpu, &y.gpu);
        g_cpu->conv_forward(g_cpu, cplan, &g, &x.cpu, &w.cpu, &y.cpu);
        int caught = !quietly_same(&y, tol_sum(p, k_fwd));
        snprintf(what, sizeof what, "conv stem %s, padded to %d: a planted fill of 1 fails the fwd check", p->name,
                 padded);
        report(what, caught, 1, caught);
        tb_cuda_conv_pad_fill(gb, 0.0f);
    }
    tb_cuda_conv_pad(gb, 0);
    gb->conv_plan_free(gb, gplan);
    g_cpu->conv_plan_free(g_cpu, cplan);
    x.n = y.n = dy.n = c.n;
    drop(&x), drop(&w), drop(&y), drop(&dy), drop(&dw);
}

/* ==== batch norm ================================================================================ */

/* The own kernels' ReLU mask (cuda_bn.c): the training forward wrote it
 * where they ran the 16-byte path with a ReLU (and nowhere else); the
 * backward reading it gives the bits of the backward reading y (the test
 * switch off); and a planted mask of all ones (every element kept) changes
 * dx, so the backward does read it. */
static void check_relu_mask(tb_backend *gb, const tb_bn_args *a, pair *dy, pair *dx, pair *dz,
                            vec *dg, vec *db, const char *tag) {
    char what[200];
    const tb_tensor *x = a->x;
    const int V = 16 / (int)tb_dtype_size(x->dtype);
    const size_t need = (size_t)x->n * x->h * x->w * (size_t)(x->c / V); /* a byte per 16-byte word */
    /* (a node cuDNN refused at run time keeps cuDNN's reserve: the mask where it fits) */
    int want = a->relu && x->layout == TB_NHWC && x->c % V == 0 && !tb_cuda_bn_plan_on_cudnn(a->plan) &&
                       a->reserve_bytes >= need
                   ? x->n
                   : 0;
    int got = tb_cuda_bn_plan_masked(a->plan);
    snprintf(what, sizeof what, "bn relu mask written for batch %d (want %d) %s", got, want, tag);
    report(what, got, want, got == want);
    if (!want) return;
    size_t ne = (size_t)x->n * x->c * x->h * x->w;
    float *out[3][4];
    for (int run = 0; run < 3; run++) { /* the mask, y (switch off), the planted all-ones mask */
        tb_cuda_bn_relu_mask(gb, run != 1);
        if (run == 2) {
            unsigned char *ones = malloc(a->reserve_bytes);
            memset(ones, 0xff, a->reserve_bytes);
            gb->copy_h2d(gb, a->reserve, ones, a->reserve_bytes);
            free(ones);
        }
        tb_bn_grads g = {&dy->gpu, &dx->gpu, dz ? &dz->gpu : NULL, 0, 0, dg->gpu, db->gpu};
        gb->bn_backward(gb, a, &g);
        out[run][0] = download(dx);
        out[run][1] = dz ? download(dz) : NULL;
        out[run][2] = malloc((size_t)x->c * 4), out[run][3] = malloc((size_t)x->c * 4);
        gb->copy_d2h(gb, out[run][2], dg->gpu, (size_t)x->c * 4);
        gb->copy_d2h(gb, out[run][3], db->gpu, (size_t)x->c * 4);
    }
    tb_cuda_bn_relu_mask(gb, 1);
    static const char *names[4] = {"dx", "dz", "dgamma", "dbeta"};
    for (int k = 0; k < 4; k++) {
        if (!out[0][k]) continue;
        size_t n = k < 2 ? ne : (size_t)x->c;
        snprintf(what, sizeof what, "bn bwd %s from the relu mask = from y, bit for bit %s", names[k], tag);
        report(what, 0, 0, memcmp(out[0][k], out[1][k], n * 4) == 0);
    }
    size_t differ = 0;
    for (size_t i = 0; i < ne; i++) differ += out[2][0][i] != out[1][0][i];
    snprintf(what, sizeof what, "bn bwd planted all-ones relu mask changes dx (%zu of %zu) %s", differ, ne, tag);
    report(what, (double)differ, (double)ne, differ > 0);
    for (int run = 0; run < 3; run++)
        for (int k = 0; k < 4; k++) free(out[run][k]);
}

/* bn_tune (TB_BN_KERNELS=auto, cuda_bn_tune.c) on a node cuDNN takes: it
 * leaves the running statistics and dgamma, dbeta as they were, the node
 * is timed (no longer to be) and runs on one path, which a second node of
 * the same problem takes without timing; the forward and backward checks
 * that follow run on the path it chose. */
static void check_bn_tune(tb_backend *gb, tb_bn_args *a, tb_bn_args *twin, pair *dy, pair *dx, pair *dz,
                          vec *const st[4], const char *tag) {
    char what[200];
    if (!tb_cuda_bn_plan_on_cudnn(a->plan)) { /* cuDNN declined the node at plan time: nothing to time */
        printf("# bn_tune %s: cuDNN declined the node at plan time; the own kernels run it, untimed\n", tag);
        return;
    }
    const tb_tensor *x = a->x;
    const int V = 16 / (int)tb_dtype_size(x->dtype);
    const size_t mask = a->relu && x->c % V == 0 ? (size_t)x->n * x->h * x->w * (size_t)(x->c / V) : 0;
    snprintf(what, sizeof what, "bn_tune: the reserve holds the own kernels' ReLU mask too (%zu >= %zu) %s",
             a->reserve_bytes, mask, tag);
    report(what, (double)a->reserve_bytes, (double)mask, a->reserve_bytes >= mask);
    const size_t cb = (size_t)x->c * 4;
    float *before = malloc(4 * cb), *after = malloc(4 * cb);
    for (int k = 0; k < 4; k++) gb->copy_d2h(gb, before + k * (cb / 4), st[k]->gpu, cb);
    snprintf(what, sizeof what, "bn_tune: the node is to be timed %s", tag);
    report(what, 0, 0, tb_cuda_bn_plan_to_measure(a->plan));
    tb_bn_grads g = {&dy->gpu, &dx->gpu, dz ? &dz->gpu : NULL, 0, 0, st[2]->gpu, st[3]->gpu};
    gb->bn_tune(gb, a, &g);
    for (int k = 0; k < 4; k++) gb->copy_d2h(gb, after + k * (cb / 4), st[k]->gpu, cb);
    snprintf(what, sizeof what, "bn_tune leaves running_mean, running_var, dgamma, dbeta as they were %s", tag);
    report(what, 0, 0, memcmp(before, after, 4 * cb) == 0);
    const int on = tb_cuda_bn_plan_on_cudnn(a->plan);
    snprintf(what, sizeof what, "bn_tune timed the node; it runs on %s %s", on ? "cuDNN's path" : "the own kernels",
             tag);
    report(what, 0, 0, !tb_cuda_bn_plan_to_measure(a->plan));
    char desc[120], want[40];
    gb->bn_plan_describe(gb, a->plan, desc, sizeof desc);
    snprintf(want, sizeof want, "kernels %s (timed: ", on ? "cudnn" : "own");
    snprintf(what, sizeof what, "bn_plan_describe says the path and the times: \"%s\" %s", desc, tag);
    report(what, 0, 0, strncmp(desc, want, strlen(want)) == 0 && strstr(desc, " ms)") != NULL);
    gb->bn_tune(gb, twin, &g);
    snprintf(what, sizeof what, "bn_tune: a second node of the problem takes the first's choice %s", tag);
    report(what, tb_cuda_bn_plan_on_cudnn(twin->plan), on,
           tb_cuda_bn_plan_on_cudnn(twin->plan) == on && !tb_cuda_bn_plan_to_measure(twin->plan));
    free(before), free(after);
}

static void test_bn(const prec *p, int n, int C, int h, int w, int has_z, int relu, int cudnn) {
    tb_backend *gb = gpu_for(p);
    tb_cuda_bn_use_cudnn(gb, cudnn);
    pair x = mk(p, n, C, h, w, 0, -2, 3), z = mk(p, n, C, h, w, 0, -1, 1);
    pair y = mk(p, n, C, h, w, 2, 0, 0), dy = mk(p, n, C, h, w, 0, -1, 1);
    pair dx = mk(p, n, C, h, w, 0, -1, 1), dz = mk(p, n, C, h, w, 0, -1, 1);
    vec gamma = mkv(gb, C, 0.5, 1.5), beta = mkv(gb, C, -0.5, 0.5);
    vec rm = mkv(gb, C, -0.1, 0.1), rv = mkv(gb, C, 0.8, 1.2), sm = mkv(gb, C, 0, 0),
        si = mkv(gb, C, 0, 0), dg = mkv(gb, C, 0, 0), dbv = mkv(gb, C, 0, 0);
    tb_bn_args a[2];
    for (int dev = 0; dev < 2; dev++) {
        tb_bn_args t = {dev ? &x.gpu : &x.cpu, has_z ? (dev ? &z.gpu : &z.cpu) : NULL,
                        dev ? &y.gpu : &y.cpu, relu, dev ? gamma.gpu : gamma.cpu,
                        dev ? beta.gpu : beta.cpu, dev ? rm.gpu : rm.cpu, dev ? rv.gpu : rv.cpu,
                        dev ? sm.gpu : sm.cpu, dev ? si.gpu : si.cpu, 0.1, 1e-5, NULL, NULL, 0, 0, 0};
        a[dev] = t;
        tb_backend *be = dev ? gb : g_cpu;
        a[dev].plan = be->bn_plan(be, &a[dev], &a[dev].reserve_bytes);
        if (a[dev].reserve_bytes) a[dev].reserve = be->alloc(be, a[dev].reserve_bytes);
    }
    char tag[160], what[200];
    snprintf(tag, sizeof tag, "[%d,%d,%d,%d]%s%s %s%s", n, C, h, w, has_z ? " +z" : "",
             relu ? " relu" : "", p->name, cudnn == 2 ? " timed" : cudnn ? "" : " own-kernels");
    if (cudnn == 2) {
        tb_bn_args twin = a[1];
        twin.plan = gb->bn_plan(gb, &twin, &twin.reserve_bytes);
        twin.reserve = twin.reserve_bytes ? gb->alloc(gb, twin.reserve_bytes) : NULL;
        vec *const st[4] = {&rm, &rv, &dg, &dbv};
        check_bn_tune(gb, &a[1], &twin, &dy, &dx, has_z ? &dz : NULL, st, tag);
        if (twin.reserve) gb->release(gb, twin.reserve);
        gb->bn_plan_free(gb, twin.plan);
    }
    for (int dev = 0; dev < 2; dev++) (dev ? gb : g_cpu)->bn_forward_train(dev ? gb : g_cpu, &a[dev]);
    if (cudnn == 1 && p->dt != TB_F32 && p->l == TB_NHWC && C % 4 == 0) {
        /* which path ran: a refusal falls back quietly, so say it; for fp16
         * NHWC at a real size (cuDNN's documented fused case) a refusal means
         * the call is wrong */
        int on = tb_cuda_bn_plan_on_cudnn(a[1].plan);
        snprintf(what, sizeof what, "bn path %s: %s", tag, on ? "cuDNN fused" : "own kernels (cuDNN refused)");
        if (p->dt == TB_F16 && n * h * w >= 1024) report(what, 0, 0, on);
        else printf("# %s\n", what);
    }
    snprintf(what, sizeof what, "bn train y %s", tag);
    same(what, &y, p->tol);
    snprintf(what, sizeof what, "bn save_mean %s", tag);
    samev(what, &sm, p->dt == TB_F32 ? 1e-5 : 1e-3);
    snprintf(what, sizeof what, "bn save_invstd %s", tag);
    samev(what, &si, p->dt == TB_F32 ? 1e-5 : 1e-3);
    snprintf(what, sizeof what, "bn running_mean %s", tag);
    samev(what, &rm, p->dt == TB_F32 ? 1e-5 : 1e-3);
    snprintf(what, sizeof what, "bn running_var (unbiased) %s", tag);
    samev(what, &rv, p->dt == TB_F32 ? 1e-5 : 1e-3);
    for (int acc = 0; acc <= 1; acc++) {
        upload(&dx), upload(&dz);
        for (int dev = 0; dev < 2; dev++) {
            tb_bn_grads g = {dev ? &dy.gpu : &dy.cpu, dev ? &dx.gpu : &dx.cpu,
                             has_z ? (dev ? &dz.gpu : &dz.cpu) : NULL, acc, acc,
                             dev ? dg.gpu : dg.cpu, dev ? dbv.gpu : dbv.cpu};
            (dev ? gb : g_cpu)->bn_backward(dev ? gb : g_cpu, &a[dev], &g);
        }
        /* dx = gamma invstd (dy - mean dy - xhat mean(dy xhat)): where few
         * values share a channel its terms cancel (two: to 0 exactly), and
         * what is left is the rounding of terms of size gamma invstd |dy| */
        double term = 0;
        for (int c = 0; c < C; c++) term = fmax(term, fabs(gamma.cpu[c] * si.cpu[c]));
        double dymax = 0;
        for (size_t i = 0; i < (size_t)n * C * h * w; i++) dymax = fmax(dymax, fabs(dy.host[i]));
        snprintf(what, sizeof what, "bn bwd dx acc%d %s", acc, tag);
        same_scaled(what, &dx, p->tol, acc ? 0 : term * dymax);
        if (has_z) {
            snprintf(what, sizeof what, "bn bwd dz acc%d %s", acc, tag);
            same(what, &dz, p->tol);
        }
        snprintf(what, sizeof what, "bn bwd dgamma acc%d %s", acc, tag);
        samev(what, &dg, p->dt == TB_F32 ? 1e-4 : 2e-2);
        snprintf(what, sizeof what, "bn bwd dbeta acc%d %s", acc, tag);
        samev(what, &dbv, p->dt == TB_F32 ? 1e-4 : 2e-2);
    }
    check_relu_mask(gb, &a[1], &dy, &dx, has_z ? &dz : NULL, &dg, &dbv, tag);
    for (int dev = 0; dev < 2; dev++) (dev ? gb : g_cpu)->bn_forward_infer(dev ? gb : g_cpu, &a[dev]);
    snprintf(what, sizeof what, "bn infer y %s", tag);
    same(what, &y, p->tol);
    int stale = tb_cuda_bn_plan_masked(a[1].plan);
    snprintf(what, sizeof what, "bn relu mask: none after infer %s", tag);
    report(what, stale, 0, stale == 0);
    for (int dev = 0; dev < 2; dev++) {
        tb_backend *be = dev ? gb : g_cpu;
        if (a[dev].reserve) be->release(be, a[dev].reserve);
        be->bn_plan_free(be, a[dev].plan);
    }
    tb_cuda_bn_use_cudnn(gb, 1);
    drop(&x), drop(&z), drop(&y), drop(&dy), drop(&dx), drop(&dz);
    dropv(&gamma), dropv(&beta), dropv(&rm), dropv(&rv), dropv(&sm), dropv(&si), dropv(&dg), dropv(&dbv);
}

static void abort_hook(int code) { exit(code); }

/* test_cuda_ops tolerances (no GPU needed): tol_sum against the first GPU
 * run's fp32 filter gradients, a real error, and the other precisions. */
static int check_tolerances(void) {
    /* K, max|ref|, the largest |gpu - cpu| seen (H100, WINOGRAD_NONFUSED) */
    static const double seen[][3] = {{8 * 56 * 56, 2.28e+02, 4.10e-03}, {4 * 56 * 56, 1.49e+02, 2.74e-03}};
    int bad = 0;
    for (size_t i = 0; i < sizeof seen / sizeof seen[0]; i++) {
        double t = tol_sum(&k_precs[0], seen[i][0]), flat = k_precs[0].tol;
        /* the check's least allowance: tol * max|ref| (an element whose |ref| is ~0) */
        int ok = seen[i][2] <= t * seen[i][1], was = seen[i][2] <= flat * seen[i][1];
        int real = 1e-3 * seen[i][1] <= 2 * t * seen[i][1]; /* 1e-3 of max: a real error must fail */
        printf("K %6.0f: fp32 tol %.3e (flat %.0e); the GPU run's %.2e of max %.2e: %s (flat: %s); an error of "
               "1e-3 of max: %s\n",
               seen[i][0], t, flat, seen[i][2], seen[i][1], ok ? "passes" : "FAILS", was ? "passes" : "fails",
               real ? "PASSES" : "fails");
        bad += !ok || real;
    }
    /* short reductions keep 1e-5, and only fp32 grows */
    double short_k[] = {64, 147, 576, 784, 980, 1000, 1024};
    for (size_t i = 0; i < sizeof short_k / sizeof short_k[0]; i++)
        if (tol_sum(&k_precs[0], short_k[i]) != 1e-5 || tol_sum(&k_precs[1], short_k[i]) != 1e-5) {
            printf("K %.0f: fp32 tol %.3e, not 1e-5\n", short_k[i], tol_sum(&k_precs[0], short_k[i]));
            bad++;
        }
    for (size_t pi = 2; pi < sizeof k_precs / sizeof k_precs[0]; pi++)
        if (tol_sum(&k_precs[pi], 25088) != k_precs[pi].tol) {
            printf("%s: tol %.3e at K 25088, not its flat %.0e\n", k_precs[pi].name, tol_sum(&k_precs[pi], 25088),
                   k_precs[pi].tol);
            bad++;
        }
    printf("test_cuda_ops tolerances: %s\n", bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}

/* test_cuda_ops [memory | tolerances]: every op (default), only the memory
 * accounting, which must run with no other process on the GPU, or only the
 * tolerance rule (on any machine). */
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "tolerances") == 0) return check_tolerances();
    int memory_only = argc > 1 && strcmp(argv[1], "memory") == 0;
    if (argc > 1 && !memory_only) {
        fprintf(stderr, "usage: test_cuda_ops [memory | tolerances]\n");
        return 2;
    }
    char why[200];
    int ndev = tb_cuda_device_count(why, sizeof why);
    if (ndev <= 0) {
        printf("SKIP: test_cuda_ops needs a CUDA device: %s\n", why);
        return 77;
    }
    tb_set_abort_hook(abort_hook);
    tb_rng_seed(&g_rng, 424242, 3);
    char err[256];
    tb_backend_opts co = {.threads = 2}, go = {.device = 0}, gt = {.device = 0, .tf32 = 1};
    g_cpu = tb_cpu_backend_create(&co);
    g_gpu = tb_cuda_backend_create(&go, err, sizeof err);
    g_gpu_tf32 = tb_cuda_backend_create(&gt, err, sizeof err);
    if (!g_gpu || !g_gpu_tf32) {
        printf("test_cuda_ops: %s\n", err);
        return 1;
    }
    printf("# test_cuda_ops: CUDA backend vs CPU backend on %s\n# %s\n", g_gpu->device, g_gpu->versions);
    if (memory_only) {
        test_memory_accounting();
        goto done;
    }

    static const conv_case convs[] = {
        {2, 3, 16, 33, 31, 7, 2, 3},  /* the stem, odd sizes */
        {5, 16, 32, 14, 14, 3, 1, 1}, /* 3x3 */
        {3, 32, 16, 15, 15, 3, 2, 1}, /* strided 3x3 */
        {4, 64, 24, 8, 8, 1, 1, 0},   /* 1x1 */
        {3, 24, 64, 9, 9, 1, 2, 0},   /* downsample 1x1 stride 2 */
        {8, 64, 64, 56, 56, 3, 1, 1}, /* a layer1 3x3 at real size */
    };
    for (size_t pi = 0; pi < sizeof k_precs / sizeof k_precs[0]; pi++) {
        const prec *p = &k_precs[pi];
        printf("# ---- %s ----\n", p->name);
        g_graph_choices = 0;
        for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++) {
            test_conv(p, &convs[i], TB_CUDA_CONV_GRAPH);
            test_conv(p, &convs[i], TB_CUDA_CONV_LEGACY);
        }
        /* every case falling back means the graph path is broken, not refused */
        char what[160];
        snprintf(what, sizeof what, "conv %s: the graph API runs some of the cases' directions (%d choices)",
                 p->name, g_graph_choices);
        report(what, g_graph_choices, 0, g_graph_choices > 0);
        if (p->dt != TB_F32 && p->l == TB_NHWC) { /* the stem on 4 and 8 channels, and as measured */
            test_conv_pad(p, 4);
            test_conv_pad(p, 8);
            test_conv_pad(p, -1);
        }
        test_bn(p, 4, 16, 9, 7, 0, 1, 1);
        test_bn(p, 4, 16, 9, 7, 1, 1, 1);
        test_bn(p, 3, 12, 5, 5, 0, 0, 1);
        test_bn(p, 2, 64, 28, 28, 1, 1, 1);
        test_bn(p, 1, 8, 1, 2, 0, 1, 1);
        test_bn(p, 2, 6, 5, 5, 1, 1, 1); /* 6 channels: the own scalar kernels in every layout and type */
        /* the own kernels at 150528 values a channel: more than 32 slices (NCHW 37; NHWC 512, the cap), so
         * each lane of the per-channel step adds several (the cases above have at most 25) */
        test_bn(p, 3, 16, 224, 224, 1, 1, 0);
        if (p->dt != TB_F32 && p->l == TB_NHWC) { /* the cuDNN fused path and the own kernels */
            test_bn(p, 4, 16, 9, 7, 1, 1, 0);
            test_bn(p, 2, 64, 28, 28, 1, 1, 0);
            /* the own kernels' vector path (cuda_bn_kernels.cu): 3 vectors a row (a block 3 wide), 65 (32-wide
             * blocks, the third with one column); and 12 channels, not a whole vector: the scalar NHWC kernels */
            test_bn(p, 2, 24, 5, 6, 1, 1, 0);
            test_bn(p, 2, 520, 3, 3, 0, 1, 0);
            test_bn(p, 3, 12, 5, 5, 0, 0, 0);
            /* timed against each other (bn_tune), then checked on the path it chose */
            test_bn(p, 2, 64, 28, 28, 1, 1, 2);
            test_bn(p, 4, 16, 9, 7, 0, 1, 2);
        }
        test_eltwise(p);
        test_pools(p);
        test_linear(p, 5, 64, 10);
        test_linear(p, 32, 2048, 1000);
        test_xent(p, 6, 10, 0.0);
        test_xent(p, 33, 1000, 0.1);
    }
    printf("# ---- float32 buffers: SGD, loss scaling, convert, input (uint8, resident rows), ordering ----\n");
    test_sgd(g_gpu, 0.9, 0);
    test_sgd(g_gpu, 0.9, 1);
    test_sgd(g_gpu, 0.0, 0);
    test_loss_scale_growth(g_gpu);
    test_convert_input();
    test_convert_many();
    test_pad_kernels();
    test_input_rows();
    test_ordering();

done:
    g_gpu_tf32->destroy(g_gpu_tf32);
    g_gpu->destroy(g_gpu);
    g_cpu->destroy(g_cpu);
    printf("%d passed, %d failed\n", g_checks - g_failed, g_failed);
    return g_failed ? 1 : 0;
}
