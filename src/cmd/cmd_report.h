/* cmd_report.h - what `trainbench report`'s two files share: cmd_report.c
 * prints one results file and parses the command line, cmd_report_compare.c
 * prints two side by side; both name a run and summarise its steps alike. */
#ifndef TB_CMD_REPORT_H
#define TB_CMD_REPORT_H

#include <stdio.h>

#include "src/results/results.h"

/* Timed steps of /steps: how many, rank 0's step time, img/s, first and last loss. */
typedef struct {
    int steps, timed;
    double step_ms_mean, step_ms_median, img_per_s, loss_first, loss_last;
} tb_report_steps;

/* Attribute indices in display order (provenance first); free() it. */
int *tb_report_display_order(const tb_results *r);
/* b / a, NAN where a is 0 or either is not a number. */
double tb_report_ratio(double b, double a);
/* The run in two lines (three with an abort reason), each line prefixed by label. */
void tb_report_run_line(FILE *f, tb_format fmt, const char *label, const tb_results *r);
tb_report_steps tb_report_steps_of(const tb_results *r);
/* One stderr line per part the file lacks. */
void tb_report_problems(const tb_results *r);
/* `report A B`: exit status 0, or 1 when either file is partial or aborted. */
int tb_report_two(const char *pa, const char *pb, tb_format fmt);
/* `report A B`: the convolutions whose engine or algorithm differs, a row
 * per direction and batch size (/conv_algorithms), and the BatchNorms whose
 * --fuse mode or kernels differ (/batchnorms), rank 0 of each file; or a
 * note that none does (cmd_report_choices.c). */
void tb_report_compare_choices(FILE *f, tb_format fmt, const tb_results *a, const tb_results *b);
/* `report RUN.h5`: the same lists for each rank of a run against its rank 0,
 * or a note that every rank ran as rank 0 (files with more than one rank). */
void tb_report_rank_choices(FILE *f, tb_format fmt, const tb_results *r);

#endif
