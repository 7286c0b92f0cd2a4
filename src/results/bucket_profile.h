/* bucket_profile.h - the gradient timeline of the scaling measurement, for
 * `trainbench project`: when backward finished each gradient range (on
 * every rank count, one rank included) and when each bucket's all-reduce
 * ran. Recorded on rank 0 only, between tb_bprof_start and
 * tb_bprof_tables_fill, through two hooks in the training step
 * (src/train/trainer_step.c): tb_bprof_wrap around the model's grad-ready callback and
 * tb_bprof_step after the all-reduce. Two tables of the results file,
 * times in ms from the start of backward, medians over the steps recorded
 * for that rank count (its first `skip` steps, the warm-up, left out):
 *
 *   /grad_ready  ranks, range (in the order backward finished them),
 *                offset, bytes (into the flat gradient buffer), ready_ms,
 *                backward_ms, bucket_bytes (the run's cap), overlap, steps,
 *                first_bucket_bytes (the first bucket's cap; 0: bucket_bytes;
 *                files written before it existed lack the column)
 *   /buckets     ranks, bucket (comm/grad_sync.h index), offset, bytes,
 *                ready_ms (its last range), start_ms, end_ms (its
 *                all-reduce on the communication thread), backward_ms,
 *                exposed_ms (what finish waited), steps; in launch order
 * Both carry the attribute `clock`: where the times come from (CUDA events
 * on the compute and communication streams, or a host clock).
 *
 * The synchronous step (CPU backend) times ranges on the host clock when
 * the callback runs (its ops have run by then) and buckets on the
 * communication thread's clock. The asynchronous step (CUDA, and the CPU
 * backend's --step-mode async) hands each finished step to tb_bprof_add
 * instead (src/train/step_timeline.h): on a GPU the times of events recorded on
 * the compute stream (ranges, bucket gradients done) and on the
 * communication stream (each bucket's collective), never host syncs. Not
 * thread-safe: the training step's thread only. */
#ifndef TB_BUCKET_PROFILE_H
#define TB_BUCKET_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "comm/grad_transport.h"
#include "model/graph.h"
#include "src/results/results_file.h"

/* Starts recording (rank 0, before the scaling rows); skip: the steps
 * numbered below it (each row counts its steps from 0) are left out. */
void tb_bprof_start(int skip);
int tb_bprof_on(void);

/* Hook 1, before backward: when recording, *fn / *ctx are replaced by a
 * recorder that notes the time and calls the original (which may be NULL). */
void tb_bprof_wrap(tb_grad_ready_fn *fn, void **ctx);
/* Hook 2, after the all-reduce: step `step` of `ranks` ranks is complete;
 * its nb buckets (0 on one rank) with times from t_bwd0 (the transport's
 * bucket_times); elem_bytes the gradient element size; t_bwd0/t_bwd1 the
 * start and end of backward, t_done the end of the all-reduce wait
 * (tb_now() clock). Does nothing unless recording. */
void tb_bprof_step(int ranks, int64_t step, int nb, const tb_bucket_time *b, size_t elem_bytes,
                   size_t bucket_bytes, size_t first_bucket_bytes, int overlap, double t_bwd0, double t_bwd1,
                   double t_done);

/* One finished step, all times in seconds from the start of backward:
 * ranges in the order backward finished them, buckets in the transport's
 * order (a NAN ready_s: the last of their ranges). Does nothing unless
 * recording. */
typedef struct {
    int ranks;
    int64_t step;                     /* the row's own count, from 0 */
    int nr;
    const size_t *r_off, *r_cnt;      /* elements */
    const double *r_ready;
    int nb;
    const tb_bucket_time *b;          /* [nb] */
    size_t elem_bytes, bucket_bytes, first_bucket_bytes;
    int overlap;
    double backward_s, exposed_s;     /* exposed: waited for after backward */
    const char *clock;                /* where the times come from (the tables' `clock` attribute) */
} tb_bprof_sample;
void tb_bprof_add(const tb_bprof_sample *x);

/* The row of `ranks` ranks has ended after `steps` untimed steps: its
 * steps numbered below `steps` are left out, not below tb_bprof_start's
 * skip. A row that captures a CUDA graph runs one more untimed step than
 * --scaling-warmup (src/train/train_scaling.c), whose capture would
 * otherwise count in the medians. By the steps' numbers, so a sample that
 * was dropped (an event CUDA could not time) moves nothing. Does nothing
 * unless recording. */
void tb_bprof_row_warmup(int ranks, int steps);

/* The two tables' layouts (empty). */
void tb_bprof_tables_init(tb_table *grad_ready, tb_table *buckets);
/* Appends the recorded rows and stops recording (frees what it held). */
void tb_bprof_tables_fill(tb_table *grad_ready, tb_table *buckets);

#endif
