/* op_profile_report.h - the output of train --op-profile (model/op_profile.h
 * measures): the `#` tables, and the results file's groups
 *
 *   /op_profile        one row per (name, phase, kind): columns name, phase,
 *                      kind, mean_ms (per profiled step, rank 0), min_ms
 *                      (rank 0's least step), max_rank_mean_ms (the largest
 *                      mean over ranks; NaN when the ranks' op lists differ),
 *                      calls (rank 0, over all profiled steps); attributes
 *                      steps, batch, precision, layout, backend, ranks,
 *                      step_ms, step_ms_max_rank, ops_ms, span_ms, covered_pct,
 *                      timed_step_ms, timed_steps, timed_graph_steps
 *   /op_profile_kinds  one row per op kind: kind, mean_ms, max_rank_ms,
 *                      calls_per_step, share_pct
 *
 * `trainbench report` prints the same tables from the file. */
#ifndef TB_OP_PROFILE_REPORT_H
#define TB_OP_PROFILE_REPORT_H

#include <stdio.h>

#include "src/results/results_file.h"
#include "src/results/table_print.h"

typedef struct {
    const char *name, *phase, *kind;
    double mean_ms;        /* per profiled step (rank 0) */
    double min_ms;         /* rank 0's least step */
    double max_rank_ms;    /* largest mean over ranks (NaN: not known) */
    double calls_per_step;
} tb_opp_row;

typedef struct {
    const char *kind;
    double mean_ms, max_rank_ms, calls_per_step;
} tb_opp_kind;

typedef struct {
    int steps, ranks, batch;
    const char *precision, *layout, *backend;
    double step_ms;          /* rank 0's mean measured step over the profiled steps (the trainer's record
                                of each, data wait left out): what the ops cover */
    double step_ms_max_rank; /* the slowest rank's */
    double ops_ms;           /* rank 0's mean sum of op times */
    double span_ms;          /* rank 0's mean first op start to last op end */
    double timed_step_ms;    /* rank 0's mean timed training step, data wait left out (NaN: none) */
    int timed_steps, timed_graph_steps; /* how many, and how many of them replayed a CUDA graph */
} tb_opp_summary;

/* The by-kind table, the 15 slowest rows and the covered line. */
void tb_opp_print(FILE *f, tb_format fmt, const tb_opp_summary *s, const tb_opp_kind *kinds, int nkinds,
                  const tb_opp_row *rows, int nrows);

/* The two results tables, empty (run_report.c). */
void tb_opp_tables_init(tb_table *rows, tb_table *kinds);
/* Fills them (and /op_profile's attributes). */
void tb_opp_tables_fill(tb_table *rows, tb_table *kinds, const tb_opp_summary *s, const tb_opp_kind *k,
                        int nkinds, const tb_opp_row *r, const int64_t *calls, int nrows);

#endif
