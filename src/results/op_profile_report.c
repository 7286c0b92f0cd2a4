/* op_profile_report.c - --op-profile's tables on stdout and in the results
 * file (see op_profile_report.h). */
#include "src/results/op_profile_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#define TB_OPP_TOP 15

static double share_pct(double ms, double step_ms) { return step_ms > 0 ? 100.0 * ms / step_ms : NAN; }

static int by_mean_desc(const void *a, const void *b) {
    const tb_opp_row *x = *(const tb_opp_row *const *)a, *y = *(const tb_opp_row *const *)b;
    if (x->mean_ms != y->mean_ms) return x->mean_ms < y->mean_ms ? 1 : -1;
    return strcmp(x->name, y->name);
}

void tb_opp_print(FILE *f, tb_format fmt, const tb_opp_summary *s, const tb_opp_kind *kinds, int nkinds,
                  const tb_opp_row *rows, int nrows) {
    int multi = s->ranks > 1;
    char title[512];
    snprintf(title, sizeof title,
             "op profile: %d eager step%s after training, batch %d per rank, %s %s on %s; ms per step%s", s->steps,
             s->steps == 1 ? "" : "s", s->batch, s->precision, s->layout, s->backend,
             multi ? " (rank 0; max rank: the slowest of the ranks)" : "");
    const tb_col kc[] = {
        {.head = "kind", .key = "kind", .left = 1, .width = 15},
        {.head = "ms/step", .key = "mean_ms", .width = 9},
        {.head = "share", .unit = "%", .key = "share_pct", .width = 6},
        {.head = "calls/step", .key = "calls_per_step", .width = 10},
        {.head = "max rank", .unit = "ms", .key = "max_rank_ms", .width = 9},
    };
    tb_tab *t = tb_tab_new(fmt, title, kc, multi ? 5 : 4);
    for (int k = 0; k < nkinds; k++) {
        tb_tab_str(t, kinds[k].kind);
        tb_tab_num(t, kinds[k].mean_ms, 3);
        tb_tab_num(t, share_pct(kinds[k].mean_ms, s->step_ms), 1);
        tb_tab_num(t, kinds[k].calls_per_step, fabs(kinds[k].calls_per_step - round(kinds[k].calls_per_step)) < 1e-9 ? 0 : 2);
        if (multi) tb_tab_num(t, kinds[k].max_rank_ms, 3);
    }
    tb_tab_print(t, f);

    const tb_opp_row **order = malloc((size_t)(nrows ? nrows : 1) * sizeof *order);
    if (!order) TB_FATAL("out of host memory");
    for (int i = 0; i < nrows; i++) order[i] = &rows[i];
    qsort(order, (size_t)nrows, sizeof *order, by_mean_desc);
    int top = nrows < TB_OPP_TOP ? nrows : TB_OPP_TOP;
    snprintf(title, sizeof title, "op profile: the %d slowest of %d ops (node or stage, phase, kind)", top, nrows);
    const tb_col rc[] = {
        {.head = "name", .key = "name", .left = 1, .width = 22},
        {.head = "phase", .key = "phase", .left = 1, .gap = 2, .width = 15},
        {.head = "kind", .key = "kind", .left = 1, .gap = 2, .width = 14},
        {.head = "ms/step", .key = "mean_ms", .width = 9},
        {.head = "min", .unit = "ms", .key = "min_ms", .width = 9},
        {.head = "share", .unit = "%", .key = "share_pct", .width = 6},
        {.head = "max rank", .unit = "ms", .key = "max_rank_mean_ms", .width = 9},
    };
    t = tb_tab_new(fmt, title, rc, multi ? 7 : 6);
    for (int i = 0; i < top; i++) {
        const tb_opp_row *r = order[i];
        tb_tab_str(t, r->name);
        tb_tab_str(t, r->phase);
        tb_tab_str(t, r->kind);
        tb_tab_num(t, r->mean_ms, 3);
        tb_tab_num(t, r->min_ms, 3);
        tb_tab_num(t, share_pct(r->mean_ms, s->step_ms), 1);
        if (multi) tb_tab_num(t, r->max_rank_ms, 3);
    }
    tb_tab_print(t, f);
    free(order);
    tb_note(f, fmt,
            "covered: %.3f ms of %.3f ms step (%.1f %%); ops span %.3f ms from the first op's start to the last's end",
            s->ops_ms, s->step_ms, share_pct(s->ops_ms, s->step_ms), s->span_ms);
    tb_note(f, fmt,
            "  (step: the profiled steps' own measured time, as the trainer times every step, data wait left out; "
            "the rest is in no op: waits for the "
            "gradient all-reduce and the BatchNorm broadcast, a synchronous step's host scan for NaN/Inf, copies "
            "queued outside the model, the device idle "
            "while the host queues, the event records themselves)");
    if (!isnan(s->timed_step_ms))
        tb_note(f, fmt,
                "profiled steps (eager, an event pair per op): %.3f ms per step; the timed steps before them: "
                "%.3f ms per step (%d of %d replayed from a CUDA graph)",
                s->step_ms, s->timed_step_ms, s->timed_graph_steps, s->timed_steps);
    if (multi && !isnan(s->step_ms_max_rank))
        tb_note(f, fmt, "slowest rank's step: %.3f ms", s->step_ms_max_rank);
}

void tb_opp_tables_init(tb_table *rows, tb_table *kinds) {
    tb_table_init(rows, "op_profile", "mean_ms,min_ms,max_rank_mean_ms,calls:i");
    tb_table_add_string_column(rows, "name");
    tb_table_add_string_column(rows, "phase");
    tb_table_add_string_column(rows, "kind");
    tb_table_init(kinds, "op_profile_kinds", "mean_ms,max_rank_ms,calls_per_step,share_pct");
    tb_table_add_string_column(kinds, "kind");
}

void tb_opp_tables_fill(tb_table *rows, tb_table *kinds, const tb_opp_summary *s, const tb_opp_kind *k,
                        int nkinds, const tb_opp_row *r, const int64_t *calls, int nrows) {
    for (int i = 0; i < nrows; i++) {
        double v[4] = {r[i].mean_ms, r[i].min_ms, r[i].max_rank_ms, (double)calls[i]};
        const char *str[3] = {r[i].name, r[i].phase, r[i].kind};
        tb_table_row_strs(rows, v, str);
    }
    for (int i = 0; i < nkinds; i++) {
        double v[4] = {k[i].mean_ms, k[i].max_rank_ms, k[i].calls_per_step, share_pct(k[i].mean_ms, s->step_ms)};
        tb_table_row(kinds, v, k[i].kind);
    }
    tb_attrs *a = &rows->attrs;
    tb_attrs_int(a, "steps", s->steps);
    tb_attrs_int(a, "batch", s->batch);
    tb_attrs_int(a, "ranks", s->ranks);
    tb_attrs_str(a, "precision", s->precision);
    tb_attrs_str(a, "layout", s->layout);
    tb_attrs_str(a, "backend", s->backend);
    tb_attrs_num(a, "step_ms", s->step_ms);
    tb_attrs_num(a, "step_ms_max_rank", s->step_ms_max_rank);
    tb_attrs_num(a, "ops_ms", s->ops_ms);
    tb_attrs_num(a, "span_ms", s->span_ms);
    tb_attrs_num(a, "covered_pct", share_pct(s->ops_ms, s->step_ms));
    tb_attrs_num(a, "timed_step_ms", s->timed_step_ms);
    tb_attrs_int(a, "timed_steps", s->timed_steps);
    tb_attrs_int(a, "timed_graph_steps", s->timed_graph_steps);
}
