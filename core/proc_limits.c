/* proc_limits.c - see proc_limits.h. Why (measured here with Open MPI 4.1):
 * a run without mpirun, whose MPI_Init starts a daemon of Open MPI's, failed
 * with pages of ORTE_ERROR_LOG lines under `ulimit -n` 24 ("socket() failed:
 * Too many open files") and `ulimit -s` 200 KiB ("Unable to start a daemon
 * on the local node"); and with a soft `ulimit -s` of 200 KiB raised only in
 * the process, 5 of 6 concurrent trainings segfaulted in a thread: the
 * threads had been given 200 KiB stacks when the process started. A rank
 * holds about 22 descriptors of its own (libraries, the results file, one a
 * loader thread), more with NCCL's sockets. */
#include "core/proc_limits.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#define STACK_FLOOR ((rlim_t)256 << 10)
#define STACK_USUAL ((rlim_t)8 << 20) /* Linux's usual soft limit */
#define NOFILE_USUAL ((rlim_t)1024)

/* The soft limit of `res` raised to `usual` (or the hard limit under it)
 * where it is under `below`: 1 if it was raised. */
static int raise_soft(int res, rlim_t below, rlim_t usual) {
    struct rlimit rl;
    if (getrlimit(res, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= below) return 0;
    rlim_t to = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < usual ? rl.rlim_max : usual;
    if (to <= rl.rlim_cur) return 0;
    struct rlimit up = {to, rl.rlim_max};
    return setrlimit(res, &up) == 0;
}

void tb_limits_raise(char **argv) {
    raise_soft(RLIMIT_NOFILE, NOFILE_USUAL, NOFILE_USUAL);
    if (!raise_soft(RLIMIT_STACK, STACK_FLOOR, STACK_USUAL)) return;
    /* the new limit is the started process's own from here on: no loop (it is not under the floor again,
     * or was not raised) */
    fflush(stdout);
    fflush(stderr);
    execv("/proc/self/exe", argv);
}
