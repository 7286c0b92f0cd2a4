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
#include "src/feed/feed_plan.h"    /* tb_feed_opts */

typedef struct tb_source tb_source;

/* Each constructor takes the feed decided for the source (feed_plan.h;
 * NULL: float32 batches read on the host, nothing resident). */

/* epoch_size virtual samples drawn from a pool of patterned images. */
tb_source *tb_source_synthetic(int classes, int image, int batch, int64_t epoch_size, uint64_t seed, int rank,
                               int world, tb_last_batch last, const tb_feed_opts *fo);
/* A batch file read whole; epochs walk its rows in order (no shuffle). */
tb_source *tb_source_batchfile(const char *path, int classes, int min_side, int batch, int rank, int world,
                               tb_last_batch last, const tb_feed_opts *fo);
/* The JPEG loader (its options carry rank, world, batch, last_batch,
 * transform; format float32 NCHW), made once with the options the feed fo
 * (not NULL) implies (tb_feed_loader_opts: its decode, uint8, pinned slots
 * in be's host memory; be may be NULL for a float32 feed). */
tb_source *tb_source_loader(const tb_loader_opts *o, const tb_feed_opts *fo, tb_backend *be);

/* The feed's device side on model m, before the first start_epoch: a
 * uint8 loader source gets its tb_upload (staging buffers sized for m), a
 * resident synthetic or batch-file source puts its data in m's device
 * memory. No-op for the other feeds. */
void tb_source_feed(tb_source *s, tb_model *m);
/* Host bytes the source will write in its first batches that are not yet
 * in memory: a loader's malloc'd ring (tb_loader_host_bytes_unwritten), or
 * the synthetic and batch-file sources' one batch on the host. */
size_t tb_source_host_bytes_unwritten(const tb_source *s);
/* Device bytes a resident source holds (0: not resident). */
int64_t tb_source_resident_bytes(const tb_source *s);
/* The upload behind a fed loader source, NULL otherwise. */
tb_upload *tb_source_upload(tb_source *s);

int64_t tb_source_epoch_size(const tb_source *s);   /* samples in the data (an epoch's order) */
/* The data's fingerprint, equal for the same data: a loader's data set by
 * tb_dataset_hash (relative paths and labels, in order), a batch file by
 * its labels and pixels, a synthetic pool by what makes it (classes, size,
 * pool rows, seed); made at each call. A checkpoint records it, so
 * --resume can tell when the data differ but have the same size. */
uint64_t tb_source_fingerprint(const tb_source *s);
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
/* The data set indices of the files the loader found bad so far
 * (tb_loader_bad_samples; 0 for the other sources). */
int64_t tb_source_bad_samples(const tb_source *s, int64_t *out, int64_t cap);
void tb_source_destroy(tb_source *s);

#endif
