/* shard.h - which samples of an epoch each rank takes at each step.
 *
 * The epoch's order has n samples. steps = ceil(n / (world*batch)). Step s
 * covers global positions [s*world*batch, min(n, (s+1)*world*batch)); full
 * steps give every rank `batch` contiguous positions in rank order; the last,
 * short step splits its R positions as evenly as possible (the first
 * R % world ranks get one more), so a rank may get none and still takes part
 * in the step. Every sample is used exactly once per epoch across ranks. */
#ifndef TB_SHARD_H
#define TB_SHARD_H

#include <stdint.h>

static inline int64_t tb_shard_steps(int64_t n, int world, int batch) {
    int64_t wb = (int64_t)world * batch;
    return (n + wb - 1) / wb;
}

/* Samples in step s across all ranks. */
static inline int64_t tb_shard_global_count(int64_t n, int world, int batch, int64_t s) {
    int64_t wb = (int64_t)world * batch, left = n - s * wb;
    return left < 0 ? 0 : left < wb ? left : wb;
}

/* This rank's share of step s: positions [*start, *start + *count). */
static inline void tb_shard_range(int64_t n, int world, int batch, int64_t s, int rank,
                                  int64_t *start, int *count) {
    int64_t wb = (int64_t)world * batch, g0 = s * wb;
    int64_t r = tb_shard_global_count(n, world, batch, s);
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
