/* batch_upload.h - the JPEG loader's batches onto the device: uint8 NHWC
 * crops and per-sample flip flags, uploaded from pinned loader slots on a
 * copy stream into one of two device staging buffers, then normalised,
 * flipped and turned into the model's input layout by one op (the
 * backend's input_u8) on the compute stream.
 *
 * Ordering, all by events (nothing here waits on the host unless a slot or
 * a staging buffer must be reused and is still busy):
 *
 *   loader slot k (pinned) --copy stream--> staging[k % 2] --compute-->
 *   input activation
 *
 *   - the copy of batch k waits (on the device) for consumed[k % 2], the
 *     event recorded after the input op of batch k - 2 read that buffer;
 *   - the input op of batch k waits (on the device) for uploaded[k % 2];
 *   - loader slot k goes back to the loader only once the event recorded
 *     after its copy has completed (guard[slot]), never before: the
 *     workers refill a released slot at once. A slot whose images live on
 *     the device (GPU decode) is guarded by the event after the input op
 *     that read it.
 *
 * Overlap: tb_upload_next hands out batch k and, when the loader already
 * has batch k + 1 ready, queues its copy too, so that the next batch's
 * upload runs while this step computes (lookahead; the batch is held until
 * the next call). With pinned off the slots are plain host memory and the
 * batch is copied synchronously by the input step (no lookahead): the
 * `pinned off` rows of the feed table.
 *
 * The CPU backend runs the same code: its copies are synchronous and its
 * events complete when recorded, unless a test holds them
 * (tb_cpu_event_hold), which is how the release ordering is tested. */
#ifndef TB_BATCH_UPLOAD_H
#define TB_BATCH_UPLOAD_H

#include <stdint.h>

#include "data/loader.h"
#include "model/model.h"

typedef struct tb_upload tb_upload;

/* The forms a batch's images come in; each batch has exactly one. */
typedef enum {
    TB_INPUT_F32,        /* float32 normalised, host: [n,3,S,S] */
    TB_INPUT_ROWS,       /* resident: rows of a float32 pool in device memory */
    TB_INPUT_U8,         /* uint8 crops + flip flags, host (pinned or not): [n,S,S,3] */
    TB_INPUT_U8_DEVICE,  /* uint8 crops in device memory (GPU decode) + host flip flags: [n,S,S,3] */
} tb_input_kind;

/* A batch's images: a kind and the one descriptor it names. */
typedef struct {
    tb_input_kind kind;
    union {
        const float *f32;          /* TB_INPUT_F32: [n,3,S,S] host */
        struct {
            const float *pool;     /* [pool_rows,3,S,S] float32, device */
            int64_t pool_rows;
            const int32_t *rows;   /* [n] host: sample i is pool row rows[i] */
        } rows;                    /* TB_INPUT_ROWS */
        struct {
            const uint8_t *images; /* [n,S,S,3] uint8, host or (TB_INPUT_U8_DEVICE) device */
            const uint8_t *flip;   /* [n] host: 1 mirrors sample j; NULL: none */
            tb_upload *up;         /* the upload this batch came through; NULL: a plain host batch
                                      (TB_INPUT_U8 only) */
            int buf;               /* staging buffer of `up` holding it (0 or 1) */
            int slot;              /* loader slot */
        } u8;                      /* TB_INPUT_U8, TB_INPUT_U8_DEVICE */
    };
} tb_batch_input;

typedef struct {
    tb_batch_input in;         /* the images, in one form */
    const int32_t *labels;     /* [n] host */
    int n;                     /* this rank's samples (0 possible in an epoch's last step) */
    int64_t global_n;          /* samples in this step across all ranks */
    int64_t step;              /* step within the epoch */
    double wait_s;             /* time spent producing or waiting for the batch */
} tb_source_batch;

typedef struct {
    int pinned;                /* slots in the backend's pinned memory, asynchronous copies */
    int lookahead;             /* queue the next batch's copy when it is ready (pinned only) */
} tb_upload_opts;

/* Counters for the feed table and the tests. */
typedef struct {
    int64_t batches;           /* handed out */
    int64_t lookahead;         /* of them, copied ahead during the previous step */
    int64_t slot_waits;        /* host waits for a slot's guard before reusing it */
    int64_t buffer_waits;      /* (device) waits for a staging buffer's last reader */
    int64_t released;          /* slots given back to the loader */
    int64_t released_pending;  /* of them, with their guard not complete (must stay 0) */
    int max_held;              /* most loader slots held at once */
} tb_upload_stats;

/* The host allocator a loader gets for its slots when the batches go to
 * the model's backend with pinned memory (be->host_alloc / host_free). */
void *tb_upload_pinned_alloc(void *backend, size_t bytes);
void tb_upload_pinned_free(void *backend, void *p);

/* Wraps a loader whose options had format TB_OUT_U8_NHWC and gpu_flip (and,
 * with o->pinned, tb_upload_pinned_alloc on m->be). The upload owns the
 * loader from now on. */
tb_upload *tb_upload_create(tb_model *m, tb_loader *ld, const tb_upload_opts *o);
/* Waits for every copy still in flight, gives every slot back, destroys
 * the loader. */
void tb_upload_destroy(tb_upload *u);
tb_loader *tb_upload_loader(tb_upload *u);
/* Abandons the batches held (after their copies complete), then starts
 * the loader's epoch. */
void tb_upload_start_epoch(tb_upload *u, int64_t epoch, int64_t first_step);
/* The next batch (its copy queued), 0 at the end of the epoch. */
int tb_upload_next(tb_upload *u, tb_source_batch *b);
/* The consumer is done with the batch of the last tb_upload_next: its slot
 * goes back to the loader as soon as its guard has completed (checked on
 * the next calls, waited for only when the slot is needed). */
void tb_upload_release(tb_upload *u);
void tb_upload_stats_get(const tb_upload *u, tb_upload_stats *st);

/* The step's input: labels to the device (checked on the host), the
 * images into the model's input activation, by the input's kind: float32:
 * tb_model_set_batch; resident rows: tb_model_set_batch_rows; a plain uint8
 * host batch: tb_model_set_batch_u8; a batch of an upload: the compute stream waits for its copy, input_u8 normalises and
 * flips it, and the event that frees its staging buffer (and, for device
 * slots, its loader slot) is recorded. tb_trainer_step calls this. */
void tb_batch_upload_apply(tb_model *m, const tb_source_batch *b);

#endif
