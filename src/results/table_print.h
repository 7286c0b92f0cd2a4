/* table_print.h - one table layout, three renderings: the `#`-prefixed
 * fixed-width console table (nccl-tests style), a markdown table for the .md
 * files in results/, and CSV. A layout is an array of columns; the caller
 * adds cells row by row and the table is printed at the end, once every
 * cell's width is known.
 *
 *   text      "#\n# title\n# head ...\n[# (unit) ...]\n  cell ...\n": right-
 *             aligned columns at least `width` wide, one space apart (`gap`
 *             to widen), trailing blanks trimmed
 *   markdown  "**title**", a blank line, "| head (unit) | ... |", alignment
 *             row, one row per line, a blank line
 *   csv       "# title", a header line of keys, one line per row, a blank
 *             line (RFC 4180 quoting); a spread cell is three columns
 *             KEY_min,KEY_median,KEY_max
 * A NaN number prints as "-" (not measured). */
#ifndef TB_TABLE_PRINT_H
#define TB_TABLE_PRINT_H

#include <stdio.h>

typedef enum { TB_FMT_TEXT, TB_FMT_MD, TB_FMT_CSV } tb_format;

/* "text" | "md" | "csv"; returns 0, or -1 for anything else. */
int tb_format_parse(const char *name, tb_format *out);

typedef struct {
    const char *head;  /* header in text and markdown */
    const char *unit;  /* text: printed under the header as "(unit)"; markdown: "head (unit)"; or NULL */
    const char *key;   /* csv header (NULL: head) */
    int width;         /* text: minimum width; the column widens to fit its cells */
    int left;          /* text: left-aligned (default right) */
    int gap;           /* text: spaces before the column (0 means 1) */
    int spread;        /* cells are min/median/max triples (tb_tab_spread) */
} tb_col;

typedef struct tb_tab tb_tab;

/* title may be NULL (no title line). The layout is copied. */
tb_tab *tb_tab_new(tb_format fmt, const char *title, const tb_col *cols, int ncols);
/* The next cell of the current row (rows end after ncols cells). */
void tb_tab_str(tb_tab *t, const char *s);
void tb_tab_strf(tb_tab *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tb_tab_num(tb_tab *t, double v, int decimals);     /* "%.*f", NaN: "-" */
void tb_tab_int(tb_tab *t, long long v);
void tb_tab_gnum(tb_tab *t, double v);                  /* "%.6g", NaN: "-" */
/* text: "%7.1f/%6.1f/%7.1f" (decimals 1); markdown "a / b / c"; csv three cells */
void tb_tab_spread(tb_tab *t, double min, double median, double max, int decimals);
/* Prints the table (any unfinished row is padded with "-") and frees it. */
void tb_tab_print(tb_tab *t, FILE *f);

/* A line of prose between tables: "# text" (text, csv) or a markdown
 * paragraph line. */
void tb_note(FILE *f, tb_format fmt, const char *fmt_str, ...) __attribute__((format(printf, 3, 4)));

#endif
