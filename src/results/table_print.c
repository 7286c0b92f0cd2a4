/* table_print.c - text, markdown and CSV renderings of one table layout
 * (see table_print.h). */
#include "src/results/table_print.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

struct tb_tab {
    tb_format fmt;
    char *title;
    int ncols;
    tb_col *cols;     /* head/unit/key point into `names` copies */
    char **names;     /* [3 * ncols]: head, unit, key (NULL allowed) */
    char **cells;     /* [rows * ncols] */
    size_t ncells, cap;
};

int tb_format_parse(const char *name, tb_format *out) {
    if (strcmp(name, "text") == 0) *out = TB_FMT_TEXT;
    else if (strcmp(name, "md") == 0) *out = TB_FMT_MD;
    else if (strcmp(name, "csv") == 0) *out = TB_FMT_CSV;
    else return -1;
    return 0;
}

static char *dup_or_null(const char *s) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) TB_FATAL("out of host memory");
    return d;
}

tb_tab *tb_tab_new(tb_format fmt, const char *title, const tb_col *cols, int ncols) {
    tb_tab *t = calloc(1, sizeof *t);
    if (!t) TB_FATAL("out of host memory");
    t->fmt = fmt;
    t->title = dup_or_null(title);
    t->ncols = ncols;
    t->cols = calloc((size_t)ncols, sizeof *t->cols);
    t->names = calloc((size_t)(3 * ncols), sizeof *t->names);
    if (!t->cols || !t->names) TB_FATAL("out of host memory");
    for (int c = 0; c < ncols; c++) {
        t->cols[c] = cols[c];
        t->names[3 * c] = dup_or_null(cols[c].head ? cols[c].head : "");
        t->names[3 * c + 1] = dup_or_null(cols[c].unit);
        t->names[3 * c + 2] = dup_or_null(cols[c].key);
        t->cols[c].head = t->names[3 * c];
        t->cols[c].unit = t->names[3 * c + 1];
        t->cols[c].key = t->names[3 * c + 2];
    }
    return t;
}

static void push(tb_tab *t, char *owned) {
    if (t->ncells == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->cells = realloc(t->cells, t->cap * sizeof *t->cells);
        if (!t->cells) TB_FATAL("out of host memory");
    }
    t->cells[t->ncells++] = owned;
}

void tb_tab_str(tb_tab *t, const char *s) { push(t, dup_or_null(s ? s : "")); }

void tb_tab_strf(tb_tab *t, const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tb_tab_str(t, buf);
}

static const char *missing(const tb_tab *t) { return t->fmt == TB_FMT_CSV ? "" : "-"; }

/* nan (a value the file lacks) and inf (one no table can show) print as missing */
void tb_tab_num(tb_tab *t, double v, int decimals) {
    if (!isfinite(v)) tb_tab_str(t, missing(t));
    else tb_tab_strf(t, "%.*f", decimals, v);
}

void tb_tab_gnum(tb_tab *t, double v) {
    if (!isfinite(v)) tb_tab_str(t, missing(t));
    else tb_tab_strf(t, "%.6g", v);
}

void tb_tab_int(tb_tab *t, long long v) { tb_tab_strf(t, "%lld", v); }

void tb_tab_spread(tb_tab *t, double min, double median, double max, int decimals) {
    const tb_col *c = &t->cols[t->ncells % (size_t)t->ncols];
    double v[3] = {min, median, max};
    char part[3][64];
    if (!isfinite(min) && !isfinite(median) && !isfinite(max)) {
        tb_tab_str(t, t->fmt == TB_FMT_CSV ? ",," : "-");
        return;
    }
    if (t->fmt == TB_FMT_TEXT) { /* "%7.1f/%6.1f/%7.1f" in a 22-wide column */
        int inner = (c->width > 8 ? c->width : 8) - 2, b = inner / 3, a = (inner - b) / 2;
        int w[3] = {a, b, inner - a - b};
        for (int i = 0; i < 3; i++) {
            if (!isfinite(v[i])) snprintf(part[i], sizeof part[i], "%*s", w[i], "-");
            else snprintf(part[i], sizeof part[i], "%*.*f", w[i], decimals, v[i]);
        }
        tb_tab_strf(t, "%s/%s/%s", part[0], part[1], part[2]);
        return;
    }
    for (int i = 0; i < 3; i++) {
        if (!isfinite(v[i])) snprintf(part[i], sizeof part[i], "%s", missing(t));
        else snprintf(part[i], sizeof part[i], "%.*f", decimals, v[i]);
    }
    if (t->fmt == TB_FMT_MD) tb_tab_strf(t, "%s / %s / %s", part[0], part[1], part[2]);
    else tb_tab_strf(t, "%s,%s,%s", part[0], part[1], part[2]); /* csv: three columns, unquoted */
}

/* ---- rendering -------------------------------------------------------------------------- */

static void rtrim_line(char *s) {
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == ' ') s[--n] = '\0';
}

/* Appends `s` to line at *used, padded to width w. */
static void put_cell(char *line, size_t cap, size_t *used, int gap, const char *s, int w, int left) {
    if (*used >= cap) return;
    *used += (size_t)snprintf(line + *used, cap - *used, "%*s", gap, "");
    if (*used >= cap) return;
    *used += (size_t)snprintf(line + *used, cap - *used, left ? "%-*s" : "%*s", w, s);
}

/* A cell that holds newlines (a list of files, one per line) is printed on
 * as many lines, each part in the cell's column, the row's other cells
 * blank below their first line: no part starts a line of its own at the
 * left margin, where it would read as a row of another table. */
static int cell_lines(const char *s) {
    int n = 1;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* The widest line of a cell. */
static int cell_width(const char *s) {
    int w = 0;
    while (*s) {
        int n = (int)strcspn(s, "\n");
        if (n > w) w = n;
        s += n + (s[n] == '\n');
    }
    return w;
}

/* Line k of a cell into buf (len >= its width + 1); "" past its last. */
static const char *cell_line(const char *s, int k, char *buf, size_t len) {
    for (; k > 0 && s; k--) {
        s = strchr(s, '\n');
        if (s) s++;
    }
    if (!s) return "";
    size_t n = strcspn(s, "\n");
    if (n >= len) n = len - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

static void print_text(const tb_tab *t, FILE *f, size_t rows) {
    int *w = calloc((size_t)t->ncols, sizeof *w);
    int any_unit = 0;
    for (int c = 0; c < t->ncols; c++) {
        const tb_col *col = &t->cols[c];
        w[c] = col->width;
        int hl = (int)strlen(col->head);
        if (hl > w[c]) w[c] = hl;
        if (col->unit) {
            any_unit = 1;
            if ((int)strlen(col->unit) + 2 > w[c]) w[c] = (int)strlen(col->unit) + 2;
        }
        for (size_t r = 0; r < rows; r++) {
            int l = cell_width(t->cells[r * (size_t)t->ncols + (size_t)c]);
            if (l > w[c]) w[c] = l;
        }
    }
    size_t cap = 256, widest = 1;
    for (int c = 0; c < t->ncols; c++) {
        cap += (size_t)w[c] + (size_t)t->cols[c].gap + 2;
        if ((size_t)w[c] + 1 > widest) widest = (size_t)w[c] + 1;
    }
    char *line = malloc(cap), *part = malloc(widest);
    if (!w || !line || !part) TB_FATAL("out of host memory");
    fprintf(f, "#\n");
    if (t->title) fprintf(f, "# %s\n", t->title);
    for (int pass = 0; pass < 1 + any_unit; pass++) {
        size_t used = (size_t)snprintf(line, cap, "#");
        for (int c = 0; c < t->ncols; c++) {
            char unit[96] = "";
            if (pass == 1 && t->cols[c].unit) snprintf(unit, sizeof unit, "(%s)", t->cols[c].unit);
            put_cell(line, cap, &used, c == 0 ? 1 : (t->cols[c].gap ? t->cols[c].gap : 1),
                     pass == 0 ? t->cols[c].head : unit, w[c], t->cols[c].left);
        }
        rtrim_line(line);
        fprintf(f, "%s\n", line);
    }
    for (size_t r = 0; r < rows; r++) {
        char *const *cells = t->cells + r * (size_t)t->ncols;
        int nl = 1;
        for (int c = 0; c < t->ncols; c++)
            if (cell_lines(cells[c]) > nl) nl = cell_lines(cells[c]);
        for (int k = 0; k < nl; k++) {
            size_t used = (size_t)snprintf(line, cap, " ");
            for (int c = 0; c < t->ncols; c++)
                put_cell(line, cap, &used, c == 0 ? 1 : (t->cols[c].gap ? t->cols[c].gap : 1),
                         nl == 1 ? cells[c] : cell_line(cells[c], k, part, widest), w[c], t->cols[c].left);
            rtrim_line(line);
            fprintf(f, "%s\n", line);
        }
    }
    free(part);
    free(line);
    free(w);
}

static void md_cell(FILE *f, const char *s) {
    fputc(' ', f);
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputs(" |", f);
}

static void print_md(const tb_tab *t, FILE *f, size_t rows) {
    fprintf(f, "\n");
    if (t->title) fprintf(f, "**%s**\n\n", t->title);
    fputc('|', f);
    for (int c = 0; c < t->ncols; c++) {
        char head[256];
        if (t->cols[c].unit) snprintf(head, sizeof head, "%s (%s)", t->cols[c].head, t->cols[c].unit);
        else snprintf(head, sizeof head, "%s", t->cols[c].head);
        md_cell(f, head);
    }
    fputs("\n|", f);
    for (int c = 0; c < t->ncols; c++) fputs(t->cols[c].left ? "---|" : "--:|", f);
    fputc('\n', f);
    for (size_t r = 0; r < rows; r++) {
        fputc('|', f);
        for (int c = 0; c < t->ncols; c++) md_cell(f, t->cells[r * (size_t)t->ncols + (size_t)c]);
        fputc('\n', f);
    }
    fputc('\n', f); /* a line right after the table would be read as one more row */
}

static void csv_field(FILE *f, const char *s) {
    if (strpbrk(s, ",\"\n\r") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void print_csv(const tb_tab *t, FILE *f, size_t rows) {
    if (t->title) fprintf(f, "# %s\n", t->title);
    for (int c = 0; c < t->ncols; c++) {
        const char *key = t->cols[c].key ? t->cols[c].key : t->cols[c].head;
        if (c) fputc(',', f);
        if (t->cols[c].spread) {
            char three[512];
            snprintf(three, sizeof three, "%s_min,%s_median,%s_max", key, key, key);
            fputs(three, f);
        } else {
            csv_field(f, key);
        }
    }
    fputc('\n', f);
    for (size_t r = 0; r < rows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * (size_t)t->ncols + (size_t)c];
            if (c) fputc(',', f);
            if (t->cols[c].spread) {
                if (strchr(s, ',')) fputs(s, f);
                else fprintf(f, "%s,%s,%s", s, s, s); /* a plain cell in a spread column */
            } else {
                csv_field(f, s);
            }
        }
        fputc('\n', f);
    }
    fputc('\n', f);
}

void tb_tab_print(tb_tab *t, FILE *f) {
    while (t->ncells % (size_t)t->ncols) tb_tab_str(t, missing(t));
    size_t rows = t->ncells / (size_t)t->ncols;
    if (t->fmt == TB_FMT_TEXT) print_text(t, f, rows);
    else if (t->fmt == TB_FMT_MD) print_md(t, f, rows);
    else print_csv(t, f, rows);
    for (size_t i = 0; i < t->ncells; i++) free(t->cells[i]);
    for (int i = 0; i < 3 * t->ncols; i++) free(t->names[i]);
    free(t->cells);
    free(t->names);
    free(t->cols);
    free(t->title);
    free(t);
}

void tb_note(FILE *f, tb_format fmt, const char *fmt_str, ...) {
    char buf[8192];
    va_list ap;
    va_start(ap, fmt_str);
    vsnprintf(buf, sizeof buf, fmt_str, ap);
    va_end(ap);
    if (fmt == TB_FMT_MD) fprintf(f, "%s  \n", buf);
    else fprintf(f, "# %s\n", buf);
}
