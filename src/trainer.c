/* trainer.c - a timed data-parallel training step (see trainer.h). */
#include "src/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/bucket_profile.h"
#include "src/faults.h"
#include "src/core/log.h"
#include "src/core/timer.h"
#include "src/trace.h"

const char *const tb_phase_name[TB_PH_COUNT] = {"data", "h2d", "forward", "backward", "allreduce",
                                                "optimizer"};

static tb_comm_type real_type(void) { return sizeof(tb_real) == 4 ? TB_FLOAT32 : TB_FLOAT64; }

tb_trainer *tb_trainer_create(tb_model *m, tb_comm *comm, const tb_train_hparams *hp) {
    tb_trainer *t = calloc(1, sizeof *t);
    if (!t) TB_FATAL("out of host memory");
    t->m = m;
    t->comm = comm;
    t->rank = tb_comm_rank(comm);
    t->world = tb_comm_size(comm);
    t->hp = *hp;
    size_t n = m->pt.n_train > m->pt.n_state ? m->pt.n_train : m->pt.n_state;
    t->stage = malloc(n * sizeof(tb_real));
    if (!t->stage) TB_FATAL("out of host memory");
    if (t->world > 1) {
        /* tensor boundaries of the flat gradient buffer */
        const tb_param_table *pt = &m->pt;
        size_t *off = malloc(((size_t)pt->count + 1) * sizeof *off);
        int nt = 0;
        for (int i = 0; i < pt->count; i++)
            if (tb_param_store_of(pt->items[i].role) == TB_STORE_TRAIN) off[nt++] = pt->items[i].offset;
        off[nt] = pt->n_train;
        t->gs = tb_grad_sync_create(comm, m->grads, pt->n_train, real_type(), off, nt,
                                    hp->bucket_bytes, hp->first_bucket_bytes, hp->overlap);
        free(off);
    }
    return t;
}

void tb_trainer_destroy(tb_trainer *t) {
    if (!t) return;
    tb_grad_sync_destroy(t->gs);
    free(t->stage);
    free(t);
}

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

void tb_trainer_sync_state(tb_trainer *t) {
    if (t->world == 1) return;
    tb_model *m = t->m;
    bcast_device(t, m->params, m->pt.n_train);
    bcast_device(t, m->momentum, m->pt.n_train);
    bcast_device(t, m->state, m->pt.n_state);
    tb_comm_bcast(t->comm, m->counters, (size_t)m->pt.n_counters, TB_INT64, 0);
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
    tb_grad_sync_ready(t->gs, offset, count);
}

int tb_trainer_step(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr,
                    tb_step_record *rec, char *err, size_t errlen) {
    tb_model *m = t->m;
    tb_backend *be = m->be;
    tb_fault_process(t->rank, step);
    memset(rec, 0, sizeof *rec);
    rec->n = b->n;
    rec->global_n = b->global_n;
    rec->lr = lr;
    rec->phase[TB_PH_DATA] = b->wait_s;
    TB_ASSERT(b->global_n >= b->n && b->global_n > 0);

    double tb = tb_now();
    tb_monitor_progress(t->mon, step, "BatchNorm statistics broadcast", 1);
    if (t->world > 1) bcast_device(t, m->state, m->pt.n_state);
    if (t->gs) tb_grad_sync_begin(t->gs);
    double t0 = tb_now();
    double t1 = t0, t2 = t0, t3 = t0;
    if (b->n > 0) {
        tb_monitor_progress(t->mon, step, "forward", 0);
        tb_model_set_batch(m, b->images, b->labels, b->n);
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
        for (int i = 0; i < m->pt.n_counters; i++) m->counters[i] += 1;
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
    return 0;
}

/* FNV-1a over bytes, continuing from h. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

int tb_trainer_check_replicas(tb_trainer *t, uint64_t *hash) {
    tb_model *m = t->m;
    tb_backend *be = m->be;
    bcast_device(t, m->state, m->pt.n_state);
    uint64_t h = 0xcbf29ce484222325ULL;
    be->copy_d2h(be, t->stage, m->params, m->pt.n_train * sizeof(tb_real));
    h = fnv1a(h, t->stage, m->pt.n_train * sizeof(tb_real));
    be->copy_d2h(be, t->stage, m->momentum, m->pt.n_train * sizeof(tb_real));
    h = fnv1a(h, t->stage, m->pt.n_train * sizeof(tb_real));
    be->copy_d2h(be, t->stage, m->state, m->pt.n_state * sizeof(tb_real));
    h = fnv1a(h, t->stage, m->pt.n_state * sizeof(tb_real));
    h = fnv1a(h, m->counters, (size_t)m->pt.n_counters * sizeof(int64_t));
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

double tb_trainer_global_loss(tb_trainer *t, const tb_step_record *rec) {
    double v[2] = {rec->n > 0 ? (double)tb_model_read_loss(t->m) * rec->n : 0.0, (double)rec->n};
    tb_comm_allreduce_sum(t->comm, v, 2, TB_FLOAT64);
    return v[1] > 0 ? v[0] / v[1] : NAN;
}
