/* cmd_report_compare.c - `trainbench report A.h5 B.h5`: two results files
 * side by side (cmd_report.c prints one): the root attributes that differ,
 * then each table both files have, its rows matched on its key columns with
 * B/A ratios -- /scaling by rank count and the steps' phases of two training
 * runs (files with /steps or /ranks rows), /allreduce by size, /loader by
 * thread count, /feed by loader configuration, /projection by rank count.
 * Under each: a note when no row matched, and the keys of the rows only one
 * file has. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "src/cmd/cmd_report.h"
#include "src/results/results.h"

/* b / a where both print as non-zero at `decimals` (< 0: 6 significant
 * digits); NAN otherwise (it printed 'allreduce ms 0.00 / 3.53, B/A 4006.355'). */
static double shown_ratio(double b, double a, int decimals) {
    double least = decimals < 0 ? 0 : 0.5 * pow(10, -decimals);
    if (!(fabs(a) >= least && fabs(b) >= least) || a == 0 || b == 0) return NAN;
    return tb_report_ratio(b, a);
}

/* Appends ", " (or nothing first) and a key to buf, "..." once it is full. */
static void add_key(char *buf, size_t len, const char *key) {
    size_t used = strlen(buf);
    if (used + strlen(key) + 8 >= len) {
        if (used + 4 < len && (used < 3 || strcmp(buf + used - 3, "...") != 0)) strcat(buf, ", ...");
        return;
    }
    snprintf(buf + used, len - used, "%s%s", used ? ", " : "", key);
}

/* "# rows only in A (WHAT): 3, 4; only in B: 8" -- the rows no ratio speaks for */
static void note_only(FILE *f, tb_format fmt, const char *what, const char *only_a, const char *only_b) {
    if (!only_a[0] && !only_b[0]) return;
    char a[4200] = "", b[4200] = "";
    if (only_a[0]) snprintf(a, sizeof a, "only in A: %s", only_a);
    if (only_b[0]) snprintf(b, sizeof b, "only in B: %s", only_b);
    tb_note(f, fmt, "rows (%s) %s%s%s", what, a, a[0] && b[0] ? "; " : "", b);
}

static void print_differences(FILE *f, tb_format fmt, const tb_results *a, const tb_results *b) {
    const tb_col cols[] = {
        {.head = "attribute", .key = "attribute", .left = 1},
        {.head = "A", .key = "a", .left = 1, .gap = 2},
        {.head = "B", .key = "b", .left = 1, .gap = 2},
    };
    tb_tab *t = tb_tab_new(fmt, "provenance differences: every root attribute whose value differs", cols, 3);
    int *ia = tb_report_display_order(a), *ib = tb_report_display_order(b), differ = 0;
    char va[8192], vb[8192];
    for (int i = 0; i < a->nattrs; i++) {
        const tb_rattr *x = &a->attrs[ia[i]], *y = tb_results_attr(b, x->key);
        if (y && tb_rattr_equal(x, y)) continue;
        differ++;
        tb_rattr_format(x, va, sizeof va);
        if (y) tb_rattr_format(y, vb, sizeof vb);
        tb_tab_str(t, x->key);
        tb_tab_str(t, va);
        tb_tab_str(t, y ? vb : "(absent)");
    }
    for (int i = 0; i < b->nattrs; i++) {
        const tb_rattr *y = &b->attrs[ib[i]];
        if (tb_results_attr(a, y->key)) continue;
        differ++;
        tb_rattr_format(y, vb, sizeof vb);
        tb_tab_str(t, y->key);
        tb_tab_str(t, "(absent)");
        tb_tab_str(t, vb);
    }
    free(ia);
    free(ib);
    tb_tab_print(t, f);
    if (!differ) tb_note(f, fmt, "no root attribute differs: A and B hold the same %d attributes", a->nattrs);
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
    char only_a[4096] = "", only_b[4096] = "", key[32];
    char *used = calloc((size_t)nb + 1, 1);
    if (!used) TB_FATAL("out of host memory");
    for (int i = 0; i < na; i++) {
        int j = 0;
        while (j < nb && (used[j] || ra[i].ranks != rb[j].ranks)) j++;
        snprintf(key, sizeof key, "%d", ra[i].ranks);
        if (j == nb) {
            add_key(only_a, sizeof only_a, key);
            continue;
        }
        used[j] = 1;
        both++;
        tb_tab_int(t, ra[i].ranks);
        tb_tab_num(t, ra[i].img_per_s, 2);
        tb_tab_num(t, rb[j].img_per_s, 2);
        tb_tab_num(t, shown_ratio(rb[j].img_per_s, ra[i].img_per_s, 2), 3);
        tb_tab_num(t, 100.0 * ra[i].efficiency, 1);
        tb_tab_num(t, 100.0 * rb[j].efficiency, 1);
        tb_tab_num(t, ra[i].epoch_time_s, 1);
        tb_tab_num(t, rb[j].epoch_time_s, 1);
    }
    for (int j = 0; j < nb; j++) {
        snprintf(key, sizeof key, "%d", rb[j].ranks);
        if (!used[j]) add_key(only_b, sizeof only_b, key);
    }
    free(used);
    tb_tab_print(t, f);
    if (!both) /* an empty table said in words: one file has no rows (--scaling-steps 0), or other rank counts */
        tb_note(f, fmt, "no scaling row in both: A has %d, B %d%s", na, nb,
                na && nb ? ", at other rank counts" : " (a run given --scaling-steps 0, or an aborted one, has none)");
    if (na && nb) note_only(f, fmt, "ranks", only_a, only_b);
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
    tb_tab_num(t, shown_ratio(b, a, decimals), 3);
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

/* A column of both tables, shown A then B: its values times scale (1 when 0). */
typedef struct {
    const char *col, *head;
    int decimals;
    double scale;
} cmp_val;

/* One table kind compared row by row: rows match where every key column
 * both tables have is equal (first unmatched row of B each). */
typedef struct {
    const char *group, *title, *what; /* what: the rows, "all-reduce size" */
    const char *keys[7];              /* NULL-ended; the first is required */
    cmp_val vals[3];
    int nvals, ratio_of, ratio_alt;   /* B/A of vals[ratio_of], after its pair; where that prints as 0 or '-',
                                       * A/B of vals[ratio_alt] (a time), unless -1 */
} cmp_spec;

static const cmp_spec k_cmp[] = {
    {"allreduce", "all-reduce sizes measured in both; busbw in GB/s; B/A = busbw B / busbw A (time A / time B on 1 rank)",
     "all-reduce size", {"bytes", NULL}, {{"time_us", "time us", 2, 0}, {"busbw_GBps", "busbw", 3, 0}}, 2, 1, 0},
    {"loader", "loader rows measured in both (same thread count); B/A = img/s B / img/s A", "thread count",
     {"threads", NULL}, {{"img_per_s", "img/s", 1, 0}, {"ms_per_batch", "ms/batch", 2, 0}}, 2, 0, -1},
    {"feed", "loader-feed rows measured in both (same loader configuration); B/A = img/s B / img/s A",
     "loader configuration", {"threads", "prefetch", "pinned", "gpu_decode", "gpu_stages", "resident", NULL},
     {{"img_per_s", "img/s", 1, 0}, {"step_ms", "step ms", 2, 0}, {"wait_pct", "wait %", 1, 0}}, 3, 0, -1},
    {"projection", "projection rows in both (same rank count); B/A = img/s B / img/s A", "rank count",
     {"ranks", NULL}, {{"img_per_s", "img/s", 1, 0}, {"efficiency", "eff %", 1, 100}, {"step_ms", "step ms", 2, 0}},
     3, 0, -1},
};

static double cmp_num(const tb_rtable *t, const cmp_val *v, size_t row) {
    return tb_rtable_num(t, v->col, row) * (v->scale ? v->scale : 1);
}

/* The key columns both tables have as numbers; their count. */
static int cmp_keys(const cmp_spec *s, const tb_rtable *a, const tb_rtable *b, const char **keys) {
    int n = 0;
    for (int k = 0; s->keys[k]; k++) {
        const tb_rcol *x = tb_rtable_col(a, s->keys[k]), *y = tb_rtable_col(b, s->keys[k]);
        if (x && y && x->kind != TB_VAL_STR && y->kind != TB_VAL_STR) keys[n++] = s->keys[k];
    }
    return n;
}

static int same_key(const tb_rtable *a, size_t i, const tb_rtable *b, size_t j, const char **keys, int nk) {
    for (int k = 0; k < nk; k++)
        if (tb_rtable_num(a, keys[k], i) != tb_rtable_num(b, keys[k], j)) return 0;
    return 1;
}

/* "8:3:1:0": a row's key values, as --rows spells a loader configuration */
static void key_text(const tb_rtable *t, size_t row, const char **keys, int nk, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < nk && used < len; k++)
        used += (size_t)snprintf(buf + used, len - used, "%s%.0f", k ? ":" : "", tb_rtable_num(t, keys[k], row));
}

static void cmp_row(tb_tab *t, const cmp_spec *s, const tb_rtable *a, size_t i, const tb_rtable *b, size_t j,
                    const char **keys, int nk) {
    for (int k = 0; k < nk; k++) tb_tab_int(t, (long long)tb_rtable_num(a, keys[k], i));
    for (int v = 0; v < s->nvals; v++) {
        const cmp_val *c = &s->vals[v];
        double x = cmp_num(a, c, i), y = cmp_num(b, c, j);
        tb_tab_num(t, x, c->decimals);
        tb_tab_num(t, y, c->decimals);
        if (v != s->ratio_of) continue;
        double r = shown_ratio(y, x, c->decimals);
        if (isnan(r) && s->ratio_alt >= 0) {
            const cmp_val *alt = &s->vals[s->ratio_alt];
            r = shown_ratio(cmp_num(a, alt, i), cmp_num(b, alt, j), alt->decimals);
        }
        tb_tab_num(t, r, 3);
    }
}

static tb_tab *cmp_table(tb_format fmt, const cmp_spec *s, const char **keys, int nk) {
    tb_col cols[16];
    char heads[16][64], ckeys[16][64];
    int n = 0;
    for (int k = 0; k < nk; k++)
        cols[n++] = (tb_col){.head = keys[k], .key = keys[k], .width = (int)strlen(keys[k])};
    for (int v = 0; v < s->nvals; v++) {
        for (int side = 0; side < 2; side++, n++) {
            snprintf(heads[n], sizeof heads[n], "%s %s", s->vals[v].head, side ? "B" : "A");
            snprintf(ckeys[n], sizeof ckeys[n], "%s%s_%s", s->vals[v].col, s->vals[v].scale == 100 ? "_pct" : "",
                     side ? "b" : "a");
            cols[n] = (tb_col){.head = heads[n], .key = ckeys[n], .width = 10};
        }
        if (v == s->ratio_of) cols[n++] = (tb_col){.head = "B/A", .key = "ratio_b_a", .width = 6};
    }
    return tb_tab_new(fmt, s->title, cols, n);
}

/* One table both files have, compared row by row; 1 when both have it. */
static int print_keyed_compare(FILE *f, tb_format fmt, const cmp_spec *s, const tb_results *ra,
                               const tb_results *rb) {
    const tb_rtable *a = tb_results_table(ra, s->group), *b = tb_results_table(rb, s->group);
    if (!a || !b) return 0;
    const char *keys[7];
    int nk = cmp_keys(s, a, b, keys), both = 0;
    if (nk == 0 || strcmp(keys[0], s->keys[0]) != 0) {
        tb_note(f, fmt, "/%s in A and B: not compared, as %s lacks the key column '%s'", s->group,
                tb_rtable_col(a, s->keys[0]) ? "B" : "A", s->keys[0]);
        return 1;
    }
    tb_tab *t = cmp_table(fmt, s, keys, nk);
    char *used = calloc(b->rows + 1, 1), only_a[4096] = "", only_b[4096] = "", key[256], what[256];
    if (!used) TB_FATAL("out of host memory");
    for (size_t i = 0; i < a->rows; i++) {
        size_t j = 0;
        while (j < b->rows && (used[j] || !same_key(a, i, b, j, keys, nk))) j++;
        if (j == b->rows) {
            key_text(a, i, keys, nk, key, sizeof key);
            add_key(only_a, sizeof only_a, key);
            continue;
        }
        used[j] = 1;
        both++;
        cmp_row(t, s, a, i, b, j, keys, nk);
    }
    for (size_t j = 0; j < b->rows; j++) {
        key_text(b, j, keys, nk, key, sizeof key);
        if (!used[j]) add_key(only_b, sizeof only_b, key);
    }
    free(used);
    tb_tab_print(t, f);
    if (!both) tb_note(f, fmt, "no %s in both: A has %zu /%s row%s, B %zu", s->what, a->rows, s->group,
                       a->rows == 1 ? "" : "s", b->rows);
    what[0] = '\0';
    for (int k = 0; k < nk; k++) snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s", k ? ":" : "", keys[k]);
    note_only(f, fmt, what, only_a, only_b);
    for (int k = 0; s->keys[k]; k++) /* a key column of one file (a later writer's): its rows match without it */
        if (!tb_rtable_col(a, s->keys[k]) != !tb_rtable_col(b, s->keys[k]))
            tb_note(f, fmt, "/%s rows matched on %s: only %s has the column %s", s->group, what,
                    tb_rtable_col(a, s->keys[k]) ? "A" : "B", s->keys[k]);
    return 1;
}

/* Two runs of another model, precision, batch, image size, data or rank
 * count: their B/A ratios compare two workloads, which the attribute table
 * alone left to be spotted among start times and command lines. Loader
 * files (no model, no step) by what they load. */
static void note_workload_differs(FILE *f, tb_format fmt, const tb_results *a, const tb_results *b) {
    static const char *const train_keys[] = {"model", "precision", "batch_size", "global_batch", "world_size",
                                             "image_size", "data", NULL};
    static const char *const load_keys[] = {"batch_size", "image_size", "data", NULL};
    /* allreduce-bench: what time_us means (-a; a file from before -a holds the slowest rank's), the element
     * type, the transport, the ranks */
    static const char *const ar_keys[] = {"average", "dtype", "path", "world_size", NULL};
    const char *kind = tb_results_str(a, "kind", "train");
    int loads = strcmp(kind, "loader-bench") == 0;
    int ar = strcmp(kind, "allreduce-bench") == 0 && strcmp(tb_results_str(b, "kind", "train"), kind) == 0;
    const char *const *keys = ar ? ar_keys : loads ? load_keys : train_keys;
    char what[1024] = "";
    size_t used = 0;
    for (int i = 0; keys[i]; i++) {
        const tb_rattr *x = tb_results_attr(a, keys[i]), *y = tb_results_attr(b, keys[i]);
        int average = ar && strcmp(keys[i], "average") == 0;
        if ((!x || !y) && !(average && (x || y))) continue;
        if (x && y && tb_rattr_equal(x, y)) continue;
        char va[256] = "max", vb[256] = "max"; /* a missing average: before -a, the slowest rank's time */
        if (x) tb_rattr_format(x, va, sizeof va);
        if (y) tb_rattr_format(y, vb, sizeof vb);
        if (strcmp(va, vb) == 0) continue;
        if (used < sizeof what)
            used += (size_t)snprintf(what + used, sizeof what - used, "%s%s %s vs %s", used ? ", " : "", keys[i],
                                     va, vb);
    }
    if (used && ar)
        tb_note(f, fmt, "note: A and B measured differently (%s): the time and busbw ratios above compare two "
                        "measures, not one all-reduce's speed", what);
    else if (used)
        tb_note(f, fmt, "note: A and B %s different workloads (%s): the B/A ratios above compare two "
                        "workloads, not one workload's speed", loads ? "load" : "train", what);
}

/* A training run's file: one with /steps or /ranks rows (a loader-feed or
 * --profile projection file has neither, though it names a model). */
static int has_training_rows(const tb_results *r) {
    const tb_rtable *s = tb_results_table(r, "steps"), *k = tb_results_table(r, "ranks");
    return (s && s->rows > 0) || (k && k->rows > 0);
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
    int compared = 0;
    for (size_t i = 0; i < sizeof k_cmp / sizeof k_cmp[0]; i++)
        compared |= print_keyed_compare(f, fmt, &k_cmp[i], &a, &b);
    if (has_training_rows(&a) && has_training_rows(&b)) { /* two training runs */
        print_scaling_compare(f, fmt, &a, &b);
        print_training_compare(f, fmt, &a, &b);
        tb_report_compare_choices(f, fmt, &a, &b);
        compared = 1;
    }
    if (compared) note_workload_differs(f, fmt, &a, &b);
    if (!compared)
        tb_note(f, fmt, "A is a '%s' file and B a '%s' file with no table of rows that both have: only their "
                        "attributes compare",
                tb_results_str(&a, "kind", "train"), tb_results_str(&b, "kind", "train"));
    fflush(f);
    tb_report_problems(&a);
    tb_report_problems(&b);
    int rc = a.nproblems || b.nproblems ? 1 : 0;
    tb_results_free(&a);
    tb_results_free(&b);
    return rc;
}
