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
 * --decode gpu: a slot whose samples are all made (files read and checked,
 * crop boxes drawn, CPU-only codings rendered) waits in SLOT_DECODE for a
 * GPU stage: gpu_stages threads (default 2), each with its own decoder
 * (nvJPEG handle, state and CUDA stream: data/gpu_decode.h), take the
 * lowest step waiting, so that one batch's decode overlaps the next one's
 * and the step's kernels; with inline decode the caller's thread runs the
 * one stage. What a batch holds does not depend on which stage runs it or
 * when: the samples and fallbacks are fixed by the epoch's order and each
 * sample's draws, the stage only renders them. The slots' device memory
 * comes from the first decoder, which frees it. */
#include "data/loader.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/gpu_decode.h"
#include "data/jpeg.h"
#include "data/shard.h"
#include "data/transform.h"
#include "src/core/log.h"
#include "src/core/rng.h"
#include "src/core/timer.h"

/* FILLING -> (GPU decode: DECODE -> GPU ->) READY -> HELD -> FREE */
typedef enum { SLOT_FREE, SLOT_FILLING, SLOT_DECODE, SLOT_GPU, SLOT_READY, SLOT_HELD } slot_state;

enum { KIND_HOST = 0, KIND_GPU = 1 }; /* --decode gpu: how sample j of a slot is made */

typedef struct {
    tb_batch b;          /* what the consumer sees; images/labels point into this slot */
    slot_state state;
    int64_t start;       /* global position of sample 0 of this step (in the epoch order) */
    int64_t epoch;       /* the epoch it is filled for */
    int64_t gen;         /* the loader generation it is filled in */
    int staging;         /* 1 while a GPU stage runs on it (ld->gpu_busy counts them) */
    double stage_t0;     /* when that stage began (tb_now): tb_loader_get_stats counts its time so far */
    int done;            /* samples finished */
    /* --decode gpu */
    uint8_t *host_images;   /* [batch,S,S,3] rows the CPU rendered, copied up by the GPU stage */
    tb_gpu_job *jobs;       /* [batch] sample j's GPU job (kind[j] == KIND_GPU) */
    uint8_t **files;        /* [batch] the job's file bytes */
    size_t *file_caps;      /* [batch] */
    uint8_t *kind;          /* [batch] KIND_* */
    int64_t *cand;          /* [batch] the candidate of the epoch order the job is (0: the sample itself) */
} slot;

typedef struct {
    int64_t gen;         /* epoch generation the task belongs to */
    slot *s;
    int j;               /* sample within the batch */
} task;

struct tb_loader {
    tb_loader_opts o;
    int64_t n;                 /* samples in the data set */
    int64_t steps;             /* steps per epoch */
    size_t sample_bytes;
    slot *slots;               /* [prefetch] */
    int nslots;
    int64_t *order;            /* [n] the epoch's global order */
    atomic_uchar *known_bad;   /* [n] 1: unreadable whatever the crop */
    int64_t epoch;
    int64_t next_out;          /* step tb_loader_next hands out next */
    int64_t fill_step;         /* step whose samples are being handed to workers */
    int fill_j;                /* next sample of fill_step */
    int64_t gen;
    int epoch_started, stop, inflight;
    pthread_mutex_t mu;
    pthread_cond_t work, ready, idle;
    pthread_t *threads;
    int nthreads;
    struct worker *inline_w;   /* inline_decode: the caller's decoding state */
    tb_gpu_decoder **gpus;     /* --decode gpu: [ngpu] one decoder per GPU stage; gpus[0] also
                                  allocates and frees the slots' device memory */
    tb_gpu_decoder *gpu;       /* gpus[0]; NULL: CPU decode */
    int ngpu;                  /* GPU stages */
    pthread_t *gpu_threads;    /* [ngpu] the GPU stages (worker threads only) */
    struct worker **gpu_ws;    /* [ngpu] their state (decoder, CPU fallback renders) */
    int gpu_started;           /* GPU-stage threads running */
    int gpu_busy;              /* GPU stages running now */
    pthread_cond_t gpu_cond;   /* a slot reached SLOT_DECODE, or stop */
    char decoder_desc[640];
    tb_loader_stats stats;
};

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

/* ---- one sample ------------------------------------------------------------------- */

typedef struct worker {
    tb_loader *ld;
    tb_sampler *sp;
    uint8_t *file;
    size_t file_cap;
    uint8_t *rgbx;             /* [S][S][4] */
    tb_loader_stats acc;       /* merged into ld->stats after each sample */
    tb_gpu_job *jobs;          /* GPU stage: [batch] the slot's jobs, compacted */
    int *rows;                 /* GPU stage: [batch] */
    tb_gpu_decoder *gpu;       /* GPU stage: the decoder it runs (its own) */
} worker;

static double rng_uniform(void *ctx) { return tb_rng_uniform((tb_rng *)ctx); }

/* Reads a whole file into w->file; 0, or -1 with the reason in err. */
static int read_file(worker *w, const char *path, size_t *len, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "not a regular file");
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    if (size + 1 > w->file_cap) {
        free(w->file);
        w->file_cap = size + size / 4 + 1;
        w->file = malloc(w->file_cap);
        if (!w->file) TB_FATAL("out of host memory (%zu bytes) reading %s", w->file_cap, path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t k = read(fd, w->file + got, size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            snprintf(err, errlen, "read error: %s", k < 0 ? strerror(errno) : "file shrank");
            close(fd);
            return -1;
        }
        got += (size_t)k;
    }
    close(fd);
    *len = size;
    return 0;
}

static void note_bad(tb_loader_stats *st, const char *path, const char *why) {
    for (int k = 0; k < 3; k++)
        if (st->first_bad[k][0] == '\0') {
            snprintf(st->first_bad[k], sizeof st->first_bad[k], "%.380s: %.120s", path, why);
            break;
        }
}

/* Keeps the file bytes of sample j's GPU job in the slot. */
static const uint8_t *keep_file(slot *s, int j, const uint8_t *file, size_t len) {
    if (len > s->file_caps[j]) {
        free(s->files[j]);
        s->file_caps[j] = len + len / 4;
        s->files[j] = malloc(s->file_caps[j]);
        if (!s->files[j]) TB_FATAL("out of host memory (%zu bytes) keeping a JPEG for the GPU", len);
    }
    memcpy(s->files[j], file, len);
    return s->files[j];
}

/* Produces sample j of a step that starts at global position `start`:
 * decodes order[(start + j + k) mod n] for k = k0, k0 + 1, ... until one
 * decodes (k = 0: the sample itself; positions past n are --last-batch
 * pad's repeats from the start of the order). Writes the image and label
 * into the slot. A replaced sample counts once in `skipped` (when k = 0 is
 * bad), however many bad candidates follow it. With --decode gpu and
 * allow_gpu, a candidate whose checks pass and whose coding the GPU takes
 * becomes a GPU job instead of being rendered here (the GPU stage decodes
 * it, or calls this again with allow_gpu = 0 from that candidate). */
static void make_sample_from(worker *w, int64_t epoch, slot *s, int j, int64_t k0, int allow_gpu) {
    tb_loader *ld = w->ld;
    const tb_dataset *ds = ld->o.ds;
    const int S = ld->o.image_size;
    const tb_decode_mode cpu_mode = ld->gpu ? TB_DECODE_PARTIAL : ld->o.decode;
    char path[4096], err[600];
    for (int64_t k = k0; k < ld->n; k++) {
        int64_t sample = ld->order[(s->start + j + k) % ld->n];
        if (atomic_load_explicit(&ld->known_bad[sample], memory_order_relaxed)) { /* named when first found */
            w->acc.skipped += k == 0;
            continue;
        }
        tb_dataset_path(ds, sample, path, sizeof path);
        double t0 = tb_now();
        size_t len = 0;
        int rc = TB_RENDER_BAD_FILE;
        tb_render_info info;
        memset(&info, 0, sizeof info);
        if (read_file(w, path, &len, err, sizeof err) == 0) {
            tb_rng r;
            tb_rng_seed(&r, ld->o.seed, tb_hash2((uint64_t)epoch, (uint64_t)sample));
            if (ld->gpu && allow_gpu) {
                /* the CPU path's checks and draws; the GPU decodes what it takes */
                tb_sample_plan_info pi;
                rc = tb_sample_plan(w->sp, w->file, len, ld->o.train, S, rng_uniform, &r, NULL, &pi, err, sizeof err);
                if (rc == 0 && tb_gpu_decodable(&pi.fmt, NULL, 0)) {
                    tb_gpu_job *job = &s->jobs[j];
                    memset(job, 0, sizeof *job);
                    job->jpeg = keep_file(s, j, w->file, len);
                    job->len = len;
                    job->width = pi.width;
                    job->height = pi.height;
                    job->g = pi.g;
                    job->g.flip = 0;
                    job->row = j;
                    s->b.flip[j] = (uint8_t)pi.g.flip;
                    s->kind[j] = KIND_GPU;
                    s->cand[j] = k;
                    s->b.labels[j] = ds->labels[sample];
                    w->acc.images++;
                    w->acc.bytes_read += (int64_t)len;
                    w->acc.decode_s += tb_now() - t0;
                    return;
                }
                if (rc == 0) { /* a coding the GPU path does not take: rendered here, same geometry */
                    w->acc.gpu_to_cpu++;
                    rc = tb_sample_render(w->sp, w->file, len, cpu_mode, ld->o.train, S, NULL, NULL, &pi.g, w->rgbx,
                                          &info, err, sizeof err);
                }
            } else {
                rc = tb_sample_render(w->sp, w->file, len, cpu_mode, ld->o.train, S, rng_uniform, &r, NULL, w->rgbx,
                                      &info, err, sizeof err);
            }
        }
        if (rc != 0) {
            if (ld->o.strict) tb_die("bad sample %s: %s (--strict-data makes bad files fatal)", path, err);
            if (rc == TB_RENDER_BAD_FILE) atomic_store_explicit(&ld->known_bad[sample], 1, memory_order_relaxed);
            w->acc.skipped += k == 0;
            note_bad(&w->acc, path, err);
            continue;
        }
        double t1 = tb_now();
        tb_sample_store(w->rgbx, S, ld->o.format, s->host_images ? s->host_images : s->b.images, j);
        if (s->kind) s->kind[j] = KIND_HOST;
        if (s->b.flip) s->b.flip[j] = (uint8_t)info.flip;
        s->b.labels[j] = ds->labels[sample];
        w->acc.images++;
        w->acc.bytes_read += (int64_t)len;
        w->acc.decode_s += (t1 - t0) - info.resize_s;
        w->acc.resize_s += info.resize_s + (tb_now() - t1);
        return;
    }
    tb_die("no sample of %s decodes (%lld bad files); first: %s", ds->root, (long long)w->acc.skipped,
           w->acc.first_bad[0][0] ? w->acc.first_bad[0] : ld->stats.first_bad[0]);
}

static void make_sample(worker *w, int64_t epoch, slot *s, int j) { make_sample_from(w, epoch, s, j, 0, 1); }

/* --decode gpu, once every sample of the slot is made: the GPU decodes and
 * resizes the jobs and takes up the rows rendered here; a job it cannot do
 * goes back to the CPU path from the same candidate (which may replace it,
 * exactly as without the GPU). Runs without the mutex, with w's own
 * decoder. */
static void gpu_stage(worker *w, slot *s) {
    int nj = 0, nh = 0;
    for (int j = 0; j < s->b.n; j++) {
        if (s->kind[j] == KIND_GPU) w->jobs[nj++] = s->jobs[j];
        else w->rows[nh++] = j;
    }
    double t0 = tb_now();
    tb_gpu_decode_batch(w->gpu, w->jobs, nj, s->b.images, s->host_images, w->rows, nh);
    w->acc.decode_s += tb_now() - t0;
    int nf = 0;
    for (int i = 0; i < nj; i++) {
        if (w->jobs[i].status == 0) {
            w->acc.gpu_decoded++;
            continue;
        }
        int j = w->jobs[i].row;
        w->acc.images--; /* counted again by the CPU path */
        w->acc.bytes_read -= (int64_t)w->jobs[i].len;
        w->acc.gpu_to_cpu++;
        make_sample_from(w, s->epoch, s, j, s->cand[j], 0);
        w->rows[nf++] = j;
    }
    if (nf > 0) tb_gpu_decode_batch(w->gpu, NULL, 0, s->b.images, s->host_images, w->rows, nf);
}

static void merge_stats(tb_loader_stats *into, tb_loader_stats *from) {
    into->images += from->images;
    into->bytes_read += from->bytes_read;
    into->skipped += from->skipped;
    into->gpu_decoded += from->gpu_decoded;
    into->gpu_to_cpu += from->gpu_to_cpu;
    into->decode_s += from->decode_s;
    into->resize_s += from->resize_s;
    into->gpu_batches += from->gpu_batches;
    into->gpu_stage_s += from->gpu_stage_s;
    for (int k = 0; k < 3 && from->first_bad[k][0]; k++)
        for (int m = 0; m < 3; m++)
            if (into->first_bad[m][0] == '\0') {
                memcpy(into->first_bad[m], from->first_bad[k], sizeof into->first_bad[m]);
                break;
            }
    memset(from, 0, sizeof *from);
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
    pthread_mutex_unlock(&ld->mu);

    make_sample(w, epoch, t->s, t->j);

    pthread_mutex_lock(&ld->mu);
    merge_stats(&ld->stats, &w->acc);
    ld->inflight--;
    if (t->gen == ld->gen && ++t->s->done == t->s->b.n) {
        t->s->state = ld->gpu ? SLOT_DECODE : SLOT_READY;
        pthread_cond_broadcast(ld->gpu ? &ld->gpu_cond : &ld->ready);
    }
    if (ld->inflight == 0) pthread_cond_broadcast(&ld->idle);
}

static worker *worker_new(tb_loader *ld) {
    worker *w = calloc(1, sizeof *w);
    if (!w) TB_FATAL("out of host memory");
    w->ld = ld;
    w->sp = tb_sampler_create();
    tb_sampler_defer_flip(w->sp, ld->o.gpu_flip);
    w->rgbx = malloc((size_t)4 * ld->o.image_size * ld->o.image_size);
    w->jobs = calloc((size_t)ld->o.batch, sizeof *w->jobs);
    w->rows = calloc((size_t)ld->o.batch, sizeof *w->rows);
    if (!w->rgbx || !w->jobs || !w->rows) TB_FATAL("out of host memory");
    return w;
}

static void worker_free(worker *w) {
    if (!w) return;
    tb_sampler_destroy(w->sp);
    free(w->file);
    free(w->rgbx);
    free(w->jobs);
    free(w->rows);
    free(w);
}

/* The slot of the lowest step waiting for its GPU stage, or NULL (mutex
 * held). Slots of a generation that start_epoch is dropping wait there
 * for it to free them: nobody decodes them. */
static slot *next_for_gpu(tb_loader *ld) {
    slot *best = NULL;
    for (int i = 0; i < ld->nslots; i++) {
        slot *s = &ld->slots[i];
        if (s->state == SLOT_DECODE && s->gen == ld->gen && (!best || s->b.step < best->b.step)) best = s;
    }
    return best;
}

/* Runs slot s's GPU stage with w and its decoder (mutex held on entry and
 * return). Several run at once, on different slots. */
static void run_gpu_stage(tb_loader *ld, worker *w, slot *s) {
    int64_t gen = ld->gen;
    s->state = SLOT_GPU;
    s->staging = 1;
    if (++ld->gpu_busy > ld->stats.gpu_stage_max) ld->stats.gpu_stage_max = ld->gpu_busy;
    double t0 = s->stage_t0 = tb_now();
    pthread_mutex_unlock(&ld->mu);
    gpu_stage(w, s);
    pthread_mutex_lock(&ld->mu);
    /* the stage's end read under the lock that clears `staging`: a snapshot
     * in between would count more time for it than is merged here */
    w->acc.gpu_stage_s += tb_now() - t0;
    w->acc.gpu_batches++;
    merge_stats(&ld->stats, &w->acc);
    s->staging = 0;
    ld->gpu_busy--;
    if (gen == ld->gen && s->state == SLOT_GPU) {
        s->state = SLOT_READY;
        pthread_cond_broadcast(&ld->ready);
    }
    pthread_cond_broadcast(&ld->idle);
}

static void *gpu_main(void *arg) {
    worker *w = arg;
    tb_loader *ld = w->ld;
    pthread_mutex_lock(&ld->mu);
    while (!ld->stop) {
        slot *s = next_for_gpu(ld);
        if (!s) {
            pthread_cond_wait(&ld->gpu_cond, &ld->mu);
            continue;
        }
        run_gpu_stage(ld, w, s);
    }
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    tb_loader *ld = w->ld;
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
    worker_free(w);
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

tb_loader *tb_loader_create(const tb_loader_opts *opts, char *err, size_t errlen) {
    const tb_loader_opts *o = opts;
    const char *bad = NULL;
    if (!o->ds || o->ds->n <= 0) bad = "the data set has no samples";
    else if (o->batch < 1) bad = "batch must be >= 1";
    else if (o->image_size < 1 || o->image_size > 8192) bad = "image size must be in [1, 8192]";
    else if (o->threads < 0 || o->threads > 1024) bad = "threads must be in [0, 1024]";
    else if (o->prefetch < 2 || o->prefetch > 1024) bad = "prefetch must be in [2, 1024]";
    else if (o->world < 1 || o->rank < 0 || o->rank >= o->world) bad = "rank must be in [0, world)";
    else if (o->last_batch != TB_LAST_KEEP && o->last_batch != TB_LAST_DROP && o->last_batch != TB_LAST_PAD)
        bad = "unknown last-batch rule";
    else if (tb_shard_steps(o->ds->n, o->world, o->batch, o->last_batch) < 1)
        bad = "the data set has fewer samples than world x batch, so dropping the remainder leaves no step";
    else if (o->format != TB_OUT_F32_NCHW && o->format != TB_OUT_F32_NHWC && o->format != TB_OUT_U8_NHWC)
        bad = "unknown output format";
    else if (o->decode != TB_DECODE_FAST && o->decode != TB_DECODE_PARTIAL && o->decode != TB_DECODE_FULL &&
             o->decode != TB_DECODE_FAST_ALL && o->decode != TB_DECODE_GPU)
        bad = "unknown decode mode";
    else if (o->decode == TB_DECODE_GPU && (o->format != TB_OUT_U8_NHWC || !o->gpu_flip))
        bad = "--decode gpu makes uint8 NHWC batches with the flip left to the device";
    else if (o->gpu_flip && o->format != TB_OUT_U8_NHWC)
        bad = "deferring the flip to the device needs the uint8 NHWC output";
    else if ((o->host_alloc == NULL) != (o->host_free == NULL))
        bad = "host_alloc and host_free go together";
    else if (o->gpu_stages < 0 || o->gpu_stages > 16)
        bad = "GPU stages must be in [0, 16] (0: the default)";
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
    if (o->decode == TB_DECODE_GPU) {
        /* one decoder per GPU stage: nvJPEG's state and stream are per thread */
        ld->ngpu = o->inline_decode ? 1 : o->gpu_stages > 0 ? o->gpu_stages : 2;
        ld->gpus = calloc((size_t)ld->ngpu, sizeof *ld->gpus);
        if (!ld->gpus) TB_FATAL("out of host memory");
        tb_gpu_decoder_opts go = {o->gpu_device,  o->batch, o->image_size, o->gpu_emulate, o->gpu_emulate_fail_every,
                                  o->gpu_emulate_delay_ms};
        for (int k = 0; k < ld->ngpu; k++) {
            char why[512];
            ld->gpus[k] = tb_gpu_decoder_create(&go, why, sizeof why);
            if (!ld->gpus[k]) {
                snprintf(err, errlen, "loader: %s", why);
                tb_loader_destroy(ld);
                return NULL;
            }
        }
        ld->gpu = ld->gpus[0];
        snprintf(ld->decoder_desc, sizeof ld->decoder_desc, "%s; %d GPU stage%s; CPU fallback %s",
                 tb_gpu_decoder_describe(ld->gpu), ld->ngpu, ld->ngpu > 1 ? "s (own decoder and stream each)" : "",
                 tb_jpeg_version());
    } else {
        snprintf(ld->decoder_desc, sizeof ld->decoder_desc, "%s (CPU)", tb_jpeg_version());
    }
    for (int i = 0; i < ld->nslots; i++) {
        size_t bytes = ld->sample_bytes * (size_t)o->batch;
        slot *sl = &ld->slots[i];
        tb_batch *b = &sl->b;
        b->slot = i;
        if (ld->gpu) { /* the batch on the device; rows rendered here go up from host_images */
            b->images = tb_gpu_decoder_alloc(ld->gpu, bytes);
            b->on_device = 1;
            sl->host_images = ld->o.host_alloc(ld->o.host_ctx, bytes);
            sl->jobs = calloc((size_t)o->batch, sizeof *sl->jobs);
            sl->files = calloc((size_t)o->batch, sizeof *sl->files);
            sl->file_caps = calloc((size_t)o->batch, sizeof *sl->file_caps);
            sl->kind = calloc((size_t)o->batch, 1);
            sl->cand = calloc((size_t)o->batch, sizeof *sl->cand);
            if (!sl->jobs || !sl->files || !sl->file_caps || !sl->kind || !sl->cand) TB_FATAL("out of host memory");
        } else {
            b->images = ld->o.host_alloc(ld->o.host_ctx, bytes);
        }
        b->labels = ld->o.host_alloc(ld->o.host_ctx, (size_t)o->batch * sizeof(int32_t));
        if (o->gpu_flip) b->flip = ld->o.host_alloc(ld->o.host_ctx, (size_t)o->batch);
        if (!b->images || !b->labels || (o->gpu_flip && !b->flip) || (ld->gpu && !sl->host_images)) {
            snprintf(err, errlen, "loader: cannot allocate %d batch slots of %.1f MB; lower --prefetch or --batch-size",
                     ld->nslots, (double)bytes / 1048576.0);
            tb_loader_destroy(ld);
            return NULL;
        }
    }
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->work, NULL);
    pthread_cond_init(&ld->ready, NULL);
    pthread_cond_init(&ld->idle, NULL);
    pthread_cond_init(&ld->gpu_cond, NULL);
    ld->fill_step = ld->steps; /* nothing to do before the first epoch */
    if (o->inline_decode) {
        ld->inline_w = worker_new(ld);
        ld->inline_w->gpu = ld->gpu;
        return ld;
    }
    if (ld->gpu) {
        ld->gpu_threads = calloc((size_t)ld->ngpu, sizeof *ld->gpu_threads);
        ld->gpu_ws = calloc((size_t)ld->ngpu, sizeof *ld->gpu_ws);
        if (!ld->gpu_threads || !ld->gpu_ws) TB_FATAL("out of host memory");
        for (int k = 0; k < ld->ngpu; k++) {
            ld->gpu_ws[k] = worker_new(ld);
            ld->gpu_ws[k]->gpu = ld->gpus[k];
            int rc = pthread_create(&ld->gpu_threads[k], NULL, gpu_main, ld->gpu_ws[k]);
            if (rc != 0) TB_FATAL("pthread_create: %s", strerror(rc));
            ld->gpu_started++;
        }
    }
    ld->threads = calloc((size_t)ld->o.threads, sizeof *ld->threads);
    if (!ld->threads) TB_FATAL("out of host memory");
    for (int t = 0; t < ld->o.threads; t++) {
        worker *w = worker_new(ld);
        int rc = pthread_create(&ld->threads[t], NULL, worker_main, w);
        if (rc != 0) TB_FATAL("pthread_create: %s", strerror(rc));
        ld->nthreads++;
    }
    return ld;
}

int64_t tb_loader_steps_per_epoch(const tb_loader *ld) { return ld->steps; }

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
    while (!(s->state == SLOT_READY && s->b.step == ld->next_out)) {
        task t;
        if (ld->inline_w && s->state == SLOT_DECODE) /* no workers: the GPU stage here too */
            run_gpu_stage(ld, ld->inline_w, s);
        else if (ld->inline_w && take_task(ld, &t)) /* no workers: decode here */
            run_task(ld->inline_w, &t);
        else
            pthread_cond_wait(&ld->ready, &ld->mu);
    }
    s->state = SLOT_HELD;
    s->b.wait_s = tb_now() - t0;
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
    s->state = SLOT_FREE;
    pthread_cond_broadcast(&ld->work);
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

const char *tb_loader_decoder(const tb_loader *ld) { return ld->decoder_desc; }

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
    worker_free(ld->inline_w);
    for (int k = 0; ld->gpu_ws && k < ld->ngpu; k++) worker_free(ld->gpu_ws[k]);
    free(ld->gpu_ws);
    for (int i = 0; ld->slots && i < ld->nslots; i++) {
        slot *sl = &ld->slots[i];
        tb_batch *b = &sl->b;
        if (b->images) {
            if (b->on_device) tb_gpu_decoder_free(ld->gpu, b->images);
            else ld->o.host_free(ld->o.host_ctx, b->images);
        }
        if (b->labels) ld->o.host_free(ld->o.host_ctx, b->labels);
        if (b->flip) ld->o.host_free(ld->o.host_ctx, b->flip);
        if (sl->host_images) ld->o.host_free(ld->o.host_ctx, sl->host_images);
        for (int j = 0; sl->files && j < ld->o.batch; j++) free(sl->files[j]);
        free(sl->files);
        free(sl->file_caps);
        free(sl->jobs);
        free(sl->kind);
        free(sl->cand);
    }
    /* every stage joined and every slot's device memory given back (to
     * gpus[0], which gave it): now the decoders */
    for (int k = 0; ld->gpus && k < ld->ngpu; k++) tb_gpu_decoder_destroy(ld->gpus[k]);
    free(ld->gpus);
    if (ld->nthreads || ld->inline_w || ld->gpu_started) {
        pthread_mutex_destroy(&ld->mu);
        pthread_cond_destroy(&ld->work);
        pthread_cond_destroy(&ld->ready);
        pthread_cond_destroy(&ld->idle);
        pthread_cond_destroy(&ld->gpu_cond);
    }
    free(ld->slots);
    free(ld->order);
    free(ld->known_bad);
    free(ld);
}
