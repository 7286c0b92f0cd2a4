/* bucket_plan.h - gradient buckets over a flat buffer and the one order in
 * which every rank launches them: the one bucketer of every gradient
 * transport (grad_sync.c on the host, grad_sync_dev.c on the device),
 * tested on the host (tests/test_bucket_plan.c).
 *
 * Buckets hold whole tensors and are cut from the END of the flat buffer,
 * because backward finishes the last layers' gradients first. As PyTorch's
 * DDP does, the first bucket cut (the buffer's last, the first to be ready)
 * is small (1 MiB by default), so communication starts early; the others
 * close once they hold at least the cap (25 MiB by default). The bucket that
 * reaches the buffer's start takes whatever is left.
 *
 * Launch order: the last bucket of the buffer first, down to bucket 0,
 * whatever order the ranges are reported in. A bucket completed early waits,
 * unlaunched, until every bucket after it has been launched. Collectives are
 * matched by order on every transport (NCCL and MPI alike), so a rank whose
 * ranges arrive in another order (a rank with no samples reports the whole
 * buffer at once) still pairs each bucket with the same bucket everywhere. */
#ifndef TB_BUCKET_PLAN_H
#define TB_BUCKET_PLAN_H

#include <stddef.h>

typedef struct {
    size_t offset, count; /* [offset, offset + count) of the flat buffer, in elements */
} tb_bucket;

/* Cuts [0, tensor_offsets[ntensors]) into buckets of whole tensors;
 * tensor_offsets[0..ntensors] ascending, [0] = 0. cap_elems: elements a
 * bucket reaches before it closes; first_elems: the same for the first
 * bucket cut (the buffer's last; 0: cap_elems). Returns the bucket count
 * and *out (malloc'd, ascending offsets). */
int tb_bucket_plan(const size_t *tensor_offsets, int ntensors, size_t cap_elems, size_t first_elems,
                   tb_bucket **out);

/* Which buckets may be launched, in the fixed order, as ranges become final. */
typedef struct {
    const tb_bucket *b;
    int nb;
    size_t *remaining; /* [nb] elements not yet reported this step */
    int next;          /* the next bucket to launch (nb-1 down to 0; -1: all launched) */
} tb_bucket_tracker;

void tb_bucket_tracker_init(tb_bucket_tracker *t, const tb_bucket *b, int nb);
void tb_bucket_tracker_free(tb_bucket_tracker *t);
/* A new step: nothing reported, nothing launched. */
void tb_bucket_tracker_begin(tb_bucket_tracker *t);
/* [offset, offset + count) is final. Writes the buckets that may now be
 * launched into launch[] (room for nb), in launch order, and returns how
 * many. A range reported twice, or past the buffer, is an internal error. */
int tb_bucket_tracker_ready(tb_bucket_tracker *t, size_t offset, size_t count, int *launch);
/* After backward: -1 when every bucket is complete, else the index of the
 * first incomplete one (its missing element count in *missing). */
int tb_bucket_tracker_incomplete(const tb_bucket_tracker *t, size_t *missing);

#endif
