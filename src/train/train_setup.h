/* train_setup.h - what the files of `trainbench train` share:
 *
 *   train_flags.c    the flags, their defaults and checks (before MPI starts)
 *   train_data.c     the data sets and batch sources, checked alike on every rank
 *   train_setup.c    bootstrap: comm/, watchdog, backend, model, resume, header
 *   train_loop.c     the training steps, checkpoints, evaluation
 *   train_report.c   per-rank summary, replica check, scaling table, results file
 *   train_scaling.c  the in-launch scaling measurement
 *   cmd_train.c      the subcommand: the above in order
 *
 * One tb_train_run carries the state from one stage to the next. */
#ifndef TB_TRAIN_SETUP_H
#define TB_TRAIN_SETUP_H

#include "comm/comm.h"
#include "comm/monitor.h"
#include "core/cli.h"
#include "model/model.h"
#include "src/device/device.h"
#include "src/feed/feed.h"
#include "src/results/results.h"
#include "src/train/lr_schedule.h"
#include "src/train/trainer.h"

/* bootstrap (MPI, hosts), data, device (backend, CUDA context, libraries),
 * communicator and NVML, source (a synthetic run's sample pool), model (+
 * its plans), feed (the pool resident on the device), init (the initial
 * weights, a checkpoint's), trainer (+ rank 0's settings record and header) */
#define TB_SETUP_PARTS 9
#define TB_TRAIN_IMAGE_DEFAULT 64 /* --image-size when not given */
#define TB_TRAIN_CLASSES_DEFAULT 10 /* --classes when not given */

typedef struct {
    char backend[TB_OPT_STR_MAX], model[TB_OPT_STR_MAX], precision[TB_OPT_STR_MAX];
    char data[TB_OPT_STR_MAX], val[TB_OPT_STR_MAX], batch_file[TB_OPT_STR_MAX];
    char results[TB_OPT_STR_MAX], save[TB_OPT_STR_MAX], init[TB_OPT_STR_MAX];
    char ckpt[TB_OPT_STR_MAX], lr_schedule[TB_OPT_STR_MAX], trace[TB_OPT_STR_MAX];
    char last_batch[TB_OPT_STR_MAX];  /* drop | pad | keep (data/shard.h) */
    char comm[TB_OPT_STR_MAX];        /* auto | nccl | mpi */
    char allreduce_dtype[TB_OPT_STR_MAX]; /* fp32 | bf16 */
    char broadcast_buffers[TB_OPT_STR_MAX]; /* on | off: BN statistics from rank 0 before every forward */
    char cuda_graph[TB_OPT_STR_MAX];  /* auto | on | off */
    char step_mode[TB_OPT_STR_MAX];   /* auto | sync | async */
    char layout[TB_OPT_STR_MAX];      /* auto | nchw | nhwc */
    char resident[TB_OPT_STR_MAX];    /* auto | on | off: synthetic / batch-file data in device memory */
    char fuse[TB_OPT_STR_MAX];        /* auto | graph | bn | off (model/model.h TB_FUSE_*) */
    char plan_cache[TB_OPT_STR_MAX];  /* DIR | off | "" (default directory; model/plan_cache.h) */
    int share_gpu, deterministic, no_autotune, workspace_mb, graph_warmup;
    char decode[TB_OPT_STR_MAX];      /* fast | partial | full | fast-all | gpu (data/loader.h) */
    int batch, image, classes, steps, epochs, warmup, threads, loader_threads, prefetch;
    int print_every, ckpt_every, synthetic, nesterov, no_fuse, zero_init_residual, no_bn_decay;
    int no_overlap, scaling_steps, scaling_warmup, seed, lr_base_batch, lr_warmup_steps;
    int synthetic_size, strict_data, resume;
    int op_profile;                   /* extra eager steps timed op by op after training (0: none) */
    double lr, momentum, weight_decay, label_smoothing, bucket_mb, first_bucket_mb, timeout;
    double loss_scale;           /* --loss-scale: the initial dynamic loss scale (0: the precision's) */
    int loss_scale_growth;       /* --loss-scale-growth: overflow-free steps before it doubles */
    double scaling_min_s;             /* --scaling-min-seconds; < 0: 1.25 s on CUDA (NVML), 0 on the CPU */
} tb_train_flags;

typedef struct {
    tb_dataset train_ds, val_ds;
    int have_train_ds, have_val_ds;
} tb_train_data;

/* What the watchdog's failure callback needs (it runs on the monitor thread). */
typedef struct {
    tb_run_report *_Atomic report; /* rank 0; NULL while --resume has yet to keep the earlier results file */
    int rank;
    const char *host;
} tb_train_abort_ctx;

/* One training run, from start-up to the results file. */
typedef struct {
    tb_train_flags fl;
    tb_resnet_config cfg;
    int argc;
    char **argv;
    /* bootstrap */
    tb_comm_info info;
    tb_comm *world;
    char *hosts;                 /* [world][64] every rank's host name */
    char *devices;               /* [world][TB_DEVICE_NAME_MAX] every rank's be->device */
    tb_run_report report;        /* filled on rank 0 */
    tb_train_abort_ctx abort_ctx;
    tb_monitor *mon;             /* NULL with --timeout 0 */
    int abort_mark;              /* rank 0: the abort cleanup marking the results file (train_signals.c) */
    char t_start[32];
    /* data, compute, model */
    tb_train_data d;
    int classes, threads, image, global_batch;
    tb_precision prec;           /* --precision, resolved once the backend is known */
    int prec_auto;               /* --precision auto: the backend's default */
    tb_backend *be;
    int ndev, device;            /* CUDA devices this rank sees, the one it uses (-1: CPU) */
    int ranks_per_gpu;           /* the most ranks on one GPU (> 1 only with --share-gpu) */
    int host_cpus;               /* the CPUs the job has on this host (core/host_cpus.h) */
    int cpus_shared;             /* 1: ranks share CPUs (shared_cpus says where); 0: no; -1: unknown or not checked */
    char shared_cpus[160];      /* what the results file's shared_cpus says, when cpus_shared is not 0 */
    tb_nccl *nccl;               /* the world's NCCL communicator (NULL: not the NCCL path) */
    tb_nvml *nvml;               /* NVML, when it loads (CUDA) */
    tb_nvml_sampler *util;       /* GPU-Util / SM activity of this rank's device */
    tb_source *src;              /* the training batches (--last-batch) */
    tb_model *m;
    tb_train_hparams hp;
    tb_trainer *tr;
    /* the schedule */
    int64_t start[3];            /* first step, its epoch, its step within the epoch */
    int64_t ckpt_step;           /* the step the --ckpt file holds (-1: no file; every rank) */
    int64_t steps_per_epoch, total;
    tb_lr_schedule sched;
    double dataset_size;         /* samples in the data (an epoch's order) */
    double gflop;                /* per image and training step */
    double t_setup;              /* tb_now() when tb_train_setup began */
    double model_s;              /* seconds tb_model_create took (its plans: --plan-cache) */
    double setup_s[TB_SETUP_PARTS]; /* seconds of each part of tb_train_setup (tb_setup_part_name) */
    double t_ready;              /* tb_now() when tb_train_setup ended */
} tb_train_run;

/* train_signals.c: on rank 0, every tb_die / TB_FATAL marks the results
 * file "aborted" with its message (start after the report's init, stop
 * before its free); Ctrl-C, and SIGTERM where the watchdog does not take
 * it (one rank, or --timeout 0), end the run with one line and 128 + the
 * signal. */
void tb_train_abort_mark_start(tb_train_run *r);
void tb_train_abort_mark_stop(tb_train_run *r);
void tb_train_signals_start(tb_train_run *r);
void tb_train_signals_stop(void);

/* The parts of start-up the first step's line breaks down. */
extern const char *const tb_setup_part_name[TB_SETUP_PARTS];

/* What the training steps measured (train_loop.c, read by train_report.c). */
typedef struct {
    tb_rank_summary mine;        /* this rank's timed steps */
    int64_t step;                /* steps done: the number of the next one */
    int64_t warm_end;            /* the first timed step: --warmup-steps on, or later, past the CUDA graph's capture */
    int64_t epoch, epoch_step;   /* the loop's position after its last step (what a checkpoint records) */
    double loss, first_loss;     /* global mean loss of the last and first step */
    double top1, top5;           /* --val after the last full epoch, or at the end of a run that stops
                                    inside one (NaN: none) */
    int64_t val_images;          /* the images scored */
    int64_t val_bad;             /* --val files that could not be used: left out of the accuracy */
    int evals;                   /* --val evaluations run */
    double eval_s;               /* their wall seconds, left out of img/s (as the checkpoints') */
    double img_per_s;            /* the timed steps' throughput, all ranks (rank 0; 0: none) */
    int ckpts;                   /* --ckpt checkpoints written (every --ckpt-every steps, or the one at the end) */
    double ckpt_s;               /* their wall seconds (rank 0's write + every rank's wait), left out of img/s */
} tb_train_outcome;

/* train_flags.c: parses and checks the flags, fills r->fl, r->cfg, argc
 * and argv. Runs before MPI starts: a bad flag is one line, from the launcher's
 * rank 0 (tb_log_usage_errors). */
void tb_train_parse(tb_train_run *r, int argc, char **argv);

/* train_setup.c: every rank from MPI start-up to identical replicas and the
 * header on stdout (rank 0). */
void tb_train_setup(tb_train_run *r);
/* A bad setting every rank finds the same way: one line each, exit 1
 * together (no MPI_Abort, no teardown noise). */
_Noreturn __attribute__((format(printf, 2, 3))) void tb_train_die_together(tb_train_run *r, const char *fmt,
                                                                           ...);
/* A failure every rank reached together (NaN/Inf after the all-reduce,
 * different replicas): rank 0 keeps what was measured in the results file,
 * marked aborted; every rank says why; all exit 1. */
_Noreturn void tb_train_stop_together(tb_train_run *r, const char *why);
/* Frees what setup made (after the report). */
void tb_train_teardown(tb_train_run *r);

/* train_resume.c (rank 0, from train_setup.c) */
/* The steps this run trains to: --steps, or --epochs whole epochs. */
int64_t tb_train_planned_steps(const tb_train_run *r);
/* The checkpoint `from` fits this run (model, classes; resuming: image
 * size, a sane position and loss scaler, the seed, a step still to train),
 * or why not (one line in why). */
void tb_train_check_checkpoint(const tb_train_run *r, const char *from, const tb_ckpt_meta *meta, char *why,
                               size_t len);
/* Resuming at step k: an earlier --results file is renamed
 * <name>.before_resume_step<k>[.N].h5; its new name in kept ("": none), or
 * why the rename failed. */
void tb_train_keep_earlier_results(const tb_train_run *r, int64_t k, char *kept, size_t klen, char *why,
                                   size_t len);
/* Appends a "# --resume:" line to notes for each way this run differs from
 * the checkpoint's: ranks or global batch, the data's size or fingerprint. */
void tb_train_resume_notes(const tb_train_run *r, const tb_ckpt_meta *meta, char *notes, size_t len);
/* With loss scaling: the checkpoint's scale and counters put on the model
 * (or, when it has none, a note that the scale starts again). */
void tb_train_resume_scaler(tb_train_run *r, const tb_ckpt_meta *meta, char *notes, size_t len);

/* memory_check.c: every rank's first step fits in its host's memory, or
 * every rank ends with one line (collective; nothing on a GPU). */
void tb_train_check_host_memory(tb_train_run *r);

/* train_data.c */
/* Opens --data (and --val) on every rank, checked to be the same data set
 * on every rank; sets r->d and r->classes. */
void tb_train_open_data(tb_train_run *r);
/* Checks that fit the data to the --last-batch rule, once the training
 * source and model exist: a step to train, no one-value BatchNorm. */
void tb_train_check_epoch_plan(tb_train_run *r);
/* With --data: one line per host (its first rank) when --loader-threads
 * outnumber the CPUs a rank may run on (mpirun binds each of one or two
 * ranks to a single core by default): the decoders then share them and the
 * feed gets that many CPUs, whatever the flag says. */
void tb_train_warn_loader_cpus(const tb_train_run *r);
/* The run header's line saying what an epoch really trains. */
void tb_train_print_epoch_plan(const tb_train_run *r);
/* After training with --data (collective; nothing without --data): the
 * files the training loaders found bad, over every rank (each file once),
 * the samples they replaced and the first three with their reasons, in
 * `# bad files:` lines and the results attributes data_bad_files,
 * data_samples_replaced, data_bad_files_first (rank 0). */
void tb_train_report_bad_files(tb_train_run *r, int64_t step);

/* What a batch source is for: the training run (augmented, --last-batch),
 * validation (centre crop; every image once: keep), or a scaling row
 * (augmented, full steps only: pad, whatever --last-batch says, so that
 * every timed step of every row has the same per-rank work, and a row of
 * k ranks has a step even when the data holds less than k x batch). */
typedef enum { TB_USE_TRAIN, TB_USE_VAL, TB_USE_SCALING } tb_source_use;

/* How a source for `use` feeds a model on be (src/feed/feed_plan.h): the
 * backend's default, --decode (gpu: CPU fast for validation), --resident
 * on/off overriding the default for synthetic data. */
tb_feed_opts tb_train_feed(const tb_train_flags *f, const tb_backend *be, tb_source_use use);
/* The batch source of `rank` of `world`, made once for the feed
 * tb_train_feed decides (tb_source_feed then gives it the model). */
tb_source *tb_train_source(const tb_train_flags *f, tb_train_data *d, int classes, int rank, int world,
                           tb_source_use use, tb_backend *be);

/* train_loop.c: the training steps on every rank. */
void tb_train_loop(tb_train_run *r, tb_train_outcome *o);
/* The timed stretch's device facts into s: NVML's utilisation window
 * (r->util, when sampling) and the backend's peak memory (train_loop.c;
 * the scaling rows use it too). */
void tb_train_device_summary(tb_train_run *r, tb_rank_summary *s);
/* Checkpoint of the state after `step` steps to path (--ckpt or --save),
 * written by rank 0 under the report lock (the watchdog never writes HDF5
 * at the same time), unless a parameter, BatchNorm statistic or momentum
 * buffer holds NaN/Inf: then nothing is written, the file keeps what it
 * held, and every rank stops together with one line naming the tensor.
 * Collective. */
void tb_train_save_checkpoint(tb_train_run *r, const char *path, int64_t step, int64_t epoch,
                              int64_t epoch_step);
/* The --ckpt note for a line that stops the run: where the last good
 * checkpoint is ("" without --ckpt). */
void tb_train_ckpt_note(const tb_train_run *r, char *buf, size_t len);

/* train_profile.c: --op-profile's steps (after the timed ones, --save and
 * the replica check; they train on), their tables on rank 0 and in the
 * results file. Collective; nothing when --op-profile is 0. */
void tb_train_op_profile(tb_train_run *r, const tb_train_outcome *o);

/* train_report.c: the per-rank table, --save, the replica check, the
 * scaling measurement and the results file. */
void tb_train_report(tb_train_run *r, tb_train_outcome *o);

/* The scaling rows: the first 1, 2, 4, ... N ranks each run the same per-rank
 * workload (train_scaling.c). Rows are filled on rank 0; returns how many.
 * On the NCCL path each row's ranks get a communicator split from the
 * world's (ncclCommSplit); the NVML sampler (NULL: none) gives each row's
 * GPU utilisation. */
int tb_train_measure_scaling(tb_train_run *r, double lr, tb_scaling_row *rows);
/* The shortest a scaling row may last (--scaling-min-seconds, or its
 * default: 1.25 s on CUDA, where NVML's GPU-Util needs 1 s; 0 on the CPU).
 * The same on every rank. */
double tb_train_scaling_min_s(const tb_train_run *r);


#endif
