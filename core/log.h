/* log.h - one-line diagnostics, and fatal errors that end the whole job.
 *
 * Every message names the rank and host once MPI is up ("trainbench[rank 3
 * node07]: ..."). tb_die() is for user errors (bad flag, missing file): one
 * line that says what is wrong and what to do. TB_FATAL() is for internal or
 * library errors and adds file:line. Both end through the abort hook, which
 * comm/ sets to MPI_Abort so one failing rank takes the whole job down. */
#ifndef TB_LOG_H
#define TB_LOG_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>

/* Identity printed in every message; rank < 0 means "not distributed". */
void tb_log_set_identity(int rank, int world, const char *host);
int tb_log_rank(void);
const char *tb_log_host(void);
/* The rank the launcher gave this process (OMPI_COMM_WORLD_RANK, PMIX_RANK,
 * PMI_RANK or SLURM_PROCID), readable before MPI starts; -1 when none. */
int tb_log_launcher_rank(void);
/* How many ranks the launcher started (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * SLURM_NTASKS); -1 when none says. */
int tb_log_launcher_size(void);

/* Called instead of exit() by tb_die/TB_FATAL; must not return. */
typedef void (*tb_abort_hook)(int exit_code);
void tb_set_abort_hook(tb_abort_hook hook);

/* Work that must happen before the job is torn down, run by tb_abort (last
 * registered first) before the abort hook: ncclCommAbort on a live NCCL
 * communicator, so MPI_Abort never leaves a rank inside a collective. A
 * cleanup should not call tb_die/TB_FATAL (set a trap around work that
 * might: a die inside a cleanup prints a second line and skips the
 * cleanups left). Returns an id for removal. */
typedef void (*tb_abort_cleanup)(void *ctx);
int tb_add_abort_cleanup(tb_abort_cleanup fn, void *ctx);
void tb_remove_abort_cleanup(int id);

/* One notice run by tb_abort before every cleanup (comm/'s watchdog: this
 * rank's error line to rank 0, before ncclCommAbort or a results write can
 * delay it). The same rules as a cleanup; NULL removes it. */
void tb_set_abort_notice(tb_abort_cleanup fn, void *ctx);
/* One cleanup run by tb_abort after every other one, whenever it was
 * registered (h5io.c's removal of temporary files: a cleanup before it,
 * the results file's abort mark, may be waiting for the main thread to
 * finish and rename the checkpoint it is writing). NULL removes it. */
void tb_set_abort_last(tb_abort_cleanup fn, void *ctx);
/* Runs that last cleanup now, once (later calls and tb_abort skip it): for
 * a thread that ends the process without tb_abort (comm/'s watchdog, after
 * its results mark, before MPI_Abort or _exit), so a job ended mid-write
 * leaves no temporary file either. */
void tb_run_abort_last(void);
/* Whether some thread has begun ending the process (tb_abort): 1 from its
 * first step. elsewhere: only when that thread is not the caller. */
int tb_log_ending(int elsewhere);
/* Claims the end for the calling thread without ending the process yet (a
 * watchdog that has printed the job's reason and waits for MPI_Abort): a
 * tb_die on any other thread from then on waits for the exit instead of
 * printing a second line. 1 when this thread holds the end (now or
 * already), 0 when another thread took it first. */
int tb_log_claim_end(void);
/* Waits, never returning, for the thread that is ending the process (a
 * thread that lost tb_log_claim_end, or must not go on beside it). */
_Noreturn void tb_log_park(void);
/* tb_log_park when another thread is ending the process (tb_log_ending(1));
 * else returns at once: a caller about to free or finish what that
 * thread's cleanups may still use (a report, a communicator). */
void tb_log_park_if_ending(void);

/* Ends the job: the notice, the cleanups, then the abort hook, then
 * _exit(exit_code) (not exit: other threads are still inside libraries
 * whose exit handlers would free what they use). */
_Noreturn void tb_abort(int exit_code);

/* Usage errors: between tb_log_usage_errors(1) and (0), set around the
 * parsing of the command line (before MPI starts), a tb_die is an error
 * that every rank of a launch finds alike in the same argv. The launcher's
 * rank 0 prints it at once; a process the launcher numbered above 0
 * (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID, read from the
 * environment) waits 3 s first, in which the launcher, seeing rank 0 exit,
 * usually ends it: one line for the job. A process still there prints its
 * own (rank 0 did not hit its error, or the variables were inherited from
 * another launch). Once MPI has set the identity (tb_log_set_identity)
 * every rank speaks at once. */
void tb_log_usage_errors(int on);
_Noreturn void tb_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* tb_die with another exit code (130 for an interrupt); never trapped. */
_Noreturn void tb_die_code(int exit_code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message of the tb_die / TB_FATAL ending the process ("" before one):
 * for a cleanup that records why (the results file's abort reason). */
const char *tb_log_last_error(void);
/* The exit status tb_abort is ending the process with (1 before one): for
 * the notice, so that rank 0 ends the job with a peer's (130 for its
 * SIGINT, 138 for its SIGUSR1) as with its own. */
int tb_log_exit_code(void);
_Noreturn void tb_fatal_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tb_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The error line of tb_die without ending anything: for verdicts every rank
 * reaches together, which then leave through a collective exit. */
void tb_say_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Informational line, printed by rank 0 only (or when not distributed). */
void tb_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Standard output is a pipe or a socket: a reader that can go away ('| head',
 * a launcher's forwarding), whose writes then fail with EPIPE or SIGPIPE. */
int tb_stdout_is_pipe(void);

/* in with its control characters written as \n, \t, \r or \xNN, into out
 * (cut to fit): a file name holding a newline stays on one line of a
 * message. Every error and warning line goes through it. Returns out. */
char *tb_escape_controls(const char *in, char *out, size_t len);

/* A trap for the calling thread's next tb_die / TB_FATAL: while one is set,
 * that call prints nothing and ends nothing; it writes its message into
 * trap->msg ("file:line: ..." for TB_FATAL), clears the trap and longjmps
 * to trap->env (setjmp then returns 1). Other threads are not affected.
 * For a stretch of work that can be undone and redone another way: the
 * CUDA graph capture of the training step (src/train/trainer.c), where a call
 * that fails inside the capture means "capture failed", not "end the
 * job". The frames it leaves must hold no lock; what they allocated on
 * the heap leaks. Set NULL to remove it. */
typedef struct {
    jmp_buf env;
    char msg[512];
} tb_fatal_trap;
void tb_fatal_trap_set(tb_fatal_trap *trap);

#define TB_FATAL(...) tb_fatal_at(__FILE__, __LINE__, __VA_ARGS__)
#define TB_ASSERT(cond)                                                       \
    do {                                                                      \
        if (!(cond)) TB_FATAL("internal check failed: %s", #cond);            \
    } while (0)

#endif
