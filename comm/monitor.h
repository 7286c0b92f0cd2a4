/* monitor.h - the watchdog: liveness and progress of every rank, so that a
 * dead, frozen or absent rank is named within --timeout instead of hanging
 * the job (the promise of NCCL's tests and PyTorch's NCCL watchdog).
 *
 * Each rank runs a monitor thread on its own duplicate communicator. Ranks
 * send rank 0 their progress (step, what they are doing, whether it is a
 * collective) several times per timeout; rank 0 ticks back. Rank 0 ends the
 * job when a rank has been silent for the timeout, or when a collective has
 * lasted the timeout (naming the rank that has not joined it, or saying
 * that none finished it); the other ranks end it when rank 0 goes silent.
 * When the launcher tears the job down (SIGTERM after a rank died or left),
 * each rank pings the others and names the ones that no longer answer.
 *
 * On a failure each rank learns the one-line reason and calls the abort
 * function (print it; rank 0 marks its results file aborted); then the job
 * ends through MPI_Abort. */
#ifndef TB_MONITOR_H
#define TB_MONITOR_H

#include <stdint.h>

#include "comm/comm.h"

/* Called from the monitor thread with the reason; must be quick (it has
 * well under a second when the launcher is killing the job: Open MPI sends
 * SIGKILL one second after SIGTERM). final = 1: the one line to print, once
 * per rank. final = 0: only on rank 0, when the launcher starts tearing the
 * job down (SIGTERM), before the other ranks are pinged to find which are
 * gone: a provisional reason to save state with at once; print nothing, the
 * final call follows if time allows. The final = 0 call comes from a thread
 * of its own and may still run when the final one does: it must not replace
 * what a final call wrote. */
typedef void (*tb_monitor_abort_fn)(const char *why, int final, void *ctx);

typedef struct tb_monitor tb_monitor;

/* Collective over `world`. hosts: world size x 64 characters. Returns NULL
 * (every call below accepts it) for a single rank or without MPI thread
 * support. */
tb_monitor *tb_monitor_start(tb_comm *world, const char *hosts, double timeout_s,
                             tb_monitor_abort_fn fn, void *ctx);
/* The main thread reports what it does; `what` names the collective when
 * in_collective (identical text on every rank for the same collective). */
void tb_monitor_progress(tb_monitor *m, int64_t step, const char *what, int in_collective);
/* What the steps reported from here on belong to, named after the step
 * number in every line ("step 4 of scaling row 2 of 3 (2 ranks)"): "" (the
 * default) for the training run's own steps. Up to 39 characters. */
void tb_monitor_phase(tb_monitor *m, const char *phase);
/* After this rank began ending on its own error (tb_die: the watchdog's
 * notice, the first step of the abort): "rank R (host) failed at step N, in
 * X" as it was then, for the results file's reason, so that rank 0's own
 * error names its step as a peer's does; "" without a watchdog. */
const char *tb_monitor_fail_where(void);
/* Stops the thread; call on every rank after the last collective. */
void tb_monitor_stop(tb_monitor *m);
/* Stops the watchdog that is running, if one is (tb_comm_exit_all: before
 * MPI_Finalize, which would pull MPI from under its thread). */
void tb_monitor_stop_running(void);

#endif
