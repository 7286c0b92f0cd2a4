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
#include "model/model.h"
#include "src/feed/batch_upload.h" /* tb_source_batch, tb_batch_upload_apply */

typedef struct tb_source tb_source;

/* epoch_size virtual samples drawn from a pool of patterned images. */
tb_source *tb_source_synthetic(int classes, int image, int batch, int64_t epoch_size,
                               uint64_t seed, int rank, int world, tb_last_batch last);
/* A batch file read whole; epochs walk its rows in order (no shuffle). */
tb_source *tb_source_batchfile(const char *path, int classes, int min_side, int batch, int rank,
                               int world, tb_last_batch last);
/* The JPEG loader (its options carry rank, world, batch, last_batch, transform). */
tb_source *tb_source_loader(const tb_loader_opts *o);

/* How a loader's batches reach the model (batch_upload.h). */
typedef struct {
    int u8;          /* uint8 NHWC crops + flip flags, normalised and flipped on the device */
    int pinned;      /* loader slots in the backend's pinned memory, copied asynchronously
                        on a copy stream, the next batch's copy overlapping this step */
    int resident;    /* synthetic and batch-file sources: their pool (or rows) uploaded once
                        into device memory and each batch gathered there (no per-step upload,
                        as DeepLearningExamples' synthetic data and a benchmark's on-device batch) */
} tb_feed_opts;
/* CUDA: uint8, pinned and resident; CPU: float batches straight in (none). */
tb_feed_opts tb_feed_default(const tb_backend *be);
/* Makes a loader source feed model m as fo says (NULL: tb_feed_default of
 * m's backend): the loader is remade with uint8 output, deferred flip and
 * (pinned) the backend's host allocation, behind a tb_upload. No-op for
 * loader sources when u8 = 0; a synthetic or batch-file source with
 * resident = 1 puts its data in m's device memory. Before the first
 * start_epoch. */
void tb_source_feed(tb_source *s, tb_model *m, const tb_feed_opts *fo);
/* Device bytes a resident source holds (0: not resident). */
int64_t tb_source_resident_bytes(const tb_source *s);
/* The upload behind a fed loader source, NULL otherwise. */
tb_upload *tb_source_upload(tb_source *s);

int64_t tb_source_epoch_size(const tb_source *s);   /* samples in the data (an epoch's order) */
/* Sample slots one epoch trains across ranks: epoch_size under keep, less
 * (dropped) under drop, more (repeats) under pad. */
int64_t tb_source_epoch_trained(const tb_source *s);
tb_last_batch tb_source_last_batch(const tb_source *s);
int64_t tb_source_steps(const tb_source *s);        /* steps per epoch */
int tb_source_image_size(const tb_source *s);       /* S */
void tb_source_start_epoch(tb_source *s, int64_t epoch, int64_t first_step);
/* 1 and a batch, or 0 at the end of the epoch. The batch stays valid until
 * tb_source_release; tb_batch_upload_apply puts it into the model. */
int tb_source_next(tb_source *s, tb_source_batch *b);
void tb_source_release(tb_source *s);
/* Loader counters (zeros for the other sources). */
void tb_source_stats(const tb_source *s, tb_loader_stats *st);
void tb_source_destroy(tb_source *s);

#endif
