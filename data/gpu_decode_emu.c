/* gpu_decode_emu.c - the host emulation of the GPU decode path (tests; see
 * gpu_decode.h): libjpeg decodes each job, the pixels are laid out in the
 * decode buffer as the nvJPEG path lays them out, and the resize kernels'
 * arithmetic runs on the host. Like a device it reports its batches'
 * "device" times one call late (tb_gpu_decoder_poll or the next call), and
 * with emulate_async it holds a batch's rows back until a fence recorded
 * after it completes (the consumer ordered on it or waited for it). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hash.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/gpu_decode.h"
#include "data/gpu_resize.h"

/* rows a batch wrote, held back until its fence completes (emulate_async);
 * recycled through its decoder's free list, as a device's buffers are */
typedef struct pending {
    uint8_t *dst, *buf;        /* the slot's rows; the rows' bytes, [max_batch][S][S][3] */
    int *rows, nrows;
    size_t row_bytes;
    struct emu *owner;
    struct pending *next;
} pending;

typedef struct {
    int stage;
    int64_t tag;
    double t0, t1;
} emu_interval;

#define EMU_INTERVALS 64
#define EMU_PREALLOC 6 /* held-back batches made at start-up (more are made when more are in flight) */

typedef struct emu {
    tb_gpu_decoder_opts o;
    tb_jpeg *jpeg;
    tb_rs_planner *pl;
    uint8_t *src, *tmp;
    size_t src_cap, tmp_cap;
    tb_rs_desc *desc;
    atomic_llong live, live_bytes, host_bytes; /* allocations handed out, their bytes; own buffers' bytes */
    atomic_int busy;        /* 1 while a thread is in emu_decode */
    pending *unfenced;      /* this decoder's batches since its last fence (emulate_async) */
    pthread_mutex_t free_mu;
    pending *free_list;     /* landed, for the next batches */
    size_t max_area;        /* largest image (pixels) decoded so far, and its height: the buffers are sized */
    int max_h;              /* for a batch of such images, so they grow when a larger image comes, not a luckier crop */
    emu_interval iv[EMU_INTERVALS]; /* "device" times not reported yet */
    int niv;
} emu;

typedef struct {
    pthread_mutex_t mu;
    pending *held;          /* rows that land when the fence completes */
} emu_fence;

static void apply(pending *p) {
    while (p) {
        pending *next = p->next;
        for (int i = 0; i < p->nrows; i++)
            memcpy(p->dst + (size_t)p->rows[i] * p->row_bytes, p->buf + (size_t)p->rows[i] * p->row_bytes,
                   p->row_bytes);
        emu *e = p->owner;
        pthread_mutex_lock(&e->free_mu);
        p->next = e->free_list;
        e->free_list = p;
        pthread_mutex_unlock(&e->free_mu);
        p = next;
    }
}

/* A held-back batch's buffers: a landed one, else new. */
static pending *pending_new(emu *e, uint8_t *dst, size_t row_bytes) {
    pthread_mutex_lock(&e->free_mu);
    pending *p = e->free_list;
    if (p) e->free_list = p->next;
    pthread_mutex_unlock(&e->free_mu);
    if (!p) {
        p = calloc(1, sizeof *p);
        if (p) p->buf = malloc(row_bytes * (size_t)e->o.max_batch);
        if (p) p->rows = malloc(sizeof *p->rows * (size_t)e->o.max_batch);
        if (!p || !p->buf || !p->rows) TB_FATAL("out of host memory");
        p->owner = e;
        atomic_fetch_add(&e->host_bytes, (long long)(row_bytes * (size_t)e->o.max_batch));
    }
    p->dst = dst;
    p->row_bytes = row_bytes;
    p->nrows = 0;
    p->next = NULL;
    return p;
}

/* pending lists are newest first: reversed, so that applying runs oldest to newest */
static pending *reversed(pending *p) {
    pending *r = NULL;
    while (p) {
        pending *next = p->next;
        p->next = r;
        r = p;
        p = next;
    }
    return r;
}

/* This decoder's batches not fenced yet land now, oldest first. */
static void land_unfenced(emu *e) {
    apply(reversed(e->unfenced));
    e->unfenced = NULL;
}

static void emu_destroy(void *impl) {
    emu *e = impl;
    if (atomic_load(&e->live) != 0)
        TB_FATAL("emulated GPU decoder destroyed with %lld allocations not given back", (long long)atomic_load(&e->live));
    land_unfenced(e);
    while (e->free_list) { /* every fence completed by now: all are here */
        pending *p = e->free_list;
        e->free_list = p->next;
        free(p->buf);
        free(p->rows);
        free(p);
    }
    pthread_mutex_destroy(&e->free_mu);
    tb_jpeg_destroy(e->jpeg);
    tb_rs_planner_destroy(e->pl);
    free(e->src);
    free(e->tmp);
    free(e->desc);
    free(e);
}

static const char *emu_describe(const void *impl) {
    const emu *e = impl;
    return e->o.emulate_async
               ? "host emulation of the GPU path (libjpeg decode, the resize kernels' arithmetic on the host; rows "
                 "land when their fence completes)"
               : "host emulation of the GPU path (libjpeg decode, the resize kernels' arithmetic on the host)";
}

/* "device" memory: host memory with its size in front, so the bytes held are known */
static void *emu_alloc(void *impl, size_t bytes) {
    emu *e = impl;
    size_t *p = malloc(bytes + sizeof(size_t) * 2);
    if (!p) return NULL;
    p[0] = bytes;
    atomic_fetch_add(&e->live, 1);
    atomic_fetch_add(&e->live_bytes, (long long)bytes);
    return p + 2;
}

static void emu_release(void *impl, void *ptr) {
    emu *e = impl;
    if (!ptr) return;
    if (atomic_load(&e->live) == 0)
        TB_FATAL("emulated GPU decoder: memory given back that this decoder did not hand out");
    size_t *p = (size_t *)ptr - 2;
    atomic_fetch_sub(&e->live, 1);
    atomic_fetch_sub(&e->live_bytes, (long long)p[0]);
    free(p);
}

static void emu_download(void *impl, void *host, const void *dev, size_t bytes) {
    emu *e = impl;
    land_unfenced(e); /* this decoder's own batches are done by now */
    memcpy(host, dev, bytes);
}

static void emu_memory(const void *impl, int64_t *device_bytes, int64_t *pinned_bytes) {
    const emu *e = impl;
    *device_bytes = atomic_load(&((emu *)e)->live_bytes);
    *pinned_bytes = atomic_load(&((emu *)e)->host_bytes);
}

/* Grows *p to hold need bytes, keeping what it holds. */
static uint8_t *grow(emu *e, uint8_t **p, size_t *cap, size_t need) {
    if (need > *cap) {
        size_t c = need + need / 2;
        uint8_t *q = realloc(*p, c);
        if (!q) TB_FATAL("out of host memory");
        atomic_fetch_add(&e->host_bytes, (long long)(c - *cap));
        *p = q;
        *cap = c;
    }
    return *p;
}

/* FNV-1a over the job's file and crop: what the emulation's choices
 * (fail, region or whole image) depend on. */
static uint64_t job_key(const tb_gpu_job *j) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < j->len; i++) h = (h ^ j->jpeg[i]) * 1099511628211ULL;
    const int g[] = {j->g.clip.top, j->g.clip.left, j->g.clip.height, j->g.clip.width, j->g.out_w, j->g.out_h};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) h = (h ^ (uint32_t)g[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static void report(emu *e, const tb_gpu_sink *sink) {
    for (int i = 0; i < e->niv; i++)
        if (sink && sink->interval) sink->interval(sink->ctx, e->iv[i].stage, e->iv[i].tag, e->iv[i].t0, e->iv[i].t1);
    e->niv = 0;
}

static void note(emu *e, int stage, int64_t tag, double t0, double t1) {
    if (e->niv < EMU_INTERVALS) e->iv[e->niv++] = (emu_interval){stage, tag, t0, t1};
}

/* Decodes the jobs with libjpeg and lays their pixels out as the nvJPEG path
 * does (tb_rs_layout): the plan's region, as the hardware engine decodes it,
 * for about half the jobs, the whole image, as the hybrid decoder does, for
 * the rest; returns how many decoded (their descs in e->desc). */
static int decode_jobs(emu *e, tb_gpu_job *jobs, int n) {
    tb_rs_begin(e->pl);
    int ok = 0;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        tb_gpu_job *j = &jobs[i];
        uint64_t key = job_key(j);
        if (e->o.emulate_fail_every > 0 && key % (uint64_t)e->o.emulate_fail_every == 0) {
            j->status = TB_GPU_JOB_FAILED;
            /* the file's identity in the reason: a test checks that the loader names this file */
            snprintf(j->why, sizeof j->why, "emulated nvJPEG failure (file fnv1a %016llx)",
                     (unsigned long long)tb_fnv1a(TB_FNV1A_INIT, j->jpeg, j->len));
            continue;
        }
        tb_rgbx_region r;
        if (tb_jpeg_decode_full(e->jpeg, j->jpeg, j->len, &r) != 0) {
            j->status = TB_GPU_JOB_FAILED;
            snprintf(j->why, sizeof j->why, "emulated decode: %.100s", tb_jpeg_error(e->jpeg));
            continue;
        }
        tb_rs_region need;
        tb_rs_plan(e->pl, &j->g, j->width, j->height, 2, j->row, &e->desc[ok], &need);
        tb_rs_region dec = (key >> 32) % 2 ? need : (tb_rs_region){0, 0, j->width, j->height};
        tb_rs_layout(&j->g, dec, &used, &e->desc[ok]);
        if ((size_t)j->width * (size_t)j->height > e->max_area) e->max_area = (size_t)j->width * (size_t)j->height;
        if (j->height > e->max_h) e->max_h = j->height;
        size_t bound = (size_t)e->o.max_batch * (e->max_area * 3 + TB_RS_ALIGN);
        uint8_t *src = grow(e, &e->src, &e->src_cap, used > bound ? used : bound);
        const tb_rs_desc *d = &e->desc[ok];
        for (int y = dec.y0; y < dec.y1; y++)
            for (int x = dec.x0; x < dec.x1; x++)
                memcpy(src + d->src_off + (size_t)(y - dec.y0) * d->src_pitch + (size_t)(x - dec.x0) * 3,
                       r.px + (size_t)y * r.stride + (size_t)x * 4, 3);
        j->status = TB_GPU_JOB_DONE;
        ok++;
    }
    return ok;
}

static void emu_decode(void *impl, tb_gpu_job *jobs, int n, uint8_t *dev_images, const uint8_t *host_images,
                       const int *host_rows, int nh, int64_t tag, const tb_gpu_sink *sink) {
    emu *e = impl;
    if (atomic_exchange(&e->busy, 1) != 0)
        TB_FATAL("emulated GPU decoder called from two threads at once (its state and stream are one thread's)");
    report(e, sink); /* the batches before this one are "done" by now */
    const int S = e->o.S;
    const size_t row_bytes = (size_t)S * S * 3;
    /* with emulate_async the rows are made in a buffer of their own and land when the fence completes */
    pending *p = NULL;
    uint8_t *out = dev_images;
    int merged = 0; /* a second call for the same rows (the fallback rows): one held-back batch */
    if (e->o.emulate_async) {
        merged = e->unfenced && e->unfenced->dst == dev_images;
        p = merged ? e->unfenced : pending_new(e, dev_images, row_bytes);
        out = p->buf;
    }
    double t0 = tb_now();
    for (int i = 0; i < nh; i++) {
        memcpy(out + (size_t)host_rows[i] * row_bytes, host_images + (size_t)host_rows[i] * row_bytes, row_bytes);
        if (p) p->rows[p->nrows++] = host_rows[i];
    }
    double t1 = tb_now();
    if (nh > 0) note(e, TB_STAGE_DEV_UPLOAD, tag, t0, t1);
    if (n > 0) {
        if (e->o.emulate_delay_ms > 0)
            nanosleep(&(struct timespec){e->o.emulate_delay_ms / 1000, (long)(e->o.emulate_delay_ms % 1000) * 1000000L},
                      NULL);
        int ok = decode_jobs(e, jobs, n);
        double t2 = tb_now();
        note(e, TB_STAGE_DEV_DECODE, tag, t1, t2);
        size_t tlen;
        const int32_t *tab = tb_rs_tables(e->pl, &tlen);
        size_t tbound = (size_t)e->o.max_batch * (size_t)e->max_h * (size_t)S * 3 + 1, tneed = tb_rs_scratch_bytes(e->pl) + 1;
        uint8_t *tmp = grow(e, &e->tmp, &e->tmp_cap, tneed > tbound ? tneed : tbound);
        tb_rs_run_host(e->desc, ok, tab, S, e->src, tmp, out);
        for (int i = 0; p && i < ok; i++) p->rows[p->nrows++] = e->desc[i].dst_row;
        note(e, TB_STAGE_DEV_RESIZE, tag, t2, tb_now());
    }
    if (p && !merged) { /* newest first; landed oldest first, so later batches' rows win, as on one stream */
        p->next = e->unfenced;
        e->unfenced = p;
    }
    if (e->o.sync) { /* the host waits: nothing is held back, the times are known now */
        land_unfenced(e);
        report(e, sink);
    }
    atomic_store(&e->busy, 0);
}

static int emu_poll(void *impl, const tb_gpu_sink *sink) {
    emu *e = impl;
    report(e, sink);
    return 0;
}

/* ---- fences ------------------------------------------------------------------------------ */

static void *emu_fence_create(void *impl) {
    (void)impl;
    emu_fence *f = calloc(1, sizeof *f);
    if (!f) TB_FATAL("out of host memory");
    pthread_mutex_init(&f->mu, NULL);
    return f;
}

static void fence_complete(emu_fence *f) {
    pthread_mutex_lock(&f->mu);
    pending *p = f->held;
    f->held = NULL;
    pthread_mutex_unlock(&f->mu);
    apply(p);
}

static void emu_fence_destroy(void *fence) {
    emu_fence *f = fence;
    if (!f) return;
    fence_complete(f);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

static void emu_fence_record(void *impl, void *fence) {
    emu *e = impl;
    emu_fence *f = fence;
    fence_complete(f); /* work it stood for before is long done on a device */
    pthread_mutex_lock(&f->mu);
    f->held = reversed(e->unfenced);
    pthread_mutex_unlock(&f->mu);
    e->unfenced = NULL;
}

static void emu_fence_order(void *fence, void *stream) {
    (void)stream;
    fence_complete(fence);
}

static void emu_fence_sync(void *fence) { fence_complete(fence); }

/* host rows: plain memory (nothing to pin without a device) */
static void *emu_host_alloc(void *impl, size_t bytes) {
    (void)impl;
    return malloc(bytes);
}

static void emu_host_free(void *impl, void *p) {
    (void)impl;
    free(p);
}

static int emu_region_off(const void *impl) {
    (void)impl;
    return 0; /* decodes whole images on the host: nothing to turn off */
}

static const tb_gpu_decoder_ops k_emu_ops = {
    emu_destroy,      emu_describe,      emu_alloc,        emu_release,     emu_download, emu_memory, emu_decode,
    emu_poll,         emu_fence_create,  emu_fence_destroy, emu_fence_record, emu_fence_order, emu_fence_sync,
    emu_host_alloc,   emu_host_free,     emu_region_off,
};

void *tb_gpu_emu_create(const tb_gpu_decoder_opts *o, const tb_gpu_decoder_ops **ops) {
    emu *e = calloc(1, sizeof *e);
    if (!e) TB_FATAL("out of host memory");
    e->o = *o;
    e->jpeg = tb_jpeg_create();
    e->pl = tb_rs_planner_create(o->S);
    e->desc = calloc((size_t)o->max_batch, sizeof *e->desc);
    if (!e->desc) TB_FATAL("out of host memory");
    pthread_mutex_init(&e->free_mu, NULL);
    if (o->emulate_async) { /* the buffers of a few batches in flight, made now as a device's would be */
        const size_t row_bytes = (size_t)o->S * o->S * 3;
        pending *made[EMU_PREALLOC];
        for (int i = 0; i < EMU_PREALLOC; i++) made[i] = pending_new(e, NULL, row_bytes);
        for (int i = 0; i < EMU_PREALLOC; i++) {
            made[i]->next = e->free_list;
            e->free_list = made[i];
        }
    }
    *ops = &k_emu_ops;
    return e;
}
