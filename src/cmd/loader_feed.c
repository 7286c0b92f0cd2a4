/* loader_feed.c - one row of the feed table: a loader configuration (or the
 * resident data), the real training step, its throughput, idle shares, CPU
 * budget and loader stages (see loader_feed.h). */
#include "src/cmd/loader_feed.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/timer.h"
#include "src/feed/feed.h"

tb_cpu_budget tb_feed_cpu_budget(double cpu_s, double loader_cpu_s, double wall_s, double img_per_s) {
    tb_cpu_budget b = {NAN, NAN, NAN};
    if (wall_s <= 0) return b;
    b.cores = cpu_s / wall_s;
    b.loader_cores = loader_cpu_s / wall_s;
    b.img_per_s_per_core = b.cores > 0 ? img_per_s / b.cores : NAN;
    return b;
}

/* The row's batch source: the loader as configured, fed as the CUDA
 * backend feeds it (uint8, pinned or not) on any backend, or the resident
 * synthetic pool; the feed decided before the source is made. */
static tb_source *make_source(const tb_feed_setup *fs, const tb_feed_config *c, tb_model *m) {
    tb_feed_ask ask = {fs->decode, 0, TB_FEED_ON, c->pinned ? TB_FEED_ON : TB_FEED_OFF, TB_FEED_OFF};
    if (c->resident) ask.u8 = ask.pinned = TB_FEED_OFF, ask.resident = TB_FEED_ON;
    tb_feed_opts fo = tb_feed_decide(m->be, &ask);
    if (c->resident) {
        tb_source *src = tb_source_synthetic(fs->ds->classes, fs->image_size, fs->batch, fs->ds->n, fs->seed, 0, 1,
                                             TB_LAST_DROP, &fo);
        tb_source_feed(src, m);
        return src;
    }
    tb_loader_opts lo;
    memset(&lo, 0, sizeof lo);
    lo.ds = fs->ds;
    lo.batch = fs->batch;
    lo.image_size = fs->image_size;
    lo.train = fs->train;
    lo.threads = c->threads > 0 ? c->threads : 1;
    lo.inline_decode = c->threads == 0;
    lo.prefetch = c->prefetch;
    lo.world = 1;
    lo.last_batch = TB_LAST_DROP; /* full batches only, as the seeds' DataLoader(drop_last=True) */
    lo.seed = fs->seed;
    lo.format = TB_OUT_F32_NCHW; /* uint8 NHWC, set by the feed */
    lo.gpu_device = -1; /* --decode gpu: the device the CUDA backend made current */
    lo.gpu_stages = c->decode_streams;
    lo.gpu_options = c->nvjpeg[0] ? c->nvjpeg : fs->gpu_options;
    lo.timeline_events = fs->timeline ? (size_t)4000000 : 0;
    tb_source *src = tb_source_loader(&lo, &fo, m->be);
    tb_source_feed(src, m);
    return src;
}

void tb_feed_row_path(char *buf, size_t len, const char *path, int k) {
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) dot = path + strlen(path);
    snprintf(buf, len, "%.*s.row%d%s", (int)(dot - path), path, k, dot);
}

/* What the timed steps of a row add up to (everything but the device columns). */
typedef struct {
    double t0, cpu0, wait, h2d, stepsum;
    int64_t images;
    tb_loader_stats s0;
    tb_upload_stats u0;
} row_clock;

/* The finished steps' records (wait: every step queued, else those done),
 * those from step `from` on added to rc (NULL: none). A step whose
 * gradients held NaN/Inf ends the run: the CUDA backend's asynchronous
 * steps skip the update on the device and go on (the flag stays set, so
 * every later update is skipped too), where the CPU's synchronous step has
 * already returned an error. */
static void collect(tb_trainer *tr, row_clock *rc, int from, int wait) {
    tb_step_record rec;
    while (tb_trainer_collect(tr, &rec, wait)) {
        if (rec.nonfinite)
            tb_die("loader-bench --feed: step %lld: the gradients hold NaN/Inf (the update was skipped on the "
                   "device); lower --lr",
                   (long long)rec.step);
        if (rc && rec.step >= from) rc->h2d += rec.phase[TB_PH_H2D], rc->stepsum += rec.total;
    }
}

static void row_start(row_clock *rc, tb_source *src) {
    memset(rc, 0, sizeof *rc);
    tb_source_stats(src, &rc->s0);
    tb_upload *up = tb_source_upload(src);
    if (up) tb_upload_stats_get(up, &rc->u0);
    rc->t0 = tb_now();
    rc->cpu0 = tb_process_cpu_s();
}

/* The row's numbers from its clock and the source's counters. */
static void row_finish(const tb_feed_setup *fs, const tb_feed_config *c, const row_clock *rc, tb_source *src,
                       double dt, int timed, tb_feed_row *r) {
    double cpu = tb_process_cpu_s() - rc->cpu0;
    tb_loader_stats s1;
    tb_source_stats(src, &s1);
    tb_upload *up = tb_source_upload(src);
    tb_upload_stats u1;
    memset(&u1, 0, sizeof u1);
    if (up) tb_upload_stats_get(up, &u1);
    r->images = rc->images;
    r->img_per_s = (double)rc->images / dt;
    r->ms_per_batch = dt * 1e3 / timed;
    r->wait_pct = 100.0 * rc->wait / dt;
    r->h2d_ms = rc->h2d * 1e3 / timed;
    r->step_ms = rc->stepsum * 1e3 / timed;
    tb_cpu_budget cb = tb_feed_cpu_budget(cpu, s1.cpu_s - rc->s0.cpu_s, dt, r->img_per_s);
    r->cores = cb.cores;
    r->loader_cores = cb.loader_cores;
    r->img_per_s_per_core = cb.img_per_s_per_core;
    for (int k = 0; k < TB_STAGE_COUNT; k++) r->stage_ms[k] = NAN;
    r->decode_ms_per_img = r->gpu_stage_ms = r->gpu_stage_busy_pct = NAN;
    if (c->resident) {
        snprintf(r->decoder, sizeof r->decoder, "resident: %lld synthetic images in device memory, gathered per step",
                 (long long)tb_source_resident_bytes(src) / (3LL * fs->image_size * fs->image_size * 4));
        return;
    }
    tb_loader *ld = tb_upload_loader(up);
    snprintf(r->decoder, sizeof r->decoder, "%s", tb_loader_decoder(ld));
    r->gpu_stages = tb_loader_gpu_stages(ld);
    int64_t decoded = s1.images - rc->s0.images;
    r->decode_ms_per_img = decoded > 0 ? (s1.decode_s - rc->s0.decode_s) * 1e3 / (double)decoded : NAN;
    tb_loader_stage_split(&rc->s0, &s1, r->gpu_stages, &r->gpu_stage_ms, &r->gpu_stage_busy_pct);
    tb_loader_stage_ms(&rc->s0, &s1, timed, r->stage_ms);
    int64_t batches = u1.batches - rc->u0.batches;
    r->lookahead_pct = batches > 0 ? 100.0 * (double)(u1.lookahead - rc->u0.lookahead) / (double)batches : 0;
    r->skipped = s1.skipped - rc->s0.skipped;
    memcpy(r->first_bad, s1.first_bad, sizeof r->first_bad);
    r->gpu_decoded = s1.gpu_decoded - rc->s0.gpu_decoded;
    r->gpu_to_cpu = s1.gpu_to_cpu - rc->s0.gpu_to_cpu;
    r->gpu_cpu_share = s1.gpu_cpu_share - rc->s0.gpu_cpu_share;
    r->slot_waits = u1.slot_waits - rc->u0.slot_waits;
    if (fs->timeline) {
        char err[512];
        tb_feed_row_path(r->timeline, sizeof r->timeline, fs->timeline, fs->row_index);
        if (tb_loader_timeline_write(ld, r->timeline, r->decoder, err, sizeof err) != 0)
            tb_die("loader-bench --feed --timeline: %s", err);
    }
}

/* The device columns from NVML over the timed steps. */
static void device_columns(const tb_feed_setup *fs, tb_feed_row *r) {
    r->gpu_util_pct = r->gpu_idle_pct = r->sm_active_pct = NAN;
    if (!fs->smp) return;
    tb_nvml_stats ns;
    tb_nvml_sampler_stats(fs->smp, &ns);
    r->nvml_samples = ns.samples;
    if (ns.samples == 0) return;
    r->sm_active_pct = ns.sm_active_pct_mean;
    /* GPU-Util over a shorter window is mostly the time before it
     * (src/device/nvml.h); min_row_s keeps rows above that */
    if (tb_nvml_util_valid(&ns)) {
        r->gpu_util_pct = ns.util_pct_mean;
        r->gpu_idle_pct = 100.0 - ns.util_pct_mean;
    }
}

tb_feed_row tb_feed_measure(const tb_feed_setup *fs, const tb_feed_config *c) {
    tb_model *m = tb_trainer_model(fs->tr);
    tb_backend *be = m->be;
    tb_source *src = make_source(fs, c, m);
    int64_t epoch = 0;
    tb_source_start_epoch(src, epoch, 0);
    /* the trainer's last step was the previous row's: the gap (that row's
     * loader torn down, this one started) is no step's data time */
    tb_trainer_break_idle(fs->tr);
    row_clock rc;
    memset(&rc, 0, sizeof rc);
    char err[512];
    int warm = fs->warmup, k;
    /* fs->steps timed steps, then more until the row has lasted min_row_s */
    for (k = 0; k < warm + fs->steps || (k > warm && tb_now() - rc.t0 < fs->min_row_s); k++) {
        /* the trainer's CUDA graph is captured after its own eager warm-up:
         * the capture and instantiation (host time, the device idle) stay
         * out of the timed steps (the first row's, where it happens), and so
         * do the `prefetch` batches the loader queued meanwhile: timing from
         * a full ring would add them to the row's rate */
        if (k == warm && tb_trainer_graph_pending(fs->tr)) warm += 1 + (c->resident ? 0 : c->prefetch);
        if (k == warm) {
            collect(fs->tr, NULL, 0, 1); /* the warm-up's records, untimed */
            be->sync(be);
            if (fs->smp) tb_nvml_sampler_reset(fs->smp);
            row_start(&rc, src);
        }
        tb_source_batch b;
        if (!tb_source_next(src, &b)) { /* the epoch is over: the next one */
            tb_source_start_epoch(src, ++epoch, 0);
            if (!tb_source_next(src, &b)) TB_FATAL("loader-bench --feed: the data set yields no batch");
        }
        int pending = tb_trainer_graph_pending(fs->tr);
        if (tb_trainer_step(fs->tr, &b, k, fs->lr, err, sizeof err) != 0) tb_die("loader-bench --feed: %s", err);
        /* captured inside a longer warm-up (--warmup past --graph-warmup): the ring it filled drains untimed too */
        if (pending && !tb_trainer_graph_pending(fs->tr) && k < warm) {
            int after = k + 1 + (c->resident ? 0 : c->prefetch);
            if (after > warm) warm = after;
        }
        tb_source_release(src);
        if (k >= warm) {
            rc.wait += b.wait_s; /* the host loop waiting for the loader */
            rc.images += b.n;
        }
        /* finished steps' records (asynchronous steps: the device's phase
         * times, read once the step is done; none waited for here) */
        collect(fs->tr, &rc, warm, 0);
    }
    collect(fs->tr, &rc, warm, 1);
    be->sync(be);
    double dt = tb_now() - rc.t0;
    tb_feed_row r;
    memset(&r, 0, sizeof r);
    r.timed_steps = k - warm;
    r.row_s = dt;
    device_columns(fs, &r);
    row_finish(fs, c, &rc, src, dt, r.timed_steps, &r);
    tb_source_destroy(src);
    return r;
}
