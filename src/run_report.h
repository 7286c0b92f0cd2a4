/* run_report.h - what a training run will write to its results file,
 * assembled while it runs, so that it can be written at any moment: at the
 * end with status "complete", or by the watchdog or a failure path (from
 * another thread) with status "aborted", the reason, and what was measured
 * so far. Rank 0 only; every access is under one lock. */
#ifndef TB_RUN_REPORT_H
#define TB_RUN_REPORT_H

#include <pthread.h>

#include "src/results.h"

typedef struct {
    char path[4096];          /* "" : no results file */
    pthread_mutex_t mu;
    tb_attrs attrs;           /* provenance and run settings, set at start */
    tb_table steps, ranks, scaling;
    tb_table grad_ready, buckets; /* bucket_profile.h; written when they have rows */
    int written;
} tb_run_report;

void tb_run_report_init(tb_run_report *r, const char *path);
void tb_run_report_lock(tb_run_report *r);
void tb_run_report_unlock(tb_run_report *r);
/* Writes the file (under the lock): status "complete" or "aborted", the
 * reason (may be NULL), the end time. Later calls do nothing. Safe from any
 * thread; from the watchdog it gives up after `wait_s` if the lock is held. */
void tb_run_report_write(tb_run_report *r, const char *status, const char *reason, double wait_s);
void tb_run_report_free(tb_run_report *r);

#endif
