/* gpu_nvjpeg_batch.c - one batch on nvJPEG (see gpu_decode_nvjpeg.c):
 *
 *   - the CPU-rendered rows are copied up first, on the decoder's stream;
 *   - every job's header is parsed by nvJPEG and, on the hardware engine,
 *     checked with nvjpegDecodeBatchedSupportedEx on the parameters it will
 *     be decoded with: first its region (the crop box's inputs plus 2
 *     pixels; roi=off: never), then, if the engine declines that, the whole
 *     image; what it refuses goes back to the caller (the CPU path);
 *   - the rest, sorted by chroma subsampling and size (as NVIDIA's
 *     nvImageCodec orders a batch for the engine; sort=off: batch order),
 *     is decoded in batched calls of `chunk` images (0: one call) into one
 *     device buffer as interleaved RGB (layout: tb_rs_layout): on the
 *     hardware engine nvjpegDecodeBatchedEx with each image's region or
 *     (0, 0, -1, -1), on the hybrid decoder nvjpegDecodeBatched, whole
 *     images. Each call uses the next decode state in turn
 *     (tb_nvj_take_ctx: the host waits only if that state's last call has
 *     not finished);
 *   - a batch whose regions fail in a batched call is decoded again whole
 *     (and regions stay off if that works); a failing call is decoded again
 *     image by image so that only the failing files go back to the CPU;
 *   - data/gpu_resize.cu crops and resizes into the slot's rows with the
 *     CPU path's Pillow weights.
 * Nothing here waits for the device unless a call fails, sync=on, or the
 * previous batch's work is still queued when a hardware call would write
 * (hw_barrier); the batch's events give its device times (tb_nvj_report). */
#include <stdlib.h>
#include <string.h>

#include "core/nvtx.h"
#include "core/timer.h"
#include "data/gpu_nvjpeg.h"

/* data/gpu_resize.cu */
void tb_rs_stall(int ms, cudaStream_t stream);
void tb_rs_launch(const tb_rs_desc *d_desc, int n, const int32_t *d_tab, int S, const uint8_t *d_src, uint8_t *d_tmp,
                  uint8_t *d_dst, int max_rows, cudaStream_t stream);

static double stage_begin(int stage) {
    tb_nvtx_push(tb_loader_stage_name(stage), tb_loader_stage_color(stage));
    return tb_now();
}

static void stage_end(const tb_gpu_sink *sink, int stage, int64_t tag, double t0) {
    tb_nvtx_pop();
    tb_nvj_host(sink, stage, tag, t0, tb_now());
}

/* Device buffer of at least `need` bytes. The old one is freed on the
 * stream: the batches queued before still read it until they are done. */
static void *dev_grow(nvj *v, void *p, size_t *cap, size_t need) {
    if (need <= *cap) return p;
    tb_nvj_dev_free(v->mem, p, *cap, v->cs);
    size_t c = need + need / 2 + 256;
    p = tb_nvj_dev_alloc(v->mem, c, v->cs);
    if (!p) TB_FATAL("--decode gpu: out of device memory (%zu bytes of decode buffers)", c);
    *cap = c;
    return p;
}

/* A sort key: chroma subsampling first (the engine's order of preference),
 * then the decoded area, largest first. */
static int64_t order_key(nvjpegChromaSubsampling_t css, const tb_rs_region *dec) {
    int score = css == NVJPEG_CSS_444 ? 8 : css == NVJPEG_CSS_422 ? 7 : css == NVJPEG_CSS_420 ? 6
                : css == NVJPEG_CSS_440 ? 5 : css == NVJPEG_CSS_GRAY ? 2 : 1;
    return ((int64_t)score << 40) | (int64_t)(dec->x1 - dec->x0) * (dec->y1 - dec->y0);
}

/* Makes job i entry m of the batch (see the top of the file). The
 * rectangle is placed in the decode buffer at *used (tb_rs_layout:
 * 256-byte aligned, pitch 3 * width). Returns 1 when the job became entry m. */
static int plan_entry(nvj *v, tb_gpu_job *j, int i, int m, int with_roi, size_t *used) {
    nvjpegStatus_t s = nvjpegJpegStreamParseHeader(v->h, j->jpeg, j->len, v->js);
    if (s != NVJPEG_STATUS_SUCCESS) {
        j->status = TB_GPU_JOB_REFUSED;
        snprintf(j->why, sizeof j->why, "nvJPEG cannot parse the header: %s", tb_nvjpeg_status_name(s));
        return 0;
    }
    /* the decode buffer is laid out from the CPU's header check: nvJPEG writes the size its
     * own parse gives, so a file the two read differently would spill into the next image */
    unsigned fw = 0, fh = 0;
    s = nvjpegJpegStreamGetFrameDimensions(v->js, &fw, &fh);
    if (s != NVJPEG_STATUS_SUCCESS || fw != (unsigned)j->width || fh != (unsigned)j->height) {
        j->status = TB_GPU_JOB_REFUSED;
        snprintf(j->why, sizeof j->why, "nvJPEG reads it as %ux%u where the header check reads %dx%d (%s)", fw, fh,
                 j->width, j->height, tb_nvjpeg_status_name(s));
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
                         tb_nvjpeg_status_name(s), unsupported);
                return 0;
            }
        }
    }
    nvjpegChromaSubsampling_t css = NVJPEG_CSS_UNKNOWN;
    if (nvjpegJpegStreamGetChromaSubsampling(v->js, &css) != NVJPEG_STATUS_SUCCESS) css = NVJPEG_CSS_UNKNOWN;
    tb_rs_layout(&j->g, dec, used, &v->plan[i]);
    v->data[m] = j->jpeg;
    v->lens[m] = j->len;
    memset(&v->imgs[m], 0, sizeof v->imgs[m]);
    v->imgs[m].pitch[0] = (size_t)v->plan[i].src_pitch;
    v->bparams[m] = p;
    v->which[m] = i;
    v->order_key[m] = order_key(css, &dec);
    return 1;
}

/* Entries [0, m) sorted by key, largest first (insertion sort: a batch is a few hundred). */
static void sort_entries(nvj *v, int m) {
    for (int a = 1; a < m; a++) {
        const unsigned char *d = v->data[a];
        size_t len = v->lens[a];
        nvjpegImage_t img = v->imgs[a];
        nvjpegDecodeParams_t bp = v->bparams[a];
        int w = v->which[a];
        int64_t key = v->order_key[a];
        int b = a - 1;
        for (; b >= 0 && v->order_key[b] < key; b--) {
            v->data[b + 1] = v->data[b];
            v->lens[b + 1] = v->lens[b];
            v->imgs[b + 1] = v->imgs[b];
            v->bparams[b + 1] = v->bparams[b];
            v->which[b + 1] = v->which[b];
            v->order_key[b + 1] = v->order_key[b];
        }
        v->data[b + 1] = d;
        v->lens[b + 1] = len;
        v->imgs[b + 1] = img;
        v->bparams[b + 1] = bp;
        v->which[b + 1] = w;
        v->order_key[b + 1] = key;
    }
}

/* The batch's entries: the jobs still DONE (candidates) that plan_entry
 * takes, sorted, the decode buffer grown to hold them. Returns how many. */
static int plan_batch(nvj *v, tb_gpu_job *jobs, int n, int with_roi) {
    tb_rs_begin(v->pl);
    size_t used = 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (jobs[i].status == TB_GPU_JOB_DONE) m += plan_entry(v, &jobs[i], i, m, with_roi, &used);
    if (!v->o.no_sort) sort_entries(v, m);
    v->d_dec = dev_grow(v, v->d_dec, &v->dec_cap, used);
    for (int k = 0; k < m; k++) v->imgs[k].channel[0] = v->d_dec + v->plan[v->which[k]].src_off;
    return m;
}

/* One batched call of entries [k0, k0 + cnt) through decode state c; with_roi:
 * nvjpegDecodeBatchedEx with each entry's parameters (its region, or
 * (0, 0, -1, -1): the whole image), the hardware engine's call. */
static nvjpegStatus_t decode_call(nvj *v, nvj_ctx *c, int k0, int cnt, int with_roi, int64_t tag,
                                  const tb_gpu_sink *sink) {
    double t0 = stage_begin(TB_STAGE_GPU_SUBMIT);
    nvjpegStatus_t s = nvjpegDecodeBatchedInitialize(v->h, c->st, cnt, 1, NVJPEG_OUTPUT_RGBI);
    if (s == NVJPEG_STATUS_SUCCESS)
        s = with_roi ? nvjpegDecodeBatchedEx(v->h, c->st, v->data + k0, v->lens + k0, v->imgs + k0, v->bparams + k0,
                                             v->cs)
                     : nvjpegDecodeBatched(v->h, c->st, v->data + k0, v->lens + k0, v->imgs + k0, v->cs);
    TB_CUDA_CHECK(cudaEventRecord(c->done, v->cs));
    c->used = 1;
    stage_end(sink, TB_STAGE_GPU_SUBMIT, tag, t0);
    return s;
}

/* Before a hardware call the host waits for event e, after everything on
 * the stream the call must not overtake (gpu_decode_nvjpeg.c: the engine
 * writes when called, not in stream order): before a batch's first call
 * the previous batch's work (readers_done), before each further call of a
 * batch (chunk=N) the call before it, whose nvJPEG work may free memory
 * the pool hands to the next. */
static void hw_barrier(nvj *v, cudaEvent_t e, int64_t tag, const tb_gpu_sink *sink) {
    if (v->hw && !v->o.no_barrier) tb_nvj_wait_busy(e, tag, sink); /* barrier=off: the race, for its test */
}

/* The host waits for everything queued on the decoder's stream, blocking
 * on an event (cudaStreamSynchronize would spin a core under the device's
 * default schedule, counted as the loader's work) */
static void wait_stream(nvj *v, int64_t tag, const tb_gpu_sink *sink) {
    double t0 = stage_begin(TB_STAGE_GPU_WAIT);
    TB_CUDA_CHECK(cudaEventRecord(v->drained, v->cs));
    TB_CUDA_CHECK(cudaEventSynchronize(v->drained));
    stage_end(sink, TB_STAGE_GPU_WAIT, tag, t0);
}

/* A status no file causes: the decoder itself (memory, the device, the library). */
static int decoder_fault(nvjpegStatus_t s) {
    return s == NVJPEG_STATUS_NOT_INITIALIZED || s == NVJPEG_STATUS_ALLOCATOR_FAILURE ||
           s == NVJPEG_STATUS_EXECUTION_FAILED || s == NVJPEG_STATUS_INTERNAL_ERROR ||
           s == NVJPEG_STATUS_ARCH_MISMATCH;
}

/* A failed call of entries [k0, k1): each image again alone, so that only
 * the files that fail go back to the CPU. */
static void isolate_failures(nvj *v, tb_gpu_job *jobs, int k0, int k1, int with_roi, nvjpegStatus_t batch_status,
                             int64_t tag, const tb_gpu_sink *sink) {
    wait_stream(v, tag, sink);
    int faults = 0;
    nvjpegStatus_t fault = NVJPEG_STATUS_SUCCESS;
    for (int k = k0; k < k1; k++) {
        nvj_ctx *c = tb_nvj_take_ctx(v, tag, sink);
        nvjpegStatus_t one = decode_call(v, c, k, 1, with_roi, tag, sink);
        wait_stream(v, tag, sink);
        v->fault_run = decoder_fault(one) ? v->fault_run + 1 : 0;
        if (one != NVJPEG_STATUS_SUCCESS) {
            tb_gpu_job *j = &jobs[v->which[k]];
            j->status = TB_GPU_JOB_FAILED;
            snprintf(j->why, sizeof j->why, "nvJPEG: %s (the batch: %s)", tb_nvjpeg_status_name(one),
                     tb_nvjpeg_status_name(batch_status));
            if (decoder_fault(one)) faults++, fault = one;
        }
    }
    /* every image of the call failed alone too, with a status no file causes, and so did the one before
     * it where the call had one image (chunk=1): the decoder is broken, and sending every batch to the
     * CPU one image at a time would hide it */
    if (faults == k1 - k0 && v->fault_run >= 2)
        TB_FATAL("--decode gpu: nvJPEG failed all %d images of a call, each alone too, with %s (the call: %s)%s: "
                 "the decoder on device %d, not the files; check the GPU (nvidia-smi) or run with --decode cpu",
                 k1 - k0, tb_nvjpeg_status_name(fault), tb_nvjpeg_status_name(batch_status),
                 k1 - k0 < 2 ? ", as did the image before it" : "", v->device);
}

static int roi_trouble(nvjpegStatus_t s) {
    return s == NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED || s == NVJPEG_STATUS_INVALID_PARAMETER ||
           s == NVJPEG_STATUS_ARCH_MISMATCH;
}

/* Plans and decodes the jobs in calls of `chunk`; returns the decode state of the last call (NULL: none ran). */
static nvj_ctx *decode_jobs(nvj *v, nvj_timing *t, tb_gpu_job *jobs, int n, int64_t tag,
                            const tb_gpu_sink *sink) {
    int with_roi = v->hw && v->roi;
    nvj_ctx *last = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        double t0 = stage_begin(TB_STAGE_GPU_PLAN);
        for (int i = 0; i < n; i++)
            if (jobs[i].status != TB_GPU_JOB_FAILED) jobs[i].status = TB_GPU_JOB_DONE; /* candidates */
        int m = plan_batch(v, jobs, n, with_roi);
        stage_end(sink, TB_STAGE_GPU_PLAN, tag, t0);
        int chunk = v->o.chunk > 0 ? v->o.chunk : (m > 0 ? m : 1), retry_whole = 0, calls_ok = 1;
        if (m > 0 && v->readers_live) hw_barrier(v, v->readers_done, tag, sink);
        v->readers_live = 0;
        for (int k0 = 0; k0 < m && !retry_whole; k0 += chunk) {
            int cnt = m - k0 < chunk ? m - k0 : chunk;
            if (k0 > 0 && last) hw_barrier(v, last->done, tag, sink);
            last = tb_nvj_take_ctx(v, tag, sink);
            tb_nvj_timing_queued(t, 2);
            nvjpegStatus_t s = decode_call(v, last, k0, cnt, with_roi, tag, sink);
            if (s == NVJPEG_STATUS_SUCCESS) {
                v->fault_run = 0;
                continue;
            }
            calls_ok = 0;
            if (with_roi && (roi_trouble(s) || s == NVJPEG_STATUS_INTERNAL_ERROR ||
                             s == NVJPEG_STATUS_EXECUTION_FAILED) && attempt == 0) {
                /* the batched call with regions failed although the support
                 * check took them: the batch again as whole images; if that
                 * decodes, the regions were the trouble and stay off (a
                 * damaged file fails whole too, and leaves them on). An
                 * internal or execution failure too (region decode on the
                 * hardware engine has been reported failing with
                 * INTERNAL_ERROR): tried whole before isolate_failures can
                 * end the run on it; not an allocator failure, which
                 * whole images would not show to be the regions' */
                wait_stream(v, tag, sink);
                with_roi = 0;
                retry_whole = 1;
                v->roi_failed = s;
                continue;
            }
            isolate_failures(v, jobs, k0, k0 + cnt, with_roi, s, tag, sink);
        }
        if (!retry_whole) {
            if (attempt == 1 && v->roi && m > 0 && v->roi_failed != NVJPEG_STATUS_SUCCESS) {
                /* proven only when every whole-image call decoded: a call that
                 * failed whole too had a damaged file in it (isolated above),
                 * and then the regions were not shown to be the trouble */
                if (calls_ok) { /* m > 0: at least one call, every one decoded */
                    v->roi = 0; /* v->desc is left as made: other threads may read it (tb_loader_decoder) */
                    atomic_store(&v->roi_off, 1);
                    tb_info("# --decode gpu: nvjpegDecodeBatchedEx with regions failed (%s), whole images decode: "
                            "whole images from now on",
                            tb_nvjpeg_status_name(v->roi_failed));
                }
            }
            break;
        }
    }
    return last;
}

/* The resize of what decoded, through the last call's decode state (its
 * pinned descriptors and tables: free, the host waited for its last use). */
static void resize(nvj *v, nvj_ctx *c, nvj_timing *t, tb_gpu_job *jobs, int n, uint8_t *dev_images, int64_t tag,
                   const tb_gpu_sink *sink) {
    int ok = 0, max_rows = 1;
    for (int i = 0; i < n; i++)
        if (jobs[i].status == TB_GPU_JOB_DONE) {
            c->h_desc[ok++] = v->plan[i];
            if (v->plan[i].rows > max_rows) max_rows = v->plan[i].rows;
        }
    if (ok == 0) return;
    double t0 = stage_begin(TB_STAGE_GPU_SUBMIT);
    size_t tlen;
    const int32_t *tab = tb_rs_tables(v->pl, &tlen);
    if (tlen > c->htab_cap) {
        tb_nvj_pinned_free(v->mem, c->h_tab, v->cs);
        c->htab_cap = tlen + tlen / 2;
        c->h_tab = tb_nvj_pinned_alloc(v->mem, c->htab_cap * sizeof *c->h_tab);
        if (!c->h_tab) TB_FATAL("--decode gpu: out of pinned host memory for the resize tables");
    }
    memcpy(c->h_tab, tab, tlen * sizeof *tab);
    size_t tcap = v->dtab_cap * sizeof *v->d_tab;
    v->d_tab = dev_grow(v, v->d_tab, &tcap, tlen * sizeof *tab);
    v->dtab_cap = tcap / sizeof *v->d_tab;
    v->d_tmp = dev_grow(v, v->d_tmp, &v->tmp_cap, tb_rs_scratch_bytes(v->pl) + 1);
    tb_nvj_timing_queued(t, 3);
    TB_CUDA_CHECK(cudaMemcpyAsync(v->d_tab, c->h_tab, tlen * sizeof *tab, cudaMemcpyHostToDevice, v->cs));
    TB_CUDA_CHECK(
        cudaMemcpyAsync(v->d_desc, c->h_desc, (size_t)ok * sizeof *c->h_desc, cudaMemcpyHostToDevice, v->cs));
    /* a failed nvJPEG call may leave the runtime's last error set on this
     * thread: cleared, so that the launch check reports the launch's own */
    (void)cudaGetLastError();
    tb_rs_stall(v->o.stall_ms, v->cs); /* stall=MS (a test): the resize still queued when the next call comes */
    tb_rs_launch(v->d_desc, ok, v->d_tab, v->o.S, v->d_dec, v->d_tmp, dev_images, max_rows, v->cs);
    TB_CUDA_CHECK(cudaEventRecord(c->done, v->cs)); /* its pinned tables are read up to here */
    stage_end(sink, TB_STAGE_GPU_SUBMIT, tag, t0);
}

void tb_nvj_decode(void *impl, tb_gpu_job *jobs, int n, uint8_t *dev_images, const uint8_t *host_images,
                   const int *host_rows, int nh, int64_t tag, const tb_gpu_sink *sink) {
    nvj *v = impl;
    const size_t row_bytes = (size_t)v->o.S * v->o.S * 3;
    /* every table here holds max_batch entries (the loader passes at most a batch) */
    if (n < 0 || nh < 0 || n > v->o.max_batch || nh > v->o.max_batch)
        TB_FATAL("nvJPEG decode: %d GPU and %d CPU rows, more than the decoder's %d a batch", n, nh, v->o.max_batch);
    for (int i = 0; i < nh; i++)
        if (host_rows[i] < 0 || host_rows[i] >= v->o.max_batch)
            TB_FATAL("nvJPEG decode: CPU row %d outside the batch of %d", host_rows[i], v->o.max_batch);
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    tb_nvj_report(v, sink, 0); /* the batches that finished meanwhile */
    nvj_timing *t = tb_nvj_timing_begin(v, tag, sink);
    if (nh > 0) {
        double t0 = stage_begin(TB_STAGE_GPU_SUBMIT);
        tb_nvj_timing_queued(t, 1);
        for (int i = 0; i < nh; i++)
            TB_CUDA_CHECK(cudaMemcpyAsync(dev_images + (size_t)host_rows[i] * row_bytes,
                                          host_images + (size_t)host_rows[i] * row_bytes, row_bytes,
                                          cudaMemcpyHostToDevice, v->cs));
        tb_nvj_timing_mark(v, t, 1);
        stage_end(sink, TB_STAGE_GPU_SUBMIT, tag, t0);
    }
    if (n > 0) {
        v->roi_failed = NVJPEG_STATUS_SUCCESS;
        nvj_ctx *last = decode_jobs(v, t, jobs, n, tag, sink);
        tb_nvj_timing_mark(v, t, 2);
        if (last) resize(v, last, t, jobs, n, dev_images, tag, sink);
        tb_nvj_timing_mark(v, t, 3);
    }
    if (v->hw) { /* what the next hardware call must not overtake (hw_barrier) */
        TB_CUDA_CHECK(cudaEventRecord(v->readers_done, v->cs));
        v->readers_live = 1;
    }
    if (v->o.sync) { /* sync=on: the host waits here, as before fences */
        wait_stream(v, tag, sink);
        tb_nvj_report(v, sink, 1);
    }
}
