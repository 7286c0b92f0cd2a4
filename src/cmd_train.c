/* cmd_train.c - `trainbench train`, the default subcommand.
 *
 *   mpirun -np N trainbench [train] [options]
 *
 * 1. bootstrap (comm/), backend, data source (synthetic, image folder, or a
 *    batch file), model (seeded init or --init checkpoint), rank 0's state
 *    broadcast so every rank starts identical;
 * 2. the training run on all ranks: LR schedule, a progress line every
 *    --print-every steps, checkpoints, top-1/top-5 on --val after each epoch,
 *    per-step records (warm-up steps marked, left out of the timing);
 * 3. the scaling measurement: the same per-rank workload on the first
 *    1, 2, 4, ... N ranks for --scaling-steps timed steps each;
 * 4. the tables (training phases per rank; scaling in the seed's shape and in
 *    full) on stdout and, from rank 0, the results file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "model/model.h"
#include "src/checkpoint.h"
#include "src/launch_check.h"
#include "src/cli.h"
#include "src/commands.h"
#include "src/log.h"
#include "src/lr_schedule.h"
#include "src/provenance.h"
#include "src/results.h"
#include "src/scaling.h"
#include "src/timer.h"
#include "src/trainer.h"

typedef struct {
    char backend[TB_OPT_STR_MAX], model[TB_OPT_STR_MAX], precision[TB_OPT_STR_MAX];
    char data[TB_OPT_STR_MAX], val[TB_OPT_STR_MAX], batch_file[TB_OPT_STR_MAX];
    char results[TB_OPT_STR_MAX], save[TB_OPT_STR_MAX], init[TB_OPT_STR_MAX];
    char ckpt[TB_OPT_STR_MAX], lr_schedule[TB_OPT_STR_MAX];
    int batch, image, classes, steps, epochs, warmup, threads, loader_threads, prefetch;
    int print_every, ckpt_every, synthetic, nesterov, no_fuse, zero_init_residual, no_bn_decay;
    int no_overlap, scaling_steps, scaling_warmup, seed, lr_base_batch, lr_warmup_steps;
    int synthetic_size, strict_data;
    double lr, momentum, weight_decay, label_smoothing, bucket_mb;
} train_flags;

static void defaults(train_flags *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->backend, sizeof f->backend, "auto");
    snprintf(f->model, sizeof f->model, "resnet18");
    snprintf(f->precision, sizeof f->precision, "fp32");
    snprintf(f->results, sizeof f->results, "trainbench_results.h5");
    snprintf(f->lr_schedule, sizeof f->lr_schedule, "cosine");
    f->batch = 32;
    f->image = 64;
    f->classes = 10;
    f->steps = 100;
    f->warmup = 5;
    f->loader_threads = 2;
    f->prefetch = 3;
    f->print_every = 10;
    f->scaling_steps = 10;
    f->scaling_warmup = 3;
    f->seed = 1;
    f->lr = 0.1;
    f->lr_base_batch = 256;
    f->lr_warmup_steps = 10;
    f->momentum = 0.9;
    f->weight_decay = 5e-5;
    f->bucket_mb = 25;
    f->synthetic_size = 50000;
}

/* ---- data ---------------------------------------------------------------------------- */

typedef struct {
    tb_dataset train_ds, val_ds;
    int have_train_ds, have_val_ds;
} datasets;

static tb_source *make_source(const train_flags *f, datasets *d, int classes, int rank, int world,
                              int train) {
    if (f->batch_file[0])
        return tb_source_batchfile(f->batch_file, classes, TB_RESNET_MIN_IMAGE, f->batch, rank, world);
    if (!f->data[0])
        return tb_source_synthetic(classes, f->image, f->batch, f->synthetic_size, (uint64_t)f->seed,
                                   rank, world);
    tb_loader_opts o;
    memset(&o, 0, sizeof o);
    o.ds = train ? &d->train_ds : &d->val_ds;
    o.batch = f->batch;
    o.image_size = f->image;
    o.train = train;
    o.threads = f->loader_threads;
    o.prefetch = f->prefetch;
    o.rank = rank;
    o.world = world;
    o.seed = (uint64_t)f->seed;
    o.strict = f->strict_data;
    o.format = TB_OUT_F32_NCHW;
    return tb_source_loader(&o);
}

/* ---- evaluation ---------------------------------------------------------------------- */

/* Top-1 and top-5 accuracy over the whole validation set, every sample
 * counted once across ranks; returns how many samples were counted. */
static int64_t evaluate(tb_model *m, tb_source *val, tb_comm *comm, double *top1, double *top5) {
    int classes = m->cfg.classes;
    float *logits = malloc((size_t)m->max_batch * (size_t)classes * sizeof *logits);
    double counts[3] = {0, 0, 0}; /* top1, top5, samples */
    tb_source_batch b;
    tb_source_start_epoch(val, 0, 0);
    while (tb_source_next(val, &b)) {
        if (b.n > 0) {
            tb_model_set_batch(m, b.images, b.labels, b.n);
            tb_model_forward(m, 0);
            tb_model_read_logits(m, logits);
            for (int i = 0; i < b.n; i++) {
                const float *row = logits + (size_t)i * classes;
                float mine = row[b.labels[i]];
                int better = 0; /* classes ranked strictly above the label */
                for (int c = 0; c < classes; c++) better += row[c] > mine;
                counts[0] += better < 1;
                counts[1] += better < 5;
            }
            counts[2] += b.n;
        }
        tb_source_release(val);
    }
    tb_comm_allreduce_sum(comm, counts, 3, TB_FLOAT64);
    *top1 = counts[2] > 0 ? counts[0] / counts[2] : NAN;
    *top5 = counts[2] > 0 ? counts[1] / counts[2] : NAN;
    free(logits);
    return (int64_t)counts[2];
}

/* ---- per-rank summaries to rank 0 ------------------------------------------------------ */

/* Gathers every world rank's summary to rank 0 (members of the measured
 * communicator send theirs; the others send zeros). */
static void gather_summaries(tb_comm *world, const tb_rank_summary *mine, tb_rank_summary *all) {
    tb_comm_gather(world, mine, all, sizeof *mine, 0);
}

static void print_phase_table(const tb_rank_summary *all, int n) {
    printf("#\n# training run, ms per step by rank (timed steps only)\n# %5s %9s", "rank", "step");
    for (int p = 0; p < TB_PH_COUNT; p++) printf(" %9s", tb_phase_name[p]);
    printf(" %9s\n", "img/s");
    for (int r = 0; r < n; r++) {
        const tb_rank_summary *s = &all[r];
        if (s->steps == 0) continue;
        printf("  %5d %9.2f", r, 1e3 * s->step_s / s->steps);
        for (int p = 0; p < TB_PH_COUNT; p++) printf(" %9.2f", 1e3 * s->phase_s[p] / s->steps);
        printf(" %9.2f\n", s->elapsed_s > 0 ? s->samples / s->elapsed_s : 0);
    }
}

/* ---- the scaling measurement ------------------------------------------------------------ */

static int scaling_sizes(int world, int *sizes) {
    int n = 0;
    for (int k = 1; k < world; k *= 2) sizes[n++] = k;
    sizes[n++] = world;
    return n;
}

static void measure_scaling(const train_flags *f, datasets *d, tb_model *m, tb_comm *world,
                            const tb_train_hparams *hp, double lr, int classes, double dataset_size,
                            tb_scaling_row *rows, int *nrows) {
    int wrank = tb_comm_rank(world), wsize = tb_comm_size(world);
    int sizes[40];
    int ns = scaling_sizes(wsize, sizes);
    tb_rank_summary *all = calloc((size_t)wsize, sizeof *all);
    for (int i = 0; i < ns; i++) {
        int k = sizes[i];
        tb_rank_summary mine;
        memset(&mine, 0, sizeof mine);
        tb_comm *sub = tb_comm_first_n(world, k);
        if (sub) {
            tb_trainer *t = tb_trainer_create(m, sub, hp);
            tb_trainer_sync_state(t);
            tb_source *src = make_source(f, d, classes, tb_comm_rank(sub), k, 1);
            int64_t epoch = 0, steps_here = tb_source_steps(src);
            tb_source_start_epoch(src, epoch, 0);
            double t_start = 0;
            for (int s = 0; s < f->scaling_warmup + f->scaling_steps; s++) {
                if (s == f->scaling_warmup) {
                    tb_comm_barrier(sub);
                    t_start = tb_now();
                }
                tb_source_batch b;
                if (!tb_source_next(src, &b)) { /* wrap into the next epoch */
                    tb_source_start_epoch(src, ++epoch, 0);
                    if (!tb_source_next(src, &b)) TB_FATAL("data source yields no batch");
                }
                tb_step_record rec;
                tb_trainer_step(t, &b, lr, &rec);
                tb_source_release(src);
                if (s >= f->scaling_warmup) tb_rank_summary_add(&mine, &rec);
            }
            mine.elapsed_s = tb_now() - t_start;
            (void)steps_here;
            tb_source_destroy(src);
            tb_trainer_destroy(t);
            tb_comm_free(sub);
        }
        gather_summaries(world, &mine, all);
        if (wrank == 0) {
            tb_scaling_row_from(&rows[i], all, k, f->batch, dataset_size, -1);
            printf("# scaling: %d rank%s measured, %.2f img/s\n", k, k > 1 ? "s" : "", rows[i].img_per_s);
            fflush(stdout);
        }
        tb_comm_barrier(world);
    }
    *nrows = ns;
    if (wrank == 0) tb_scaling_finish(rows, ns);
    free(all);
}

/* ---- the subcommand ------------------------------------------------------------------------ */

int tb_cmd_train(int argc, char **argv) {
    train_flags fl;
    defaults(&fl);
    const tb_opt opts[] = {
        {"backend", TB_OPT_CHOICE, fl.backend, 0, 0, "cpu|cuda|auto", "compute backend"},
        {"model", TB_OPT_STRING, fl.model, 0, 0, NULL, "resnet18|resnet34|resnet50|resnet101|resnet152"},
        {"batch-size", TB_OPT_INT, &fl.batch, 1, 1 << 16, NULL, "samples per step and rank"},
        {"image-size", TB_OPT_INT, &fl.image, TB_RESNET_MIN_IMAGE, 4096, NULL, "input side in pixels"},
        {"classes", TB_OPT_INT, &fl.classes, 2, 1 << 20, NULL, "classes of synthetic data (--data: from the folder)"},
        {"steps", TB_OPT_INT, &fl.steps, 0, 1 << 30, NULL, "training steps (0: use --epochs)"},
        {"epochs", TB_OPT_INT, &fl.epochs, 0, 1 << 20, NULL, "training epochs (when --steps is 0)"},
        {"warmup-steps", TB_OPT_INT, &fl.warmup, 0, 1 << 30, NULL, "first steps left out of the timing"},
        {"data", TB_OPT_STRING, fl.data, 0, 0, NULL, "training images: ImageFolder directory or list file"},
        {"val", TB_OPT_STRING, fl.val, 0, 0, NULL, "validation images: top-1/top-5 after each epoch"},
        {"synthetic", TB_OPT_FLAG, &fl.synthetic, 0, 0, NULL, "synthetic input, no decoding (default without --data)"},
        {"synthetic-size", TB_OPT_INT, &fl.synthetic_size, 1, 1 << 30, NULL, "samples in a synthetic epoch"},
        {"batch-file", TB_OPT_STRING, fl.batch_file, 0, 0, NULL, "train on the rows of a batch file (/images, /labels), in order"},
        {"strict-data", TB_OPT_FLAG, &fl.strict_data, 0, 0, NULL, "a corrupt image ends the run"},
        {"threads", TB_OPT_INT, &fl.threads, 0, 4096, NULL, "CPU compute threads per rank (0: cores / ranks on the host)"},
        {"loader-threads", TB_OPT_INT, &fl.loader_threads, 1, 256, NULL, "JPEG decode threads per rank"},
        {"prefetch", TB_OPT_INT, &fl.prefetch, 2, 64, NULL, "batches the loader prepares ahead"},
        {"seed", TB_OPT_INT, &fl.seed, 0, 2147483647, NULL, "seed for weights, data order and augmentation"},
        {"precision", TB_OPT_CHOICE, fl.precision, 0, 0, "fp32|tf32|bf16|fp16", "compute precision"},
        {"lr", TB_OPT_DOUBLE, &fl.lr, 0, 1e6, NULL, "learning rate for a global batch of --lr-base-batch"},
        {"lr-base-batch", TB_OPT_INT, &fl.lr_base_batch, 1, 1 << 30, NULL, "lr scales linearly: lr * global batch / this"},
        {"lr-schedule", TB_OPT_STRING, fl.lr_schedule, 0, 0, NULL, "cosine | constant | step:E1,E2,... (x0.1 at each epoch)"},
        {"lr-warmup-steps", TB_OPT_INT, &fl.lr_warmup_steps, 0, 1 << 30, NULL, "linear lr warm-up steps"},
        {"momentum", TB_OPT_DOUBLE, &fl.momentum, 0, 1, NULL, "SGD momentum"},
        {"weight-decay", TB_OPT_DOUBLE, &fl.weight_decay, 0, 1, NULL, "L2 weight decay"},
        {"no-bn-decay", TB_OPT_FLAG, &fl.no_bn_decay, 0, 0, NULL, "no weight decay on BatchNorm and biases"},
        {"nesterov", TB_OPT_FLAG, &fl.nesterov, 0, 0, NULL, "Nesterov momentum"},
        {"label-smoothing", TB_OPT_DOUBLE, &fl.label_smoothing, 0, 1, NULL, "label smoothing epsilon"},
        {"bucket-mb", TB_OPT_DOUBLE, &fl.bucket_mb, 0.001, 1e5, NULL, "gradient all-reduce bucket size (MiB)"},
        {"no-overlap", TB_OPT_FLAG, &fl.no_overlap, 0, 0, NULL, "all-reduce after backward instead of during it"},
        {"scaling-steps", TB_OPT_INT, &fl.scaling_steps, 0, 1 << 20, NULL, "timed steps per scaling row (0: no scaling table)"},
        {"scaling-warmup", TB_OPT_INT, &fl.scaling_warmup, 0, 1 << 20, NULL, "untimed steps before each scaling row"},
        {"print-every", TB_OPT_INT, &fl.print_every, 1, 1 << 30, NULL, "progress line every N steps"},
        {"ckpt", TB_OPT_STRING, fl.ckpt, 0, 0, NULL, "checkpoint file, rewritten every --ckpt-every steps"},
        {"ckpt-every", TB_OPT_INT, &fl.ckpt_every, 0, 1 << 30, NULL, "steps between checkpoints (0: none)"},
        {"save", TB_OPT_STRING, fl.save, 0, 0, NULL, "checkpoint written at the end of training"},
        {"init", TB_OPT_STRING, fl.init, 0, 0, NULL, "start from this checkpoint's weights"},
        {"results", TB_OPT_STRING, fl.results, 0, 0, NULL, "results file (HDF5) written by rank 0"},
        {"no-fuse", TB_OPT_FLAG, &fl.no_fuse, 0, 0, NULL, "run residual add and ReLU as separate ops"},
        {"zero-init-residual", TB_OPT_FLAG, &fl.zero_init_residual, 0, 0, NULL, "each block's last BN gamma starts at 0"},
        {NULL, 0, NULL, 0, 0, NULL, NULL},
    };
    tb_cli_parse("train", "[mpirun -np N] trainbench [train] [options]", argc, argv, opts);
    if (fl.steps == 0 && fl.epochs == 0) tb_die("train: give --steps or --epochs");
    if (strcmp(fl.precision, "fp32") != 0 && strcmp(fl.precision, TB_REAL_DTYPE == TB_F64 ? "fp64" : "fp32") != 0)
        tb_die("train: --precision %s is not available on this build; use fp32", fl.precision);
    if (fl.data[0] && fl.batch_file[0]) tb_die("train: give --data or --batch-file, not both");
    if (fl.val[0] && !fl.data[0]) tb_die("train: --val needs --data (top-1/top-5 on real images)");
    if (fl.ckpt_every > 0 && !fl.ckpt[0]) tb_die("train: --ckpt-every needs --ckpt FILE");
    tb_lr_schedule probe;
    if (tb_lr_schedule_init(&probe, fl.lr_schedule, 1, 1, 1, 0, 1, 1) != 0)
        tb_die("train: --lr-schedule '%s' is not cosine, constant or step:E1,E2,...", fl.lr_schedule);

    tb_resnet_config cfg;
    if (tb_resnet_config_init(&cfg, fl.model, fl.classes) != 0)
        tb_die("train: unknown --model '%s'; known models: %s", fl.model, tb_resnet_known_names());
    cfg.zero_init_residual = fl.zero_init_residual;

    /* ---- 1. bootstrap ---------------------------------------------------------------------- */
    tb_comm_info info;
    tb_comm_init(&argc, &argv, &info);
    tb_launch_check_singleton(&info);
    tb_comm *world = tb_comm_world();
    char t_start[32];
    tb_utc_now(t_start, sizeof t_start);

    datasets d;
    memset(&d, 0, sizeof d);
    int classes = fl.classes;
    if (fl.data[0]) {
        char err[512];
        if (tb_dataset_open(fl.data, &d.train_ds, err, sizeof err) != 0) tb_die("train: %s", err);
        d.have_train_ds = 1;
        classes = d.train_ds.classes;
        if (fl.val[0]) {
            if (tb_dataset_open(fl.val, &d.val_ds, err, sizeof err) != 0) tb_die("train: %s", err);
            d.have_val_ds = 1;
            if (d.val_ds.classes != classes)
                tb_die("train: --val has %d classes but --data has %d; they must match",
                       d.val_ds.classes, classes);
        }
        if (info.rank == 0) tb_dataset_describe(&d.train_ds, stdout, 20);
    }

    cfg.classes = classes;

    int threads = fl.threads;
    if (threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = (int)(cores / (info.local_size > 0 ? info.local_size : 1));
        if (threads < 1) threads = 1;
    }
    tb_backend_opts bo = {threads, info.local_rank, 0};
    char err[256];
    tb_backend *be = tb_backend_create(fl.backend, &bo, err, sizeof err);
    if (!be) tb_die("train: %s", err);
    tb_launch_check_ranks(&info, be, "train", argc, argv);

    tb_source *src = make_source(&fl, &d, classes, info.rank, info.world, 1);
    int image = tb_source_image_size(src);
    tb_model_opts mo = tb_model_default_opts();
    mo.fuse = !fl.no_fuse;
    tb_model *m = tb_model_create(&cfg, be, fl.batch, image, image, &mo);
    const char *bad = tb_model_degenerate_bn(m, fl.batch);
    if (bad)
        tb_die("train: --batch-size %d at %dx%d leaves one value per channel in %s; raise either",
               fl.batch, image, image, bad);
    tb_model_init(m, (uint64_t)fl.seed);
    if (fl.init[0]) {
        tb_ckpt_meta meta;
        tb_ckpt_read_meta(fl.init, &meta);
        tb_ckpt_require_match(fl.init, &meta, &cfg);
        tb_ckpt_load(fl.init, m);
    }
    tb_train_hparams hp = {fl.momentum, fl.weight_decay, fl.label_smoothing, fl.nesterov,
                           fl.no_bn_decay, (size_t)(fl.bucket_mb * 1048576.0), !fl.no_overlap};
    tb_trainer *tr = tb_trainer_create(m, world, &hp);
    tb_trainer_sync_state(tr);

    int64_t steps_per_epoch = tb_source_steps(src);
    int64_t total = fl.steps > 0 ? fl.steps : (int64_t)fl.epochs * steps_per_epoch;
    int global_batch = fl.batch * info.world;
    tb_lr_schedule sched;
    tb_lr_schedule_init(&sched, fl.lr_schedule, fl.lr, global_batch, fl.lr_base_batch,
                        fl.lr_warmup_steps, total, steps_per_epoch);
    double dataset_size = (double)tb_source_epoch_size(src);
    double gflop = 3.0 * 2.0 * tb_resnet_forward_macs(&m->g, &m->pt) * 1e-9;
    if (info.rank == 0) {
        printf("# trainbench train: %s, %d classes, %d rank%s, backend %s (%d threads/rank), %s\n",
               cfg.name, classes, info.world, info.world > 1 ? "s" : "", be->name, threads, fl.precision);
        printf("# data: %s, %.0f samples/epoch, %lld steps/epoch; batch %d/rank (global %d), %dx%d\n",
               fl.batch_file[0] ? fl.batch_file : fl.data[0] ? fl.data : "synthetic", dataset_size,
               (long long)steps_per_epoch, fl.batch, global_batch, image, image);
        printf("# lr %s peak %.4g (base %.4g x %d/%d), warm-up %d steps; momentum %g%s, wd %g%s, "
               "smoothing %g; buckets %.0f MiB, overlap %s\n",
               fl.lr_schedule, sched.peak, fl.lr, global_batch, fl.lr_base_batch, fl.lr_warmup_steps,
               fl.momentum, fl.nesterov ? " (Nesterov)" : "", fl.weight_decay,
               fl.no_bn_decay ? " (not on BN/bias)" : "", fl.label_smoothing, fl.bucket_mb,
               fl.no_overlap ? "off" : "on");
        printf("# %zu parameters, %.2f GFLOP per image per step, activations %.0f MB/rank\n",
               m->pt.n_train, gflop, m->g.act_arena_bytes / 1048576.0);
        fflush(stdout);
    }

    /* ---- 2. the training run ------------------------------------------------------------------ */
    tb_table steps_tab, ranks_tab, scaling_tab;
    tb_table_init(&steps_tab, "steps",
                  "step:i,epoch:i,timed:i,loss,lr,img_per_s,samples:i,step_ms,data_ms,h2d_ms,"
                  "forward_ms,backward_ms,allreduce_ms,optimizer_ms");
    tb_rank_summary mine;
    memset(&mine, 0, sizeof mine);
    double t_timed = 0, t_begin = tb_now(), loss = NAN, first_loss = NAN, top1 = NAN, top5 = NAN;
    int64_t val_images = 0;
    int64_t step = 0;
    for (int64_t epoch = 0; step < total; epoch++) {
        tb_source_start_epoch(src, epoch, 0);
        tb_source_batch b;
        while (step < total && tb_source_next(src, &b)) {
            if (step == fl.warmup) {
                tb_comm_barrier(world);
                t_timed = tb_now();
            }
            tb_step_record rec;
            double lr = tb_lr_at(&sched, step);
            tb_trainer_step(tr, &b, lr, &rec);
            tb_source_release(src);
            if (step >= fl.warmup) tb_rank_summary_add(&mine, &rec);
            loss = tb_trainer_global_loss(tr, &rec);
            if (!isfinite(loss))
                tb_die("train: loss is %g at step %lld: training diverged; lower --lr", loss,
                       (long long)step + 1);
            if (step == 0) first_loss = loss;
            double slowest = rec.total;
            tb_comm_allreduce_max(world, &slowest, 1, TB_FLOAT64);
            if (info.rank == 0) {
                double row[14] = {(double)step, (double)epoch, step >= fl.warmup, loss, lr,
                                  rec.global_n / slowest, (double)rec.global_n, 1e3 * rec.total};
                for (int p = 0; p < TB_PH_COUNT; p++) row[8 + p] = 1e3 * rec.phase[p];
                tb_table_row(&steps_tab, row, NULL);
            }
            step++;
            if (info.rank == 0 && (step == 1 || step % fl.print_every == 0 || step == total)) {
                double el = tb_now() - t_begin;
                double rate = (double)step * global_batch / el;
                printf("step %6lld/%lld  epoch %lld  loss %8.4f  lr %.4g  img/s %9.2f  eta %5.0fs\n",
                       (long long)step, (long long)total, (long long)epoch, loss, lr, rate,
                       (double)(total - step) * global_batch / rate);
                fflush(stdout);
            }
            if (fl.ckpt_every > 0 && step % fl.ckpt_every == 0 && info.rank == 0) {
                tb_ckpt_meta meta;
                tb_ckpt_meta_for(&meta, m, image, step, epoch, fl.seed);
                tb_ckpt_save(fl.ckpt, m, &meta);
            }
        }
        if (d.have_val_ds) {
            tb_source *val = make_source(&fl, &d, classes, info.rank, info.world, 0);
            val_images = evaluate(m, val, world, &top1, &top5);
            tb_source_destroy(val);
            if (val_images != d.val_ds.n)
                TB_FATAL("evaluation counted %lld images of %lld: the validation shards overlap or "
                         "leave samples out",
                         (long long)val_images, (long long)d.val_ds.n);
            if (info.rank == 0) {
                printf("eval   epoch %lld  top-1 %.2f %%  top-5 %.2f %%  (%lld images)\n",
                       (long long)epoch, 100 * top1, 100 * top5, (long long)val_images);
                fflush(stdout);
            }
        }
    }
    mine.elapsed_s = step > fl.warmup ? tb_now() - t_timed : 0;
    tb_rank_summary *all = calloc((size_t)info.world, sizeof *all);
    gather_summaries(world, &mine, all);
    char *hosts = calloc((size_t)info.world, 64);
    tb_comm_gather(world, info.host, hosts, 64, 0);
    tb_table_init(&ranks_tab, "ranks",
                  "rank:i,steps:i,samples:i,img_per_s,step_ms,data_ms,h2d_ms,forward_ms,backward_ms,"
                  "allreduce_ms,optimizer_ms");
    tb_table_add_string_column(&ranks_tab, "host");
    if (info.rank == 0) {
        for (int r = 0; r < info.world; r++) {
            const tb_rank_summary *s = &all[r];
            double ns = s->steps > 0 ? s->steps : 1;
            double row[11] = {r, s->steps, s->samples, s->elapsed_s > 0 ? s->samples / s->elapsed_s : 0,
                              1e3 * s->step_s / ns};
            for (int p = 0; p < TB_PH_COUNT; p++) row[5 + p] = 1e3 * s->phase_s[p] / ns;
            tb_table_row(&ranks_tab, row, hosts + 64 * r);
        }
        print_phase_table(all, info.world);
        double ips = 0, slow = 0;
        for (int r = 0; r < info.world; r++) {
            ips += all[r].samples;
            if (all[r].elapsed_s > slow) slow = all[r].elapsed_s;
        }
        ips = slow > 0 ? ips / slow : 0;
        if (all[0].steps > 0)
            printf("#\n# training: %lld steps, loss %.4f -> %.4f, %.2f img/s (%.1f GFLOP/s) over %d timed "
                   "steps\n",
                   (long long)step, first_loss, loss, ips, ips * gflop, all[0].steps);
        else
            printf("#\n# training: %lld steps, loss %.4f -> %.4f; no timed step (all within "
                   "--warmup-steps %d)\n",
                   (long long)step, first_loss, loss, fl.warmup);
        fflush(stdout);
    }
    if (fl.save[0] && info.rank == 0) {
        tb_ckpt_meta meta;
        tb_ckpt_meta_for(&meta, m, image, step, step / (steps_per_epoch > 0 ? steps_per_epoch : 1), fl.seed);
        tb_ckpt_save(fl.save, m, &meta);
        printf("# checkpoint written to %s\n", fl.save);
    }
    if (info.world > 1) {
        /* test-only fault injection: one rank's weights drift */
        const char *perturb = getenv("TB_TEST_PERTURB_RANK");
        if (perturb && atoi(perturb) == info.rank) {
            tb_real one = 1;
            be->copy_h2d(be, m->params, &one, sizeof one);
            be->sync(be);
        }
        uint64_t hash;
        int same = tb_trainer_check_replicas(tr, &hash);
        if (!same)
            tb_die("train: the ranks' weights differ after %lld steps: the gradient all-reduce "
                   "did not give every rank the same sum; check the interconnect with "
                   "'trainbench allreduce-bench'",
                   (long long)step);
        if (info.rank == 0)
            printf("# replicas: %d ranks hold bit-identical weights, momentum and BN statistics "
                   "(hash %016llx)\n",
                   info.world, (unsigned long long)hash);
    }
    tb_trainer_destroy(tr);
    tb_source_destroy(src);

    /* ---- 3. the scaling measurement ----------------------------------------------------------- */
    tb_scaling_row rows[40];
    int nrows = 0;
    tb_table_init(&scaling_tab, "scaling",
                  "ranks:i,global_batch:i,img_per_s,img_per_s_per_rank,speedup,efficiency,epoch_time_s,"
                  "device_util_pct,allreduce_busbw_GBps,comm_share_pct,step_ms_min,step_ms_median,"
                  "step_ms_max");
    if (fl.scaling_steps > 0) {
        measure_scaling(&fl, &d, m, world, &hp, tb_lr_at(&sched, total > 0 ? total - 1 : 0), classes,
                        dataset_size, rows, &nrows);
        if (info.rank == 0) {
            tb_scaling_print_seed(stdout, rows, nrows, dataset_size,
                                  "CPU: compute share of the step (forward+backward+optimizer)");
            tb_scaling_print_full(stdout, rows, nrows);
            for (int i = 0; i < nrows; i++) {
                const tb_scaling_row *r = &rows[i];
                double row[13] = {r->ranks, r->global_batch, r->img_per_s, r->img_per_s_per_rank,
                                  r->speedup, r->efficiency, r->epoch_time_s, r->device_util_pct,
                                  r->allreduce_busbw_GBps, r->comm_share_pct, r->step_ms.min,
                                  r->step_ms.median, r->step_ms.max};
                tb_table_row(&scaling_tab, row, NULL);
            }
        }
    }

    /* ---- 4. the results file ------------------------------------------------------------------------- */
    if (info.rank == 0 && fl.results[0]) {
        tb_attrs a;
        memset(&a, 0, sizeof a);
        tb_provenance_fill(&a, "train", argc, argv, be, info.world, hosts);
        char t_end[32];
        tb_utc_now(t_end, sizeof t_end);
        tb_attrs_str(&a, "start_time", t_start);
        tb_attrs_str(&a, "end_time", t_end);
        tb_attrs_str(&a, "status", "complete");
        tb_attrs_str(&a, "model", cfg.name);
        tb_attrs_int(&a, "classes", classes);
        tb_attrs_str(&a, "precision", fl.precision);
        tb_attrs_int(&a, "batch_size", fl.batch);
        tb_attrs_int(&a, "global_batch", global_batch);
        tb_attrs_int(&a, "image_size", image);
        tb_attrs_int(&a, "seed", fl.seed);
        tb_attrs_str(&a, "data", fl.batch_file[0] ? fl.batch_file : fl.data[0] ? fl.data : "synthetic");
        tb_attrs_num(&a, "dataset_size", dataset_size);
        tb_attrs_int(&a, "steps", step);
        tb_attrs_int(&a, "warmup_steps", fl.warmup);
        tb_attrs_int(&a, "threads_per_rank", threads);
        tb_attrs_num(&a, "final_loss", loss);
        if (d.have_val_ds) {
            tb_attrs_num(&a, "top1", top1);
            tb_attrs_num(&a, "top5", top5);
            tb_attrs_int(&a, "val_images", val_images);
        }
        const tb_table *tabs[3] = {&steps_tab, &ranks_tab, &scaling_tab};
        tb_results_write(fl.results, &a, tabs, 3);
        tb_attrs_free(&a);
        printf("# results written to %s\n", fl.results);
    }
    tb_table_free(&steps_tab);
    tb_table_free(&ranks_tab);
    tb_table_free(&scaling_tab);
    free(all);
    free(hosts);
    tb_model_destroy(m);
    be->destroy(be);
    if (d.have_train_ds) tb_dataset_close(&d.train_ds);
    if (d.have_val_ds) tb_dataset_close(&d.val_ds);
    tb_comm_finalize();
    return 0;
}
