/* trainer_step.c - the one body of a training step, from the BatchNorm
 * broadcast to the optimizer, for both ways of running it (trainer.h):
 *
 *   sync   the CPU backend's step: every phase boundary is a host sync and
 *          a host-clock time; NaN/Inf in the summed gradients stops the step
 *          before the update
 *   async  queued on the compute stream with an event at every phase
 *          boundary (trainer_graph.c queues it, or captures it)
 *
 * The gradients go through the trainer's transport row (comm/grad_transport.h):
 * begin, the grad-ready hook that launches buckets, finish. Also here: the
 * test faults inside backward, the sync step's record and trace, and the
 * harvest of finished async steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/faults.h"
#include "core/log.h"
#include "core/timer.h"
#include "src/results/results.h"
#include "src/train/fault_strike.h"
#include "src/train/trace.h"
#include "src/train/trainer_internal.h"

/* Test only (TB_TEST_FAULT=nan): a NaN in the first tensor's gradient. */
static void inject_nan(tb_trainer *t) {
    tb_real nan = (tb_real)NAN;
    t->m->be->copy_h2d(t->m->be, t->m->grads, &nan, sizeof nan);
    t->m->be->sync(t->m->be);
}

/* The transport's grad-ready hook (buckets are launched from it). */
static void ready_transport(tb_trainer *t, size_t offset, size_t count) {
    if (t->tr) t->tr->row->launch(t->tr->impl, offset, count);
}

/* The gradient-ready callback with the NaN fault: the NaN is written before
 * the range holding the first tensor goes to the all-reduce, so every rank
 * sums it (written after backward, it could miss a bucket already sent). */
static void ready_with_nan(void *ctx, size_t offset, size_t count) {
    tb_trainer *t = ctx;
    if (offset == 0) inject_nan(t);
    ready_transport(t, offset, count);
}

/* The gradient-ready callback with a fault inside backward (faults.h
 * kill-bwd, freeze-bwd, nccl-abort): it strikes once a bucket has gone to
 * communication (on a device path; else at the first range), so that
 * collectives of this step are in flight and others are still to come
 * (with --no-overlap none goes before finish: the step body strikes then). */
static void ready_with_fault(void *ctx, size_t offset, size_t count) {
    tb_trainer *t = ctx;
    if (t->fault_nan) ready_with_nan(ctx, offset, count);
    else ready_transport(t, offset, count);
    if (t->fault_mid && (!t->tr || t->tr->row->launched(t->tr) > 0)) {
        t->fault_mid = 0;
        tb_fault_strike_in_backward(t->rank);
    }
}

void tb_trainer_rec_ev(tb_trainer *t, tb_event *e) {
    tb_backend *be = t->m->be;
    if (t->native) tb_gpu_record_timing(be->native_event(be, e), t->stream);
    else be->event_record(be, e, NULL);
}

/* Phase boundary e (E_*): sync, a host sync and the host clock; async, the
 * slot's event on the compute stream. */
static void mark(tb_trainer *t, tb_step_mode *md, int e) {
    tb_backend *be = t->m->be;
    if (md->sync) {
        be->sync(be);
        md->t[e] = tb_now();
    } else {
        tb_trainer_rec_ev(t, t->slot[md->slot].ev[e]);
    }
}

/* Forward, loss and backward of a batch with samples; the buckets leave
 * from the grad-ready hook. */
static void forward_backward(tb_trainer *t, const tb_source_batch *b, int64_t step, tb_step_mode *md) {
    tb_model *m = t->m;
    tb_monitor_progress(t->mon, step, "forward", 0);
    if (md->sync) { /* the async step uploaded before its body (outside a capture) */
        tb_batch_upload_apply(m, b);
        mark(t, md, E_H2D);
    }
    tb_model_forward(m, 1);
    tb_model_loss(m, t->hp.label_smoothing, (double)b->n / (double)b->global_n);
    mark(t, md, E_FWD);
    tb_monitor_progress(t->mon, step, "backward", 0);
    tb_grad_ready_fn fn = t->tr ? t->tr->row->launch : NULL;
    void *fctx = t->tr ? t->tr->impl : NULL;
    if (md->sync) tb_bprof_wrap(&fn, &fctx); /* `trainbench project`'s timeline (bucket_profile.h) */
    if ((t->fault_nan && t->tr) || t->fault_mid) fn = ready_with_fault, fctx = t;
    if (t->tl) tb_step_timeline_wrap(t->tl, md->slot, &fn, &fctx); /* the per-range events (step_timeline.h) */
    tb_model_backward(m, fn, fctx);
    mark(t, md, E_BWD);
}

/* No samples here this step (--last-batch keep): contribute zero gradients
 * to every bucket (the transport launches them in the same order as the
 * other ranks do; the loss pre-scale n/global_n gives this rank weight 0
 * anyway), and advance num_batches_tracked as a training forward would
 * (graph.c: +1 per BatchNorm, one counter each), so the counters stay equal
 * across ranks. The running statistics need nothing: rank 0's are broadcast
 * before every forward. */
static void no_samples(tb_trainer *t, tb_step_mode *md) {
    tb_model *m = t->m;
    tb_backend *be = m->be;
    if (t->tl) tb_step_timeline_skip(t->tl, md->slot); /* zeros, weight 0, counters advanced */
    be->zero(be, m->grads, m->pt.n_train * sizeof(tb_real));
    if (md->sync) be->sync(be);
    tb_model_advance_counters(m);
    mark(t, md, E_FWD);
    ready_transport(t, 0, m->pt.n_train);
    mark(t, md, E_BWD);
    if (md->sync) md->t[E_H2D] = md->t[E_FWD] = md->t[E_BWD]; /* the zeros count as h2d, as ever */
}

/* sync: the non-finite check of the summed gradients, before the update. */
static int check_finite(tb_trainer *t, int64_t step, char *err, size_t errlen) {
    tb_model *m = t->m;
    size_t bad = 0;
    /* under fp16 loss scaling an overflow is expected: the update skips it on the device */
    const char *name = m->loss_scaling ? NULL : tb_trainer_first_nonfinite(t, m->grads, &bad);
    if (!name) return 0;
    snprintf(err, errlen,
             "step %lld: the gradient of %s holds %zu NaN/Inf value%s%s; the run stops before "
             "the update (lower --lr, or check the data)",
             (long long)step, name, bad, bad > 1 ? "s" : "", t->world > 1 ? " after the all-reduce" : "");
    return -1;
}

/* The sync step's hook 2 of bucket_profile.h: its buckets on the host
 * clock, from the start of backward (read only while it records) */
static void sync_bprof(const tb_trainer *t, const tb_step_mode *md, int64_t step) {
    int nb = 0;
    tb_bucket_time *b = tb_bprof_on() ? tb_transport_bucket_times(t->tr, 0, md->t[E_FWD], NULL, &nb) : NULL;
    tb_bprof_step(t->world, step, nb > 0 ? nb : 0, b, sizeof(tb_real), t->hp.bucket_bytes, t->hp.first_bucket_bytes,
                  t->hp.overlap, md->t[E_FWD], md->t[E_BWD], md->t[E_COMM]);
    free(b);
}

int tb_trainer_step_body(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr, tb_step_mode *md,
                         char *err, size_t errlen) {
    tb_model *m = t->m;
    tb_transport *tr = t->tr;
    if (md->sync || t->world > 1)
        tb_monitor_progress(t->mon, step,
                            t->hp.bn_broadcast ? "BatchNorm statistics broadcast" : "forward and backward",
                            !tr_device_queued(t));
    if (t->world > 1 && t->hp.bn_broadcast) tb_trainer_bcast(t, m->state, m->pt.n_state);
    if (tr) tr->row->begin(tr, step, md->slot);
    mark(t, md, E_BN);
    t->fault_nan = !md->capturing && tb_fault("nan", t->rank, step);
    t->fault_mid = !md->capturing && tb_fault_in_backward(t->rank, step);
    if (b->n > 0) forward_backward(t, b, step, md);
    else no_samples(t, md);
    if (t->fault_nan) { /* test only, no all-reduce to hand it to (see ready_with_nan) */
        if (!tr) inject_nan(t);
        t->fault_nan = 0;
    }
    if (tr || md->sync) tb_monitor_progress(t->mon, step, "gradient all-reduce", !tr_device_queued(t));
    if (tr) tr->row->finish(tr, md->slot, &md->rec->sync);
    if (t->fault_mid && b->n > 0) { /* --no-overlap: no bucket left during backward; strike with all queued */
        t->fault_mid = 0;
        tb_fault_strike_in_backward(t->rank);
    }
    if (t->tl && tr) tb_step_timeline_host_buckets(t->tl, md->slot, tr);
    mark(t, md, E_COMM);
    if (md->sync) {
        sync_bprof(t, md, step);
        if (check_finite(t, step, err, errlen) != 0) return -1;
    }
    tb_monitor_progress(t->mon, step, "optimizer", 0);
    tb_sgd_args sgd = {lr, t->hp.momentum, t->hp.nesterov, 1.0};
    tb_model_sgd_step(m, &sgd, t->hp.weight_decay, t->hp.no_bn_decay);
    mark(t, md, E_END);
    return 0;
}

/* The records of finished steps, oldest first. */
void tb_trainer_push_done(tb_trainer *t, const tb_step_record *r) {
    if (t->done_head > 0 && t->done_head == t->ndone) t->done_head = t->ndone = 0;
    if (t->ndone == t->done_cap) {
        t->done_cap = t->done_cap ? 2 * t->done_cap : 16;
        t->done = realloc(t->done, (size_t)t->done_cap * sizeof *t->done);
        if (!t->done) TB_FATAL("out of host memory");
    }
    t->done[t->ndone++] = *r;
}

/* --trace: the sync step's phases and buckets on the host clock. */
static void trace_sync(const tb_trainer *t, const tb_step_mode *md, double wait_s, int64_t step) {
    const double *x = md->t;
    const double edges[TB_PH_COUNT + 1] = {x[E_START] - wait_s, x[E_START], x[E_H2D], x[E_FWD],
                                           x[E_BWD],            x[E_COMM],  x[E_END]};
    tb_trace_event(tb_phase_name[TB_PH_DATA], TB_TRACE_COMPUTE, edges[0], x[E_START], step, -1, 0);
    tb_trace_event("BN broadcast", TB_TRACE_COMPUTE, x[E_START], x[E_BN], step, -1, 0);
    tb_trace_event(tb_phase_name[TB_PH_H2D], TB_TRACE_COMPUTE, x[E_BN], x[E_H2D], step, -1, 0);
    for (int p = TB_PH_FWD; p < TB_PH_COUNT; p++)
        tb_trace_event(tb_phase_name[p], TB_TRACE_COMPUTE, edges[p], edges[p + 1], step, -1, 0);
    int nb;
    tb_bucket_time *bk = tb_transport_bucket_times(t->tr, 0, 0, NULL, &nb); /* host clock, absolute */
    for (int i = 0; i < nb; i++)
        tb_trace_event("all-reduce bucket", TB_TRACE_COMM, bk[i].start_s, bk[i].end_s, step, i,
                       (double)bk[i].cnt * sizeof(tb_real));
    free(bk);
}

int tb_trainer_step_sync(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr, char *err,
                         size_t errlen) {
    tb_step_record rec;
    memset(&rec, 0, sizeof rec);
    rec.step = step;
    rec.n = b->n;
    rec.global_n = b->global_n;
    rec.lr = lr;
    rec.loss = NAN;
    rec.loss_scale = 1;
    rec.phase[TB_PH_DATA] = b->wait_s;
    tb_step_mode md = {.sync = 1, .rec = &rec};
    md.t[E_START] = tb_now();
    if (tb_trainer_step_body(t, b, step, lr, &md, err, errlen) != 0) return -1;
    const double *x = md.t;
    rec.phase[TB_PH_H2D] = x[E_H2D] - x[E_BN];
    rec.phase[TB_PH_FWD] = x[E_FWD] - x[E_H2D];
    rec.phase[TB_PH_BWD] = x[E_BWD] - x[E_FWD];
    rec.phase[TB_PH_COMM] = (x[E_BN] - x[E_START]) + (x[E_COMM] - x[E_BWD]); /* BN broadcast + exposed buckets */
    rec.bcast_s = x[E_BN] - x[E_START];
    rec.phase[TB_PH_OPT] = x[E_END] - x[E_COMM];
    rec.total = rec.phase[TB_PH_DATA] + (x[E_END] - x[E_START]);
    if (b->n > 0) rec.loss = tb_model_read_loss(t->m);
    if (tb_trace_on()) trace_sync(t, &md, b->wait_s, step);
    tb_trainer_push_done(t, &rec);
    return 0;
}

/* Reads slot s's finished step into the done queue: 1, or 0 when it has
 * not finished and wait is 0. */
int tb_trainer_harvest(tb_trainer *t, int s, int wait) {
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
    r->bcast_s = EL(E_H2D, E_BN);
    r->phase[TB_PH_OPT] = EL(E_COMM, E_END);
    r->total = r->phase[TB_PH_DATA] + EL(E_START, E_END);
    if (r->capture_s > 0) { /* a capture's host time, the device idle in h2d: no part of the step */
        double c = r->capture_s < r->phase[TB_PH_H2D] ? r->capture_s : r->phase[TB_PH_H2D];
        r->phase[TB_PH_H2D] -= c, r->total -= c;
    }
    if (t->tr && t->tr->row->event_stats)
        t->tr->row->event_stats(t->tr, s, be->native_event(be, p->ev[E_FWD]), &r->sync);
    if (t->tr) r->sync.exposed_s = EL(E_BWD, E_COMM);
    if (t->tl)
        tb_step_timeline_harvest(t->tl, s, r->step, t->world, p->ev[E_FWD], EL(E_FWD, E_BWD),
                                 EL(E_BWD, E_COMM),
                                 t->tr, sizeof(tb_real), t->hp.bucket_bytes, t->hp.first_bucket_bytes,
                                 t->hp.overlap);
#undef EL
    const tb_step_scalars *sc = p->sc_host;
    if (r->n > 0) r->loss = (double)sc->loss;
    r->nonfinite = !t->m->loss_scaling && sc->found_inf;
    r->skipped_steps = sc->skipped_steps;
    r->loss_scale = (double)sc->loss_scale;
    tb_trainer_push_done(t, r);
    p->inflight = 0;
    t->harvested++;
    return 1;
}
