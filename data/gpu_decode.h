/* gpu_decode.h - `--decode gpu`: JPEG decode, crop and resize on the GPU
 * with nvJPEG, for the loader (data/loader.c).
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
 * One thread at a time calls into a decoder; the loader's GPU stages each
 * have their own (data/loader.c). */
#ifndef TB_GPU_DECODE_H
#define TB_GPU_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "data/jpeg.h"
#include "data/transform.h"

typedef struct tb_gpu_decoder tb_gpu_decoder;

typedef struct {
    int device;             /* CUDA device ordinal; -1: the calling thread's current one */
    int max_batch, S;
    int emulate;            /* 1: the host emulation (tests; no GPU, no nvJPEG needed) */
    int emulate_fail_every; /* emulation: a job fails as nvJPEG would when a hash of its file and crop is
                               0 mod k: about one in k (0: none) */
    int emulate_delay_ms;   /* emulation: each batch takes at least this long (tests: stages overlap) */
} tb_gpu_decoder_opts;

/* What became of a job (tb_gpu_job.status). The loader treats both
 * failures alike (the CPU path from the same candidate); the tests tell a
 * decoder that declines a file apart from one that fails decoding it. */
#define TB_GPU_JOB_DONE 0     /* decoded and resized into its row */
#define TB_GPU_JOB_FAILED (-1) /* the decoder took it and failed (damaged data, ...) */
#define TB_GPU_JOB_REFUSED (-2) /* the decoder does not take it (header, or not for this engine) */

/* A sample for the GPU. */
typedef struct {
    const uint8_t *jpeg;    /* the file (host memory, valid during the call) */
    size_t len;
    int width, height;      /* from the CPU's header check */
    tb_geometry g;          /* crop and output (the flip is the consumer's) */
    int row;                /* batch row it fills */
    int status;             /* out: TB_GPU_JOB_* */
    char why[120];          /* out: the reason, when status != 0 */
} tb_gpu_job;

/* NULL and one line in err when no decoder can be made: this build has no
 * nvJPEG, no CUDA device, the driver is too old, ... */
tb_gpu_decoder *tb_gpu_decoder_create(const tb_gpu_decoder_opts *o, char *err, size_t errlen);
void tb_gpu_decoder_destroy(tb_gpu_decoder *d);
/* "nvJPEG 13.3.2, hardware engine, batched, ROI decode" */
const char *tb_gpu_decoder_describe(const tb_gpu_decoder *d);
/* Device memory (freed with tb_gpu_decoder_free), NULL when out of memory. */
void *tb_gpu_decoder_alloc(tb_gpu_decoder *d, size_t bytes);
void tb_gpu_decoder_free(tb_gpu_decoder *d, void *p);
/* Device to host, waiting for it (tools and tests: tests/tb_data_probe). */
void tb_gpu_decoder_download(tb_gpu_decoder *d, void *host, const void *dev, size_t bytes);

/* One batch into dev_images [max_batch][S][S][3] (uint8 RGB): the jobs,
 * decoded and resized into their rows, and the rows host_rows[0..nh) of
 * host_images (same layout, rendered on the CPU) copied up. Returns when
 * all of it is complete. A job that comes back failed or refused leaves
 * its row alone. */
void tb_gpu_decode_batch(tb_gpu_decoder *d, tb_gpu_job *jobs, int n, uint8_t *dev_images,
                         const uint8_t *host_images, const int *host_rows, int nh);

/* 1 when the GPU path takes a JPEG coded as f says; else 0 and the reason. */
int tb_gpu_decodable(const tb_jpeg_format *f, char *why, size_t len);

/* ---- backends (gpu_decode.c dispatches) ---------------------------------------------- */
typedef struct {
    void (*destroy)(void *impl);
    const char *(*describe)(const void *impl);
    void *(*alloc)(void *impl, size_t bytes);
    void (*release)(void *impl, void *p);
    void (*download)(void *impl, void *host, const void *dev, size_t bytes);
    void (*decode)(void *impl, tb_gpu_job *jobs, int n, uint8_t *dev_images, const uint8_t *host_images,
                   const int *host_rows, int nh);
} tb_gpu_decoder_ops;

/* nvJPEG (data/gpu_decode_nvjpeg.c; TB_HAVE_NVJPEG), else NULL and why. */
void *tb_gpu_nvjpeg_create(const tb_gpu_decoder_opts *o, const tb_gpu_decoder_ops **ops, char *err,
                           size_t errlen);

#endif
