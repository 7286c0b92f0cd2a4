/* test_cuda_model.c - the whole model on the CUDA backend: four
 * consecutive training steps (three at the full batch, one smaller on the
 * same plans) with the state carried on the device (master weights,
 * momentum, BN statistics, op weight copies refreshed after each update,
 * the step scalars) in every precision; the uint8 input path; fp16 loss
 * scaling skipping a step on an injected overflow; the memory accounting
 * against cudaMemGetInfo; and the conv algorithms the plans chose. Exits
 * 77 (skipped) without a device.
 *
 * What is compared, and why (the first H100 run, 2026-11-27, failed the
 * earlier design, which compared four steps at lr 0.02 with the CPU in
 * every precision):
 * - Precision-independent invariants, on the device's own values: each
 *   step starts from the master weights and momentum the last update left;
 *   the update follows torch's SGD rule on the gradients read back (float32
 *   rounding only); after four steps a fresh model given the carried
 *   tensors evaluates bit for bit like the carried one (deterministic,
 *   heuristic conv algorithms, so both models choose alike).
 * - Against the CPU backend: the first step's loss (the forward alone) in
 *   every precision: 1e-4 (fp32), 2e-3 (tf32), 3e-2 (bf16, fp16 on
 *   resnet18; PyTorch's own bf16 autocast vs float32 differs by up to
 *   1.5e-2 there, 3 seeds x 3 shapes), 0.15 for resnet50 bf16 (PyTorch's
 *   own: up to 0.12 at this size; a sanity bound). Beyond the first step
 *   only fp32 resnet18 is compared (every loss 1e-3, the four steps'
 *   update 5e-3 of its norm, running statistics 1e-3): these tiny-batch
 *   runs amplify rounding differences. Measured on the CPU backend alone
 *   (trainbench step, this shape, Nesterov, smoothing 0.1): a 1e-7
 *   relative perturbation of the weights grew to an update difference of
 *   0.055 after four steps at lr 0.02, 5.5e-4 at lr 2e-3; with 1e-6 noise
 *   every step at lr 1e-3 (used here) 1.1e-4 for resnet18 but 0.16 for
 *   resnet50, whose later losses moved by up to 10 %. Gradients in 16-bit
 *   are no better: PyTorch's bf16 and float32 gradients of these models at
 *   initialisation differ by 0.9 (resnet18) and 1.4 (resnet50) of their
 *   norm (BatchNorm's backward cancels). The precision of tf32/bf16 steps
 *   against float64 is the golden tests' job, against PyTorch's own error.
 * - Eval logits read back as float32 against the CPU's, after the four
 *   steps (so each side evaluates its own weights): 1e-3 (fp32), 0.25
 *   (tf32, bf16, fp16: catches float32 bytes read from a 16-bit buffer, or
 *   a logit read from the wrong place); not for resnet50 (ill-conditioned
 *   at this size, above). The first H200 run (2026-11-27) measured fp32
 *   1.4e-5, tf32 0.103, bf16 0.144, fp16 0.115: tf32 keeps fp16's 10
 *   mantissa bits, and its four steps and eval in running-statistics mode
 *   amplify them alike, so the earlier 2e-2 for tf32 was a guess of the
 *   wrong size, and tf32 now shares the 16-bit bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/rng.h"
#include "model/cpu/cpu_backend.h"
#include "model/cuda/cuda_backend.h"
#include "model/model.h"
#include "tests/tb_test.h"

static tb_backend *g_cpu;

/* fp16 starts from a loss scale of 1024 here, not GradScaler's 2^16, so a
 * comparison step is not skipped for an overflow at initialisation */
static tb_model *make(tb_backend *be, const char *name, int classes, int n, int h, int w,
                      tb_precision p) {
    tb_resnet_config cfg;
    TB_ASSERT(tb_resnet_config_init(&cfg, name, classes) == 0);
    tb_model_opts o = tb_model_opts_for(p);
    if (o.loss_scaling.init_scale > 0) o.loss_scaling.init_scale = 1024;
    return tb_model_create(&cfg, be, n, h, w, &o);
}

static void batch(int n, int h, int w, int classes, uint64_t seed, float *x, int32_t *y) {
    tb_rng r;
    tb_rng_seed(&r, seed, 5);
    for (size_t i = 0; i < (size_t)n * 3 * h * w; i++) x[i] = (float)tb_rng_normal(&r);
    for (int i = 0; i < n; i++) y[i] = (int32_t)tb_rng_below(&r, (uint64_t)classes);
}

/* A host copy of one flat [n_train] device buffer (params, grads, momentum). */
static float *flat(tb_model *m, const tb_real *dev) {
    float *p = malloc(m->pt.n_train * sizeof *p);
    m->be->copy_d2h(m->be, p, dev, m->pt.n_train * sizeof *p);
    return p;
}

static float *params(tb_model *m) { return flat(m, m->params); }

#define T_LR 1e-3 /* small: see the header (larger rates make these tiny-batch runs chaotic) */
#define T_MU 0.9
#define T_WD 1e-4

static void fwd_bwd(tb_model *m, const float *x, const int32_t *y, int n) {
    tb_model_set_batch(m, x, y, n);
    tb_model_forward(m, 1);
    tb_model_loss(m, 0.1, 1.0);
    tb_model_backward(m, NULL, NULL);
}

static void sgd(tb_model *m) {
    tb_sgd_args a = {T_LR, T_MU, 1, 1.0};
    tb_model_sgd_step(m, &a, T_WD, 1);
}

static void train_step(tb_model *m, const float *x, const int32_t *y, int n) {
    fwd_bwd(m, x, y, n);
    sgd(m);
}

/* ||a - b|| / ||b|| over n values */
static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ||(a - base) - (b - base)|| / ||b - base||: an update against the
 * reference update, both from base, over n values */
static double rel_update(const float *a, const float *b, const float *base, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double du = (double)a[i] - base[i], dr = (double)b[i] - base[i];
        num += (du - dr) * (du - dr);
        den += dr * dr;
    }
    return sqrt(num / den);
}

/* The update the device made, against torch.optim.SGD's rule (Nesterov,
 * dampening 0, decay only on conv and fc weights) evaluated in double on
 * the values read back before and after it: buf' = mu buf + g, p' = p -
 * lr (g + mu buf'), g = grad / loss_scale + wd p. Float32 rounding only. */
static void check_sgd(tb_model *m, const char *what, const float *p0, const float *m0, const float *g,
                      double loss_scale, const float *p1, const float *m1) {
    size_t n = m->pt.n_train;
    float *mref = malloc(n * sizeof *mref), *pref = malloc(n * sizeof *pref);
    for (int t = 0; t < m->pt.count; t++) {
        const tb_param *q = &m->pt.items[t];
        if (tb_param_store_of(q->role) != TB_STORE_TRAIN) continue;
        double wd = tb_param_is_bn_or_bias(q->role) ? 0.0 : T_WD;
        for (size_t i = q->offset; i < q->offset + q->numel; i++) {
            double gi = (double)g[i] / loss_scale + wd * p0[i];
            double b = T_MU * m0[i] + gi;
            mref[i] = (float)b;
            pref[i] = (float)((double)p0[i] - T_LR * (gi + T_MU * b));
        }
    }
    double em = rel_l2(m1, mref, n);
    double ep = rel_update(p1, pref, p0, n); /* on the update: p itself hides it */
    TB_CHECK(em <= 1e-5 && ep <= 1e-4, "%s: the device's SGD step vs torch's rule on the read-back values: "
             "momentum %.3g, update %.3g (tol 1e-5, 1e-4)", what, em, ep);
    free(mref), free(pref);
}

/* Four consecutive training steps on the device (three at the full batch,
 * one smaller on the same plans). Per step: the step starts from exactly
 * the master weights and momentum the last one left (nothing else wrote
 * them), and the update follows torch's SGD rule on the gradients read
 * back. After the four: a fresh model given the carried tensors (weights,
 * running statistics, counters) evaluates bit for bit like the carried one
 * (the op weight copies and the statistics the device kept are the ones a
 * fresh upload makes). Against the CPU backend (float32): the first step's
 * loss (the forward alone) within ltol1 in every precision; with
 * cpu_chain, also every later loss, the four steps' update and the
 * running statistics (fp32, resnet18: the only case where a comparison
 * across four steps is meaningful here, see the header). */
static void test_steps(const char *model, tb_backend *gpu, tb_precision p, double ltol1, int cpu_chain,
                       double logits_tol) {
    const int n = 6, h = 64, w = 48, classes = 7;
    const char *pn = tb_precision_name(p);
    tb_model *c = make(g_cpu, model, classes, n, h, w, TB_PREC_FP32);
    tb_model *g = make(gpu, model, classes, n, h, w, p);
    tb_model_init(c, 31);
    tb_model_init(g, 31);
    float *x = malloc((size_t)n * 3 * h * w * sizeof *x);
    int32_t y[6];
    float *c0 = params(c), *gp0 = params(g), *gm0 = flat(g, g->momentum);
    TB_CHECK(memcmp(c0, gp0, c->pt.n_train * sizeof *c0) == 0, "%s %s: the same initial weights", model, pn);
    for (int k = 0; k < 4; k++) {
        int nb = k < 3 ? n : 3;
        batch(nb, h, w, classes, 100 + (uint64_t)k, x, y);
        train_step(c, x, y, nb);
        fwd_bwd(g, x, y, nb);
        float *gp = params(g), *gm = flat(g, g->momentum), *gg = flat(g, g->grads);
        TB_CHECK(memcmp(gp, gp0, g->pt.n_train * sizeof *gp) == 0 && memcmp(gm, gm0, g->pt.n_train * sizeof *gm) == 0,
                 "%s %s step %d: forward and backward left the master weights and momentum as the last "
                 "update did", model, pn, k + 1);
        tb_step_scalars s;
        tb_model_read_scalars(g, &s);
        sgd(g);
        float *gp1 = params(g), *gm1 = flat(g, g->momentum);
        char what[96];
        snprintf(what, sizeof what, "%s %s step %d", model, pn, k + 1);
        check_sgd(g, what, gp, gm, gg, s.loss_scale > 0 ? (double)s.loss_scale : 1.0, gp1, gm1);
        free(gp), free(gm), free(gg), free(gp0), free(gm0);
        gp0 = gp1, gm0 = gm1;
        float lc = tb_model_read_loss(c), lg = tb_model_read_loss(g);
        TB_CHECK(isfinite(lg), "%s %s step %d: loss %g", model, pn, k + 1, (double)lg);
        double lt = k == 0 ? ltol1 : cpu_chain ? 1e-3 : -1;
        if (lt > 0)
            TB_CHECK(fabs(lg - lc) <= lt * fabs(lc), "%s %s step %d (batch %d) loss: gpu %.6f cpu %.6f (tol %g)",
                     model, pn, k + 1, nb, lg, lc, lt);
        printf("# %s %s step %d (batch %d): loss gpu %.6f cpu %.6f\n", model, pn, k + 1, nb, lg, lc);
    }
    tb_step_scalars s;
    tb_model_read_scalars(g, &s);
    TB_CHECK(s.skipped_steps == 0, "%s %s: no step skipped (%d)", model, pn, s.skipped_steps);
    TB_CHECK(memcmp(c->counters, g->counters, (size_t)c->pt.n_counters * sizeof(int64_t)) == 0,
             "%s %s: num_batches_tracked equal", model, pn);
    float *pc = params(c);
    if (cpu_chain) {
        double rel = rel_update(gp0, pc, c0, c->pt.n_train);
        TB_CHECK(rel <= 5e-3, "%s %s: 4 steps' parameter updates differ by %.3g of their norm (tol 5e-3)", model, pn,
                 rel);
        printf("# %s %s: update difference %.3g of its norm over 4 steps\n", model, pn, rel);
        float *sc = malloc(c->pt.n_state * sizeof *sc), *sg = malloc(c->pt.n_state * sizeof *sg);
        c->be->copy_d2h(c->be, sc, c->state, c->pt.n_state * sizeof *sc);
        g->be->copy_d2h(g->be, sg, g->state, g->pt.n_state * sizeof *sg);
        double rs = rel_l2(sg, sc, c->pt.n_state);
        TB_CHECK(rs <= 1e-3, "%s %s: running statistics differ by %.3g of their norm (tol 1e-3)", model, pn, rs);
        free(sc), free(sg);
    }
    /* the carried device state against a fresh model given the same tensors */
    tb_model *f = make(gpu, model, classes, n, h, w, p);
    for (int t = 0; t < g->pt.count; t++) {
        size_t need = (size_t)g->pt.items[t].numel * (tb_param_store_of(g->pt.items[t].role) == TB_STORE_COUNTER
                                                           ? sizeof(int64_t) : sizeof(float));
        void *tmp = malloc(need);
        tb_model_get_tensor(g, t, tmp);
        tb_model_set_tensor(f, t, tmp);
        free(tmp);
    }
    /* evaluation on the last (3-sample) batch, set on all three models */
    tb_model *eval[3] = {g, f, c};
    for (int e = 0; e < 3; e++) {
        tb_model_set_batch(eval[e], x, y, 3);
        tb_model_forward(eval[e], 0);
    }
    float lgg[3 * 7], lgf[3 * 7], lgc[3 * 7];
    tb_model_read_logits(g, lgg);
    tb_model_read_logits(f, lgf);
    tb_model_read_logits(c, lgc);
    TB_CHECK(memcmp(lgg, lgf, sizeof lgg) == 0,
             "%s %s: the carried model evaluates bit for bit like a fresh one given its tensors "
             "(op weight copies and running statistics kept right on the device)", model, pn);
    if (logits_tol > 0) {
        double lrel = rel_l2(lgg, lgc, (size_t)3 * classes);
        TB_CHECK(lrel <= logits_tol, "%s %s: eval logits read back differ from the CPU's by %.3g of their norm "
                 "(tol %g)", model, pn, lrel, logits_tol);
        printf("# %s %s: eval logits difference %.3g of their norm\n", model, pn, lrel);
    }
    free(pc), free(c0), free(gp0), free(gm0), free(x);
    tb_model_destroy(f);
    tb_model_destroy(c);
    tb_model_destroy(g);
}

/* fp16: an Inf in the gradients after backward (a test-only fault) makes
 * the update a no-op, halves the scale and counts a skipped step. */
static void test_fp16_overflow(tb_backend *gpu) {
    const int n = 4, S = 32, classes = 5;
    tb_model *m = make(gpu, "resnet18", classes, n, S, S, TB_PREC_FP16);
    tb_model_init(m, 3);
    float *x = malloc((size_t)n * 3 * S * S * sizeof *x);
    int32_t y[4];
    batch(n, S, S, classes, 9, x, y);
    train_step(m, x, y, n);
    tb_step_scalars s;
    tb_model_read_scalars(m, &s);
    TB_CHECK(s.loss_scale == 1024 && s.skipped_steps == 0 && isfinite(s.loss),
             "fp16 first step: scale %g, skipped %d, loss %g", (double)s.loss_scale, s.skipped_steps,
             (double)s.loss);
    float *before = params(m);
    tb_model_set_batch(m, x, y, n);
    tb_model_forward(m, 1);
    tb_model_loss(m, 0.1, 1.0);
    tb_model_backward(m, NULL, NULL);
    float inf = INFINITY;
    m->be->copy_h2d(m->be, m->grads + 1000, &inf, sizeof inf);
    tb_sgd_args a = {0.02, 0.9, 1, 1.0};
    tb_model_sgd_step(m, &a, 1e-4, 1);
    float *after = params(m);
    TB_CHECK(memcmp(before, after, m->pt.n_train * sizeof *after) == 0,
             "fp16: the overflowed step left the master weights untouched");
    tb_model_read_scalars(m, &s);
    TB_CHECK(s.loss_scale == 512 && s.skipped_steps == 1 && s.found_inf == 0,
             "fp16 overflow: scale %g (512), skipped %d (1)", (double)s.loss_scale, s.skipped_steps);
    train_step(m, x, y, n);
    free(after);
    after = params(m);
    TB_CHECK(memcmp(before, after, m->pt.n_train * sizeof *after) != 0, "fp16: the next step trains");
    tb_model_read_scalars(m, &s);
    TB_CHECK(s.skipped_steps == 1 && s.loss_scale == 512, "fp16: no new skip on a clean step");
    free(before), free(after), free(x);
    tb_model_destroy(m);
}

/* The uint8 path on the GPU equals the float path (fp32: bit-identical input). */
static void test_u8(tb_backend *gpu) {
    const int n = 3, S = 40, classes = 4;
    tb_model *a = make(gpu, "resnet18", classes, n, S, S, TB_PREC_FP32);
    tb_model_init(a, 2);
    size_t px = (size_t)S * S;
    uint8_t *u8 = malloc((size_t)n * px * 3), flip[3] = {1, 0, 1};
    float *f = malloc((size_t)n * 3 * px * sizeof *f);
    tb_input_norm norm = {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
    tb_rng r;
    tb_rng_seed(&r, 8, 8);
    for (size_t i = 0; i < (size_t)n * px * 3; i++) u8[i] = (uint8_t)tb_rng_below(&r, 256);
    for (int j = 0; j < n; j++)
        for (int c = 0; c < 3; c++)
            for (int yy = 0; yy < S; yy++)
                for (int xx = 0; xx < S; xx++) {
                    int xs = flip[j] ? S - 1 - xx : xx;
                    float v = (float)u8[(((size_t)j * S + yy) * S + xs) * 3 + c] / 255.0f;
                    f[(((size_t)j * 3 + c) * S + yy) * S + xx] = (v - norm.mean[c]) / norm.std[c];
                }
    int32_t y[3] = {0, 1, 2};
    float la[12], lb[12];
    tb_model_set_batch(a, f, y, n);
    tb_model_forward(a, 0);
    tb_model_read_logits(a, la);
    tb_model_set_batch_u8(a, u8, flip, y, n, &norm);
    tb_model_forward(a, 0);
    tb_model_read_logits(a, lb);
    TB_CHECK(memcmp(la, lb, sizeof la) == 0, "GPU: uint8 input op == float batch (eval logits bit-identical)");
    free(u8), free(f);
    tb_model_destroy(a);
}

/* Memory: tracked bytes match cudaMemGetInfo's view; the plan's arenas are
 * what the graph allocated; the algorithm choices are recorded. */
static void test_memory_and_plans(tb_backend *gpu) {
    tb_mem_info m0, m1;
    gpu->memory(gpu, &m0);
    tb_model *m = make(gpu, "resnet50", 1000, 32, 224, 224, TB_PREC_BF16);
    gpu->memory(gpu, &m1);
    double tracked = (double)(m1.in_use - m0.in_use), dev = (double)m0.device_free_now - (double)m1.device_free_now;
    printf("# resnet50 bf16 batch 32 at 224: %.1f MiB tracked (activation arena %.1f, gradient arena "
           "%.1f), device free fell %.1f MiB, peak %.1f MiB\n",
           tracked / 1048576.0, m->g.act_arena_bytes / 1048576.0, m->g.grad_arena_bytes / 1048576.0,
           dev / 1048576.0, (double)m1.peak / 1048576.0);
    TB_CHECK(tracked >= (double)(m->g.act_arena_bytes + m->g.grad_arena_bytes),
             "tracked bytes cover both arenas");
    TB_CHECK(fabs(dev - tracked) <= 0.05 * tracked + 64.0 * 1048576.0,
             "tracked %.1f MiB vs cudaMemGetInfo %.1f MiB (5%% + 64 MiB for the runtime's own)",
             tracked / 1048576.0, dev / 1048576.0);
    size_t len = 1 << 20;
    char *desc = malloc(len);
    size_t used = tb_model_describe_convs(m, desc, len);
    int lines = 0;
    for (size_t i = 0; i < used; i++) lines += desc[i] == '\n';
    TB_CHECK(lines == 53 && strstr(desc, "conv1: n=32: fwd "), "conv algorithms recorded for %d of 53 nodes", lines);
    printf("# first plans:\n%.600s\n", desc);
    free(desc);
    tb_model_destroy(m);
}

/* test_cuda_model [memory]: the training checks (default), or only the
 * memory accounting and plans, which compare with cudaMemGetInfo (the whole
 * device) and so must run with no other process on the GPU. */
int main(int argc, char **argv) {
    int memory_only = argc > 1 && strcmp(argv[1], "memory") == 0;
    int host_only = argc > 1 && strcmp(argv[1], "host") == 0;
    if (argc > 1 && !memory_only && !host_only) {
        fprintf(stderr, "usage: test_cuda_model [memory|host]\n");
        return 2;
    }
    if (host_only) { /* the checks themselves, on a second CPU backend in the GPU's place (CI) */
        tb_backend_opts co = {.threads = 2};
        g_cpu = tb_cpu_backend_create(&co);
        tb_backend *other = tb_cpu_backend_create(&co);
        test_steps("resnet18", other, TB_PREC_FP32, 1e-4, 1, 1e-3);
        other->destroy(other);
        g_cpu->destroy(g_cpu);
        return tb_test_exit("test_cuda_model host");
    }
    char why[200];
    if (tb_cuda_device_count(why, sizeof why) <= 0) {
        printf("SKIP: test_cuda_model needs a CUDA device: %s\n", why);
        return 77;
    }
    char err[256];
    /* deterministic, heuristic conv algorithms: two models of one shape make the same
     * choices, so the carried-vs-fresh comparison can be bit for bit */
    tb_backend_opts co = {.threads = 2}, go = {.device = 0, .deterministic = 1, .no_autotune = 1},
                    gt = {.device = 0, .tf32 = 1, .deterministic = 1, .no_autotune = 1};
    g_cpu = tb_cpu_backend_create(&co);
    tb_backend *gpu = tb_cuda_backend_create(&go, err, sizeof err);
    tb_backend *gpu_tf32 = tb_cuda_backend_create(&gt, err, sizeof err);
    if (!gpu || !gpu_tf32) {
        printf("test_cuda_model: %s\n", err);
        return 1;
    }
    printf("# test_cuda_model on %s\n", gpu->device);
    if (memory_only) {
        test_memory_and_plans(gpu);
    } else {
        /* first-step loss, CPU chain, eval logits vs the CPU (see the header) */
        test_steps("resnet18", gpu, TB_PREC_FP32, 1e-4, 1, 1e-3);
        test_steps("resnet18", gpu_tf32, TB_PREC_TF32, 2e-3, 0, 0.25);
        test_steps("resnet18", gpu, TB_PREC_BF16, 3e-2, 0, 0.25);
        test_steps("resnet18", gpu, TB_PREC_FP16, 3e-2, 0, 0.25);
        test_steps("resnet50", gpu, TB_PREC_FP32, 1e-4, 0, 0);
        test_steps("resnet50", gpu, TB_PREC_BF16, 0.15, 0, 0);
        test_fp16_overflow(gpu);
        test_u8(gpu);
    }
    gpu_tf32->destroy(gpu_tf32);
    gpu->destroy(gpu);
    g_cpu->destroy(g_cpu);
    return tb_test_exit("test_cuda_model");
}
