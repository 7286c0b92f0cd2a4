/* monitor_mpi_internal.h - what the MPI watchdog's two files share
 * (monitor_mpi.c watches, monitor_mpi_end.c ends the job): the messages, the
 * monitor's state and the helpers each side calls. Private to comm/. */
#ifndef TB_MONITOR_MPI_INTERNAL_H
#define TB_MONITOR_MPI_INTERNAL_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "comm/monitor.h"

enum { TAG_STATUS = 0x7c01, TAG_TICK, TAG_ABORT, TAG_PING, TAG_PONG, TAG_ABORT_SEEN, TAG_FAIL };

#define WHAT_MAX 48
#define PHASE_MAX 40         /* tb_monitor_phase's words: "scaling row 2 of 3 (2 ranks)" */
#define WHY_MAX 512
/* A rank told to abort waits this long for rank 0's MPI_Abort, then exits
 * by itself: longer than rank 0's 2 s wait for every rank's line. */
#define ABORT_SELF_EXIT_S 4.0

typedef struct {
    int64_t step;
    double in_for;           /* seconds the sender had been in `what` when it sent */
    int collective;
    char what[WHAT_MAX];
    char phase[PHASE_MAX];   /* "" in the training run, else what its steps belong to */
} progress_msg;

typedef struct {             /* a rank -> rank 0 (TAG_FAIL): its own error */
    int code;                /* the exit status it ends with (tb_abort's) */
    char why[WHY_MAX];
} fail_msg;

typedef struct {             /* rank 0 -> every rank */
    progress_msg root;       /* rank 0's own progress */
    int quiet_rank;          /* the rank heard from longest ago (-1: none) */
    double quiet_for;
    progress_msg quiet;      /* its last progress */
} tick_msg;

struct tb_monitor {
    MPI_Comm comm;
    int rank, size;
    atomic_int ending;       /* abort_all, teardown or rank 0's own error under way: MPI failures expected */
    atomic_int failing;      /* this rank is ending on its own error (tb_die): its line went to rank 0 */
    atomic_int stopping;     /* tb_monitor_stop has begun: the last collective is behind this rank */
    atomic_int told;         /* failing, and rank 0's reason has come back: rank 0 is ending the job */
    char *hosts;
    double timeout, period;
    tb_monitor_abort_fn fn;
    void *ctx;
    pthread_t thread;
    pthread_mutex_t mu;
    int stop;
    /* this rank's progress, written by the main thread under mu */
    int64_t step;
    char what[WHAT_MAX];
    char phase[PHASE_MAX];
    int collective;
    double since;
    /* rank 0: what each rank said last, and when (local clock) */
    double *heard;
    progress_msg *last;
    MPI_Request status_rq;
    progress_msg status_in;
    MPI_Request *tick_rq;    /* [size] */
    tick_msg *tick_out;      /* [size]: rank r's tick stays untouched until tick_rq[r] completes */
    /* the others: rank 0's last tick */
    double tick_heard;
    tick_msg tick;
    MPI_Request status_out_rq;
    progress_msg status_out;
    int64_t sent_step;       /* step of the last status sent */
    char *pinged_by;         /* [size]: the ranks whose ping came (sent only in their teardown: alive then) */
};

/* Ping and pong carry no data: sent from this constant, any number at once. */
extern const char mon_ping;

static inline void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static inline const char *host(const tb_monitor *m, int r) { return m->hosts + 64 * (size_t)r; }

/* MPI_SUCCESS, or: while watching, ends the job naming the call and MPI's
 * error string; while already ending it, returns the code to the caller. */
#define MON_CHECK(m, call) mon_check((m), (call), #call, __FILE__, __LINE__)
int mon_check(tb_monitor *m, int rc, const char *expr, const char *file, int line);

/* This rank's progress (or the collective its GPU is stuck in, when older). */
progress_msg mon_own_progress(tb_monitor *m);
/* Answers pings while we wait for something else. */
void mon_answer_pings(tb_monitor *m);
/* "step N, in[ the] WHAT", or "step N of PHASE, in[ the] WHAT" */
void mon_describe(char *buf, size_t len, const progress_msg *p);
/* "step N" or "step N of PHASE" */
void mon_step_words(char *buf, size_t len, int64_t step, const char *phase);
/* Ends the job after telling the others why (rank 0, or anyone when rank 0
 * is silent). Does not return. */
_Noreturn void mon_abort_all(tb_monitor *m, const char *why);
/* The same, the job ending with exit status code (MPI_Abort's). */
_Noreturn void mon_abort_code(tb_monitor *m, const char *why, int code);
/* How long a rank in the launcher's teardown stays after it began
 * (answering pings) before it exits, so that the others' lines are out
 * first: Open MPI 4.1's mpirun SIGKILLs every rank as soon as one exits. */
double mon_teardown_hold(void);
/* Answers pings until mon_teardown_hold() after `began` (tb_now()), then
 * exits with status 1. */
_Noreturn void mon_hold_exit(tb_monitor *m, double began);
/* The launcher is tearing the job down (a rank died or left): names the
 * ranks that no longer answer a ping, then exits. */
_Noreturn void mon_on_teardown(tb_monitor *m);
/* Rank 0: a rank's own fatal error line (TAG_FAIL) becomes the job's
 * reason, unless rank 0 is ending on an error of its own. */
void mon_take_failures(tb_monitor *m);
/* A rank ending on its own error (tb_die, TB_FATAL), as tb_abort's notice,
 * first of all: its line, with its step, goes to rank 0, which ends the job
 * with it (results file marked with that reason, every rank told) instead
 * of finding the rank gone. On rank 0 the line goes to every other rank as
 * the job's reason (each prints it, at most 2 s waited for), before rank
 * 0's cleanups and MPI_Abort. */
void mon_fatal_notice(void *unused);
/* Then, as an abort cleanup (after ncclCommAbort): waits for rank 0's
 * answer, at most 2 s, and then for rank 0's MPI_Abort. */
void mon_on_rank_fatal(void *unused);
/* The watchdog running in this process, for mon_on_rank_fatal. */
extern tb_monitor *_Atomic mon_running;

#endif
