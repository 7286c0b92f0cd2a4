/* test_nccl_bounded.c - the abort path's bounded wait (comm/nccl.h,
 * tb_nccl_run_bounded), on the host: no GPU, no NCCL.
 *
 *  - a function that blocks for ever: the runner comes back after about
 *    the bound (0.5 s; accepted 0.45 .. 3 s) saying it timed out, and the
 *    function did start (on its own thread, which then runs on);
 *  - a function that returns at once, under a 20 s bound: done, within
 *    2 s (the runner does not sit out its bound), its effect visible;
 *  - a function that takes 0.3 s under a 10 s bound: done after 0.3 s;
 *  - a bound of 0: timed out at once for the blocking function;
 *  - TB_NCCL_ABORT_WAIT_S: unset and empty give the default 5 s, "2.5" and
 *    "0" are read, "abc", "-1", "5s" and "7200" are refused with a line
 *    naming the variable.
 * A runner that ignores its bound hangs here: alarm(60) ends the test
 * then (SIGALRM kills it, ctest reports a failure). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/nccl.h"
#include "core/timer.h"
#include "tests/tb_test.h"

static atomic_int g_started = 0;

static void block_forever(void *arg) {
    (void)arg;
    atomic_fetch_add(&g_started, 1);
    for (;;) pause();
}

static void set_value(void *arg) { *(int *)arg = 42; }

static void take_300ms(void *arg) {
    struct timespec ts = {0, 300000000L};
    nanosleep(&ts, NULL);
    *(int *)arg = 7;
}

static void check_env(const char *value, double want) {
    if (value) setenv("TB_NCCL_ABORT_WAIT_S", value, 1);
    else unsetenv("TB_NCCL_ABORT_WAIT_S");
    char err[256] = "";
    double got = tb_nccl_abort_wait_s(err, sizeof err);
    if (want >= 0) {
        TB_CHECK(got == want, "TB_NCCL_ABORT_WAIT_S=%s: got %g, want %g (%s)", value ? value : "(unset)", got, want,
                 err);
    } else {
        TB_CHECK(got < 0 && strstr(err, "TB_NCCL_ABORT_WAIT_S") && strstr(err, value),
                 "TB_NCCL_ABORT_WAIT_S=%s: got %g, message \"%s\"; want a refusal naming it", value, got, err);
        printf("# refused: %s\n", err);
    }
}

int main(void) {
    alarm(60);

    double t0 = tb_now();
    int r = tb_nccl_run_bounded(block_forever, NULL, 0.5);
    double took = tb_now() - t0;
    printf("# blocking function, bound 0.5 s: result %d after %.3f s\n", r, took);
    TB_CHECK(r == TB_RUN_TIMED_OUT, "blocking function: result %d, want TB_RUN_TIMED_OUT (%d)", r, TB_RUN_TIMED_OUT);
    TB_CHECK(took >= 0.45 && took <= 3.0, "blocking function: came back after %.3f s, want about the 0.5 s bound", took);
    TB_CHECK(atomic_load(&g_started) == 1, "the blocking function started %d times, want 1", atomic_load(&g_started));

    int value = 0;
    t0 = tb_now();
    r = tb_nccl_run_bounded(set_value, &value, 20.0);
    took = tb_now() - t0;
    printf("# quick function, bound 20 s: result %d after %.3f s\n", r, took);
    TB_CHECK(r == TB_RUN_DONE, "quick function: result %d, want TB_RUN_DONE (%d)", r, TB_RUN_DONE);
    TB_CHECK(took < 2.0, "quick function: came back after %.3f s, want at once (not the 20 s bound)", took);
    TB_CHECK(value == 42, "quick function: its write is not visible after the runner returned (%d)", value);

    value = 0;
    t0 = tb_now();
    r = tb_nccl_run_bounded(take_300ms, &value, 10.0);
    took = tb_now() - t0;
    printf("# 0.3 s function, bound 10 s: result %d after %.3f s\n", r, took);
    TB_CHECK(r == TB_RUN_DONE && value == 7, "0.3 s function: result %d value %d, want done and 7", r, value);
    TB_CHECK(took >= 0.29 && took < 3.0, "0.3 s function: came back after %.3f s", took);

    t0 = tb_now();
    r = tb_nccl_run_bounded(block_forever, NULL, 0.0);
    took = tb_now() - t0;
    printf("# blocking function, bound 0 s: result %d after %.3f s\n", r, took);
    TB_CHECK(r == TB_RUN_TIMED_OUT && took < 1.0, "bound 0: result %d after %.3f s, want timed out at once", r, took);

    check_env(NULL, TB_NCCL_ABORT_WAIT_DEFAULT_S);
    check_env("", TB_NCCL_ABORT_WAIT_DEFAULT_S);
    check_env("2.5", 2.5);
    check_env("0", 0);
    check_env("abc", -1);
    check_env("-1", -1);
    check_env("5s", -1);
    check_env("7200", -1);
    return tb_test_exit("nccl_abort_bounded");
}
