/* gpu_decode.c - the GPU decode path's dispatch, its routing rule and its
 * options (see gpu_decode.h); the host emulation is data/gpu_decode_emu.c,
 * nvJPEG data/gpu_decode_nvjpeg.c. */
#include "data/gpu_decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

struct tb_gpu_decoder {
    const tb_gpu_decoder_ops *ops;
    void *impl;
};

struct tb_gpu_fence {
    const tb_gpu_decoder_ops *ops;
    void *impl;
};

int tb_gpu_decodable(const tb_jpeg_format *f, char *why, size_t len) {
    const char *no = NULL;
    if (f->progressive) no = "progressive";
    else if (f->arithmetic) no = "arithmetic-coded";
    else if (f->lossless) no = "lossless";
    else if (f->precision != 8) no = "not 8-bit";
    else if (f->components != 1 && !(f->components == 3 && f->ycbcr))
        no = f->components == 4 ? "CMYK/YCCK" : "not YCbCr";
    else if (f->components == 3) {
        /* chroma at 1x1, luma 1x1 (4:4:4), 2x1 (4:2:2), 2x2 (4:2:0) or 1x2 (4:4:0) */
        int h = f->h_samp[0], v = f->v_samp[0];
        if (f->h_samp[1] != 1 || f->v_samp[1] != 1 || f->h_samp[2] != 1 || f->v_samp[2] != 1 || h > 2 || v > 2)
            no = "chroma subsampling the hardware decoder does not take";
    }
    if (no && why) snprintf(why, len, "%s", no);
    return no == NULL;
}

int tb_gpu_cpu_row(int pct, int row) {
    return pct > 0 && (int)(((int64_t)row + 1) * pct / 100) > (int)((int64_t)row * pct / 100);
}

/* ---- options --------------------------------------------------------------------------- */

tb_gpu_decoder_opts tb_gpu_decoder_defaults(int device, int max_batch, int side) {
    tb_gpu_decoder_opts o;
    memset(&o, 0, sizeof o);
    o.device = device;
    o.max_batch = max_batch;
    o.S = side;
    return o;
}

/* 1/0 for on|off (also 1|0); -1 otherwise. */
static int onoff(const char *v) {
    if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0) return 1;
    if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0) return 0;
    return -1;
}

static int small_int(const char *v, int lo, int hi) {
    char *end;
    long x = strtol(v, &end, 10);
    return end != v && *end == '\0' && x >= lo && x <= hi ? (int)x : -1;
}

static const char *const k_wait_names[] = {"auto", "spin", "yield", "block"}; /* TB_GPU_WAIT_* */
#define N_WAITS ((int)(sizeof k_wait_names / sizeof k_wait_names[0]))

static int wait_mode(const char *v) {
    for (int i = 0; i < N_WAITS; i++)
        if (strcmp(v, k_wait_names[i]) == 0) return i;
    return -1;
}

/* One KEY=VALUE into o; 0, or -1 with err set. */
static int parse_item(const char *key, const char *val, tb_gpu_decoder_opts *o, char *err, size_t errlen) {
    int b;
    if (strcmp(key, "backend") == 0) {
        if (strcmp(val, "auto") == 0) o->backend = TB_GPU_BACKEND_AUTO;
        else if (strcmp(val, "hardware") == 0) o->backend = TB_GPU_BACKEND_HARDWARE;
        else if (strcmp(val, "hybrid") == 0) o->backend = TB_GPU_BACKEND_HYBRID;
        else goto bad;
    } else if (strcmp(key, "roi") == 0 && (b = onoff(val)) >= 0) {
        o->no_roi = !b;
    } else if (strcmp(key, "priority") == 0 && (strcmp(val, "high") == 0 || strcmp(val, "default") == 0)) {
        o->plain_priority = strcmp(val, "default") == 0;
    } else if (strcmp(key, "chunk") == 0 && (b = small_int(val, 0, 1 << 16)) >= 0) {
        o->chunk = b;
    } else if (strcmp(key, "sync") == 0 && (b = onoff(val)) >= 0) {
        o->sync = b;
    } else if (strcmp(key, "inflight") == 0 && (b = small_int(val, 1, 4)) >= 0) {
        o->inflight = b;
    } else if (strcmp(key, "alloc") == 0 && (strcmp(val, "pool") == 0 || strcmp(val, "nvjpeg") == 0)) {
        o->nvjpeg_alloc = strcmp(val, "nvjpeg") == 0;
    } else if (strcmp(key, "cpu") == 0 && (b = small_int(val, 0, 90)) >= 0) {
        o->cpu_share = b;
    } else if (strcmp(key, "sort") == 0 && (b = onoff(val)) >= 0) {
        o->no_sort = !b;
    } else if (strcmp(key, "barrier") == 0 && (b = onoff(val)) >= 0) {
        o->no_barrier = !b;
    } else if (strcmp(key, "stall") == 0 && (b = small_int(val, 0, 1000)) >= 0) {
        o->stall_ms = b;
    } else if (strcmp(key, "wait") == 0 && (b = wait_mode(val)) >= 0) {
        o->wait = b;
    } else {
        goto bad;
    }
    return 0;
bad:
    snprintf(err, errlen,
             "--nvjpeg: '%s=%s' is not one of backend=auto|hardware|hybrid, roi=on|off, priority=high|default, "
             "chunk=N (0: whole batch), sync=on|off, inflight=1..4, alloc=pool|nvjpeg, sort=on|off, "
             "cpu=0..90 (percent of each batch decoded by the loader threads), barrier=on|off, stall=0..1000 "
             "(ms; tests), wait=auto|spin|yield|block",
             key, val);
    return -1;
}

int tb_gpu_decoder_parse(const char *spec, tb_gpu_decoder_opts *o, char *err, size_t errlen) {
    if (!spec) return 0;
    const char *p = spec;
    while (*p) {
        char item[96], *eq;
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item) {
            snprintf(err, errlen, "--nvjpeg: '%.60s' is not a KEY=VALUE list", spec);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        p += len + (p[len] == ',');
        if (!(eq = strchr(item, '='))) {
            snprintf(err, errlen, "--nvjpeg: '%s' has no '=' (KEY=VALUE,...)", item);
            return -1;
        }
        *eq = '\0';
        if (parse_item(item, eq + 1, o, err, errlen) != 0) return -1;
    }
    return 0;
}

void tb_gpu_decoder_opts_string(const tb_gpu_decoder_opts *o, char *buf, size_t len) {
    const char *be = o->backend == TB_GPU_BACKEND_HARDWARE ? "hardware"
                     : o->backend == TB_GPU_BACKEND_HYBRID ? "hybrid"
                                                           : "auto";
    snprintf(buf, len,
             "backend=%s,roi=%s,priority=%s,chunk=%d,sync=%s,inflight=%d,alloc=%s,sort=%s,cpu=%d,barrier=%s,stall=%d,"
             "wait=%s",
             be, o->no_roi ? "off" : "on", o->plain_priority ? "default" : "high", o->chunk, o->sync ? "on" : "off",
             o->inflight > 0 ? o->inflight : 2, o->nvjpeg_alloc ? "nvjpeg" : "pool", o->no_sort ? "off" : "on",
             o->cpu_share, o->no_barrier ? "off" : "on", o->stall_ms,
             o->wait >= 0 && o->wait < N_WAITS ? k_wait_names[o->wait] : "?");
}

/* ---- dispatch ------------------------------------------------------------------------------ */

tb_gpu_decoder *tb_gpu_decoder_create(const tb_gpu_decoder_opts *o, char *err, size_t errlen) {
    tb_gpu_decoder *d = calloc(1, sizeof *d);
    if (!d) TB_FATAL("out of host memory");
    if (o->inflight < 0 || o->inflight > 4 || o->chunk < 0 || o->max_batch < 1 || o->S < 1) {
        snprintf(err, errlen, "--decode gpu: bad decoder options (inflight %d, chunk %d, batch %d, size %d)",
                 o->inflight, o->chunk, o->max_batch, o->S);
        free(d);
        return NULL;
    }
    d->impl = o->emulate ? tb_gpu_emu_create(o, &d->ops) : tb_gpu_nvjpeg_create(o, &d->ops, err, errlen);
    if (!d->impl) {
        free(d);
        return NULL;
    }
    return d;
}

void tb_gpu_decoder_destroy(tb_gpu_decoder *d) {
    if (!d) return;
    d->ops->destroy(d->impl);
    free(d);
}

const char *tb_gpu_decoder_describe(const tb_gpu_decoder *d) { return d->ops->describe(d->impl); }
int tb_gpu_decoder_region_off(const tb_gpu_decoder *d) { return d->ops->region_off(d->impl); }
void *tb_gpu_decoder_alloc(tb_gpu_decoder *d, size_t bytes) { return d->ops->alloc(d->impl, bytes); }
void tb_gpu_decoder_free(tb_gpu_decoder *d, void *p) { d->ops->release(d->impl, p); }
void *tb_gpu_decoder_host_alloc(tb_gpu_decoder *d, size_t bytes) { return d->ops->host_alloc(d->impl, bytes); }
void tb_gpu_decoder_host_free(tb_gpu_decoder *d, void *p) { d->ops->host_free(d->impl, p); }
void tb_gpu_decoder_download(tb_gpu_decoder *d, void *host, const void *dev, size_t bytes) {
    d->ops->download(d->impl, host, dev, bytes);
}
void tb_gpu_decoder_memory(const tb_gpu_decoder *d, int64_t *device_bytes, int64_t *pinned_bytes) {
    d->ops->memory(d->impl, device_bytes, pinned_bytes);
}

void tb_gpu_decode_batch(tb_gpu_decoder *d, tb_gpu_job *jobs, int n, uint8_t *dev_images,
                         const uint8_t *host_images, const int *host_rows, int nh, int64_t tag,
                         const tb_gpu_sink *sink) {
    for (int i = 0; i < n; i++) {
        jobs[i].status = TB_GPU_JOB_REFUSED;
        jobs[i].why[0] = '\0';
    }
    d->ops->decode(d->impl, jobs, n, dev_images, host_images, host_rows, nh, tag, sink);
}

int tb_gpu_decoder_poll(tb_gpu_decoder *d, const tb_gpu_sink *sink) { return d->ops->poll(d->impl, sink); }

tb_gpu_fence *tb_gpu_fence_create(tb_gpu_decoder *d) {
    tb_gpu_fence *f = calloc(1, sizeof *f);
    if (!f) TB_FATAL("out of host memory");
    f->ops = d->ops;
    f->impl = d->ops->fence_create(d->impl);
    return f;
}

void tb_gpu_fence_destroy(tb_gpu_fence *f) {
    if (!f) return;
    f->ops->fence_destroy(f->impl);
    free(f);
}

void tb_gpu_decoder_fence(tb_gpu_decoder *d, tb_gpu_fence *f) {
    if (d->ops != f->ops) TB_FATAL("a fence recorded by a decoder of another kind than the one that made it");
    d->ops->fence_record(d->impl, f->impl);
}

void tb_gpu_fence_order(tb_gpu_fence *f, void *stream) { f->ops->fence_order(f->impl, stream); }
void tb_gpu_fence_sync(tb_gpu_fence *f) { f->ops->fence_sync(f->impl); }
