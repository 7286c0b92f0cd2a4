/* loader_timeline.h - where the loader's time goes, stage by stage.
 *
 * Every stage of making a batch is timed where it runs:
 *
 *   worker threads (one sample at a time)
 *     read          open and read the file
 *     check         header checks and crop draws of a sample the GPU will
 *                   decode (--decode gpu: the whole CPU part of a GPU job)
 *     decode        libjpeg decode of a sample rendered on the CPU
 *     resize        Pillow-exact resample and the store into the slot
 *   GPU stage threads (--decode gpu: one batch at a time)
 *     gpu_plan      nvJPEG header parses, support checks, resize tables
 *     gpu_submit    queueing: nvJPEG's batched calls (their host part), the
 *                   copies, the resize kernels' launches
 *     gpu_wait      the host waiting for the device: a decode state's
 *                   previous batch before the state is reused, the error
 *                   paths, --nvjpeg sync=1's wait at the end of each batch
 *     gpu_fallback  files the GPU failed, rendered on the CPU instead
 *   the device (--decode gpu; CUDA events, so the device's own times)
 *     dev_upload    the CPU-rendered rows copied up
 *     dev_decode    nvJPEG's device work (hardware engine or hybrid kernels)
 *     dev_resize    the crop + resize kernels
 *   the consumer
 *     next_wait     tb_loader_next blocked, waiting for its batch
 *
 * The loader's stats sum each stage's seconds and intervals
 * (tb_loader_stats.stage_s, stage_n): per batch they say which stage holds
 * a row. With a timeline (tb_loader_opts.timeline_events > 0) every
 * interval is also kept, with its thread and step, and written as a Chrome
 * trace (Perfetto, chrome://tracing): one track per worker, per GPU stage
 * (host and device) and for the consumer. Device intervals are placed on
 * the host clock through an anchor event (data/gpu_decode_nvjpeg.c).
 * Every host stage is also an NVTX range (core/nvtx.h), which Nsight
 * Systems shows on the thread's row. */
#ifndef TB_LOADER_TIMELINE_H
#define TB_LOADER_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    TB_STAGE_READ = 0,
    TB_STAGE_CHECK,
    TB_STAGE_DECODE,
    TB_STAGE_RESIZE,
    TB_STAGE_GPU_PLAN,
    TB_STAGE_GPU_SUBMIT,
    TB_STAGE_GPU_WAIT,
    TB_STAGE_GPU_FALLBACK,
    TB_STAGE_DEV_UPLOAD,
    TB_STAGE_DEV_DECODE,
    TB_STAGE_DEV_RESIZE,
    TB_STAGE_NEXT_WAIT,
    TB_STAGE_COUNT
} tb_loader_stage;

/* "read", "gpu_submit", ... (the names above; column names use them). */
const char *tb_loader_stage_name(int stage);
/* 1 for the dev_* stages (device time), else 0 (a host thread's time). */
int tb_loader_stage_on_device(int stage);
/* The stage's NVTX colour (ARGB). */
uint32_t tb_loader_stage_color(int stage);

/* ---- the interval log -------------------------------------------------------------------- */
typedef struct tb_timeline tb_timeline;

/* Keeps the first max_events intervals (later ones are counted, not kept). */
tb_timeline *tb_timeline_create(size_t max_events);
void tb_timeline_destroy(tb_timeline *tl);
/* Names track k ("worker 3", "GPU stage 0 (device)"); before any add. */
void tb_timeline_name_track(tb_timeline *tl, int track, const char *name);
/* One interval [t0, t1] (tb_now seconds) of `stage` for batch `step` on
 * track `track`. Thread-safe, lock-free. */
void tb_timeline_add(tb_timeline *tl, int track, int stage, int64_t step, double t0, double t1);
/* Intervals kept, and dropped for want of room. */
size_t tb_timeline_kept(const tb_timeline *tl);
size_t tb_timeline_dropped(const tb_timeline *tl);
/* Whether interval i (i < kept) is written whole: a writer may still be
 * filling a slot it was handed while a reader looks (the trace is written
 * while the loader runs). */
int tb_timeline_ready(const tb_timeline *tl, size_t i);
/* Interval i (i < kept, and ready). */
typedef struct {
    double t0, t1;
    int64_t step;
    int32_t track;
    int32_t stage;
} tb_timeline_event;
tb_timeline_event tb_timeline_get(const tb_timeline *tl, size_t i);
/* Writes the kept intervals as a Chrome trace (JSON, one process named
 * `title`, one thread per named track, times in microseconds from the
 * first interval). 0, or -1 with one line in err. */
int tb_timeline_write_json(const tb_timeline *tl, const char *path, const char *title, char *err, size_t errlen);

#endif
