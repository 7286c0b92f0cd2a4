/* cmd_train.c - `trainbench train`, the default subcommand: trains the
 * ResNet on synthetic batches, prints a progress line every few steps and a
 * timing summary (img/s and per-phase ms, warm-up steps excluded). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/synthetic.h"
#include "model/model.h"
#include "src/checkpoint.h"
#include "src/cli.h"
#include "src/commands.h"
#include "src/log.h"
#include "src/timer.h"

typedef struct {
    char backend[TB_OPT_STR_MAX], model[TB_OPT_STR_MAX], precision[TB_OPT_STR_MAX];
    char save[TB_OPT_STR_MAX];
    int batch, image, classes, steps, warmup, threads, print_every, synthetic, nesterov, no_fuse;
    int seed;
    double lr, momentum, weight_decay, label_smoothing;
} train_flags;

/* Phase timers of one step, in seconds. */
enum { PH_DATA, PH_H2D, PH_FWD, PH_BWD, PH_OPT, PH_COUNT };
static const char *k_phase[PH_COUNT] = {"data", "h2d", "forward", "backward", "optimizer"};

int tb_cmd_train(int argc, char **argv) {
    train_flags fl;
    memset(&fl, 0, sizeof fl);
    snprintf(fl.backend, sizeof fl.backend, "auto");
    snprintf(fl.model, sizeof fl.model, "resnet18");
    snprintf(fl.precision, sizeof fl.precision, "fp32");
    fl.batch = 32;
    fl.image = 64;
    fl.classes = 10;
    fl.steps = 150;
    fl.warmup = 5;
    fl.print_every = 10;
    fl.synthetic = 1;
    fl.seed = 1;
    fl.lr = 0.1;
    fl.momentum = 0.9;
    fl.weight_decay = 1e-4;
    const tb_opt opts[] = {
        {"backend", TB_OPT_CHOICE, fl.backend, 0, 0, "cpu|cuda|auto", "compute backend"},
        {"model", TB_OPT_STRING, fl.model, 0, 0, NULL, "resnet18|resnet34|resnet50|resnet101|resnet152"},
        {"batch-size", TB_OPT_INT, &fl.batch, 1, 1 << 16, NULL, "samples per step (per rank)"},
        {"image-size", TB_OPT_INT, &fl.image, TB_RESNET_MIN_IMAGE, 4096, NULL, "input side in pixels"},
        {"classes", TB_OPT_INT, &fl.classes, 2, 1 << 20, NULL, "number of classes"},
        {"steps", TB_OPT_INT, &fl.steps, 1, 1 << 30, NULL, "training steps (warm-up included)"},
        {"warmup-steps", TB_OPT_INT, &fl.warmup, 0, 1 << 30, NULL, "first steps left out of the timing"},
        {"synthetic", TB_OPT_FLAG, &fl.synthetic, 0, 0, NULL, "synthetic input, no decoding (the default)"},
        {"threads", TB_OPT_INT, &fl.threads, 0, 4096, NULL, "CPU threads (0: all cores)"},
        {"seed", TB_OPT_INT, &fl.seed, 0, 2147483647, NULL, "seed for weights and data"},
        {"precision", TB_OPT_CHOICE, fl.precision, 0, 0, "fp32|tf32|bf16|fp16", "compute precision"},
        {"lr", TB_OPT_DOUBLE, &fl.lr, 0, 1e6, NULL, "learning rate"},
        {"momentum", TB_OPT_DOUBLE, &fl.momentum, 0, 1, NULL, "SGD momentum"},
        {"weight-decay", TB_OPT_DOUBLE, &fl.weight_decay, 0, 1, NULL, "L2 weight decay"},
        {"nesterov", TB_OPT_FLAG, &fl.nesterov, 0, 0, NULL, "Nesterov momentum"},
        {"label-smoothing", TB_OPT_DOUBLE, &fl.label_smoothing, 0, 1, NULL, "label smoothing epsilon"},
        {"print-every", TB_OPT_INT, &fl.print_every, 1, 1 << 30, NULL, "progress line every N steps"},
        {"save", TB_OPT_STRING, fl.save, 0, 0, NULL, "write a checkpoint here at the end"},
        {"no-fuse", TB_OPT_FLAG, &fl.no_fuse, 0, 0, NULL, "run residual add and ReLU as separate ops"},
        {NULL, 0, NULL, 0, 0, NULL, NULL},
    };
    tb_cli_parse("train", "trainbench [train] [options]", argc, argv, opts);
    if (fl.warmup >= fl.steps)
        tb_die("train: --warmup-steps %d leaves no timed step of --steps %d; lower it",
               fl.warmup, fl.steps);
    if (strcmp(fl.precision, "fp32") != 0)
        tb_die("train: --precision %s is not available on this build; use fp32",
               fl.precision);

    tb_resnet_config cfg;
    if (tb_resnet_config_init(&cfg, fl.model, fl.classes) != 0)
        tb_die("train: unknown --model '%s'; known models: %s", fl.model,
               tb_resnet_known_names());
    tb_backend_opts bo = {fl.threads, 0, 0};
    char err[256];
    tb_backend *be = tb_backend_create(fl.backend, &bo, err, sizeof err);
    if (!be) tb_die("train: %s", err);
    tb_model_opts mo = tb_model_default_opts();
    mo.fuse = !fl.no_fuse;
    tb_model *m = tb_model_create(&cfg, be, fl.batch, fl.image, fl.image, &mo);
    const char *bad = tb_model_degenerate_bn(m, fl.batch);
    if (bad)
        tb_die("train: --batch-size %d at --image-size %d leaves one value per channel "
               "in %s; raise either",
               fl.batch, fl.image, bad);
    tb_model_init(m, (uint64_t)fl.seed);

    int pool = fl.batch * 16 < 256 ? 256 : fl.batch * 16;
    size_t sample_bytes = (size_t)3 * fl.image * fl.image * sizeof(float);
    if ((size_t)pool * sample_bytes > ((size_t)1 << 30)) pool = (int)(((size_t)1 << 30) / sample_bytes);
    if (pool < fl.batch) pool = fl.batch;
    tb_synthetic syn;
    tb_synthetic_init(&syn, fl.classes, fl.image, fl.image, pool, (uint64_t)fl.seed);
    float *images = malloc((size_t)fl.batch * sample_bytes);
    int32_t *labels = malloc((size_t)fl.batch * sizeof *labels);
    if (!images || !labels) tb_die("cannot allocate a batch of %d images", fl.batch);

    double gflop_per_img = 3.0 * 2.0 * tb_resnet_forward_macs(&m->g, &m->pt) * 1e-9;
    printf("# trainbench train: %s, %d classes, backend %s, %s, batch %d, %dx%d, synthetic data\n",
           cfg.name, cfg.classes, be->name, fl.precision, fl.batch, fl.image, fl.image);
    printf("# %zu parameters, %.2f GFLOP per image per training step, activations %.0f MB, "
           "gradient arena %.0f MB (%.0f MB unplanned)\n",
           m->pt.n_train, gflop_per_img, m->g.act_arena_bytes / 1048576.0,
           m->g.grad_arena_bytes / 1048576.0, m->g.grad_bytes_unplanned / 1048576.0);

    tb_sgd_args sgd = {fl.lr, fl.momentum, fl.nesterov, 1.0};
    double phase[PH_COUNT] = {0}, timed_start = 0, t_begin = tb_now();
    float loss = NAN, first_loss = NAN;
    for (int step = 0; step < fl.steps; step++) {
        if (step == fl.warmup) {
            memset(phase, 0, sizeof phase);
            timed_start = tb_now();
        }
        double t0 = tb_now();
        tb_synthetic_batch(&syn, step, 0, 1, fl.batch, images, labels);
        double t1 = tb_now();
        tb_model_set_batch(m, images, labels, fl.batch);
        be->sync(be);
        double t2 = tb_now();
        tb_model_forward(m, 1);
        tb_model_loss(m, fl.label_smoothing);
        be->sync(be);
        double t3 = tb_now();
        tb_model_backward(m, NULL, NULL);
        be->sync(be);
        double t4 = tb_now();
        tb_model_sgd_step(m, &sgd, fl.weight_decay, 0);
        be->sync(be);
        double t5 = tb_now();
        phase[PH_DATA] += t1 - t0;
        phase[PH_H2D] += t2 - t1;
        phase[PH_FWD] += t3 - t2;
        phase[PH_BWD] += t4 - t3;
        phase[PH_OPT] += t5 - t4;

        if (step == 0 || (step + 1) % fl.print_every == 0 || step + 1 == fl.steps) {
            loss = tb_model_read_loss(m);
            if (step == 0) first_loss = loss;
            if (!isfinite(loss))
                tb_die("loss is %f at step %d: training diverged; lower --lr", loss, step + 1);
            double el = tb_now() - t_begin;
            double rate = (step + 1) * (double)fl.batch / el;
            printf("step %6d/%d  loss %8.4f  lr %.4g  img/s %8.2f  eta %5.0fs\n", step + 1,
                   fl.steps, loss, fl.lr, rate, (fl.steps - step - 1) * fl.batch / rate);
            fflush(stdout);
        }
    }
    double timed = tb_now() - timed_start;
    int timed_steps = fl.steps - fl.warmup;
    double ips = timed_steps * (double)fl.batch / timed;
    printf("#\n# %-10s %8s %10s %10s %10s\n", "steps", "img/s", "ms/step", "GFLOP/s", "loss");
    printf("  %-10d %8.2f %10.1f %10.1f %5.3f->%.3f\n", timed_steps, ips, 1e3 * timed / timed_steps,
           ips * gflop_per_img, first_loss, loss);
    printf("#\n# %-10s %10s %8s\n", "phase", "ms/step", "share");
    for (int p = 0; p < PH_COUNT; p++)
        printf("  %-10s %10.2f %7.1f%%\n", k_phase[p], 1e3 * phase[p] / timed_steps,
               100.0 * phase[p] / timed);

    if (fl.save[0]) {
        tb_ckpt_meta meta;
        tb_ckpt_meta_for(&meta, m, fl.image, fl.steps, 0, fl.seed);
        tb_ckpt_save(fl.save, m, &meta);
        printf("# checkpoint written to %s\n", fl.save);
    }
    free(images);
    free(labels);
    tb_synthetic_free(&syn);
    tb_model_destroy(m);
    be->destroy(be);
    return 0;
}
