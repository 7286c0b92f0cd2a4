/* train_profile.c - `trainbench train --op-profile N`: after the timed steps
 * (and after --save and the replica check, so what they report is the
 * training's), N more steps of the same trainer on the same batch source,
 * run eagerly whatever --cuda-graph says (tb_trainer_force_eager), each
 * with model/op_profile.h's events around every op and waited for before
 * the next (the events are reused). They train on with the run's last
 * learning rate: an SGD step at lr 0 would still move the momentum buffers
 * and the BatchNorm statistics, so "not training" would need a copy of the
 * whole state, and the update is part of what is timed. Nothing they do
 * enters the run's reported timings (/steps, /ranks, the img/s line); the
 * scaling rows that follow train on a model further along, as they already
 * did after the training steps.
 *
 * Every rank profiles its own steps. Rank 0 prints and stores its means,
 * with the largest over ranks beside them: per kind and for the step
 * always, per row when every rank timed the same op list (a rank with no
 * sample in a step runs fewer ops: then per-row maxima are left out). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/log.h"
#include "model/op_profile.h"
#include "src/results/results.h"
#include "src/train/train_setup.h"

/* The op list's identity: row count and every row's key, in order. */
static uint64_t rows_hash(const tb_op_prof *p) {
    uint64_t h = tb_fnv1a(TB_FNV1A_INIT, &p->nrows, sizeof p->nrows);
    for (int i = 0; i < p->nrows; i++) {
        const tb_op_row *r = &p->rows[i];
        int tags[2] = {(int)r->phase, (int)r->kind};
        h = tb_fnv1a(h, r->name, strlen(r->name) + 1);
        h = tb_fnv1a(h, tags, sizeof tags);
    }
    return h;
}

/* One profiled step on the next training batch (the next epoch's once this
 * one is used up); returns its record, the device finished with it. */
static void profiled_step(tb_train_run *r, tb_op_prof *p, int64_t step, double lr, tb_step_record *rec) {
    int64_t spe = r->steps_per_epoch > 0 ? r->steps_per_epoch : 1;
    tb_monitor_progress(r->mon, step, "op profile: data", 0);
    tb_source_batch b;
    if (!tb_source_next(r->src, &b)) {
        tb_source_start_epoch(r->src, step / spe, 0);
        if (!tb_source_next(r->src, &b)) TB_FATAL("the training data gives no batch for --op-profile");
    }
    tb_model_set_op_profile(r->m, p);
    tb_op_prof_step_begin(p);
    char err[512];
    if (tb_trainer_step(r->tr, &b, step, lr, err, sizeof err) != 0) tb_train_stop_together(r, err);
    tb_source_release(r->src);
    tb_monitor_progress(r->mon, step, "op profile: waiting for the step", 0);
    if (!tb_trainer_collect(r->tr, rec, 1)) TB_FATAL("--op-profile: the profiled step left no record");
    tb_op_prof_step_end(p, NULL, NULL);
    tb_model_set_op_profile(r->m, NULL);
}

void tb_train_op_profile(tb_train_run *r, const tb_train_outcome *o) {
    int nsteps = r->fl.op_profile;
    if (nsteps <= 0) return;
    int rank = r->info.rank, world = r->info.world;
    tb_model *m = r->m;
    tb_step_record rec;
    while (tb_trainer_collect(r->tr, &rec, 1)) { /* none expected: the loop collected every step */
    }
    tb_op_prof *p = tb_op_prof_create(r->be, tb_model_op_profile_capacity(m));
    tb_trainer_force_eager(r->tr, 1);
    tb_trainer_break_idle(r->tr); /* the device waited for the report meanwhile */
    double lr = tb_lr_at(&r->sched, o->step > 0 ? o->step - 1 : 0);
    double step_ms = 0;
    int nonfinite = 0;
    for (int i = 0; i < nsteps; i++) {
        profiled_step(r, p, o->step + i, lr, &rec);
        step_ms += 1e3 * (rec.total - rec.phase[TB_PH_DATA]);
        nonfinite += rec.nonfinite;
    }
    tb_trainer_force_eager(r->tr, 0);
    tb_trainer_break_idle(r->tr);

    /* rank 0's means; the largest over ranks */
    int nr = p->nrows;
    double inv = 1.0 / p->steps;
    double *mean = calloc((size_t)nr + 1, sizeof *mean), *row_max = calloc((size_t)nr + 1, sizeof *row_max);
    double kind_ms[TB_OPK_COUNT + 1], kind_max[TB_OPK_COUNT + 1];
    int64_t kind_calls[TB_OPK_COUNT];
    if (!mean || !row_max) TB_FATAL("out of host memory");
    memset(kind_ms, 0, sizeof kind_ms);
    memset(kind_calls, 0, sizeof kind_calls);
    for (int i = 0; i < nr; i++) {
        mean[i] = p->rows[i].total_ms * inv;
        kind_ms[p->rows[i].kind] += mean[i];
        kind_calls[p->rows[i].kind] += p->rows[i].calls;
    }
    kind_ms[TB_OPK_COUNT] = step_ms / nsteps;
    memcpy(kind_max, kind_ms, sizeof kind_max);
    memcpy(row_max, mean, (size_t)nr * sizeof *mean);
    int same = 1;
    if (world > 1) {
        tb_monitor_progress(r->mon, o->step, "op profile gather", 1);
        tb_comm_allreduce_max(r->world, kind_max, TB_OPK_COUNT + 1, TB_FLOAT64);
        uint64_t h = rows_hash(p), *all = malloc((size_t)world * sizeof *all);
        if (!all) TB_FATAL("out of host memory");
        tb_comm_allgather(r->world, &h, all, sizeof h);
        for (int q = 1; q < world; q++) same &= all[q] == all[0];
        free(all);
        if (same) tb_comm_allreduce_max(r->world, row_max, (size_t)nr, TB_FLOAT64);
    }

    if (rank == 0) {
        tb_opp_summary s = {
            .steps = p->steps,
            .ranks = world,
            .batch = r->fl.batch,
            .precision = tb_precision_name(r->prec),
            .layout = tb_layout_name(m->g.layout),
            .backend = r->be->name,
            .step_ms = kind_ms[TB_OPK_COUNT],
            .step_ms_max_rank = world > 1 ? kind_max[TB_OPK_COUNT] : NAN,
            .ops_ms = p->ops_ms * inv,
            .span_ms = p->span_ms * inv,
            .timed_step_ms = o->mine.steps > 0
                                 ? 1e3 * (o->mine.step_s - o->mine.phase_s[TB_PH_DATA]) / o->mine.steps
                                 : NAN,
            .timed_steps = o->mine.steps,
            .timed_graph_steps = o->mine.graph_steps,
        };
        tb_opp_row *rows = calloc((size_t)nr + 1, sizeof *rows);
        int64_t *calls = calloc((size_t)nr + 1, sizeof *calls);
        tb_opp_kind kinds[TB_OPK_COUNT];
        if (!rows || !calls) TB_FATAL("out of host memory");
        for (int i = 0; i < nr; i++) {
            const tb_op_row *q = &p->rows[i];
            rows[i] = (tb_opp_row){q->name, tb_op_phase_name(q->phase), tb_op_kind_name(q->kind), mean[i],
                                   q->min_ms, world > 1 && same ? row_max[i] : world > 1 ? NAN : mean[i],
                                   (double)q->calls * inv};
            calls[i] = q->calls;
        }
        int nk = 0;
        for (int k = 0; k < TB_OPK_COUNT; k++)
            if (kind_calls[k] > 0)
                kinds[nk++] = (tb_opp_kind){tb_op_kind_name((tb_op_kind)k), kind_ms[k],
                                            world > 1 ? kind_max[k] : kind_ms[k], (double)kind_calls[k] * inv};
        tb_opp_print(stdout, TB_FMT_TEXT, &s, kinds, nk, rows, nr);
        if (world > 1 && !same)
            printf("# note: the ranks timed different op lists (a rank without samples in a step), so the "
                   "max rank column of single ops is left out\n");
        if (nonfinite)
            printf("# note: %d profiled step%s had NaN/Inf gradients: the update was skipped on the device\n",
                   nonfinite, nonfinite == 1 ? "" : "s");
        if (p->dropped_total)
            printf("# note: %lld ops past the profiler's %d per step were not timed (a bug: the pool is sized "
                   "from the graph)\n",
                   (long long)p->dropped_total, p->cap);
        fflush(stdout);
        tb_run_report_lock(&r->report);
        tb_opp_tables_fill(&r->report.op_profile, &r->report.op_kinds, &s, kinds, nk, rows, calls, nr);
        tb_run_report_unlock(&r->report);
        free(rows);
        free(calls);
    }
    free(mean);
    free(row_max);
    tb_op_prof_destroy(p);
}
