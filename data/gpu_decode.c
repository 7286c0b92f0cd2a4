/* gpu_decode.c - the GPU decode path's dispatch, its routing rule, and the
 * host emulation the tests run it with (see gpu_decode.h). */
#include "data/gpu_decode.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/gpu_resize.h"
#include "src/core/log.h"

struct tb_gpu_decoder {
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

/* ---- host emulation ---------------------------------------------------------------------- */

typedef struct {
    tb_gpu_decoder_opts o;
    tb_jpeg *jpeg;
    tb_rs_planner *pl;
    uint8_t *src, *tmp;
    size_t src_cap, tmp_cap;
    tb_rs_desc *desc;
    int64_t live;           /* allocations handed out and not yet given back */
    atomic_int busy;        /* 1 while a thread is in emu_decode */
} emu;

static void emu_destroy(void *impl) {
    emu *e = impl;
    if (e->live != 0)
        TB_FATAL("emulated GPU decoder destroyed with %lld allocations not given back", (long long)e->live);
    tb_jpeg_destroy(e->jpeg);
    tb_rs_planner_destroy(e->pl);
    free(e->src);
    free(e->tmp);
    free(e->desc);
    free(e);
}

static const char *emu_describe(const void *impl) {
    (void)impl;
    return "host emulation of the GPU path (libjpeg decode, the resize kernels' arithmetic on the host)";
}

static void *emu_alloc(void *impl, size_t bytes) {
    emu *e = impl;
    void *p = malloc(bytes);
    e->live += p != NULL;
    return p;
}

static void emu_release(void *impl, void *p) {
    emu *e = impl;
    if (!p) return;
    if (e->live == 0) TB_FATAL("emulated GPU decoder: memory given back that this decoder did not hand out");
    e->live--;
    free(p);
}

static void emu_download(void *impl, void *host, const void *dev, size_t bytes) {
    (void)impl;
    memcpy(host, dev, bytes);
}

/* Grows *p to hold need bytes, keeping what it holds. */
static uint8_t *grow(uint8_t **p, size_t *cap, size_t need) {
    if (need > *cap) {
        size_t c = need + need / 2;
        uint8_t *q = realloc(*p, c);
        if (!q) TB_FATAL("out of host memory");
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

/* Decodes each job with libjpeg (the whole image) and lays the pixels out
 * in the decode buffer as the nvJPEG path does (tb_rs_layout): the plan's
 * region, as the hardware engine decodes it, for about half the jobs, the
 * whole image, as the hybrid decoder does, for the rest; then both passes. */
static void emu_decode(void *impl, tb_gpu_job *jobs, int n, uint8_t *dev_images, const uint8_t *host_images,
                       const int *host_rows, int nh) {
    emu *e = impl;
    if (atomic_exchange(&e->busy, 1) != 0)
        TB_FATAL("emulated GPU decoder called from two threads at once (its state and stream are one thread's)");
    const int S = e->o.S;
    const size_t row_bytes = (size_t)S * S * 3;
    for (int i = 0; i < nh; i++)
        memcpy(dev_images + (size_t)host_rows[i] * row_bytes, host_images + (size_t)host_rows[i] * row_bytes,
               row_bytes);
    if (e->o.emulate_delay_ms > 0)
        nanosleep(&(struct timespec){e->o.emulate_delay_ms / 1000, (long)(e->o.emulate_delay_ms % 1000) * 1000000L},
                  NULL);
    tb_rs_begin(e->pl);
    int ok = 0;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        tb_gpu_job *j = &jobs[i];
        uint64_t key = job_key(j);
        if (e->o.emulate_fail_every > 0 && key % (uint64_t)e->o.emulate_fail_every == 0) {
            j->status = TB_GPU_JOB_FAILED;
            snprintf(j->why, sizeof j->why, "emulated nvJPEG failure");
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
        uint8_t *src = grow(&e->src, &e->src_cap, used);
        const tb_rs_desc *d = &e->desc[ok];
        for (int y = dec.y0; y < dec.y1; y++)
            for (int x = dec.x0; x < dec.x1; x++)
                memcpy(src + d->src_off + (size_t)(y - dec.y0) * d->src_pitch + (size_t)(x - dec.x0) * 3,
                       r.px + (size_t)y * r.stride + (size_t)x * 4, 3);
        j->status = TB_GPU_JOB_DONE;
        ok++;
    }
    size_t tlen;
    const int32_t *tab = tb_rs_tables(e->pl, &tlen);
    uint8_t *tmp = grow(&e->tmp, &e->tmp_cap, tb_rs_scratch_bytes(e->pl) + 1);
    tb_rs_run_host(e->desc, ok, tab, S, e->src, tmp, dev_images);
    atomic_store(&e->busy, 0);
}

static const tb_gpu_decoder_ops k_emu_ops = {emu_destroy, emu_describe, emu_alloc, emu_release, emu_download,
                                             emu_decode};

/* ---- dispatch ------------------------------------------------------------------------------ */

tb_gpu_decoder *tb_gpu_decoder_create(const tb_gpu_decoder_opts *o, char *err, size_t errlen) {
    tb_gpu_decoder *d = calloc(1, sizeof *d);
    if (!d) TB_FATAL("out of host memory");
    if (o->emulate) {
        emu *e = calloc(1, sizeof *e);
        if (!e) TB_FATAL("out of host memory");
        e->o = *o;
        e->jpeg = tb_jpeg_create();
        e->pl = tb_rs_planner_create(o->S);
        e->desc = calloc((size_t)o->max_batch, sizeof *e->desc);
        if (!e->desc) TB_FATAL("out of host memory");
        d->ops = &k_emu_ops;
        d->impl = e;
        return d;
    }
    d->impl = tb_gpu_nvjpeg_create(o, &d->ops, err, errlen);
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
void *tb_gpu_decoder_alloc(tb_gpu_decoder *d, size_t bytes) { return d->ops->alloc(d->impl, bytes); }
void tb_gpu_decoder_free(tb_gpu_decoder *d, void *p) { d->ops->release(d->impl, p); }
void tb_gpu_decoder_download(tb_gpu_decoder *d, void *host, const void *dev, size_t bytes) {
    d->ops->download(d->impl, host, dev, bytes);
}

void tb_gpu_decode_batch(tb_gpu_decoder *d, tb_gpu_job *jobs, int n, uint8_t *dev_images,
                         const uint8_t *host_images, const int *host_rows, int nh) {
    for (int i = 0; i < n; i++) {
        jobs[i].status = TB_GPU_JOB_REFUSED;
        jobs[i].why[0] = '\0';
    }
    d->ops->decode(d->impl, jobs, n, dev_images, host_images, host_rows, nh);
}
