/* loader.c - persistent decode workers filling a ring of batch slots (see
 * loader.h).
 *
 * Step k of the epoch lives in slot k % prefetch. Workers take one sample at
 * a time, in step order, from the first step whose slot is free: so the
 * samples of one slot are spread over all workers and a slot is complete as
 * soon as possible. The consumer takes slots strictly in step order. One
 * mutex guards the bookkeeping; workers sleep on `work` (no task: the ring
 * is full or the epoch is done), the consumer on `ready`, start_epoch on
 * `idle` (waiting for in-flight samples to finish). Nobody spins.
 *
 * --decode gpu: a slot whose samples are all made waits in SLOT_DECODE for
 * a GPU stage (data/loader_gpu.c). The slots' device memory and fences
 * come from the first decoder, which frees them. One sample's work is
 * data/loader_sample.c; every stage of it is timed (data/loader_timeline.h),
 * and the workers' CPU time is counted (stats.cpu_s). */
#include "data/loader.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/host_memory.h"
#include "core/log.h"
#include "core/nvtx.h"
#include "core/rng.h"
#include "core/thread_start.h"
#include "core/timer.h"
#include "data/jpeg.h"
#include "data/loader_internal.h"
#include "data/shard.h"

/* ---- sharding (loader.h, data/shard.h) --------------------------------------------- */

/* This rank's share of step s: global positions [*start, *start + *count). */
static void shard(const tb_loader *ld, int64_t s, int64_t *start, int *count) {
    tb_shard_range(ld->n, ld->o.world, ld->o.batch, ld->o.last_batch, s, ld->o.rank, start, count);
}

/* The epoch's order: a Fisher-Yates shuffle from (seed, epoch). */
static void make_order(tb_loader *ld, int64_t epoch) {
    tb_rng r;
    tb_rng_seed(&r, ld->o.seed, tb_hash2(0x0eb0c000ULL, (uint64_t)epoch));
    for (int64_t i = 0; i < ld->n; i++) ld->order[i] = i;
    for (int64_t i = ld->n - 1; i > 0; i--) {
        int64_t k = (int64_t)tb_rng_below(&r, (uint64_t)i + 1);
        int64_t t = ld->order[i];
        ld->order[i] = ld->order[k];
        ld->order[k] = t;
    }
}

/* ---- scheduling (called with ld->mu held) ------------------------------------------- */

static int take_task(tb_loader *ld, task *t) {
    while (ld->fill_step < ld->steps) {
        slot *s = &ld->slots[ld->fill_step % ld->nslots];
        if (ld->fill_j == 0) { /* the step has no slot yet */
            if (s->state != SLOT_FREE) return 0; /* the ring is full */
            int count;
            shard(ld, ld->fill_step, &s->start, &count);
            s->epoch = ld->epoch;
            s->gen = ld->gen;
            s->b.step = ld->fill_step;
            s->b.n = count;
            s->b.wait_s = 0;
            s->done = 0;
            s->state = SLOT_FILLING;
            tb_loader_slot_refill(s, ld->o.batch);
            if (count == 0) { /* this rank has nothing in the last step */
                s->state = SLOT_READY;
                pthread_cond_broadcast(&ld->ready);
                ld->fill_step++;
                continue;
            }
        }
        t->gen = ld->gen;
        t->s = s;
        t->j = ld->fill_j;
        if (++ld->fill_j == s->b.n) {
            ld->fill_step++;
            ld->fill_j = 0;
        }
        return 1;
    }
    return 0;
}

/* Runs task t (taken under ld->mu, which is held on entry and on return). */
static void run_task(worker *w, const task *t) {
    tb_loader *ld = w->ld;
    ld->inflight++;
    int64_t epoch = ld->epoch;
    w->step = t->s->b.step;
    pthread_mutex_unlock(&ld->mu);

    double c0 = tb_thread_cpu_s();
    tb_loader_make_sample(w, epoch, t->s, t->j, 0, 1);
    w->acc.cpu_s += tb_thread_cpu_s() - c0;

    pthread_mutex_lock(&ld->mu);
    tb_loader_merge_stats(&ld->stats, &w->acc);
    ld->inflight--;
    if (t->gen == ld->gen && ++t->s->done == t->s->b.n) {
        t->s->state = ld->gpu ? SLOT_DECODE : SLOT_READY;
        pthread_cond_broadcast(ld->gpu ? &ld->gpu_cond : &ld->ready);
    }
    if (ld->inflight == 0) pthread_cond_broadcast(&ld->idle);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    tb_loader *ld = w->ld;
    char name[40];
    snprintf(name, sizeof name, "loader worker %d", w->track);
    tb_nvtx_name_thread(name);
    pthread_mutex_lock(&ld->mu);
    for (;;) {
        if (ld->stop) break;
        task t;
        if (!take_task(ld, &t)) {
            pthread_cond_wait(&ld->work, &ld->mu);
            continue;
        }
        run_task(w, &t);
    }
    pthread_mutex_unlock(&ld->mu);
    tb_loader_worker_free(w);
    return NULL;
}

/* ---- public --------------------------------------------------------------------------- */

static void *plain_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    return malloc(bytes);
}

static void plain_free(void *ctx, void *p) {
    (void)ctx;
    free(p);
}

/* Why options o cannot make a loader, or NULL. */
static const char *invalid(const tb_loader_opts *o) {
    if (!o->ds || o->ds->n <= 0) return "the data set has no samples";
    if (o->batch < 1) return "batch must be >= 1";
    if (o->image_size < 1 || o->image_size > 8192) return "image size must be in [1, 8192]";
    if (o->threads < 0 || o->threads > 1024) return "threads must be in [0, 1024]";
    if (o->prefetch < 2 || o->prefetch > 1024) return "prefetch must be in [2, 1024]";
    if (o->world < 1 || o->rank < 0 || o->rank >= o->world) return "rank must be in [0, world)";
    if (o->last_batch != TB_LAST_KEEP && o->last_batch != TB_LAST_DROP && o->last_batch != TB_LAST_PAD)
        return "unknown last-batch rule";
    if (tb_shard_steps(o->ds->n, o->world, o->batch, o->last_batch) < 1)
        return "the data set has fewer samples than world x batch, so dropping the remainder leaves no step";
    if (o->format != TB_OUT_F32_NCHW && o->format != TB_OUT_F32_NHWC && o->format != TB_OUT_U8_NHWC)
        return "unknown output format";
    if (o->decode != TB_DECODE_FAST && o->decode != TB_DECODE_PARTIAL && o->decode != TB_DECODE_FULL &&
        o->decode != TB_DECODE_FAST_ALL && o->decode != TB_DECODE_GPU)
        return "unknown decode mode";
    if (o->decode == TB_DECODE_GPU && (o->format != TB_OUT_U8_NHWC || !o->gpu_flip))
        return "--decode gpu makes uint8 NHWC batches with the flip left to the device";
    if (o->gpu_flip && o->format != TB_OUT_U8_NHWC) return "deferring the flip to the device needs the uint8 NHWC output";
    if ((o->host_alloc == NULL) != (o->host_free == NULL)) return "host_alloc and host_free go together";
    if (o->gpu_stages < 0 || o->gpu_stages > 16) return "GPU stages must be in [0, 16] (0: the default)";
    return NULL;
}

/* The ring's memory: images (on the device with --decode gpu, with host
 * rows for what the CPU renders), labels, flips; 0, or -1 with err set. */
static int alloc_slots(tb_loader *ld, char *err, size_t errlen) {
    const tb_loader_opts *o = &ld->o;
    if (!ld->gpu) { /* host slots the workers write later: a ring the host cannot hold would meet the OOM killer
                       there, with no word, not a failed malloc here (core/host_memory.h) */
        long long ring = (long long)tb_loader_ring_bytes(o->format, o->image_size, o->batch, ld->nslots, o->gpu_flip);
        tb_host_avail a;
        tb_host_memory_available_here(o->rank, &a);
        char why[512];
        if (tb_host_memory_short(ring, 1, "", &a, why, sizeof why)) {
            snprintf(err, errlen, "loader: a ring of %d batch slots of %d samples at %dx%d %s; lower --prefetch or "
                     "--batch-size",
                     ld->nslots, o->batch, o->image_size, o->image_size, why);
            return -1;
        }
    }
    for (int i = 0; i < ld->nslots; i++) {
        size_t bytes = ld->sample_bytes * (size_t)o->batch;
        slot *sl = &ld->slots[i];
        tb_batch *b = &sl->b;
        b->slot = i;
        if (ld->gpu) { /* the batch on the device; rows rendered here go up from host_images */
            b->images = tb_gpu_decoder_alloc(ld->gpu, bytes);
            b->on_device = 1;
            sl->host_images = tb_gpu_decoder_host_alloc(ld->gpu, bytes); /* pinned: see gpu_decode.h */
            sl->jobs = calloc((size_t)o->batch, sizeof *sl->jobs);
            sl->spill = calloc((size_t)o->batch, sizeof *sl->spill);
            sl->kind = calloc((size_t)o->batch, 1);
            sl->cand = calloc((size_t)o->batch, sizeof *sl->cand);
            if (!sl->jobs || !sl->spill || !sl->kind || !sl->cand) TB_FATAL("out of host memory");
        } else {
            b->images = o->host_alloc(o->host_ctx, bytes);
        }
        b->labels = o->host_alloc(o->host_ctx, (size_t)o->batch * sizeof(int32_t));
        if (o->gpu_flip) b->flip = o->host_alloc(o->host_ctx, (size_t)o->batch);
        if (!b->images || !b->labels || (o->gpu_flip && !b->flip) || (ld->gpu && !sl->host_images)) {
            snprintf(err, errlen, "loader: cannot allocate %d batch slots of %.1f MB; lower --prefetch or --batch-size",
                     ld->nslots, (double)bytes / 1048576.0);
            return -1;
        }
    }
    return 0;
}

/* The timeline's tracks (loader_internal.h). */
static void name_tracks(tb_loader *ld) {
    char name[64];
    for (int t = 0; t < ld->o.threads && !ld->o.inline_decode; t++) {
        snprintf(name, sizeof name, "worker %d", t);
        tb_timeline_name_track(ld->tl, t, name);
    }
    for (int k = 0; k < ld->ngpu && !ld->o.inline_decode; k++) {
        snprintf(name, sizeof name, "GPU stage %d (host)", k);
        tb_timeline_name_track(ld->tl, loader_track_gpu_host(ld, k), name);
        snprintf(name, sizeof name, "GPU stage %d (device)", k);
        tb_timeline_name_track(ld->tl, loader_track_gpu_device(ld, k), name);
    }
    int c = loader_track_consumer(ld);
    tb_timeline_name_track(ld->tl, c, ld->o.inline_decode ? "consumer (decodes inline)" : "consumer");
    if (ld->o.inline_decode && ld->gpu) tb_timeline_name_track(ld->tl, c + ld->ngpu, "consumer's GPU stage (device)");
}

/* The worker threads, the GPU stage threads, or the inline worker. */
static void start_threads(tb_loader *ld) {
    if (ld->o.inline_decode) {
        ld->inline_w = tb_loader_worker_new(ld, loader_track_consumer(ld));
        ld->inline_w->gpu = ld->gpu;
        return;
    }
    if (ld->gpu) {
        ld->gpu_threads = calloc((size_t)ld->ngpu, sizeof *ld->gpu_threads);
        ld->gpu_ws = calloc((size_t)ld->ngpu, sizeof *ld->gpu_ws);
        if (!ld->gpu_threads || !ld->gpu_ws) TB_FATAL("out of host memory");
        for (int k = 0; k < ld->ngpu; k++) {
            ld->gpu_ws[k] = tb_loader_worker_new(ld, loader_track_gpu_host(ld, k));
            ld->gpu_ws[k]->gpu = ld->gpus[k];
            tb_thread_start(&ld->gpu_threads[k], NULL, tb_loader_gpu_main, ld->gpu_ws[k],
                            "a loader's GPU decode thread");
            ld->gpu_started++;
        }
    }
    ld->threads = calloc((size_t)ld->o.threads, sizeof *ld->threads);
    if (!ld->threads) TB_FATAL("out of host memory");
    for (int t = 0; t < ld->o.threads; t++) {
        worker *w = tb_loader_worker_new(ld, t);
        tb_thread_start(&ld->threads[t], NULL, worker_main, w, "a loader worker thread");
        ld->nthreads++;
    }
}

tb_loader *tb_loader_create(const tb_loader_opts *o, char *err, size_t errlen) {
    const char *bad = invalid(o);
    if (bad) {
        snprintf(err, errlen, "loader: %s", bad);
        return NULL;
    }
    tb_loader *ld = calloc(1, sizeof *ld);
    if (!ld) TB_FATAL("out of host memory");
    ld->o = *o;
    if (!ld->o.host_alloc) {
        ld->o.host_alloc = plain_alloc;
        ld->o.host_free = plain_free;
    }
    if (ld->o.threads == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        ld->o.threads = c < 1 ? 1 : (int)c;
    }
    ld->n = o->ds->n;
    ld->steps = tb_shard_steps(ld->n, o->world, o->batch, o->last_batch);
    ld->sample_bytes = tb_sample_bytes(o->format, o->image_size);
    ld->nslots = o->prefetch;
    ld->slots = calloc((size_t)ld->nslots, sizeof *ld->slots);
    ld->order = malloc((size_t)ld->n * sizeof *ld->order);
    ld->known_bad = calloc((size_t)ld->n, sizeof *ld->known_bad);
    if (!ld->slots || !ld->order || !ld->known_bad) TB_FATAL("out of host memory");
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->work, NULL);
    pthread_cond_init(&ld->ready, NULL);
    pthread_cond_init(&ld->idle, NULL);
    pthread_cond_init(&ld->gpu_cond, NULL);
    if (o->decode == TB_DECODE_GPU) {
        if (tb_loader_gpu_create(ld, err, errlen) != 0) {
            tb_loader_destroy(ld);
            return NULL;
        }
    } else {
        snprintf(ld->decoder_desc, sizeof ld->decoder_desc, "%s (CPU)", tb_jpeg_version());
    }
    if (alloc_slots(ld, err, errlen) != 0) {
        tb_loader_destroy(ld);
        return NULL;
    }
    if (o->timeline_events > 0) {
        ld->tl = tb_timeline_create(o->timeline_events);
        name_tracks(ld);
    }
    ld->fill_step = ld->steps; /* nothing to do before the first epoch */
    start_threads(ld);
    return ld;
}

int64_t tb_loader_steps_per_epoch(const tb_loader *ld) { return ld->steps; }

size_t tb_loader_ring_bytes(tb_out_format format, int image_size, int batch, int slots, int gpu_flip) {
    size_t per = tb_sample_bytes(format, image_size) * (size_t)batch + (size_t)batch * (sizeof(int32_t) + !!gpu_flip);
    return per * (size_t)slots;
}

size_t tb_loader_host_bytes_unwritten(const tb_loader *ld) {
    if (ld->gpu || ld->o.host_alloc != plain_alloc) return 0;
    return tb_loader_ring_bytes(ld->o.format, ld->o.image_size, ld->o.batch, ld->nslots, ld->o.gpu_flip);
}

void tb_loader_start_epoch(tb_loader *ld, int64_t epoch, int64_t first_step) {
    if (first_step < 0 || first_step > ld->steps)
        TB_FATAL("tb_loader_start_epoch: first step %lld outside [0, %lld]", (long long)first_step,
                 (long long)ld->steps);
    pthread_mutex_lock(&ld->mu);
    ld->gen++;
    ld->fill_step = ld->steps; /* hand out nothing more of the old epoch */
    ld->fill_j = 0;
    while (ld->inflight > 0 || ld->gpu_busy > 0) pthread_cond_wait(&ld->idle, &ld->mu);
    for (int i = 0; i < ld->nslots; i++) {
        if (ld->slots[i].staging) /* the count said idle: a stage would now race the new epoch */
            TB_FATAL("tb_loader_start_epoch: slot %d is still in a GPU stage with %d counted busy", i, ld->gpu_busy);
        if (ld->slots[i].state == SLOT_HELD)
            TB_FATAL("tb_loader_start_epoch: batch of step %lld is still held; release it first",
                     (long long)ld->slots[i].b.step);
        if (ld->slots[i].fenced) { /* a batch of the old epoch never handed out: its device work ends first */
            tb_gpu_fence_sync(ld->slots[i].fence);
            ld->slots[i].fenced = 0;
        }
        ld->slots[i].state = SLOT_FREE;
    }
    make_order(ld, epoch);
    ld->epoch = epoch;
    ld->next_out = first_step;
    ld->fill_step = first_step;
    ld->epoch_started = 1;
    pthread_cond_broadcast(&ld->work);
    pthread_mutex_unlock(&ld->mu);
}

const tb_batch *tb_loader_next(tb_loader *ld) {
    pthread_mutex_lock(&ld->mu);
    if (!ld->epoch_started) TB_FATAL("tb_loader_next before tb_loader_start_epoch");
    if (ld->next_out >= ld->steps) {
        pthread_mutex_unlock(&ld->mu);
        return NULL;
    }
    slot *s = &ld->slots[ld->next_out % ld->nslots];
    if (s->state == SLOT_HELD)
        TB_FATAL("tb_loader_next: all %d batch slots are held; release a batch first", ld->nslots);
    double t0 = tb_now();
    int waited = 0;
    while (!(s->state == SLOT_READY && s->b.step == ld->next_out)) {
        task t;
        if (ld->inline_w && s->state == SLOT_DECODE) /* no workers: the GPU stage here too */
            tb_loader_run_gpu_stage(ld, ld->inline_w, s);
        else if (ld->inline_w && take_task(ld, &t)) /* no workers: decode here */
            run_task(ld->inline_w, &t);
        else {
            if (!waited) tb_nvtx_push(tb_loader_stage_name(TB_STAGE_NEXT_WAIT), tb_loader_stage_color(TB_STAGE_NEXT_WAIT));
            waited = 1;
            pthread_cond_wait(&ld->ready, &ld->mu);
        }
    }
    double t1 = tb_now();
    if (waited) tb_nvtx_pop();
    s->state = SLOT_HELD;
    s->ordered = 0;
    s->b.wait_s = t1 - t0;
    /* the consumer's wait (with inline decode: its decoding, in the stages it ran) */
    if (!ld->inline_w) {
        ld->stats.stage_s[TB_STAGE_NEXT_WAIT] += t1 - t0;
        ld->stats.stage_n[TB_STAGE_NEXT_WAIT]++;
        if (ld->tl) tb_timeline_add(ld->tl, loader_track_consumer(ld), TB_STAGE_NEXT_WAIT, s->b.step, t0, t1);
    }
    ld->next_out++;
    pthread_mutex_unlock(&ld->mu);
    return &s->b;
}

int tb_loader_try_next(tb_loader *ld, const tb_batch **b) {
    pthread_mutex_lock(&ld->mu);
    if (!ld->epoch_started) TB_FATAL("tb_loader_try_next before tb_loader_start_epoch");
    int rc = 0;
    if (ld->next_out >= ld->steps) {
        rc = -1;
    } else {
        slot *s = &ld->slots[ld->next_out % ld->nslots];
        if (s->state == SLOT_READY && s->b.step == ld->next_out) {
            s->state = SLOT_HELD;
            s->ordered = 0;
            s->b.wait_s = 0;
            ld->next_out++;
            *b = &s->b;
            rc = 1;
        }
    }
    pthread_mutex_unlock(&ld->mu);
    return rc;
}

int tb_loader_slots(const tb_loader *ld) { return ld->nslots; }

void tb_loader_release(tb_loader *ld, const tb_batch *b) {
    pthread_mutex_lock(&ld->mu);
    slot *s = NULL;
    for (int i = 0; i < ld->nslots; i++)
        if (&ld->slots[i].b == b) s = &ld->slots[i];
    if (!s || s->state != SLOT_HELD) TB_FATAL("tb_loader_release: not a batch handed out by this loader");
    if (s->fenced && !s->ordered) {
        /* nobody ordered on its device work: wait for it before the workers
         * refill the slot (its files and host rows, which that work reads) */
        pthread_mutex_unlock(&ld->mu);
        tb_gpu_fence_sync(s->fence);
        pthread_mutex_lock(&ld->mu);
        ld->stats.gpu_release_syncs++;
    }
    s->fenced = 0;
    s->state = SLOT_FREE;
    pthread_cond_broadcast(&ld->work);
    pthread_mutex_unlock(&ld->mu);
}

/* The slot of batch b handed out now (mutex held). */
static slot *held_slot(tb_loader *ld, const tb_batch *b, const char *who) {
    if (b->slot < 0 || b->slot >= ld->nslots || &ld->slots[b->slot].b != b || ld->slots[b->slot].state != SLOT_HELD)
        TB_FATAL("%s: not a batch handed out by this loader", who);
    return &ld->slots[b->slot];
}

void tb_loader_batch_order(tb_loader *ld, const tb_batch *b, void *stream) {
    pthread_mutex_lock(&ld->mu);
    slot *s = held_slot(ld, b, "tb_loader_batch_order");
    if (s->fenced) {
        tb_gpu_fence_order(s->fence, stream);
        s->ordered = 1;
        ld->stats.gpu_orders++;
    }
    pthread_mutex_unlock(&ld->mu);
}

void tb_loader_batch_sync(tb_loader *ld, const tb_batch *b) {
    pthread_mutex_lock(&ld->mu);
    slot *s = held_slot(ld, b, "tb_loader_batch_sync");
    int fenced = s->fenced;
    pthread_mutex_unlock(&ld->mu);
    if (!fenced) return;
    tb_gpu_fence_sync(s->fence);
    pthread_mutex_lock(&ld->mu);
    s->ordered = 1; /* done: nothing left to wait for */
    ld->stats.gpu_syncs++;
    pthread_mutex_unlock(&ld->mu);
}

void tb_loader_get_stats(const tb_loader *ld, tb_loader_stats *st) {
    tb_loader *l = (tb_loader *)ld; /* the mutex, not the state, changes */
    pthread_mutex_lock(&l->mu);
    *st = ld->stats;
    /* gpu_stage_s as the integral of busy stages up to now: the stages still
     * running count their time so far, so the difference of two snapshots
     * is the busy time inside that window, not the whole time of each stage
     * that ended in it (which put a short row's busy share over 100 %) */
    double now = tb_now();
    st->at_s = now;
    for (int i = 0; i < ld->nslots; i++)
        if (ld->slots[i].staging) st->gpu_stage_s += now - ld->slots[i].stage_t0;
    pthread_mutex_unlock(&l->mu);
}

void tb_loader_stage_split(const tb_loader_stats *s0, const tb_loader_stats *s1, int stages, double *ms_per_batch,
                           double *busy_pct) {
    int64_t staged = s1->gpu_batches - s0->gpu_batches;
    double busy_s = s1->gpu_stage_s - s0->gpu_stage_s, window_s = s1->at_s - s0->at_s;
    *ms_per_batch = *busy_pct = NAN;
    if (stages <= 0) return;
    if (staged > 0) *ms_per_batch = busy_s * 1e3 / (double)staged;
    if (window_s > 0) *busy_pct = 100.0 * busy_s / (window_s * stages);
}

void tb_loader_stage_ms(const tb_loader_stats *s0, const tb_loader_stats *s1, int64_t batches,
                        double ms[TB_STAGE_COUNT]) {
    for (int k = 0; k < TB_STAGE_COUNT; k++)
        ms[k] = batches > 0 ? (s1->stage_s[k] - s0->stage_s[k]) * 1e3 / (double)batches : NAN;
}

void tb_loader_memory(const tb_loader *ld, int64_t *device_bytes, int64_t *pinned_bytes) {
    *device_bytes = *pinned_bytes = 0;
    for (int k = 0; ld->gpus && k < ld->ngpu; k++) {
        int64_t d = 0, p = 0;
        tb_gpu_decoder_memory(ld->gpus[k], &d, &p);
        *device_bytes += d;
        *pinned_bytes += p;
    }
}

int tb_loader_timeline_write(const tb_loader *ld, const char *path, const char *title, char *err, size_t errlen) {
    if (!ld->tl) {
        snprintf(err, errlen, "the loader keeps no timeline (timeline_events = 0)");
        return -1;
    }
    return tb_timeline_write_json(ld->tl, path, title, err, errlen);
}

const tb_timeline *tb_loader_timeline(const tb_loader *ld) { return ld->tl; }

const char *tb_loader_decoder(tb_loader *ld) {
    if (ld->ngpu) tb_loader_gpu_describe(ld);
    return ld->decoder_desc;
}

int64_t tb_loader_bad_samples(const tb_loader *ld, int64_t *out, int64_t cap) {
    int64_t k = 0;
    for (int64_t i = 0; i < ld->n; i++)
        if (atomic_load_explicit(&ld->known_bad[i], memory_order_relaxed) & 2) {
            if (out && k < cap) out[k] = i;
            k++;
        }
    return k;
}

int tb_loader_gpu_stages(const tb_loader *ld) { return ld->ngpu; }

void tb_loader_destroy(tb_loader *ld) {
    if (!ld) return;
    if (ld->nthreads || ld->gpu_started) {
        pthread_mutex_lock(&ld->mu);
        ld->stop = 1;
        pthread_cond_broadcast(&ld->work);
        pthread_cond_broadcast(&ld->gpu_cond);
        pthread_mutex_unlock(&ld->mu);
    }
    for (int t = 0; t < ld->nthreads; t++) {
        void *ret;
        pthread_join(ld->threads[t], &ret);
        (void)ret;
    }
    for (int k = 0; k < ld->gpu_started; k++) pthread_join(ld->gpu_threads[k], NULL);
    free(ld->threads);
    free(ld->gpu_threads);
    tb_loader_worker_free(ld->inline_w);
    for (int k = 0; ld->gpu_ws && k < ld->ngpu; k++) tb_loader_worker_free(ld->gpu_ws[k]);
    free(ld->gpu_ws);
    for (int i = 0; ld->slots && i < ld->nslots; i++) {
        slot *sl = &ld->slots[i];
        tb_batch *b = &sl->b;
        if (sl->fenced) { /* a batch never handed out: its copies and kernels end before its memory goes */
            tb_gpu_fence_sync(sl->fence);
            sl->fenced = 0;
        }
        if (b->images) {
            if (b->on_device) tb_gpu_decoder_free(ld->gpu, b->images);
            else ld->o.host_free(ld->o.host_ctx, b->images);
        }
        if (b->labels) ld->o.host_free(ld->o.host_ctx, b->labels);
        if (b->flip) ld->o.host_free(ld->o.host_ctx, b->flip);
        if (sl->host_images) tb_gpu_decoder_host_free(ld->gpu, sl->host_images);
        for (int j = 0; sl->spill && j < ld->o.batch; j++) free(sl->spill[j]);
        free(sl->spill);
        free(sl->arena);
        free(sl->jobs);
        free(sl->kind);
        free(sl->cand);
        tb_gpu_fence_destroy(sl->fence);
    }
    /* every stage joined and every slot's device memory given back (to
     * gpus[0], which gave it): now the decoders */
    for (int k = 0; ld->gpus && k < ld->ngpu; k++) tb_gpu_decoder_destroy(ld->gpus[k]);
    free(ld->gpus);
    pthread_mutex_destroy(&ld->mu);
    pthread_cond_destroy(&ld->work);
    pthread_cond_destroy(&ld->ready);
    pthread_cond_destroy(&ld->idle);
    pthread_cond_destroy(&ld->gpu_cond);
    tb_timeline_destroy(ld->tl);
    free(ld->slots);
    free(ld->order);
    free(ld->known_bad);
    free(ld);
}
