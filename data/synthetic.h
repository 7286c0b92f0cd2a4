/* synthetic.h - learnable synthetic batches for --synthetic runs: no files,
 * no decoding, so compute can be measured apart from input.
 *
 * Each class has a fixed smooth random pattern; a sample is its class's
 * pattern at a random contrast plus near-Gaussian noise (synthetic.c), so a network can learn
 * the classes and the loss visibly falls. A pool of samples is made once
 * from the seed; batches walk the pool in a seeded order. */
#ifndef TB_SYNTHETIC_H
#define TB_SYNTHETIC_H

#include <stdint.h>

typedef struct {
    int classes, h, w, pool;
    uint64_t seed;
    float *images;     /* [pool,3,h,w] normalised (mean ~0, std ~1) */
    int32_t *labels;   /* [pool] */
} tb_synthetic;

void tb_synthetic_init(tb_synthetic *s, int classes, int h, int w, int pool, uint64_t seed);
/* Copies the samples at positions [start, start+n) of epoch `epoch` into
 * images [n,3,h,w] and labels [n]. Position p of an epoch is pool element
 * hash(seed, epoch, p) mod pool. */
void tb_synthetic_samples(const tb_synthetic *s, int64_t epoch, int64_t start, int n,
                          float *images, int32_t *labels);
/* The same positions as pool rows: rows[i] is the pool element that
 * tb_synthetic_samples would copy for position start + i (for batches
 * gathered from a copy of the pool elsewhere, e.g. in device memory). */
void tb_synthetic_rows(const tb_synthetic *s, int64_t epoch, int64_t start, int n, int32_t *rows,
                       int32_t *labels);
void tb_synthetic_free(tb_synthetic *s);

#endif
