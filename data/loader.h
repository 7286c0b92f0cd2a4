/* loader.h - the data path's one interface to the rest of trainbench:
 * persistent worker threads decode, crop, resize and normalise samples into a
 * ring of batch slots in (pinned) host memory; the training loop takes the
 * next full slot, hands its pointers to the model, and gives it back.
 *
 *   tb_loader *ld = tb_loader_create(&opts, &err);
 *   tb_loader_start_epoch(ld, epoch);           seeded shuffle, this rank's shard
 *   while ((b = tb_loader_next(ld)) != NULL) {  blocks until the slot is full
 *       ... use b->images [b->n,3,S,S], b->labels [b->n] ...
 *       tb_loader_release(ld, b);
 *   }
 *
 * The batch for a given (seed, epoch, step, rank, world) is identical
 * whatever the thread count: every sample's random draws come from its own
 * stream keyed by (seed, epoch, sample index).
 *
 * Sharding and the remainder (the rule is data/shard.h, shared with the
 * synthetic and batch-file sources): each epoch the global order is a seeded
 * permutation of all N samples (the same on every rank). Step s takes the
 * global slice [s*world*batch, (s+1)*world*batch) of the order and rank r
 * gets a contiguous share of it, `batch` samples in a full step. What the
 * last step does when world*batch does not divide N is `last_batch`
 * (shard.h): drop it, pad it by wrapping to the start of the order, or keep
 * every sample exactly once with an uneven last step in which a rank may
 * get n = 0; tb_loader_next still returns that batch (n = 0) so that every
 * rank takes part in every step; the training loop weights gradients by
 * sample count. Validation uses keep: every image counted once.
 *
 * Bad files (empty, truncated, corrupt, not a JPEG) never end a run: the
 * sample is replaced by the next sample of the epoch order that decodes
 * (deterministic, so still independent of the thread count), counted in
 * stats.skipped and, for the first three, named in stats.first_bad; with
 * `keep_bad_place` it stays in its place instead, labelled -1. With
 * `strict` (--strict-data) a bad file ends the job with one line naming it.
 * A file is bad when it cannot be read, has no JPEG header or no
 * end-of-image marker, or libjpeg reports an error or a warning while
 * decoding the part that the sample needs. */
#ifndef TB_LOADER_H
#define TB_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "data/dataset.h"
#include "data/loader_timeline.h"
#include "data/shard.h"

typedef enum { TB_OUT_F32_NCHW, TB_OUT_F32_NHWC, TB_OUT_U8_NHWC } tb_out_format;

/* How much of each JPEG is decoded (data/transform.h): FAST (the default)
 * DCT-scales by 1/8, 1/4 or 1/2 and decodes only the crop; FAST_ALL the same
 * with every libjpeg-turbo factor k/8 (slower: 3..7/8 have no SIMD IDCT);
 * PARTIAL only the crop, at full scale; FULL the whole image (TurboJPEG),
 * the reference for comparisons. GPU: nvJPEG on the CUDA device, crop and
 * resize there too, the CPU path (PARTIAL) for what it does not take
 * (data/gpu_decode.h); needs TB_OUT_U8_NHWC with gpu_flip, and the batches
 * are then in device memory (tb_batch.on_device). */
typedef enum {
    TB_DECODE_FAST = 0,
    TB_DECODE_PARTIAL = 1,
    TB_DECODE_FULL = 2,
    TB_DECODE_FAST_ALL = 3,
    TB_DECODE_GPU = 4,
} tb_decode_mode;

typedef struct {
    const tb_dataset *ds;
    int batch;                 /* samples per step on this rank */
    int image_size;            /* output side S (the model's input) */
    int train;                 /* 1: RandomResizedCrop + flip; 0: resize + centre crop */
    int threads;               /* decode worker threads (0: one per online CPU) */
    int inline_decode;         /* 1: no worker threads: tb_loader_next decodes each batch on
                                  the caller's thread (PyTorch's num_workers=0); threads is
                                  then unused, prefetch is the number of slots the caller may
                                  hold at once */
    int prefetch;              /* batch slots in the ring (>= 2) */
    int rank, world;           /* shard of the global sample order */
    tb_last_batch last_batch;  /* the epoch's remainder (shard.h); 0 = keep */
    uint64_t seed;
    int strict;                /* 1: a bad file is fatal (--strict-data) */
    int keep_bad_place;        /* 1: a bad file's sample is not replaced: it keeps its place in
                                  the batch with label -1 and a black image, so the consumer can
                                  leave it out (validation counts every image once; a bad one is
                                  not scored as another image with that image's label) */
    tb_out_format format;
    tb_decode_mode decode;     /* 0 (FAST) unless comparing decode paths */
    int gpu_flip;              /* TB_OUT_U8_NHWC only: leave the flip to the consumer: the
                                  images are rendered unflipped (the same crop boxes and draws)
                                  and tb_batch.flip[j] says which to mirror (input_u8 op) */
    /* Host memory for the batch slots (images, labels, flip flags); NULL:
     * malloc/free. src/ passes the backend's pinned allocation
     * (cudaHostAlloc) when the CUDA backend runs, so that a slot can be
     * uploaded asynchronously; ctx is handed back to both. */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *p);
    void *host_ctx;
    /* TB_DECODE_GPU: the CUDA device (-1: the creating thread's current
     * one); tests: the host emulation of the GPU path, about one job in k
     * failing in it, and a least time per emulated batch
     * (data/gpu_decode.h). */
    int gpu_device;
    int gpu_emulate, gpu_emulate_fail_every, gpu_emulate_delay_ms;
    int gpu_stages;            /* TB_DECODE_GPU: batches in the GPU stage at once, each on its own
                                  thread with its own decoder (nvJPEG state, CUDA stream); 0: 2 with
                                  worker threads; always 1 with inline_decode (the caller's thread) */
    const char *gpu_options;   /* TB_DECODE_GPU: nvJPEG's choices, "backend=hybrid,chunk=64,..."
                                  (tb_gpu_decoder_parse, data/gpu_decode.h; `--nvjpeg`); NULL: defaults */
    int gpu_emulate_async;     /* emulation: a batch's rows land when its fence completes (gpu_decode.h) */
    size_t timeline_events;    /* keep up to this many stage intervals for tb_loader_timeline_write
                                  (data/loader_timeline.h); 0: only the per-stage sums */
} tb_loader_opts;

typedef struct {
    void *images;              /* [n,3,S,S] float32, [n,S,S,3] float32 or uint8, by format */
    uint8_t *flip;             /* [n] 1: mirror sample j left-right (gpu_flip), else NULL */
    int32_t *labels;           /* [n] */
    int n;                     /* samples in this batch (the last may be short) */
    int64_t step;              /* step within the epoch */
    double wait_s;             /* how long tb_loader_next blocked for this batch (with
                                  inline_decode: the time spent decoding it) */
    int slot;                  /* which of the prefetch slots holds it (0..prefetch-1) */
    int on_device;             /* images is device memory (--decode gpu); flip and labels
                                  are host memory either way; the rows are complete only after
                                  tb_loader_batch_order or tb_loader_batch_sync (below) */
} tb_batch;

/* Counters since the loader was created. */
typedef struct {
    int64_t images, bytes_read;          /* decoded samples, compressed bytes */
    int64_t skipped;                     /* samples replaced because their file is bad */
    int64_t gpu_decoded;                 /* --decode gpu: samples decoded and resized on the GPU */
    int64_t gpu_to_cpu;                  /* --decode gpu: samples the CPU rendered instead (a
                                            format the GPU path does not take, or nvJPEG failed) */
    int64_t gpu_cpu_share;               /* --decode gpu --nvjpeg cpu=PCT: samples the GPU path takes
                                            that the loader threads decoded by that share */
    double decode_s, resize_s;           /* summed over worker threads; decode_s
                                            includes reading the file (and, with
                                            --decode gpu, the GPU stage's decode calls) */
    int64_t gpu_batches;                 /* --decode gpu: batches that went through the GPU stage */
    int gpu_stage_max;                   /* --decode gpu: most batches in the GPU stage at once */
    double gpu_stage_s;                  /* --decode gpu: their GPU stages' wall time, summed: for
                                            each batch, from taking it to its slot being ready:
                                            planning and queueing nvJPEG, the resize kernels and
                                            the copies of the rows rendered on the CPU, per-file
                                            CPU fallbacks, and waits for the device (a decode
                                            state's last batch; sync=on: the batch itself); the
                                            device's own time is in stage_s[TB_STAGE_DEV_*]; in
                                            tb_loader_get_stats, stages still running count
                                            their time so far (a busy-time integral) */
    double stage_s[TB_STAGE_COUNT];      /* seconds per stage (data/loader_timeline.h), summed over
                                            the threads that ran it; device stages: the device's time
                                            (reported once a batch's device work has finished) */
    int64_t stage_n[TB_STAGE_COUNT];     /* intervals per stage */
    double cpu_s;                        /* CPU time of the loader's threads while they decoded
                                            (CLOCK_THREAD_CPUTIME_ID around each sample and batch) */
    int64_t gpu_orders, gpu_syncs;       /* --decode gpu: batches the consumer ordered its stream on, or
                                            waited for on the host (tb_loader_batch_order / _sync) */
    int64_t gpu_release_syncs;           /* --decode gpu: batches released without either: waited for then */
    char first_bad[3][512];              /* the first few bad files, "path: reason" */
    double at_s;                         /* tb_loader_get_stats: when the snapshot was taken (tb_now) */
} tb_loader_stats;

typedef struct tb_loader tb_loader;

/* NULL and a one-line message in err on failure (bad options, no samples). */
tb_loader *tb_loader_create(const tb_loader_opts *opts, char *err, size_t errlen);
/* Steps this rank runs in one epoch (the same on every rank). */
int64_t tb_loader_steps_per_epoch(const tb_loader *ld);
/* Host bytes of the ring its threads will write once the first epoch starts
 * and that are not yet in memory: every slot when they were malloc'd (the
 * default host_alloc; overcommit leaves their pages to the first write), 0
 * for pinned slots (committed when allocated) and for --decode gpu's
 * device slots. For the callers' memory checks (src/train/memory_check.c). */
size_t tb_loader_host_bytes_unwritten(const tb_loader *ld);
/* What a ring of `slots` host batches takes (images, labels, flips), for a
 * loader not made yet: --val's, made at each evaluation (memory_check.c). */
size_t tb_loader_ring_bytes(tb_out_format format, int image_size, int batch, int slots, int gpu_flip);
/* Begins an epoch at step `first_step` (0, or a resumed position). Work
 * left from an unfinished epoch is dropped; every batch must have been
 * released. */
void tb_loader_start_epoch(tb_loader *ld, int64_t epoch, int64_t first_step);
/* Next batch of this epoch, or NULL when the epoch is over. */
const tb_batch *tb_loader_next(tb_loader *ld);
/* The same without blocking: 1 and *b when the next batch is ready, 0 when
 * it is not yet (always 0 with inline_decode), -1 when the epoch is over.
 * Several batches may be held at once (at most prefetch); they are handed
 * out in step order and may be released in any order. */
int tb_loader_try_next(tb_loader *ld, const tb_batch **b);
/* --decode gpu: the rows of an on-device batch are complete once the GPU
 * stage's device work for it is, which tb_loader_next does not wait for.
 * Before reading b->images the consumer either orders a CUDA stream after
 * that work (tb_loader_batch_order: `stream`, a cudaStream_t, waits on the
 * device; the host does not) and reads on that stream, or waits on the
 * host (tb_loader_batch_sync). A batch released with neither is waited for
 * in tb_loader_release. An ordered batch is not: its slot (device rows,
 * host rows, files) is reused as soon as it is released, so the consumer
 * releases it only once its stream's reads of it have completed (an event
 * recorded after them, waited on: src/feed/batch_upload.c's guard). No-ops
 * for host batches. */
void tb_loader_batch_order(tb_loader *ld, const tb_batch *b, void *stream);
void tb_loader_batch_sync(tb_loader *ld, const tb_batch *b);
/* Slots in the ring (prefetch). */
int tb_loader_slots(const tb_loader *ld);
void tb_loader_release(tb_loader *ld, const tb_batch *b);
void tb_loader_get_stats(const tb_loader *ld, tb_loader_stats *s);
/* --decode gpu, between two readings of the stats (tb_loader_get_stats)
 * with `stages` GPU stages: the GPU stages' busy ms inside the window per
 * batch that finished its stage there (NaN when none did), and the share
 * of the window between the two readings each stage was busy (%, at most
 * 100: the stats count a running stage's time so far); both NaN with no
 * GPU stage (CPU decode). */
void tb_loader_stage_split(const tb_loader_stats *s0, const tb_loader_stats *s1, int stages, double *ms_per_batch,
                           double *busy_pct);
/* Milliseconds per batch of each stage between two readings of the stats,
 * over `batches` batches (NaN when batches is 0). */
void tb_loader_stage_ms(const tb_loader_stats *s0, const tb_loader_stats *s1, int64_t batches,
                        double ms[TB_STAGE_COUNT]);
/* --decode gpu: device and pinned host bytes the GPU decoders hold now
 * (their buffers, nvJPEG's, the slots' device rows); 0 with CPU decode. */
void tb_loader_memory(const tb_loader *ld, int64_t *device_bytes, int64_t *pinned_bytes);
/* Writes the intervals kept (timeline_events) as a Chrome trace titled
 * `title`; 0, or -1 with one line in err. The timeline itself, NULL
 * without one. */
int tb_loader_timeline_write(const tb_loader *ld, const char *path, const char *title, char *err, size_t errlen);
const tb_timeline *tb_loader_timeline(const tb_loader *ld);
/* The samples (data set indices) whose file this loader has found bad so
 * far, each once however often it was met, in index order: the first
 * `cap` into out (NULL: none); returns how many there are. */
int64_t tb_loader_bad_samples(const tb_loader *ld, int64_t *out, int64_t cap);
/* What decodes: "libjpeg-turbo 2.1.5 (CPU)" or the GPU decoder's description,
 * with the GPU stages that turned region decode off since (made when called,
 * into the loader: one thread at a time). */
const char *tb_loader_decoder(tb_loader *ld);
/* --decode gpu: GPU stages (batches decoded on the device at once); 0 with CPU decode. */
int tb_loader_gpu_stages(const tb_loader *ld);
void tb_loader_destroy(tb_loader *ld);

#endif
