/* batch_source.h - where a rank's batches come from, behind one interface:
 * synthetic class-patterned tensors (no decoding), the JPEG loader over an
 * image folder or list file, or a batch file (/images, /labels; tests).
 * All three shard an epoch across ranks by data/shard.h, with one rule for
 * the epoch's remainder (tb_last_batch: drop, pad or keep). */
#ifndef TB_BATCH_SOURCE_H
#define TB_BATCH_SOURCE_H

#include <stdint.h>

#include "data/dataset.h"
#include "data/loader.h"

typedef struct {
    const float *images;     /* [n,3,S,S] float32, normalised (host memory) */
    const int32_t *labels;   /* [n] */
    int n;                   /* this rank's samples (0 possible in an epoch's last step) */
    int64_t global_n;        /* samples in this step across all ranks */
    int64_t step;            /* step within the epoch */
    double wait_s;           /* time spent producing or waiting for the batch */
} tb_source_batch;

typedef struct tb_source tb_source;

/* epoch_size virtual samples drawn from a pool of patterned images. */
tb_source *tb_source_synthetic(int classes, int image, int batch, int64_t epoch_size,
                               uint64_t seed, int rank, int world, tb_last_batch last);
/* A batch file read whole; epochs walk its rows in order (no shuffle). */
tb_source *tb_source_batchfile(const char *path, int classes, int min_side, int batch, int rank,
                               int world, tb_last_batch last);
/* The JPEG loader (its options carry rank, world, batch, last_batch, transform). */
tb_source *tb_source_loader(const tb_loader_opts *o);

int64_t tb_source_epoch_size(const tb_source *s);   /* samples in the data (an epoch's order) */
/* Sample slots one epoch trains across ranks: epoch_size under keep, less
 * (dropped) under drop, more (repeats) under pad. */
int64_t tb_source_epoch_trained(const tb_source *s);
tb_last_batch tb_source_last_batch(const tb_source *s);
int64_t tb_source_steps(const tb_source *s);        /* steps per epoch */
int tb_source_image_size(const tb_source *s);       /* S */
void tb_source_start_epoch(tb_source *s, int64_t epoch, int64_t first_step);
/* 1 and a batch, or 0 at the end of the epoch. The batch stays valid until
 * tb_source_release. */
int tb_source_next(tb_source *s, tb_source_batch *b);
void tb_source_release(tb_source *s);
/* Loader counters (zeros for the other sources). */
void tb_source_stats(const tb_source *s, tb_loader_stats *st);
void tb_source_destroy(tb_source *s);

#endif
