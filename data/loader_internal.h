/* loader_internal.h - the loader's state, shared by its files (internal to
 * data/): loader.c (scheduling, the ring of slots, the public calls),
 * loader_sample.c (one sample: read, check, decode, resize; the workers'
 * counters), loader_gpu.c (--decode gpu's GPU stage). See loader.h for what
 * the loader does and loader.c for how the slots move. */
#ifndef TB_LOADER_INTERNAL_H
#define TB_LOADER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "data/gpu_decode.h"
#include "data/loader.h"
#include "data/loader_timeline.h"
#include "data/transform.h"

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
    /* the GPU jobs' file bytes: one arena per slot, sized between fills to
     * the largest batch it has held (so memory follows the batches' total,
     * which settles fast, not each position's largest file ever, which
     * creeps up epoch after epoch); a file past its end is a spill of its
     * own, freed at the slot's next fill */
    uint8_t *arena;
    size_t arena_cap;
    atomic_size_t arena_used;  /* bytes claimed this fill (spills included) */
    uint8_t **spill;        /* [batch] */
    uint8_t *kind;          /* [batch] KIND_* */
    int64_t *cand;          /* [batch] the candidate of the epoch order the job is (0: the sample itself) */
    tb_gpu_fence *fence;    /* recorded after the GPU stage's work on the slot: its rows are done */
    int fenced;             /* the fence stands for the slot's batch (its device work) */
    int ordered;            /* the consumer ordered on the fence or waited for it */
} slot;

typedef struct {
    int64_t gen;         /* epoch generation the task belongs to */
    slot *s;
    int j;               /* sample within the batch */
} task;

/* One decoding thread's state: a worker, a GPU stage, or the consumer's
 * thread with inline decode. */
typedef struct worker {
    struct tb_loader *ld;
    int track;                 /* its timeline track (loader_track_*) */
    tb_sampler *sp;
    uint8_t *file;
    size_t file_cap;
    uint8_t *rgbx;             /* [S][S][4] */
    tb_loader_stats acc;       /* merged into ld->stats after each sample or batch */
    int64_t step;              /* the batch it works on (timeline) */
    tb_gpu_job *jobs;          /* GPU stage: [batch] the slot's jobs, compacted */
    int *rows;                 /* GPU stage: [batch] */
    tb_gpu_decoder *gpu;       /* GPU stage: the decoder it runs (its own) */
} worker;

struct tb_loader {
    tb_loader_opts o;
    int64_t n;                 /* samples in the data set */
    int64_t steps;             /* steps per epoch */
    size_t sample_bytes;
    slot *slots;               /* [prefetch] */
    int nslots;
    int64_t *order;            /* [n] the epoch's global order */
    atomic_uchar *known_bad;   /* [n] bit 1: unreadable whatever the crop; bit 2: met bad at least
                                  once (any reason; tb_loader_bad_samples) */
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
    worker *inline_w;          /* inline_decode: the caller's decoding state */
    tb_gpu_decoder **gpus;     /* --decode gpu: [ngpu] one decoder per GPU stage; gpus[0] also
                                  allocates and frees the slots' device memory and fences */
    tb_gpu_decoder *gpu;       /* gpus[0]; NULL: CPU decode */
    int ngpu;                  /* GPU stages */
    int gpu_cpu_share;         /* --nvjpeg cpu=PCT: rows the loader threads decode (tb_gpu_cpu_row) */
    pthread_t *gpu_threads;    /* [ngpu] the GPU stages (worker threads only) */
    worker **gpu_ws;           /* [ngpu] their state (decoder, CPU fallback renders) */
    int gpu_started;           /* GPU-stage threads running */
    int gpu_busy;              /* GPU stages running now */
    atomic_int gpu_named;      /* files the GPU stages gave back to the CPU path, named so far */
    pthread_cond_t gpu_cond;   /* a slot reached SLOT_DECODE, or stop */
    tb_timeline *tl;           /* every stage interval (timeline_events > 0), else NULL */
    char decoder_desc[900];
    tb_loader_stats stats;
};

/* Timeline tracks: workers 0..threads-1, then per GPU stage k its host
 * thread and its device work, then the consumer. */
static inline int loader_track_gpu_host(const struct tb_loader *ld, int k) { return ld->o.threads + k; }
static inline int loader_track_gpu_device(const struct tb_loader *ld, int k) {
    return ld->o.threads + ld->ngpu + k;
}
static inline int loader_track_consumer(const struct tb_loader *ld) { return ld->o.threads + 2 * ld->ngpu; }

/* A slot about to be filled (mutex held, nothing reads its files): the
 * arena grown to the last fill's total, the spills freed. */
void tb_loader_slot_refill(slot *s, int batch);

/* ---- loader_sample.c -------------------------------------------------------------------- */
worker *tb_loader_worker_new(struct tb_loader *ld, int track);
void tb_loader_worker_free(worker *w);
/* Sample j of slot s from candidate k0 on (see loader_sample.c); allow_gpu:
 * a candidate the GPU takes becomes a GPU job. Runs without the mutex. */
void tb_loader_make_sample(worker *w, int64_t epoch, slot *s, int j, int64_t k0, int allow_gpu);
/* w's counters into the loader's (mutex held), w's cleared. */
void tb_loader_merge_stats(tb_loader_stats *into, tb_loader_stats *from);
/* A stage interval of w: its counters, the timeline, and the NVTX range
 * opened by tb_loader_stage_begin (which returns tb_now()). */
double tb_loader_stage_begin(int stage);
void tb_loader_stage_end(worker *w, int stage, double t0);
/* An interval measured elsewhere (a device interval, a host one reported
 * by the decoder): counters and timeline only, on `track`. */
void tb_loader_stage_add(worker *w, int track, int stage, int64_t step, double t0, double t1);

/* ---- loader_gpu.c ----------------------------------------------------------------------- */
/* Runs slot s's GPU stage with w and its decoder (mutex held on entry and
 * return). */
void tb_loader_run_gpu_stage(struct tb_loader *ld, worker *w, slot *s);
/* A GPU stage thread's loop. */
void *tb_loader_gpu_main(void *arg);
/* Makes the decoders (one per GPU stage) and the slots' fences; 0, or -1
 * with err set. */
int tb_loader_gpu_create(struct tb_loader *ld, char *err, size_t errlen);
/* ld->decoder_desc from the decoders as they are now (tb_loader_decoder). */
void tb_loader_gpu_describe(struct tb_loader *ld);

#endif
