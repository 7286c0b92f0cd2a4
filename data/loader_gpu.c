/* loader_gpu.c - --decode gpu's GPU stage (see loader.h, loader.c): a slot
 * whose samples are all made (files read and checked, crop boxes drawn,
 * CPU-only codings rendered) waits in SLOT_DECODE for a GPU stage:
 * gpu_stages threads (default 2), each with its own decoder (nvJPEG state,
 * CUDA stream: data/gpu_decode.h), take the lowest step waiting, so that
 * one batch's decode overlaps the next one's and the step's kernels; with
 * inline decode the caller's thread runs the one stage. What a batch holds
 * does not depend on which stage runs it or when: the samples and
 * fallbacks are fixed by the epoch's order and each sample's draws, the
 * stage only renders them.
 *
 * The stage queues the batch's device work and records the slot's fence
 * after it; the slot is READY at once, and the consumer orders its stream
 * on the fence (tb_loader_batch_order) or waits for it
 * (tb_loader_batch_sync). A slot released without either is waited for
 * then, before the workers refill it. While it has nothing to do, a stage
 * collects its decoder's device times of finished batches
 * (tb_gpu_decoder_poll) into the stage counters and timeline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/nvtx.h"
#include "core/timer.h"
#include "data/jpeg.h"
#include "data/loader_internal.h"

/* The decoder's intervals: host ones on the stage's thread track, device
 * ones on its device track. */
static void sink_interval(void *ctx, int stage, int64_t tag, double t0, double t1) {
    worker *w = ctx;
    int track = tb_loader_stage_on_device(stage) ? w->track + w->ld->ngpu : w->track;
    tb_loader_stage_add(w, track, stage, tag, t0, t1);
}

/* The first few files a GPU stage gives back to the CPU path are named
 * with nvJPEG's reason, one line each (the feed table's gpu_to_cpu counts
 * them all): row j of slot s. */
#define GPU_NAMED_MAX 3
static void name_fallback(worker *w, const slot *s, int j, const char *why) {
    struct tb_loader *ld = w->ld;
    int k = atomic_fetch_add(&ld->gpu_named, 1);
    if (k >= GPU_NAMED_MAX) return;
    char path[1024];
    int64_t sample = ld->order[(s->start + j + s->cand[j]) % ld->n];
    tb_dataset_path(ld->o.ds, sample, path, sizeof path);
    tb_info("# --decode gpu: %s: %s; decoded on the CPU path instead%s", path, why[0] ? why : "nvJPEG failed",
            k == GPU_NAMED_MAX - 1 ? " (further such files are counted, not named: gpu_to_cpu)" : "");
}

/* Once every sample of the slot is made: the GPU decodes and resizes the
 * jobs and takes up the rows rendered here; a job it cannot do goes back
 * to the CPU path from the same candidate (which may replace it, exactly as
 * without the GPU); then the slot's fence. Runs without the mutex, with w's
 * own decoder. */
static void gpu_stage(worker *w, slot *s) {
    int nj = 0, nh = 0;
    for (int j = 0; j < s->b.n; j++) {
        if (s->kind[j] == KIND_GPU) w->jobs[nj++] = s->jobs[j];
        else w->rows[nh++] = j;
    }
    tb_gpu_sink sink = {sink_interval, w};
    double t0 = tb_now();
    tb_gpu_decode_batch(w->gpu, w->jobs, nj, s->b.images, s->host_images, w->rows, nh, s->b.step, &sink);
    w->acc.decode_s += tb_now() - t0;
    int nf = 0;
    double tf = 0;
    for (int i = 0; i < nj; i++) {
        if (w->jobs[i].status == 0) {
            w->acc.gpu_decoded++;
            continue;
        }
        if (nf == 0) tf = tb_loader_stage_begin(TB_STAGE_GPU_FALLBACK);
        int j = w->jobs[i].row;
        name_fallback(w, s, j, w->jobs[i].why);
        w->acc.images--; /* counted again by the CPU path */
        w->acc.bytes_read -= (int64_t)w->jobs[i].len;
        w->acc.gpu_to_cpu++;
        tb_loader_make_sample(w, s->epoch, s, j, s->cand[j], 0);
        w->rows[nf++] = j;
    }
    if (nf > 0) {
        tb_loader_stage_end(w, TB_STAGE_GPU_FALLBACK, tf);
        tb_gpu_decode_batch(w->gpu, NULL, 0, s->b.images, s->host_images, w->rows, nf, s->b.step, &sink);
    }
    tb_gpu_decoder_fence(w->gpu, s->fence);
    s->fenced = 1;
}

void tb_loader_run_gpu_stage(struct tb_loader *ld, worker *w, slot *s) {
    int64_t gen = ld->gen;
    s->state = SLOT_GPU;
    s->staging = 1;
    if (++ld->gpu_busy > ld->stats.gpu_stage_max) ld->stats.gpu_stage_max = ld->gpu_busy;
    double t0 = s->stage_t0 = tb_now();
    w->step = s->b.step;
    pthread_mutex_unlock(&ld->mu);
    double c0 = tb_thread_cpu_s();
    gpu_stage(w, s);
    w->acc.cpu_s += tb_thread_cpu_s() - c0;
    pthread_mutex_lock(&ld->mu);
    /* the stage's end read under the lock that clears `staging`: a snapshot
     * in between would count more time for it than is merged here */
    w->acc.gpu_stage_s += tb_now() - t0;
    w->acc.gpu_batches++;
    tb_loader_merge_stats(&ld->stats, &w->acc);
    s->staging = 0;
    ld->gpu_busy--;
    if (gen == ld->gen && s->state == SLOT_GPU) {
        s->state = SLOT_READY;
        pthread_cond_broadcast(&ld->ready);
    }
    pthread_cond_broadcast(&ld->idle);
}

/* The slot of the lowest step waiting for its GPU stage, or NULL (mutex
 * held). Slots of a generation that start_epoch is dropping wait there
 * for it to free them: nobody decodes them. */
static slot *next_for_gpu(struct tb_loader *ld) {
    slot *best = NULL;
    for (int i = 0; i < ld->nslots; i++) {
        slot *s = &ld->slots[i];
        if (s->state == SLOT_DECODE && s->gen == ld->gen && (!best || s->b.step < best->b.step)) best = s;
    }
    return best;
}

/* Nothing to decode: the decoder's device times of finished batches
 * (mutex held on entry and return); returns 1 while some are still out. */
static int collect_times(struct tb_loader *ld, worker *w) {
    pthread_mutex_unlock(&ld->mu);
    tb_gpu_sink sink = {sink_interval, w};
    double c0 = tb_thread_cpu_s();
    int left = tb_gpu_decoder_poll(w->gpu, &sink);
    w->acc.cpu_s += tb_thread_cpu_s() - c0;
    pthread_mutex_lock(&ld->mu);
    tb_loader_merge_stats(&ld->stats, &w->acc);
    return left > 0;
}

void *tb_loader_gpu_main(void *arg) {
    worker *w = arg;
    struct tb_loader *ld = w->ld;
    char name[48];
    snprintf(name, sizeof name, "loader GPU stage %d", w->track - ld->o.threads);
    tb_nvtx_name_thread(name);
    pthread_mutex_lock(&ld->mu);
    int out = 0; /* device times still to collect */
    while (!ld->stop) {
        slot *s = next_for_gpu(ld);
        if (s) {
            tb_loader_run_gpu_stage(ld, w, s);
            out = 1;
            continue;
        }
        if (out) {
            out = collect_times(ld, w);
            if (out && !ld->stop && !next_for_gpu(ld)) { /* look again in 2 ms, or when a slot comes */
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 2000000L;
                if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
                pthread_cond_timedwait(&ld->gpu_cond, &ld->mu, &ts);
            }
            continue;
        }
        pthread_cond_wait(&ld->gpu_cond, &ld->mu);
    }
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

int tb_loader_gpu_create(struct tb_loader *ld, char *err, size_t errlen) {
    const tb_loader_opts *o = &ld->o;
    /* one decoder per GPU stage: nvJPEG's state and stream are per thread */
    ld->ngpu = o->inline_decode ? 1 : o->gpu_stages > 0 ? o->gpu_stages : 2;
    ld->gpus = calloc((size_t)ld->ngpu, sizeof *ld->gpus);
    if (!ld->gpus) TB_FATAL("out of host memory");
    tb_gpu_decoder_opts go = tb_gpu_decoder_defaults(o->gpu_device, o->batch, o->image_size);
    go.emulate = o->gpu_emulate;
    go.emulate_fail_every = o->gpu_emulate_fail_every;
    go.emulate_delay_ms = o->gpu_emulate_delay_ms;
    go.emulate_async = o->gpu_emulate_async;
    char why[600];
    if (tb_gpu_decoder_parse(o->gpu_options, &go, why, sizeof why) != 0) {
        snprintf(err, errlen, "loader: %s", why);
        return -1;
    }
    for (int k = 0; k < ld->ngpu; k++) {
        ld->gpus[k] = tb_gpu_decoder_create(&go, why, sizeof why);
        if (!ld->gpus[k]) {
            snprintf(err, errlen, "loader: %s", why);
            return -1;
        }
        /* each stage's nvJPEG picks its backend and flags on its own: a later stage the
         * hardware engine refused would decode otherwise, its images and its speed mixed
         * into the row's */
        const char *d0 = tb_gpu_decoder_describe(ld->gpus[0]), *dk = tb_gpu_decoder_describe(ld->gpus[k]);
        if (strcmp(d0, dk) != 0) {
            snprintf(err, errlen,
                     "loader: GPU stage %d of %d decodes with \"%.160s\" where stage 1 has \"%.160s\": every stage "
                     "must decode alike; use fewer stages (--decode-streams) or name one backend (--nvjpeg "
                     "backend=hybrid)",
                     k + 1, ld->ngpu, dk, d0);
            return -1;
        }
    }
    ld->gpu = ld->gpus[0];
    ld->gpu_cpu_share = go.cpu_share;
    for (int i = 0; i < ld->nslots; i++) ld->slots[i].fence = tb_gpu_fence_create(ld->gpu);
    tb_loader_gpu_describe(ld);
    return 0;
}

void tb_loader_gpu_describe(struct tb_loader *ld) {
    int off = 0; /* each stage's decoder decides on its own */
    for (int k = 0; k < ld->ngpu; k++) off += tb_gpu_decoder_region_off(ld->gpus[k]);
    char refused[96] = "";
    if (off)
        snprintf(refused, sizeof refused, "; region decode refused on %d of %d GPU stage%s: whole images since", off,
                 ld->ngpu, ld->ngpu > 1 ? "s" : "");
    snprintf(ld->decoder_desc, sizeof ld->decoder_desc, "%s; %d GPU stage%s; CPU fallback %s%s",
             tb_gpu_decoder_describe(ld->gpu), ld->ngpu, ld->ngpu > 1 ? "s (own decoder and stream each)" : "",
             tb_jpeg_version(), refused);
}
