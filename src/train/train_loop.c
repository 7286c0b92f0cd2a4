/* train_loop.c - the training steps of `trainbench train` on every rank:
 * the LR schedule, a progress line every --print-every steps, checkpoints,
 * top-1/top-5 on --val after each epoch, per-step records (warm-up steps
 * marked and left out of the timing), a stop with the step and tensor name
 * on NaN/Inf. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/faults.h"
#include "core/log.h"
#include "core/timer.h"
#include "src/results/results.h"
#include "src/train/trace.h"
#include "src/train/train_setup.h"

/* Work timed apart from training (checkpoints, evaluations): left out of
 * every img/s, and out of the timed wall and CPU budget where it falls
 * inside the timed steps. */
typedef struct {
    double s;                    /* wall seconds so far */
    double timed_s;              /* of them, those inside the timed steps */
    double cpu_timed_s;          /* the CPU seconds in those (the clock its owner gives) */
} set_aside;

/* The loop's clocks and counters, shared by its helpers. */
typedef struct {
    int64_t warm_end;            /* first timed step */
    double t_begin, t_timed;     /* start of the loop, of the timed steps */
    double cpu_timed;            /* process CPU time at the start of the timed steps */
    double loader_cpu_timed;     /* the loader threads' CPU time then */
    double samples_run;          /* since start-up, all ranks (a short last step counts what it holds) */
    double samples_timed0;       /* samples_run when the clock started */
    set_aside ckpt;              /* the checkpoints (rank 0's write and every rank's wait for it) */
    set_aside eval;              /* the --val evaluations */
    set_aside capture;           /* CUDA graph re-captures (after an evaluation), the device idle */
    /* steps queued whose records have not been flushed yet: their epochs, in order */
    int64_t *epochs;
    int nq, qhead, qcap;
    tb_step_record *recs;        /* collected, waiting for the flush's collectives */
    int nrec, rcap;
    int64_t epoch, epoch_step;   /* where the last step trained: its epoch, steps of it done */
} loop_clock;

static void queue_epoch(loop_clock *c, int64_t epoch) {
    if (c->qhead > 0 && c->qhead == c->nq) c->qhead = c->nq = 0;
    if (c->nq == c->qcap) {
        c->qcap = c->qcap ? 2 * c->qcap : 64;
        c->epochs = realloc(c->epochs, (size_t)c->qcap * sizeof *c->epochs);
        if (!c->epochs) TB_FATAL("out of host memory");
    }
    c->epochs[c->nq++] = epoch;
}

/* dt wall and cpu CPU seconds of set-aside work done after `step` steps
 * (inside the timed steps when past the first timed one, warm_end). */
static void set_aside_add(set_aside *a, const loop_clock *c, int64_t step, double dt, double cpu) {
    a->s += dt;
    if (step > c->warm_end) {
        a->timed_s += dt;
        a->cpu_timed_s += cpu;
    }
}

/* Whether class c ranks above class l in logits `row`, in the order of
 * torch.topk / argmax: NaN above every number, a larger value above a
 * smaller, and between equal values the lower index first (so a model
 * whose logits are all equal is right only for class 0, not for every
 * label, and a NaN logit is no hit). */
static int ranks_above(const float *row, int c, int l) {
    int nc = isnan(row[c]), nl = isnan(row[l]);
    if (nc != nl) return nc;
    if (!nc && row[c] != row[l]) return row[c] > row[l];
    return c < l;
}

/* Top-1 and top-5 accuracy over the whole validation set, every sample
 * counted once across ranks. A sample whose file is bad comes labelled -1
 * (the loader's keep_bad_place) and is left out of the accuracy, counted in
 * counts[3]. counts: top-1 hits, top-5 hits, samples scored, bad. */
static void evaluate(tb_model *m, tb_source *val, tb_comm *comm, tb_monitor *mon, int64_t step, double counts[4]) {
    int classes = m->cfg.classes;
    float *logits = malloc((size_t)m->max_batch * (size_t)classes * sizeof *logits);
    int32_t *labels = malloc((size_t)m->max_batch * sizeof *labels);
    if (!logits || !labels) TB_FATAL("out of host memory");
    for (int k = 0; k < 4; k++) counts[k] = 0;
    tb_source_batch b;
    tb_monitor_progress(mon, step, "evaluation", 0);
    tb_source_start_epoch(val, 0, 0);
    while (tb_source_next(val, &b)) {
        if (b.n > 0) {
            tb_source_batch in = b; /* a bad sample's place goes in as class 0, and is not scored */
            for (int i = 0; i < b.n; i++) labels[i] = b.labels[i] < 0 ? 0 : b.labels[i];
            in.labels = labels;
            tb_batch_upload_apply(m, &in); /* float32 host batches (validation's feed) */
            tb_model_forward(m, 0);
            tb_model_read_logits(m, logits);
            for (int i = 0; i < b.n; i++) {
                if (b.labels[i] < 0) {
                    counts[3]++;
                    continue;
                }
                const float *row = logits + (size_t)i * classes;
                int better = 0; /* classes ranked above the label */
                for (int c = 0; c < classes && better < 5; c++) better += ranks_above(row, c, b.labels[i]);
                counts[0] += better < 1;
                counts[1] += better < 5;
                counts[2]++;
            }
        }
        tb_source_release(val);
    }
    tb_monitor_progress(mon, step, "evaluation all-reduce", 1);
    tb_comm_allreduce_sum(comm, counts, 4, TB_FLOAT64);
    free(logits);
    free(labels);
}

static _Noreturn void stop_noting_ckpt(tb_train_run *r, const char *why);
static void checkpoint(tb_train_run *r, tb_train_outcome *o, loop_clock *c, int64_t epoch, int64_t epoch_step);
static void checkpoint_if_behind(tb_train_run *r, tb_train_outcome *o, loop_clock *c);

/* --val on every rank (after a full epoch, or at the end of a run that
 * stops inside one: `when` says which); rank 0 prints it. Returns 0, or 1
 * with why when no file of --val decodes (the same on every rank: the
 * counts are global and rank 0's first bad file is broadcast). */
static int evaluate_now(tb_train_run *r, tb_train_outcome *o, const char *when, char *why, size_t len) {
    tb_source *val = tb_train_source(&r->fl, &r->d, r->classes, r->info.rank, r->info.world, TB_USE_VAL, r->be);
    double counts[4];
    if (tb_fault("bn-skew", r->info.rank, -1)) { /* test only: this rank's statistics far from rank 0's */
        size_t n = r->m->pt.n_state;
        tb_real *skew = malloc((n ? n : 1) * sizeof *skew);
        if (!skew) TB_FATAL("out of host memory");
        for (size_t i = 0; i < n; i++) skew[i] = 1000;
        r->be->copy_h2d(r->be, r->m->state, skew, n * sizeof *skew);
        r->be->sync(r->be);
        free(skew);
        tb_warn("test fault bn-skew: this rank's BatchNorm running statistics set to 1000 before the evaluation");
    }
    /* each rank's running statistics hold its own last batches until the next step's broadcast: rank 0's,
     * the checkpoint's, on every rank first */
    tb_monitor_progress(r->mon, o->step, "evaluation's BatchNorm statistics broadcast", 1);
    tb_trainer_sync_bn(r->tr);
    evaluate(r->m, val, r->world, r->mon, o->step, counts);
    char first[512] = "", *all = NULL;
    if (counts[3] > 0) { /* every rank knows the sum: all take the gather */
        tb_loader_stats st;
        tb_source_stats(val, &st);
        snprintf(first, sizeof first, "%s", st.first_bad[0]);
        all = r->info.rank == 0 ? calloc((size_t)r->info.world, sizeof first) : NULL;
        if (r->info.rank == 0 && !all) TB_FATAL("out of host memory");
        tb_monitor_progress(r->mon, o->step, "evaluation bad-file gather", 1);
        tb_comm_gather(r->world, first, all, sizeof first, 0);
        for (int q = 0; all && q < r->info.world && !first[0]; q++)
            snprintf(first, sizeof first, "%s", all + (size_t)q * sizeof first);
        free(all);
        tb_comm_bcast(r->world, first, sizeof first, TB_BYTES, 0);
    }
    tb_source_destroy(val);
    if (counts[2] == 0 && counts[3] > 0) {
        snprintf(why, len, "--val '%.1024s': no image decodes: all %.0f files are bad (the first: %s), so there is no "
                 "accuracy to report; --val needs valid JPEGs",
                 r->fl.val, counts[3], first);
        return 1;
    }
    o->val_images = (int64_t)counts[2];
    o->val_bad = (int64_t)counts[3];
    o->top1 = counts[2] > 0 ? counts[0] / counts[2] : NAN;
    o->top5 = counts[2] > 0 ? counts[1] / counts[2] : NAN;
    if (o->val_images + o->val_bad != r->d.val_ds.n)
        TB_FATAL("evaluation counted %lld images (and %lld bad files) of %lld: the validation shards overlap or "
                 "leave samples out",
                 (long long)o->val_images, (long long)o->val_bad, (long long)r->d.val_ds.n);
    if (r->info.rank == 0) {
        printf("eval   %s  top-1 %.2f %%  top-5 %.2f %%  (%lld images)\n", when, 100 * o->top1, 100 * o->top5,
               (long long)o->val_images);
        if (o->val_bad > 0)
            printf("#      --val: %lld bad file%s left out of the accuracy (not replaced by another image), the "
                   "first: %s\n",
                   (long long)o->val_bad, o->val_bad == 1 ? "" : "s", first);
        fflush(stdout);
    }
    return 0;
}

/* evaluate_now timed apart, as a checkpoint is: left out of every img/s
 * and of the CPU budget, counted in o->evals and o->eval_s. A --val of
 * which no file decodes stops every rank, after writing --ckpt and --save:
 * the trained state is sound, only its accuracy cannot be measured. */
static void evaluate_timed(tb_train_run *r, tb_train_outcome *o, loop_clock *c, const char *when) {
    double t0 = tb_now(), cpu0 = tb_process_cpu_s();
    char why[2048], saved[2300] = "";
    if (evaluate_now(r, o, when, why, sizeof why)) {
        checkpoint_if_behind(r, o, c);
        if (r->fl.save[0]) {
            tb_train_save_checkpoint(r, r->fl.save, o->step, c->epoch, c->epoch_step);
            snprintf(saved, sizeof saved, "; --save '%.1024s' holds step %lld", r->fl.save, (long long)o->step);
        }
        snprintf(why + strlen(why), sizeof why - strlen(why), "%s", saved);
        stop_noting_ckpt(r, why);
    }
    set_aside_add(&c->eval, c, o->step, tb_now() - t0, tb_process_cpu_s() - cpu0);
    o->evals++;
    o->eval_s = c->eval.s;
}

void tb_train_ckpt_note(const tb_train_run *r, char *buf, size_t len) {
    if (!r->fl.ckpt[0])
        buf[0] = 0;
    else if (r->ckpt_step >= 0)
        snprintf(buf, len, "; the last good checkpoint, '%s', holds step %lld", r->fl.ckpt, (long long)r->ckpt_step);
    else
        snprintf(buf, len, "; no checkpoint was written to '%s'", r->fl.ckpt);
}

/* Stops every rank together with why and the last good checkpoint's step. */
static _Noreturn void stop_noting_ckpt(tb_train_run *r, const char *why) {
    char note[4400], line[6000];
    tb_train_ckpt_note(r, note, sizeof note);
    snprintf(line, sizeof line, "%s%s", why, note);
    tb_train_stop_together(r, line);
}

void tb_train_save_checkpoint(tb_train_run *r, const char *path, int64_t step, int64_t epoch,
                              int64_t epoch_step) {
    /* Rank 0 downloads each tensor once, checks it and writes it; the others
     * wait in the verdict's broadcast, as they would in the next step's
     * all-reduce. A NaN/Inf leaves the file unwritten (an earlier one at
     * path stays) and stops every rank. */
    char bad[256] = "";
    if (r->info.rank == 0) {
        tb_monitor_progress(r->mon, step, "checkpoint", 0);
        tb_ckpt_meta meta;
        tb_ckpt_meta_for(&meta, r->m, r->image, step, epoch, r->fl.seed);
        meta.epoch_step = epoch_step;
        meta.world_size = r->info.world;
        meta.global_batch = r->global_batch;
        meta.dataset_size = tb_source_epoch_size(r->src);
        snprintf(meta.data_hash, sizeof meta.data_hash, "%016" PRIx64, tb_source_fingerprint(r->src));
        tb_ckpt_meta_scaler(&meta, r->m);
        tb_run_report_lock(&r->report);
        if (tb_fault("slow-ckpt", r->info.rank, step)) { /* test only: a slow file system */
            struct timespec half = {0, 500000000L};
            nanosleep(&half, NULL);
        }
        if (tb_fault("stall-ckpt", r->info.rank, step)) { /* test only: one slower than --timeout */
            double s = r->fl.timeout + 1;
            struct timespec t = {(time_t)s, (long)((s - floor(s)) * 1e9)};
            nanosleep(&t, NULL);
        }
        tb_ckpt_save_checked(path, r->m, &meta, bad, sizeof bad);
        tb_run_report_unlock(&r->report);
    }
    tb_monitor_progress(r->mon, step, "checkpoint verdict broadcast", 1);
    tb_comm_bcast(r->world, bad, sizeof bad, TB_BYTES, 0);
    int is_ckpt = path == r->fl.ckpt;
    if (bad[0]) {
        char why[4800];
        if (is_ckpt) {
            snprintf(why, sizeof why, "after %lld steps %s holds NaN/Inf, so the run stops without writing --ckpt "
                     "(lower --lr)", (long long)step, bad);
            stop_noting_ckpt(r, why);
        }
        snprintf(why, sizeof why, "after %lld steps %s holds NaN/Inf, so the run stops without writing --save '%s' "
                 "(lower --lr)", (long long)step, bad, path);
        tb_train_stop_together(r, why);
    }
    if (is_ckpt) r->ckpt_step = step;
}

/* The stop for a non-finite record (rec.nonfinite: the device flag, the
 * update was skipped) or a non-finite global loss; every rank reaches it
 * alike (the summed gradients and the loss all-reduce are the same
 * everywhere). */
static void stop_nonfinite(tb_train_run *r, const tb_step_record *rec, double loss) {
    char err[512];
    size_t n = 0;
    if (rec->nonfinite) {
        const char *g = tb_trainer_first_nonfinite(r->tr, r->m->grads, &n);
        snprintf(err, sizeof err,
                 "step %lld: the %sgradients hold NaN/Inf (the device's check), so the update was skipped and the "
                 "run stops%s%s%s (lower --lr, or check the data)",
                 (long long)rec->step, r->info.world > 1 ? "summed " : "", g ? "; the gradient of " : "", g ? g : "",
                 g ? " holds them now" : "");
        stop_noting_ckpt(r, err);
    }
    const char *p = tb_trainer_first_nonfinite(r->tr, r->m->params, &n);
    snprintf(err, sizeof err, "step %lld: the loss is %g; %s%s%s", (long long)rec->step, loss,
             p ? "the first non-finite tensor is " : "every parameter is finite (an "
                                                     "activation overflowed: lower --lr)",
             p ? p : "", p ? " (lower --lr)" : "");
    stop_noting_ckpt(r, err);
}

/* The first step's start-up line: the total, the model's plans (what
 * bench/gpu_resnet50.sh reads), then each part of it. */
static void print_startup(const tb_train_run *r) {
    double now = tb_now();
    char parts[256];
    int n = 0;
    for (int i = 0; i < TB_SETUP_PARTS && n < (int)sizeof parts; i++)
        n += snprintf(parts + n, sizeof parts - (size_t)n, "%s %.1f, ", tb_setup_part_name[i], r->setup_s[i]);
    printf("# start-up: first step done %.1f s after start-up began (the model and its plans %.1f s); parts: %sfirst "
           "step %.1f s\n",
           now - r->t_setup, r->model_s, parts, now - r->t_ready);
}

/* The records of every step queued so far (waiting for the device), their
 * rows of the results file's /steps table, their global losses (one all-reduce for all of them), their NaN checks, the
 * slowest rank's step times (one more), and the progress line. Collective;
 * after each step on the CPU, every --print-every steps (and wherever the
 * loop needs the numbers) on CUDA. */
static void flush(tb_train_run *r, tb_train_outcome *o, loop_clock *c) {
    tb_step_record rec;
    while (tb_trainer_collect(r->tr, &rec, 1)) {
        if (c->nrec == c->rcap) {
            c->rcap = c->rcap ? 2 * c->rcap : 64;
            c->recs = realloc(c->recs, (size_t)c->rcap * sizeof *c->recs);
            if (!c->recs) TB_FATAL("out of host memory");
        }
        c->recs[c->nrec++] = rec;
        if (rec.step >= c->warm_end) tb_rank_summary_add(&o->mine, &rec);
    }
    int n = c->nrec;
    if (n == 0) return;
    double *loss = malloc(2 * (size_t)n * sizeof *loss), *slowest = loss + n;
    if (!loss) TB_FATAL("out of host memory");
    tb_monitor_progress(r->mon, c->recs[n - 1].step, "loss all-reduce", 1);
    tb_trainer_global_losses(r->tr, c->recs, n, loss);
    for (int i = 0; i < n; i++)
        if (c->recs[i].nonfinite || !isfinite(loss[i])) stop_nonfinite(r, &c->recs[i], loss[i]);
    for (int i = 0; i < n; i++) slowest[i] = c->recs[i].total;
    tb_monitor_progress(r->mon, c->recs[n - 1].step, "step-time all-reduce", 1);
    tb_comm_allreduce_max(r->world, slowest, (size_t)n, TB_FLOAT64);
    for (int i = 0; i < n; i++) {
        const tb_step_record *q = &c->recs[i];
        int64_t epoch = c->epochs[c->qhead++];
        int64_t step = q->step;
        o->loss = loss[i];
        if (step == r->start[0]) o->first_loss = o->loss;
        if (r->info.rank == 0) {
            double row[14] = {(double)step, (double)epoch, step >= c->warm_end, loss[i], q->lr,
                              q->global_n / slowest[i], (double)q->global_n, 1e3 * q->total};
            for (int p = 0; p < TB_PH_COUNT; p++) row[8 + p] = 1e3 * q->phase[p];
            tb_run_report_lock(&r->report);
            tb_table_row(&r->report.steps, row, NULL);
            tb_run_report_unlock(&r->report);
        }
        int64_t done = step + 1;
        if (r->info.rank == 0 && (done == r->start[0] + 1 || done % r->fl.print_every == 0 || done == r->total)) {
            /* img/s over the timed steps once the clock runs (the warm-up's before), without the checkpoint
             * writes and evaluations; eta with them */
            double now = tb_now(), el = now - c->t_begin;
            double ips = done > c->warm_end ? (c->samples_run - c->samples_timed0) /
                                                  (now - c->t_timed - c->ckpt.timed_s - c->eval.timed_s -
                                                   c->capture.timed_s)
                                            : c->samples_run / (el - c->ckpt.s - c->eval.s - c->capture.s);
            printf("step %6lld/%lld  epoch %lld  loss %8.4f  lr %.4g  img/s %9.2f  eta %5.0fs\n", (long long)done,
                   (long long)r->total, (long long)epoch, o->loss, q->lr, ips,
                   (double)(r->total - done) * el / (double)(done - r->start[0]));
            if (done == r->start[0] + 1) print_startup(r); /* what --plan-cache saves */
            fflush(stdout);
        }
    }
    c->nrec = 0;
    free(loss);
}

void tb_train_device_summary(tb_train_run *r, tb_rank_summary *s) {
    if (r->util) {
        tb_nvml_stats st;
        tb_nvml_sampler_stats(r->util, &st);
        /* GPU-Util of a window shorter than NVML's sample period is mostly
         * the time before it (src/device/nvml.h): not reported. GPM's SM activity
         * is measured between two samples inside the window: kept (the H200
         * run's 0.11-s row: GPU-Util 0 %, SM activity 67.6 %) */
        s->util_short = !tb_nvml_util_valid(&st);
        s->util_samples = st.samples;
        s->util_pct = s->util_short ? NAN : st.util_pct_mean;
        s->sm_active_pct = st.sm_active_pct_mean;
    }
    tb_mem_info mi;
    r->be->memory(r->be, &mi);
    s->peak_mem_bytes = (double)mi.peak;
}

/* --ckpt-every's checkpoint after `o->step` steps: rank 0 writes it, every
 * rank waits for it at a barrier (else the others would wait inside the
 * next step's all-reduce, where it would pass for communication time), and
 * the whole stretch is timed apart: left out of img/s, counted in o->ckpts
 * and o->ckpt_s. */
static void checkpoint(tb_train_run *r, tb_train_outcome *o, loop_clock *c, int64_t epoch, int64_t epoch_step) {
    double t0 = tb_now(), cpu0 = tb_thread_cpu_s();
    tb_train_save_checkpoint(r, r->fl.ckpt, o->step, epoch, epoch_step); /* every rank: the verdict's broadcast */
    tb_monitor_progress(r->mon, o->step, "checkpoint barrier", 1);
    tb_comm_barrier(r->world);
    set_aside_add(&c->ckpt, c, o->step, tb_now() - t0, tb_thread_cpu_s() - cpu0);
    tb_trainer_break_idle(r->tr); /* the device waited for the checkpoint: no step's data time */
    o->ckpts++;
    o->ckpt_s = c->ckpt.s;
}

/* --ckpt (when given) brought to o->step, unless the file holds that step
 * already: --ckpt-every's write of it, or a resume that trained none. */
static void checkpoint_if_behind(tb_train_run *r, tb_train_outcome *o, loop_clock *c) {
    if (r->fl.ckpt[0] && r->ckpt_step != o->step) checkpoint(r, o, c, c->epoch, c->epoch_step);
}

/* One training step on batch b, its records, progress line and checkpoint. */
static void train_step(tb_train_run *r, tb_train_outcome *o, loop_clock *c, const tb_source_batch *b,
                       int64_t epoch, int64_t *epoch_step) {
    int64_t step = o->step;
    /* the step's CUDA graph still to be captured: the capture (host time, the
     * device idle) stays untimed, as in the scaling rows (the same on every
     * rank: graph decisions use only the global batch) */
    if (step == c->warm_end && tb_trainer_graph_pending(r->tr)) c->warm_end++;
    if (step == c->warm_end) {
        flush(r, o, c); /* the untimed steps end on the device before the clock starts */
        tb_monitor_progress(r->mon, step, "timing barrier", 1);
        tb_comm_barrier(r->world);
        tb_trainer_break_idle(r->tr); /* the wait before the clock is no timed step's data time */
        c->t_timed = tb_now();
        c->samples_timed0 = c->samples_run;
        tb_loader_stats ls;
        tb_source_stats(r->src, &ls);
        c->loader_cpu_timed = ls.cpu_s;
        c->cpu_timed = tb_process_cpu_s();
        if (r->util) tb_nvml_sampler_reset(r->util);
    }
    char err[512];
    double lr = tb_lr_at(&r->sched, step);
    queue_epoch(c, epoch);
    double cap0 = tb_trainer_capture_s(r->tr);
    if (tb_trainer_step(r->tr, b, step, lr, err, sizeof err) != 0) stop_noting_ckpt(r, err);
    double cap = tb_trainer_capture_s(r->tr) - cap0;
    if (cap > 0) set_aside_add(&c->capture, c, step + 1, cap, cap); /* timed when this step is */
    tb_source_release(r->src);
    c->samples_run += (double)b->global_n;
    step = ++o->step;
    ++*epoch_step;
    int ckpt = r->fl.ckpt_every > 0 && step % r->fl.ckpt_every == 0;
    /* the numbers are needed now: to print, to checkpoint, at the end of an
     * epoch (evaluation), at the end of the timed warm-up; otherwise the
     * device runs on and the records wait */
    int need = !r->hp.async || step == r->start[0] + 1 || step % r->fl.print_every == 0 || step == r->total ||
               ckpt || step == c->warm_end || *epoch_step == r->steps_per_epoch;
    /* every rank flushes at the same steps, with the same records: the
     * flush's all-reduces pair up */
    if (need) flush(r, o, c);
    c->epoch = epoch;
    c->epoch_step = *epoch_step;
    if (ckpt) checkpoint(r, o, c, epoch, *epoch_step);
}

void tb_train_loop(tb_train_run *r, tb_train_outcome *o) {
    memset(o, 0, sizeof *o);
    o->loss = o->first_loss = o->top1 = o->top5 = NAN;
    o->step = r->start[0];
    loop_clock c;
    memset(&c, 0, sizeof c);
    c.warm_end = r->start[0] + r->fl.warmup;
    c.t_begin = tb_now();
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
        if (r->d.have_val_ds && epoch_step == r->steps_per_epoch) {
            flush(r, o, &c);
            char when[64];
            snprintf(when, sizeof when, "epoch %lld", (long long)epoch);
            evaluate_timed(r, o, &c, when);
            tb_trainer_invalidate_graph(r->tr); /* other batch sizes ran meanwhile */
        }
    }
    flush(r, o, &c);
    o->epoch = o->step > r->start[0] ? c.epoch : r->start[1];
    o->epoch_step = o->step > r->start[0] ? c.epoch_step : r->start[2];
    if (r->d.have_val_ds && o->step > r->start[0] && c.epoch_step != r->steps_per_epoch) {
        /* the run stopped inside an epoch (--steps): --val once, on the weights it ends with */
        char when[96];
        snprintf(when, sizeof when, "step %lld (epoch %lld, %lld of its %lld steps)", (long long)o->step,
                 (long long)c.epoch, (long long)c.epoch_step, (long long)r->steps_per_epoch);
        evaluate_timed(r, o, &c, when);
        tb_trainer_invalidate_graph(r->tr);
    }
    /* --ckpt: the trained state after the last step (a run shorter than --ckpt-every would otherwise end with
     * none) */
    checkpoint_if_behind(r, o, &c);
    o->mine.elapsed_s =
        o->step > c.warm_end ? tb_now() - c.t_timed - c.ckpt.timed_s - c.eval.timed_s - c.capture.timed_s : 0;
    o->warm_end = c.warm_end;
    if (o->step > c.warm_end) { /* the CPU budget of the timed steps */
        tb_loader_stats ls;
        tb_source_stats(r->src, &ls);
        o->mine.cpu_s =
            tb_process_cpu_s() - c.cpu_timed - c.ckpt.cpu_timed_s - c.eval.cpu_timed_s - c.capture.cpu_timed_s;
        o->mine.loader_cpu_s = ls.cpu_s - c.loader_cpu_timed;
    }
    if (o->step > c.warm_end) tb_train_device_summary(r, &o->mine);
    free(c.epochs);
    free(c.recs);
}
