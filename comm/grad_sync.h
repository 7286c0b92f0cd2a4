/* grad_sync.h - gradient all-reduce in buckets, overlapped with backward.
 *
 * The flat gradient buffer is cut into buckets of whole tensors (about
 * bucket_bytes each), starting from its end, because backward produces the
 * last layers' gradients first. The first bucket cut (the first launched)
 * closes at first_bucket_bytes instead, as PyTorch DDP's 1 MiB first
 * bucket: the all-reduce starts as soon as the last layers are done, and
 * the later cut points move, so the bucket left for after backward is
 * smaller. 0 (or >= bucket_bytes): the first bucket is cut like the rest. The graph reports each finished gradient
 * range (tb_grad_sync_ready, the model's grad-ready hook); a bucket whose
 * every element has been reported is handed to a communication thread that
 * sums it across ranks while backward goes on. tb_grad_sync_finish waits for
 * the rest: the time it waits is the exposed (non-overlapped) all-reduce.
 * With overlap off, all buckets start at finish (for measuring the gain).
 *
 * Every rank launches the buckets in one fixed order, the last bucket of the
 * buffer first, whatever order tb_grad_sync_ready reports ranges in: a
 * bucket completed early waits for the ones after it. So a rank whose
 * backward finishes tensors in another order, or a rank with no samples
 * this step (it zeroes its gradients and reports the whole buffer at once),
 * still pairs each all-reduce with the same bucket on every other rank.
 *
 * The communication thread does not busy-wait: each bucket is a
 * non-blocking all-reduce tested with short sleeps in between
 * (tb_comm_allreduce_sum_idle), so on a machine with as many cores as
 * compute threads it leaves them the CPU instead of spinning in MPI's
 * progress engine.
 *
 * Buckets are summed, not averaged: the caller scales the loss gradient by
 * (local samples / global samples) so the sum is the global mean. */
#ifndef TB_GRAD_SYNC_H
#define TB_GRAD_SYNC_H

#include <stddef.h>

#include "comm/comm.h"

typedef struct tb_grad_sync tb_grad_sync;

typedef struct {
    int buckets;
    double exposed_s;      /* time finish() waited */
    double busy_s;         /* time the thread spent inside all-reduce calls */
    double first_start_s;  /* from begin() to the first bucket's start */
    double bytes;          /* bytes reduced */
} tb_grad_sync_step;

/* grads: the flat buffer (count elements of type t); tensor_offsets[0..n]
 * are the tensor boundaries in it (ascending, last = count). Every rank
 * must pass the same boundaries and sizes (the buckets pair up by order). */
tb_grad_sync *tb_grad_sync_create(tb_comm *comm, void *grads, size_t count, tb_comm_type t,
                                  const size_t *tensor_offsets, int ntensors,
                                  size_t bucket_bytes, size_t first_bucket_bytes, int overlap);
/* The default first_bucket_bytes: PyTorch DDP's (dist._DEFAULT_FIRST_BUCKET_BYTES). */
#define TB_GRAD_SYNC_FIRST_BUCKET_BYTES ((size_t)1 << 20)
void tb_grad_sync_destroy(tb_grad_sync *gs);
/* The longest sleep between two tests of a bucket's all-reduce, in seconds:
 * TB_GRAD_SYNC_POLL_US (microseconds) when set, else 200 us; 0 is MPI's
 * blocking, busy-polling all-reduce. allreduce-bench times the same call. */
double tb_grad_sync_poll_s(void);
int tb_grad_sync_bucket_count(const tb_grad_sync *gs);
/* Bucket i covers [*offset, *offset + *count) of the flat buffer. */
void tb_grad_sync_bucket(const tb_grad_sync *gs, int i, size_t *offset, size_t *count);

void tb_grad_sync_begin(tb_grad_sync *gs);
/* The model's tb_grad_ready_fn: [offset, offset+count) is final. */
void tb_grad_sync_ready(void *gs, size_t offset, size_t count);
void tb_grad_sync_finish(tb_grad_sync *gs, tb_grad_sync_step *st);
/* After finish: when bucket i's all-reduce ran in this step (tb_now()
 * clock): start[i], end[i]. */
void tb_grad_sync_bucket_times(const tb_grad_sync *gs, const double **start, const double **end);

#endif
