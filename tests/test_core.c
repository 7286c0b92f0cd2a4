/* test_core.c - core/: the abort path runs every registered cleanup
 * (ncclCommAbort's slot) last-registered first, skips removed ones, and
 * still ends the process with the exit code; a thread's fatal trap (the
 * CUDA graph capture's) catches that thread's tb_die / TB_FATAL with their
 * message and ends nothing, once, and not another thread's; the cleanups
 * read the message being ended with, exit's handlers never run, and a
 * cleanup that dies ends the process at once. Each case runs in a child. */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "tests/tb_test.h"

static int g_pipe[2];

static void note(void *ctx) {
    char c = *(const char *)ctx;
    if (write(g_pipe[1], &c, 1) != 1) _exit(99);
}

static void *die_in_thread(void *arg) {
    (void)arg;
    tb_die("test: a thread without a trap ends the process");
}

/* Forks a case's child with a pipe back to this process (g_pipe): 0 in the
 * child (the read end closed), the child's pid here (the write end
 * closed). stdout is flushed first, so the child does not print this
 * process's buffered lines again. */
static pid_t start_child(void) {
    TB_CHECK(pipe(g_pipe) == 0, "pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        close(g_pipe[0]);
    else
        close(g_pipe[1]);
    return pid;
}

/* Reads what the child wrote into the pipe (up to len - 1 bytes) and its
 * exit status; closes the pipe. */
static int child_result(pid_t pid, char *buf, size_t len, int *status) {
    ssize_t n = 0, r;
    memset(buf, 0, len);
    while ((size_t)n < len - 1 && (r = read(g_pipe[0], buf + n, len - 1 - (size_t)n)) > 0) n += r;
    waitpid(pid, status, 0);
    close(g_pipe[0]);
    return (int)n;
}

/* The trap: caught with the message, nothing ended, cleared after springing;
 * then a thread without one ends the process as before. */
static void test_trap(void) {
    pid_t pid = start_child();
    if (pid == 0) {
        static const char x = 'x';
        tb_add_abort_cleanup(note, (void *)&x);
        static tb_fatal_trap trap;
        int ok = 1;
        if (setjmp(trap.env) == 0) {
            tb_fatal_trap_set(&trap);
            TB_FATAL("fatal-msg %d", 7);
        }
        const char *at = strstr(trap.msg, "test_core.c:"); /* __FILE__:__LINE__: the message */
        ok &= at != NULL && strcmp(trap.msg + strlen(trap.msg) - 13, ": fatal-msg 7") == 0;
        if (setjmp(trap.env) == 0) { /* sprung traps are cleared: a new one */
            tb_fatal_trap_set(&trap);
            tb_die("die-msg %s", "y");
        }
        ok &= strcmp(trap.msg, "die-msg y") == 0;
        char c = ok ? 'T' : 'F';
        if (write(g_pipe[1], &c, 1) != 1) _exit(99);
        if (setjmp(trap.env) == 0) {
            tb_fatal_trap_set(&trap); /* this thread's only */
            pthread_t th;
            pthread_create(&th, NULL, die_in_thread, NULL);
            pthread_join(th, NULL);
            _exit(4); /* not reached: the thread's tb_die ends the process */
        }
        c = 'W'; /* the other thread's tb_die sprang this thread's trap */
        if (write(g_pipe[1], &c, 1) != 1) _exit(99);
        _exit(3);
    }
    char buf[8];
    int status = 0;
    int n = child_result(pid, buf, sizeof buf, &status);
    TB_CHECK(n >= 1 && buf[0] == 'T', "trap: got '%.*s', want 'T' (TB_FATAL and tb_die caught with their messages)",
             n, buf);
    TB_CHECK(n == 2 && buf[1] == 'x', "trap: got '%.*s', want 'Tx' (another thread's tb_die not trapped, cleanups run)",
             n, buf);
    TB_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1, "trap: child exit status %d, want exit 1", status);
}

static void note_exit_handler(void) {
    char c = 'E';
    if (write(g_pipe[1], &c, 1) != 1) _exit(99);
}

/* A cleanup that reads the ending message: 'M' when it is the tb_die's. */
static void note_message(void *ctx) {
    note(ctx);
    char c = strcmp(tb_log_last_error(), "test: ending 7") == 0 ? 'M' : '?';
    if (write(g_pipe[1], &c, 1) != 1) _exit(99);
}

static void die_in_cleanup(void *ctx) {
    note(ctx);
    tb_die("test: a cleanup that dies");
}

/* The abort path: the cleanups read the message being ended with
 * (tb_log_last_error), exit's handlers never run (other threads may still be
 * inside the libraries they tear down: _exit), and the exit code is
 * tb_die's 1 or tb_die_code's. A cleanup that dies ends the process at once
 * (the cleanups left are skipped, none runs twice). */
static void test_abort_path(int which) {
    pid_t pid = start_child();
    if (pid == 0) {
        static const char a = 'a', k = 'k';
        atexit(note_exit_handler);
        tb_add_abort_cleanup(note, (void *)&a);
        tb_add_abort_cleanup(which == 2 ? die_in_cleanup : note_message, (void *)&k);
        if (which == 1) tb_die_code(130, "test: ending %d", 7);
        tb_die("test: ending %d", 7);
    }
    char buf[8];
    int status = 0;
    int n = child_result(pid, buf, sizeof buf, &status);
    const char *want = which == 2 ? "k" : "kMa";
    int code = which == 1 ? 130 : 1;
    TB_CHECK(n == (int)strlen(want) && memcmp(buf, want, (size_t)n) == 0,
             "abort path %d: got '%.*s', want '%s' (cleanups with the message, no exit handler 'E')", which, n,
             buf, want);
    TB_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == code, "abort path %d: child exit status %d, want exit %d",
             which, status, code);
}

/* The notice first (registered after every cleanup, it still runs before
 * them, and sees the process ending), then the cleanups last registered
 * first, a removed one skipped; the process still ends with exit code 1. */
static void note_if_ending(void *ctx) {
    if (tb_log_ending(0) && !tb_log_ending(1)) note(ctx); /* ending, by this thread */
}

static void test_cleanup_order(void) {
    pid_t pid = start_child();
    if (pid == 0) {
        static const char a = 'a', b = 'b', c = 'c', n = 'n';
        tb_add_abort_cleanup(note, (void *)&a);
        int idb = tb_add_abort_cleanup(note, (void *)&b);
        tb_add_abort_cleanup(note, (void *)&c);
        tb_remove_abort_cleanup(idb);
        if (!tb_log_ending(0)) tb_set_abort_notice(note_if_ending, (void *)&n);
        tb_die("test: ending on purpose");
    }
    char buf[8];
    int status = 0;
    int n = child_result(pid, buf, sizeof buf, &status);
    TB_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1, "child exit status %d, want exit 1",
             status);
    TB_CHECK(n == 3 && memcmp(buf, "nca", 3) == 0,
             "notice and cleanups ran as '%.*s', want 'nca' (the notice first, then last registered first, "
             "removed one skipped)",
             n, buf);
}

int main(void) {
    test_trap();
    test_abort_path(0);
    test_abort_path(1);
    test_abort_path(2);
    test_cleanup_order();
    return tb_test_exit("core");
}
