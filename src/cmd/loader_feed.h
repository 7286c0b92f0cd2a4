/* loader_feed.h - `trainbench loader-bench --feed`: the data-loading table
 * of SEEDS.md section 2 for trainbench's own loader. A model (ResNet-50 by
 * default) trains on a JPEG folder through the real training step
 * (tb_trainer_step, batches through src/batch_upload) while the loader
 * configuration changes from row to row: worker threads (0 = the main
 * thread decodes), prefetch depth (slots), pinned slots on or off; a
 * `resident` row runs the same step on data already in device memory (the
 * on-device rate a loader row is measured against). Each row
 * reports what the seeds' table reports:
 *
 *   img/s          images trained per second over the timed steps
 *   ms/batch       wall time per step
 *   wait %         share of the wall time the step spent waiting for its
 *                  batch (tb_loader_next blocking, or decoding on the main
 *                  thread), the loader-bound share, measured on any backend
 *   GPU idle %     100 - NVML GPU-Util sampled during the timed steps
 *                  (src/device/nvml.h; a row lasts min_row_s at least, as GPU-Util
 *                  needs 1 s), and SM activity where the GPU reports it
 *
 * and, beside them, the step's own time (step ms: the device's time per
 * step), the row's CPU budget (cores: process CPU seconds per wall second;
 * loader cores: its threads' alone; img/s per core), the loader's stages
 * in ms per batch (data/loader_timeline.h) and, with --decode gpu, the
 * loader's GPU stage (data/loader_gpu.c):
 *
 *   GPU stage ms   wall time of the GPU stage per batch it ran: planning
 *                  and queueing nvJPEG, the resize and the CPU rows' copies,
 *                  per-file fallbacks, waits for the device (the device's
 *                  own time: the dev_* stages; the consumer's stream waits
 *                  for the batch's fence, the stage thread does not)
 *   GPU stage %    share of the timed wall time the GPU stage was busy
 *                  (per stage, with several: --decode-streams); near 100
 *                  the GPU stage is what limits the row (ms per batch then
 *                  follows GPU stage ms / stages), well below it the
 *                  workers or the step do
 *
 * On the CPU backend the same command runs (the loader, the uint8 upload
 * path and the step are the same code) and the device columns are written
 * as not measured (NaN in the results file, "-" on the console). */
#ifndef TB_LOADER_FEED_H
#define TB_LOADER_FEED_H

#include <stdint.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "src/device/device.h"
#include "src/train/train.h"

/* One row's loader configuration. */
typedef struct {
    int threads;      /* 0: the main thread decodes (inline) */
    int prefetch;     /* batch slots */
    int pinned;       /* 1: slots in pinned memory, asynchronous copies, lookahead */
    int decode_streams; /* --decode gpu: batches decoded on the device at once (the loader's GPU
                           stages); 0: the loader's default (2; 1 with threads 0) */
    int resident;     /* 1: no loader: synthetic batches gathered from a pool in device memory,
                         the same model, step and batch (the on-device rate the loader rows are
                         measured against); threads, prefetch, pinned unused */
    char nvjpeg[96];  /* --decode gpu: this row's nvJPEG choices ("sync=on,priority=default"; ""
                         : the call's --nvjpeg) */
} tb_feed_config;

/* What stays the same across rows. */
typedef struct {
    const tb_dataset *ds;
    tb_trainer *tr;              /* one rank; its model is trained */
    tb_nvml_sampler *smp;        /* NULL: device columns not measured */
    int batch, image_size, train;
    int warmup, steps;           /* untimed, timed steps per row */
    tb_decode_mode decode;
    uint64_t seed;
    double lr;
    double min_row_s;            /* the timed steps go on past `steps` until the row has lasted this
                                    long (NVML's GPU-Util speaks for a window of
                                    TB_NVML_UTIL_MIN_WINDOW_S or more); 0: exactly `steps` */
    const char *gpu_options;     /* --nvjpeg (data/gpu_decode.h); NULL: defaults */
    const char *timeline;        /* write each loader row's stage timeline (Chrome trace) to this path,
                                    ".rowK" before its extension; NULL: none */
    int row_index;               /* K of the row measured (timeline file names) */
} tb_feed_setup;

typedef struct {
    double img_per_s, ms_per_batch, wait_pct, h2d_ms, step_ms;
    double gpu_util_pct, gpu_idle_pct, sm_active_pct; /* NaN: not measured */
    double decode_ms_per_img;    /* loader thread time per image (read + decode) */
    double gpu_stage_ms;         /* --decode gpu: the GPU stages' busy ms in the row per batch that
                                    finished its stage in it (NaN: CPU decode) */
    double gpu_stage_busy_pct;   /* --decode gpu: share of the row's time the GPU stages were busy, per
                                    stage (NaN: CPU) */
    int gpu_stages;              /* --decode gpu: GPU stages the loader ran (0: CPU decode) */
    double lookahead_pct;        /* batches whose copy overlapped the previous step */
    int64_t images, skipped, slot_waits;
    int64_t gpu_decoded, gpu_to_cpu;   /* --decode gpu: samples decoded on the GPU / by the CPU instead */
    int64_t gpu_cpu_share;             /* --nvjpeg cpu=PCT: samples the loader threads decoded by that share */
    int nvml_samples;
    int timed_steps;                   /* `steps`, or more to fill min_row_s */
    double row_s;                      /* wall time of the timed steps */
    /* the CPU budget of the timed steps: CPU seconds / wall seconds */
    double cores;                      /* the whole process (loader, training thread, NVML, driver threads) */
    double loader_cores;               /* the loader's threads alone (0 on the resident row) */
    double img_per_s_per_core;         /* img/s per core the process used */
    double stage_ms[TB_STAGE_COUNT];   /* the loader's stages, ms per timed batch (NaN: resident row) */
    char decoder[900];                 /* what decoded (tb_loader_decoder), or the resident data */
    char timeline[4200];               /* the row's stage timeline file ("" : none) */
    char first_bad[3][512];            /* the loader's first bad files, "path: reason" (since it started) */
} tb_feed_row;

/* A row's CPU budget: process CPU seconds and the loader threads' own per
 * wall second (cores used), and images per second per core the process
 * used (NaN without a wall time or CPU time). */
typedef struct {
    double cores, loader_cores, img_per_s_per_core;
} tb_cpu_budget;
tb_cpu_budget tb_feed_cpu_budget(double cpu_s, double loader_cpu_s, double wall_s, double img_per_s);

/* Trains setup->warmup + setup->steps steps with configuration c; dies with
 * one line when a step's gradients hold NaN/Inf. */
tb_feed_row tb_feed_measure(const tb_feed_setup *setup, const tb_feed_config *c);

/* --timeline's file of row k: FILE.json -> FILE.rowK.json. */
void tb_feed_row_path(char *buf, size_t len, const char *path, int k);

#endif
