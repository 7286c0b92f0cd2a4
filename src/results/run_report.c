/* run_report.c - the results file of a training run (see run_report.h).
 *
 * Locks: r->mu guards the tables and attributes; h5io's lock guards HDF5.
 * Whoever holds both takes r->mu first (the final write; the main thread's
 * checkpoint, which takes the report lock around tb_ckpt_save). The
 * snapshot thread never holds both: it copies under r->mu, then writes under
 * the HDF5 lock only. */
#include "src/results/run_report.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/log.h"
#include "core/thread_start.h"
#include "core/timer.h"
#include "src/results/bucket_profile.h"
#include "src/results/h5io.h"
#include "src/results/op_profile_report.h"

static struct timespec deadline_in(clockid_t clock, double s) {
    struct timespec t;
    clock_gettime(clock, &t);
    if (s < 0) s = 0;
    t.tv_sec += (time_t)s;
    t.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* ---- snapshots ------------------------------------------------------------------------ */

static size_t signature(const tb_run_report *r) {
    return r->steps.rows * 1000003u + r->ranks.rows * 1009u + r->scaling.rows * 31u + (size_t)r->attrs.nattrs;
}

/* Writes a snapshot of the report (run_report.h); called without r->mu.
 * Returns the seconds it took, or -1 when a final write had begun (nothing
 * written). */
static double write_snapshot(tb_run_report *r, const tb_attrs *a, const tb_table *const *tabs) {
    double t0 = tb_now();
    tb_h5_lock("results snapshot write");
    /* checked under the HDF5 lock: a final write that began before this
     * point waits for the lock, so it lands after this snapshot */
    if (atomic_load(&r->final_started)) {
        tb_h5_unlock();
        return -1;
    }
    tb_results_write(r->path, a, tabs, 3);
    tb_h5_unlock();
    return tb_now() - t0;
}

static void *snapshot_thread(void *arg) {
    tb_run_report *r = arg;
    double next_due = 0, last_dur = 0;
    size_t last_sig = (size_t)-1;
    pthread_mutex_lock(&r->mu);
    while (!r->snap_stop) {
        struct timespec until = deadline_in(CLOCK_MONOTONIC, 0.2);
        pthread_cond_timedwait(&r->snap_cv, &r->mu, &until);
        if (r->snap_stop || r->written || atomic_load(&r->final_started)) break;
        if (atomic_load(&r->begun) != 1) continue; /* provenance not filled in yet */
        if (r->earlier && r->steps.rows == 0) continue; /* an earlier run's file stays until a step is recorded */
        size_t sig = signature(r);
        if (sig == last_sig || tb_now() < next_due) continue;
        tb_attrs a;
        tb_table steps, ranks, scaling;
        tb_attrs_copy(&a, &r->attrs);
        tb_table_copy(&steps, &r->steps);
        tb_table_copy(&ranks, &r->ranks);
        tb_table_copy(&scaling, &r->scaling);
        pthread_mutex_unlock(&r->mu);

        /* on disk the status is only ever complete or aborted (shared
         * DESIGN.md): the snapshot says aborted, as what it is if the run
         * never gets to mark the file, and the reason says it is a snapshot */
        char t[32], why[160];
        tb_utc_now(t, sizeof t);
        tb_attrs_str(&a, "updated_time", t);
        tb_attrs_str(&a, "end_time", t); /* the last moment the run is known to have been going */
        tb_attrs_str(&a, "status", "aborted");
        snprintf(why, sizeof why, "snapshot of %s: the run was still going then, and was killed before it could "
                 "mark this file (if it has ended)", t);
        tb_attrs_str(&a, "abort_reason", why);
        const tb_table *tabs[3] = {&steps, &ranks, &scaling};
        size_t rows = steps.rows;
        double dur = write_snapshot(r, &a, tabs);
        tb_attrs_free(&a);
        tb_table_free(&steps);
        tb_table_free(&ranks);
        tb_table_free(&scaling);

        pthread_mutex_lock(&r->mu);
        if (dur < 0) break;
        r->snapshots++;
        r->snap_rows = rows;
        last_sig = sig;
        last_dur = dur;
        double gap = 50 * last_dur > TB_RUN_REPORT_SNAPSHOT_S ? 50 * last_dur : TB_RUN_REPORT_SNAPSHOT_S;
        next_due = tb_now() + gap;
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---- the report --------------------------------------------------------------------------- */

void tb_run_report_init(tb_run_report *r, const char *path) {
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path ? path : "");
    pthread_mutex_init(&r->mu, NULL);
    atomic_init(&r->final_started, 0);
    atomic_init(&r->begun, 0);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->snap_cv, &ca);
    pthread_condattr_destroy(&ca);
    tb_table_init(&r->steps, "steps",
                  "step:i,epoch:i,timed:i,loss,lr,img_per_s,samples:i,step_ms,data_ms,h2d_ms,"
                  "forward_ms,backward_ms,allreduce_ms,optimizer_ms");
    tb_table_init(&r->ranks, "ranks",
                  "rank:i,steps:i,samples:i,img_per_s,step_ms,data_ms,h2d_ms,forward_ms,backward_ms,"
                  "allreduce_ms,optimizer_ms,comm_busy_ms,util_pct,sm_active_pct,peak_mem_mb,skipped_steps:i,"
                  "graph_steps:i");
    tb_table_add_string_column(&r->ranks, "host");
    tb_table_init(&r->scaling, "scaling",
                  "ranks:i,global_batch:i,img_per_s,img_per_s_per_rank,speedup,efficiency,epoch_time_s,"
                  "device_util_pct,allreduce_busbw_GBps,comm_share_pct,step_ms_min,step_ms_median,"
                  "step_ms_max,data_ms_min,data_ms_median,data_ms_max,h2d_ms_min,h2d_ms_median,h2d_ms_max,"
                  "forward_ms_min,forward_ms_median,forward_ms_max,backward_ms_min,backward_ms_median,"
                  "backward_ms_max,allreduce_ms_min,allreduce_ms_median,allreduce_ms_max,"
                  "optimizer_ms_min,optimizer_ms_median,optimizer_ms_max,sm_active_pct,comm_busy_ms,"
                  "exposed_comm_ms,peak_mem_mb");
    tb_table_init(&r->devices, "devices", "rank:i,device:i,devices_visible:i,peak_mem_mb,in_use_mb,total_mem_mb,"
                                          "comm_buffers_mb,skipped_steps:i,loss_scale");
    tb_table_add_string_column(&r->devices, "bus_id");
    tb_table_init(&r->convs, "conv_algorithms", "rank:i");
    tb_table_add_string_column(&r->convs, "algorithms");
    tb_table_init(&r->bns, "batchnorms", "rank:i");
    tb_table_add_string_column(&r->bns, "choices");
    tb_bprof_tables_init(&r->grad_ready, &r->buckets);
    tb_opp_tables_init(&r->op_profile, &r->op_kinds);
    if (r->path[0]) {
        tb_thread_start(&r->snap_thread, NULL, snapshot_thread, r, "the results snapshot thread");
        r->snap_running = 1;
    }
}

int tb_run_report_begin(tb_run_report *r) {
    int want = 0;
    if (atomic_compare_exchange_strong(&r->begun, &want, 1)) {
        struct stat st;
        r->earlier = r->path[0] && stat(r->path, &st) == 0 && st.st_size > 0;
        return 1;
    }
    return want == 1;
}

int tb_run_report_close_unbegun(tb_run_report *r) {
    int want = 0;
    return atomic_compare_exchange_strong(&r->begun, &want, -1) || want == -1;
}

/* r->mu was just taken by this thread: say who holds it (tb_run_report_write_on_abort). */
static void note_holder(tb_run_report *r) {
    r->holder = pthread_self();
    atomic_store(&r->held, 1);
}

void tb_run_report_lock(tb_run_report *r) {
    pthread_mutex_lock(&r->mu);
    note_holder(r);
}

void tb_run_report_unlock(tb_run_report *r) {
    atomic_store(&r->held, 0);
    pthread_mutex_unlock(&r->mu);
}

/* What the file on disk holds when this write cannot replace it (r->mu held). */
static void on_disk(const tb_run_report *r, char *buf, size_t len) {
    if (r->snapshots > 0)
        snprintf(buf, len, "'%s' keeps its last snapshot (status 'aborted', a snapshot's reason, %zu steps)", r->path,
                 r->snap_rows);
    else
        snprintf(buf, len, "no results file was written to '%s'", r->path);
}

/* What a write is: the final one (or the watchdog's precise reason, which
 * replaces its provisional mark), or a provisional one (the watchdog's
 * mark, an error's mark: never replacing a file written). Each only once
 * the run has begun (its settings recorded, as for the first snapshot): an
 * end in start-up leaves an earlier run's file as it was. */
/* EARLY: the watchdog's provisional mark, which its final mark follows */
typedef enum { WRITE_FINAL, WRITE_PROVISIONAL, WRITE_EARLY } write_kind;

/* The write itself, r->mu held by the caller. */
static void write_locked(tb_run_report *r, const char *status, const char *reason, double wait_s, write_kind how) {
    /* in start-up (no provenance yet) nothing is written, by any writer:
     * a file without the run's settings would replace an earlier run's */
    if (atomic_load(&r->begun) != 1) return;
    if (r->earlier && r->steps.rows == 0 && !r->written && strcmp(status, "aborted") == 0) {
        /* an earlier run's results, against a file of this run without a step: the earlier stay */
        tb_info("# results file '%s' left as it was (an earlier run's results): this run ended before it recorded "
                "a step",
                r->path);
        r->earlier = 0; /* said once; a later mark (the watchdog's precise reason) writes nothing either */
        r->written = 1;
        return;
    }
    if ((!r->written || (r->replaceable && wait_s > 0 && how == WRITE_FINAL)) && r->path[0]) {
        char t[32], holder[64] = "", disk[4300];
        double held = 0;
        tb_utc_now(t, sizeof t);
        tb_attrs_str(&r->attrs, "end_time", t);
        tb_attrs_str(&r->attrs, "status", status);
        if (reason) tb_attrs_str(&r->attrs, "abort_reason", reason);
        const tb_table *tabs[10] = {&r->steps, &r->ranks, &r->scaling};
        int nt = 3;
        if (r->grad_ready.rows > 0) tabs[nt++] = &r->grad_ready;
        if (r->buckets.rows > 0) tabs[nt++] = &r->buckets;
        if (r->devices.rows > 0) tabs[nt++] = &r->devices;
        if (r->convs.rows > 0) tabs[nt++] = &r->convs;
        if (r->bns.rows > 0) tabs[nt++] = &r->bns;
        if (r->op_profile.rows > 0) tabs[nt++] = &r->op_profile;
        if (r->op_kinds.rows > 0) tabs[nt++] = &r->op_kinds;
        if (wait_s <= 0) {
            tb_results_write(r->path, &r->attrs, tabs, nt);
            r->written = 1;
        } else if (tb_h5_lock_timed("results write", wait_s, holder, sizeof holder, &held) == 0) {
            tb_results_write_now(r->path, &r->attrs, tabs, nt);
            tb_h5_unlock();
            r->written = 1;
            r->replaceable = strcmp(status, "aborted") == 0;
        } else {
            on_disk(r, disk, sizeof disk);
            tb_warn("results file not marked %s: another thread has been inside HDF5 (%s) for %.1f s "
                    "(trainbench lets one thread at a time into HDF5); %s",
                    status, holder, held, disk);
        }
    }
}

static void report_write(tb_run_report *r, const char *status, const char *reason, double wait_s,
                         write_kind how) {
    atomic_store(&r->final_started, 1); /* no snapshot from here on */
    if (wait_s > 0) {
        double t0 = tb_now();
        struct timespec until = deadline_in(CLOCK_REALTIME, wait_s);
        if (pthread_mutex_timedlock(&r->mu, &until) != 0) {
            /* another thread holds the tables: the main thread around a
             * checkpoint write or stalled, or the watchdog's provisional mark */
            char holder[64] = "";
            double held = 0;
            if (tb_h5_lock_timed("results write", 0, holder, sizeof holder, &held) == 0) {
                tb_h5_unlock();
                snprintf(holder, sizeof holder, "no HDF5 call");
            }
            if (how == WRITE_EARLY) return; /* the final mark follows, and says it when it fails too */
            tb_warn("results file not marked %s: another thread (the main thread, or the watchdog's provisional "
                    "mark) held the run's tables for the %.1f s waited (inside HDF5: %s, for %.1f s); '%s' keeps "
                    "what was last written there (a snapshot, or the provisional mark, both 'aborted')",
                    status, tb_now() - t0, holder, held, r->path);
            return;
        }
    } else {
        pthread_mutex_lock(&r->mu);
    }
    note_holder(r); /* a failure inside the write marks the file from this thread */
    write_locked(r, status, reason, wait_s, how);
    tb_run_report_unlock(r);
}

void tb_run_report_write(tb_run_report *r, const char *status, const char *reason, double wait_s) {
    report_write(r, status, reason, wait_s, WRITE_FINAL);
}

void tb_run_report_write_provisional(tb_run_report *r, const char *reason, double wait_s) {
    report_write(r, "aborted", reason, wait_s, WRITE_EARLY);
}

/* How long an error's mark waits for HDF5 (a snapshot being written): the
 * rank ending on its own error is not being killed yet (its MPI_Abort comes
 * after the cleanups), so longer than the watchdog's 0.5 s, which races the
 * launcher's SIGKILL; 0.5 s was too short for a snapshot on a loaded
 * 2-core machine (abort_marks_results, once in CI). */
#define ERROR_MARK_WAIT_S 3.0

void tb_run_report_write_on_abort(tb_run_report *r, const char *reason) {
    /* the error is this file's own write failing: its line names the file, and a mark would fail the same way
     * (or wait for the main thread, itself waiting in its final write for the dying writer's HDF5 lock) */
    if (tb_h5_write_failed(r->path)) return;
    if (atomic_load(&r->held) && pthread_equal(r->holder, pthread_self())) {
        /* this thread died holding the tables (inside a checkpoint write,
         * or the results write itself): they are whole, and waiting for
         * the lock would wait for itself */
        atomic_store(&r->final_started, 1);
        write_locked(r, "aborted", reason, ERROR_MARK_WAIT_S, WRITE_PROVISIONAL);
        return;
    }
    report_write(r, "aborted", reason, ERROR_MARK_WAIT_S, WRITE_PROVISIONAL);
}

void tb_run_report_free(tb_run_report *r) {
    if (r->snap_running) {
        pthread_mutex_lock(&r->mu);
        r->snap_stop = 1;
        pthread_cond_signal(&r->snap_cv);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->snap_thread, NULL);
        r->snap_running = 0;
    }
    tb_attrs_free(&r->attrs);
    tb_table_free(&r->steps);
    tb_table_free(&r->ranks);
    tb_table_free(&r->scaling);
    tb_table_free(&r->grad_ready);
    tb_table_free(&r->buckets);
    tb_table_free(&r->devices);
    tb_table_free(&r->convs);
    tb_table_free(&r->bns);
    tb_table_free(&r->op_profile);
    tb_table_free(&r->op_kinds);
    pthread_cond_destroy(&r->snap_cv);
    pthread_mutex_destroy(&r->mu);
}
