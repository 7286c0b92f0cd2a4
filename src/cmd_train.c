/* cmd_train.c - `trainbench train`, the default subcommand.
 *
 *   mpirun -np N trainbench [train] [options]
 *
 * 1. bootstrap: comm/, launch checks, backend, data source, model (seeded,
 *    --init, or --resume from the newest checkpoint), the watchdog, rank 0's
 *    state broadcast so every rank starts identical;
 * 2. the training run on all ranks: LR schedule, a progress line every
 *    --print-every steps, checkpoints, top-1/top-5 on --val after each epoch,
 *    per-step records (warm-up steps marked and left out of the timing), a
 *    stop with the step and tensor name on NaN/Inf;
 * 3. the scaling measurement (train_scaling.c);
 * 4. the tables on stdout and, from rank 0, the results file — also written,
 *    marked "aborted", when the run fails (run_report.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/checkpoint.h"
#include "src/commands.h"
#include "src/faults.h"
#include "src/launch_check.h"
#include "src/core/log.h"
#include "src/lr_schedule.h"
#include "src/provenance.h"
#include "src/run_report.h"
#include "src/core/timer.h"
#include "data/shard.h"
#include "src/trace.h"
#include "src/train_setup.h"

static void defaults(tb_train_flags *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->backend, sizeof f->backend, "auto");
    snprintf(f->model, sizeof f->model, "resnet18");
    snprintf(f->precision, sizeof f->precision, "fp32");
    snprintf(f->results, sizeof f->results, "trainbench_results.h5");
    snprintf(f->lr_schedule, sizeof f->lr_schedule, "cosine");
    snprintf(f->last_batch, sizeof f->last_batch, "drop");
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
    f->timeout = 600;
}

/* ---- data ---------------------------------------------------------------------------- */

tb_source *tb_train_source(const tb_train_flags *f, tb_train_data *d, int classes, int rank, int world,
                           tb_source_use use) {
    tb_last_batch last = use == TB_USE_VAL ? TB_LAST_KEEP : TB_LAST_PAD;
    if (use == TB_USE_TRAIN && tb_last_batch_parse(f->last_batch, &last) != 0)
        tb_die("train: --last-batch '%s' is not drop, pad or keep", f->last_batch);
    int train = use != TB_USE_VAL;
    if (f->batch_file[0])
        return tb_source_batchfile(f->batch_file, classes, TB_RESNET_MIN_IMAGE, f->batch, rank, world, last);
    if (!f->data[0])
        return tb_source_synthetic(classes, f->image, f->batch, f->synthetic_size, (uint64_t)f->seed,
                                   rank, world, last);
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
    o.last_batch = last;
    o.seed = (uint64_t)f->seed;
    o.strict = f->strict_data;
    o.format = TB_OUT_F32_NCHW;
    return tb_source_loader(&o);
}

/* ---- failures ---------------------------------------------------------------------------- */

typedef struct {
    tb_run_report *report;   /* rank 0 */
    int rank;
    const char *host;
} abort_ctx;

/* The watchdog found a dead, silent or stuck rank (monitor thread). */
static void on_watchdog(const char *why, void *p) {
    abort_ctx *a = p;
    fprintf(stderr, "trainbench[rank %d %s]: error: watchdog: %s\n", a->rank, a->host, why);
    fflush(stderr);
    if (a->rank == 0 && a->report) tb_run_report_write(a->report, "aborted", why, 0.5);
}

/* A failure every rank reached together (NaN/Inf after the all-reduce):
 * rank 0 keeps what was measured, every rank says why, all exit 1. */
static _Noreturn void stop_together(tb_comm *world, tb_monitor *mon, tb_run_report *report,
                                    const tb_comm_info *info, const char *why) {
    tb_monitor_stop(mon);
    if (info->rank == 0) tb_run_report_write(report, "aborted", why, 0);
    tb_say_error("train: %s", why);
    tb_comm_exit_all(world, 1);
}

/* A bad setting every rank finds the same way: one line each, exit 1
 * together (no MPI_Abort, no teardown noise). */
static _Noreturn __attribute__((format(printf, 3, 4))) void die_together(tb_comm *world, tb_monitor *mon,
                                                                         const char *fmt, ...) {
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    tb_monitor_stop(mon);
    tb_say_error("train: %s", why);
    tb_comm_exit_all(world, 1);
}

/* Appends "rank R (host)" to a list of at most 4 ranks, then counts the rest. */
static void name_rank(char *list, size_t len, int *named, int rank, const char *hosts, const char *extra) {
    size_t used = strlen(list);
    if (*named < 4)
        snprintf(list + used, len - used, "%srank %d (%s)%s", *named ? ", " : "", rank, hosts + 64 * (size_t)rank,
                 extra);
    ++*named;
}

/* Indexes `path` on every rank and makes sure that every rank sees the same
 * data set: its count, classes and tb_dataset_hash (relative paths and
 * labels, in order) are compared with rank 0's. A rank that cannot index it,
 * or indexes another tree, ends the run on every rank together, with one
 * line naming the ranks and hosts. */
static void open_same_dataset(tb_comm *world, tb_monitor *mon, const char *hosts, const char *flag,
                              const char *path, tb_dataset *ds) {
    char err[512] = "";
    int ok = tb_dataset_open(path, ds, err, sizeof err) == 0;
    int nranks = tb_comm_size(world);
    int64_t mine[4] = {ok, ok ? ds->n : 0, ok ? ds->classes : 0, ok ? (int64_t)tb_dataset_hash(ds) : 0};
    int64_t *all = malloc((size_t)nranks * sizeof mine);
    if (!all) TB_FATAL("out of host memory");
    tb_comm_allgather(world, mine, all, sizeof mine);
    char list[1024] = "";
    int named = 0;
    for (int r = 0; r < nranks; r++)
        if (!all[4 * r]) name_rank(list, sizeof list, &named, r, hosts, "");
    if (named) {
        if (!ok) die_together(world, mon, "%s: %s", flag, err);
        die_together(world, mon, "%s '%s' cannot be indexed on %s%s (see %s error line); every rank needs the "
                     "same data set", flag, path, list, named > 4 ? " and more" : "", named > 1 ? "their" : "its");
    }
    for (int r = 1; r < nranks; r++) {
        const int64_t *o = all + 4 * r;
        if (o[1] == all[1] && o[2] == all[2] && o[3] == all[3]) continue;
        char extra[160];
        snprintf(extra, sizeof extra, ": %lld images in %lld classes, hash %016llx", (long long)o[1],
                 (long long)o[2], (unsigned long long)o[3]);
        name_rank(list, sizeof list, &named, r, hosts, extra);
    }
    if (named)
        die_together(world, mon,
                     "%s '%s' is not the same data set on every rank: rank 0 (%s) indexes %lld images in %lld "
                     "classes (hash %016llx) but %s%s; give every rank the same tree (one path on a shared "
                     "file system, or identical copies: same files, same class folders)",
                     flag, path, hosts, (long long)all[1], (long long)all[2], (unsigned long long)all[3], list,
                     named > 4 ? " and more" : "");
    free(all);
}

/* --last-batch drop trains full global steps only: refuses, on every rank
 * alike, data smaller than one (pad and keep train it). */
static void require_a_step(tb_comm *world, tb_monitor *mon, const tb_train_flags *f, int64_t n, int nranks) {
    if (strcmp(f->last_batch, "drop") != 0 || n >= (int64_t)nranks * f->batch) return;
    die_together(world, mon,
                 "%s has %lld %s, fewer than ranks x batch = %d x %d, so --last-batch drop (the default) "
                 "leaves no step to train; use a smaller --batch-size, more data, or --last-batch pad "
                 "(repeats samples to fill the step)",
                 f->data[0] ? "--data" : "the data", (long long)n, f->data[0] ? "images" : "samples", nranks,
                 f->batch);
}

/* --last-batch keep: refuses, on every rank alike (each computes the same
 * plan), a last step that gives some rank a count of samples with which a
 * BatchNorm would normalise a single value per channel. */
static void require_trainable_last_step(tb_comm *world, tb_monitor *mon, const tb_source *src,
                                        const tb_model *m, int batch, int nranks) {
    if (tb_source_last_batch(src) != TB_LAST_KEEP) return;
    int64_t n = tb_source_epoch_size(src), last = tb_source_steps(src) - 1;
    for (int r = 0; r < nranks; r++) {
        int64_t first;
        int count;
        tb_shard_range(n, nranks, batch, TB_LAST_KEEP, last, r, &first, &count);
        const char *bn = count > 0 ? tb_model_degenerate_bn(m, count) : NULL;
        if (bn)
            die_together(world, mon,
                         "--last-batch keep: the epoch's last step gives rank %d %d sample%s (%lld samples "
                         "over %d rank%s x batch %d), so %s would normalise a single value per channel; use "
                         "--last-batch %s, or another --batch-size",
                         r, count, count == 1 ? "" : "s", (long long)n, nranks, nranks > 1 ? "s" : "", batch,
                         bn, n >= (int64_t)nranks * batch ? "drop (the default) or pad" : "pad");
    }
}

/* What an epoch really trains under --last-batch (the run header). */
static void print_epoch_plan(const tb_source *src, int global_batch) {
    int64_t n = tb_source_epoch_size(src), trained = tb_source_epoch_trained(src);
    tb_last_batch l = tb_source_last_batch(src);
    if (n % global_batch == 0)
        printf("# last batch: %s; nothing to drop or pad: the global batch %d divides the %lld samples\n",
               tb_last_batch_name(l), global_batch, (long long)n);
    else if (l == TB_LAST_DROP)
        printf("# last batch: drop: an epoch trains %lld of its %lld samples, full steps only; %lld left out "
               "(--last-batch pad or keep to use %s)\n",
               (long long)trained, (long long)n, (long long)(n - trained), n - trained > 1 ? "them" : "it");
    else if (l == TB_LAST_PAD)
        printf("# last batch: pad: an epoch trains %lld samples, its %lld plus %lld repeated from the start of "
               "its order to fill the last step\n",
               (long long)trained, (long long)n, (long long)(trained - n));
    else
        printf("# last batch: keep: an epoch trains each of its %lld samples once; its last step holds %lld "
               "of %d (uneven shards: a rank may get none)\n",
               (long long)n, (long long)(n % global_batch), global_batch);
}

/* Dies now, not after hours of training, if `path`'s directory is not
 * writable. */
static void require_writable(const char *path, const char *what) {
    char probe[4200];
    snprintf(probe, sizeof probe, "%s.probe.%ld", path, (long)getpid());
    FILE *f = fopen(probe, "w");
    if (!f)
        tb_die("train: cannot write %s '%s' (its directory is missing or read-only); choose another "
               "path",
               what, path);
    fclose(f);
    unlink(probe);
}

/* ---- evaluation ---------------------------------------------------------------------- */

/* Top-1 and top-5 accuracy over the whole validation set, every sample
 * counted once across ranks; returns how many samples were counted. */
static int64_t evaluate(tb_model *m, tb_source *val, tb_comm *comm, tb_monitor *mon, int64_t step,
                        double *top1, double *top5) {
    int classes = m->cfg.classes;
    float *logits = malloc((size_t)m->max_batch * (size_t)classes * sizeof *logits);
    double counts[3] = {0, 0, 0}; /* top1, top5, samples */
    tb_source_batch b;
    tb_monitor_progress(mon, step, "evaluation", 0);
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
    tb_monitor_progress(mon, step, "evaluation all-reduce", 1);
    tb_comm_allreduce_sum(comm, counts, 3, TB_FLOAT64);
    *top1 = counts[2] > 0 ? counts[0] / counts[2] : NAN;
    *top5 = counts[2] > 0 ? counts[1] / counts[2] : NAN;
    free(logits);
    return (int64_t)counts[2];
}

/* The per-rank phase table of the training run (the same code prints it
 * from a results file in `trainbench report`). */
static void print_phase_table(const tb_rank_summary *all, int n, const char *hosts) {
    tb_rank_row *rows = calloc((size_t)n, sizeof *rows);
    int k = 0;
    for (int r = 0; r < n; r++)
        if (all[r].steps > 0) tb_rank_row_from(&rows[k++], &all[r], r, hosts + 64 * (size_t)r);
    tb_rank_rows_write(stdout, TB_FMT_TEXT, rows, k);
    free(rows);
}

/* Checkpoint of the state after `step` steps (rank 0; under the report lock
 * so the watchdog never writes HDF5 at the same time). */
static void save_checkpoint(tb_run_report *report, const char *path, tb_model *m, int image, int64_t step,
                            int64_t epoch, int64_t epoch_step, int seed) {
    tb_ckpt_meta meta;
    tb_ckpt_meta_for(&meta, m, image, step, epoch, seed);
    meta.epoch_step = epoch_step;
    tb_run_report_lock(report);
    tb_ckpt_save(path, m, &meta);
    tb_run_report_unlock(report);
}

/* ---- the subcommand ------------------------------------------------------------------------ */

int tb_cmd_train(int argc, char **argv) {
    tb_train_flags fl;
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
        {"last-batch", TB_OPT_CHOICE, fl.last_batch, 0, 0, "drop|pad|keep", "an epoch's remainder when ranks x batch does not divide the data: drop it, pad the last step from the epoch's start, or keep a short last step (uneven shards)"},
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
        {"resume", TB_OPT_FLAG, &fl.resume, 0, 0, NULL, "continue exactly from --ckpt when it exists"},
        {"save", TB_OPT_STRING, fl.save, 0, 0, NULL, "checkpoint written at the end of training"},
        {"init", TB_OPT_STRING, fl.init, 0, 0, NULL, "start from this checkpoint's weights"},
        {"results", TB_OPT_STRING, fl.results, 0, 0, NULL, "results file (HDF5) written by rank 0"},
        {"trace", TB_OPT_STRING, fl.trace, 0, 0, NULL, "per-rank timeline of the training steps (Chrome trace JSON)"},
        {"timeout", TB_OPT_DOUBLE, &fl.timeout, 0, 1e7, NULL, "seconds a collective or a silent rank may take (0: no watchdog)"},
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
    if (fl.resume && !fl.ckpt[0]) tb_die("train: --resume needs --ckpt FILE (the checkpoint to continue from)");
    if (fl.resume && fl.init[0]) tb_die("train: give --resume or --init, not both");
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
    tb_run_report report;
    tb_run_report_init(&report, info.rank == 0 ? fl.results : "");
    char t_start[32];
    tb_utc_now(t_start, sizeof t_start);
    if (info.rank == 0) {
        if (fl.results[0]) require_writable(fl.results, "results file");
        if (fl.ckpt[0]) require_writable(fl.ckpt, "checkpoint");
        if (fl.save[0]) require_writable(fl.save, "checkpoint");
        if (fl.trace[0]) require_writable(fl.trace, "trace file");
    }
    /* the watchdog guards every collective from here on */
    char *hosts = calloc((size_t)info.world, 64);
    tb_comm_allgather(world, info.host, hosts, 64);
    abort_ctx actx = {&report, info.rank, info.host};
    tb_monitor *mon = fl.timeout > 0 ? tb_monitor_start(world, hosts, fl.timeout, on_watchdog, &actx) : NULL;
    tb_monitor_progress(mon, 0, "start-up", 0);

    tb_train_data d;
    memset(&d, 0, sizeof d);
    int classes = fl.classes;
    if (fl.data[0]) {
        open_same_dataset(world, mon, hosts, "--data", fl.data, &d.train_ds);
        d.have_train_ds = 1;
        classes = d.train_ds.classes;
        require_a_step(world, mon, &fl, d.train_ds.n, info.world);
        if (fl.val[0]) {
            open_same_dataset(world, mon, hosts, "--val", fl.val, &d.val_ds);
            d.have_val_ds = 1;
            if (d.val_ds.classes != classes)
                die_together(world, mon, "--val has %d classes but --data has %d; they must match",
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
    char err[512];
    tb_backend *be = tb_backend_create(fl.backend, &bo, err, sizeof err);
    if (!be) tb_die("train: %s", err);
    tb_launch_check_ranks(&info, be, "train", argc, argv);

    tb_source *src = tb_train_source(&fl, &d, classes, info.rank, info.world, TB_USE_TRAIN);
    require_a_step(world, mon, &fl, tb_source_epoch_size(src), info.world);
    int image = tb_source_image_size(src);
    tb_model_opts mo = tb_model_default_opts();
    mo.fuse = !fl.no_fuse;
    tb_model *m = tb_model_create(&cfg, be, fl.batch, image, image, &mo);
    const char *bad = tb_model_degenerate_bn(m, fl.batch);
    if (bad)
        die_together(world, mon, "--batch-size %d at %dx%d leaves one value per channel in %s; raise either",
                     fl.batch, image, image, bad);
    require_trainable_last_step(world, mon, src, m, fl.batch, info.world);
    tb_model_init(m, (uint64_t)fl.seed);
    /* where training starts: [step, epoch, step within the epoch] */
    int64_t start[3] = {0, 0, 0};
    const char *from = fl.init[0] ? fl.init : (fl.resume && access(fl.ckpt, F_OK) == 0) ? fl.ckpt : NULL;
    if (from && info.rank == 0) { /* rank 0 reads; the broadcast below gives everyone the state */
        tb_ckpt_meta meta;
        tb_ckpt_read_meta(from, &meta);
        tb_ckpt_require_match(from, &meta, &cfg);
        if (fl.resume && meta.seed != fl.seed)
            tb_die("train: '%s' was written with --seed %lld; resume with the same seed (the data "
                   "order and augmentation follow it)",
                   from, (long long)meta.seed);
        tb_ckpt_load(from, m);
        if (fl.resume) {
            start[0] = meta.step;
            start[1] = meta.epoch;
            start[2] = meta.epoch_step;
        }
    }
    tb_comm_bcast(world, start, 3, TB_INT64, 0);
    if (fl.resume && info.rank == 0) {
        if (from)
            printf("# resuming from %s at step %lld (epoch %lld, %lld steps into it)\n", from,
                   (long long)start[0], (long long)start[1], (long long)start[2]);
        else
            printf("# --resume: no checkpoint at %s yet; starting at step 0\n", fl.ckpt);
    }
    tb_train_hparams hp = {fl.momentum, fl.weight_decay, fl.label_smoothing, fl.nesterov,
                           fl.no_bn_decay, (size_t)(fl.bucket_mb * 1048576.0), !fl.no_overlap};
    tb_trainer *tr = tb_trainer_create(m, world, &hp);
    tr->mon = mon;
    tb_monitor_progress(mon, start[0], "start-up broadcast", 1);
    tb_trainer_sync_state(tr);

    int64_t steps_per_epoch = tb_source_steps(src);
    if (start[2] > steps_per_epoch)
        die_together(world, mon,
                     "the checkpoint is %lld steps into epoch %lld but an epoch now has %lld steps: resume "
                     "with the --batch-size, --last-batch, data and rank count of the run that wrote it",
                     (long long)start[2], (long long)start[1], (long long)steps_per_epoch);
    int64_t total = fl.steps > 0 ? fl.steps : (int64_t)fl.epochs * steps_per_epoch;
    int global_batch = fl.batch * info.world;
    tb_lr_schedule sched;
    tb_lr_schedule_init(&sched, fl.lr_schedule, fl.lr, global_batch, fl.lr_base_batch,
                        fl.lr_warmup_steps, total, steps_per_epoch);
    double dataset_size = (double)tb_source_epoch_size(src);
    double gflop = 3.0 * 2.0 * tb_resnet_forward_macs(&m->g, &m->pt) * 1e-9;
    if (info.rank == 0) {
        tb_provenance_fill(&report.attrs, "train", argc, argv, be, info.world, hosts);
        tb_attrs *a = &report.attrs;
        tb_attrs_str(a, "start_time", t_start);
        tb_attrs_str(a, "status", "running");
        tb_attrs_str(a, "kind", "train");
        tb_attrs_str(a, "model", cfg.name);
        tb_attrs_int(a, "classes", classes);
        tb_attrs_str(a, "precision", fl.precision);
        tb_attrs_int(a, "batch_size", fl.batch);
        tb_attrs_int(a, "global_batch", global_batch);
        tb_attrs_int(a, "image_size", image);
        tb_attrs_int(a, "seed", fl.seed);
        tb_attrs_str(a, "data", fl.batch_file[0] ? fl.batch_file : fl.data[0] ? fl.data : "synthetic");
        tb_attrs_num(a, "dataset_size", dataset_size);
        int64_t trained = tb_source_epoch_trained(src), n_all = tb_source_epoch_size(src);
        tb_attrs_str(a, "last_batch", tb_last_batch_name(tb_source_last_batch(src)));
        tb_attrs_int(a, "epoch_samples_trained", trained);
        tb_attrs_int(a, "epoch_samples_dropped", trained < n_all ? n_all - trained : 0);
        tb_attrs_int(a, "epoch_samples_padded", trained > n_all ? trained - n_all : 0);
        tb_attrs_int(a, "warmup_steps", fl.warmup);
        tb_attrs_int(a, "threads_per_rank", threads);
        tb_attrs_int(a, "resumed_from_step", start[0]);
        tb_attrs_num(a, "timeout_s", fl.timeout);
        tb_attrs_str(a, "device_util_source", tb_scaling_util_label(be->name));
        printf("# trainbench train: %s, %d classes, %d rank%s, backend %s (%d thread%s/rank), %s\n",
               cfg.name, classes, info.world, info.world > 1 ? "s" : "", be->name, threads,
               threads > 1 ? "s" : "", fl.precision);
        printf("# data: %s, %.0f samples/epoch, %lld steps/epoch; batch %d/rank (global %d), %dx%d\n",
               fl.batch_file[0] ? fl.batch_file : fl.data[0] ? fl.data : "synthetic", dataset_size,
               (long long)steps_per_epoch, fl.batch, global_batch, image, image);
        print_epoch_plan(src, global_batch);
        printf("# lr %s peak %.4g (base %.4g x %d/%d), warm-up %d steps; momentum %g%s, wd %g%s, "
               "smoothing %g; buckets %.0f MiB, overlap %s; watchdog %s\n",
               fl.lr_schedule, sched.peak, fl.lr, global_batch, fl.lr_base_batch, fl.lr_warmup_steps,
               fl.momentum, fl.nesterov ? " (Nesterov)" : "", fl.weight_decay,
               fl.no_bn_decay ? " (not on BN/bias)" : "", fl.label_smoothing, fl.bucket_mb,
               fl.no_overlap ? "off" : "on", mon ? "on" : "off");
        printf("# %zu parameters, %.2f GFLOP per image per step, activations %.0f MB/rank\n",
               m->pt.n_train, gflop, m->g.act_arena_bytes / 1048576.0);
        fflush(stdout);
    }

    /* ---- 2. the training run ------------------------------------------------------------------ */
    tb_rank_summary mine;
    memset(&mine, 0, sizeof mine);
    double t_timed = 0, t_begin = tb_now(), loss = NAN, first_loss = NAN, top1 = NAN, top5 = NAN;
    int64_t val_images = 0, step = start[0], warm_end = start[0] + fl.warmup;
    double samples_run = 0; /* since start-up, all ranks (a short last step counts what it holds) */
    if (fl.trace[0]) { /* one time origin for every rank */
        tb_monitor_progress(mon, step, "trace barrier", 1);
        tb_comm_barrier(world);
        tb_trace_start(info.rank, (size_t)2000000);
    }
    for (int64_t epoch = start[1]; step < total; epoch++) {
        int64_t epoch_step = epoch == start[1] ? start[2] : 0;
        tb_source_start_epoch(src, epoch, epoch_step);
        tb_source_batch b;
        for (;;) {
            if (step >= total) break;
            tb_monitor_progress(mon, step, "data", 0);
            if (!tb_source_next(src, &b)) break;
            if (step == warm_end) {
                tb_monitor_progress(mon, step, "timing barrier", 1);
                tb_comm_barrier(world);
                t_timed = tb_now();
            }
            tb_step_record rec;
            double lr = tb_lr_at(&sched, step);
            if (tb_trainer_step(tr, &b, step, lr, &rec, err, sizeof err) != 0)
                stop_together(world, mon, &report, &info, err);
            tb_source_release(src);
            if (step >= warm_end) tb_rank_summary_add(&mine, &rec);
            tb_monitor_progress(mon, step, "loss all-reduce", 1);
            loss = tb_trainer_global_loss(tr, &rec);
            if (!isfinite(loss)) {
                size_t n = 0;
                const char *p = tb_trainer_first_nonfinite(tr, m->params, &n);
                snprintf(err, sizeof err, "step %lld: the loss is %g; %s%s%s", (long long)step, loss,
                         p ? "the first non-finite tensor is " : "every parameter is finite (an "
                                                                 "activation overflowed: lower --lr)",
                         p ? p : "", p ? " (lower --lr)" : "");
                stop_together(world, mon, &report, &info, err);
            }
            if (step == start[0]) first_loss = loss;
            samples_run += (double)rec.global_n;
            double slowest = rec.total;
            tb_monitor_progress(mon, step, "step-time all-reduce", 1);
            tb_comm_allreduce_max(world, &slowest, 1, TB_FLOAT64);
            if (info.rank == 0) {
                double row[14] = {(double)step, (double)epoch, step >= warm_end, loss, lr,
                                  rec.global_n / slowest, (double)rec.global_n, 1e3 * rec.total};
                for (int p = 0; p < TB_PH_COUNT; p++) row[8 + p] = 1e3 * rec.phase[p];
                tb_run_report_lock(&report);
                tb_table_row(&report.steps, row, NULL);
                tb_run_report_unlock(&report);
            }
            step++;
            epoch_step++;
            if (info.rank == 0 && (step == start[0] + 1 || step % fl.print_every == 0 || step == total)) {
                double el = tb_now() - t_begin;
                printf("step %6lld/%lld  epoch %lld  loss %8.4f  lr %.4g  img/s %9.2f  eta %5.0fs\n",
                       (long long)step, (long long)total, (long long)epoch, loss, lr, samples_run / el,
                       (double)(total - step) * el / (double)(step - start[0]));
                fflush(stdout);
            }
            if (fl.ckpt_every > 0 && step % fl.ckpt_every == 0 && info.rank == 0) {
                tb_monitor_progress(mon, step, "checkpoint", 0);
                save_checkpoint(&report, fl.ckpt, m, image, step, epoch, epoch_step, fl.seed);
            }
        }
        if (d.have_val_ds && epoch_step == steps_per_epoch) {
            tb_source *val = tb_train_source(&fl, &d, classes, info.rank, info.world, TB_USE_VAL);
            val_images = evaluate(m, val, world, mon, step, &top1, &top5);
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
    mine.elapsed_s = step > warm_end ? tb_now() - t_timed : 0;
    if (fl.trace[0]) {
        tb_monitor_progress(mon, step, "trace gather", 1);
        tb_trace_write(world, fl.trace, hosts);
        if (info.rank == 0) printf("# trace written to %s (open it in ui.perfetto.dev)\n", fl.trace);
    }
    tb_rank_summary *all = calloc((size_t)info.world, sizeof *all);
    tb_monitor_progress(mon, step, "summary gather", 1);
    tb_comm_gather(world, &mine, all, sizeof mine, 0);
    if (info.rank == 0) {
        tb_run_report_lock(&report);
        for (int r = 0; r < info.world; r++) {
            const tb_rank_summary *s = &all[r];
            double ns = s->steps > 0 ? s->steps : 1;
            double row[11] = {r, s->steps, s->samples, s->elapsed_s > 0 ? s->samples / s->elapsed_s : 0,
                              1e3 * s->step_s / ns};
            for (int p = 0; p < TB_PH_COUNT; p++) row[5 + p] = 1e3 * s->phase_s[p] / ns;
            tb_table_row(&report.ranks, row, hosts + 64 * r);
        }
        tb_attrs_int(&report.attrs, "steps", step);
        tb_attrs_num(&report.attrs, "final_loss", loss);
        if (d.have_val_ds) {
            tb_attrs_num(&report.attrs, "top1", top1);
            tb_attrs_num(&report.attrs, "top5", top5);
            tb_attrs_int(&report.attrs, "val_images", val_images);
        }
        tb_run_report_unlock(&report);
        print_phase_table(all, info.world, hosts);
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
        tb_monitor_progress(mon, step, "checkpoint", 0);
        int64_t ep = step / (steps_per_epoch > 0 ? steps_per_epoch : 1);
        save_checkpoint(&report, fl.save, m, image, step, ep, step - ep * steps_per_epoch, fl.seed);
        printf("# checkpoint written to %s\n", fl.save);
    }
    if (info.world > 1) {
        if (tb_fault("perturb", info.rank, -1)) { /* test only: one rank's weights drift */
            tb_real one = 1;
            be->copy_h2d(be, m->params, &one, sizeof one);
            be->sync(be);
        }
        uint64_t hash;
        tb_monitor_progress(mon, step, "replica check", 1);
        if (!tb_trainer_check_replicas(tr, &hash)) {
            snprintf(err, sizeof err,
                     "the ranks' weights differ after %lld steps: the gradient all-reduce did not give "
                     "every rank the same sum; check the interconnect with 'trainbench allreduce-bench'",
                     (long long)step);
            stop_together(world, mon, &report, &info, err);
        }
        if (info.rank == 0)
            printf("# replicas: %d ranks hold bit-identical weights, momentum and BN statistics "
                   "(hash %016llx)\n",
                   info.world, (unsigned long long)hash);
    }
    tb_trainer_destroy(tr);
    tb_source_destroy(src);

    /* ---- 3. the scaling measurement ----------------------------------------------------------- */
    if (fl.scaling_steps > 0) {
        tb_scaling_row rows[40];
        int nrows = tb_train_measure_scaling(&fl, &d, m, world, mon, &hp,
                                             tb_lr_at(&sched, total > 0 ? total - 1 : 0), classes,
                                             dataset_size, rows);
        if (info.rank == 0) {
            tb_scaling_print_seed(stdout, rows, nrows, dataset_size, tb_scaling_util_label(be->name));
            tb_scaling_print_full(stdout, rows, nrows);
            tb_run_report_lock(&report);
            for (int i = 0; i < nrows; i++) {
                const tb_scaling_row *r = &rows[i];
                double row[13 + 3 * TB_PH_COUNT] = {
                    r->ranks, r->global_batch, r->img_per_s, r->img_per_s_per_rank, r->speedup,
                    r->efficiency, r->epoch_time_s, r->device_util_pct, r->allreduce_busbw_GBps,
                    r->comm_share_pct, r->step_ms.min, r->step_ms.median, r->step_ms.max};
                for (int p = 0; p < TB_PH_COUNT; p++) {
                    row[13 + 3 * p] = r->phase_ms[p].min;
                    row[14 + 3 * p] = r->phase_ms[p].median;
                    row[15 + 3 * p] = r->phase_ms[p].max;
                }
                tb_table_row(&report.scaling, row, NULL);
            }
            tb_run_report_unlock(&report);
        }
    }

    /* ---- 4. the results file ------------------------------------------------------------------- */
    tb_monitor_progress(mon, step, "final barrier", 1);
    tb_comm_barrier(world);
    tb_monitor_stop(mon);
    if (info.rank == 0 && fl.results[0]) {
        tb_run_report_write(&report, "complete", NULL, 0);
        printf("# results written to %s\n", fl.results);
    }
    tb_run_report_free(&report);
    free(all);
    free(hosts);
    tb_model_destroy(m);
    be->destroy(be);
    if (d.have_train_ds) tb_dataset_close(&d.train_ds);
    if (d.have_val_ds) tb_dataset_close(&d.val_ds);
    tb_comm_finalize();
    return 0;
}
