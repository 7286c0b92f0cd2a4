/* train_signals.c - how a run ends on a failure or a signal when no other
 * rank's watchdog is there to record it.
 *
 * The abort mark: on rank 0, every tb_die / TB_FATAL (a bad file under
 * --strict-data, a full disk, a launch mistake) marks the results file
 * "aborted" with its message as the reason before the process ends, from
 * whichever thread died (an abort cleanup, core/log.h), so the file never
 * stays "running" after an error.
 *
 * Ctrl-C (SIGINT), SIGUSR1 and SIGUSR2 (a batch system's warning before
 * its time limit, forwarded to every rank by mpirun), and SIGTERM where the
 * watchdog does not take it (one rank, or --timeout 0): a handler wakes a
 * thread that ends the run with one line, the results file marked
 * "aborted" by the abort mark, and exit status 128 + the signal's number,
 * as a shell expects of an interrupted program. With several ranks the line is this rank's own error: the
 * watchdog takes it to rank 0, which makes it the job's reason (a SIGINT
 * to one rank, or to all from srun or scancel --signal=INT). With several
 * ranks and the watchdog on, comm/monitor_mpi.c handles SIGTERM (the
 * launcher's teardown) instead. SIGPIPE (standard output piped to a reader
 * that has gone, as '| head') ends the run in the same way. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "comm/monitor.h"
#include "core/faults.h"
#include "core/log.h"
#include "core/thread_start.h"
#include "src/train/train_setup.h"

/* ---- the abort mark ------------------------------------------------------------------ */

static void mark_aborted(void *p) {
    tb_run_report *rep = p;
    const char *line = tb_log_last_error(), *where = tb_monitor_fail_where();
    char why[2048]; /* with several ranks, as a peer's error reads: "rank 0 (host) failed at step N, in X: line" */
    snprintf(why, sizeof why, "%s%s%s", where, where[0] ? ": " : "", line[0] ? line : "the run ended on an error");
    tb_fatal_trap trap; /* a write that fails too (the disk is still full) ends nothing more */
    if (setjmp(trap.env) == 0) {
        tb_fatal_trap_set(&trap);
        tb_run_report_write_on_abort(rep, why);
    } else if (strcmp(trap.msg, line) != 0) { /* the same failure as the run's error line: said once */
        tb_warn("results file '%s' not marked aborted: %s", rep->path, trap.msg);
    }
    tb_fatal_trap_set(NULL);
}

void tb_train_abort_mark_start(tb_train_run *r) {
    if (r->info.rank == 0 && r->report.path[0] && r->abort_mark < 0)
        r->abort_mark = tb_add_abort_cleanup(mark_aborted, &r->report);
}

void tb_train_abort_mark_stop(tb_train_run *r) {
    tb_remove_abort_cleanup(r->abort_mark);
    r->abort_mark = -1;
}

/* ---- signals -------------------------------------------------------------------------- */

static int g_pipe[2] = {-1, -1};
static pthread_t g_thread; /* joined at stop: a signal taken just before is not left half-handled */
static int g_took_term = 0; /* SIGTERM is ours (no watchdog to take it) */
static tb_run_report *g_report; /* rank 0's results file (path "" elsewhere), for the line */
static volatile sig_atomic_t g_piped; /* a SIGPIPE's byte is in the pipe: later ones add nothing */

static void on_signal(int sig) {
    if (sig == SIGPIPE && g_piped) return;
    if (sig == SIGPIPE) g_piped = 1;
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t n = write(g_pipe[1], &c, 1); /* async-signal-safe; the thread does the rest */
    (void)n;
    errno = saved;
}

static void *watch(void *arg) {
    (void)arg;
    unsigned char c = 0;
    ssize_t n;
    while ((n = read(g_pipe[0], &c, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1 || c == 0) return NULL; /* the run ended: tb_train_signals_stop's 0 (or end of file) */
    int sig = c;
    /* SIGPIPE: standard output a pipe ('| head') or not (a socket of the
     * launcher's or a peer's, whose other end has gone) */
    int out_pipe = tb_stdout_is_pipe();
    const char *name = sig == SIGINT    ? "SIGINT (Ctrl-C)"
                       : sig == SIGTERM ? "SIGTERM"
                       : sig == SIGPIPE && out_pipe
                           ? "SIGPIPE (a write to a pipe or socket whose reader has gone, as standard output's when "
                             "piped to 'head'; send the output to a file to keep a run going)"
                       : sig == SIGPIPE ? "SIGPIPE (a write to a socket whose other end has gone: a peer rank's or "
                                          "the launcher's; the other ranks' lines say more)"
                       : sig == SIGUSR1 ? "SIGUSR1 (a batch system's warning, as Slurm's --signal=USR1@T)"
                                        : "SIGUSR2 (a batch system's warning, as Slurm's --signal=USR2@T)";
    const char *path = g_report->path;
    if (!path[0])
        tb_die_code(128 + sig, "train: stopped by %s", name);
    if (tb_run_report_close_unbegun(g_report)) /* in start-up: the abort mark writes nothing */
        tb_die_code(128 + sig, "train: stopped by %s in start-up, before the first step; the results file '%s' "
                    "was not written", name, path);
    tb_die_code(128 + sig, "train: stopped by %s; the results file '%s' keeps the steps measured so far, marked "
                "aborted", name, path);
}

void tb_train_signals_start(tb_train_run *r) {
    if (g_pipe[0] >= 0) return;
    if (pipe2(g_pipe, O_CLOEXEC) != 0) TB_FATAL("pipe for the signal thread: %s", strerror(errno));
    g_report = &r->report;
    tb_thread_start(&g_thread, NULL, watch, NULL, "the signal thread");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    /* a second Ctrl-C ends the process at once (an end stuck writing to a
     * stalled pipe); interrupted calls resume rather than fail */
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL); /* mpirun forwards them: without a handler each rank died without a line */
    sigaction(SIGUSR2, &sa, NULL);
    g_took_term = r->mon == NULL; /* else the watchdog takes SIGTERM */
    if (g_took_term) sigaction(SIGTERM, &sa, NULL);
    /* stdout a pipe whose reader has gone ('trainbench | head -2'): each
     * write raises SIGPIPE, whose default ended one rank without a line,
     * its results file left with the snapshot's guess. Kept, not reset: the
     * main thread's next write must not end the process before the line */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPIPE, &sa, NULL);
    if (tb_fault("interrupt-startup", r->info.rank, -1)) { /* test only: Ctrl-C in a start-up that takes long */
        raise(SIGINT);
        tb_log_park();
    }
}

void tb_train_signals_stop(void) {
    if (g_pipe[0] < 0) return;
    signal(SIGINT, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    signal(SIGUSR2, SIG_DFL);
    signal(SIGPIPE, SIG_IGN); /* as main left it: a later write's EPIPE is output_checked's to report */
    if (g_took_term) signal(SIGTERM, SIG_DFL);
    /* a 0 byte ends the thread, and a signal's byte already in the pipe is
     * read before it: the thread then ends the process (its line, exit
     * status 128+N) and this join does not return. Unjoined, main went on
     * to free the results report under the abort mark and could return 0
     * after the line. (A 0, not the end of file: a write end inherited by a
     * forked child would hold the join for ever.) */
    unsigned char zero = 0;
    ssize_t n = write(g_pipe[1], &zero, 1);
    close(g_pipe[1]);
    g_pipe[1] = -1;
    if (n == 1) pthread_join(g_thread, NULL);
}
