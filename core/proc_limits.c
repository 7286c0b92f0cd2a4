/* proc_limits.c - see proc_limits.h. Why (measured here with Open MPI 4.1):
 * a run without mpirun, whose MPI_Init starts a daemon of Open MPI's, failed
 * with pages of ORTE_ERROR_LOG lines under `ulimit -n` 24 ("socket() failed:
 * Too many open files") and `ulimit -s` 200 KiB ("Unable to start a daemon
 * on the local node"), and ran at 28 and 256 KiB; with a soft `ulimit -s`
 * of 200 KiB raised only in the process, 5 of 6 concurrent trainings
 * segfaulted in a thread: threads are given stacks of the size the limit
 * had when the process started. A rank holds about 22 descriptors of its
 * own (libraries, the results file, one a loader thread), more with NCCL's
 * sockets. What is still too low after this, comm_mpi.c names in one line. */
#include "core/proc_limits.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#define STACK_FLOOR ((rlim_t)TB_STACK_FLOOR_BYTES)
#define STACK_USUAL ((rlim_t)TB_STACK_USUAL_BYTES)
#define NOFILE_USUAL ((rlim_t)TB_NOFILE_USUAL)

/* The soft limit of `res` raised to `usual` (or the hard limit under it)
 * where it is under `below`; *was gets the limit before (a copy). 1 if it
 * was raised. */
static int raise_soft(int res, rlim_t below, rlim_t usual, struct rlimit *was) {
    if (getrlimit(res, was) != 0 || was->rlim_cur == RLIM_INFINITY || was->rlim_cur >= below) return 0;
    rlim_t to = was->rlim_max != RLIM_INFINITY && was->rlim_max < usual ? was->rlim_max : usual;
    if (to <= was->rlim_cur) return 0;
    struct rlimit up = {to, was->rlim_max};
    return setrlimit(res, &up) == 0;
}

void tb_limits_raise(char **argv) {
    struct rlimit was, now;
    raise_soft(RLIMIT_NOFILE, NOFILE_USUAL, NOFILE_USUAL, &was);
    if (!raise_soft(RLIMIT_STACK, STACK_FLOOR, STACK_USUAL, &was)) return;
    /* under the floor still (a hard limit below it): a run again gains nothing, and comm_mpi.c's line names
     * the limit as it was; else the process run again starts at or above the floor and does not come here */
    if (getrlimit(RLIMIT_STACK, &now) != 0 || now.rlim_cur < STACK_FLOOR) {
        setrlimit(RLIMIT_STACK, &was);
        return;
    }
    fflush(stdout);
    fflush(stderr);
    execv("/proc/self/exe", argv); /* replaces every thread, those of libraries already loaded too */
    setrlimit(RLIMIT_STACK, &was); /* still here: the threads keep the stacks they would have had, and the limit
                                      says so to comm_mpi.c's check */
}
