/* gpu_decode_nvjpeg.c - --decode gpu on nvJPEG (see gpu_decode.h).
 *
 * The decoder: the hardware JPEG engine (NVJPEG_BACKEND_HARDWARE; A100,
 * H100, H200 have one) when nvjpegCreateEx accepts it, else the
 * GPU-assisted hybrid decoder (NVJPEG_BACKEND_GPU_HYBRID), else nvJPEG's
 * default. Each is first asked for chroma upsampling by interpolation
 * (NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, closer to libjpeg's fancy
 * upsampling, which the CPU path and Pillow use) and strict bitstream
 * checks (NVJPEG_FLAGS_BITSTREAM_STRICT, so damaged data is reported rather
 * than decoded), then with less when it refuses.
 *
 * A batch: every job's header is parsed by nvJPEG and, on the hardware
 * engine, checked with nvjpegDecodeBatchedSupportedEx on the parameters it
 * will be decoded with: first its region (the crop box's inputs plus 2
 * pixels), then, if the engine declines that, the whole image; what it
 * refuses goes back to the caller (the CPU path). The rest is decoded in
 * one batched call into one device buffer as interleaved RGB (layout:
 * tb_rs_layout): on the hardware engine nvjpegDecodeBatchedEx with each
 * image's region or (0, 0, -1, -1), on the hybrid decoder
 * nvjpegDecodeBatched, whole images. A batch whose regions fail in the
 * batched call is decoded again whole (and regions stay off if that
 * works); a failing batch is decoded again image by image so that only the
 * failing files go back to the CPU. Then data/gpu_resize.cu crops and
 * resizes into the slot's rows with the CPU path's Pillow weights, the
 * CPU-rendered rows are copied up on the same stream, and the call returns
 * when the stream is idle (the slot is complete when it is handed out).
 *
 * The stream has the device's greatest priority
 * (cudaDeviceGetStreamPriorityRange, cudaStreamCreateWithPriority,
 * non-blocking): in training the step's kernels fill the GPU, and a
 * default-priority decode stream's kernels (nvJPEG's own, the resize)
 * would wait behind the step's pending blocks; at the greatest priority
 * the block scheduler starts them first as SMs free up. It orders
 * kernels only: the hardware JPEG engine and the copy engines do not look
 * at it. The description names the priority used.
 *
 * One thread at a time calls into a decoder: the loader makes one decoder
 * per GPU stage (2 by default; data/loader.c), each called only by its own
 * stage thread (or by the consumer's thread with inline decode), so no
 * handle, JPEG state, JPEG stream, parameters or CUDA stream is shared
 * between threads (nvJPEG's thread-safety rule asks for per-thread states
 * and streams; the handles are per decoder too). The slots' device memory
 * comes from the first decoder's nvj_alloc and is written by every
 * decoder's stream (one device, cudaMalloc memory: any stream may).
 *
 * What has run on a GPU: one H100 (results/gpu_h100_2026-11-27), one
 * decoder on a default-priority stream: the hardware engine, batched with
 * regions, 9953 img/s alone, 3544 img/s feeding ResNet-50; then one H200
 * (results/gpu_h200_2026-11-27), this file as it is: the greatest-priority
 * stream (-5) and 1 to 3 decoders decoding at once from their threads into
 * one device's slots, 21006 img/s alone with 2, 5770 img/s feeding
 * ResNet-50, feed_gpu_decode and feed_upload_cuda passing. Host-tested:
 * the planning and resize arithmetic (test_gpu_resize), the loader's jobs,
 * fallbacks and several GPU stages through the host emulation
 * (test_loader_feed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include "data/gpu_decode.h"
#include "data/gpu_resize.h"
#include "src/core/cuda_check.h"
#include "src/core/log.h"

/* data/gpu_resize.cu */
void tb_rs_launch(const tb_rs_desc *d_desc, int n, const int32_t *d_tab, int S, const uint8_t *d_src, uint8_t *d_tmp,
                  uint8_t *d_dst, int max_rows, cudaStream_t stream);

static const char *nvjpeg_status_name(nvjpegStatus_t s) {
    switch (s) {
    case NVJPEG_STATUS_SUCCESS: return "NVJPEG_STATUS_SUCCESS";
    case NVJPEG_STATUS_NOT_INITIALIZED: return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG: return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM: return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
    }
    return "unknown nvJPEG status";
}

/* nvJPEG's check macro, for calls that must not fail (set-up, state,
 * parameters): file:line, rank and host, the call and nvJPEG's status name,
 * then the job ends (tb_fatal_at). A file nvJPEG cannot decode is a return
 * value, never this. */
#define TB_NVJPEG_CHECK(call)                                                                      \
    do {                                                                                           \
        nvjpegStatus_t tb_nvj_st_ = (call);                                                        \
        if (tb_nvj_st_ != NVJPEG_STATUS_SUCCESS)                                                   \
            tb_fatal_at(__FILE__, __LINE__, "nvJPEG: %s failed: %s (%d)", #call,                   \
                        nvjpeg_status_name(tb_nvj_st_), (int)tb_nvj_st_);                          \
    } while (0)

typedef struct {
    tb_gpu_decoder_opts o;
    int device;
    nvjpegHandle_t h;
    nvjpegJpegState_t st;
    nvjpegJpegStream_t js;         /* header parse for the support checks */
    nvjpegDecodeParams_t *params;  /* [max_batch] per image: RGBI, region */
    int hw, roi;                   /* hardware engine; region decode in use */
    int64_t roi_declined;          /* images the engine took whole, not as their region */
    cudaStream_t cs;               /* the decoder's stream, at the device's greatest priority */
    int priority;                  /* cs's priority (cudaDeviceGetStreamPriorityRange's greatest) */
    uint8_t *d_dec, *d_tmp;        /* decoded regions; horizontal-pass rows */
    size_t dec_cap, tmp_cap;
    int32_t *d_tab, *h_tab;        /* resize tables (device; pinned host) */
    size_t dtab_cap, htab_cap;     /* int32 values */
    tb_rs_desc *d_desc, *h_desc;   /* [max_batch] (device; pinned host) */
    tb_rs_desc *plan;              /* [max_batch] planned, in job order */
    tb_rs_planner *pl;
    /* per batch, [max_batch] */
    const unsigned char **data;
    size_t *lens;
    nvjpegImage_t *imgs;
    nvjpegDecodeParams_t *bparams;
    int *which;                    /* job index of batch entry k */
    char desc[400];
} nvj;

static void nvj_destroy(void *impl) {
    nvj *v = impl;
    if (!v) return;
    cudaSetDevice(v->device);
    if (v->cs) TB_CUDA_CHECK(cudaStreamSynchronize(v->cs));
    for (int i = 0; v->params && i < v->o.max_batch; i++)
        if (v->params[i]) TB_NVJPEG_CHECK(nvjpegDecodeParamsDestroy(v->params[i]));
    if (v->js) TB_NVJPEG_CHECK(nvjpegJpegStreamDestroy(v->js));
    if (v->st) TB_NVJPEG_CHECK(nvjpegJpegStateDestroy(v->st));
    if (v->h) TB_NVJPEG_CHECK(nvjpegDestroy(v->h));
    if (v->cs) TB_CUDA_CHECK(cudaStreamDestroy(v->cs));
    cudaFree(v->d_dec);
    cudaFree(v->d_tmp);
    cudaFree(v->d_tab);
    cudaFree(v->d_desc);
    cudaFreeHost(v->h_tab);
    cudaFreeHost(v->h_desc);
    tb_rs_planner_destroy(v->pl);
    free(v->params);
    free(v->plan);
    free(v->data);
    free(v->lens);
    free(v->imgs);
    free(v->bparams);
    free(v->which);
    free(v);
}

static const char *nvj_describe(const void *impl) { return ((const nvj *)impl)->desc; }

static void *nvj_alloc(void *impl, size_t bytes) {
    nvj *v = impl;
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is the caller's message */
        return NULL;
    }
    return p;
}

static void nvj_release(void *impl, void *p) {
    nvj *v = impl;
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    TB_CUDA_CHECK(cudaFree(p));
}

static void nvj_download(void *impl, void *host, const void *dev, size_t bytes) {
    nvj *v = impl;
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    TB_CUDA_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}

/* Device buffer of at least `need` bytes (the stream is idle between batches). */
static void *dev_grow(void *p, size_t *cap, size_t need) {
    if (need <= *cap) return p;
    if (p) TB_CUDA_CHECK(cudaFree(p));
    size_t c = need + need / 2 + 256;
    TB_CUDA_CHECK(cudaMalloc(&p, c));
    *cap = c;
    return p;
}

/* One batched decode of entries [0, m); with_roi: nvjpegDecodeBatchedEx
 * with each entry's parameters (its region, or (0, 0, -1, -1): the whole
 * image), the hardware engine's call. */
static nvjpegStatus_t decode_entries(nvj *v, int m, int with_roi) {
    nvjpegStatus_t s = nvjpegDecodeBatchedInitialize(v->h, v->st, m, 1, NVJPEG_OUTPUT_RGBI);
    if (s != NVJPEG_STATUS_SUCCESS) return s;
    if (with_roi) return nvjpegDecodeBatchedEx(v->h, v->st, v->data, v->lens, v->imgs, v->bparams, v->cs);
    return nvjpegDecodeBatched(v->h, v->st, v->data, v->lens, v->imgs, v->cs);
}

/* Makes job i entry m of the batch. nvJPEG parses its header; on the
 * hardware engine the rectangle decoded is the resize's region when
 * with_roi and the engine takes this file with that region
 * (nvjpegDecodeBatchedSupportedEx on parameters holding it, the check DALI
 * and nvImageCodec make before nvjpegDecodeBatchedEx), else the whole
 * image, which the engine must take (nvjpegDecodeBatchedSupportedEx with
 * no region); the hybrid decoder decodes whole images. Refused jobs go
 * back (the CPU path renders them). The rectangle is placed in the decode
 * buffer at *used (tb_rs_layout: 256-byte aligned, pitch 3 * width).
 * Returns 1 when the job became entry m. */
static int plan_entry(nvj *v, tb_gpu_job *j, int i, int m, int with_roi, size_t *used) {
    nvjpegStatus_t s = nvjpegJpegStreamParseHeader(v->h, j->jpeg, j->len, v->js);
    if (s != NVJPEG_STATUS_SUCCESS) {
        j->status = TB_GPU_JOB_REFUSED;
        snprintf(j->why, sizeof j->why, "nvJPEG cannot parse the header: %s", nvjpeg_status_name(s));
        return 0;
    }
    tb_rs_region need;
    tb_rs_plan(v->pl, &j->g, j->width, j->height, 2, j->row, &v->plan[i], &need);
    tb_rs_region dec = {0, 0, j->width, j->height};
    nvjpegDecodeParams_t p = v->params[m];
    if (v->hw) {
        int unsupported = 1;
        if (with_roi &&
            nvjpegDecodeParamsSetROI(p, need.x0, need.y0, need.x1 - need.x0, need.y1 - need.y0) ==
                NVJPEG_STATUS_SUCCESS &&
            nvjpegDecodeBatchedSupportedEx(v->h, v->js, p, &unsupported) == NVJPEG_STATUS_SUCCESS && unsupported == 0) {
            dec = need;
        } else {
            if (with_roi && v->roi_declined++ == 0)
                tb_info("# --decode gpu: the hardware engine declines a region decode (%dx%d image, region %d,%d "
                        "%dx%d): such files are decoded whole",
                        j->width, j->height, need.x0, need.y0, need.x1 - need.x0, need.y1 - need.y0);
            TB_NVJPEG_CHECK(nvjpegDecodeParamsSetROI(p, 0, 0, -1, -1));
            unsupported = 1;
            s = nvjpegDecodeBatchedSupportedEx(v->h, v->js, p, &unsupported);
            if (s != NVJPEG_STATUS_SUCCESS || unsupported != 0) {
                j->status = TB_GPU_JOB_REFUSED;
                snprintf(j->why, sizeof j->why, "the hardware decoder does not take it (%s, %d)",
                         nvjpeg_status_name(s), unsupported);
                return 0;
            }
        }
    }
    tb_rs_layout(&j->g, dec, used, &v->plan[i]);
    v->data[m] = j->jpeg;
    v->lens[m] = j->len;
    memset(&v->imgs[m], 0, sizeof v->imgs[m]);
    v->imgs[m].pitch[0] = (size_t)v->plan[i].src_pitch;
    v->bparams[m] = p;
    v->which[m] = i;
    return 1;
}

/* The batch's entries: the jobs still DONE (candidates) that plan_entry
 * takes, the decode buffer grown to hold them. Returns how many. */
static int plan_batch(nvj *v, tb_gpu_job *jobs, int n, int with_roi) {
    tb_rs_begin(v->pl);
    size_t used = 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (jobs[i].status == TB_GPU_JOB_DONE) m += plan_entry(v, &jobs[i], i, m, with_roi, &used);
    v->d_dec = dev_grow(v->d_dec, &v->dec_cap, used);
    for (int k = 0; k < m; k++) v->imgs[k].channel[0] = v->d_dec + v->plan[v->which[k]].src_off;
    return m;
}

static void nvj_decode(void *impl, tb_gpu_job *jobs, int n, uint8_t *dev_images, const uint8_t *host_images,
                       const int *host_rows, int nh) {
    nvj *v = impl;
    const int S = v->o.S;
    const size_t row_bytes = (size_t)S * S * 3;
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    for (int i = 0; i < nh; i++)
        TB_CUDA_CHECK(cudaMemcpyAsync(dev_images + (size_t)host_rows[i] * row_bytes,
                                      host_images + (size_t)host_rows[i] * row_bytes, row_bytes,
                                      cudaMemcpyHostToDevice, v->cs));
    for (int i = 0; i < n; i++) jobs[i].status = TB_GPU_JOB_DONE; /* candidates, until planned or failed */
    int with_roi = v->hw && v->roi;
    int m = plan_batch(v, jobs, n, with_roi);
    nvjpegStatus_t s = m > 0 ? decode_entries(v, m, with_roi) : NVJPEG_STATUS_SUCCESS;
    if (s != NVJPEG_STATUS_SUCCESS && with_roi &&
        (s == NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED || s == NVJPEG_STATUS_INVALID_PARAMETER ||
         s == NVJPEG_STATUS_ARCH_MISMATCH)) {
        /* the batched call with regions failed although the support check
         * took them: the same batch as whole images; if that decodes, the
         * regions were the trouble and stay off from now on (a damaged file
         * fails whole too, and leaves them on) */
        TB_CUDA_CHECK(cudaStreamSynchronize(v->cs));
        nvjpegStatus_t with = s;
        with_roi = 0;
        m = plan_batch(v, jobs, n, 0);
        s = m > 0 ? decode_entries(v, m, 0) : NVJPEG_STATUS_SUCCESS;
        if (s == NVJPEG_STATUS_SUCCESS && m > 0) { /* proven only when some whole image decoded */
            v->roi = 0;
            size_t used = strlen(v->desc);
            snprintf(v->desc + used, sizeof v->desc - used, "; region decode refused (%s): whole images",
                     nvjpeg_status_name(with));
            tb_info("# --decode gpu: nvjpegDecodeBatchedEx with regions failed (%s), whole images decode: whole "
                    "images from now on",
                    nvjpeg_status_name(with));
        }
    }
    if (s != NVJPEG_STATUS_SUCCESS) { /* find the files that fail, one at a time */
        TB_CUDA_CHECK(cudaStreamSynchronize(v->cs));
        nvjpegStatus_t batch_status = s;
        for (int k = 0; k < m; k++) {
            v->data[0] = v->data[k];
            v->lens[0] = v->lens[k];
            v->imgs[0] = v->imgs[k];
            v->bparams[0] = v->bparams[k];
            int i = v->which[k];
            nvjpegStatus_t one = decode_entries(v, 1, with_roi);
            TB_CUDA_CHECK(cudaStreamSynchronize(v->cs));
            if (one != NVJPEG_STATUS_SUCCESS) {
                jobs[i].status = TB_GPU_JOB_FAILED;
                snprintf(jobs[i].why, sizeof jobs[i].why, "nvJPEG: %s (the batch: %s)", nvjpeg_status_name(one),
                         nvjpeg_status_name(batch_status));
            }
        }
    }
    /* the resize of what decoded */
    int ok = 0, max_rows = 1;
    for (int i = 0; i < n; i++)
        if (jobs[i].status == TB_GPU_JOB_DONE) {
            v->h_desc[ok++] = v->plan[i];
            if (v->plan[i].rows > max_rows) max_rows = v->plan[i].rows;
        }
    if (ok > 0) {
        size_t tlen;
        const int32_t *tab = tb_rs_tables(v->pl, &tlen);
        if (tlen > v->htab_cap) {
            if (v->h_tab) TB_CUDA_CHECK(cudaFreeHost(v->h_tab));
            v->htab_cap = tlen + tlen / 2;
            TB_CUDA_CHECK(cudaHostAlloc((void **)&v->h_tab, v->htab_cap * sizeof *v->h_tab, cudaHostAllocDefault));
        }
        memcpy(v->h_tab, tab, tlen * sizeof *tab);
        v->d_tab = dev_grow(v->d_tab, &v->dtab_cap, tlen * sizeof *tab);
        v->d_tmp = dev_grow(v->d_tmp, &v->tmp_cap, tb_rs_scratch_bytes(v->pl) + 1);
        TB_CUDA_CHECK(cudaMemcpyAsync(v->d_tab, v->h_tab, tlen * sizeof *tab, cudaMemcpyHostToDevice, v->cs));
        TB_CUDA_CHECK(cudaMemcpyAsync(v->d_desc, v->h_desc, (size_t)ok * sizeof *v->h_desc, cudaMemcpyHostToDevice,
                                      v->cs));
        /* a failed nvJPEG call may leave the runtime's last error set on this
         * thread: cleared, so that the launch check reports the launch's own */
        (void)cudaGetLastError();
        tb_rs_launch(v->d_desc, ok, v->d_tab, S, v->d_dec, v->d_tmp, dev_images, max_rows, v->cs);
    }
    TB_CUDA_CHECK(cudaStreamSynchronize(v->cs));
}

static const tb_gpu_decoder_ops k_nvj_ops = {nvj_destroy, nvj_describe, nvj_alloc, nvj_release, nvj_download,
                                             nvj_decode};

void *tb_gpu_nvjpeg_create(const tb_gpu_decoder_opts *o, const tb_gpu_decoder_ops **ops, char *err,
                           size_t errlen) {
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0) {
        snprintf(err, errlen, "--decode gpu: no CUDA device (%s)",
                 ce != cudaSuccess ? cudaGetErrorString(ce) : "none visible");
        cudaGetLastError();
        return NULL;
    }
    nvj *v = calloc(1, sizeof *v);
    if (!v) TB_FATAL("out of host memory");
    v->o = *o;
    v->device = o->device;
    if (v->device < 0) TB_CUDA_CHECK(cudaGetDevice(&v->device));
    if (v->device >= count) {
        snprintf(err, errlen, "--decode gpu: CUDA device %d does not exist (%d visible)", v->device, count);
        free(v);
        return NULL;
    }
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    const struct {
        nvjpegBackend_t b;
        unsigned flags;
        const char *name;
    } tries[] = {
        {NVJPEG_BACKEND_HARDWARE, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION | NVJPEG_FLAGS_BITSTREAM_STRICT,
         "hardware engine, interpolated upsampling, strict bitstream checks"},
        {NVJPEG_BACKEND_HARDWARE, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, "hardware engine, interpolated upsampling"},
        {NVJPEG_BACKEND_HARDWARE, NVJPEG_FLAGS_DEFAULT, "hardware engine"},
        {NVJPEG_BACKEND_GPU_HYBRID, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION | NVJPEG_FLAGS_BITSTREAM_STRICT,
         "GPU hybrid decoder, interpolated upsampling, strict bitstream checks"},
        {NVJPEG_BACKEND_GPU_HYBRID, NVJPEG_FLAGS_DEFAULT, "GPU hybrid decoder"},
        {NVJPEG_BACKEND_DEFAULT, NVJPEG_FLAGS_DEFAULT, "default decoder"},
    };
    const char *chosen = NULL;
    nvjpegStatus_t last = NVJPEG_STATUS_SUCCESS;
    for (size_t t = 0; t < sizeof tries / sizeof tries[0] && !chosen; t++) {
        last = nvjpegCreateEx(tries[t].b, NULL, NULL, tries[t].flags, &v->h);
        if (last == NVJPEG_STATUS_SUCCESS) {
            chosen = tries[t].name;
            v->hw = tries[t].b == NVJPEG_BACKEND_HARDWARE;
        }
    }
    /* a refused nvjpegCreateEx may leave the runtime's last error set on
     * this thread (the backend's kernel launches check it): cleared */
    (void)cudaGetLastError();
    if (!chosen) {
        snprintf(err, errlen, "--decode gpu: nvJPEG could not be initialised on device %d: %s", v->device,
                 nvjpeg_status_name(last));
        free(v);
        return NULL;
    }
    v->roi = v->hw; /* region decode: nvjpegDecodeBatchedEx, the hardware backend only */
    TB_NVJPEG_CHECK(nvjpegJpegStateCreate(v->h, &v->st));
    TB_NVJPEG_CHECK(nvjpegJpegStreamCreate(v->h, &v->js));
    const int B = o->max_batch;
    v->params = calloc((size_t)B, sizeof *v->params);
    v->plan = calloc((size_t)B, sizeof *v->plan);
    v->data = calloc((size_t)B, sizeof *v->data);
    v->lens = calloc((size_t)B, sizeof *v->lens);
    v->imgs = calloc((size_t)B, sizeof *v->imgs);
    v->bparams = calloc((size_t)B, sizeof *v->bparams);
    v->which = calloc((size_t)B, sizeof *v->which);
    if (!v->params || !v->plan || !v->data || !v->lens || !v->imgs || !v->bparams || !v->which)
        TB_FATAL("out of host memory");
    for (int i = 0; i < B; i++) {
        TB_NVJPEG_CHECK(nvjpegDecodeParamsCreate(v->h, &v->params[i]));
        TB_NVJPEG_CHECK(nvjpegDecodeParamsSetOutputFormat(v->params[i], NVJPEG_OUTPUT_RGBI));
    }
    v->pl = tb_rs_planner_create(o->S);
    /* the decode's kernels ahead of the training step's pending blocks */
    int least_priority = 0;
    TB_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &v->priority));
    TB_CUDA_CHECK(cudaStreamCreateWithPriority(&v->cs, cudaStreamNonBlocking, v->priority));
    TB_CUDA_CHECK(cudaMalloc((void **)&v->d_desc, (size_t)B * sizeof *v->d_desc));
    TB_CUDA_CHECK(cudaHostAlloc((void **)&v->h_desc, (size_t)B * sizeof *v->h_desc, cudaHostAllocDefault));
    int major = 0, minor = 0, patch = 0;
    nvjpegGetProperty(MAJOR_VERSION, &major);
    nvjpegGetProperty(MINOR_VERSION, &minor);
    nvjpegGetProperty(PATCH_LEVEL, &patch);
    snprintf(v->desc, sizeof v->desc, "nvJPEG %d.%d.%d on device %d: %s, batched%s", major, minor, patch, v->device,
             chosen, v->roi ? ", region decode" : ", whole images");
    if (v->hw) {
        unsigned engines = 0, cores = 0;
        if (nvjpegGetHardwareDecoderInfo(v->h, &engines, &cores) == NVJPEG_STATUS_SUCCESS) {
            size_t used = strlen(v->desc);
            snprintf(v->desc + used, sizeof v->desc - used, " (%u engines x %u cores)", engines, cores);
        }
        /* a hint for the first allocation; the library grows it when needed */
        nvjpegDecodeBatchedPreAllocate(v->h, v->st, B, 1024, 1024, NVJPEG_CSS_444, NVJPEG_OUTPUT_RGBI);
    }
    size_t used = strlen(v->desc);
    snprintf(v->desc + used, sizeof v->desc - used, ", stream priority %d (the device's greatest; least %d)",
             v->priority, least_priority);
    *ops = &k_nvj_ops;
    return v;
}
