/* train_report.c - the end of `trainbench train`: the trace file, the
 * per-rank summary (table on stdout, /ranks in the results file), --save,
 * the replica check, the scaling measurement (train_scaling.c) and its
 * tables, and from rank 0 the results file (written "aborted" instead by
 * the failure paths, run_report.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/faults.h"
#include "core/log.h"
#include "core/stall_guard.h"
#include "src/results/results.h"
#include "src/train/trace.h"
#include "src/train/train_setup.h"

/* The per-rank phase table of the training run (the same code prints it
 * from a results file in `trainbench report`). */
static void print_phase_table(const tb_rank_summary *all, int n, const char *hosts) {
    tb_rank_row *rows = calloc((size_t)n, sizeof *rows);
    int k = 0;
    for (int q = 0; q < n; q++)
        if (all[q].steps > 0) tb_rank_row_from(&rows[k++], &all[q], q, hosts + 64 * (size_t)q);
    tb_rank_rows_write(stdout, TB_FMT_TEXT, rows, k);
    free(rows);
}

/* The /ranks table and the run's outcome attributes (rank 0). */
static void record_ranks(tb_train_run *r, const tb_train_outcome *o, const tb_rank_summary *all) {
    tb_run_report_lock(&r->report);
    for (int q = 0; q < r->info.world; q++) {
        const tb_rank_summary *s = &all[q];
        double ns = s->steps > 0 ? s->steps : 1;
        double row[17] = {q, s->steps, s->samples, s->elapsed_s > 0 ? s->samples / s->elapsed_s : 0,
                          1e3 * s->step_s / ns};
        for (int p = 0; p < TB_PH_COUNT; p++) row[5 + p] = 1e3 * s->phase_s[p] / ns;
        row[11] = 1e3 * s->comm_busy_s / ns;
        row[12] = s->util_samples ? s->util_pct : NAN;
        row[13] = s->util_samples ? s->sm_active_pct : NAN;
        row[14] = s->peak_mem_bytes / 1048576.0;
        row[15] = s->skipped_steps;
        row[16] = s->graph_steps;
        tb_table_row(&r->report.ranks, row, r->hosts + 64 * q);
    }
    tb_attrs_int(&r->report.attrs, "steps", o->step);
    tb_attrs_num(&r->report.attrs, "final_loss", o->loss);
    if (r->d.have_val_ds) {
        tb_attrs_num(&r->report.attrs, "top1", o->top1);
        tb_attrs_num(&r->report.attrs, "top5", o->top5);
        tb_attrs_int(&r->report.attrs, "val_images", o->val_images);
        tb_attrs_int(&r->report.attrs, "val_bad_files", o->val_bad);
    }
    tb_run_report_unlock(&r->report);
}

/* The CPU budget of the timed steps (rank 0): cores used per rank (process
 * CPU seconds per wall second), of them the loader's, and img/s per core;
 * on the console and as results attributes. */
static void cpu_budget(tb_train_run *r, const tb_rank_summary *all, double ips) {
    double cores = 0, loader = 0;
    int n = 0;
    for (int q = 0; q < r->info.world; q++)
        if (all[q].elapsed_s > 0) {
            cores += all[q].cpu_s / all[q].elapsed_s;
            loader += all[q].loader_cpu_s / all[q].elapsed_s;
            n++;
        }
    if (n == 0) return;
    cores /= n;
    loader /= n;
    double per_core = cores > 0 ? ips / (cores * n) : 0;
    printf("# CPU budget: %.2f cores per rank (process CPU seconds per wall second over the timed steps), of them "
           "%.2f the loader's%s; %.1f img/s per core\n",
           cores, loader,
           r->fl.data[0] ? "" : " (synthetic data: no loader)", per_core);
    if (r->fl.data[0]) printf("#   (--loader-threads %d per rank)\n", r->fl.loader_threads);
    tb_run_report_lock(&r->report);
    tb_attrs_num(&r->report.attrs, "cpu_cores_per_rank", cores);
    tb_attrs_num(&r->report.attrs, "loader_cores_per_rank", loader);
    tb_attrs_num(&r->report.attrs, "img_per_s_per_core", per_core);
    tb_run_report_unlock(&r->report);
}

/* Every rank's summary to rank 0: the table and the training line. */
static void summarise(tb_train_run *r, tb_train_outcome *o) {
    tb_rank_summary *all = calloc((size_t)r->info.world, sizeof *all);
    tb_monitor_progress(r->mon, o->step, "summary gather", 1);
    tb_comm_gather(r->world, &o->mine, all, sizeof o->mine, 0);
    if (r->info.rank == 0) {
        record_ranks(r, o, all);
        print_phase_table(all, r->info.world, r->hosts);
        double ips = 0, slow = 0;
        for (int q = 0; q < r->info.world; q++) {
            ips += all[q].samples;
            if (all[q].elapsed_s > slow) slow = all[q].elapsed_s;
        }
        o->img_per_s = ips = slow > 0 ? ips / slow : 0;
        if (all[0].steps > 0) {
            printf("#\n# training: %lld steps, loss %.4f -> %.4f, %.2f img/s (%.1f GFLOP/s) over %d timed "
                   "steps\n",
                   (long long)o->step, o->first_loss, o->loss, ips, ips * r->gflop, all[0].steps);
            cpu_budget(r, all, ips);
        } else
            printf("#\n# training: %lld steps, loss %.4f -> %.4f; no timed step (all within "
                   "--warmup-steps %d%s)\n",
                   (long long)o->step, o->first_loss, o->loss, r->fl.warmup,
                   o->warm_end > r->start[0] + r->fl.warmup ? " and the CUDA graph's capture after them" : "");
        if (o->ckpts > 0) {
            printf("# checkpoints: %d written to %s in %.2f s (rank 0's writes and every rank's wait for them), "
                   "left out of the training img/s\n",
                   o->ckpts, r->fl.ckpt, o->ckpt_s);
            tb_run_report_lock(&r->report);
            tb_attrs_int(&r->report.attrs, "checkpoints_written", o->ckpts);
            tb_attrs_num(&r->report.attrs, "checkpoint_s", o->ckpt_s);
            tb_run_report_unlock(&r->report);
        }
        if (o->evals > 0) {
            printf("# evaluation: %d run%s of --val in %.2f s, left out of the training img/s\n", o->evals,
                   o->evals == 1 ? "" : "s", o->eval_s);
            tb_run_report_lock(&r->report);
            tb_attrs_int(&r->report.attrs, "evaluations", o->evals);
            tb_attrs_num(&r->report.attrs, "evaluation_s", o->eval_s);
            tb_run_report_unlock(&r->report);
        }
        fflush(stdout);
    }
    free(all);
}

/* Every rank must hold the same weights, momentum, statistics and counters;
 * any difference stops the job. */
static void check_replicas(tb_train_run *r, int64_t step) {
    if (r->info.world == 1) return;
    if (tb_fault("perturb", r->info.rank, -1)) { /* test only: one rank's weights drift */
        tb_real one = 1;
        r->be->copy_h2d(r->be, r->m->params, &one, sizeof one);
        r->be->sync(r->be);
    }
    uint64_t hash;
    tb_monitor_progress(r->mon, step, "replica check", 1);
    if (!tb_trainer_check_replicas(r->tr, &hash)) {
        char err[512];
        snprintf(err, sizeof err,
                 "the ranks' weights differ after %lld steps: the gradient all-reduce did not give "
                 "every rank the same sum; check the interconnect with 'trainbench allreduce-bench'",
                 (long long)step);
        tb_train_stop_together(r, err);
    }
    if (r->info.rank == 0)
        printf("# replicas: %d ranks hold bit-identical weights, momentum and BN statistics (hash %016llx)\n",
               r->info.world, (unsigned long long)hash);
}

/* What a reader of the scaling tables needs to know: why a row's img/s is
 * not the training figure, and what an efficiency above 100 % means. */
static void print_scaling_notes(const tb_train_run *r, const tb_train_outcome *o, const tb_scaling_row *rows,
                                int nrows) {
    const tb_train_flags *f = &r->fl;
    const tb_scaling_row *last = &rows[nrows - 1];
    printf("#\n# note: the scaling rows are measured after training, each on its own: %d untimed + %d timed "
           "steps\n#   (--scaling-warmup, --scaling-steps%s)%s. So the %d-rank row's %.2f img/s\n",
           f->scaling_warmup, f->scaling_steps,
           tb_train_scaling_min_s(r) > 0 ? "; more where a row lasted under --scaling-min-seconds" : "",
           nrows > 1 ? " while the ranks outside the row sleep" : "", last->ranks, last->img_per_s);
    if (o->img_per_s > 0)
        printf("#   measures again what training gave as %.2f img/s over %d timed steps%s; the two differ by "
               "run-to-run\n#   noise (other load on the host, few steps).\n",
               o->img_per_s, o->mine.steps, o->ckpts > 0 ? " (its checkpoint writes left out)" : "");
    else
        printf("#   is the run's only throughput figure (training had no timed step).\n");
    if (r->ranks_per_gpu > 1 && nrows > 1)
        printf("# note: %d ranks share one GPU (--share-gpu): the rows of more than one rank are processes "
               "time-slicing\n#   one device, a test of the multi-rank path; their speedup and efficiency are "
               "not those of %d GPUs.\n",
               r->ranks_per_gpu, last->ranks);
    if (r->cpus_shared > 0 && nrows > 1)
        printf("# note: the ranks shared CPUs (%s): the rows whose threads outnumber a host's CPUs\n#   time-slice "
               "them; their speedup and efficiency are not those of ranks on CPUs of their own.\n",
               r->shared_cpus);
    char above[160] = ""; /* the rows above 100 %, any of them: "2-, 4-" */
    for (int i = 1, used = 0; i < nrows && used < (int)sizeof above - 8; i++)
        if (rows[i].efficiency > 1.0)
            used += snprintf(above + used, sizeof above - (size_t)used, "%s%d-", used ? ", " : "", rows[i].ranks);
    if (nrows == 1)
        printf("# note: one rank: speedup and efficiency are 1 by definition; run mpirun -np N to compare 1 "
               "rank with N.\n");
    else if (above[0])
        printf("# note: efficiency above 100 %% (super-linear): per rank, the %srank row%s ran faster than the "
               "1-rank row.\n#   Every rank does the same work in both, so the 1-rank row was slowed by "
               "something else (other\n#   programs on the host while it ran) or the rows differ by noise "
               "(%d timed steps or more each): rerun on an\n#   idle host, or with more --scaling-steps.\n",
               above, strchr(above, ',') ? "s" : "", f->scaling_steps);
    fflush(stdout);
}

/* The scaling rows: measured on every rank, printed and recorded on rank 0. */
static void scaling(tb_train_run *r, const tb_train_outcome *o) {
    if (r->fl.scaling_steps <= 0) return;
    if (r->info.rank == 0) tb_bprof_start(r->fl.scaling_warmup);
    tb_scaling_row rows[40];
    int nrows = tb_train_measure_scaling(r, tb_lr_at(&r->sched, r->total > 0 ? r->total - 1 : 0), rows);
    if (r->info.rank != 0) return;
    tb_scaling_print_seed(stdout, rows, nrows, r->dataset_size,
                          r->util ? "NVML GPU-Util, mean over the timed steps (median over ranks)"
                                  : tb_scaling_util_label(r->be->name));
    tb_scaling_print_full(stdout, rows, nrows);
    print_scaling_notes(r, o, rows, nrows);
    if (strcmp(r->be->name, "cpu") != 0) {
        printf("#\n");
        tb_scaling_write_device(stdout, TB_FMT_TEXT, rows, nrows);
    }
    tb_run_report_lock(&r->report);
    tb_bprof_tables_fill(&r->report.grad_ready, &r->report.buckets);
    for (int i = 0; i < nrows; i++) {
        const tb_scaling_row *s = &rows[i];
        double row[13 + 3 * TB_PH_COUNT + 4] = {
            s->ranks, s->global_batch, s->img_per_s, s->img_per_s_per_rank, s->speedup,
            s->efficiency, s->epoch_time_s, s->device_util_pct, s->allreduce_busbw_GBps,
            s->comm_share_pct, s->step_ms.min, s->step_ms.median, s->step_ms.max};
        for (int p = 0; p < TB_PH_COUNT; p++) {
            row[13 + 3 * p] = s->phase_ms[p].min;
            row[14 + 3 * p] = s->phase_ms[p].median;
            row[15 + 3 * p] = s->phase_ms[p].max;
        }
        row[13 + 3 * TB_PH_COUNT] = s->sm_active_pct;
        row[14 + 3 * TB_PH_COUNT] = s->comm_busy_ms;
        row[15 + 3 * TB_PH_COUNT] = s->exposed_comm_ms;
        row[16 + 3 * TB_PH_COUNT] = s->peak_mem_mb;
        tb_table_row(&r->report.scaling, row, NULL);
    }
    tb_run_report_unlock(&r->report);
}

/* Every rank's description (tb_model_describe_convs or _bns) to rank 0,
 * one row per rank of table t. Collective. */
static void gather_described(tb_train_run *r, size_t (*describe)(tb_model *, char *, size_t), tb_table *t) {
    size_t cap = 256 * 1024;
    char *text = malloc(cap);
    if (!text) TB_FATAL("out of host memory");
    size_t len = describe(r->m, text, cap);
    size_t *counts = r->info.rank == 0 ? calloc((size_t)r->info.world, sizeof *counts) : NULL;
    if (r->info.rank == 0 && !counts) TB_FATAL("out of host memory");
    char *every = tb_comm_gather_bytes(r->world, text, len + 1, 0, counts);
    if (r->info.rank == 0) {
        tb_run_report_lock(&r->report);
        size_t at = 0;
        for (int q = 0; q < r->info.world; q++) {
            double rq = q;
            tb_table_row(t, &rq, every + at);
            at += counts[q];
        }
        tb_run_report_unlock(&r->report);
    }
    free(every);
    free(counts);
    free(text);
}

/* Every rank's device facts to rank 0: /devices (device, memory, fp16
 * skips, bus id), /conv_algorithms (what cuDNN was chosen to run) and
 * /batchnorms (how each BatchNorm runs), and one line per rank on a GPU
 * run. Collective. */
static void devices(tb_train_run *r) {
    typedef struct {
        double v[9];
        char bus[64];
    } dev_row;
    dev_row mine;
    memset(&mine, 0, sizeof mine);
    tb_mem_info mi;
    r->be->memory(r->be, &mi);
    tb_step_scalars sc;
    tb_model_read_scalars(r->m, &sc);
    size_t comm_bytes = 0; /* the bf16 wire buffer lives with the trainer, gone by now: its size */
    if (r->hp.bf16_allreduce && !(r->hp.transport && strcmp(r->hp.transport, "mpi-host") == 0)) comm_bytes = r->m->pt.n_train * 2;
    double row[9] = {r->info.rank, r->device, r->ndev, mi.peak / 1048576.0, mi.in_use / 1048576.0,
                     mi.device_total / 1048576.0, comm_bytes / 1048576.0, sc.skipped_steps, sc.loss_scale};
    memcpy(mine.v, row, sizeof row);
    snprintf(mine.bus, sizeof mine.bus, "%s", r->be->device_key[0] ? r->be->device_key : "-");
    dev_row *all = r->info.rank == 0 ? calloc((size_t)r->info.world, sizeof *all) : NULL;
    if (r->info.rank == 0 && !all) TB_FATAL("out of host memory");
    tb_monitor_progress(r->mon, 0, "device summary gather", 1);
    tb_comm_gather(r->world, &mine, all, sizeof mine, 0);
    gather_described(r, tb_model_describe_convs, &r->report.convs);
    gather_described(r, tb_model_describe_bns, &r->report.bns);
    if (r->info.rank == 0) {
        int gpu = strcmp(r->be->name, "cpu") != 0;
        tb_run_report_lock(&r->report);
        for (int q = 0; q < r->info.world; q++) tb_table_row(&r->report.devices, all[q].v, all[q].bus);
        tb_run_report_unlock(&r->report);
        if (gpu)
            for (int q = 0; q < r->info.world; q++)
                printf("# rank %d: device %d (%s): peak %.0f MiB allocated of %.0f MiB, fp16 steps skipped %.0f\n", q,
                       (int)all[q].v[1], all[q].bus, all[q].v[3], all[q].v[5], all[q].v[7]);
    }
    free(all);
}

void tb_train_report(tb_train_run *r, tb_train_outcome *o) {
    if (r->fl.trace[0]) {
        tb_monitor_progress(r->mon, o->step, "trace gather", 1);
        tb_trace_write(r->world, r->fl.trace, r->hosts);
        if (r->info.rank == 0) printf("# trace written to %s (open it in ui.perfetto.dev)\n", r->fl.trace);
    }
    summarise(r, o);
    tb_train_report_bad_files(r, o->step);
    if (r->fl.save[0]) { /* every rank: the finite check before the write is collective */
        /* the loop's own position: after a resume with another batch or rank count, step / steps-per-epoch
         * is not where the data order stands */
        tb_train_save_checkpoint(r, r->fl.save, o->step, o->epoch, o->epoch_step);
        if (r->info.rank == 0) printf("# checkpoint written to %s\n", r->fl.save);
    }
    check_replicas(r, o->step);
    int replays = 0;
    const char *gwhy = tb_trainer_graph_status(r->tr, &replays);
    if (r->info.rank == 0 && r->be->native_stream(r->be, NULL)) {
        printf("# cuda graph: %s%s; %d training steps replayed from it\n", gwhy[0] ? "off: " : "on", gwhy, replays);
        tb_run_report_lock(&r->report);
        tb_attrs_int(&r->report.attrs, "cuda_graph_replays", replays);
        tb_run_report_unlock(&r->report);
    }
    int branched = r->m ? r->m->g.wgrad_branches : 0; /* in the last backward that branched (run from the host) */
    if (r->info.rank == 0 && branched > 0) {
        printf("# wgrad stream: on; %d convolutions' weight gradients on a second stream beside their data "
               "gradients\n",
               branched);
        tb_run_report_lock(&r->report);
        tb_attrs_int(&r->report.attrs, "wgrad_stream_convs", branched);
        tb_run_report_unlock(&r->report);
    }
    tb_train_op_profile(r, o); /* --op-profile: after everything that reports the training */
    tb_trainer_destroy(r->tr);
    r->tr = NULL;
    tb_source_destroy(r->src);
    r->src = NULL;
    scaling(r, o);
    devices(r);

    tb_monitor_progress(r->mon, o->step, "final barrier", 1);
    tb_comm_barrier(r->world);
    tb_monitor_stop(r->mon);
    /* test only: an error in the end's teardown */
    if (tb_fault("die-end", r->info.rank, -1) || tb_fault("die-end-late-line", r->info.rank, -1))
        tb_die("TB_TEST_FAULT die-end: this rank's own error after the last collective");
    /* from here to MPI_Finalize's return no watchdog runs: a rank frozen or
     * stuck at exit (a driver's teardown) would hold the others in
     * MPI_Finalize for ever */
    if (r->info.world > 1)
        tb_stall_guard_arm(r->fl.timeout, "end",
                           "the end of the run (MPI_Finalize returns once every rank has reached it; rank 0 "
                           "writes the results file before it)");
    if (r->info.rank == 0 && r->fl.results[0]) {
        tb_run_report_write(&r->report, "complete", NULL, 0);
        printf("# results written to %s\n", r->fl.results);
    }
}
