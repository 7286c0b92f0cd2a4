/* results_read.h - a results file (DESIGN.md contract, results.h) read back
 * whole: every root attribute and every group of 1-D columns, whatever their
 * names, so `trainbench report` can print tables that later writers add
 * (e.g. /loader, /probe) without knowing them. Also checks the file against
 * the contract, collecting one line per missing or malformed part instead of
 * stopping, so a partial file (an aborted run) is still reported. */
#ifndef TB_RESULTS_READ_H
#define TB_RESULTS_READ_H

#include <stddef.h>

#include "src/results/scaling.h"

typedef enum { TB_VAL_INT, TB_VAL_FLOAT, TB_VAL_STR, TB_VAL_OTHER } tb_val_kind;

typedef struct {
    char *key;
    tb_val_kind kind;
    char *str;      /* TB_VAL_STR (and a description for TB_VAL_OTHER) */
    double num;     /* TB_VAL_INT, TB_VAL_FLOAT */
} tb_rattr;

typedef struct {
    char *name;
    tb_val_kind kind;  /* TB_VAL_INT, TB_VAL_FLOAT or TB_VAL_STR */
    double *num;       /* [rows] numeric columns */
    char **str;        /* [rows] string columns */
    size_t rows;
} tb_rcol;

typedef struct {
    char *name;        /* group name without the slash: "scaling" */
    int ncols;
    tb_rcol *cols;     /* in the order of the group's string attribute `columns`
                        * ("threads,img_per_s,..."), when the writer left one;
                        * else integer columns, string columns, the rest, each
                        * in name order */
    size_t rows;       /* the length shared by every column */
    int nattrs;
    tb_rattr *attrs;   /* the group's attributes (name order; `columns` among them) */
} tb_rtable;

typedef struct {
    char path[4096];
    int nattrs;
    tb_rattr *attrs;   /* name order */
    int ntables;
    tb_rtable *tables; /* name order */
    int nproblems;
    char **problems;   /* one line each: what is missing or malformed */
} tb_results;

/* What makes an HDF5 file a results file: the root attribute 'status', or
 * any of these tables (NULL-ended). tb_results_load's test, and
 * output_guard.c's of what an output path would replace. */
extern const char *const tb_results_tables[];

/* Reads the whole file. Returns 0 (problems, if any, are in r->problems),
 * or -1 with one line in err when the file cannot be read at all or is not a
 * results file (no status attribute and none of tb_results_tables). */
int tb_results_load(const char *path, tb_results *r, char *err, size_t errlen);
void tb_results_free(tb_results *r);

const tb_rattr *tb_results_attr(const tb_results *r, const char *key);
/* The string attribute, or dflt when missing or not a string. */
const char *tb_results_str(const tb_results *r, const char *key, const char *dflt);
/* The numeric attribute, or dflt. */
double tb_results_num(const tb_results *r, const char *key, double dflt);
/* The run was asked for no scaling table: its scaling_steps attribute is
 * 0, or, in a file written before that attribute, its command line has
 * --scaling-steps 0. */
int tb_results_no_scaling_asked(const tb_results *r);
/* An attribute's value as text: strings as they are, integers exactly,
 * floats with 6 significant digits. */
void tb_rattr_format(const tb_rattr *a, char *buf, size_t len);
/* 1 when a and b hold the same value (same kind, string or number). */
int tb_rattr_equal(const tb_rattr *a, const tb_rattr *b);

const tb_rtable *tb_results_table(const tb_results *r, const char *name);
const tb_rcol *tb_rtable_col(const tb_rtable *t, const char *name);
/* A string column's value at row (NULL when the column is missing or not strings). */
const char *tb_rtable_str(const tb_rtable *t, const char *col, size_t row);
/* The group's numeric / string attribute, or dflt. */
double tb_rtable_attr_num(const tb_rtable *t, const char *key, double dflt);
const char *tb_rtable_attr_str(const tb_rtable *t, const char *key, const char *dflt);
/* Value of a numeric column at row, NaN when the column is missing. */
double tb_rtable_num(const tb_rtable *t, const char *col, size_t row);

/* /scaling as the rows the live run prints (scaling.h); columns the file
 * lacks (e.g. per-phase spreads) are NaN. Returns the row count; *rows is
 * malloc'd (NULL when 0). */
int tb_results_scaling_rows(const tb_results *r, tb_scaling_row **rows);
/* /ranks as tb_rank_row (scaling.h); returns the count; *rows malloc'd. */
int tb_results_rank_rows(const tb_results *r, tb_rank_row **rows);

/* Root attributes the contract requires (NULL-terminated). */
extern const char *const tb_results_required_attrs[];

#endif
