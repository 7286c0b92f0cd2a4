/* test_core.c - src/core/: the abort path runs every registered cleanup
 * (ncclCommAbort's slot) last-registered first, skips removed ones, and
 * still ends the process with the exit code. Each case runs in a child. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/core/log.h"
#include "tests/tb_test.h"

static int g_pipe[2];

static void note(void *ctx) {
    char c = *(const char *)ctx;
    if (write(g_pipe[1], &c, 1) != 1) _exit(99);
}

int main(void) {
    TB_CHECK(pipe(g_pipe) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(g_pipe[0]);
        static const char a = 'a', b = 'b', c = 'c';
        tb_add_abort_cleanup(note, (void *)&a);
        int idb = tb_add_abort_cleanup(note, (void *)&b);
        tb_add_abort_cleanup(note, (void *)&c);
        tb_remove_abort_cleanup(idb);
        tb_die("test: ending on purpose");
    }
    close(g_pipe[1]);
    char buf[8] = {0};
    ssize_t n = 0, r;
    while (n < 7 && (r = read(g_pipe[0], buf + n, (size_t)(7 - n))) > 0) n += r;
    int status = 0;
    waitpid(pid, &status, 0);
    TB_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1, "child exit status %d, want exit 1",
             status);
    TB_CHECK(n == 2 && buf[0] == 'c' && buf[1] == 'a',
             "cleanups ran as '%.*s', want 'ca' (last registered first, removed one skipped)",
             (int)n, buf);
    return tb_test_exit("core");
}
