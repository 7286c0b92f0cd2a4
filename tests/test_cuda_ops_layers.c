/* test_cuda_ops_layers.c - test_cuda_ops' elementwise, pooling, linear,
 * loss, SGD, loss scaling, convert and input ops, streams, events and the
 * memory accounting, against the CPU backend (see test_cuda_ops.c). */
#include "model/cuda/cuda_internal.h"
#include "tests/test_cuda_ops.h"

/* ==== elementwise, pooling ================================================================= */

void test_eltwise(const prec *p) {
    tb_backend *gb = gpu_for(p);
    char what[160];
    pair x = mk(p, 3, 5, 7, 6, 0, -1, 1), y = mk(p, 3, 5, 7, 6, 2, 0, 0);
    pair b = mk(p, 3, 5, 7, 6, 0, -1, 1), d = mk(p, 3, 5, 7, 6, 0, -1, 1), d2 = mk(p, 3, 5, 7, 6, 0, -1, 1);
    g_cpu->relu_forward(g_cpu, &x.cpu, &y.cpu);
    gb->relu_forward(gb, &x.gpu, &y.gpu);
    snprintf(what, sizeof what, "relu fwd (exact) %s", p->name);
    same(what, &y, 0);
    for (int acc = 0; acc <= 1; acc++) {
        g_cpu->relu_backward(g_cpu, &y.cpu, &b.cpu, &d.cpu, acc);
        gb->relu_backward(gb, &y.gpu, &b.gpu, &d.gpu, acc);
        snprintf(what, sizeof what, "relu bwd acc%d %s", acc, p->name);
        same(what, &d, p->dt == TB_F32 ? 0 : p->tol);
    }
    g_cpu->add_forward(g_cpu, &x.cpu, &b.cpu, &y.cpu);
    gb->add_forward(gb, &x.gpu, &b.gpu, &y.gpu);
    snprintf(what, sizeof what, "add fwd %s", p->name);
    same(what, &y, p->dt == TB_F32 ? 0 : p->tol);
    g_cpu->add_backward(g_cpu, &x.cpu, &d.cpu, 1, &d2.cpu, 0);
    gb->add_backward(gb, &x.gpu, &d.gpu, 1, &d2.gpu, 0);
    snprintf(what, sizeof what, "add bwd da acc1 %s", p->name);
    same(what, &d, p->dt == TB_F32 ? 0 : p->tol);
    snprintf(what, sizeof what, "add bwd db acc0 %s", p->name);
    same(what, &d2, 0);
    drop(&x), drop(&y), drop(&b), drop(&d), drop(&d2);
}

/* GPU result vs the CPU result rounded to the GPU's dtype, exactly (NaN
 * matches NaN): the ops that compute what the CPU does in float and round
 * once (max pooling). */
static int same_rounded(const char *what, const pair *t) {
    float *g = download(t);
    const float *c = t->cpu.data;
    size_t n = tb_tensor_numel(&t->cpu), wrong = 0;
    double maxref = 0, maxerr = 0;
    for (size_t i = 0; i < n; i++) {
        float r = round_to(t->gpu.dtype, c[i]);
        if (!isnan(r)) maxref = fmax(maxref, fabs(r));
        if (isnan(r) && isnan(g[i])) continue;
        if (!(g[i] == r) || signbit(g[i]) != signbit(r)) {
            wrong++;
            double e = fabs((double)g[i] - (double)r);
            if (isnan(e)) e = INFINITY;
            if (e > maxerr) maxerr = e;
        }
    }
    free(g);
    char line[240];
    snprintf(line, sizeof line, "%s (%zu of %zu differ)", what, wrong, n);
    report(line, maxerr, maxref, wrong == 0);
    return wrong == 0;
}

/* Ties (small integers) with NaN and -inf sprinkled in, on both copies. */
static void sprinkle_nonfinite(pair *t) {
    size_t n = (size_t)t->n * t->c * t->h * t->w;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tb_rng_below(&g_rng, 64);
        if (r == 0) t->host[i] = NAN;
        else if (r == 1) t->host[i] = -INFINITY;
    }
    upload(t);
}

void test_pools(const prec *p) {
    tb_backend *gb = gpu_for(p);
    /* forced: also run the 64-bit-index and one-channel-per-thread kernels
     * (tb_cuda_pool_force), which these shapes would not take by themselves */
    static const struct {
        int n, c, h, w, k, s, pad, forced;
    } cases[] = {
        {3, 2, 7, 5, 3, 2, 1, 0},
        {2, 3, 6, 7, 2, 2, 0, 0},
        {2, 3, 5, 5, 3, 1, 1, 0},
        {4, 64, 112, 112, 3, 2, 1, 0}, /* the ResNet stem */
        {2, 64, 112, 112, 3, 2, 1, 1}, /* the stem, every kernel variant */
        {2, 12, 13, 11, 3, 2, 1, 1},   /* C % 8 != 0: bf16/fp16 scalar, fp32 4-wide */
        {2, 36, 40, 33, 7, 2, 3, 0},   /* generic window, two channel groups (fp32 NHWC) */
        {1, 8, 30, 29, 15, 1, 7, 0},   /* k 15: tiles shrink to fit shared memory */
        {1, 3, 20, 18, 17, 1, 8, 0},   /* k 17: the recomputing backward */
    };
    char what[200];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int ho = (cases[i].h + 2 * cases[i].pad - cases[i].k) / cases[i].s + 1;
        int wo = (cases[i].w + 2 * cases[i].pad - cases[i].k) / cases[i].s + 1;
        tb_pool_geom g = {cases[i].k, cases[i].s, cases[i].pad};
        /* inputs: 0 uniform, 1 ties, 2 ties with NaN and -inf */
        for (int kind = 0; kind <= 2; kind++) {
            pair x = kind ? mk(p, cases[i].n, cases[i].c, cases[i].h, cases[i].w, 1, -2, 2)
                          : mk(p, cases[i].n, cases[i].c, cases[i].h, cases[i].w, 0, -1, 1);
            if (kind == 2) sprinkle_nonfinite(&x);
            pair y = mk(p, cases[i].n, cases[i].c, ho, wo, 2, 0, 0), dy = mk(p, cases[i].n, cases[i].c, ho, wo, 0, -1, 1);
            pair dx = mk(p, cases[i].n, cases[i].c, cases[i].h, cases[i].w, 0, -1, 1);
            const char *tag = kind == 0 ? "" : kind == 1 ? " ties" : " ties+nan";
            g_cpu->maxpool_forward(g_cpu, &g, &x.cpu, &y.cpu);
            for (int force = 0; force <= (cases[i].forced && kind == 2 ? 3 : 0); force++) {
                const char *fname = force == 0 ? "" : force == TB_CUDA_POOL_WIDE ? " [64-bit]"
                                                 : force == TB_CUDA_POOL_SCALAR ? " [scalar]" : " [64-bit scalar]";
                tb_cuda_pool_force(gb, force);
                gb->maxpool_forward(gb, &g, &x.gpu, &y.gpu);
                snprintf(what, sizeof what, "maxpool [%d,%d,%d,%d] k%d s%d p%d fwd%s%s (exact) %s", cases[i].n,
                         cases[i].c, cases[i].h, cases[i].w, g.k, g.stride, g.pad, tag, fname, p->name);
                same_rounded(what, &y);
                for (int acc = 0; acc <= 1; acc++) {
                    upload(&dx); /* the same starting dx on both */
                    g_cpu->maxpool_backward(g_cpu, &g, &x.cpu, &y.cpu, &dy.cpu, &dx.cpu, acc);
                    gb->maxpool_backward(gb, &g, &x.gpu, &y.gpu, &dy.gpu, &dx.gpu, acc);
                    snprintf(what, sizeof what, "maxpool bwd acc%d%s%s (first-max routing, exact) %s", acc, tag,
                             fname, p->name);
                    same_rounded(what, &dx);
                }
            }
            tb_cuda_pool_force(gb, 0);
            drop(&x), drop(&y), drop(&dy), drop(&dx);
        }
    }
    pair x = mk(p, 5, 33, 7, 7, 0, -1, 1), y = mk(p, 5, 33, 1, 1, 2, 0, 0);
    pair dy = mk(p, 5, 33, 1, 1, 0, -1, 1), dx = mk(p, 5, 33, 7, 7, 0, -1, 1);
    g_cpu->avgpool_forward(g_cpu, &x.cpu, &y.cpu);
    gb->avgpool_forward(gb, &x.gpu, &y.gpu);
    snprintf(what, sizeof what, "avgpool fwd %s", p->name);
    same(what, &y, p->dt == TB_F32 ? 1e-6 : p->tol);
    for (int acc = 0; acc <= 1; acc++) {
        g_cpu->avgpool_backward(g_cpu, &dy.cpu, &dx.cpu, acc);
        gb->avgpool_backward(gb, &dy.gpu, &dx.gpu, acc);
        snprintf(what, sizeof what, "avgpool bwd acc%d %s", acc, p->name);
        same(what, &dx, p->dt == TB_F32 ? 1e-6 : p->tol);
    }
    drop(&x), drop(&y), drop(&dy), drop(&dx);
}

/* ==== linear, loss ============================================================================ */

void test_linear(const prec *p, int N, int K, int M) {
    tb_backend *gb = gpu_for(p);
    char what[200];
    pair x = mk(p, N, K, 1, 1, 0, -1, 1), w = mk(p, M, K, 1, 1, 0, -1, 1), y = mk(p, N, M, 1, 1, 2, 0, 0);
    pair dy = mk(p, N, M, 1, 1, 0, -1, 1), dx = mk(p, N, K, 1, 1, 0, -1, 1), dw = mk(p, M, K, 1, 1, 2, 0, 0);
    vec b = mkv(gb, M, -1, 1), db = mkv(gb, M, 0, 0);
    g_cpu->linear_forward(g_cpu, &x.cpu, &w.cpu, b.cpu, &y.cpu);
    gb->linear_forward(gb, &x.gpu, &w.gpu, b.gpu, &y.gpu);
    snprintf(what, sizeof what, "linear fwd [%d,%d] x [%d,%d]^T + b %s", N, K, M, K, p->name);
    same(what, &y, tol_sum(p, K));
    for (int acc = 0; acc <= 1; acc++) {
        g_cpu->linear_backward(g_cpu, &x.cpu, &w.cpu, &dy.cpu, &dx.cpu, acc, &dw.cpu, db.cpu);
        gb->linear_backward(gb, &x.gpu, &w.gpu, &dy.gpu, &dx.gpu, acc, &dw.gpu, db.gpu);
        snprintf(what, sizeof what, "linear bwd dx acc%d [%d,%d,%d] %s", acc, N, K, M, p->name);
        same(what, &dx, tol_sum(p, M));
        snprintf(what, sizeof what, "linear bwd dw [%d,%d,%d] %s", N, K, M, p->name);
        same(what, &dw, tol_sum(p, N));
        snprintf(what, sizeof what, "linear bwd db (bias-gradient epilogue) [%d,%d,%d] %s", N, K, M, p->name);
        samev(what, &db, p->dt == TB_F32 ? 1e-5 : 1e-2);
    }
    drop(&x), drop(&w), drop(&y), drop(&dy), drop(&dx), drop(&dw);
    dropv(&b), dropv(&db);
}

void test_xent(const prec *p, int N, int M, double eps) {
    tb_backend *gb = gpu_for(p);
    char what[200];
    pair l = mk(p, N, M, 1, 1, 0, -6, 6), dl = mk(p, N, M, 1, 1, 2, 0, 0);
    int32_t *lab = malloc((size_t)N * 4);
    for (int i = 0; i < N; i++) lab[i] = (int32_t)tb_rng_below(&g_rng, (uint64_t)M);
    lab[0] = M - 1;
    int32_t *clab = g_cpu->alloc(g_cpu, (size_t)N * 4), *glab = gb->alloc(gb, (size_t)N * 4);
    memcpy(clab, lab, (size_t)N * 4);
    gb->copy_h2d(gb, glab, lab, (size_t)N * 4);
    tb_step_scalars s0 = {0};
    s0.grad_scale = 0.375f; /* a rank's share of a global batch */
    s0.loss_scale = p->dt == TB_F16 ? 1024.0f : 1.0f;
    tb_step_scalars *cs = g_cpu->alloc(g_cpu, sizeof *cs), *gs = gb->alloc(gb, sizeof *gs);
    *cs = s0;
    gb->copy_h2d(gb, gs, &s0, sizeof s0);
    g_cpu->softmax_xent(g_cpu, &l.cpu, clab, eps, cs, &dl.cpu);
    gb->softmax_xent(gb, &l.gpu, glab, eps, gs, &dl.gpu);
    tb_step_scalars back;
    gb->copy_d2h(gb, &back, gs, sizeof back);
    snprintf(what, sizeof what, "softmax_xent loss [%d,%d] eps %.2f %s", N, M, eps, p->name);
    compare(what, &back.loss, &cs->loss, 1, p->dt == TB_F32 ? 1e-6 : 1e-2);
    snprintf(what, sizeof what, "softmax_xent dlogits x grad_scale x loss_scale %s", p->name);
    same(what, &dl, p->dt == TB_F32 ? 1e-6 : p->tol);
    g_cpu->release(g_cpu, clab), gb->release(gb, glab), g_cpu->release(g_cpu, cs), gb->release(gb, gs);
    free(lab);
    drop(&l), drop(&dl);
}

/* ==== SGD, loss scaling, convert, input, checks (float32 buffers: once) ===================== */

void test_sgd(tb_backend *gb, double momentum, int nesterov) {
    enum { P = 100003 };
    const tb_sgd_segment segs[3] = {{0, 50000, 1e-4}, {50010, 30000, 0.0}, {80010, 19993, 5e-4}};
    vec p = mkv(gb, P, -1, 1), g = mkv(gb, P, -1, 1), buf = mkv(gb, P, -0.1, 0.1);
    tb_step_scalars s0 = {0};
    s0.lr = 0.1f;
    s0.loss_scale = 4.0f;
    tb_step_scalars *cs = g_cpu->alloc(g_cpu, sizeof *cs), *gs = gb->alloc(gb, sizeof *gs);
    *cs = s0;
    gb->copy_h2d(gb, gs, &s0, sizeof s0);
    char what[160];
    for (int step = 0; step < 3; step++) {
        tb_sgd_op co = {momentum, nesterov, 1, cs}, go = {momentum, nesterov, 1, gs};
        g_cpu->sgd_update(g_cpu, &co, segs, 3, p.cpu, g.cpu, momentum != 0 ? buf.cpu : NULL);
        gb->sgd_update(gb, &go, segs, 3, p.gpu, g.gpu, momentum != 0 ? buf.gpu : NULL);
    }
    snprintf(what, sizeof what, "sgd params, 3 steps, momentum %.1f nesterov %d (bit-exact)", momentum, nesterov);
    samev(what, &p, 0);
    snprintf(what, sizeof what, "sgd momentum buffers (bit-exact), momentum %.1f", momentum);
    samev(what, &buf, 0);
    /* found_inf: the step is skipped on the device */
    float inf = INFINITY;
    gb->copy_h2d(gb, g.gpu + 77, &inf, 4);
    gb->check_nonfinite(gb, g.gpu, P, gs);
    tb_sgd_op go = {momentum, nesterov, 1, gs};
    gb->sgd_update(gb, &go, segs, 3, p.gpu, g.gpu, momentum != 0 ? buf.gpu : NULL);
    snprintf(what, sizeof what, "sgd skipped on a device overflow flag, momentum %.1f", momentum);
    samev(what, &p, 0);
    gb->loss_scale_update(gb, gs, 2000);
    tb_step_scalars back;
    gb->copy_d2h(gb, &back, gs, sizeof back);
    report("loss scale halves on the overflow, skipped steps 1, flag cleared", 0, 0,
           back.loss_scale == 2.0f && back.skipped_steps == 1 && back.found_inf == 0);
    size_t bad = gb->count_nonfinite(gb, g.gpu, P);
    report("count_nonfinite finds the one Inf", 0, 0, bad == 1);
    g_cpu->release(g_cpu, cs), gb->release(gb, gs);
    dropv(&p), dropv(&g), dropv(&buf);
}

void test_loss_scale_growth(tb_backend *gb) {
    tb_step_scalars s0 = {0};
    s0.loss_scale = 8.0f;
    tb_step_scalars *gs = gb->alloc(gb, sizeof *gs), back;
    gb->copy_h2d(gb, gs, &s0, sizeof s0);
    for (int i = 0; i < 7; i++) gb->loss_scale_update(gb, gs, 3);
    gb->copy_d2h(gb, &back, gs, sizeof back);
    report("loss scale doubles every 3 clean steps (7 steps: 8 -> 32, 1 pending)", 0, 0,
           back.loss_scale == 32.0f && back.good_steps == 1 && back.skipped_steps == 0);
    s0.loss_scale = 3e38f; /* a doubling past FLT_MAX keeps the scale, as GradScaler */
    gb->copy_h2d(gb, gs, &s0, sizeof s0);
    for (int i = 0; i < 3; i++) gb->loss_scale_update(gb, gs, 3);
    gb->copy_d2h(gb, &back, gs, sizeof back);
    report("a doubling past FLT_MAX keeps the scale, the count restarts", 0, 0,
           back.loss_scale == 3e38f && back.good_steps == 0);
    gb->release(gb, gs);
}

/* convert on the CPU and the GPU over every dtype x layout x accumulate
 * combination of one [N,C,H,W] shape: *bad counts the combinations whose
 * results differ by a bit */
static void convert_shape(int N, int C, int H, int W, int *bad, int *combos) {
    static const tb_dtype dts[3] = {TB_F32, TB_BF16, TB_F16};
    size_t n = (size_t)N * C * H * W;
    for (int sd = 0; sd < 3; sd++)
        for (int dd = 0; dd < 3; dd++)
            for (int sl = 0; sl < 2; sl++)
                for (int dl = 0; dl < 2; dl++)
                    for (int acc = 0; acc <= 1; acc++) {
                        size_t ss = tb_dtype_size(dts[sd]), ds = tb_dtype_size(dts[dd]);
                        char *hs = malloc(n * ss), *hd = malloc(n * ds), *hc = malloc(n * ds), *hg = malloc(n * ds);
                        for (size_t i = 0; i < n; i++) {
                            tb_host_store(hs, dts[sd], i, tb_rng_normal(&g_rng) * 50);
                            tb_host_store(hd, dts[dd], i, tb_rng_normal(&g_rng));
                        }
                        void *cs = g_cpu->alloc(g_cpu, n * ss), *cd = g_cpu->alloc(g_cpu, n * ds);
                        void *gsrc = g_gpu->alloc(g_gpu, n * ss), *gd = g_gpu->alloc(g_gpu, n * ds);
                        memcpy(cs, hs, n * ss), memcpy(cd, hd, n * ds);
                        g_gpu->copy_h2d(g_gpu, gsrc, hs, n * ss), g_gpu->copy_h2d(g_gpu, gd, hd, n * ds);
                        tb_tensor a = {cs, N, C, H, W, dts[sd], (tb_layout)sl}, b = {cd, N, C, H, W, dts[dd], (tb_layout)dl};
                        g_cpu->convert(g_cpu, &a, &b, acc);
                        a.data = gsrc, b.data = gd;
                        g_gpu->convert(g_gpu, &a, &b, acc);
                        g_gpu->copy_d2h(g_gpu, hg, gd, n * ds);
                        memcpy(hc, cd, n * ds);
                        if (memcmp(hc, hg, n * ds)) (*bad)++;
                        (*combos)++;
                        g_cpu->release(g_cpu, cs), g_cpu->release(g_cpu, cd);
                        g_gpu->release(g_gpu, gsrc), g_gpu->release(g_gpu, gd);
                        free(hs), free(hd), free(hc), free(hg);
                    }
}

/* cu_pad_channels and cu_unpad_channels (cuda_convert.cu: TB_STEM_PAD, the
 * fused stem) against the host, bit for bit: pixels of cin channels padded
 * to cout with zeros (4 and 8: the one-store-a-pixel kernels; 5 and a
 * destination one element off: the generic one), and the first ckeep of
 * cfull channels back, overwriting and accumulating (a float32 sum rounded
 * once to the type). */
static int pad_case(tb_dtype dt, int cin, int cout, int offset) {
    const size_t px = 1000, es = tb_dtype_size(dt), nin = px * cin, nout = px * cout + offset;
    char *src = malloc(nin * es), *got = malloc(nout * es), *old = malloc(nin * es), *ref = malloc(nin * es);
    for (size_t i = 0; i < nin; i++) tb_host_store(src, dt, i, tb_rng_normal(&g_rng));
    for (size_t i = 0; i < nin; i++) tb_host_store(old, dt, i, tb_rng_normal(&g_rng));
    char *gs = g_gpu->alloc(g_gpu, nin * es), *gd = g_gpu->alloc(g_gpu, nout * es), *gk = g_gpu->alloc(g_gpu, nin * es);
    g_gpu->copy_h2d(g_gpu, gs, src, nin * es);
    cudaStream_t st = (cudaStream_t)g_gpu->compute_stream;
    cu_pad_channels(st, dt, px, cin, cout, gs, gd + offset * es, 0.0f);
    g_gpu->copy_d2h(g_gpu, got, gd, nout * es);
    int bad = 0;
    for (size_t p = 0; p < px; p++)
        for (int c = 0; c < cout; c++) {
            double want = c < cin ? tb_host_load(src, dt, p * cin + c) : 0.0;
            bad += tb_host_load(got, dt, offset + p * cout + c) != want;
        }
    for (int acc = 0; acc <= 1; acc++) { /* back: the padded copy's first cin channels onto old */
        g_gpu->copy_h2d(g_gpu, gk, old, nin * es);
        cu_unpad_channels(st, dt, px, cout, cin, gd + offset * es, gk, acc);
        g_gpu->copy_d2h(g_gpu, ref, gk, nin * es);
        for (size_t i = 0; i < nin; i++) {
            char one[8];
            float v = (float)tb_host_load(src, dt, i);
            if (acc) v = v + (float)tb_host_load(old, dt, i);
            tb_host_store(one, dt, 0, v);
            bad += tb_host_load(ref, dt, i) != tb_host_load(one, dt, 0);
        }
    }
    g_gpu->release(g_gpu, gs), g_gpu->release(g_gpu, gd), g_gpu->release(g_gpu, gk);
    free(src), free(got), free(old), free(ref);
    return bad;
}

void test_pad_kernels(void) {
    static const tb_dtype dts[3] = {TB_F32, TB_BF16, TB_F16};
    static const int cases[4][3] = {{3, 4, 0}, {3, 8, 0}, {3, 5, 0}, {3, 4, 1}}; /* cin, cout, destination offset */
    int bad = 0;
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 4; k++) bad += pad_case(dts[d], cases[k][0], cases[k][1], cases[k][2]);
    report("pad_channels 3 -> 4, 8, 5 and 4 off alignment, and back (overwrite, accumulate), 3 dtypes: bit-exact",
           bad, 0, bad == 0);
}

void test_convert_input(void) {
    static const tb_dtype dts[3] = {TB_F32, TB_BF16, TB_F16};
    /* a layout change; 1x1 (the plain pass: NCHW and NHWC coincide); H = 1 < W (not the plain pass); a layer3
     * 3x3 filter's shape */
    static const int shapes[4][4] = {{3, 5, 4, 7}, {5, 7, 1, 1}, {3, 5, 1, 7}, {64, 48, 3, 3}};
    int bad = 0, combos = 0;
    for (int sh = 0; sh < 4; sh++)
        convert_shape(shapes[sh][0], shapes[sh][1], shapes[sh][2], shapes[sh][3], &bad, &combos);
    char what[160];
    snprintf(what, sizeof what, "convert: %d shape x dtype x layout x accumulate combinations bit-exact", combos);
    report(what, bad, 0, bad == 0);

    const int N = 3, S = 9, SW = 7; /* input_u8: 3 images of 9x7 (not square: an H/W swap shows) */
    size_t px = (size_t)N * S * SW * 3;
    uint8_t *u8 = malloc(px), flip[3] = {1, 0, 1};
    for (size_t i = 0; i < px; i++) u8[i] = (uint8_t)tb_rng_below(&g_rng, 256);
    tb_input_norm norm = {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
    uint8_t *gu = g_gpu->alloc(g_gpu, px + 3);
    g_gpu->copy_h2d(g_gpu, gu, u8, px);
    g_gpu->copy_h2d(g_gpu, gu + px, flip, 3);
    for (int d = 0; d < 3; d++)
        for (int l = 0; l < 2; l++) {
            size_t ds = tb_dtype_size(dts[d]), ne = px;
            void *co = g_cpu->alloc(g_cpu, ne * ds), *go = g_gpu->alloc(g_gpu, ne * ds);
            char *hg = malloc(ne * ds);
            tb_tensor t = {co, N, 3, S, SW, dts[d], (tb_layout)l};
            g_cpu->input_u8(g_cpu, u8, flip, &norm, &t);
            t.data = go;
            g_gpu->input_u8(g_gpu, gu, gu + px, &norm, &t);
            g_gpu->copy_d2h(g_gpu, hg, go, ne * ds);
            snprintf(what, sizeof what, "input_u8 -> %s %s, flips (bit-exact)", tb_dtype_name(dts[d]),
                     tb_layout_name((tb_layout)l));
            report(what, 0, 0, memcmp(hg, co, ne * ds) == 0);
            g_cpu->release(g_cpu, co), g_gpu->release(g_gpu, go);
            free(hg);
        }
    g_gpu->release(g_gpu, gu);
    free(u8);
}

/* convert_many (the op weights' refresh in one launch): 70 pairs of
 * filter-like shapes (1x1, 3x3, 7x7, the fc's [1000,2048,1,1], a 1x7),
 * float32 NCHW into each dtype in NHWC (and one NCHW pair: the plain pass
 * beside layout changes), overwrite and accumulate, bit for bit the
 * pairs' own convert; 70 > 64 items: two launches (counted); the same
 * list again, and a list mixing destination dtypes (one convert a pair, no
 * launch of its own); and back, as the weight gradients go at the end of a
 * backward (each dtype NHWC into float32 NCHW). */
void test_convert_many(void) {
    enum { K = 70 };
    static const tb_dtype dts[3] = {TB_F32, TB_BF16, TB_F16};
    tb_tensor src[K], dst[K], ref[K];
    size_t bytes[K];
    char what[160];
    for (int d = 0; d < 4; d++) { /* 3: mixed destination dtypes */
        for (int k = 0; k < K; k++) {
            static const int kk[5] = {1, 3, 7, 1, 1};
            int o = 8 + (int)tb_rng_below(&g_rng, 64), i = 3 + (int)tb_rng_below(&g_rng, 40), sh = k % 5;
            int h = kk[sh], w = sh == 4 ? 7 : kk[sh];
            if (k == 3) o = 1000, i = 2048, h = w = 1;
            tb_dtype dt = d < 3 ? dts[d] : dts[k % 3];
            tb_layout dl = k == 5 ? TB_NCHW : TB_NHWC;
            size_t ne = (size_t)o * i * h * w;
            bytes[k] = ne * tb_dtype_size(dt);
            tb_tensor s = {g_gpu->alloc(g_gpu, ne * 4), o, i, h, w, TB_F32, TB_NCHW};
            tb_tensor t = {g_gpu->alloc(g_gpu, bytes[k]), o, i, h, w, dt, dl}, r = t;
            r.data = g_gpu->alloc(g_gpu, bytes[k]);
            float *v = malloc(ne * 4);
            for (size_t q = 0; q < ne; q++) v[q] = (float)(tb_rng_normal(&g_rng) * 2.0);
            g_gpu->copy_h2d(g_gpu, s.data, v, ne * 4);
            for (size_t q = 0; q < ne; q++) v[q] = (float)tb_rng_normal(&g_rng);
            tb_tensor vt = {v, o, i, h, w, TB_F32, TB_NCHW}, vd = {malloc(bytes[k]), o, i, h, w, dt, dl};
            g_cpu->convert(g_cpu, &vt, &vd, 0); /* the same starting values in both (accumulate) */
            g_gpu->copy_h2d(g_gpu, t.data, vd.data, bytes[k]);
            g_gpu->copy_h2d(g_gpu, r.data, vd.data, bytes[k]);
            free(v), free(vd.data);
            src[k] = s, dst[k] = t, ref[k] = r;
        }
        for (int acc = 0; acc < 2; acc++)
            for (int rep = 0; rep < 2; rep++) { /* the second time on the kept table */
                for (int k = 0; k < K; k++) g_gpu->convert(g_gpu, &src[k], &ref[k], acc);
                long l0 = tb_cuda_convert_many_launches(g_gpu);
                g_gpu->convert_many(g_gpu, src, dst, K, acc);
                long launches = tb_cuda_convert_many_launches(g_gpu) - l0, want = d < 3 ? 2 : 0;
                snprintf(what, sizeof what, "convert_many: %d pairs in %ld launches (want %ld: 64 a launch; mixed "
                         "dtypes pair by pair)", K, launches, want);
                report(what, (double)launches, (double)want, launches == want);
                int bad = 0;
                for (int k = 0; k < K; k++) {
                    char *a = malloc(bytes[k]), *b = malloc(bytes[k]);
                    g_gpu->copy_d2h(g_gpu, a, dst[k].data, bytes[k]);
                    g_gpu->copy_d2h(g_gpu, b, ref[k].data, bytes[k]);
                    bad += memcmp(a, b, bytes[k]) != 0;
                    free(a), free(b);
                }
                snprintf(what, sizeof what, "convert_many: %d pairs f32 NCHW -> %s%s, %s, pass %d = convert, bit for bit",
                         K,
                         d < 3 ? tb_dtype_name(dts[d]) : "mixed dtypes", d < 3 ? " NHWC (one NCHW)" : "",
                         acc ? "accumulate" : "overwrite", rep + 1);
                report(what, bad, 0, bad == 0);
            }
        if (d < 3) { /* back, as the weight gradients go: each dtype NHWC -> float32 NCHW, overwrite */
            int bad = 0; /* the pairs' own convert into src (its buffers now the reference), the list into back */
            tb_tensor back[K];
            for (int k = 0; k < K; k++) {
                back[k] = src[k];
                back[k].data = g_gpu->alloc(g_gpu, tb_tensor_numel(&src[k]) * 4);
                g_gpu->convert(g_gpu, &dst[k], &src[k], 0);
            }
            long l0 = tb_cuda_convert_many_launches(g_gpu);
            g_gpu->convert_many(g_gpu, dst, back, K, 0);
            long launches = tb_cuda_convert_many_launches(g_gpu) - l0;
            snprintf(what, sizeof what, "convert_many back to f32 NCHW: %d pairs in %ld launches (want 2)", K, launches);
            report(what, (double)launches, 2, launches == 2);
            for (int k = 0; k < K; k++) {
                size_t b4 = tb_tensor_numel(&src[k]) * 4;
                char *a = malloc(b4), *b = malloc(b4);
                g_gpu->copy_d2h(g_gpu, a, back[k].data, b4);
                g_gpu->copy_d2h(g_gpu, b, src[k].data, b4);
                bad += memcmp(a, b, b4) != 0;
                free(a), free(b);
                g_gpu->release(g_gpu, back[k].data);
            }
            snprintf(what, sizeof what, "convert_many: %d pairs %s NHWC (one NCHW) -> f32 NCHW = convert, bit for bit",
                     K, tb_dtype_name(dts[d]));
            report(what, bad, 0, bad == 0);
        }
        for (int k = 0; k < K; k++)
            g_gpu->release(g_gpu, src[k].data), g_gpu->release(g_gpu, dst[k].data), g_gpu->release(g_gpu, ref[k].data);
    }
}

/* input_rows (resident data): the GPU's gather-and-convert kernel against
 * the CPU's op (itself checked against per-row copies + convert in
 * test_cuda_host), bit-exact in every dtype and layout; rows repeated, out
 * of order, in a run, reaching the pool's last row; a real-size input
 * (batch 32, 3x224x224: 4.8M elements, the 32-bit kernel in one pass of
 * its grid; the 64-bit kernel, for 2^31 elements and more, is the same
 * code on model/layout.h's 64-bit functions, checked on the host). */
void test_input_rows(void) {
    static const tb_dtype dts[3] = {TB_F32, TB_BF16, TB_F16};
    static const struct {
        int N, C, H, W, P;
    } cases[] = {{6, 3, 9, 7, 11}, {5, 4, 5, 6, 8}, {32, 3, 224, 224, 48}};
    char what[160];
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int N = cases[ci].N, C = cases[ci].C, H = cases[ci].H, W = cases[ci].W, P = cases[ci].P;
        size_t per = (size_t)C * H * W, ne = (size_t)N * per;
        float *hp = malloc((size_t)P * per * 4);
        int32_t *rows = malloc((size_t)N * 4);
        for (size_t i = 0; i < (size_t)P * per; i++) hp[i] = (float)(tb_rng_normal(&g_rng) * 3.0);
        for (int i = 0; i < N; i++) rows[i] = (int32_t)tb_rng_below(&g_rng, (uint64_t)P);
        rows[0] = P - 1, rows[1] = P - 1; /* the last row, twice */
        if (N > 3) rows[2] = 0, rows[3] = 1; /* a consecutive run */
        float *cp = g_cpu->alloc(g_cpu, (size_t)P * per * 4), *gp = g_gpu->alloc(g_gpu, (size_t)P * per * 4);
        int32_t *gr = g_gpu->alloc(g_gpu, (size_t)N * 4);
        memcpy(cp, hp, (size_t)P * per * 4);
        g_gpu->copy_h2d(g_gpu, gp, hp, (size_t)P * per * 4);
        g_gpu->copy_h2d(g_gpu, gr, rows, (size_t)N * 4);
        for (int d = 0; d < 3; d++)
            for (int l = 0; l < 2; l++) {
                size_t ds = tb_dtype_size(dts[d]);
                void *co = g_cpu->alloc(g_cpu, ne * ds), *go = g_gpu->alloc(g_gpu, ne * ds);
                char *hg = malloc(ne * ds);
                tb_tensor t = {co, N, C, H, W, dts[d], (tb_layout)l};
                g_cpu->input_rows(g_cpu, cp, rows, &t);
                t.data = go;
                g_gpu->input_rows(g_gpu, gp, gr, &t);
                g_gpu->copy_d2h(g_gpu, hg, go, ne * ds);
                snprintf(what, sizeof what, "input_rows [%d,%d,%d,%d] of %d rows -> %s %s (bit-exact)", N, C, H, W,
                         P, tb_dtype_name(dts[d]), tb_layout_name((tb_layout)l));
                report(what, 0, 0, memcmp(hg, co, ne * ds) == 0);
                g_cpu->release(g_cpu, co), g_gpu->release(g_gpu, go);
                free(hg);
            }
        g_cpu->release(g_cpu, cp), g_gpu->release(g_gpu, gp), g_gpu->release(g_gpu, gr);
        free(hp), free(rows);
    }
}

/* ==== streams, events, memory ================================================================= */

void test_ordering(void) {
    tb_backend *gb = g_gpu;
    tb_stream *s = gb->stream_create(gb);
    tb_event *a = gb->event_create(gb, 1), *b = gb->event_create(gb, 1), *c = gb->event_create(gb, 0);
    report("native stream / event handles are there for comm/", 0, 0,
           gb->native_stream(gb, s) != NULL && gb->native_stream(gb, NULL) == gb->compute_stream &&
               gb->native_event(gb, a) != NULL);
    size_t n = (size_t)64 << 20;
    float *x = gb->alloc(gb, n * 4), *y = gb->alloc(gb, n * 4);
    float *pin = gb->host_alloc(gb, 1024 * 4);
    for (int i = 0; i < 1024; i++) pin[i] = (float)i;
    gb->event_record(gb, a, NULL);
    tb_tensor tx = {x, 1, 1, 1, (int)n, TB_F32, TB_NCHW}, ty = {y, 1, 1, 1, (int)n, TB_F32, TB_NCHW};
    gb->zero(gb, x, n * 4);
    for (int i = 0; i < 20; i++) gb->relu_forward(gb, &tx, &ty);
    gb->event_record(gb, b, NULL);
    /* the second stream waits for the compute stream, then uploads */
    gb->stream_wait(gb, s, b);
    gb->copy_h2d_async(gb, y, pin, 1024 * 4, s);
    gb->event_record(gb, c, s);
    gb->event_wait(gb, c);
    report("event_done after event_wait", 0, 0, gb->event_done(gb, b) && gb->event_done(gb, c));
    float back[1024];
    gb->copy_d2h(gb, back, y, sizeof back);
    report("async upload on a second stream, ordered after the compute stream's work", 0, 0,
           memcmp(back, pin, sizeof back) == 0);
    double ms = gb->event_elapsed_ms(gb, a, b);
    char what[160];
    snprintf(what, sizeof what, "elapsed ms between events: %.3f (20 relu passes over 256 MiB)", ms);
    report(what, 0, 0, ms > 0.01 && ms < 10000);

    gb->host_free(gb, pin);
    gb->release(gb, x), gb->release(gb, y);
    gb->event_destroy(gb, a), gb->event_destroy(gb, b), gb->event_destroy(gb, c);
    gb->stream_destroy(gb, s);
}

/* The allocator's accounting against cudaMemGetInfo, which sees the whole
 * device: run alone (`test_cuda_ops memory`, ctest cuda_ops_memory with
 * RUN_SERIAL), or another process's allocations land in the difference. */
void test_memory_accounting(void) {
    tb_backend *gb = g_gpu;
    char what[160];
    tb_mem_info m0, m1;
    gb->memory(gb, &m0);
    void *big = gb->alloc(gb, (size_t)512 << 20);
    gb->memory(gb, &m1);
    double dev_delta = (double)m0.device_free_now - (double)m1.device_free_now;
    snprintf(what, sizeof what, "accounting: +%.1f MiB tracked, device free fell %.1f MiB, peak %.1f MiB",
             (double)(m1.in_use - m0.in_use) / 1048576.0, dev_delta / 1048576.0, (double)m1.peak / 1048576.0);
    report(what, 0, 0,
           m1.in_use - m0.in_use == ((size_t)512 << 20) && dev_delta >= (double)(500u << 20) &&
               dev_delta <= (double)(600u << 20) && m1.peak >= m1.in_use && m1.device_total > 0);
    gb->release(gb, big);
}
