/* run_report.h - what a training run will write to its results file,
 * assembled while it runs, so that it can be written at any moment: at the
 * end with status "complete", or by the watchdog or a failure path (from
 * another thread) with status "aborted", the reason, and what was measured
 * so far. Rank 0 only; the tables and attributes are under one lock.
 *
 * While the run goes, a snapshot thread keeps the file on disk with status
 * "aborted", `updated_time` and an abort_reason that says it is a snapshot
 * (on disk the status is only complete or aborted, ../shared/DESIGN.md;
 * in memory it is "running" until the end): written as soon as the run has
 * filled in its provenance (tb_run_report_begin), then whenever something changed,
 * at most every TB_RUN_REPORT_SNAPSHOT_S seconds and never more than ~2 % of
 * the time (50 x the last write's duration apart). So a rank 0 killed
 * before it can mark the file aborted (the launcher's SIGKILL follows its
 * SIGTERM by one second, odls_base_sigkill_timeout in Open MPI) still leaves
 * the provenance and the steps measured up to a few seconds before. Each
 * write is atomic (temporary name, rename); the final write always lands
 * last. HDF5 calls are serialised by the lock in h5io.h. */
#ifndef TB_RUN_REPORT_H
#define TB_RUN_REPORT_H

#include <pthread.h>
#include <stdatomic.h>

#include "src/results/results_file.h"

#define TB_RUN_REPORT_SNAPSHOT_S 2.0

typedef struct {
    char path[4096];          /* "" : no results file */
    pthread_mutex_t mu;
    pthread_t holder;         /* who took mu through tb_run_report_lock, while `held` */
    atomic_int held;
    tb_attrs attrs;           /* provenance and run settings, set at start */
    tb_table steps, ranks, scaling;
    tb_table grad_ready, buckets; /* bucket_profile.h; written when they have rows */
    tb_table devices;         /* per rank: device, memory, fp16 skips, CUDA graph steps, bus id */
    tb_table convs;           /* per rank: the conv algorithms chosen (tb_model_describe_convs) */
    tb_table bns;             /* per rank: how each BatchNorm runs (tb_model_describe_bns) */
    tb_table op_profile, op_kinds; /* --op-profile: per op row (name, phase, kind) and per op kind,
                                 ms per step; written when they have rows (src/results/op_profile_report.h) */
    atomic_int begun;         /* 0 in start-up, 1 the provenance is recorded (the file may be written from
                                 then on), -1 the process ended in start-up: it never will be */
    int earlier;              /* an earlier run's file was at path when this run began: no "aborted" file
                                 replaces it before this run has recorded a step (under mu) */
    int written;              /* the final file is written (under mu) */
    int replaceable;          /* ... by the watchdog, and it may write once more */
    /* snapshots (thread started by init when path is set) */
    atomic_int final_started; /* a final write began: no snapshot after it */
    pthread_t snap_thread;
    int snap_running;
    pthread_cond_t snap_cv;   /* wakes the snapshot thread to stop */
    int snap_stop;            /* under mu */
    size_t snap_rows;         /* steps in the last snapshot written */
    int snapshots;            /* how many were written */
} tb_run_report;

void tb_run_report_init(tb_run_report *r, const char *path);
/* The run's start-up is over and its provenance goes into attrs next (call
 * with the report lock held, as the snapshot thread reads `earlier` under
 * it, before setting status "running"): 1, or 0 when the process is ending in
 * start-up (tb_run_report_close_unbegun came first): then nothing may be
 * set, and the caller waits for the end (tb_log_park). A file already at
 * the path (an earlier run's) stays until this run records its first step:
 * no snapshot and no "aborted" mark replaces it before (a run that fails
 * at its first batch leaves the earlier results, and says so in a '#'
 * line); a "complete" write always does. */
int tb_run_report_begin(tb_run_report *r);
/* For a line said as the process ends (a signal): 1 when the run had not
 * begun, and from now on never will, so no file is written (an earlier
 * run's file at the path stays as it is); 0 when it had begun (the abort
 * mark writes the file). */
int tb_run_report_close_unbegun(tb_run_report *r);
void tb_run_report_lock(tb_run_report *r);
void tb_run_report_unlock(tb_run_report *r);
/* Writes the file (under the lock): status "complete" or "aborted", the
 * reason (may be NULL), the end time; nothing before the run has begun
 * (tb_run_report_begin: no provenance to write). Safe from any thread. wait_s > 0 (the
 * watchdog, with the launcher's SIGKILL about to follow): waits at most
 * wait_s for the tables and for HDF5 (a checkpoint being written), renames
 * before fsyncing, and when it cannot write says so in one line naming what
 * held it and what the file on disk holds. Later calls do nothing, except
 * that an "aborted" file the watchdog wrote is rewritten by its next call
 * (the provisional reason at SIGTERM, then the precise one: monitor.h). */
void tb_run_report_write(tb_run_report *r, const char *status, const char *reason, double wait_s);
/* The watchdog's provisional "aborted" mark (written on its own thread while
 * the watchdog finds out who is gone): as above, but it never replaces a
 * file already written, so a precise reason that got there first stays. */
void tb_run_report_write_provisional(tb_run_report *r, const char *reason, double wait_s);
/* The mark of a job ending on an error (an abort cleanup: tb_die's message
 * as the reason): "aborted" unless a final file was written or the run has
 * no provenance yet (start-up's first seconds: an earlier run's file stays),
 * waiting at most 3 s for HDF5, also from the thread that holds the tables
 * (tb_run_report_lock around a checkpoint write that failed). Nothing when
 * the error is this file's own write failing (tb_h5_write_failed). */
void tb_run_report_write_on_abort(tb_run_report *r, const char *reason);
/* Stops the snapshot thread and frees everything. */
void tb_run_report_free(tb_run_report *r);

#endif
