/* test_cuda_fused_refused.c - `test_cuda_fused refused`: --no-autotune's
 * trial run of each fused graph's engine at plan time (model/cuda/
 * cuda_engine.c cu_be_run_once), with TB_TEST_FAULT=engine-refuses making
 * trial runs refuse. Exits through test_cuda_fused.c's main (77 without a
 * CUDA device). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cuda/cuda_backend.h"
#include "tests/test_cuda_fused.h"

/* --no-autotune keeps the heuristics' first engine that runs once at plan
 * time. Three rounds over the fp16 shapes, each on a fresh backend (a
 * problem that failed once stays failed in a backend) with the plan cache
 * off: no fault (the heuristics' first choices); the first trial run of the
 * process refused (TB_TEST_FAULT engine-refuses:-1:1, the first shape's
 * conv + statistics): that shape's plan differs from the first round's (the
 * fault reached the trial) and still runs on a fused graph, the next
 * engine's, and every other shape reaches what it reached before; every
 * trial refused: no shape reaches a graph. run_case checks the results
 * against the CPU twins each time. */
void test_cuda_fused_refused(void) {
    static const char *fault[3] = {NULL, "engine-refuses:-1:1", "engine-refuses:-1"};
    const int ncases = test_cuda_fused_ncases();
    char first[3][2048] = {"", "", ""};
    int reached[3] = {0}, first_reached[3] = {0};
    for (int round = 0; round < 3; round++) {
        if (fault[round]) setenv("TB_TEST_FAULT", fault[round], 1);
        tb_backend_opts go = {0};
        go.no_autotune = 1, go.plan_cache = "off"; /* nothing from an earlier run's cache */
        char err[256];
        tb_backend *gpu = tb_cuda_backend_create(&go, err, sizeof err);
        if (!gpu) {
            TB_CHECK(0, "a CUDA backend: %s", err);
            break;
        }
        for (int c = 0; c < ncases; c++) {
            int r = test_cuda_fused_case(gpu, c, c == 0 ? first[round] : NULL, sizeof first[round]);
            reached[round] += r;
            if (c == 0) first_reached[round] = r;
        }
        printf("# TB_TEST_FAULT=%s: fp16 conv + statistics on a fused graph in %d of %d shapes; the first shape's "
               "path: %s\n",
               fault[round] ? fault[round] : "(none)", reached[round], ncases, first[round]);
        gpu->destroy(gpu);
    }
    unsetenv("TB_TEST_FAULT");
    TB_CHECK(first_reached[0] && reached[0] > 0, "no fault: the first shape reaches a fused graph (else nothing "
             "below can be told)");
    TB_CHECK(strcmp(first[1], first[0]) != 0, "the first trial refused: the first shape's plan differs from the "
             "unfaulted one (the fault reached the trial run)");
    TB_CHECK(first_reached[1], "the first trial refused: the first shape still runs on a fused graph, the next "
             "engine's (this fails too if cuDNN offers a single engine for that graph: its path is printed above)");
    TB_CHECK(reached[1] == reached[0], "the first trial refused: every shape reaches what it reached unfaulted "
             "(%d, %d)", reached[1], reached[0]);
    TB_CHECK(reached[2] == 0, "every trial refused: no shape reaches a fused graph (the ops ran unfused)");
}
