/* train_scaling.c - the in-launch scaling measurement of `trainbench train`:
 * for k = 1, 2, 4, ... N the first k ranks train with the same per-rank batch
 * for --scaling-warmup + --scaling-steps steps (full steps: the source pads)
 * while the others wait asleep, not spinning on a core the row's ranks may
 * need; each row comes from the per-rank summaries gathered on rank 0
 * (scaling.h). Rank 0 prints a line as each row starts and ends. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/faults.h"
#include "core/log.h"
#include "core/timer.h"
#include "src/train/train_setup.h"

static int scaling_sizes(int world, int *sizes) {
    int n = 0;
    for (int k = 1; k < world; k *= 2) sizes[n++] = k;
    sizes[n++] = world;
    return n;
}

/* Collects every step of t queued so far (waiting for the device) into
 * *mine when timed; a step whose summed gradients held NaN/Inf ends the
 * measurement on every rank alike. */
static void collect_all(tb_trainer *t, int k, int timed, tb_rank_summary *mine) {
    tb_step_record rec;
    while (tb_trainer_collect(t, &rec, 1)) {
        if (rec.nonfinite)
            tb_die("scaling measurement with %d ranks: step %lld: the summed gradients hold NaN/Inf (the update "
                   "was skipped on the device); lower --lr",
                   k, (long long)rec.step);
        if (timed) tb_rank_summary_add(mine, &rec);
    }
}

double tb_train_scaling_min_s(const tb_train_run *r) {
    if (r->fl.scaling_min_s >= 0) return r->fl.scaling_min_s;
    return strcmp(r->be->name, "cuda") == 0 ? TB_NVML_UTIL_ROW_S : 0; /* the backend is alike on all ranks */
}

/* One row on the k ranks of `sub`: untimed warm-up steps, then the timed
 * ones, summarised in *mine. */
static void measure_row(tb_train_run *r, tb_comm *sub, tb_nccl *nsub, const tb_train_hparams *hp, double lr,
                        tb_rank_summary *mine) {
    const tb_train_flags *f = &r->fl;
    int k = tb_comm_size(sub);
    tb_trainer *t = tb_trainer_create(r->m, sub, nsub, hp);
    tb_trainer_set_monitor(t, r->mon);
    tb_trainer_sync_state(t);
    /* the row's source (a synthetic pool, a loader): this rank's own work, no collective */
    tb_monitor_progress(r->mon, 0, "scaling row's data source", 0);
    tb_source *src = tb_train_source(f, &r->d, r->classes, tb_comm_rank(sub), k, TB_USE_SCALING, r->be);
    tb_source_feed(src, r->m); /* fed as the training run's source */
    int64_t epoch = 0;
    tb_source_start_epoch(src, epoch, 0);
    double t_start = 0;
    int warm = f->scaling_warmup, timed = f->scaling_steps;
    double min_s = tb_train_scaling_min_s(r); /* the same on every rank: the length check is a collective */
    for (int s = 0; s < warm + timed; s++) {
        /* each row's trainer captures its own CUDA graph (after --graph-warmup
         * eager steps): the capture and instantiation, host time with the
         * device idle, stay in the warm-up (alike on every rank) */
        if (s == warm && tb_trainer_graph_pending(t)) warm++;
        if (s == warm) {
            collect_all(t, k, 0, mine); /* the warm-up ends on the device before the clock starts */
            tb_monitor_progress(r->mon, s, "scaling barrier", 1);
            tb_comm_barrier(sub);
            tb_trainer_break_idle(t); /* the wait before the clock is no timed step's data time */
            t_start = tb_now();
            if (r->util) tb_nvml_sampler_reset(r->util);
        }
        tb_source_batch b;
        tb_monitor_progress(r->mon, s, "data", 0); /* waiting for the loader is no collective (as in training) */
        if (!tb_source_next(src, &b)) { /* wrap into the next epoch */
            tb_source_start_epoch(src, ++epoch, 0);
            if (!tb_source_next(src, &b)) TB_FATAL("data source yields no batch");
        }
        char err[512];
        double t_step = tb_now();
        if (tb_trainer_step(t, &b, s, lr, err, sizeof err) != 0) tb_die("scaling measurement with %d ranks: %s", k, err);
        t_step = tb_now() - t_step;
        if (s >= warm && tb_fault("slow-row", r->info.rank, k)) {
            /* test only: the k-rank row slowed 4x (at least 0.2 s a step), on a slow machine too */
            double p = fmax(0.2, 3 * t_step);
            struct timespec pause = {(time_t)p, (long)((p - floor(p)) * 1e9)};
            nanosleep(&pause, NULL);
        }
        tb_source_release(src);
        if (s == warm + timed - 1 && min_s > 0) {
            /* the timed steps so far, finished on the device: if the row is
             * shorter than min_s on its slowest rank, every rank runs the
             * same number of steps more (NVML's GPU-Util needs 1 s, src/device/nvml.h) */
            collect_all(t, k, 1, mine);
            double el = tb_now() - t_start;
            tb_monitor_progress(r->mon, s, "scaling row length", 1);
            tb_comm_allreduce_max(sub, &el, 1, TB_FLOAT64);
            tb_monitor_progress(r->mon, s, "scaling row", 0);
            if (el < min_s) timed += (int)fmin(1e6, ceil((min_s - el) / (el / (s + 1 - warm)) * 1.05));
        }
    }
    collect_all(t, k, 1, mine);
    tb_bprof_row_warmup(k, warm); /* every step harvested: the capture, when there was one, left out */
    mine->elapsed_s = tb_now() - t_start;
    tb_train_device_summary(r, mine);
    tb_source_destroy(src);
    tb_trainer_destroy(t);
}

int tb_train_measure_scaling(tb_train_run *r, double lr, tb_scaling_row *rows) {
    const tb_train_flags *f = &r->fl;
    tb_comm *world = r->world;
    int wrank = tb_comm_rank(world), wsize = tb_comm_size(world);
    int sizes[40];
    int ns = scaling_sizes(wsize, sizes);
    tb_rank_summary *all = calloc((size_t)wsize, sizeof *all);
    for (int i = 0; i < ns; i++) {
        int k = sizes[i];
        double t0 = tb_now();
        if (wrank == 0) {
            printf("# scaling row %d of %d: %d rank%s, %d warm-up + %d timed steps of batch %d per rank ...\n",
                   i + 1, ns, k, k > 1 ? "s" : "", f->scaling_warmup, f->scaling_steps, f->batch);
            fflush(stdout);
        }
        /* the watchdog's lines name the row: its steps count from 0 again */
        char phase[80]; /* the watchdog keeps 39 characters: "scaling row 12 of 12 (2048 ranks)" fits */
        snprintf(phase, sizeof phase, "scaling row %d of %d (%d rank%s)", i + 1, ns, k, k > 1 ? "s" : "");
        tb_monitor_phase(r->mon, phase);
        /* until the row's first step: the row's communicators (collective
         * over the world), not the last row's closing barrier */
        tb_monitor_progress(r->mon, 0, "scaling row start", 1);
        tb_rank_summary mine;
        memset(&mine, 0, sizeof mine);
        tb_train_hparams hp = r->hp;
        if (k == 1 && wsize > 1) hp.transport_on_one_rank = 0; /* the 1-rank row runs without communication */
        /* the row's NCCL communicator: split from the world's (collective
         * over it, so every rank takes part), the world's own for all ranks */
        tb_nccl *nsub = NULL;
        if (r->nccl && hp.transport && strcmp(hp.transport, "nccl") == 0 && (k > 1 || wsize == 1)) {
            tb_monitor_progress(r->mon, 0, "NCCL communicator split", 1);
            nsub = k == wsize ? r->nccl : tb_nccl_first_n(r->nccl, k, f->timeout);
        }
        tb_comm *sub = tb_comm_first_n(world, k);
        if (sub) {
            measure_row(r, sub, nsub, &hp, lr, &mine);
            tb_comm_free(sub);
            tb_monitor_progress(r->mon, 0, "scaling barrier", 1);
        } else {
            /* not a collective the watchdog should time: ranks 0..k-1 are busy */
            tb_monitor_progress(r->mon, 0, "waiting for the scaling rows of fewer ranks", 0);
        }
        if (nsub && nsub != r->nccl) tb_nccl_destroy(nsub);
        tb_comm_barrier_idle(world, 0.005);
        tb_comm_gather(world, &mine, all, sizeof mine, 0);
        if (wrank == 0) {
            tb_scaling_row_from(&rows[i], all, k, f->batch, r->dataset_size, strcmp(r->be->name, "cpu") == 0);
            printf("# scaling row %d of %d: %d rank%s, %.2f img/s over %d timed step%s (%.1f s)\n", i + 1, ns, k,
                   k > 1 ? "s" : "", rows[i].img_per_s, all[0].steps, all[0].steps == 1 ? "" : "s", tb_now() - t0);
            fflush(stdout);
        }
    }
    tb_monitor_phase(r->mon, ""); /* the run's own steps again */
    if (wrank == 0) tb_scaling_finish(rows, ns);
    free(all);
    return ns;
}
