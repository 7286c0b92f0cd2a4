/* shard.h - which samples of an epoch each rank takes at each step, and what
 * becomes of the epoch's remainder (--last-batch).
 *
 * The epoch's order has n samples (positions 0..n-1). A full step takes
 * W = world*batch consecutive positions and gives rank r the `batch`
 * positions from s*W + r*batch. When W does not divide n, the remainder
 * R = n mod W follows one rule for the whole run:
 *
 *   drop  (the default, as most ImageNet recipes and DALI) floor(n/W) full
 *         steps; the order's last R positions are not trained this epoch
 *         (a shuffled order leaves out different samples each epoch).
 *   pad   ceil(n/W) full steps; the last step's positions past n wrap round
 *         to the start of the order (position p is order[p mod n]), as
 *         torch's DistributedSampler pads, but to whole steps: W - R
 *         samples are trained twice in the epoch.
 *   keep  ceil(n/W) steps and every sample exactly once: the last, short
 *         step splits its R positions as evenly as possible (the first
 *         R % world ranks get one more), so a rank may get 1 or 0 samples
 *         there; a rank with 0 still takes part in the step.
 *
 * drop and pad only ever train full batches, so a BatchNorm never sees fewer
 * values per channel than with `batch` samples; keep can give a rank one
 * sample, which the caller must refuse where some BatchNorm would then see a
 * single value per channel. Every rank computes the same plan from
 * (n, world, batch, rule): no communication is needed. */
#ifndef TB_SHARD_H
#define TB_SHARD_H

#include <stdint.h>
#include <string.h>

/* 0 is keep so that a zeroed tb_loader_opts (benchmarks, tests) keeps
 * every sample exactly once. */
typedef enum { TB_LAST_KEEP = 0, TB_LAST_DROP = 1, TB_LAST_PAD = 2 } tb_last_batch;

static inline const char *tb_last_batch_name(tb_last_batch l) {
    return l == TB_LAST_DROP ? "drop" : l == TB_LAST_PAD ? "pad" : "keep";
}

/* 0 and *l for "drop", "pad" or "keep"; -1 otherwise. */
static inline int tb_last_batch_parse(const char *s, tb_last_batch *l) {
    if (strcmp(s, "drop") == 0) *l = TB_LAST_DROP;
    else if (strcmp(s, "pad") == 0) *l = TB_LAST_PAD;
    else if (strcmp(s, "keep") == 0) *l = TB_LAST_KEEP;
    else return -1;
    return 0;
}

static inline int64_t tb_shard_steps(int64_t n, int world, int batch, tb_last_batch l) {
    int64_t wb = (int64_t)world * batch;
    return l == TB_LAST_DROP ? n / wb : (n + wb - 1) / wb;
}

/* Sample slots an epoch trains, across ranks (pad counts repeats). */
static inline int64_t tb_shard_epoch_trained(int64_t n, int world, int batch, tb_last_batch l) {
    return l == TB_LAST_KEEP ? n : tb_shard_steps(n, world, batch, l) * world * batch;
}

/* Samples in step s across all ranks. */
static inline int64_t tb_shard_global_count(int64_t n, int world, int batch, tb_last_batch l,
                                            int64_t s) {
    int64_t wb = (int64_t)world * batch, left = n - s * wb;
    if (s < 0 || s >= tb_shard_steps(n, world, batch, l)) return 0;
    return l != TB_LAST_KEEP || left >= wb ? wb : left;
}

/* This rank's share of step s: positions [*start, *start + *count) of the
 * epoch's order; under pad a position p >= n stands for position p mod n. */
static inline void tb_shard_range(int64_t n, int world, int batch, tb_last_batch l, int64_t s,
                                  int rank, int64_t *start, int *count) {
    int64_t wb = (int64_t)world * batch, g0 = s * wb;
    int64_t r = tb_shard_global_count(n, world, batch, l, s);
    if (r == wb) {
        *start = g0 + (int64_t)rank * batch;
        *count = batch;
    } else {
        int64_t base = r / world, extra = r % world;
        *start = g0 + rank * base + (rank < extra ? rank : extra);
        *count = (int)(base + (rank < extra ? 1 : 0));
    }
}

#endif
