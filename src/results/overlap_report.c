/* overlap_report.c - the bucket overlap tables of `trainbench report` (see
 * overlap_report.h). */
#include "src/results/overlap_report.h"

#include <math.h>
#include <stdlib.h>

#include "core/log.h"

/* The rows of /buckets for `ranks`, in the file's (launch) order. */
static int rows_of(const tb_rtable *b, int ranks, size_t *idx) {
    int n = 0;
    for (size_t i = 0; i < b->rows; i++)
        if ((int)tb_rtable_num(b, "ranks", i) == ranks) idx[n++] = i;
    return n;
}

static void one_count(FILE *f, tb_format fmt, const tb_rtable *b, int ranks, const size_t *idx, int n) {
    double bwd = tb_rtable_num(b, "backward_ms", idx[0]), exposed = tb_rtable_num(b, "exposed_ms", idx[0]);
    int steps = (int)tb_rtable_num(b, "steps", idx[0]);
    const tb_col cols[] = {
        {.head = "bucket", .key = "bucket", .width = 6},
        {.head = "size", .unit = "MiB", .key = "mib", .width = 7},
        {.head = "grads done", .unit = "ms", .key = "ready_ms", .width = 10},
        {.head = "start", .unit = "ms", .key = "start_ms", .width = 8},
        {.head = "end", .unit = "ms", .key = "end_ms", .width = 8},
        {.head = "waited", .unit = "ms", .key = "waited_ms", .width = 8},
        {.head = "all-reduce", .unit = "ms", .key = "allreduce_ms", .width = 10},
        {.head = "after bwd", .unit = "ms", .key = "after_backward_ms", .width = 9},
    };
    char title[320];
    snprintf(title, sizeof title,
             "gradient all-reduce overlap, %d rank%s (/buckets: medians over %d timed step%s of the scaling row; "
             "ms from the start of backward, which took %.2f ms; launch order)",
             ranks, ranks > 1 ? "s" : "", steps, steps == 1 ? "" : "s", bwd);
    tb_tab *t = tb_tab_new(fmt, title, cols, 8);
    double busy = 0, last_end = 0;
    for (int k = 0; k < n; k++) {
        size_t i = idx[k];
        double rd = tb_rtable_num(b, "ready_ms", i), st = tb_rtable_num(b, "start_ms", i);
        double en = tb_rtable_num(b, "end_ms", i);
        busy += en - st;
        last_end = fmax(last_end, en);
        tb_tab_int(t, (long long)tb_rtable_num(b, "bucket", i));
        tb_tab_num(t, tb_rtable_num(b, "bytes", i) / 1048576.0, 2);
        tb_tab_num(t, rd, 2);
        tb_tab_num(t, st, 2);
        tb_tab_num(t, en, 2);
        tb_tab_num(t, st - rd, 2);
        tb_tab_num(t, en - st, 2);
        tb_tab_num(t, fmax(0, en - fmax(st, bwd)), 2);
    }
    tb_tab_print(t, f);
    double hidden = busy > 0 ? 100.0 * (1.0 - fmin(busy, fmax(0, exposed)) / busy) : NAN;
    tb_note(f, fmt,
            "%d ranks: all-reduce busy %.2f ms per step (the buckets' sum), the last ends %.2f ms after backward; "
            "exposed (the compute stream's wait for it after backward, median per step) %.2f ms: %.1f %% of the "
            "all-reduce hidden behind backward",
            ranks, busy, last_end - bwd, exposed, hidden);
}

int tb_overlap_report(FILE *f, tb_format fmt, const tb_results *r) {
    const tb_rtable *b = tb_results_table(r, "buckets");
    if (!b || b->rows == 0) return 0;
    size_t *idx = malloc(b->rows * sizeof *idx);
    if (!idx) TB_FATAL("out of host memory");
    int printed = 0, seen[64], nseen = 0;
    for (size_t i = 0; i < b->rows; i++) {
        int ranks = (int)tb_rtable_num(b, "ranks", i), dup = 0;
        for (int k = 0; k < nseen; k++) dup |= seen[k] == ranks;
        if (dup || nseen == 64) continue;
        seen[nseen++] = ranks;
        int n = rows_of(b, ranks, idx);
        one_count(f, fmt, b, ranks, idx, n);
        printed++;
    }
    free(idx);
    return printed;
}
