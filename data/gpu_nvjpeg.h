/* gpu_nvjpeg.h - the nvJPEG decoder's state, shared by its two files (internal
 * to the nvJPEG path): data/gpu_decode_nvjpeg.c makes and ends it, times
 * batches and records fences; data/gpu_nvjpeg_batch.c plans, decodes and
 * resizes a batch. */
#ifndef TB_GPU_NVJPEG_H
#define TB_GPU_NVJPEG_H

#include <stdatomic.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include "core/cuda_check.h"
#include "core/log.h"
#include "data/gpu_decode.h"
#include "data/gpu_nvjpeg_mem.h"
#include "data/gpu_resize.h"

const char *tb_nvjpeg_status_name(nvjpegStatus_t s);

/* nvJPEG's check macro, for calls that must not fail (set-up, state,
 * parameters): file:line, rank and host, the call and nvJPEG's status name,
 * then the job ends (tb_fatal_at). A file nvJPEG cannot decode is a return
 * value, never this. */
#define TB_NVJPEG_CHECK(call)                                                                      \
    do {                                                                                           \
        nvjpegStatus_t tb_nvj_st_ = (call);                                                        \
        if (tb_nvj_st_ != NVJPEG_STATUS_SUCCESS)                                                   \
            tb_fatal_at(__FILE__, __LINE__, "nvJPEG: %s failed: %s (%d)", #call,                   \
                        tb_nvjpeg_status_name(tb_nvj_st_), (int)tb_nvj_st_);                       \
    } while (0)

#define NVJ_MAX_CTX 4
#define NVJ_TIMINGS 8

/* One decode state and what a call through it writes from the host: the
 * state (nvJPEG's pinned buffers inside), the resize descriptors and tables
 * (pinned), and the event after its last use, which the host waits for
 * before using it again. */
typedef struct {
    nvjpegJpegState_t st;
    tb_rs_desc *h_desc;            /* [max_batch] pinned */
    int32_t *h_tab;                /* pinned */
    size_t htab_cap;               /* int32 values */
    cudaEvent_t done;
    int used;                      /* done recorded at least once */
} nvj_ctx;

/* A batch's device times: events at its start, after the rows' upload,
 * after nvJPEG, after the resize (what it has of them); and the host time
 * each interval's first work was queued (0: not noted), before which the
 * device cannot have started it: the host's planning and nvJPEG's host
 * phase must not read as device time when the stream sat idle. */
typedef struct {
    cudaEvent_t ev[4];
    int has[4];
    double queued[4];
    int live;                      /* recorded, not reported yet */
    int64_t tag;
} nvj_timing;

typedef struct {
    tb_gpu_decoder_opts o;
    int device;
    nvjpegHandle_t h;
    nvjpegJpegStream_t js;         /* header parse for the support checks */
    nvjpegDecodeParams_t *params;  /* [max_batch] per image: RGBI, region */
    int hw, roi;                   /* hardware engine; region decode in use */
    atomic_int roi_off;            /* region decode turned off during the run (read by other threads) */
    int64_t roi_declined;          /* images the engine took whole, not as their region */
    nvjpegStatus_t roi_failed;     /* this batch: the status of a region call that failed (SUCCESS: none) */
    cudaStream_t cs;               /* the decoder's stream */
    int priority;                  /* cs's priority */
    int least_priority, greatest_priority; /* the device's range */
    nvj_ctx ctx[NVJ_MAX_CTX];
    int nctx, next_ctx;
    nvj_timing tim[NVJ_TIMINGS];
    int next_tim;
    /* the end of the last batch's work on cs (its resize reads d_dec): the
     * hardware engine writes its output when the call is made, not in the
     * stream's order, so the host waits for this before a hardware call
     * (hw_barrier, gpu_nvjpeg_batch.c) */
    cudaEvent_t readers_done;
    int readers_live;              /* recorded, not waited for yet */
    int fault_run;                 /* images in a row, across calls, failed alone with a decoder fault */
    cudaEvent_t drained;           /* wait_stream's: the host blocks on it rather than spin in cudaStreamSynchronize */
    cudaEvent_t anchor;            /* device time 0 of the timings ... */
    double anchor_host;            /* ... at this tb_now() */
    tb_nvj_mem *mem;               /* the stream-ordered pool and pinned cache ... */
    nvjpegDevAllocatorV2_t dev_alloc; /* ... as nvJPEG's allocators (kept here: the handle may */
    nvjpegPinnedAllocatorV2_t pin_alloc; /* hold on to the tables it was given) */
    int64_t host_bytes;            /* pinned host rows handed out by nvj_host_alloc */
    int64_t slot_bytes;            /* device memory handed out by nvj_alloc ... */
    struct {
        void *p;
        size_t bytes;
    } *slot_mem;                   /* ... allocation by allocation */
    int nslot_mem, slot_mem_cap;
    uint8_t *d_dec, *d_tmp;        /* decoded regions; horizontal-pass rows */
    size_t dec_cap, tmp_cap;
    int32_t *d_tab;                /* resize tables */
    size_t dtab_cap;               /* int32 values */
    tb_rs_desc *d_desc;            /* [max_batch] */
    tb_rs_desc *plan;              /* [max_batch] planned, in job order */
    tb_rs_planner *pl;
    /* per batch, [max_batch]: entry k of the batch's nvJPEG calls */
    const unsigned char **data;
    size_t *lens;
    nvjpegImage_t *imgs;
    nvjpegDecodeParams_t *bparams;
    int *which;                    /* job index of entry k */
    int64_t *order_key;            /* sort key of entry k (chroma subsampling, area) */
    char desc[640];
} nvj;

/* gpu_nvjpeg_batch.c: ops->decode. */
void tb_nvj_decode(void *impl, tb_gpu_job *jobs, int n, uint8_t *dev_images, const uint8_t *host_images,
                   const int *host_rows, int nh, int64_t tag, const tb_gpu_sink *sink);

/* gpu_decode_nvjpeg.c: the host waits for event e if it has not completed
 * (a gpu_wait interval, and NVTX range, only then). */
void tb_nvj_wait_busy(cudaEvent_t e, int64_t tag, const tb_gpu_sink *sink);
/* gpu_decode_nvjpeg.c: the next decode state, its last use finished (the
 * host waits for it if need be: reported as gpu_wait). */
nvj_ctx *tb_nvj_take_ctx(nvj *v, int64_t tag, const tb_gpu_sink *sink);
/* A timing for a batch (reported ones reused; the oldest waited for when all
 * are live); records its start event on the stream. */
nvj_timing *tb_nvj_timing_begin(nvj *v, int64_t tag, const tb_gpu_sink *sink);
/* Records event k (1 uploaded, 2 decoded, 3 resized) of t on the stream. */
void tb_nvj_timing_mark(nvj *v, nvj_timing *t, int k);
/* Notes now as when interval k's first work is queued (the first call counts). */
void tb_nvj_timing_queued(nvj_timing *t, int k);
/* Reports the timings whose last event has completed (wait: waits for all). */
int tb_nvj_report(nvj *v, const tb_gpu_sink *sink, int wait);
/* A host interval of stage `stage` to the sink. */
void tb_nvj_host(const tb_gpu_sink *sink, int stage, int64_t tag, double t0, double t1);

#endif
