/* trainer.h - one data-parallel training step on one rank, timed by phase:
 *
 *   data      producing or waiting for the batch (the source measures it)
 *   h2d       uploading it to the device
 *   forward   forward pass and loss
 *   backward  backward pass; gradient buckets start all-reducing inside it
 *   allreduce exposed all-reduce: waiting for the buckets after backward
 *   optimizer SGD update
 *
 * Gradients are summed across ranks with the loss gradient pre-scaled by
 * (local samples / global samples), so a rank with a short (or empty) last
 * batch counts exactly as much as its samples; a rank with no samples joins
 * every bucket with zeros and advances num_batches_tracked like the others.
 * BatchNorm running statistics are broadcast from rank 0 before every
 * forward, as PyTorch DDP does. */
#ifndef TB_TRAINER_H
#define TB_TRAINER_H

#include "comm/comm.h"
#include "comm/grad_sync.h"
#include "comm/monitor.h"
#include "model/model.h"
#include "src/batch_source.h"

typedef enum { TB_PH_DATA, TB_PH_H2D, TB_PH_FWD, TB_PH_BWD, TB_PH_COMM, TB_PH_OPT, TB_PH_COUNT } tb_phase;
extern const char *const tb_phase_name[TB_PH_COUNT];

typedef struct {
    double phase[TB_PH_COUNT];   /* seconds */
    double total;                /* seconds, the whole step */
    int n;                       /* samples on this rank */
    int64_t global_n;            /* samples on all ranks */
    double lr;
    tb_grad_sync_step sync;      /* bucket statistics (zeros on one rank) */
} tb_step_record;

typedef struct {
    double momentum, weight_decay, label_smoothing;
    int nesterov, no_bn_decay;
    size_t bucket_bytes;
    size_t first_bucket_bytes;   /* the first bucket launched (comm/grad_sync.h) */
    int overlap;                 /* start buckets during backward */
} tb_train_hparams;

typedef struct {
    tb_model *m;
    tb_comm *comm;
    int rank, world;
    tb_grad_sync *gs;            /* NULL on a single rank */
    tb_train_hparams hp;
    float *stage;                /* host staging for broadcasts [max(n_train, n_state)] */
    tb_monitor *mon;             /* watchdog to tell what this rank does (may be NULL) */
    int fault_nan;               /* test only (TB_TEST_FAULT=nan): this step's gradient gets a NaN */
} tb_trainer;

tb_trainer *tb_trainer_create(tb_model *m, tb_comm *comm, const tb_train_hparams *hp);
void tb_trainer_destroy(tb_trainer *t);
/* Makes every rank's parameters, momentum, statistics and counters equal to
 * rank 0's (start of training, after a resume). */
void tb_trainer_sync_state(tb_trainer *t);
/* One step (number `step`, for messages and the watchdog). Returns 0, or -1
 * with a one-line message in err when the summed gradients hold NaN or Inf
 * (every rank sees the same sum, so every rank returns -1 together). */
int tb_trainer_step(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr,
                    tb_step_record *rec, char *err, size_t errlen);
/* Name of the first tensor of the flat buffer `buf` (params or grads) that
 * holds a NaN or Inf, and how many it holds; NULL when all are finite. */
const char *tb_trainer_first_nonfinite(tb_trainer *t, const tb_real *buf, size_t *count);
/* Takes rank 0's BN running statistics (each rank updated its own in the
 * last forward, as under DDP), then hashes parameters, momentum, statistics
 * and counters on every rank and compares them: returns 1 when all replicas are bit-identical; else
 * prints one line per differing rank (rank 0) and returns 0. Collective.
 * *hash receives rank 0's hash. */
int tb_trainer_check_replicas(tb_trainer *t, uint64_t *hash);

/* The global mean loss of the last step (weighted by samples); collective. */
double tb_trainer_global_loss(tb_trainer *t, const tb_step_record *rec);

#endif
