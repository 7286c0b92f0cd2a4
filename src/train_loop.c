/* train_loop.c - the training steps of `trainbench train` on every rank:
 * the LR schedule, a progress line every --print-every steps, checkpoints,
 * top-1/top-5 on --val after each epoch, per-step records (warm-up steps
 * marked and left out of the timing), a stop with the step and tensor name
 * on NaN/Inf. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/checkpoint.h"
#include "src/core/log.h"
#include "src/core/timer.h"
#include "src/trace.h"
#include "src/train_setup.h"

/* The loop's clocks and counters, shared by its helpers. */
typedef struct {
    int64_t warm_end;            /* first timed step */
    double t_begin, t_timed;     /* start of the loop, of the timed steps */
    double samples_run;          /* since start-up, all ranks (a short last step counts what it holds) */
} loop_clock;

/* Top-1 and top-5 accuracy over the whole validation set, every sample
 * counted once across ranks; returns how many samples were counted. */
static int64_t evaluate(tb_model *m, tb_source *val, tb_comm *comm, tb_monitor *mon, int64_t step,
                        double *top1, double *top5) {
    int classes = m->cfg.classes;
    float *logits = malloc((size_t)m->max_batch * (size_t)classes * sizeof *logits);
    double counts[3] = {0, 0, 0}; /* top1, top5, samples */
    tb_source_batch b;
    tb_monitor_progress(mon, step, "evaluation", 0);
    tb_source_start_epoch(val, 0, 0);
    while (tb_source_next(val, &b)) {
        if (b.n > 0) {
            tb_model_set_batch(m, b.images, b.labels, b.n);
            tb_model_forward(m, 0);
            tb_model_read_logits(m, logits);
            for (int i = 0; i < b.n; i++) {
                const float *row = logits + (size_t)i * classes;
                float mine = row[b.labels[i]];
                int better = 0; /* classes ranked strictly above the label */
                for (int c = 0; c < classes; c++) better += row[c] > mine;
                counts[0] += better < 1;
                counts[1] += better < 5;
            }
            counts[2] += b.n;
        }
        tb_source_release(val);
    }
    tb_monitor_progress(mon, step, "evaluation all-reduce", 1);
    tb_comm_allreduce_sum(comm, counts, 3, TB_FLOAT64);
    *top1 = counts[2] > 0 ? counts[0] / counts[2] : NAN;
    *top5 = counts[2] > 0 ? counts[1] / counts[2] : NAN;
    free(logits);
    return (int64_t)counts[2];
}

/* --val after a full epoch, on every rank; rank 0 prints it. */
static void evaluate_epoch(tb_train_run *r, tb_train_outcome *o, int64_t epoch) {
    tb_source *val = tb_train_source(&r->fl, &r->d, r->classes, r->info.rank, r->info.world, TB_USE_VAL);
    o->val_images = evaluate(r->m, val, r->world, r->mon, o->step, &o->top1, &o->top5);
    tb_source_destroy(val);
    if (o->val_images != r->d.val_ds.n)
        TB_FATAL("evaluation counted %lld images of %lld: the validation shards overlap or "
                 "leave samples out",
                 (long long)o->val_images, (long long)r->d.val_ds.n);
    if (r->info.rank == 0) {
        printf("eval   epoch %lld  top-1 %.2f %%  top-5 %.2f %%  (%lld images)\n", (long long)epoch,
               100 * o->top1, 100 * o->top5, (long long)o->val_images);
        fflush(stdout);
    }
}

void tb_train_save_checkpoint(tb_train_run *r, const char *path, int64_t step, int64_t epoch,
                              int64_t epoch_step) {
    tb_ckpt_meta meta;
    tb_ckpt_meta_for(&meta, r->m, r->image, step, epoch, r->fl.seed);
    meta.epoch_step = epoch_step;
    tb_run_report_lock(&r->report);
    tb_ckpt_save(path, r->m, &meta);
    tb_run_report_unlock(&r->report);
}

/* The global loss of the step just taken; a NaN/Inf stops every rank with
 * the first non-finite tensor's name. */
static double checked_loss(tb_train_run *r, const tb_step_record *rec, int64_t step) {
    tb_monitor_progress(r->mon, step, "loss all-reduce", 1);
    double loss = tb_trainer_global_loss(r->tr, rec);
    if (!isfinite(loss)) {
        char err[512];
        size_t n = 0;
        const char *p = tb_trainer_first_nonfinite(r->tr, r->m->params, &n);
        snprintf(err, sizeof err, "step %lld: the loss is %g; %s%s%s", (long long)step, loss,
                 p ? "the first non-finite tensor is " : "every parameter is finite (an "
                                                         "activation overflowed: lower --lr)",
                 p ? p : "", p ? " (lower --lr)" : "");
        tb_train_stop_together(r, err);
    }
    return loss;
}

/* The step's row of the results file's /steps table (img/s over the slowest
 * rank's step time; collective). */
static void record_step(tb_train_run *r, const tb_step_record *rec, int64_t step, int64_t epoch, int timed,
                        double loss, double lr) {
    double slowest = rec->total;
    tb_monitor_progress(r->mon, step, "step-time all-reduce", 1);
    tb_comm_allreduce_max(r->world, &slowest, 1, TB_FLOAT64);
    if (r->info.rank != 0) return;
    double row[14] = {(double)step, (double)epoch, timed, loss, lr, rec->global_n / slowest,
                      (double)rec->global_n, 1e3 * rec->total};
    for (int p = 0; p < TB_PH_COUNT; p++) row[8 + p] = 1e3 * rec->phase[p];
    tb_run_report_lock(&r->report);
    tb_table_row(&r->report.steps, row, NULL);
    tb_run_report_unlock(&r->report);
}

/* One training step on batch b, its records, progress line and checkpoint. */
static void train_step(tb_train_run *r, tb_train_outcome *o, loop_clock *c, const tb_source_batch *b,
                       int64_t epoch, int64_t *epoch_step) {
    int64_t step = o->step;
    if (step == c->warm_end) {
        tb_monitor_progress(r->mon, step, "timing barrier", 1);
        tb_comm_barrier(r->world);
        c->t_timed = tb_now();
    }
    tb_step_record rec;
    char err[512];
    double lr = tb_lr_at(&r->sched, step);
    if (tb_trainer_step(r->tr, b, step, lr, &rec, err, sizeof err) != 0) tb_train_stop_together(r, err);
    tb_source_release(r->src);
    if (step >= c->warm_end) tb_rank_summary_add(&o->mine, &rec);
    o->loss = checked_loss(r, &rec, step);
    if (step == r->start[0]) o->first_loss = o->loss;
    c->samples_run += (double)rec.global_n;
    record_step(r, &rec, step, epoch, step >= c->warm_end, o->loss, lr);
    step = ++o->step;
    ++*epoch_step;
    if (r->info.rank == 0 && (step == r->start[0] + 1 || step % r->fl.print_every == 0 || step == r->total)) {
        double el = tb_now() - c->t_begin;
        printf("step %6lld/%lld  epoch %lld  loss %8.4f  lr %.4g  img/s %9.2f  eta %5.0fs\n", (long long)step,
               (long long)r->total, (long long)epoch, o->loss, lr, c->samples_run / el,
               (double)(r->total - step) * el / (double)(step - r->start[0]));
        fflush(stdout);
    }
    if (r->fl.ckpt_every > 0 && step % r->fl.ckpt_every == 0 && r->info.rank == 0) {
        tb_monitor_progress(r->mon, step, "checkpoint", 0);
        tb_train_save_checkpoint(r, r->fl.ckpt, step, epoch, *epoch_step);
    }
}

void tb_train_loop(tb_train_run *r, tb_train_outcome *o) {
    memset(o, 0, sizeof *o);
    o->loss = o->first_loss = o->top1 = o->top5 = NAN;
    o->step = r->start[0];
    loop_clock c = {r->start[0] + r->fl.warmup, tb_now(), 0, 0};
    if (r->fl.trace[0]) { /* one time origin for every rank */
        tb_monitor_progress(r->mon, o->step, "trace barrier", 1);
        tb_comm_barrier(r->world);
        tb_trace_start(r->info.rank, (size_t)2000000);
    }
    for (int64_t epoch = r->start[1]; o->step < r->total; epoch++) {
        int64_t epoch_step = epoch == r->start[1] ? r->start[2] : 0;
        tb_source_start_epoch(r->src, epoch, epoch_step);
        tb_source_batch b;
        while (o->step < r->total) {
            tb_monitor_progress(r->mon, o->step, "data", 0);
            if (!tb_source_next(r->src, &b)) break;
            train_step(r, o, &c, &b, epoch, &epoch_step);
        }
        if (r->d.have_val_ds && epoch_step == r->steps_per_epoch) evaluate_epoch(r, o, epoch);
    }
    o->mine.elapsed_s = o->step > c.warm_end ? tb_now() - c.t_timed : 0;
}
