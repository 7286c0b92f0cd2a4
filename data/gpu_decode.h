/* gpu_decode.h - `--decode gpu`: JPEG decode, crop and resize on the GPU
 * with nvJPEG, for the loader (data/loader_gpu.c).
 *
 * What stays on the CPU, per sample, exactly as on the CPU path: reading
 * the file, the file checks (tb_sample_plan: header, end-of-image marker,
 * size, a box inside the image; a file that fails them is replaced like any
 * bad file), and the crop box and flip from the same random draws. Then:
 *
 *   - files whose coding the GPU path takes (baseline or extended Huffman,
 *     8-bit, grayscale or YCbCr 4:4:4, 4:2:2, 4:2:0, 4:4:0; see
 *     tb_gpu_decodable) become jobs of a batch: nvJPEG decodes them (the
 *     hardware JPEG engine where the GPU has one, A100/H100/H200: backend
 *     NVJPEG_BACKEND_HARDWARE, batched, the crop's region only where the
 *     API takes a region; the GPU-assisted hybrid decoder otherwise, whole
 *     image), then data/gpu_resize.cu crops and resizes them with the CPU
 *     path's Pillow weights into the slot's device rows;
 *   - every other file (progressive, arithmetic, 12-bit, CMYK, RGB-coded,
 *     4:1:1) is rendered by the CPU path (decode `partial`: Pillow-exact
 *     pixels), and its row copied up;
 *   - a job nvJPEG rejects or fails goes back to the CPU path, file by
 *     file, which decides as without --decode gpu: decoded, or bad and
 *     replaced by the next sample of the epoch's order.
 *
 * Not identical to the CPU path: damaged entropy data that nvJPEG decodes
 * without an error is kept, where the CPU path (which stops at any libjpeg
 * warning in the part it decodes) would replace the sample. The decoded
 * pixels differ from libjpeg's by the IDCT and chroma upsampling
 * (bench/loader_psnr.py --gpu measures by how much).
 *
 * The decoder's memory is device memory of the CUDA device it was made
 * for; the loader's slots hold the batch there (tb_batch.on_device). A host
 * emulation (emulate = 1, tests only) runs the same planning, job and
 * fallback logic with libjpeg and the kernels' arithmetic on the host, and
 * hands out host memory as "device" memory; it is how CI tests the loader's
 * GPU path. Which emulated jobs fail (emulate_fail_every) depends on the
 * job alone, its file and crop, never on the decoder instance, thread or
 * order (as nvJPEG fails a file, not a place in a queue), so loaders with
 * one or several GPU stages fail the same jobs; the emulation also counts
 * the memory it hands out and ends the job when a decoder is destroyed
 * with some of it not given back, or given memory back it never gave, or
 * is called from two threads at once.
 *
 * Completion, without the host waiting: a decode call queues its work on
 * the decoder's CUDA stream and returns; the loader records a fence (a CUDA
 * event) after it, and the consumer's stream waits for that fence before it
 * reads the rows (tb_gpu_fence_order, src/feed/batch_upload.c). A decoder keeps
 * `inflight` decode states and waits on the host only before reusing one,
 * for the batch it decoded `inflight` calls ago (the hardware engine's
 * barrier, gpu_nvjpeg_batch.c hw_barrier, waits for each call before the
 * next anyway: there one state at a time is busy). The emulation with
 * emulate_async holds a batch's rows back until its fence completes, so a
 * consumer that reads without ordering on the fence reads the old rows, as
 * it would on a GPU.
 *
 * One thread at a time calls into a decoder; the loader's GPU stages each
 * have their own (data/loader_gpu.c). */
#ifndef TB_GPU_DECODE_H
#define TB_GPU_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "data/jpeg.h"
#include "data/loader_timeline.h"
#include "data/transform.h"

typedef struct tb_gpu_decoder tb_gpu_decoder;

typedef struct {
    int device;             /* CUDA device ordinal; -1: the calling thread's current one */
    int max_batch, S;
    int emulate;            /* 1: the host emulation (tests; no GPU, no nvJPEG needed) */
    int emulate_fail_every; /* emulation: a job fails as nvJPEG would when a hash of its file and crop is
                               0 mod k: about one in k (0: none) */
    int emulate_delay_ms;   /* emulation: each batch takes at least this long (tests: stages overlap) */
    /* nvJPEG's choices (`--nvjpeg KEY=VALUE,...`, tb_gpu_decoder_parse); 0 is the default of each */
    int backend;            /* TB_GPU_BACKEND_*: auto (hardware engine, else hybrid), hardware only, hybrid only */
    int no_roi;             /* 1: whole images on the hardware engine too (0: the crop's region) */
    int plain_priority;     /* 1: the decode stream at the default priority (0: the device's greatest) */
    int chunk;              /* images per batched nvJPEG call (0: the whole batch in one call) */
    int sync;               /* 1: the host waits for each batch's device work before the call returns
                               (0: a fence the consumer's stream waits on, no host wait) */
    int inflight;           /* decode states per decoder: calls it may have queued at once (0: 2; 1..4) */
    int nvjpeg_alloc;       /* 1: nvJPEG allocates with cudaMalloc / cudaHostAlloc itself (0: through the
                               decoder's stream-ordered pool and pinned cache, no implicit device syncs) */
    int no_sort;            /* 1: jobs in batch order (0: sorted by chroma subsampling and size per call) */
    int emulate_async;      /* emulation: a batch's rows land only when its fence completes (the consumer
                               ordered on it, or waited for it), as device work would */
    int cpu_share;          /* percent (0..90) of each batch's rows the loader threads decode with
                               libjpeg-turbo beside the GPU stage, though the GPU could take them (the
                               loader's rule, tb_gpu_cpu_row; DALI's hw_decoder_load the other way
                               round); 0: every row the GPU path takes goes to it */
    int no_barrier;         /* 1: no host wait before a hardware call for the previous batch's queued
                               work (wrong: the engine writes when called; its test shows the race) */
    int stall_ms;           /* a test: the decoder's stream spins this long before each resize, so
                               that it is still queued when the next batch's decode call comes */
    int wait;               /* how host threads wait for the device while the decoder lives: TB_GPU_WAIT_*
                               (cudaSetDeviceFlags; every thread's waits on the device, nvJPEG's blocking
                               hardware call and the training step's included) */
} tb_gpu_decoder_opts;

/* tb_gpu_decoder_opts.wait: CUDA's default schedule (spin while the process
 * has fewer contexts than CPUs), spin, yield, block (cudaDeviceScheduleBlockingSync) */
enum { TB_GPU_WAIT_AUTO = 0, TB_GPU_WAIT_SPIN = 1, TB_GPU_WAIT_YIELD = 2, TB_GPU_WAIT_BLOCK = 3 };

enum { TB_GPU_BACKEND_AUTO = 0, TB_GPU_BACKEND_HARDWARE = 1, TB_GPU_BACKEND_HYBRID = 2 };

/* Options with every default: nvJPEG on `device` (-1: current) for batches
 * of max_batch images of side x side. */
tb_gpu_decoder_opts tb_gpu_decoder_defaults(int device, int max_batch, int side);

/* Sets o's nvJPEG choices from "backend=auto|hardware|hybrid,roi=on|off,
 * priority=high|default,chunk=N,sync=on|off,inflight=N,alloc=pool|nvjpeg,
 * sort=on|off,cpu=PCT,barrier=on|off,stall=MS,wait=auto|spin|yield|block" (any subset, any order; ""
 * leaves them). 0, or -1 with one line in err naming the bad item. */
int tb_gpu_decoder_parse(const char *spec, tb_gpu_decoder_opts *o, char *err, size_t errlen);
/* The choices as the same KEY=VALUE list (for logs and results files). */
void tb_gpu_decoder_opts_string(const tb_gpu_decoder_opts *o, char *buf, size_t len);

/* What became of a job (tb_gpu_job.status). The loader treats both
 * failures alike (the CPU path from the same candidate); the tests tell a
 * decoder that declines a file apart from one that fails decoding it. */
#define TB_GPU_JOB_DONE 0     /* decoded and resized into its row */
#define TB_GPU_JOB_FAILED (-1) /* the decoder took it and failed (damaged data, ...) */
#define TB_GPU_JOB_REFUSED (-2) /* the decoder does not take it (header, or not for this engine) */

/* A sample for the GPU. */
typedef struct {
    const uint8_t *jpeg;    /* the file (host memory, valid until the batch's fence completes) */
    size_t len;
    int width, height;      /* from the CPU's header check */
    tb_geometry g;          /* crop and output (the flip is the consumer's) */
    int row;                /* batch row it fills */
    int status;             /* out: TB_GPU_JOB_* */
    char why[120];          /* out: the reason, when status != 0 */
} tb_gpu_job;

/* Where a decoder reports the times of its batches (data/loader_timeline.h
 * stages), on the thread that calls it: host stages (TB_STAGE_GPU_PLAN,
 * _SUBMIT, _WAIT) as they end, device stages (TB_STAGE_DEV_UPLOAD,
 * _DECODE, _RESIZE: CUDA event times placed on the host clock) once the
 * device has finished them: in a later call of the same decoder, or in
 * tb_gpu_decoder_poll. `tag` is the tag the batch was given. NULL: not
 * reported. */
typedef struct {
    void (*interval)(void *ctx, int stage, int64_t tag, double t0, double t1);
    void *ctx;
} tb_gpu_sink;

/* NULL and one line in err when no decoder can be made: this build has no
 * nvJPEG, no CUDA device, the driver is too old, the backend asked for is
 * not there, ... */
tb_gpu_decoder *tb_gpu_decoder_create(const tb_gpu_decoder_opts *o, char *err, size_t errlen);
void tb_gpu_decoder_destroy(tb_gpu_decoder *d);
/* "nvJPEG 13.3.2, hardware engine, batched, ROI decode" */
const char *tb_gpu_decoder_describe(const tb_gpu_decoder *d);
/* 1 once this decoder has turned region decode off for the rest of the run
 * (its calls with regions failed where whole images decode; the description
 * above, made at creation, still says region decode); any thread. */
int tb_gpu_decoder_region_off(const tb_gpu_decoder *d);
/* Device memory (freed with tb_gpu_decoder_free), NULL when out of memory. */
void *tb_gpu_decoder_alloc(tb_gpu_decoder *d, size_t bytes);
void tb_gpu_decoder_free(tb_gpu_decoder *d, void *p);
/* Host memory for the rows the CPU renders into a GPU batch (host_images
 * below): pinned, whatever the feed's --pinned says, so that their copies
 * up are asynchronous and do not stall the GPU stage; NULL when none is
 * left. Freed with tb_gpu_decoder_host_free once nothing reads it. */
void *tb_gpu_decoder_host_alloc(tb_gpu_decoder *d, size_t bytes);
void tb_gpu_decoder_host_free(tb_gpu_decoder *d, void *p);
/* Device to host after every batch this decoder queued (tools and tests:
 * tests/tb_data_probe). A batch another decoder made is read after
 * tb_gpu_fence_sync on its fence. */
void tb_gpu_decoder_download(tb_gpu_decoder *d, void *host, const void *dev, size_t bytes);
/* Bytes the decoder holds now: device memory (its buffers and, unless
 * nvjpeg_alloc, nvJPEG's) and pinned host memory. Any thread. */
void tb_gpu_decoder_memory(const tb_gpu_decoder *d, int64_t *device_bytes, int64_t *pinned_bytes);

/* One batch into dev_images [max_batch][S][S][3] (uint8 RGB): the jobs,
 * decoded and resized into their rows, and the rows host_rows[0..nh) of
 * host_images (same layout, rendered on the CPU, pinned) copied up.
 * Returns once every job's status is known and the work is queued on the
 * decoder's stream: the rows are complete when a fence recorded after the
 * call (tb_gpu_decoder_fence) completes (with sync = 1 they already are).
 * A job that comes back failed or refused leaves its row alone. The files
 * and host rows must stay untouched until then. */
void tb_gpu_decode_batch(tb_gpu_decoder *d, tb_gpu_job *jobs, int n, uint8_t *dev_images,
                         const uint8_t *host_images, const int *host_rows, int nh, int64_t tag,
                         const tb_gpu_sink *sink);
/* Reports the device times of the batches that have finished since (no
 * wait); returns how many batches still have times to report. */
int tb_gpu_decoder_poll(tb_gpu_decoder *d, const tb_gpu_sink *sink);

/* ---- fences: "this batch's device work is done" ------------------------------------------ */
typedef struct tb_gpu_fence tb_gpu_fence;
/* A fence for decoders of d's kind and device (d's CUDA event). */
tb_gpu_fence *tb_gpu_fence_create(tb_gpu_decoder *d);
void tb_gpu_fence_destroy(tb_gpu_fence *f);
/* Records f after everything d has queued so far. */
void tb_gpu_decoder_fence(tb_gpu_decoder *d, tb_gpu_fence *f);
/* Work queued on CUDA stream `stream` (a cudaStream_t; the consumer's)
 * after this call waits for f on the device; the host does not wait. */
void tb_gpu_fence_order(tb_gpu_fence *f, void *stream);
/* The host waits for f. */
void tb_gpu_fence_sync(tb_gpu_fence *f);

/* 1 when the GPU path takes a JPEG coded as f says; else 0 and the reason. */
int tb_gpu_decodable(const tb_jpeg_format *f, char *why, size_t len);

/* --nvjpeg cpu=PCT's rule: 1 when batch row `row` goes to the loader
 * threads' CPU decode. Rows are spread evenly over the batch, the first
 * ones to the GPU: exactly floor(n * pct / 100) of rows 0..n-1 for any n,
 * so the split does not depend on timing and the batch's bytes do not
 * depend on it on the host emulation (the CPU renders what it renders). */
int tb_gpu_cpu_row(int pct, int row);

/* ---- backends (gpu_decode.c dispatches) ---------------------------------------------- */
typedef struct {
    void (*destroy)(void *impl);
    const char *(*describe)(const void *impl);
    void *(*alloc)(void *impl, size_t bytes);
    void (*release)(void *impl, void *p);
    void (*download)(void *impl, void *host, const void *dev, size_t bytes);
    void (*memory)(const void *impl, int64_t *device_bytes, int64_t *pinned_bytes);
    void (*decode)(void *impl, tb_gpu_job *jobs, int n, uint8_t *dev_images, const uint8_t *host_images,
                   const int *host_rows, int nh, int64_t tag, const tb_gpu_sink *sink);
    int (*poll)(void *impl, const tb_gpu_sink *sink);
    void *(*fence_create)(void *impl);
    void (*fence_destroy)(void *fence);
    void (*fence_record)(void *impl, void *fence);
    void (*fence_order)(void *fence, void *stream);
    void (*fence_sync)(void *fence);
    void *(*host_alloc)(void *impl, size_t bytes); /* pinned host rows (tb_gpu_decoder_host_alloc) */
    void (*host_free)(void *impl, void *p);
    int (*region_off)(const void *impl); /* tb_gpu_decoder_region_off */
} tb_gpu_decoder_ops;

/* nvJPEG (data/gpu_decode_nvjpeg.c; TB_HAVE_NVJPEG), else NULL and why. */
void *tb_gpu_nvjpeg_create(const tb_gpu_decoder_opts *o, const tb_gpu_decoder_ops **ops, char *err,
                           size_t errlen);
/* The host emulation (data/gpu_decode_emu.c). */
void *tb_gpu_emu_create(const tb_gpu_decoder_opts *o, const tb_gpu_decoder_ops **ops);

#endif
