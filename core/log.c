/* log.c - rank-aware one-line messages and the job-wide abort path. */
#include "core/log.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Set once by the main thread after MPI_Init, read by any thread's message
 * (a start-up guard may print while MPI_Init runs): the host name is written
 * first, then published by the release store of the rank. */
static atomic_int g_rank = -1;
static atomic_int g_world = 1;
static char g_host[64] = "";
static tb_abort_hook _Atomic g_abort_hook; /* static: NULL (clang takes no (void *)0 for an atomic) */

void tb_log_set_identity(int rank, int world, const char *host) {
    snprintf(g_host, sizeof g_host, "%s", host ? host : "");
    atomic_store_explicit(&g_world, world, memory_order_relaxed);
    atomic_store_explicit(&g_rank, rank, memory_order_release);
}

int tb_log_rank(void) { return atomic_load_explicit(&g_rank, memory_order_acquire); }

/* The first of vars[0..n) set to a whole number >= min; -1 when none is. */
static int env_first(const char *const *vars, size_t n, long min) {
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(vars[i]);
        char *end = NULL;
        long x = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && *end == '\0' && x >= min && x <= 1L << 30) return (int)x;
    }
    return -1;
}

/* The rank the launcher gave this process, from its environment; -1 when
 * none is set (not launched by mpirun, prterun or srun). */
static int launcher_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    return env_first(vars, sizeof vars / sizeof vars[0], 0);
}

int tb_log_launcher_rank(void) { return launcher_rank(); }

int tb_log_launcher_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
    return env_first(vars, sizeof vars / sizeof vars[0], 1);
}

static int g_usage_quiet = 0; /* a usage error waits before its line (not launcher rank 0) */

void tb_log_usage_errors(int on) { g_usage_quiet = on && launcher_rank() > 0; }
const char *tb_log_host(void) { return g_host; }

void tb_set_abort_hook(tb_abort_hook hook) { atomic_store(&g_abort_hook, hook); }

/* One thread ends the process: the first to reach tb_die / TB_FATAL /
 * tb_abort prints and exits; any other thread that gets there meanwhile
 * (two loader threads meeting two bad files under --strict-data) waits for
 * the exit, so the job prints one error line, not several. The same thread
 * may come back (a fuzz target's abort hook longjmps out and reads on). */
static atomic_int g_ending = 0;
static _Thread_local int t_ending = 0;

static void claim_the_end(void) {
    if (!tb_log_claim_end()) tb_log_park(); /* another thread is ending the process */
}

/* Cleanups that must run before the job is torn down (ncclCommAbort on a
 * live communicator, so no rank is left inside a collective). */
#define TB_MAX_ABORT_CLEANUPS 8
static struct { /* ctx stored before fn, fn read before ctx: a dying thread sees a pair or nothing */
    tb_abort_cleanup _Atomic fn;
    void *_Atomic ctx;
} g_cleanups[TB_MAX_ABORT_CLEANUPS];
static atomic_int g_ncleanups = 0;

int tb_add_abort_cleanup(tb_abort_cleanup fn, void *ctx) {
    int i = atomic_fetch_add(&g_ncleanups, 1);
    if (i >= TB_MAX_ABORT_CLEANUPS) TB_FATAL("more than %d abort cleanups", TB_MAX_ABORT_CLEANUPS);
    atomic_store(&g_cleanups[i].ctx, ctx);
    atomic_store(&g_cleanups[i].fn, fn);
    return i;
}

void tb_remove_abort_cleanup(int id) {
    if (id >= 0 && id < TB_MAX_ABORT_CLEANUPS) atomic_store(&g_cleanups[id].fn, NULL);
}

static tb_abort_cleanup _Atomic g_notice; /* static: NULL (clang takes no (void *)0 for an atomic) */
static void *_Atomic g_notice_ctx;

void tb_set_abort_notice(tb_abort_cleanup fn, void *ctx) {
    atomic_store(&g_notice_ctx, ctx);
    atomic_store(&g_notice, fn);
}

static tb_abort_cleanup _Atomic g_last; /* static: NULL, as g_notice */
static void *_Atomic g_last_ctx;

void tb_set_abort_last(tb_abort_cleanup fn, void *ctx) {
    atomic_store(&g_last_ctx, ctx);
    atomic_store(&g_last, fn);
}

void tb_run_abort_last(void) {
    void *ctx = atomic_load(&g_last_ctx);
    tb_abort_cleanup last = atomic_exchange(&g_last, NULL);
    if (last) last(ctx);
}

int tb_log_claim_end(void) {
    if (t_ending) return 1;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g_ending, &expected, 1)) return 0;
    t_ending = 1;
    return 1;
}

int tb_log_ending(int elsewhere) { return atomic_load(&g_ending) && !(elsewhere && t_ending); }

_Noreturn void tb_log_park(void) {
    for (;;) pause();
}

void tb_log_park_if_ending(void) {
    if (tb_log_ending(1)) tb_log_park();
}

/* The message of the tb_die / TB_FATAL that is ending the process, for the
 * cleanups (the results file's abort reason). Written once, by the thread
 * that claimed the end, before the cleanups run. */
static char g_last_error[4096];

const char *tb_log_last_error(void) { return g_last_error; }

/* A cleanup that dies (tb_die inside it, not trapped) comes back here on
 * the same thread: the cleanups are not run again, the process ends. */
static _Thread_local int t_in_cleanups = 0;

/* tb_abort's exit status, written by the thread that claimed the end before
 * its notice runs (the watchdog sends it to rank 0 with the line) */
static int g_exit_code = 1;

int tb_log_exit_code(void) { return g_exit_code; }

_Noreturn void tb_abort(int exit_code) {
    claim_the_end();
    g_exit_code = exit_code;
    fflush(NULL);
    if (!t_in_cleanups) {
        t_in_cleanups = 1;
        tb_abort_cleanup notice = atomic_load(&g_notice);
        if (notice) notice(atomic_load(&g_notice_ctx));
        int n = atomic_load(&g_ncleanups);
        for (int i = n - 1; i >= 0; i--) { /* last registered first */
            tb_abort_cleanup fn = i < TB_MAX_ABORT_CLEANUPS ? atomic_load(&g_cleanups[i].fn) : NULL;
            if (fn) fn(atomic_load(&g_cleanups[i].ctx));
        }
        tb_run_abort_last();
        t_in_cleanups = 0;
    }
    tb_abort_hook hook = atomic_load(&g_abort_hook);
    if (hook) hook(exit_code);
    /* _exit, not exit: other threads (the loader's, the watchdog's, the
     * results snapshots', OpenBLAS's, a helper left inside ncclCommAbort)
     * are still running, and exit's handlers (HDF5's and OpenBLAS's
     * teardown, the CUDA runtime's) would free what they use under them:
     * a segfault after the error line. Every file trainbench writes is
     * written under a temporary name and renamed, and the cleanups remove
     * the temporary ones left open (h5io.c), so nothing needs exit's
     * closing of files. */
    fflush(NULL);
    _exit(exit_code);
}

char *tb_escape_controls(const char *in, char *out, size_t len) {
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)in; *c && n + 5 < len; c++) {
        if (*c >= 0x20 && *c != 0x7f) out[n++] = (char)*c;
        else if (*c == '\n') n += (size_t)snprintf(out + n, len - n, "\\n");
        else if (*c == '\t') n += (size_t)snprintf(out + n, len - n, "\\t");
        else if (*c == '\r') n += (size_t)snprintf(out + n, len - n, "\\r");
        else n += (size_t)snprintf(out + n, len - n, "\\x%02x", *c);
    }
    if (len) out[n < len ? n : len - 1] = '\0';
    return out;
}

/* Formats "trainbench[rank R host]: <kind>fmt\n" and writes it with one
 * call, so lines from many ranks on one terminal never interleave; a
 * control character in it (a file name's newline) is escaped. */
static void emit(const char *kind, const char *fmt, va_list ap) {
    char raw[4096], line[4096];
    size_t n;
    int rank = atomic_load_explicit(&g_rank, memory_order_acquire); /* then g_host is whole */
    if (rank >= 0 && atomic_load_explicit(&g_world, memory_order_relaxed) > 1)
        n = (size_t)snprintf(raw, sizeof raw, "trainbench[rank %d %s]: %s", rank, g_host, kind);
    else
        n = (size_t)snprintf(raw, sizeof raw, "trainbench: %s", kind);
    if (n < sizeof raw) vsnprintf(raw + n, sizeof raw - n, fmt, ap);
    n = strlen(tb_escape_controls(raw, line, sizeof line - 1));
    line[n++] = '\n';
    fwrite(line, 1, n, stderr);
    fflush(stderr);
}

static void emitf(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emitf(const char *kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit(kind, fmt, ap);
    va_end(ap);
}

static _Thread_local tb_fatal_trap *t_trap = NULL;

void tb_fatal_trap_set(tb_fatal_trap *trap) { t_trap = trap; }

/* Takes this thread's trap off (tb_die / tb_fatal_at write its message,
 * then spring it: longjmp). */
static tb_fatal_trap *take_trap(void) {
    tb_fatal_trap *tr = t_trap;
    t_trap = NULL;
    return tr;
}

/* Ends the process after one line "<kind><g_last_error>": the message is
 * kept for the cleanups (tb_log_last_error) and printed with one write. */
static _Noreturn void end_with(int exit_code, const char *kind) {
    fflush(stdout);
    emitf(kind, "%s", g_last_error);
    tb_abort(exit_code);
}

_Noreturn void tb_die(const char *fmt, ...) {
    va_list ap;
    tb_fatal_trap *tr = take_trap();
    if (tr) {
        va_start(ap, fmt);
        vsnprintf(tr->msg, sizeof tr->msg, fmt, ap);
        va_end(ap);
        longjmp(tr->env, 1);
    }
    claim_the_end();
    if (g_usage_quiet && tb_log_rank() < 0) {
        /* MPI has not started: the launcher's rank 0 says it, and the
         * launcher ends the job within about 1 s of its exit, this rank
         * with it. Still here after 3 s (rank 0 did not hit this error:
         * other arguments, another host's files; or no launch of ours at
         * all, only its variables inherited): say it too. */
        fflush(stdout);
        sleep(3);
    }
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    va_end(ap);
    end_with(1, "error: ");
}

_Noreturn void tb_die_code(int exit_code, const char *fmt, ...) {
    va_list ap;
    claim_the_end();
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    va_end(ap);
    end_with(exit_code, "error: ");
}

void tb_say_error(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    va_start(ap, fmt);
    emit("error: ", fmt, ap);
    va_end(ap);
}

_Noreturn void tb_fatal_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    tb_fatal_trap *tr = take_trap();
    if (tr) {
        int n = snprintf(tr->msg, sizeof tr->msg, "%s:%d: ", file, line);
        if (n < 0 || (size_t)n >= sizeof tr->msg) n = 0;
        va_start(ap, fmt);
        vsnprintf(tr->msg + n, sizeof tr->msg - (size_t)n, fmt, ap);
        va_end(ap);
        longjmp(tr->env, 1);
    }
    claim_the_end();
    char body[3584], kind[512];
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    snprintf(g_last_error, sizeof g_last_error, "%s:%d: %s", file, line, body);
    snprintf(kind, sizeof kind, "%s:%d: fatal: ", file, line);
    fflush(stdout);
    emitf(kind, "%s", body);
    tb_abort(1);
}

void tb_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit("warning: ", fmt, ap);
    va_end(ap);
}

void tb_info(const char *fmt, ...) {
    if (tb_log_rank() > 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

int tb_stdout_is_pipe(void) {
    struct stat st;
    return fstat(STDOUT_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}
