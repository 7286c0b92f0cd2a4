/* monitor_single.c - monitor.h without MPI: one process has no one to wait
 * for, so there is nothing to watch. */
#include "comm/monitor.h"

tb_monitor *tb_monitor_start(tb_comm *world, const char *hosts, double timeout_s,
                             tb_monitor_abort_fn fn, void *ctx) {
    (void)world, (void)hosts, (void)timeout_s, (void)fn, (void)ctx;
    return NULL;
}

void tb_monitor_progress(tb_monitor *m, int64_t step, const char *what, int in_collective) {
    (void)m, (void)step, (void)what, (void)in_collective;
}

void tb_monitor_phase(tb_monitor *m, const char *phase) { (void)m, (void)phase; }
void tb_monitor_stop(tb_monitor *m) { (void)m; }
void tb_monitor_stop_running(void) {}
const char *tb_monitor_fail_where(void) { return ""; }
