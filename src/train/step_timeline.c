/* step_timeline.c - the asynchronous step's gradient timeline (see
 * step_timeline.h). */
#include "src/train/step_timeline.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/timer.h"
#include "src/device/device.h"
#include "src/results/results.h"

typedef struct {
    int n;                       /* ranges recorded this step */
    size_t *off, *cnt;           /* [max] elements */
    tb_event **ev;               /* [max] GPU: compute-stream events */
    double *host;                /* [max] CPU: host clock when the hook ran */
    double host_bwd0;            /* CPU: backward's start, host clock */
    int nb;                      /* CPU: buckets of the step */
    tb_bucket_time *bk;          /* [nb] CPU: communication thread's clock, from host_bwd0 */
} slot_tl;

struct tb_step_timeline {
    tb_backend *be;
    int native, slots, max;
    void *stream;
    slot_tl *s;
    /* the hook being recorded */
    int cur;
    tb_grad_ready_fn fn;
    void *ctx;
};

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) TB_FATAL("out of host memory");
    return p;
}

tb_step_timeline *tb_step_timeline_create(tb_backend *be, int slots, int max_ranges) {
    tb_step_timeline *tl = xcalloc(1, sizeof *tl);
    tl->be = be;
    tl->stream = be->native_stream(be, NULL);
    tl->native = tl->stream != NULL;
    tl->slots = slots;
    tl->max = max_ranges;
    tl->s = xcalloc((size_t)slots, sizeof *tl->s);
    for (int i = 0; i < slots; i++) {
        slot_tl *p = &tl->s[i];
        p->off = xcalloc((size_t)max_ranges, sizeof *p->off);
        p->cnt = xcalloc((size_t)max_ranges, sizeof *p->cnt);
        p->host = xcalloc((size_t)max_ranges, sizeof *p->host);
        if (tl->native) {
            p->ev = xcalloc((size_t)max_ranges, sizeof *p->ev);
            for (int k = 0; k < max_ranges; k++) p->ev[k] = be->event_create(be, 1);
        }
    }
    return tl;
}

void tb_step_timeline_destroy(tb_step_timeline *tl) {
    if (!tl) return;
    for (int i = 0; i < tl->slots; i++) {
        slot_tl *p = &tl->s[i];
        if (p->ev)
            for (int k = 0; k < tl->max; k++) tl->be->event_destroy(tl->be, p->ev[k]);
        free(p->ev);
        free(p->off);
        free(p->cnt);
        free(p->host);
        free(p->bk);
    }
    free(tl->s);
    free(tl);
}

/* The grad-ready hook while recording: [offset, +count) is final in the
 * compute stream's order (GPU: an event there; CPU: it has been computed). */
static void recorder(void *arg, size_t offset, size_t count) {
    tb_step_timeline *tl = arg;
    slot_tl *p = &tl->s[tl->cur];
    if (p->n == tl->max)
        TB_FATAL("step timeline: backward reported more than %d gradient ranges", tl->max);
    p->off[p->n] = offset;
    p->cnt[p->n] = count;
    if (tl->native) tb_gpu_record_timing(tl->be->native_event(tl->be, p->ev[p->n]), tl->stream);
    else p->host[p->n] = tb_now();
    p->n++;
    if (tl->fn) tl->fn(tl->ctx, offset, count);
}

void tb_step_timeline_wrap(tb_step_timeline *tl, int slot, tb_grad_ready_fn *fn, void **ctx) {
    TB_ASSERT(slot >= 0 && slot < tl->slots);
    tl->cur = slot;
    tl->fn = *fn;
    tl->ctx = *ctx;
    tl->s[slot].n = 0;
    tl->s[slot].nb = 0;
    tl->s[slot].host_bwd0 = tb_now();
    *fn = recorder;
    *ctx = tl;
}

void tb_step_timeline_replay(tb_step_timeline *tl, int slot, int captured) {
    slot_tl *p = &tl->s[slot], *c = &tl->s[captured];
    if (p != c) {
        memcpy(p->off, c->off, (size_t)c->n * sizeof *p->off);
        memcpy(p->cnt, c->cnt, (size_t)c->n * sizeof *p->cnt);
    }
    p->n = c->n;
    p->nb = 0;
}

void tb_step_timeline_skip(tb_step_timeline *tl, int slot) {
    tl->s[slot].n = 0;
    tl->s[slot].nb = 0;
}

void tb_step_timeline_host_buckets(tb_step_timeline *tl, int slot, tb_transport *tr) {
    slot_tl *p = &tl->s[slot];
    if (tl->native) return; /* device: read from events at the harvest */
    free(p->bk);
    p->bk = tb_transport_bucket_times(tr, slot, p->host_bwd0, NULL, &p->nb);
    if (p->nb < 0) p->nb = 0;
}

int tb_step_timeline_events(const tb_step_timeline *tl, int slot, void **events) {
    if (!tl->native) return 0;
    if (events)
        for (int k = 0; k < tl->max; k++) events[k] = tl->be->native_event(tl->be, tl->s[slot].ev[k]);
    return tl->max;
}

void tb_step_timeline_harvest(tb_step_timeline *tl, int slot, int64_t step, int ranks, tb_event *bwd0,
                              double backward_s, double exposed_s, tb_transport *tr, size_t elem_bytes,
                              size_t bucket_bytes, size_t first_bucket_bytes, int overlap) {
    slot_tl *p = &tl->s[slot];
    if (p->n == 0) return; /* no backward in that step (no samples on this rank) */
    double *ready = xcalloc((size_t)p->n, sizeof *ready);
    int lost = 0; /* an event CUDA cannot time: the step's sample is dropped (a report must not end the run) */
    for (int i = 0; i < p->n; i++) {
        if (!tl->native) ready[i] = p->host[i] - p->host_bwd0;
        else if (tb_gpu_event_seconds(tl->be->native_event(tl->be, bwd0), tl->be->native_event(tl->be, p->ev[i]),
                                      &ready[i]) != 0)
            lost = 1;
    }
    /* the host path's buckets kept by host_buckets; the device path's read
     * now from the transport's events (nb -1: CUDA could not time them) */
    int nb = p->nb;
    tb_bucket_time *own = tl->native ? tb_transport_bucket_times(tr, slot, 0, tl->be->native_event(tl->be, bwd0), &nb)
                                     : NULL;
    const tb_bucket_time *bk = tl->native ? own : p->bk;
    if (nb < 0) lost = 1;
    if (lost) {
        static int said;
        if (!said++) tb_warn("step timeline: CUDA could not time a gradient or bucket event; that step's sample is "
                             "left out of /grad_ready and /buckets (the run goes on)");
    }
    tb_bprof_sample x = {.ranks = ranks, .step = step, .nr = p->n, .r_off = p->off, .r_cnt = p->cnt, .r_ready = ready,
                         .nb = nb > 0 ? nb : 0, .b = bk, .elem_bytes = elem_bytes, .bucket_bytes = bucket_bytes,
                         .first_bucket_bytes = first_bucket_bytes, .overlap = overlap, .backward_s = backward_s,
                         .exposed_s = exposed_s,
                         .clock = tl->native ? "CUDA events on the compute and communication streams"
                                             : "host clock (the CPU's asynchronous step)"};
    if (!lost) tb_bprof_add(&x);
    free(ready);
    free(own);
}
