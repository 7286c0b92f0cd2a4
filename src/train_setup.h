/* train_setup.h - what `trainbench train`'s files share: the flags, the data
 * sets, and the factory that makes a rank's batch source. */
#ifndef TB_TRAIN_SETUP_H
#define TB_TRAIN_SETUP_H

#include "comm/comm.h"
#include "comm/monitor.h"
#include "model/model.h"
#include "src/batch_source.h"
#include "src/cli.h"
#include "src/scaling.h"
#include "src/trainer.h"

typedef struct {
    char backend[TB_OPT_STR_MAX], model[TB_OPT_STR_MAX], precision[TB_OPT_STR_MAX];
    char data[TB_OPT_STR_MAX], val[TB_OPT_STR_MAX], batch_file[TB_OPT_STR_MAX];
    char results[TB_OPT_STR_MAX], save[TB_OPT_STR_MAX], init[TB_OPT_STR_MAX];
    char ckpt[TB_OPT_STR_MAX], lr_schedule[TB_OPT_STR_MAX], trace[TB_OPT_STR_MAX];
    char last_batch[TB_OPT_STR_MAX];  /* drop | pad | keep (data/shard.h) */
    int batch, image, classes, steps, epochs, warmup, threads, loader_threads, prefetch;
    int print_every, ckpt_every, synthetic, nesterov, no_fuse, zero_init_residual, no_bn_decay;
    int no_overlap, scaling_steps, scaling_warmup, seed, lr_base_batch, lr_warmup_steps;
    int synthetic_size, strict_data, resume;
    double lr, momentum, weight_decay, label_smoothing, bucket_mb, timeout;
} tb_train_flags;

typedef struct {
    tb_dataset train_ds, val_ds;
    int have_train_ds, have_val_ds;
} tb_train_data;

/* What a batch source is for: the training run (augmented, --last-batch),
 * validation (centre crop; every image once: keep), or a scaling row
 * (augmented, full steps only: pad, whatever --last-batch says, so that
 * every timed step of every row has the same per-rank work, and a row of
 * k ranks has a step even when the data holds less than k x batch). */
typedef enum { TB_USE_TRAIN, TB_USE_VAL, TB_USE_SCALING } tb_source_use;

/* The batch source of `rank` of `world`. */
tb_source *tb_train_source(const tb_train_flags *f, tb_train_data *d, int classes, int rank, int world,
                           tb_source_use use);

/* The scaling rows: the first 1, 2, 4, ... N ranks each run the same per-rank
 * workload (train_scaling.c). Rows are filled on rank 0; returns how many. */
int tb_train_measure_scaling(const tb_train_flags *f, tb_train_data *d, tb_model *m, tb_comm *world,
                             tb_monitor *mon, const tb_train_hparams *hp, double lr, int classes,
                             double dataset_size, tb_scaling_row *rows);

#endif
