/* trainer_graph.c - the asynchronous step (trainer.h): queued into a ring
 * slot with events at its phase boundaries, and, with --cuda-graph, its body
 * (the BatchNorm broadcast to the optimizer, trainer_step.c) captured once
 * into a CUDA graph and replayed. The graph's events are recorded as
 * external nodes and retargeted to the step's ring slot per launch. */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/faults.h"
#include "core/log.h"
#include "core/timer.h"
#include "src/train/trainer_internal.h"

/* Why the step cannot be captured, or "" when it can. */
void tb_trainer_graph_blocker(const tb_trainer *t, char *why, size_t len) {
    why[0] = '\0';
    if (!t->hp.cuda_graph) snprintf(why, len, "--cuda-graph off");
    else if (!t->native) snprintf(why, len, "the %s backend has no CUDA stream", t->m->be->name);
    else if (!t->async) snprintf(why, len, "the step is synchronous");
    else if (t->tr && t->tr->row->graph_blocker) snprintf(why, len, "%s", t->tr->row->graph_blocker);
    else if (getenv("TB_TEST_FAULT") && !tb_fault_kind("fatal-in-branch")) /* that one fires inside a capture */
        snprintf(why, len, "TB_TEST_FAULT is set (faults are injected eagerly)");
}

/* The step body queued eagerly (or recorded into a capture) in slot s. */
static void body(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr, int s, int capturing) {
    tb_step_mode md = {.sync = 0, .slot = s, .capturing = capturing, .rec = &t->slot[s].rec};
    (void)tb_trainer_step_body(t, b, step, lr, &md, NULL, 0); /* async: never -1 (the device flag) */
}

/* The events a graph launch of slot s records: E_BN..E_END, then the
 * buckets' start and end. */
static void graph_events(tb_trainer *t, int s) {
    tb_backend *be = t->m->be;
    int k = 0;
    for (int e = E_GRAPH_FIRST; e < E_COUNT; e++) t->gev[k++] = be->native_event(be, t->slot[s].ev[e]);
    if (t->tr && t->tr->row->timing_events) k += t->tr->row->timing_events(t->tr, s, t->gev + k);
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
    double t0 = tb_now(); /* the device is idle from here to the launch */
    tb_gpu_graph *g = NULL;
    static tb_fatal_trap trap; /* static: not clobbered by the longjmp */
    if (setjmp(trap.env) == 0) {
        tb_fatal_trap_set(&trap);
        tb_dev_watch_capturing(1);
        if (tb_gpu_capture_begin(t->stream, why, sizeof why) == 0) {
            body(t, b, step, lr, s, 1);
            graph_events(t, s);
            g = tb_gpu_capture_end(t->stream, t->gev, t->nev, why, sizeof why);
        }
        tb_dev_watch_capturing(0);
        tb_fatal_trap_set(NULL);
    } else { /* sprung (and cleared): a call inside the capture failed */
        tb_dev_watch_capturing(0);
        snprintf(why, sizeof why, "inside the capture: %.150s", trap.msg);
        m->be->capture_unwind(m->be); /* a second stream forked into the capture joins back first */
        tb_gpu_capture_abandon(t->stream);
        m->be->sync(m->be); /* the backend's own state too (a second stream's branch left open) */
        g = NULL;
    }
    const double captured = tb_now() - t0;
    t->capture_s += captured;
    t->slot[s].rec.capture_s = captured; /* not the step's time: harvest takes it out of h2d */
    if (!g) {
        if (t->world > 1)
            tb_die("--cuda-graph: capturing the training step failed on this rank (%s); the other ranks "
                   "may have captured theirs, so the run cannot fall back: rerun with --cuda-graph off",
                   why);
        if (tr_device_queued(t))
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
    /* the host captured while the device sat idle: that time falls in
     * the step's h2d phase (harvest takes rec.capture_s out of it), not in
     * the BatchNorm broadcast's (comm) interval that starts at E_H2D */
    tb_trainer_rec_ev(t, t->slot[s].ev[E_H2D]);
    tb_gpu_graph_launch(g, t->stream, t->gev);
    if (first)
        tb_info("# cuda graph: the step (BatchNorm broadcast to optimizer) captured at batch %d after %d eager "
                "step%s: %d nodes, replayed from now on",
                b->n, t->eager_full, t->eager_full == 1 ? "" : "s", tb_gpu_graph_nodes(g));
    return 1;
}

int tb_trainer_step_async(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr) {
    tb_model *m = t->m;
    tb_backend *be = m->be;
    tb_fault_process(t->rank, step);
    /* at most SLOTS - 1 steps in flight: a step's data phase reads the
     * previous step's end event, which must not be re-recorded before */
    while (t->queued - t->harvested >= TB_TRAINER_SLOTS - 1)
        tb_trainer_harvest(t, (int)(t->harvested % TB_TRAINER_SLOTS), 1);
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
    tb_trainer_rec_ev(t, p->ev[E_START]);
    tb_model_preset_scalars(m, lr, b->n > 0 ? (double)b->n / (double)b->global_n : 1.0);
    if (b->n > 0) tb_batch_upload_apply(m, b); /* outside any capture */
    tb_trainer_rec_ev(t, p->ev[E_H2D]);

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
    } else if (t->graph_on && !t->force_eager && full && t->eager_full >= 1 &&
               (t->recapture || t->eager_full >= t->hp.graph_warmup)) { /* a full step ran eagerly: its plans exist */
        if (capture_and_launch(t, b, step, lr, s)) {
            p->rec.graph = 1;
        } else {
            tb_trainer_rec_ev(t, p->ev[E_H2D]); /* the failed capture's time: h2d's, as a capture's */
            body(t, b, step, lr, s, 0);
        }
    } else {
        if (!full && t->graph) t->recapture = 1;
        body(t, b, step, lr, s, 0);
        if (full) t->eager_full++;
    }
    /* the step scalars after the update, into pinned memory: loss, the
     * non-finite flag, fp16's counters (read when the step has finished) */
    if (t->native) tb_gpu_copy_d2h_async(p->sc_host, m->sc, sizeof *p->sc_host, t->stream);
    else be->copy_d2h(be, p->sc_host, m->sc, sizeof *p->sc_host);
    be->event_record(be, p->rb, NULL);
    if (p->rec.graph && tr_device_queued(t))
        tb_dev_watch_push(be->native_event(be, p->ev[E_END]), t->stream, step, "CUDA graph step (NCCL inside)");
    if (t->graph_on && (!t->graph || t->recapture)) t->pending_steps++;
    else t->pending_steps = 0;
    p->inflight = 1;
    t->queued++;
    t->prev_valid = 1;
    while (t->harvested < t->queued && tb_trainer_harvest(t, (int)(t->harvested % TB_TRAINER_SLOTS), 0)) {
    }
    return 0;
}
