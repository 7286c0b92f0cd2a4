/* test_cuda_model.c - the whole model on the CUDA backend against the CPU
 * backend: three consecutive training steps (state carried on the device:
 * momentum, BN statistics, op weight copies refreshed after each update,
 * the step scalars) in every precision; a smaller last batch on the same
 * plans; the uint8 input path; fp16 loss scaling skipping a step on an
 * injected overflow; the memory accounting against cudaMemGetInfo; and the
 * conv algorithms the plans chose. Exits 77 (skipped) without a device.
 *
 * Tolerances: ReLU inputs near zero may flip sign between two correct
 * implementations and move single gradients a lot, so the parameter
 * UPDATES (p_after - p_before over all tensors) are compared as one vector:
 * ||du_gpu - du_cpu|| <= tol * ||du_cpu||, with tol 1e-3 (fp32), 2e-2
 * (tf32), 6e-2 (bf16, fp16); the loss of every step within 1e-4 / 2e-3 /
 * 2e-2 relative. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cpu/cpu_backend.h"
#include "model/cuda/cuda_backend.h"
#include "model/model.h"
#include "src/core/log.h"
#include "src/core/rng.h"
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

static float *params(tb_model *m) {
    float *p = malloc(m->pt.n_train * sizeof *p);
    m->be->copy_d2h(m->be, p, m->params, m->pt.n_train * sizeof *p);
    return p;
}

static void train_step(tb_model *m, const float *x, const int32_t *y, int n) {
    tb_model_set_batch(m, x, y, n);
    tb_model_forward(m, 1);
    tb_model_loss(m, 0.1, 1.0);
    tb_model_backward(m, NULL, NULL);
    tb_sgd_args a = {0.02, 0.9, 1, 1.0};
    tb_model_sgd_step(m, &a, 1e-4, 1);
}

/* Three steps at the full batch, then one at a smaller batch. */
static void test_steps(const char *model, tb_backend *gpu, tb_precision p, double tol, double ltol) {
    const int n = 6, h = 64, w = 48, classes = 7;
    tb_model *c = make(g_cpu, model, classes, n, h, w, TB_PREC_FP32);
    tb_model *g = make(gpu, model, classes, n, h, w, p);
    tb_model_init(c, 31);
    tb_model_init(g, 31);
    float *x = malloc((size_t)n * 3 * h * w * sizeof *x);
    int32_t y[6];
    float *p0 = params(c);
    for (int k = 0; k < 4; k++) {
        int nb = k < 3 ? n : 3;
        batch(nb, h, w, classes, 100 + (uint64_t)k, x, y);
        train_step(c, x, y, nb);
        train_step(g, x, y, nb);
        float lc = tb_model_read_loss(c), lg = tb_model_read_loss(g);
        TB_CHECK(fabs(lg - lc) <= ltol * fabs(lc), "%s %s step %d (batch %d) loss: gpu %.6f cpu %.6f",
                 model, tb_precision_name(p), k + 1, nb, lg, lc);
    }
    float *pc = params(c), *pg = params(g);
    double num = 0, den = 0;
    for (size_t i = 0; i < c->pt.n_train; i++) {
        double uc = (double)pc[i] - p0[i], ug = (double)pg[i] - p0[i];
        num += (ug - uc) * (ug - uc);
        den += uc * uc;
    }
    double rel = sqrt(num / den);
    TB_CHECK(rel <= tol, "%s %s: 4 steps' parameter updates differ by %.3g of their norm (tol %g)",
             model, tb_precision_name(p), rel, tol);
    printf("# %s %s: update difference %.3g of its norm over 4 steps\n", model, tb_precision_name(p), rel);
    /* running statistics and counters carried too */
    float *sc = malloc(c->pt.n_state * sizeof *sc), *sg = malloc(c->pt.n_state * sizeof *sg);
    c->be->copy_d2h(c->be, sc, c->state, c->pt.n_state * sizeof *sc);
    g->be->copy_d2h(g->be, sg, g->state, g->pt.n_state * sizeof *sg);
    double maxd = 0, maxs = 0;
    for (size_t i = 0; i < c->pt.n_state; i++) {
        maxd = fmax(maxd, fabs(sc[i] - sg[i]));
        maxs = fmax(maxs, fabs(sc[i]));
    }
    TB_CHECK(maxd <= 2 * tol * maxs, "%s %s: running statistics within %.3g of max %.3g", model,
             tb_precision_name(p), maxd, maxs);
    TB_CHECK(memcmp(c->counters, g->counters, (size_t)c->pt.n_counters * sizeof(int64_t)) == 0,
             "num_batches_tracked equal");
    /* evaluation logits, read back as float32 whatever the model's dtype
     * (16-bit logits used to be read as float32 bytes: garbage top-1) */
    tb_model_forward(c, 0);
    tb_model_forward(g, 0);
    float lgc[3 * 7], lgg[3 * 7];
    tb_model_read_logits(c, lgc);
    tb_model_read_logits(g, lgg);
    double ln = 0, ld = 0;
    for (int i = 0; i < 3 * classes; i++) {
        ln += ((double)lgg[i] - lgc[i]) * ((double)lgg[i] - lgc[i]);
        ld += (double)lgc[i] * lgc[i];
    }
    double lrel = sqrt(ln / ld), ltol_logits = p == TB_PREC_FP32 ? 1e-3 : p == TB_PREC_TF32 ? 2e-2 : 0.25;
    TB_CHECK(lrel <= ltol_logits, "%s %s: eval logits read back differ by %.3g of their norm (tol %g)", model,
             tb_precision_name(p), lrel, ltol_logits);
    printf("# %s %s: eval logits difference %.3g of their norm\n", model, tb_precision_name(p), lrel);
    free(sc), free(sg), free(pc), free(pg), free(p0), free(x);
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
    if (argc > 1 && !memory_only) {
        fprintf(stderr, "usage: test_cuda_model [memory]\n");
        return 2;
    }
    char why[200];
    if (tb_cuda_device_count(why, sizeof why) <= 0) {
        printf("SKIP: test_cuda_model needs a CUDA device: %s\n", why);
        return 77;
    }
    char err[256];
    tb_backend_opts co = {.threads = 2}, go = {.device = 0}, gt = {.device = 0, .tf32 = 1};
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
        test_steps("resnet18", gpu, TB_PREC_FP32, 1e-3, 1e-4);
        test_steps("resnet18", gpu_tf32, TB_PREC_TF32, 2e-2, 2e-3);
        test_steps("resnet18", gpu, TB_PREC_BF16, 6e-2, 2e-2);
        test_steps("resnet18", gpu, TB_PREC_FP16, 6e-2, 2e-2);
        test_steps("resnet50", gpu, TB_PREC_FP32, 1e-3, 1e-4);
        test_steps("resnet50", gpu, TB_PREC_BF16, 6e-2, 2e-2);
        test_fp16_overflow(gpu);
        test_u8(gpu);
    }
    gpu_tf32->destroy(gpu_tf32);
    gpu->destroy(gpu);
    g_cpu->destroy(g_cpu);
    return tb_test_exit("test_cuda_model");
}
