/* loader_feed.c - one row of the feed table: a loader configuration, the
 * real training step, its throughput and idle shares (see loader_feed.h). */
#include "src/loader_feed.h"

#include <math.h>
#include <string.h>

#include "src/batch_source.h"
#include "src/core/log.h"
#include "src/core/timer.h"

tb_feed_row tb_feed_measure(const tb_feed_setup *fs, const tb_feed_config *c) {
    tb_model *m = tb_trainer_model(fs->tr);
    tb_backend *be = m->be;
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
    lo.format = TB_OUT_F32_NCHW;
    lo.decode = fs->decode;
    lo.gpu_device = -1; /* --decode gpu: the device the CUDA backend made current */
    lo.gpu_stages = c->decode_streams;
    tb_source *src = tb_source_loader(&lo);
    tb_feed_opts fo = {.u8 = 1, .pinned = c->pinned};
    tb_source_feed(src, m, &fo);

    int64_t epoch = 0;
    tb_source_start_epoch(src, epoch, 0);
    /* the trainer's last step was the previous row's: the gap (that row's
     * loader torn down, this one started) is no step's data time */
    tb_trainer_break_idle(fs->tr);
    tb_loader_stats s0, s1;
    memset(&s0, 0, sizeof s0);
    tb_upload_stats u0, u1;
    memset(&u0, 0, sizeof u0);
    double t0 = 0, wait = 0, h2d = 0, stepsum = 0;
    int64_t images = 0;
    char err[512];
    tb_step_record rec;
    int warm = fs->warmup, k;
    /* fs->steps timed steps, then more until the row has lasted min_row_s */
    for (k = 0; k < warm + fs->steps || (k > warm && tb_now() - t0 < fs->min_row_s); k++) {
        /* the trainer's CUDA graph is captured after its own eager warm-up:
         * the capture and instantiation (host time, the device idle) stay
         * out of the timed steps (the first row's, where it happens) */
        if (k == warm && tb_trainer_graph_pending(fs->tr)) warm++;
        if (k == warm) {
            while (tb_trainer_collect(fs->tr, &rec, 1)) { /* the warm-up's records, untimed */
            }
            be->sync(be);
            tb_source_stats(src, &s0);
            tb_upload_stats_get(tb_source_upload(src), &u0);
            if (fs->smp) tb_nvml_sampler_reset(fs->smp);
            t0 = tb_now();
            wait = h2d = stepsum = 0;
            images = 0;
        }
        tb_source_batch b;
        if (!tb_source_next(src, &b)) { /* the epoch is over: the next one */
            tb_source_start_epoch(src, ++epoch, 0);
            if (!tb_source_next(src, &b)) TB_FATAL("loader-bench --feed: the data set yields no batch");
        }
        if (tb_trainer_step(fs->tr, &b, k, fs->lr, err, sizeof err) != 0) tb_die("loader-bench --feed: %s", err);
        tb_source_release(src);
        if (k >= warm) {
            wait += b.wait_s; /* the host loop waiting for the loader */
            images += b.n;
        }
        /* finished steps' records (asynchronous steps: the device's phase
         * times, read once the step is done; none waited for here) */
        while (tb_trainer_collect(fs->tr, &rec, 0))
            if (rec.step >= warm) h2d += rec.phase[TB_PH_H2D], stepsum += rec.total;
    }
    while (tb_trainer_collect(fs->tr, &rec, 1))
        if (rec.step >= warm) h2d += rec.phase[TB_PH_H2D], stepsum += rec.total;
    be->sync(be);
    double dt = tb_now() - t0;
    int timed = k - warm;
    tb_feed_row r;
    memset(&r, 0, sizeof r);
    r.timed_steps = timed;
    r.row_s = dt;
    r.gpu_util_pct = r.gpu_idle_pct = r.sm_active_pct = NAN;
    if (fs->smp) {
        tb_nvml_stats ns;
        tb_nvml_sampler_stats(fs->smp, &ns);
        r.nvml_samples = ns.samples;
        if (ns.samples > 0) {
            r.sm_active_pct = ns.sm_active_pct_mean;
            /* GPU-Util over a shorter window is mostly the time before it
             * (src/nvml.h); min_row_s keeps rows above that */
            if (tb_nvml_util_valid(&ns)) {
                r.gpu_util_pct = ns.util_pct_mean;
                r.gpu_idle_pct = 100.0 - ns.util_pct_mean;
            }
        }
    }
    tb_source_stats(src, &s1);
    tb_upload_stats_get(tb_source_upload(src), &u1);
    tb_loader *ld = tb_upload_loader(tb_source_upload(src));
    snprintf(r.decoder, sizeof r.decoder, "%s", tb_loader_decoder(ld));
    r.gpu_stages = tb_loader_gpu_stages(ld);
    tb_source_destroy(src);
    int64_t decoded = s1.images - s0.images;
    r.images = images;
    r.img_per_s = (double)images / dt;
    r.ms_per_batch = dt * 1e3 / timed;
    r.wait_pct = 100.0 * wait / dt;
    r.h2d_ms = h2d * 1e3 / timed;
    r.step_ms = stepsum * 1e3 / timed;
    r.decode_ms_per_img = decoded > 0 ? (s1.decode_s - s0.decode_s) * 1e3 / (double)decoded : NAN;
    tb_loader_stage_split(&s0, &s1, r.gpu_stages, &r.gpu_stage_ms, &r.gpu_stage_busy_pct);
    int64_t batches = u1.batches - u0.batches;
    r.lookahead_pct = batches > 0 ? 100.0 * (double)(u1.lookahead - u0.lookahead) / (double)batches : 0;
    r.skipped = s1.skipped;
    r.gpu_decoded = s1.gpu_decoded - s0.gpu_decoded;
    r.gpu_to_cpu = s1.gpu_to_cpu - s0.gpu_to_cpu;
    r.slot_waits = u1.slot_waits - u0.slot_waits;
    return r;
}
