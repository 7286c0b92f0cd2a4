/* run_report.c - the results file of a training run (see run_report.h). */
#include "src/run_report.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "src/bucket_profile.h"
#include "src/core/log.h"

void tb_run_report_init(tb_run_report *r, const char *path) {
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path ? path : "");
    pthread_mutex_init(&r->mu, NULL);
    tb_table_init(&r->steps, "steps",
                  "step:i,epoch:i,timed:i,loss,lr,img_per_s,samples:i,step_ms,data_ms,h2d_ms,"
                  "forward_ms,backward_ms,allreduce_ms,optimizer_ms");
    tb_table_init(&r->ranks, "ranks",
                  "rank:i,steps:i,samples:i,img_per_s,step_ms,data_ms,h2d_ms,forward_ms,backward_ms,"
                  "allreduce_ms,optimizer_ms");
    tb_table_add_string_column(&r->ranks, "host");
    tb_table_init(&r->scaling, "scaling",
                  "ranks:i,global_batch:i,img_per_s,img_per_s_per_rank,speedup,efficiency,epoch_time_s,"
                  "device_util_pct,allreduce_busbw_GBps,comm_share_pct,step_ms_min,step_ms_median,"
                  "step_ms_max,data_ms_min,data_ms_median,data_ms_max,h2d_ms_min,h2d_ms_median,h2d_ms_max,"
                  "forward_ms_min,forward_ms_median,forward_ms_max,backward_ms_min,backward_ms_median,"
                  "backward_ms_max,allreduce_ms_min,allreduce_ms_median,allreduce_ms_max,"
                  "optimizer_ms_min,optimizer_ms_median,optimizer_ms_max");
    tb_bprof_tables_init(&r->grad_ready, &r->buckets);
}

void tb_run_report_lock(tb_run_report *r) { pthread_mutex_lock(&r->mu); }
void tb_run_report_unlock(tb_run_report *r) { pthread_mutex_unlock(&r->mu); }

void tb_run_report_write(tb_run_report *r, const char *status, const char *reason, double wait_s) {
    if (wait_s > 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)wait_s;
        until.tv_nsec += (long)((wait_s - (double)(time_t)wait_s) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_mutex_timedlock(&r->mu, &until) != 0) {
            tb_warn("results file not written: the run was inside a checkpoint or results write");
            return;
        }
    } else {
        pthread_mutex_lock(&r->mu);
    }
    if (!r->written && r->path[0]) {
        char t[32];
        tb_utc_now(t, sizeof t);
        tb_attrs_str(&r->attrs, "end_time", t);
        tb_attrs_str(&r->attrs, "status", status);
        if (reason) tb_attrs_str(&r->attrs, "abort_reason", reason);
        const tb_table *tabs[5] = {&r->steps, &r->ranks, &r->scaling};
        int nt = 3;
        if (r->grad_ready.rows > 0) tabs[nt++] = &r->grad_ready;
        if (r->buckets.rows > 0) tabs[nt++] = &r->buckets;
        tb_results_write(r->path, &r->attrs, tabs, nt);
        r->written = 1;
    }
    pthread_mutex_unlock(&r->mu);
}

void tb_run_report_free(tb_run_report *r) {
    tb_attrs_free(&r->attrs);
    tb_table_free(&r->steps);
    tb_table_free(&r->ranks);
    tb_table_free(&r->scaling);
    tb_table_free(&r->grad_ready);
    tb_table_free(&r->buckets);
    pthread_mutex_destroy(&r->mu);
}
