/* faults.c - TB_TEST_FAULT parsing and the process-level faults (faults.h).
 * The in-backward strike, which needs the NCCL communicators, is the
 * trainer's: src/train/fault_strike.c. */
#include "core/faults.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"

int tb_fault_rank(void) { return tb_log_rank() >= 0 ? tb_log_rank() : tb_log_launcher_rank(); }

int tb_fault_kind(const char *kind) {
    const char *v = getenv("TB_TEST_FAULT");
    size_t n = strlen(kind);
    return v && strncmp(v, kind, n) == 0 && v[n] == ':';
}

int tb_fault(const char *kind, int rank, int64_t step) {
    if (!tb_fault_kind(kind)) return 0;
    const char *v = getenv("TB_TEST_FAULT");
    char *end;
    long r = strtol(v + strlen(kind) + 1, &end, 10);
    if (r != -1 && r != rank) return 0;
    if (*end != ':' || step < 0) return 1;
    return strtoll(end + 1, NULL, 10) == step;
}

int tb_fault_nth(const char *kind, atomic_int *count) {
    if (!getenv("TB_TEST_FAULT")) return 0;
    int n = atomic_fetch_add(count, 1) + 1, rank = tb_fault_rank();
    return tb_fault(kind, rank >= 0 ? rank : 0, n);
}

int tb_fault_arg(const char *kind, int rank, int64_t *arg) {
    const char *v = getenv("TB_TEST_FAULT");
    if (!tb_fault(kind, rank, -1)) return 0;
    const char *c = strchr(v + strlen(kind) + 1, ':');
    if (!c) return 0;
    char *end;
    long long x = strtoll(c + 1, &end, 10);
    if (end == c + 1) return 0;
    *arg = x;
    return 1;
}

void tb_fault_process(int rank, int64_t step) {
    if (tb_fault("kill", rank, step)) raise(SIGKILL);
    if (tb_fault("slow-step", rank, step)) {
        struct timespec one = {1, 0};
        nanosleep(&one, NULL);
    }
    if (tb_fault("freeze", rank, step)) raise(SIGSTOP);
    if (tb_fault("interrupt", rank, step)) raise(SIGINT);
    if (tb_fault("die", rank, step))
        tb_die("TB_TEST_FAULT die: this rank's own fatal error"); /* no step: the watchdog adds it */
    if (tb_fault("exit0", rank, step) || tb_fault("exit0-late-pong", rank, step)) {
        fflush(stdout);
        _Exit(0);
    }
}

int tb_fault_in_backward(int rank, int64_t step) {
    return tb_fault("kill-bwd", rank, step) || tb_fault("freeze-bwd", rank, step) ||
           tb_fault("nccl-abort", rank, step);
}
