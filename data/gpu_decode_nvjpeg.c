/* gpu_decode_nvjpeg.c - --decode gpu on nvJPEG (see gpu_decode.h): the
 * decoder's making and ending, its memory, its batches' device times and
 * its fences; a batch's planning, decode and resize are in
 * data/gpu_nvjpeg_batch.c.
 *
 * The decoder: the hardware JPEG engine (NVJPEG_BACKEND_HARDWARE; A100,
 * H100, H200 have one) when nvjpegCreateExV2 accepts it, else the
 * GPU-assisted hybrid decoder (NVJPEG_BACKEND_GPU_HYBRID), else nvJPEG's
 * default (`--nvjpeg backend=hardware|hybrid` asks for one only). Each is
 * first asked for chroma upsampling by interpolation
 * (NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, closer to libjpeg's fancy
 * upsampling, which the CPU path and Pillow use) and strict bitstream
 * checks (NVJPEG_FLAGS_BITSTREAM_STRICT, so damaged data is reported rather
 * than decoded), then with less when it refuses. Its buffers come from the
 * decoder's stream-ordered pool and pinned cache (data/gpu_nvjpeg_mem.h;
 * alloc=nvjpeg: nvJPEG's own cudaMalloc / cudaHostAlloc).
 *
 * What holds a decode behind training, and what this file does about it:
 *   - a host wait per batch: none (but the hardware engine's, below). A batch's work is queued on the
 *     decoder's stream; the loader records a fence (a CUDA event) after it
 *     and the training stream waits for the fence (cudaStreamWaitEvent,
 *     src/feed/batch_upload.c), so the GPU stage's thread goes on to the next
 *     batch at once (sync=on: the old wait at the end of each batch);
 *   - a decode state reused while its last batch runs: `inflight` states
 *     (2) in turn, the host waiting only for the one it reuses;
 *   - implicit device-wide syncs: no cudaMalloc, cudaFree, cudaHostAlloc
 *     or cudaFreeHost once the buffers have grown (gpu_nvjpeg_mem.h);
 *   - the decode's kernels waiting behind training's: the stream has the
 *     device's greatest priority (cudaDeviceGetStreamPriorityRange,
 *     non-blocking; priority=default: the default), so the block scheduler
 *     starts them first as SMs free up; it orders kernels only: the
 *     hardware JPEG engine and the copy engines do not look at it.
 * One host wait the hardware engine needs: it writes its output when
 * nvjpegDecodeBatched(Ex) is called, not after the work already queued on
 * the stream it is given (found and measured by torchcodec, PR #1634, on
 * H100 with nvJPEG 12.3-13.2; a cudaStreamWaitEvent does not order it
 * either). The previous batch's resize, still queued, reads the decode
 * buffer the next call writes, and the pool may hand a hardware call
 * memory freed on the stream while queued work reads it. So before a
 * batch's first hardware call the host waits for an event recorded after
 * the previous batch's work, and before each further call of a batch
 * (chunk=N) for the call before it (hw_barrier in gpu_nvjpeg_batch.c; a
 * gpu_wait interval when it has to wait): planning the batch (milliseconds
 * of host work) comes first, so the previous resize (under a millisecond)
 * should be done by then. The other direction is assumed, not shown: work
 * queued after a hardware call (the resize, the events the host and the
 * consumer wait on) runs after the engine's writes. On the H200 the call
 * returned only when its decode was done (gpu_submit 57.12 ms against
 * 58.26 ms of device decode a batch alone, results/gpu_h200_2026-12-04c),
 * and the fenced path's bytes equal sync=on's.
 * Each batch's device time (rows uploaded, nvJPEG, resize) comes from
 * events, placed on the host clock by an anchor event recorded and waited
 * for at start-up: tb_gpu_sink gets them once the batch has finished.
 *
 * One thread at a time calls into a decoder: the loader makes one per GPU
 * stage, each called only by its own stage thread (or by the consumer's
 * thread with inline decode), so no handle, state, stream or parameters is
 * shared between threads (nvJPEG's thread-safety rule). The slots' device
 * memory comes from the first decoder's nvj_alloc and is written by every
 * decoder's stream (one device: any stream may).
 *
 * What has run on a GPU: the fences, states in turn, pools, chunks, sort
 * and event timings on the H200 (results/gpu_h200_2026-12-04*.md; 7566
 * img/s alone with 2 GPU stages, 3828 feeding ResNet-50 at batch 256). The
 * hardware call's barrier (hw_barrier) has NOT run on a GPU yet. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/nvtx.h"
#include "core/timer.h"
#include "data/gpu_nvjpeg.h"

const char *tb_nvjpeg_status_name(nvjpegStatus_t s) {
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

/* ---- batch times ------------------------------------------------------------------------- */

void tb_nvj_host(const tb_gpu_sink *sink, int stage, int64_t tag, double t0, double t1) {
    if (sink && sink->interval) sink->interval(sink->ctx, stage, tag, t0, t1);
}

/* The host waits for event e: a gpu_wait interval (and NVTX range). */
static void wait_event(cudaEvent_t e, int64_t tag, const tb_gpu_sink *sink) {
    tb_nvtx_push(tb_loader_stage_name(TB_STAGE_GPU_WAIT), tb_loader_stage_color(TB_STAGE_GPU_WAIT));
    double t0 = tb_now();
    TB_CUDA_CHECK(cudaEventSynchronize(e));
    tb_nvtx_pop();
    tb_nvj_host(sink, TB_STAGE_GPU_WAIT, tag, t0, tb_now());
}

/* Host time of event e (completed), through the anchor. */
static double host_time(nvj *v, cudaEvent_t e) {
    float ms = 0;
    TB_CUDA_CHECK(cudaEventElapsedTime(&ms, v->anchor, e));
    return v->anchor_host + (double)ms * 1e-3;
}

/* The batch's first event is placed through the anchor (float milliseconds
 * since it: coarse after minutes, which only shifts the batch); each later
 * one from the event before it (short spans, exact to the event's
 * resolution), so a stage's length keeps its precision in long runs. */
static void report_one(nvj *v, nvj_timing *t, const tb_gpu_sink *sink) {
    static const int stage[4] = {-1, TB_STAGE_DEV_UPLOAD, TB_STAGE_DEV_DECODE, TB_STAGE_DEV_RESIZE};
    double prev = host_time(v, t->ev[0]);
    cudaEvent_t pe = t->ev[0];
    for (int k = 1; k < 4; k++)
        if (t->has[k]) {
            float ms = 0;
            TB_CUDA_CHECK(cudaEventElapsedTime(&ms, pe, t->ev[k]));
            double at = prev + (double)ms * 1e-3;
            pe = t->ev[k];
            /* the device starts interval k after its previous event and after the host queued it */
            double from = t->queued[k] > prev ? t->queued[k] : prev;
            tb_nvj_host(sink, stage[k], t->tag, from < at ? from : at, at);
            prev = at;
        }
    t->live = 0;
}

/* The last event a timing recorded. */
static cudaEvent_t last_event(const nvj_timing *t) {
    for (int k = 3; k > 0; k--)
        if (t->has[k]) return t->ev[k];
    return t->ev[0];
}

int tb_nvj_report(nvj *v, const tb_gpu_sink *sink, int wait) {
    int left = 0;
    /* oldest first: from the slot after the newest */
    for (int i = 0; i < NVJ_TIMINGS; i++) {
        nvj_timing *t = &v->tim[(v->next_tim + i) % NVJ_TIMINGS];
        if (!t->live) continue;
        cudaEvent_t e = last_event(t);
        if (wait) {
            TB_CUDA_CHECK(cudaEventSynchronize(e));
        } else {
            cudaError_t q = cudaEventQuery(e);
            if (q == cudaErrorNotReady) {
                (void)cudaGetLastError(); /* not an error: a later launch check must not read it */
                left++;
                continue;
            }
            TB_CUDA_CHECK(q);
        }
        report_one(v, t, sink);
    }
    return left;
}

nvj_timing *tb_nvj_timing_begin(nvj *v, int64_t tag, const tb_gpu_sink *sink) {
    nvj_timing *t = &v->tim[v->next_tim];
    v->next_tim = (v->next_tim + 1) % NVJ_TIMINGS;
    if (t->live) { /* all live: the oldest must finish first */
        wait_event(last_event(t), tag, sink);
        report_one(v, t, sink);
    }
    memset(t->has, 0, sizeof t->has);
    memset(t->queued, 0, sizeof t->queued);
    t->tag = tag;
    t->live = 1;
    t->has[0] = 1;
    TB_CUDA_CHECK(cudaEventRecord(t->ev[0], v->cs));
    return t;
}

void tb_nvj_timing_queued(nvj_timing *t, int k) {
    if (t->queued[k] == 0) t->queued[k] = tb_now();
}

void tb_nvj_timing_mark(nvj *v, nvj_timing *t, int k) {
    TB_CUDA_CHECK(cudaEventRecord(t->ev[k], v->cs));
    t->has[k] = 1;
}

void tb_nvj_wait_busy(cudaEvent_t e, int64_t tag, const tb_gpu_sink *sink) {
    cudaError_t q = cudaEventQuery(e);
    if (q == cudaErrorNotReady) {
        (void)cudaGetLastError(); /* not an error: a later launch check must not read it */
        wait_event(e, tag, sink);
    } else {
        TB_CUDA_CHECK(q);
    }
}

nvj_ctx *tb_nvj_take_ctx(nvj *v, int64_t tag, const tb_gpu_sink *sink) {
    nvj_ctx *c = &v->ctx[v->next_ctx];
    v->next_ctx = (v->next_ctx + 1) % v->nctx;
    if (c->used) tb_nvj_wait_busy(c->done, tag, sink); /* its last batch may still run */
    return c;
}

static int nvj_poll(void *impl, const tb_gpu_sink *sink) {
    nvj *v = impl;
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    return tb_nvj_report(v, sink, 0);
}

/* ---- memory ------------------------------------------------------------------------------- */

/* The slots' device memory (loader creation and destruction only): sizes kept to count what is held. */
static void *nvj_alloc(void *impl, size_t bytes) {
    nvj *v = impl;
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is the caller's message */
        return NULL;
    }
    if (v->nslot_mem == v->slot_mem_cap) {
        v->slot_mem_cap = v->slot_mem_cap ? 2 * v->slot_mem_cap : 16;
        v->slot_mem = realloc(v->slot_mem, (size_t)v->slot_mem_cap * sizeof *v->slot_mem);
        if (!v->slot_mem) TB_FATAL("out of host memory");
    }
    v->slot_mem[v->nslot_mem].p = p;
    v->slot_mem[v->nslot_mem++].bytes = bytes;
    __atomic_add_fetch(&v->slot_bytes, (int64_t)bytes, __ATOMIC_RELAXED);
    return p;
}

static void nvj_release(void *impl, void *p) {
    nvj *v = impl;
    if (!p) return;
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    for (int i = 0; i < v->nslot_mem; i++)
        if (v->slot_mem[i].p == p) {
            __atomic_sub_fetch(&v->slot_bytes, (int64_t)v->slot_mem[i].bytes, __ATOMIC_RELAXED);
            v->slot_mem[i] = v->slot_mem[--v->nslot_mem];
            break;
        }
    TB_CUDA_CHECK(cudaFree(p));
}

static void nvj_download(void *impl, void *host, const void *dev, size_t bytes) {
    nvj *v = impl;
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    TB_CUDA_CHECK(cudaStreamSynchronize(v->cs)); /* this decoder's batches are done */
    TB_CUDA_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}

/* The loader's host rows: pinned at their exact size (the pinned cache's
 * power-of-two classes would nearly double a batch's rows), counted. */
static void *nvj_host_alloc(void *impl, size_t bytes) {
    nvj *v = impl;
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    size_t *p = NULL; /* a header of 16 bytes keeps the size for the count */
    if (cudaHostAlloc((void **)&p, bytes + 16, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of pinned memory is the caller's message */
        return NULL;
    }
    p[0] = bytes;
    __atomic_add_fetch(&v->host_bytes, (int64_t)bytes, __ATOMIC_RELAXED);
    return (char *)p + 16;
}

static void nvj_host_free(void *impl, void *q) {
    nvj *v = impl;
    if (!q) return;
    size_t *p = (size_t *)((char *)q - 16);
    __atomic_sub_fetch(&v->host_bytes, (int64_t)p[0], __ATOMIC_RELAXED);
    TB_CUDA_CHECK(cudaFreeHost(p));
}

static void nvj_memory(const void *impl, int64_t *device_bytes, int64_t *pinned_bytes) {
    const nvj *v = impl;
    int64_t dev = 0, pinned = 0;
    tb_nvj_mem_counts(v->mem, &dev, &pinned, NULL, NULL);
    /* what this file holds outside the pool: the slots, the pinned descriptors, the host rows */
    *device_bytes = dev + __atomic_load_n(&v->slot_bytes, __ATOMIC_RELAXED);
    *pinned_bytes = pinned + __atomic_load_n(&v->host_bytes, __ATOMIC_RELAXED);
}

static const char *nvj_describe(const void *impl) { return ((const nvj *)impl)->desc; }
static int nvj_region_off(const void *impl) { return atomic_load(&((nvj *)impl)->roi_off); }

/* ---- fences -------------------------------------------------------------------------------- */

static void *nvj_fence_create(void *impl) {
    nvj *v = impl;
    TB_CUDA_CHECK(cudaSetDevice(v->device));
    cudaEvent_t e;
    TB_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventBlockingSync));
    return (void *)e;
}

static void nvj_fence_destroy(void *fence) {
    if (fence) TB_CUDA_CHECK(cudaEventDestroy((cudaEvent_t)fence));
}

static void nvj_fence_record(void *impl, void *fence) {
    nvj *v = impl;
    TB_CUDA_CHECK(cudaEventRecord((cudaEvent_t)fence, v->cs));
}

static void nvj_fence_order(void *fence, void *stream) {
    TB_CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)fence, 0));
}

static void nvj_fence_sync(void *fence) { TB_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)fence)); }

/* ---- making and ending ------------------------------------------------------------------------ */

static void nvj_destroy(void *impl) {
    nvj *v = impl;
    if (!v) return;
    cudaSetDevice(v->device);
    if (v->cs) TB_CUDA_CHECK(cudaStreamSynchronize(v->cs));
    if (v->o.wait != TB_GPU_WAIT_AUTO) { /* the row's wait= ends: CUDA's default again */
        (void)cudaSetDeviceFlags(cudaDeviceScheduleAuto);
        (void)cudaGetLastError();
    }
    for (int i = 0; v->params && i < v->o.max_batch; i++)
        if (v->params[i]) TB_NVJPEG_CHECK(nvjpegDecodeParamsDestroy(v->params[i]));
    for (int k = 0; k < v->nctx; k++) {
        nvj_ctx *c = &v->ctx[k];
        if (c->st) TB_NVJPEG_CHECK(nvjpegJpegStateDestroy(c->st));
        if (c->done) TB_CUDA_CHECK(cudaEventDestroy(c->done));
        if (c->h_desc) tb_nvj_pinned_free(v->mem, c->h_desc, v->cs);
        if (c->h_tab) tb_nvj_pinned_free(v->mem, c->h_tab, v->cs);
    }
    for (int i = 0; i < NVJ_TIMINGS; i++)
        for (int k = 0; k < 4; k++)
            if (v->tim[i].ev[k]) TB_CUDA_CHECK(cudaEventDestroy(v->tim[i].ev[k]));
    if (v->anchor) TB_CUDA_CHECK(cudaEventDestroy(v->anchor));
    if (v->readers_done) TB_CUDA_CHECK(cudaEventDestroy(v->readers_done));
    if (v->drained) TB_CUDA_CHECK(cudaEventDestroy(v->drained));
    if (v->js) TB_NVJPEG_CHECK(nvjpegJpegStreamDestroy(v->js));
    if (v->mem) {
        tb_nvj_dev_free(v->mem, v->d_dec, v->dec_cap, v->cs);
        tb_nvj_dev_free(v->mem, v->d_tmp, v->tmp_cap, v->cs);
        tb_nvj_dev_free(v->mem, v->d_tab, v->dtab_cap * sizeof(int32_t), v->cs);
        tb_nvj_dev_free(v->mem, v->d_desc, (size_t)v->o.max_batch * sizeof(tb_rs_desc), v->cs);
    }
    if (v->h) TB_NVJPEG_CHECK(nvjpegDestroy(v->h)); /* its buffers go back to the pool and cache */
    if (v->cs) {
        TB_CUDA_CHECK(cudaStreamSynchronize(v->cs));
        TB_CUDA_CHECK(cudaStreamDestroy(v->cs));
    }
    if (v->nslot_mem) TB_FATAL("nvJPEG decoder destroyed with %d slot allocations not given back", v->nslot_mem);
    tb_nvj_mem_destroy(v->mem);
    tb_rs_planner_destroy(v->pl);
    free(v->slot_mem);
    free(v->params);
    free(v->plan);
    free(v->data);
    free(v->lens);
    free(v->imgs);
    free(v->bparams);
    free(v->which);
    free(v->order_key);
    free(v);
}

/* nvJPEG's handle on the backend asked for, with the most of interpolated
 * upsampling and strict checks it takes; sets v->h, v->hw, *chosen (NULL:
 * none) and returns the last status. */
static nvjpegStatus_t create_handle(nvj *v, const char **chosen) {
    const unsigned interp = NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, strict = NVJPEG_FLAGS_BITSTREAM_STRICT;
    const struct {
        nvjpegBackend_t b;
        unsigned flags;
        int kind; /* TB_GPU_BACKEND_HARDWARE or _HYBRID; AUTO: the default decoder, auto only */
        const char *name;
    } tries[] = {
        {NVJPEG_BACKEND_HARDWARE, interp | strict, TB_GPU_BACKEND_HARDWARE,
         "hardware engine, interpolated upsampling, strict bitstream checks"},
        {NVJPEG_BACKEND_HARDWARE, interp, TB_GPU_BACKEND_HARDWARE, "hardware engine, interpolated upsampling"},
        {NVJPEG_BACKEND_HARDWARE, NVJPEG_FLAGS_DEFAULT, TB_GPU_BACKEND_HARDWARE, "hardware engine"},
        {NVJPEG_BACKEND_GPU_HYBRID, interp | strict, TB_GPU_BACKEND_HYBRID,
         "GPU hybrid decoder, interpolated upsampling, strict bitstream checks"},
        {NVJPEG_BACKEND_GPU_HYBRID, interp, TB_GPU_BACKEND_HYBRID, "GPU hybrid decoder, interpolated upsampling"},
        {NVJPEG_BACKEND_GPU_HYBRID, NVJPEG_FLAGS_DEFAULT, TB_GPU_BACKEND_HYBRID, "GPU hybrid decoder"},
        {NVJPEG_BACKEND_DEFAULT, NVJPEG_FLAGS_DEFAULT, TB_GPU_BACKEND_AUTO, "default decoder"},
    };
    v->dev_alloc = tb_nvj_dev_allocator(v->mem);
    v->pin_alloc = tb_nvj_pinned_allocator(v->mem);
    nvjpegStatus_t last = NVJPEG_STATUS_NOT_INITIALIZED;
    *chosen = NULL;
    for (size_t t = 0; t < sizeof tries / sizeof tries[0] && !*chosen; t++) {
        if (v->o.backend != TB_GPU_BACKEND_AUTO && tries[t].kind != v->o.backend) continue;
        last = v->o.nvjpeg_alloc ? nvjpegCreateEx(tries[t].b, NULL, NULL, tries[t].flags, &v->h)
                                 : nvjpegCreateExV2(tries[t].b, &v->dev_alloc, &v->pin_alloc, tries[t].flags, &v->h);
        if (last == NVJPEG_STATUS_SUCCESS) {
            *chosen = tries[t].name;
            v->hw = tries[t].b == NVJPEG_BACKEND_HARDWARE;
        }
    }
    /* a refused nvjpegCreateEx may leave the runtime's last error set on
     * this thread (the backend's kernel launches check it): cleared */
    (void)cudaGetLastError();
    return last;
}

/* The decode states, their pinned descriptors and events; the timings' events and the anchor. The
 * events a stage's thread waits on block (cudaEventBlockingSync) rather than spin a core: the feed
 * table counts the loader's CPU time, and a spinning wait would count as decode work. */
static void make_states(nvj *v) {
    v->nctx = v->o.inflight > 0 ? v->o.inflight : 2;
    for (int k = 0; k < v->nctx; k++) {
        nvj_ctx *c = &v->ctx[k];
        TB_NVJPEG_CHECK(nvjpegJpegStateCreate(v->h, &c->st));
        c->h_desc = tb_nvj_pinned_alloc(v->mem, (size_t)v->o.max_batch * sizeof *c->h_desc);
        if (!c->h_desc) TB_FATAL("--decode gpu: out of pinned host memory for the resize descriptors");
        TB_CUDA_CHECK(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming | cudaEventBlockingSync));
    }
    for (int i = 0; i < NVJ_TIMINGS; i++)
        for (int k = 0; k < 4; k++) TB_CUDA_CHECK(cudaEventCreateWithFlags(&v->tim[i].ev[k], cudaEventBlockingSync));
    TB_CUDA_CHECK(cudaEventCreateWithFlags(&v->readers_done, cudaEventDisableTiming | cudaEventBlockingSync));
    TB_CUDA_CHECK(cudaEventCreateWithFlags(&v->drained, cudaEventDisableTiming | cudaEventBlockingSync));
    TB_CUDA_CHECK(cudaEventCreate(&v->anchor));
    double before = tb_now(); /* the anchor completes between its record and the wait's return */
    TB_CUDA_CHECK(cudaEventRecord(v->anchor, v->cs));
    TB_CUDA_CHECK(cudaEventSynchronize(v->anchor));
    v->anchor_host = 0.5 * (before + tb_now());
}

/* wait= (TB_GPU_WAIT_*): how every host thread waits for the current device, from now until the
 * decoder ends (cudaSetDeviceFlags on an initialised device replaces its schedule); auto leaves it.
 * A refusal is one line, and the row runs on CUDA's default. */
static void set_wait(int wait) {
    static const unsigned flags[] = {cudaDeviceScheduleAuto, cudaDeviceScheduleSpin, cudaDeviceScheduleYield,
                                     cudaDeviceScheduleBlockingSync};
    if (wait <= TB_GPU_WAIT_AUTO || wait > TB_GPU_WAIT_BLOCK) return;
    cudaError_t e = cudaSetDeviceFlags(flags[wait]);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        tb_warn("--nvjpeg wait=: cudaSetDeviceFlags refused the schedule (%s); CUDA's default stays",
                cudaGetErrorString(e));
    }
}

static void describe(nvj *v, const char *chosen) {
    int major = 0, minor = 0, patch = 0;
    nvjpegGetProperty(MAJOR_VERSION, &major);
    nvjpegGetProperty(MINOR_VERSION, &minor);
    nvjpegGetProperty(PATCH_LEVEL, &patch);
    char opts[200];
    tb_gpu_decoder_opts_string(&v->o, opts, sizeof opts);
    size_t used = (size_t)snprintf(v->desc, sizeof v->desc, "nvJPEG %d.%d.%d on device %d: %s, batched%s", major,
                                   minor, patch, v->device, chosen, v->roi ? ", region decode" : ", whole images");
    if (v->hw) {
        unsigned engines = 0, cores = 0;
        if (nvjpegGetHardwareDecoderInfo(v->h, &engines, &cores) == NVJPEG_STATUS_SUCCESS && used < sizeof v->desc)
            used += (size_t)snprintf(v->desc + used, sizeof v->desc - used, " (%u engines x %u cores)", engines,
                                     cores);
    }
    if (used < sizeof v->desc)
        snprintf(v->desc + used, sizeof v->desc - used,
                 ", stream priority %d (the device's greatest %d, least %d), %d decode states, %s, %s; --nvjpeg %s",
                 v->priority, v->greatest_priority, v->least_priority, v->nctx,
                 v->o.sync ? "host waits for each batch" : "fenced, no host wait",
                 v->o.nvjpeg_alloc ? "nvJPEG's own allocations" : tb_nvj_mem_describe(v->mem), opts);
}

static const tb_gpu_decoder_ops k_nvj_ops = {
    nvj_destroy, nvj_describe, nvj_alloc, nvj_release, nvj_download, nvj_memory, tb_nvj_decode,
    nvj_poll, nvj_fence_create, nvj_fence_destroy, nvj_fence_record, nvj_fence_order, nvj_fence_sync,
    nvj_host_alloc, nvj_host_free, nvj_region_off,
};

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
    v->mem = tb_nvj_mem_create(v->device);
    const char *chosen;
    nvjpegStatus_t last = create_handle(v, &chosen);
    if (!chosen) {
        const char *asked = o->backend == TB_GPU_BACKEND_HARDWARE ? " (backend=hardware: the hardware engine only)"
                            : o->backend == TB_GPU_BACKEND_HYBRID ? " (backend=hybrid: the hybrid decoder only)"
                                                                  : "";
        snprintf(err, errlen, "--decode gpu: nvJPEG could not be initialised on device %d%s: %s", v->device, asked,
                 tb_nvjpeg_status_name(last));
        tb_nvj_mem_destroy(v->mem);
        free(v);
        return NULL;
    }
    set_wait(v->o.wait); /* made: nvj_destroy puts CUDA's default back */
    v->roi = v->hw && !o->no_roi; /* region decode: nvjpegDecodeBatchedEx, the hardware backend only */
    /* allocations padded, so that buffers grow seldom (2 MiB device, 256 KiB pinned) */
    nvjpegSetDeviceMemoryPadding((size_t)2 << 20, v->h);
    nvjpegSetPinnedMemoryPadding((size_t)256 << 10, v->h);
    TB_NVJPEG_CHECK(nvjpegJpegStreamCreate(v->h, &v->js));
    const int B = o->max_batch;
    v->params = calloc((size_t)B, sizeof *v->params);
    v->plan = calloc((size_t)B, sizeof *v->plan);
    v->data = calloc((size_t)B, sizeof *v->data);
    v->lens = calloc((size_t)B, sizeof *v->lens);
    v->imgs = calloc((size_t)B, sizeof *v->imgs);
    v->bparams = calloc((size_t)B, sizeof *v->bparams);
    v->which = calloc((size_t)B, sizeof *v->which);
    v->order_key = calloc((size_t)B, sizeof *v->order_key);
    if (!v->params || !v->plan || !v->data || !v->lens || !v->imgs || !v->bparams || !v->which || !v->order_key)
        TB_FATAL("out of host memory");
    for (int i = 0; i < B; i++) {
        TB_NVJPEG_CHECK(nvjpegDecodeParamsCreate(v->h, &v->params[i]));
        TB_NVJPEG_CHECK(nvjpegDecodeParamsSetOutputFormat(v->params[i], NVJPEG_OUTPUT_RGBI));
    }
    v->pl = tb_rs_planner_create(o->S);
    /* the decode's kernels ahead of the training step's pending blocks (priority=high) */
    TB_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&v->least_priority, &v->greatest_priority));
    v->priority = o->plain_priority ? v->least_priority : v->greatest_priority;
    TB_CUDA_CHECK(cudaStreamCreateWithPriority(&v->cs, cudaStreamNonBlocking, v->priority));
    v->d_desc = tb_nvj_dev_alloc(v->mem, (size_t)B * sizeof *v->d_desc, v->cs);
    if (!v->d_desc) TB_FATAL("--decode gpu: out of device memory for the resize descriptors");
    make_states(v);
    /* a hint for the first allocation of each state; the library grows it
     * when needed. 512 x 512 (ImageNet's images average about 400 x 350):
     * at 1024 x 1024 the hint alone held ~0.75 GB per state at batch 256,
     * 2 states per GPU stage, kept by the pool for the whole run */
    if (v->hw)
        for (int k = 0; k < v->nctx; k++)
            nvjpegDecodeBatchedPreAllocate(v->h, v->ctx[k].st, o->chunk > 0 && o->chunk < B ? o->chunk : B, 512,
                                           512, NVJPEG_CSS_444, NVJPEG_OUTPUT_RGBI);
    (void)cudaGetLastError();
    describe(v, chosen);
    *ops = &k_nvj_ops;
    return v;
}
