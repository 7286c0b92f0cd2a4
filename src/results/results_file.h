/* results_file.h - the results file (DESIGN.md contract), written by rank 0:
 * provenance as root attributes, and tables as groups of equal-length 1-D
 * datasets, one per column (/steps, /ranks, /scaling), so h5py, h5dump and
 * C read them alike. Written atomically at the end of a run, with status
 * "complete", or "aborted" on a failure path. */
#ifndef TB_RESULTS_FILE_H
#define TB_RESULTS_FILE_H

#include <stddef.h>
#include <stdint.h>

#define TB_TABLE_MAX_COLS 48
#define TB_TABLE_MAX_STRS 4
#define TB_MAX_ATTRS 192 /* a training run with evaluation writes about 70 root attributes */

typedef struct {
    int nattrs;
    char key[TB_MAX_ATTRS][40];
    char *sval[TB_MAX_ATTRS];          /* string value or NULL */
    double nval[TB_MAX_ATTRS];
    int is_int[TB_MAX_ATTRS];
} tb_attrs;

/* A table of numeric columns (and up to TB_TABLE_MAX_STRS string columns,
 * written after them) grown row by row, with optional attributes on its
 * group. */
typedef struct {
    char group[32];
    int ncols;
    char names[TB_TABLE_MAX_COLS][40];
    int is_int[TB_TABLE_MAX_COLS];
    double *cols[TB_TABLE_MAX_COLS];   /* [rows] each (integers held exactly) */
    int nstrs;                         /* string columns (0: none) */
    char strnames[TB_TABLE_MAX_STRS][40];
    char **strs;                       /* [rows][TB_TABLE_MAX_STRS] */
    size_t rows, cap;
    tb_attrs attrs;                    /* the group's attributes (tb_attrs_*) */
} tb_table;

/* names: "step:i,loss,lr" (":i" marks an int64 column). */
void tb_table_init(tb_table *t, const char *group, const char *names);
/* Adds a string column (in the order added, after the numeric ones). */
void tb_table_add_string_column(tb_table *t, const char *name);
/* values: one per numeric column, in order; s: the first string column's
 * value (the others ""). */
void tb_table_row(tb_table *t, const double *values, const char *s);
/* The same with every string column's value, in order. */
void tb_table_row_strs(tb_table *t, const double *values, const char *const *s);
void tb_table_free(tb_table *t);
/* dst becomes an independent copy of src (free both). */
void tb_table_copy(tb_table *dst, const tb_table *src);

void tb_attrs_str(tb_attrs *a, const char *key, const char *value);
void tb_attrs_int(tb_attrs *a, const char *key, int64_t value);
void tb_attrs_num(tb_attrs *a, const char *key, double value);
void tb_attrs_free(tb_attrs *a);
void tb_attrs_copy(tb_attrs *dst, const tb_attrs *src);
/* The string value of key, or NULL. */
const char *tb_attrs_get_str(const tb_attrs *a, const char *key);

/* Writes path atomically: attributes, then every table. */
void tb_results_write(const char *path, const tb_attrs *a, const tb_table *const *tables, int ntables);
/* The same for a write racing the launcher's SIGKILL (an abort): the file is
 * renamed into place before it is fsynced (tb_h5_commit_atomic_now). */
void tb_results_write_now(const char *path, const tb_attrs *a, const tb_table *const *tables, int ntables);

/* Writes dst atomically (temporary name, fsync, rename; dst may be src): a
 * copy of the results file src with the attributes a (may be NULL) and the
 * tables added, each replacing any group or attribute of the same name. */
void tb_results_copy_with_tables(const char *src, const char *dst, const tb_attrs *a,
                                 const tb_table *const *tables, int ntables);

/* "2026-11-21T07:40:12Z" */
void tb_utc_now(char *buf, size_t len);

#endif
