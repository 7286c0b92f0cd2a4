/* cmd_report_compare.c - `trainbench report A.h5 B.h5`: two results files
 * side by side (cmd_report.c prints one): the root attributes that differ,
 * then the tables both files have, row by row with B/A ratios -- scaling
 * rows by rank count and the training steps' phases of two training runs,
 * all-reduce sizes of two allreduce-bench sweeps, /loader rows by thread
 * count of two loader-bench files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "src/cmd/cmd_report.h"
#include "src/results/results.h"

static void print_differences(FILE *f, tb_format fmt, const tb_results *a, const tb_results *b) {
    const tb_col cols[] = {
        {.head = "attribute", .key = "attribute", .left = 1},
        {.head = "A", .key = "a", .left = 1, .gap = 2},
        {.head = "B", .key = "b", .left = 1, .gap = 2},
    };
    tb_tab *t = tb_tab_new(fmt, "provenance differences: every root attribute whose value differs", cols, 3);
    int *ia = tb_report_display_order(a), *ib = tb_report_display_order(b);
    char va[8192], vb[8192];
    for (int i = 0; i < a->nattrs; i++) {
        const tb_rattr *x = &a->attrs[ia[i]], *y = tb_results_attr(b, x->key);
        if (y && tb_rattr_equal(x, y)) continue;
        tb_rattr_format(x, va, sizeof va);
        if (y) tb_rattr_format(y, vb, sizeof vb);
        tb_tab_str(t, x->key);
        tb_tab_str(t, va);
        tb_tab_str(t, y ? vb : "(absent)");
    }
    for (int i = 0; i < b->nattrs; i++) {
        const tb_rattr *y = &b->attrs[ib[i]];
        if (tb_results_attr(a, y->key)) continue;
        tb_rattr_format(y, vb, sizeof vb);
        tb_tab_str(t, y->key);
        tb_tab_str(t, "(absent)");
        tb_tab_str(t, vb);
    }
    free(ia);
    free(ib);
    tb_tab_print(t, f);
}

static void print_scaling_compare(FILE *f, tb_format fmt, const tb_results *a, const tb_results *b) {
    tb_scaling_row *ra, *rb;
    int na = tb_results_scaling_rows(a, &ra), nb = tb_results_scaling_rows(b, &rb);
    const tb_col cols[] = {
        {.head = "ranks", .key = "ranks", .width = 5},
        {.head = "img/s A", .key = "img_per_s_a", .width = 9},
        {.head = "img/s B", .key = "img_per_s_b", .width = 9},
        {.head = "B/A", .key = "ratio_b_a", .width = 6},
        {.head = "eff % A", .key = "efficiency_pct_a", .width = 7},
        {.head = "eff % B", .key = "efficiency_pct_b", .width = 7},
        {.head = "epoch s A", .key = "epoch_time_s_a", .width = 10},
        {.head = "epoch s B", .key = "epoch_time_s_b", .width = 10},
    };
    tb_tab *t = tb_tab_new(fmt, "scaling rows measured in both (same rank count); B/A = img/s B / img/s A",
                           cols, 8);
    int both = 0;
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++) {
            if (ra[i].ranks != rb[j].ranks) continue;
            both++;
            tb_tab_int(t, ra[i].ranks);
            tb_tab_num(t, ra[i].img_per_s, 2);
            tb_tab_num(t, rb[j].img_per_s, 2);
            tb_tab_num(t, tb_report_ratio(rb[j].img_per_s, ra[i].img_per_s), 3);
            tb_tab_num(t, 100.0 * ra[i].efficiency, 1);
            tb_tab_num(t, 100.0 * rb[j].efficiency, 1);
            tb_tab_num(t, ra[i].epoch_time_s, 1);
            tb_tab_num(t, rb[j].epoch_time_s, 1);
            break;
        }
    tb_tab_print(t, f);
    if (!both) /* an empty table said in words: one file has no rows (--scaling-steps 0), or other rank counts */
        tb_note(f, fmt, "no scaling row in both: A has %d, B %d%s", na, nb,
                na && nb ? ", at other rank counts" : " (a run given --scaling-steps 0, or an aborted one, has none)");
    free(ra);
    free(rb);
}

/* Mean over the ranks with timed steps of /ranks: step time and phases. */
static void rank_means(const tb_results *r, double *step_ms, double *phase_ms) {
    tb_rank_row *rows;
    int n = tb_results_rank_rows(r, &rows), used = 0;
    *step_ms = 0;
    for (int p = 0; p < TB_PH_COUNT; p++) phase_ms[p] = 0;
    for (int i = 0; i < n; i++) {
        if (rows[i].steps == 0) continue;
        used++;
        *step_ms += rows[i].step_ms;
        for (int p = 0; p < TB_PH_COUNT; p++) phase_ms[p] += rows[i].phase_ms[p];
    }
    *step_ms = used ? *step_ms / used : NAN;
    for (int p = 0; p < TB_PH_COUNT; p++) phase_ms[p] = used ? phase_ms[p] / used : NAN;
    free(rows);
}

/* decimals < 0: 6 significant digits */
static void compare_row(tb_tab *t, const char *what, double a, double b, int decimals) {
    tb_tab_str(t, what);
    if (decimals < 0) {
        tb_tab_gnum(t, a);
        tb_tab_gnum(t, b);
    } else {
        tb_tab_num(t, a, decimals);
        tb_tab_num(t, b, decimals);
    }
    tb_tab_num(t, tb_report_ratio(b, a), 3);
}

static void print_training_compare(FILE *f, tb_format fmt, const tb_results *a, const tb_results *b) {
    const tb_col cols[] = {
        {.head = "quantity", .key = "quantity", .left = 1},
        {.head = "A", .key = "a", .width = 10},
        {.head = "B", .key = "b", .width = 10},
        {.head = "B/A", .key = "ratio_b_a", .width = 6},
    };
    tb_tab *t = tb_tab_new(fmt,
                           "training run: ms per timed step by phase (mean over ranks, /ranks), img/s "
                           "and loss (/steps)",
                           cols, 4);
    double sa, sb, pa[TB_PH_COUNT], pb[TB_PH_COUNT];
    rank_means(a, &sa, pa);
    rank_means(b, &sb, pb);
    compare_row(t, "step ms", sa, sb, 2);
    for (int p = 0; p < TB_PH_COUNT; p++) {
        char what[64];
        snprintf(what, sizeof what, "%s ms", tb_phase_name[p]);
        compare_row(t, what, pa[p], pb[p], 2);
    }
    tb_report_steps xa = tb_report_steps_of(a), xb = tb_report_steps_of(b);
    compare_row(t, "img/s (timed steps)", xa.img_per_s, xb.img_per_s, 2);
    compare_row(t, "step ms median (rank 0)", xa.step_ms_median, xb.step_ms_median, 2);
    compare_row(t, "loss, last step", xa.loss_last, xb.loss_last, -1);
    tb_tab_print(t, f);
}

/* Two allreduce-bench sweeps: the sizes both measured, time and busbw side by side. */
static void print_allreduce_compare(FILE *f, tb_format fmt, const tb_rtable *a, const tb_rtable *b) {
    const tb_col cols[] = {
        {.head = "bytes", .key = "bytes", .width = 12},
        {.head = "time us A", .key = "time_us_a", .width = 10},
        {.head = "time us B", .key = "time_us_b", .width = 10},
        {.head = "busbw A", .key = "busbw_GBps_a", .width = 9},
        {.head = "busbw B", .key = "busbw_GBps_b", .width = 9},
        {.head = "B/A", .key = "ratio_b_a", .width = 6},
    };
    tb_tab *t = tb_tab_new(fmt, "all-reduce sizes measured in both; busbw in GB/s; B/A = busbw B / busbw A "
                                "(time A / time B on 1 rank)", cols, 6);
    for (size_t i = 0; i < a->rows; i++)
        for (size_t j = 0; j < b->rows; j++) {
            double bytes = tb_rtable_num(a, "bytes", i);
            if (tb_rtable_num(b, "bytes", j) != bytes) continue;
            double ta = tb_rtable_num(a, "time_us", i), tb = tb_rtable_num(b, "time_us", j);
            double ba = tb_rtable_num(a, "busbw_GBps", i), bb = tb_rtable_num(b, "busbw_GBps", j);
            tb_tab_int(t, (long long)bytes);
            tb_tab_num(t, ta, 2);
            tb_tab_num(t, tb, 2);
            tb_tab_num(t, ba, 3);
            tb_tab_num(t, bb, 3);
            tb_tab_num(t, ba > 0 && bb > 0 ? tb_report_ratio(bb, ba) : tb_report_ratio(ta, tb), 3);
            break;
        }
    tb_tab_print(t, f);
}

/* Two loader-bench files: their /loader rows with the same thread count,
 * img/s and ms per batch A and B with B/A. */
static void print_loader_compare(FILE *f, tb_format fmt, const tb_rtable *la, const tb_rtable *lb) {
    const tb_col cols[] = {
        {.head = "threads", .key = "threads", .width = 7},
        {.head = "img/s A", .key = "img_per_s_a", .width = 10},
        {.head = "img/s B", .key = "img_per_s_b", .width = 10},
        {.head = "B/A", .key = "ratio_b_a", .width = 6},
        {.head = "ms/batch A", .key = "ms_per_batch_a", .width = 10},
        {.head = "ms/batch B", .key = "ms_per_batch_b", .width = 10},
    };
    tb_tab *t = tb_tab_new(fmt, "loader rows measured in both (same thread count); B/A = img/s B / img/s A", cols, 6);
    for (size_t i = 0; i < la->rows; i++)
        for (size_t j = 0; j < lb->rows; j++) {
            double th = tb_rtable_num(la, "threads", i);
            if (th != tb_rtable_num(lb, "threads", j)) continue;
            double ia = tb_rtable_num(la, "img_per_s", i), ib = tb_rtable_num(lb, "img_per_s", j);
            tb_tab_int(t, (long long)th);
            tb_tab_num(t, ia, 1);
            tb_tab_num(t, ib, 1);
            tb_tab_num(t, tb_report_ratio(ib, ia), 3);
            tb_tab_num(t, tb_rtable_num(la, "ms_per_batch", i), 2);
            tb_tab_num(t, tb_rtable_num(lb, "ms_per_batch", j), 2);
            break;
        }
    tb_tab_print(t, f);
}

/* Two training runs of another model, precision, batch or image size: their
 * B/A ratios compare two workloads, which the attribute table alone left to
 * be spotted among start times and command lines. */
static void note_workload_differs(FILE *f, tb_format fmt, const tb_results *a, const tb_results *b) {
    static const char *const keys[] = {"model", "precision", "batch_size", "image_size", "data", NULL};
    char what[1024] = "";
    size_t used = 0;
    for (int i = 0; keys[i]; i++) {
        const tb_rattr *x = tb_results_attr(a, keys[i]), *y = tb_results_attr(b, keys[i]);
        if (!x || !y || tb_rattr_equal(x, y)) continue;
        char va[256], vb[256];
        tb_rattr_format(x, va, sizeof va);
        tb_rattr_format(y, vb, sizeof vb);
        if (used < sizeof what)
            used += (size_t)snprintf(what + used, sizeof what - used, "%s%s %s vs %s", used ? ", " : "", keys[i],
                                     va, vb);
    }
    if (used)
        tb_note(f, fmt, "note: A and B train different workloads (%s): the B/A ratios above compare two "
                        "workloads, not one workload's speed", what);
}

int tb_report_two(const char *pa, const char *pb, tb_format fmt) {
    tb_results a, b;
    char err[8192];
    if (tb_results_load(pa, &a, err, sizeof err) != 0) tb_die("report: A: %s", err);
    if (tb_results_load(pb, &b, err, sizeof err) != 0) tb_die("report: B: %s", err);
    FILE *f = stdout;
    tb_note(f, fmt, "trainbench report: A vs B");
    tb_report_run_line(f, fmt, "A = ", &a);
    tb_report_run_line(f, fmt, "B = ", &b);
    print_differences(f, fmt, &a, &b);
    const tb_rtable *la = tb_results_table(&a, "loader"), *lb = tb_results_table(&b, "loader");
    const tb_rtable *ara = tb_results_table(&a, "allreduce"), *arb = tb_results_table(&b, "allreduce");
    if (la && lb) print_loader_compare(f, fmt, la, lb);
    if (ara && arb) print_allreduce_compare(f, fmt, ara, arb);
    if (tb_report_has_model(&a) && tb_report_has_model(&b)) { /* two training runs */
        print_scaling_compare(f, fmt, &a, &b);
        print_training_compare(f, fmt, &a, &b);
        note_workload_differs(f, fmt, &a, &b);
    } else if (!(la && lb) && !(ara && arb)) {
        tb_note(f, fmt, "A is a '%s' file and B a '%s' file: only their attributes compare",
                tb_results_str(&a, "kind", "train"), tb_results_str(&b, "kind", "train"));
    }
    fflush(f);
    tb_report_problems(&a);
    tb_report_problems(&b);
    int rc = a.nproblems || b.nproblems ? 1 : 0;
    tb_results_free(&a);
    tb_results_free(&b);
    return rc;
}
