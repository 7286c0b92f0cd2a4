/* test_bucket_profile.c - the scaling rows' gradient timeline
 * (src/results/bucket_profile.h): /grad_ready and /buckets are medians over
 * each rank count's timed steps, the warm-up left out. A row that captured
 * a CUDA graph ran one untimed step more than --scaling-warmup
 * (src/train/train_scaling.c); tb_bprof_row_warmup tells the recorder, so
 * the capture's step, whose times are the host's capture and not a step's,
 * stays out of the medians. The test feeds samples straight to
 * tb_bprof_add: 2 ranks, 1 warm-up step, then a capture step 100x slower,
 * then 4 ordinary steps whose times differ so a median over 4 or 5 of them
 * tells which steps it used. The warm-up is left out by the steps'
 * numbers: a warm-up sample that never arrived (an event CUDA could not
 * time) must not push a timed step out. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "src/results/bucket_profile.h"
#include "tests/tb_test.h"

/* column `name` of row `row` */
static double cell(const tb_table *t, const char *name, size_t row) {
    for (int c = 0; c < t->ncols; c++)
        if (strcmp(t->names[c], name) == 0 && row < t->rows) return t->cols[c][row];
    return NAN;
}

/* One step of `ranks` ranks: two gradient ranges, one bucket over both;
 * every time scaled by `k` (ms). */
static void add_step(int ranks, int64_t step, double k) {
    size_t off[2] = {0, 100}, cnt[2] = {100, 50};
    double ready[2] = {1e-3 * k, 2e-3 * k};
    tb_bucket_time b = {.off = 0, .cnt = 150, .ready_s = NAN, .start_s = 2e-3 * k, .end_s = 3e-3 * k};
    tb_bprof_sample x = {.ranks = ranks, .step = step, .nr = 2, .r_off = off, .r_cnt = cnt, .r_ready = ready,
                         .nb = 1, .b = &b,
                         .elem_bytes = 4, .bucket_bytes = 1024, .overlap = 1, .backward_s = 2e-3 * k,
                         .exposed_s = 1e-3 * k, .clock = "test"};
    tb_bprof_add(&x);
}

/* The recorded medians of the 2-rank row: ready_ms of its second range,
 * the bucket's end_ms, and its step count; lose: step 0's sample never
 * arrives. */
static void run(int tell, int lose, double *ready, double *end, double *steps) {
    tb_table gr, bk;
    tb_bprof_tables_init(&gr, &bk);
    tb_bprof_start(1); /* --scaling-warmup 1 */
    const double k[] = {1, 100 /* the capture */, 1, 2, 3, 4};
    for (int i = lose ? 1 : 0; i < 6; i++) add_step(2, i, k[i]);
    if (tell) tb_bprof_row_warmup(2, 2); /* the row's warm-up grew by the capture */
    tb_bprof_tables_fill(&gr, &bk);
    *ready = cell(&gr, "ready_ms", 1);
    *end = cell(&bk, "end_ms", 0);
    *steps = cell(&bk, "steps", 0);
    TB_CHECK(gr.rows == 2 && bk.rows == 1, "one 2-rank row: %zu ranges, %zu buckets", gr.rows, bk.rows);
    tb_table_free(&gr);
    tb_table_free(&bk);
}

int main(void) {
    double ready, end, steps;
    /* told: the median of steps 1, 2, 3, 4 (x 2 ms ready, x 3 ms end) */
    run(1, 0, &ready, &end, &steps);
    TB_CHECK_CLOSE(ready, 5.0, 1e-9, 0, "ready_ms: median of 2, 4, 6, 8 ms (the capture left out)");
    TB_CHECK_CLOSE(end, 7.5, 1e-9, 0, "end_ms: median of 3, 6, 9, 12 ms");
    TB_CHECK(steps == 4, "steps: the 4 timed ones (got %g)", steps);
    /* not told: the capture's 200 ms is one of the five, and the median moves */
    run(0, 0, &ready, &end, &steps);
    TB_CHECK(steps == 5 && ready > 5.5, "without tb_bprof_row_warmup the capture counts (steps %g, ready %g ms): "
             "the check above can fail", steps, ready);
    /* step 0's sample lost: still steps 2..5, not the capture's 1 in place of step 5 */
    run(1, 1, &ready, &end, &steps);
    TB_CHECK(steps == 4 && fabs(ready - 5.0) < 1e-9, "a lost warm-up sample moves nothing (steps %g, ready %g ms)",
             steps, ready);
    /* a row count never recorded: nothing happens */
    tb_bprof_row_warmup(8, 3);
    return tb_test_exit("bucket_profile");
}
