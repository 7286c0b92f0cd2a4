/* trainer.c - a timed data-parallel training step (see trainer.h).
 *
 * The sync step (step_sync) is the CPU backend's, unchanged: every phase
 * ends with a host sync and is timed on the host clock. The async step
 * (step_async) queues the same work and records events instead:
 *
 *   E_START  step scalars, batch upload  E_H2D  [BN broadcast  E_BN  forward+loss  E_FWD
 *   backward (buckets leave from the grad-ready hook)  E_BWD  join with the
 *   communication stream  E_COMM  SGD  E_END]  readback of the step scalars
 *
 * The bracketed part is what a CUDA graph holds; its events are recorded
 * as external nodes and retargeted to the step's ring slot per launch. */
#include "src/train/trainer.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/results/bucket_profile.h"
#include "core/faults.h"
#include "src/train/fault_strike.h"
#include "src/train/step_timeline.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/timer.h"
#include "src/train/trace.h"

const char *tb_comm_path_name(tb_comm_path p) {
    switch (p) {
    case TB_PATH_HOST: return "mpi-host";
    case TB_PATH_STAGED: return "mpi-staged";
    case TB_PATH_NCCL: return "nccl";
    default: return "none";
    }
}

enum { E_START, E_H2D, E_BN, E_FWD, E_BWD, E_COMM, E_END, E_COUNT };
#define E_GRAPH_FIRST E_BN /* E_BN..E_END are recorded inside a captured step */

typedef struct {
    int inflight;
    tb_step_record rec;
    tb_event *ev[E_COUNT];
    tb_step_scalars *sc_host;    /* pinned: the step scalars after the step */
    tb_event *rb;                /* the readback has landed */
    int has_prev;                /* the previous step's E_END precedes E_START (data phase) */
    int prev_slot;
} slot_t;

struct tb_trainer {
    tb_model *m;
    tb_comm *comm;
    tb_nccl *nccl;
    int rank, world;
    tb_comm_path path;
    tb_grad_sync *gs;            /* host path */
    tb_grad_sync_dev *gsd;       /* staged and NCCL paths */
    tb_train_hparams hp;
    float *stage;                /* host staging for broadcasts [max(n_train, n_state)] tb_real */
    tb_monitor *mon;
    int fault_nan;               /* test only (TB_TEST_FAULT=nan): this step's gradient gets a NaN */
    int fault_mid;               /* test only: a process fault inside backward (faults.h) */
    tb_step_timeline *tl;        /* async steps while bucket_profile.h records (rank 0, scaling rows) */
    /* async steps */
    int async;
    int native;                  /* the backend hands out cudaStream_t / cudaEvent_t */
    void *stream;                /* the compute stream (native) */
    slot_t slot[TB_TRAINER_SLOTS];
    int64_t queued, harvested;
    int prev_valid;              /* a step of this trainer was queued before */
    tb_step_record *done;        /* harvested, not yet collected */
    int ndone, done_head, done_cap;
    /* CUDA graph */
    int graph_on;
    char graph_why[200];
    tb_gpu_graph *graph;
    int graph_n;
    int graph_slot;              /* the ring slot the graph was captured in */
    int eager_full;              /* eager full-batch steps since the last (re)start */
    int recapture;
    int seen[16], nseen;         /* batch sizes run eagerly (their conv plans exist) */
    int replays;
    int pending_steps;           /* steps queued while a capture was due (tb_trainer_graph_pending) */
    int force_eager;             /* tb_trainer_force_eager: no replay, no capture */
    void **gev;                  /* [nev] a launch's events */
    int nev;
};

static tb_comm_type real_type(void) { return sizeof(tb_real) == 4 ? TB_FLOAT32 : TB_FLOAT64; }

/* ---- creation ------------------------------------------------------------------------ */

static void tensor_offsets(const tb_model *m, size_t **off, int *nt) {
    const tb_param_table *pt = &m->pt;
    *off = malloc(((size_t)pt->count + 1) * sizeof **off);
    if (!*off) TB_FATAL("out of host memory");
    int n = 0;
    for (int i = 0; i < pt->count; i++)
        if (tb_param_store_of(pt->items[i].role) == TB_STORE_TRAIN) (*off)[n++] = pt->items[i].offset;
    (*off)[n] = pt->n_train;
    *nt = n;
}

/* Why the step cannot be captured, or "" when it can. */
static void graph_blocker(const tb_trainer *t, char *why, size_t len) {
    why[0] = '\0';
    if (!t->hp.cuda_graph) snprintf(why, len, "--cuda-graph off");
    else if (!t->native) snprintf(why, len, "the %s backend has no CUDA stream", t->m->be->name);
    else if (!t->async) snprintf(why, len, "the step is synchronous");
    else if (t->path == TB_PATH_STAGED)
        snprintf(why, len, "the MPI path stages gradients through the host (MPI is host code)");
    else if (t->path == TB_PATH_HOST) snprintf(why, len, "the host all-reduce path");
    else if (getenv("TB_TEST_FAULT")) snprintf(why, len, "TB_TEST_FAULT is set (faults are injected eagerly)");
}

static void make_slots(tb_trainer *t) {
    tb_backend *be = t->m->be;
    for (int s = 0; s < TB_TRAINER_SLOTS; s++) {
        slot_t *p = &t->slot[s];
        for (int e = 0; e < E_COUNT; e++) p->ev[e] = be->event_create(be, 1);
        p->rb = be->event_create(be, 0);
        p->sc_host = be->host_alloc(be, sizeof *p->sc_host);
    }
    t->done_cap = 16;
    t->done = calloc((size_t)t->done_cap, sizeof *t->done);
    if (!t->done) TB_FATAL("out of host memory");
    int ng = t->gsd ? tb_grad_sync_dev_timing_events(t->gsd, 0, NULL) : 0;
    int nr = t->tl ? tb_step_timeline_events(t->tl, 0, NULL) : 0;
    t->nev = (E_COUNT - E_GRAPH_FIRST) + ng + nr;
    t->gev = calloc((size_t)t->nev, sizeof *t->gev);
    if (!t->gev) TB_FATAL("out of host memory");
}

tb_trainer *tb_trainer_create(tb_model *m, tb_comm *comm, tb_nccl *nccl, const tb_train_hparams *hp) {
    tb_trainer *t = calloc(1, sizeof *t);
    if (!t) TB_FATAL("out of host memory");
    t->m = m;
    t->comm = comm;
    t->nccl = nccl;
    t->rank = tb_comm_rank(comm);
    t->world = tb_comm_size(comm);
    t->hp = *hp;
    tb_backend *be = m->be;
    t->native = be->native_stream(be, NULL) != NULL;
    t->stream = be->native_stream(be, NULL);
    t->async = hp->async;
    t->path = t->world > 1 || hp->path_on_one_rank ? hp->path : TB_PATH_NONE;
    if (t->path == TB_PATH_HOST && t->world == 1) t->path = TB_PATH_NONE;
    if ((t->path == TB_PATH_STAGED || t->path == TB_PATH_NCCL) && !t->native)
        TB_FATAL("the %s gradient path needs a CUDA backend", tb_comm_path_name(t->path));
    if (t->path == TB_PATH_NCCL && !nccl) TB_FATAL("the NCCL path without an NCCL communicator");
    size_t n = m->pt.n_train > m->pt.n_state ? m->pt.n_train : m->pt.n_state;
    t->stage = malloc(n * sizeof(tb_real));
    if (!t->stage) TB_FATAL("out of host memory");
    size_t *off;
    int nt;
    tensor_offsets(m, &off, &nt);
    if (t->path == TB_PATH_HOST) {
        t->gs = tb_grad_sync_create(comm, m->grads, m->pt.n_train, real_type(), off, nt, hp->bucket_bytes,
                                    hp->first_bucket_bytes, hp->overlap);
    } else if (t->path == TB_PATH_STAGED || t->path == TB_PATH_NCCL) {
        tb_grad_sync_dev_opts o = {
            .comm = comm,
            .nccl = t->path == TB_PATH_NCCL ? nccl : NULL,
            .device = hp->device,
            .grads = m->grads,
            .count = m->pt.n_train,
            .tensor_offsets = off,
            .ntensors = nt,
            .cap_bytes = hp->bucket_bytes,
            .first_bytes = hp->first_bucket_bytes,
            .overlap = hp->overlap,
            .bf16 = hp->bf16_allreduce,
            .compute_stream = t->stream,
            .slots = TB_TRAINER_SLOTS,
            .watch = t->path == TB_PATH_NCCL,
        };
        t->gsd = tb_grad_sync_dev_create(&o);
    }
    free(off);
    if (t->async && tb_bprof_on()) t->tl = tb_step_timeline_create(be, TB_TRAINER_SLOTS, nt);
    if (t->async) {
        make_slots(t);
        /* the device flag instead of a host scan of the gradients */
        tb_model_set_nonfinite_skip(m, 1);
    }
    graph_blocker(t, t->graph_why, sizeof t->graph_why);
    t->graph_on = t->graph_why[0] == '\0';
    return t;
}

void tb_trainer_destroy(tb_trainer *t) {
    if (!t) return;
    tb_backend *be = t->m->be;
    be->sync(be);
    tb_dev_watch_clear();
    /* before the events its event-record nodes record */
    tb_gpu_graph_destroy(t->graph);
    t->graph = NULL;
    if (t->async) {
        for (int s = 0; s < TB_TRAINER_SLOTS; s++) {
            for (int e = 0; e < E_COUNT; e++) be->event_destroy(be, t->slot[s].ev[e]);
            be->event_destroy(be, t->slot[s].rb);
            be->host_free(be, t->slot[s].sc_host);
        }
        tb_model_set_nonfinite_skip(t->m, 0);
        /* the flag stays set after a skipped update: clear it for whoever
         * trains this model next */
        tb_step_scalars sc;
        tb_model_read_scalars(t->m, &sc);
        if (sc.found_inf && !t->m->loss_scaling) {
            int32_t zero = 0;
            be->copy_h2d(be, &t->m->sc->found_inf, &zero, sizeof zero);
            be->sync(be);
        }
    }
    tb_grad_sync_destroy(t->gs);
    tb_grad_sync_dev_destroy(t->gsd);
    tb_step_timeline_destroy(t->tl);
    free(t->gev);
    free(t->done);
    free(t->stage);
    free(t);
}

void tb_trainer_set_monitor(tb_trainer *t, tb_monitor *mon) { t->mon = mon; }
tb_model *tb_trainer_model(const tb_trainer *t) { return t->m; }

tb_comm_path tb_trainer_path(const tb_trainer *t) { return t->path; }

/* ---- broadcasts ------------------------------------------------------------------------ */

/* Broadcasts n device elements of tb_real from rank 0 through host staging. */
static void bcast_device(tb_trainer *t, tb_real *dev, size_t n) {
    tb_backend *be = t->m->be;
    if (t->rank == 0) be->copy_d2h(be, t->stage, dev, n * sizeof(tb_real));
    tb_comm_bcast(t->comm, t->stage, n, real_type(), 0);
    if (t->rank != 0) {
        be->copy_h2d(be, dev, t->stage, n * sizeof(tb_real));
        be->sync(be);
    }
}

/* rank 0's n elements of dev to every rank: on the device over NCCL (no
 * host wait; capturable), else through the host. */
static void bcast(tb_trainer *t, tb_real *dev, size_t n) {
    if (t->path == TB_PATH_NCCL) tb_grad_sync_dev_bcast(t->gsd, dev, n, TB_DEV_F32, 0);
    else bcast_device(t, dev, n);
}

void tb_trainer_sync_state(tb_trainer *t) {
    if (t->world == 1) return;
    tb_model *m = t->m;
    bcast(t, m->params, m->pt.n_train);
    bcast(t, m->momentum, m->pt.n_train);
    bcast(t, m->state, m->pt.n_state);
    m->be->sync(m->be);
    tb_comm_bcast(t->comm, m->counters, (size_t)m->pt.n_counters, TB_INT64, 0);
    m->op_stale = m->op_params != NULL; /* the op weight copies follow the new master weights */
}

const char *tb_trainer_first_nonfinite(tb_trainer *t, const tb_real *buf, size_t *count) {
    tb_model *m = t->m;
    if (m->be->count_nonfinite(m->be, buf, m->pt.n_train) == 0) return NULL;
    for (int i = 0; i < m->pt.count; i++) {
        const tb_param *p = &m->pt.items[i];
        if (tb_param_store_of(p->role) != TB_STORE_TRAIN) continue;
        size_t n = m->be->count_nonfinite(m->be, buf + p->offset, p->numel);
        if (n) {
            *count = n;
            return p->name;
        }
    }
    return NULL;
}

/* Test only (TB_TEST_FAULT=nan): a NaN in the first tensor's gradient. */
static void inject_nan(tb_trainer *t) {
    tb_real nan = (tb_real)NAN;
    t->m->be->copy_h2d(t->m->be, t->m->grads, &nan, sizeof nan);
    t->m->be->sync(t->m->be);
}

/* The gradient-ready callback with the NaN fault: the NaN is written before
 * the range holding the first tensor goes to the all-reduce, so every rank
 * sums it (written after backward, it could miss a bucket already sent). */
static void ready_with_nan(void *ctx, size_t offset, size_t count) {
    tb_trainer *t = ctx;
    if (offset == 0) inject_nan(t);
    if (t->gs) tb_grad_sync_ready(t->gs, offset, count);
    else if (t->gsd) tb_grad_sync_dev_ready(t->gsd, offset, count);
}

/* The gradient-ready callback with a fault inside backward (faults.h
 * kill-bwd, freeze-bwd, nccl-abort): it strikes once a bucket has gone to
 * communication (on a device path; else at the first range), so that
 * collectives of this step are in flight and others are still to come. */
static void ready_with_fault(void *ctx, size_t offset, size_t count) {
    tb_trainer *t = ctx;
    if (t->fault_nan) ready_with_nan(ctx, offset, count);
    else if (t->gs) tb_grad_sync_ready(t->gs, offset, count);
    else if (t->gsd) tb_grad_sync_dev_ready(t->gsd, offset, count);
    if (t->fault_mid && (!t->gsd || tb_grad_sync_dev_launched(t->gsd) > 0)) {
        t->fault_mid = 0;
        tb_fault_strike_in_backward(t->rank);
    }
}

/* The one place a batch goes to the device (the loader's upload code may
 * take it over: one call). */
/* The batch into the input activation: labels through the model's pinned
 * ring, images from the loader's pinned slots or a plain host batch
 * (src/feed/batch_upload.h). Queued outside any graph capture. */
static void upload_batch(tb_trainer *t, const tb_source_batch *b) {
    tb_batch_upload_apply(t->m, b);
}

/* The records of finished steps, oldest first. */
static void push_done(tb_trainer *t, const tb_step_record *r) {
    if (t->done_head > 0 && t->done_head == t->ndone) t->done_head = t->ndone = 0;
    if (t->ndone == t->done_cap) {
        t->done_cap = t->done_cap ? 2 * t->done_cap : 16;
        t->done = realloc(t->done, (size_t)t->done_cap * sizeof *t->done);
        if (!t->done) TB_FATAL("out of host memory");
    }
    t->done[t->ndone++] = *r;
}

/* ---- the synchronous step (CPU backend) -------------------------------------------------- */

static int step_sync(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr, char *err,
                     size_t errlen) {
    tb_model *m = t->m;
    tb_backend *be = m->be;
    tb_step_record rec_, *rec = &rec_;
    memset(rec, 0, sizeof *rec);
    rec->step = step;
    rec->n = b->n;
    rec->global_n = b->global_n;
    rec->lr = lr;
    rec->loss = NAN;
    rec->loss_scale = 1;
    rec->phase[TB_PH_DATA] = b->wait_s;

    double tb = tb_now();
    tb_monitor_progress(t->mon, step, "BatchNorm statistics broadcast", 1);
    if (t->world > 1) bcast_device(t, m->state, m->pt.n_state);
    if (t->gs) tb_grad_sync_begin(t->gs);
    double t0 = tb_now();
    double t1 = t0, t2 = t0, t3 = t0;
    if (b->n > 0) {
        tb_monitor_progress(t->mon, step, "forward", 0);
        upload_batch(t, b);
        be->sync(be);
        t1 = tb_now();
        tb_model_forward(m, 1);
        tb_model_loss(m, t->hp.label_smoothing, (double)b->n / (double)b->global_n);
        be->sync(be);
        t2 = tb_now();
        tb_monitor_progress(t->mon, step, "backward", 0);
        t->fault_nan = tb_fault("nan", t->rank, step);
        tb_grad_ready_fn ready = t->gs ? tb_grad_sync_ready : NULL;
        void *ready_ctx = t->gs;
        tb_bprof_wrap(&ready, &ready_ctx); /* `trainbench project`'s timeline (bucket_profile.h) */
        if (t->fault_nan && t->gs)
            tb_model_backward(m, ready_with_nan, t);
        else
            tb_model_backward(m, ready, ready_ctx);
        be->sync(be);
        t3 = tb_now();
    } else {
        /* No samples here this step (--last-batch keep): contribute zero
         * gradients to every bucket (grad_sync launches them in the same
         * order as the other ranks do; the loss pre-scale n/global_n gives
         * this rank weight 0 anyway), and advance num_batches_tracked as a
         * training forward would (graph.c: +1 per BatchNorm, one counter
         * each), so the counters stay equal across ranks. The running
         * statistics need nothing: rank 0's are broadcast before every
         * forward. */
        be->zero(be, m->grads, m->pt.n_train * sizeof(tb_real));
        be->sync(be);
        tb_model_advance_counters(m);
        if (t->gs) tb_grad_sync_ready(t->gs, 0, m->pt.n_train);
        t1 = t2 = t3 = tb_now();
    }
    if (t->fault_nan) { /* test only, no all-reduce to hand it to (see ready_with_nan) */
        if (!t->gs) inject_nan(t);
        t->fault_nan = 0;
    }
    tb_monitor_progress(t->mon, step, "gradient all-reduce", 1);
    if (t->gs) tb_grad_sync_finish(t->gs, &rec->sync);
    double t4 = tb_now();
    tb_bprof_step(t->world, t->gs, sizeof(tb_real), t->hp.bucket_bytes, t->hp.first_bucket_bytes, t->hp.overlap,
                  t2, t3, t4);
    size_t bad = 0;
    /* under fp16 loss scaling an overflow is expected: the update skips it on the device */
    const char *name = m->loss_scaling ? NULL : tb_trainer_first_nonfinite(t, m->grads, &bad);
    if (name) {
        snprintf(err, errlen,
                 "step %lld: the gradient of %s holds %zu NaN/Inf value%s%s; the run stops before "
                 "the update (lower --lr, or check the data)",
                 (long long)step, name, bad, bad > 1 ? "s" : "",
                 t->world > 1 ? " after the all-reduce" : "");
        return -1;
    }
    tb_monitor_progress(t->mon, step, "optimizer", 0);
    tb_sgd_args sgd = {lr, t->hp.momentum, t->hp.nesterov, 1.0};
    tb_model_sgd_step(m, &sgd, t->hp.weight_decay, t->hp.no_bn_decay);
    be->sync(be);
    double t5 = tb_now();
    rec->phase[TB_PH_H2D] = t1 - t0;
    rec->phase[TB_PH_FWD] = t2 - t1;
    rec->phase[TB_PH_BWD] = t3 - t2;
    rec->phase[TB_PH_COMM] = (t0 - tb) + (t4 - t3); /* BN broadcast + exposed buckets */
    rec->phase[TB_PH_OPT] = t5 - t4;
    rec->total = rec->phase[TB_PH_DATA] + (t5 - tb);
    if (b->n > 0) rec->loss = tb_model_read_loss(m);
    if (tb_trace_on()) {
        const double edges[TB_PH_COUNT + 1] = {tb - b->wait_s, tb, t1, t2, t3, t4, t5};
        tb_trace_event(tb_phase_name[TB_PH_DATA], TB_TRACE_COMPUTE, edges[0], tb, step, -1, 0);
        tb_trace_event("BN broadcast", TB_TRACE_COMPUTE, tb, t0, step, -1, 0);
        tb_trace_event(tb_phase_name[TB_PH_H2D], TB_TRACE_COMPUTE, t0, t1, step, -1, 0);
        for (int p = TB_PH_FWD; p < TB_PH_COUNT; p++)
            tb_trace_event(tb_phase_name[p], TB_TRACE_COMPUTE, edges[p], edges[p + 1], step, -1, 0);
        if (t->gs) {
            const double *bs, *be_;
            tb_grad_sync_bucket_times(t->gs, &bs, &be_);
            for (int i = 0; i < tb_grad_sync_bucket_count(t->gs); i++) {
                size_t off, cnt;
                tb_grad_sync_bucket(t->gs, i, &off, &cnt);
                tb_trace_event("all-reduce bucket", TB_TRACE_COMM, bs[i], be_[i], step, i,
                               (double)cnt * sizeof(tb_real));
            }
        }
    }
    push_done(t, rec);
    return 0;
}

/* ---- the asynchronous step (CUDA) ------------------------------------------------------- */

/* A phase boundary on the compute stream: an external node inside a capture. */
static void rec_ev(tb_trainer *t, tb_event *e) {
    tb_backend *be = t->m->be;
    if (t->native) tb_gpu_record_timing(be->native_event(be, e), t->stream);
    else be->event_record(be, e, NULL);
}

/* Reads slot s's finished step into the done queue: 1, or 0 when it has
 * not finished and wait is 0. */
static int harvest(tb_trainer *t, int s, int wait) {
    tb_backend *be = t->m->be;
    slot_t *p = &t->slot[s];
    TB_ASSERT(p->inflight);
    if (!be->event_done(be, p->rb)) {
        if (!wait) return 0;
        be->event_wait(be, p->rb);
    }
    tb_step_record *r = &p->rec;
#define EL(a, b) (be->event_elapsed_ms(be, p->ev[a], p->ev[b]) * 1e-3)
    if (p->has_prev) /* the device idle between the previous step and this one */
        r->phase[TB_PH_DATA] = be->event_elapsed_ms(be, t->slot[p->prev_slot].ev[E_END], p->ev[E_START]) * 1e-3;
    r->phase[TB_PH_H2D] = EL(E_START, E_H2D);
    r->phase[TB_PH_FWD] = EL(E_BN, E_FWD);
    r->phase[TB_PH_BWD] = EL(E_FWD, E_BWD);
    r->phase[TB_PH_COMM] = EL(E_H2D, E_BN) + EL(E_BWD, E_COMM);
    r->phase[TB_PH_OPT] = EL(E_COMM, E_END);
    r->total = r->phase[TB_PH_DATA] + EL(E_START, E_END);
    if (t->gsd && t->path == TB_PATH_NCCL)
        tb_grad_sync_dev_stats(t->gsd, s, be->native_event(be, p->ev[E_FWD]), &r->sync);
    if (t->gsd || t->gs) r->sync.exposed_s = EL(E_BWD, E_COMM);
    if (t->tl)
        tb_step_timeline_harvest(t->tl, s, t->world, p->ev[E_FWD], EL(E_FWD, E_BWD), EL(E_BWD, E_COMM), t->gs,
                                 t->gsd, sizeof(tb_real), t->hp.bucket_bytes, t->hp.first_bucket_bytes,
                                 t->hp.overlap);
#undef EL
    const tb_step_scalars *sc = p->sc_host;
    if (r->n > 0) r->loss = (double)sc->loss;
    r->nonfinite = !t->m->loss_scaling && sc->found_inf;
    r->skipped_steps = sc->skipped_steps;
    r->loss_scale = (double)sc->loss_scale;
    push_done(t, r);
    p->inflight = 0;
    t->harvested++;
    return 1;
}

static int seen_batch(const tb_trainer *t, int n) {
    for (int i = 0; i < t->nseen; i++)
        if (t->seen[i] == n) return 1;
    return 0;
}

/* The step from the BatchNorm broadcast to the optimizer: queued eagerly,
 * or recorded into a capture. */
static void step_body(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr, int s, int capturing) {
    tb_model *m = t->m;
    tb_backend *be = m->be;
    slot_t *p = &t->slot[s];
    if (t->world > 1) {
        tb_monitor_progress(t->mon, step, "BatchNorm statistics broadcast", t->path != TB_PATH_NCCL);
        bcast(t, m->state, m->pt.n_state);
    }
    rec_ev(t, p->ev[E_BN]);
    if (t->gsd) tb_grad_sync_dev_begin(t->gsd, step, s);
    if (t->gs) tb_grad_sync_begin(t->gs);
    tb_grad_ready_fn ready = t->gsd ? tb_grad_sync_dev_ready : t->gs ? tb_grad_sync_ready : NULL;
    void *ready_ctx = t->gsd ? (void *)t->gsd : (void *)t->gs;
    t->fault_nan = !capturing && tb_fault("nan", t->rank, step);
    t->fault_mid = !capturing && tb_fault_in_backward(t->rank, step);
    if (b->n > 0) {
        tb_monitor_progress(t->mon, step, "forward", 0);
        tb_model_forward(m, 1);
        tb_model_loss(m, t->hp.label_smoothing, (double)b->n / (double)b->global_n);
        rec_ev(t, p->ev[E_FWD]);
        tb_monitor_progress(t->mon, step, "backward", 0);
        tb_grad_ready_fn fn = ready;
        void *fctx = ready_ctx;
        if ((t->fault_nan && ready) || t->fault_mid) fn = ready_with_fault, fctx = t;
        if (t->tl) tb_step_timeline_wrap(t->tl, s, &fn, &fctx); /* the per-range events (step_timeline.h) */
        tb_model_backward(m, fn, fctx);
        rec_ev(t, p->ev[E_BWD]);
    } else {
        if (t->tl) tb_step_timeline_skip(t->tl, s); /* no samples (--last-batch keep): zeros, weight 0, counters advanced (see step_sync) */
        be->zero(be, m->grads, m->pt.n_train * sizeof(tb_real));
        tb_model_advance_counters(m);
        rec_ev(t, p->ev[E_FWD]);
        if (ready) ready(ready_ctx, 0, m->pt.n_train);
        rec_ev(t, p->ev[E_BWD]);
    }
    if (t->fault_nan) {
        if (!ready) inject_nan(t);
        t->fault_nan = 0;
    }
    if (t->gsd) {
        double waited = 0;
        tb_monitor_progress(t->mon, step, "gradient all-reduce", t->path == TB_PATH_STAGED);
        tb_grad_sync_dev_finish(t->gsd, &waited);
        if (t->path == TB_PATH_STAGED) tb_grad_sync_dev_stats(t->gsd, s, NULL, &p->rec.sync);
    } else if (t->gs) {
        tb_monitor_progress(t->mon, step, "gradient all-reduce", 1);
        tb_grad_sync_finish(t->gs, &p->rec.sync);
        if (t->tl) tb_step_timeline_host_buckets(t->tl, s, t->gs);
    }
    rec_ev(t, p->ev[E_COMM]);
    tb_monitor_progress(t->mon, step, "optimizer", 0);
    tb_sgd_args sgd = {lr, t->hp.momentum, t->hp.nesterov, 1.0};
    tb_model_sgd_step(m, &sgd, t->hp.weight_decay, t->hp.no_bn_decay);
    rec_ev(t, p->ev[E_END]);
}

/* The events a graph launch of slot s records: E_BN..E_END, then the
 * buckets' start and end. */
static void graph_events(tb_trainer *t, int s) {
    tb_backend *be = t->m->be;
    int k = 0;
    for (int e = E_GRAPH_FIRST; e < E_COUNT; e++) t->gev[k++] = be->native_event(be, t->slot[s].ev[e]);
    if (t->gsd) k += tb_grad_sync_dev_timing_events(t->gsd, s, t->gev + k);
    if (t->tl) tb_step_timeline_events(t->tl, s, t->gev + k);
}

/* Captures the step body into a graph and launches it for this step.
 * Returns 1, or 0 when the capture failed on a single rank without NCCL
 * (the body then has to run eagerly, exactly once; the caller does). A
 * failure inside the capture (a call the capture refuses, an allocation,
 * an invalidated capture: any tb_die / TB_FATAL of this thread meanwhile)
 * is caught by a fatal trap (core/log.h): the capture is abandoned,
 * the stream runs eagerly again, and the step's host state is restored. */
static int capture_and_launch(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr, int s) {
    tb_model *m = t->m;
    char why[200];
    size_t nc = (size_t)m->pt.n_counters;
    int64_t *saved = malloc((nc + 1) * sizeof *saved);
    if (!saved) TB_FATAL("out of host memory");
    memcpy(saved, m->counters, nc * sizeof *saved);
    tb_monitor_progress(t->mon, step, "CUDA graph capture", 0);
    /* The device idle first: a re-capture replaces a graph that may still
     * run, and every collective the device watch follows has then ended,
     * so its entries go. Otherwise the watchdog thread would go on polling
     * events of the eager steps that the graph's launches record again
     * (stale steps named as pending, PyTorch #104487's crash in a capture). */
    m->be->sync(m->be);
    tb_dev_watch_clear();
    tb_gpu_graph *g = NULL;
    static tb_fatal_trap trap; /* static: not clobbered by the longjmp */
    if (setjmp(trap.env) == 0) {
        tb_fatal_trap_set(&trap);
        if (tb_gpu_capture_begin(t->stream, why, sizeof why) == 0) {
            step_body(t, b, step, lr, s, 1);
            graph_events(t, s);
            g = tb_gpu_capture_end(t->stream, t->gev, t->nev, why, sizeof why);
        }
        tb_fatal_trap_set(NULL);
    } else { /* sprung (and cleared): a call inside the capture failed */
        snprintf(why, sizeof why, "inside the capture: %.150s", trap.msg);
        tb_gpu_capture_abandon(t->stream);
        g = NULL;
    }
    if (!g) {
        if (t->world > 1)
            tb_die("--cuda-graph: capturing the training step failed on this rank (%s); the other ranks "
                   "may have captured theirs, so the run cannot fall back: rerun with --cuda-graph off",
                   why);
        if (t->path == TB_PATH_NCCL)
            tb_die("--cuda-graph: capturing the training step failed (%s); the NCCL communicator may be left "
                   "unusable by it, so the run cannot fall back: rerun with --cuda-graph off",
                   why);
        memcpy(m->counters, saved, nc * sizeof *saved); /* the body runs again */
        free(saved);
        m->preset = 1; /* lr and grad scale are on the device already */
        snprintf(t->graph_why, sizeof t->graph_why, "%s", why);
        t->graph_on = 0;
        tb_info("# cuda graph: off: %s; the steps run eagerly", why);
        return 0;
    }
    free(saved);
    int first = t->graph == NULL && t->replays == 0;
    tb_gpu_graph_destroy(t->graph);
    t->graph = g;
    t->graph_n = b->n;
    t->graph_slot = s;
    t->recapture = 0;
    tb_gpu_graph_launch(g, t->stream, t->gev);
    if (first)
        tb_info("# cuda graph: the step (BatchNorm broadcast to optimizer) captured at batch %d after %d eager "
                "step%s: %d nodes, replayed from now on",
                b->n, t->eager_full, t->eager_full == 1 ? "" : "s", tb_gpu_graph_nodes(g));
    return 1;
}

static int step_async(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr) {
    tb_model *m = t->m;
    tb_backend *be = m->be;
    tb_fault_process(t->rank, step);
    /* at most SLOTS - 1 steps in flight: a step's data phase reads the
     * previous step's end event, which must not be re-recorded before */
    while (t->queued - t->harvested >= TB_TRAINER_SLOTS - 1) harvest(t, (int)(t->harvested % TB_TRAINER_SLOTS), 1);
    int s = (int)(t->queued % TB_TRAINER_SLOTS);
    slot_t *p = &t->slot[s];
    memset(&p->rec, 0, sizeof p->rec);
    p->rec.step = step;
    p->rec.n = b->n;
    p->rec.global_n = b->global_n;
    p->rec.lr = lr;
    p->rec.loss = NAN;
    p->rec.loss_scale = 1;
    p->rec.phase[TB_PH_DATA] = b->wait_s;
    p->has_prev = t->prev_valid;
    p->prev_slot = (s + TB_TRAINER_SLOTS - 1) % TB_TRAINER_SLOTS;

    tb_monitor_progress(t->mon, step, "queueing the step", 0);
    /* E_START first: the step's window holds every op it queues, the
     * scalars' upload included (before, that copy fell between the steps,
     * outside both: --op-profile's ops then spanned more than the step) */
    rec_ev(t, p->ev[E_START]);
    tb_model_preset_scalars(m, lr, b->n > 0 ? (double)b->n / (double)b->global_n : 1.0);
    if (b->n > 0) upload_batch(t, b);
    rec_ev(t, p->ev[E_H2D]);

    /* Graph decisions use only what every rank knows alike (the global
     * sample count), so every rank replays, captures or runs eagerly the
     * same steps and issues its NCCL collectives the same way: a step with
     * a short batch anywhere (--last-batch keep or pad's remainder) runs
     * eagerly on every rank and makes every rank capture again (the short
     * batch may have grown the backend's workspaces under the graph). */
    int full = b->global_n == (int64_t)t->world * m->max_batch;
    if (t->graph && full && !t->recapture && !t->force_eager) {
        graph_events(t, s);
        tb_gpu_graph_launch(t->graph, t->stream, t->gev);
        if (t->tl) tb_step_timeline_replay(t->tl, s, t->graph_slot);
        tb_model_advance_counters(m); /* a replayed forward leaves the host counters alone */
        m->preset = 0;                /* the replay read the preset scalars */
        p->rec.graph = 1;
        t->replays++;
    } else if (t->graph_on && !t->force_eager && full && seen_batch(t, b->n) &&
               (t->recapture || t->eager_full >= t->hp.graph_warmup)) {
        if (capture_and_launch(t, b, step, lr, s)) p->rec.graph = 1;
        else step_body(t, b, step, lr, s, 0);
    } else {
        if (b->n > 0 && !seen_batch(t, b->n) && t->nseen < (int)(sizeof t->seen / sizeof t->seen[0]))
            t->seen[t->nseen++] = b->n; /* its conv plans are made in this step */
        if (!full && t->graph) t->recapture = 1;
        step_body(t, b, step, lr, s, 0);
        if (full) t->eager_full++;
    }
    /* the step scalars after the update, into pinned memory: loss, the
     * non-finite flag, fp16's counters (read when the step has finished) */
    if (t->native) tb_gpu_copy_d2h_async(p->sc_host, m->sc, sizeof *p->sc_host, t->stream);
    else be->copy_d2h(be, p->sc_host, m->sc, sizeof *p->sc_host);
    be->event_record(be, p->rb, NULL);
    if (p->rec.graph && t->path == TB_PATH_NCCL)
        tb_dev_watch_push(be->native_event(be, p->ev[E_END]), t->stream, step, "CUDA graph step (NCCL inside)");
    if (t->graph_on && (!t->graph || t->recapture)) t->pending_steps++;
    else t->pending_steps = 0;
    p->inflight = 1;
    t->queued++;
    t->prev_valid = 1;
    while (t->harvested < t->queued && harvest(t, (int)(t->harvested % TB_TRAINER_SLOTS), 0)) {
    }
    return 0;
}

int tb_trainer_step(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr, char *err, size_t errlen) {
    TB_ASSERT(b->global_n >= b->n && b->global_n > 0);
    if (!t->async) {
        tb_fault_process(t->rank, step);
        return step_sync(t, b, step, lr, err, errlen);
    }
    return step_async(t, b, step, lr);
}

int tb_trainer_collect(tb_trainer *t, tb_step_record *rec, int wait) {
    if (t->done_head == t->ndone && t->async && t->harvested < t->queued)
        harvest(t, (int)(t->harvested % TB_TRAINER_SLOTS), wait);
    if (t->done_head == t->ndone) return 0;
    *rec = t->done[t->done_head++];
    if (t->done_head == t->ndone) t->done_head = t->ndone = 0;
    return 1;
}

int tb_trainer_pending(const tb_trainer *t) { return (int)(t->queued - t->harvested) + (t->ndone - t->done_head); }

void tb_trainer_invalidate_graph(tb_trainer *t) {
    if (t->graph) t->recapture = 1;
    t->prev_valid = 0; /* the device ran something else between the steps */
}

void tb_trainer_break_idle(tb_trainer *t) { t->prev_valid = 0; }

void tb_trainer_force_eager(tb_trainer *t, int on) { t->force_eager = on; }

int tb_trainer_graph_pending(const tb_trainer *t) {
    return t->graph_on && (!t->graph || t->recapture) && t->pending_steps <= t->hp.graph_warmup + 1;
}

const char *tb_trainer_graph_status(const tb_trainer *t, int *replays) {
    if (replays) *replays = t->replays;
    return t->graph_why;
}

/* ---- replicas and losses ------------------------------------------------------------------ */

int tb_trainer_check_replicas(tb_trainer *t, uint64_t *hash) {
    tb_model *m = t->m;
    tb_backend *be = m->be;
    if (t->world > 1) bcast(t, m->state, m->pt.n_state);
    be->sync(be);
    uint64_t h = TB_FNV1A_INIT;
    be->copy_d2h(be, t->stage, m->params, m->pt.n_train * sizeof(tb_real));
    h = tb_fnv1a(h, t->stage, m->pt.n_train * sizeof(tb_real));
    be->copy_d2h(be, t->stage, m->momentum, m->pt.n_train * sizeof(tb_real));
    h = tb_fnv1a(h, t->stage, m->pt.n_train * sizeof(tb_real));
    be->copy_d2h(be, t->stage, m->state, m->pt.n_state * sizeof(tb_real));
    h = tb_fnv1a(h, t->stage, m->pt.n_state * sizeof(tb_real));
    h = tb_fnv1a(h, m->counters, (size_t)m->pt.n_counters * sizeof(int64_t));
    uint64_t *all = malloc((size_t)t->world * sizeof *all);
    tb_comm_allgather(t->comm, &h, all, sizeof h);
    int same = 1;
    for (int r = 1; r < t->world; r++)
        if (all[r] != all[0]) {
            same = 0;
            if (t->rank == 0)
                tb_warn("rank %d's weights differ from rank 0's (hash %016llx vs %016llx)", r,
                        (unsigned long long)all[r], (unsigned long long)all[0]);
        }
    *hash = all[0];
    free(all);
    return same;
}

void tb_trainer_global_losses(tb_trainer *t, const tb_step_record *recs, int n, double *loss) {
    double *v = malloc((size_t)(2 * n + 1) * sizeof *v);
    if (!v) TB_FATAL("out of host memory");
    for (int i = 0; i < n; i++) {
        v[2 * i] = recs[i].n > 0 ? recs[i].loss * recs[i].n : 0.0;
        v[2 * i + 1] = (double)recs[i].n;
    }
    tb_comm_allreduce_sum(t->comm, v, (size_t)(2 * n), TB_FLOAT64);
    for (int i = 0; i < n; i++) loss[i] = v[2 * i + 1] > 0 ? v[2 * i] / v[2 * i + 1] : NAN;
    free(v);
}
