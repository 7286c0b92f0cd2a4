/* trainer.c - a timed data-parallel training step (see trainer.h): the
 * trainer's creation, its gradient transport (a row of comm/grad_transport.h
 * picked by name), broadcasts, the public entry points and the replica
 * checks. The step itself: trainer_step.c (its one body, both modes) and
 * trainer_graph.c (the asynchronous step and its CUDA graph). */
#include "src/train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/faults.h"
#include "core/hash.h"
#include "core/log.h"
#include "src/results/results.h"
#include "src/train/trainer_internal.h"

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
    int ng = t->tr && t->tr->row->timing_events ? t->tr->row->timing_events(t->tr, 0, NULL) : 0;
    int nr = t->tl ? tb_step_timeline_events(t->tl, 0, NULL) : 0;
    t->nev = (E_COUNT - E_GRAPH_FIRST) + ng + nr;
    t->gev = calloc((size_t)t->nev, sizeof *t->gev);
    if (!t->gev) TB_FATAL("out of host memory");
}

/* Host copies of the broadcasts through the host (grad_transport.h). */
static void copy_d2h(void *ctx, void *dst, const void *src, size_t bytes) {
    tb_backend *be = ctx;
    be->copy_d2h(be, dst, src, bytes);
}
static void copy_h2d(void *ctx, void *dst, const void *src, size_t bytes) {
    tb_backend *be = ctx;
    be->copy_h2d(be, dst, src, bytes);
    be->sync(be);
}

/* The transport row the trainer takes: hp->transport for more than one rank
 * (and on one rank when explicit, for the device rows); NULL: none. */
static const tb_transport_row *pick_transport(const tb_trainer *t, const tb_train_hparams *hp) {
    if (!hp->transport || !(t->world > 1 || hp->transport_on_one_rank)) return NULL;
    const tb_transport_row *row = tb_transport_find(hp->transport);
    if (!row) TB_FATAL("no gradient transport called '%s'", hp->transport);
    if (!row->one_rank && t->world == 1) return NULL;
    if (row->on_device && !t->native) TB_FATAL("the %s gradient path needs a CUDA backend", row->name);
    return row;
}

static void make_transport(tb_trainer *t, const tb_transport_row *row) {
    tb_model *m = t->m;
    size_t *off;
    int nt;
    tensor_offsets(m, &off, &nt);
    t->bc = (tb_transport_opts){
        .comm = t->comm,
        .nccl = t->nccl,
        .device = t->hp.device,
        .grads = m->grads,
        .count = m->pt.n_train,
        .type = real_type(),
        .tensor_offsets = off,
        .ntensors = nt,
        .cap_bytes = t->hp.bucket_bytes,
        .first_bytes = t->hp.first_bucket_bytes,
        .overlap = t->hp.overlap,
        .bf16 = t->hp.bf16_allreduce,
        .compute_stream = t->stream,
        .slots = TB_TRAINER_SLOTS,
        .stage = t->stage,
        .copy_ctx = m->be,
        .copy_d2h = copy_d2h,
        .copy_h2d = copy_h2d,
    };
    if (row) t->tr = tb_transport_create(row->name, &t->bc);
    t->bc.tensor_offsets = NULL;
    free(off);
    if (t->async && tb_bprof_on()) t->tl = tb_step_timeline_create(m->be, TB_TRAINER_SLOTS, nt);
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
    const tb_transport_row *row = pick_transport(t, hp);
    size_t n = m->pt.n_train > m->pt.n_state ? m->pt.n_train : m->pt.n_state;
    t->stage = malloc(n * sizeof(tb_real));
    if (!t->stage) TB_FATAL("out of host memory");
    make_transport(t, row);
    if (t->async) {
        make_slots(t);
        /* the device flag instead of a host scan of the gradients */
        tb_model_set_nonfinite_skip(m, 1);
    }
    tb_trainer_graph_blocker(t, t->graph_why, sizeof t->graph_why);
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
    tb_transport_destroy(t->tr);
    tb_step_timeline_destroy(t->tl);
    free(t->gev);
    free(t->done);
    free(t->stage);
    free(t);
}

void tb_trainer_set_monitor(tb_trainer *t, tb_monitor *mon) { t->mon = mon; }
tb_model *tb_trainer_model(const tb_trainer *t) { return t->m; }

const tb_transport_row *tb_trainer_transport(const tb_trainer *t) { return t->tr ? t->tr->row : NULL; }
const char *tb_trainer_transport_name(const tb_trainer *t) { return t->tr ? t->tr->row->name : "none"; }

/* ---- broadcasts ------------------------------------------------------------------------ */

/* rank 0's n elements of dev to every rank: the transport's broadcast (on
 * the device over NCCL: no host wait, capturable), else through the host. */
void tb_trainer_bcast(tb_trainer *t, tb_real *dev, size_t n) {
    if (t->tr) t->tr->row->bcast(t->tr, dev, n);
    else tb_transport_bcast_staged(&t->bc, dev, n);
}

void tb_trainer_sync_state(tb_trainer *t) {
    if (t->world == 1) return;
    tb_model *m = t->m;
    tb_trainer_bcast(t, m->params, m->pt.n_train);
    tb_trainer_bcast(t, m->momentum, m->pt.n_train);
    tb_trainer_bcast(t, m->state, m->pt.n_state);
    m->be->sync(m->be);
    tb_comm_bcast(t->comm, m->counters, (size_t)m->pt.n_counters, TB_INT64, 0);
    if (m->loss_scaling) { /* the loss scaler too: a resumed run's rank 0 holds the checkpoint's */
        tb_step_scalars sc;
        tb_model_read_scalars(m, &sc);
        tb_comm_bcast(t->comm, &sc, sizeof sc, TB_BYTES, 0);
        tb_model_write_scalars(m, &sc);
    }
    m->op_stale = m->op_params != NULL; /* the op weight copies follow the new master weights */
}

void tb_trainer_sync_bn(tb_trainer *t) {
    if (t->world == 1) return;
    tb_trainer_bcast(t, t->m->state, t->m->pt.n_state);
    t->m->be->sync(t->m->be);
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

int tb_trainer_step(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr, char *err, size_t errlen) {
    TB_ASSERT(b->global_n >= b->n && b->global_n > 0);
    if (!t->async) {
        tb_fault_process(t->rank, step);
        return tb_trainer_step_sync(t, b, step, lr, err, errlen);
    }
    return tb_trainer_step_async(t, b, step, lr);
}

int tb_trainer_collect(tb_trainer *t, tb_step_record *rec, int wait) {
    if (t->done_head == t->ndone && t->async && t->harvested < t->queued)
        tb_trainer_harvest(t, (int)(t->harvested % TB_TRAINER_SLOTS), wait);
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

double tb_trainer_capture_s(const tb_trainer *t) { return t->capture_s; }

const char *tb_trainer_graph_status(const tb_trainer *t, int *replays) {
    if (replays) *replays = t->replays;
    return t->graph_why;
}

/* ---- replicas and losses ------------------------------------------------------------------ */

int tb_trainer_check_replicas(tb_trainer *t, uint64_t *hash) {
    tb_model *m = t->m;
    tb_backend *be = m->be;
    if (t->world > 1) tb_trainer_bcast(t, m->state, m->pt.n_state);
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
