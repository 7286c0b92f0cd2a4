/* cmd_report_choices.c - what ran another way: the convolutions
 * (/conv_algorithms: each direction's engine or algorithm) and the
 * BatchNorms (/batchnorms: each node's --fuse mode and kernels), times left
 * out (they differ on every run). `trainbench report A.h5 B.h5` compares
 * rank 0 of B with rank 0 of A (cmd_report_compare.c); `trainbench report
 * RUN.h5` each rank of a run with its rank 0 (cmd_report.c). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "src/cmd/cmd_report.h"
#include "src/results/results.h"

/* A row's rank: a whole number >= 0, else -1. */
static int row_rank(const tb_rtable *t, size_t row) {
    const double v = tb_rtable_num(t, "rank", row);
    return v >= 0.0 && v < 1e9 && v == (double)(int)v ? (int)v : -1;
}

/* Rank rank's text in column col of table name, NULL when the file has none. */
static const char *rank_text(const tb_results *r, const char *name, const char *col, int rank) {
    const tb_rtable *t = tb_results_table(r, name);
    if (!t) return NULL;
    for (size_t i = 0; i < t->rows; i++)
        if (row_rank(t, i) == rank) return tb_rtable_str(t, col, i);
    return NULL;
}

/* One comparison of two tables' texts ("NAME: ..." lines), and its table of
 * differences, made at its first row. */
typedef struct {
    tb_format fmt;
    const char *a, *b;
    char head_a[32], head_b[32]; /* the columns: "A" and "B", or "rank 0" and "rank 3" */
    char scope[64];              /* in the title: "rank 0", or "rank 3 against rank 0" */
    tb_tab *t;
} cmp;

/* The table of c, made with cols (the two last headed head_a, head_b) and
 * the title "TABLE: WHAT (SCOPE; LEFT OUT)" at its first row. */
static tb_tab *cmp_table(cmp *c, const tb_col *cols, int ncols, const char *what, const char *left_out) {
    if (c->t) return c->t;
    tb_col own[4]; /* ncols: 3 or 4 */
    if (ncols < 3 || ncols > 4) tb_die("report: a choices table of %d columns", ncols);
    for (int i = 0; i < ncols; i++) own[i] = cols[i];
    own[ncols - 2].head = c->head_a;
    own[ncols - 1].head = c->head_b;
    char title[256];
    snprintf(title, sizeof title, "%s (%s; %s)", what, c->scope, left_out);
    return c->t = tb_tab_new(c->fmt, title, own, ncols);
}

/* The line of node `name` in text (NULL: none); *n its length, newline left out. */
static const char *line_of(const char *text, const char *name, size_t *n) {
    const size_t k = strlen(name);
    for (const char *p = text; p && *p;) {
        const char *end = strchr(p, '\n');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > k + 1 && strncmp(p, name, k) == 0 && p[k] == ':' && p[k + 1] == ' ') {
            *n = len;
            return p;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

/* "NAME: MODE...; timed ...; kernels K (timed: ...)" -> "MODE..., kernels K":
 * the choice without its times. */
static void choice_of(const char *line, size_t n, char *out, size_t len) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), line);
    const char *mode = strstr(buf, ": ");
    mode = mode ? mode + 2 : buf;
    const size_t mlen = strcspn(mode, ";");
    const char *kern = strstr(mode, "; kernels ");
    const size_t klen = kern ? strcspn(kern + 10, " ") : 0;
    snprintf(out, len, "%.*s%s%.*s", (int)mlen, mode, kern ? ", kernels " : "", (int)klen, kern ? kern + 10 : "");
}

/* Adds the row for BatchNorm name (of text a or b, whichever has it) to
 * c's table when its choice differs; returns 1 when it did. */
static int compare_bn(cmp *c, const char *name) {
    static const tb_col cols[] = {
        {.head = "batchnorm", .key = "batchnorm", .left = 1},
        {.key = "a", .left = 1, .gap = 2},
        {.key = "b", .left = 1, .gap = 2},
    };
    size_t na = 0, nb = 0;
    const char *la = line_of(c->a, name, &na), *lb = line_of(c->b, name, &nb);
    char ca[600] = "(absent)", cb[600] = "(absent)";
    if (la) choice_of(la, na, ca, sizeof ca);
    if (lb) choice_of(lb, nb, cb, sizeof cb);
    if (strcmp(ca, cb) == 0) return 0;
    tb_tab_str(cmp_table(c, cols, 3, "/batchnorms: the BatchNorms that ran another way", "--fuse mode and kernels, "
                                                                                         "times left out"),
               name);
    tb_tab_str(c->t, ca);
    tb_tab_str(c->t, cb);
    return 1;
}

/* Each line's node name into name (len bytes); returns the text after the line. */
static const char *next_name(const char *p, char *name, size_t len) {
    const char *end = strchr(p, '\n'), *colon = strstr(p, ": ");
    const size_t n = colon && (!end || colon < end) ? (size_t)(colon - p) : 0;
    snprintf(name, len, "%.*s", (int)(n < len - 1 ? n : len - 1), p);
    return end ? end + 1 : p + strlen(p);
}

/* ---- convolutions: /conv_algorithms ------------------------------------------------------------ */

/* Length of s's prefix that pattern pat matches ('#': a number [0-9.]+,
 * '@': a word [^ ]+, any other character itself), 0 when it does not. */
static size_t match(const char *s, const char *pat) {
    const char *p = s;
    for (; *pat; pat++) {
        const char *q = p;
        if (*pat == '#')
            while (isdigit((unsigned char)*q) || *q == '.') q++;
        else if (*pat == '@')
            while (*q && *q != ' ') q++;
        else if (*q == *pat)
            q++;
        if (q == p) return 0;
        p = q;
    }
    return (size_t)(p - s);
}

/* A conv description without what changes from run to run while the same
 * thing runs: the times, the alternative not chosen (" vs legacy X 0.2 ms",
 * "; graph engine N 0.3 ms") and how the choice was made ("measured",
 * "heuristic", "from the plan cache"); the padded stem's timing too. */
static void strip_times(const char *in, size_t n, char *out, size_t len) {
    static const char *drop[] = {" vs legacy @ # ms", "; graph engine # # ms", ", # ms", ", measured", ", heuristic",
                                 ", from the plan cache", " (# ms with pads # ms, against # ms on #)"};
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < len;) {
        size_t k = 0;
        for (size_t d = 0; d < sizeof drop / sizeof drop[0] && !k; d++) k = match(in + i, drop[d]);
        if (k && i + k <= n)
            i += k;
        else
            out[o++] = in[i++];
    }
    out[o] = '\0';
}

/* One direction of one batch size, and what runs it: "n=256 fwd" ->
 * "graph-api engine 62 [k2=4] (0.0 MiB)". */
typedef struct {
    char key[48], text[400];
} conv_part;

static int is_direction(const char *w) {
    static const char *dirs[] = {"fwd",        "data",     "data+", "filter",   "filter+",
                                 "conv+stats", "finalize", "wgrad", "dgrad+dbn"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (strcmp(w, dirs[i]) == 0) return 1;
    return 0;
}

/* Splits a stripped description into its parts (room for max: one per word
 * is enough); words before the first direction ("input padded 3 -> 4
 * channels:") are the part "input"; after " | fused ...:" the keys start
 * with "fused". */
static int parts_of(char *desc, conv_part *part, int max) {
    char n[24] = "", section[8] = "";
    int np = 0, cur = -1, skip = 0;
    for (char *save = NULL, *w = strtok_r(desc, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        size_t wl = strlen(w);
        if (strcmp(w, "|") == 0) { /* " | fused with the prologue: n=...": the fused op's parts */
            snprintf(section, sizeof section, "fused ");
            cur = -1, skip = 1;
        } else if (strncmp(w, "n=", 2) == 0 && wl > 3 && w[wl - 1] == ':') {
            snprintf(n, sizeof n, "%.*s ", (int)(wl - 3 < 20 ? wl - 3 : 20), w + 2);
            cur = -1, skip = 0;
        } else if (skip) {
            continue;
        } else if (is_direction(w) && np < max) {
            cur = np++;
            snprintf(part[cur].key, sizeof part[cur].key, "%sn=%s%s", section, n, w);
            part[cur].text[0] = '\0';
        } else {
            if (cur < 0 && np < max) { /* words before any direction */
                cur = np++;
                snprintf(part[cur].key, sizeof part[cur].key, "%sinput", section);
                part[cur].text[0] = '\0';
            }
            if (cur < 0) continue;
            size_t l = strlen(part[cur].text);
            if (w[wl - 1] == ';') w[--wl] = '\0'; /* "...; n=64:": the batch sizes' separator */
            snprintf(part[cur].text + l, sizeof part[cur].text - l, "%s%s", l ? " " : "", w);
        }
    }
    return np;
}

static const char *part_text(const conv_part *p, int np, const char *key) {
    for (int i = 0; i < np; i++)
        if (strcmp(p[i].key, key) == 0) return p[i].text;
    return NULL;
}

/* The parts of conv name in text, *np of them (0 when text lacks it); free() it. */
static conv_part *conv_parts(const char *text, const char *name, int *np) {
    size_t n = 0;
    const char *line = text ? line_of(text, name, &n) : NULL;
    *np = 0;
    if (!line) return NULL;
    const size_t k = strlen(name) + 2; /* "NAME: " */
    int words = 1;
    for (size_t i = k; i < n; i++) words += line[i] == ' ';
    char *desc = malloc(n + 1);
    conv_part *part = calloc((size_t)words, sizeof *part);
    if (!desc || !part) tb_die("report: out of memory comparing /conv_algorithms");
    strip_times(line + k, n - k, desc, n + 1);
    *np = parts_of(desc, part, words);
    free(desc);
    return part;
}

/* Adds a row to c's table for each part of conv name that differs; returns 1 when one did. */
static int compare_conv(cmp *c, const char *name) {
    static const tb_col cols[] = {
        {.head = "convolution", .key = "convolution", .left = 1},
        {.head = "part", .key = "part", .left = 1, .gap = 2},
        {.key = "a", .left = 1, .gap = 2},
        {.key = "b", .left = 1, .gap = 2},
    };
    int na, nb, rows = 0;
    conv_part *pa = conv_parts(c->a, name, &na), *pb = conv_parts(c->b, name, &nb);
    for (int i = 0; i < na + nb; i++) { /* A's parts, then those only B has */
        const conv_part *p = i < na ? &pa[i] : &pb[i - na];
        const char *ta = part_text(pa, na, p->key), *tb = part_text(pb, nb, p->key);
        if (i >= na && ta) continue;
        if (ta && tb && strcmp(ta, tb) == 0) continue;
        tb_tab_str(cmp_table(c, cols, 4, "/conv_algorithms: the parts that ran another engine or algorithm",
                             "times, the alternative not chosen and how the choice was made left out"),
                   name);
        tb_tab_str(c->t, p->key);
        tb_tab_str(c->t, ta ? ta : "(absent)");
        tb_tab_str(c->t, tb ? tb : "(absent)");
        rows++;
    }
    free(pa);
    free(pb);
    return rows > 0;
}

/* ---- the two lists ------------------------------------------------------------------------------ */

/* What each table holds, and how its notes say it. */
typedef struct {
    const char *table, *col;
    const char *one, *many; /* "convolution", "convolutions" */
    const char *held;       /* what the table holds: "what each convolution ran" */
    const char *other;      /* "another engine or algorithm" */
    const char *same;       /* "the same engines and algorithms" */
    int (*compare)(cmp *c, const char *name);
} kind;

static const kind k_kinds[] = {
    {"conv_algorithms", "algorithms", "convolution", "convolutions", "what each convolution ran",
     "another engine or algorithm", "the same engines and algorithms", compare_conv},
    {"batchnorms", "choices", "BatchNorm", "BatchNorms", "how each BatchNorm ran", "another way", "the same way",
     compare_bn},
};

/* c->compare for each node of A, then each only B has: counts the nodes
 * into *nodes and those that differ into *differ. */
static void compare_all(cmp *c, const kind *k, int *differ, int *nodes) {
    char name[256];
    size_t n;
    *differ = *nodes = 0;
    for (int pass = 0; pass < 2; pass++)
        for (const char *p = pass ? c->b : c->a; *p;) {
            p = next_name(p, name, sizeof name);
            if (!name[0] || (pass && line_of(c->a, name, &n))) continue;
            ++*nodes;
            *differ += k->compare(c, name);
        }
}

void tb_report_compare_choices(FILE *f, tb_format fmt, const tb_results *ra, const tb_results *rb) {
    for (size_t i = 0; i < sizeof k_kinds / sizeof k_kinds[0]; i++) {
        const kind *k = &k_kinds[i];
        cmp c = {.fmt = fmt, .a = rank_text(ra, k->table, k->col, 0), .b = rank_text(rb, k->table, k->col, 0),
                 .head_a = "A", .head_b = "B", .scope = "rank 0"};
        if (!c.a && !c.b) continue;
        if (!c.a || !c.b) {
            tb_note(f, fmt, "/%s: only %s has it (%s): nothing to compare", k->table, c.a ? "A" : "B", k->held);
            continue;
        }
        int differ, nodes;
        compare_all(&c, k, &differ, &nodes);
        if (c.t) {
            tb_note(f, fmt, "/%s: %d of %d %s ran %s in B (rank 0)", k->table, differ, nodes, k->many, k->other);
            tb_tab_print(c.t, f);
        } else
            tb_note(f, fmt, "/%s: every %s ran %s in A and B (%d, rank 0)", k->table, k->one, k->same, nodes);
    }
}

void tb_report_rank_choices(FILE *f, tb_format fmt, const tb_results *r) {
    for (size_t i = 0; i < sizeof k_kinds / sizeof k_kinds[0]; i++) {
        const kind *k = &k_kinds[i];
        const tb_rtable *t = tb_results_table(r, k->table);
        if (!t || t->rows < 2) continue; /* one rank: nothing to compare */
        const char *a = rank_text(r, k->table, k->col, 0);
        if (!a) {
            tb_note(f, fmt, "/%s: no row for rank 0: the ranks are not compared", k->table);
            continue;
        }
        int ranks = 0, apart = 0, skipped = 0, nodes = 0;
        for (const char *p = a; *p;) { /* rank 0's nodes */
            char name[256];
            p = next_name(p, name, sizeof name);
            nodes += name[0] != '\0';
        }
        for (size_t row = 0; row < t->rows; row++) {
            const int rank = row_rank(t, row);
            const char *b = tb_rtable_str(t, k->col, row);
            if (rank == 0) continue;
            if (rank < 0 || !b) {
                skipped++;
                continue;
            }
            ranks++;
            cmp c = {.fmt = fmt, .a = a, .b = b, .head_a = "rank 0"};
            snprintf(c.head_b, sizeof c.head_b, "rank %d", rank);
            snprintf(c.scope, sizeof c.scope, "rank %d against rank 0", rank);
            int differ, both;
            compare_all(&c, k, &differ, &both);
            if (!c.t) continue;
            apart++;
            tb_note(f, fmt, "/%s: rank %d ran %s than rank 0 in %d of %d %s", k->table, rank, k->other, differ, both,
                    k->many);
            tb_tab_print(c.t, f);
        }
        if (skipped)
            tb_note(f, fmt, "/%s: %d row%s without a rank number or text, not compared", k->table, skipped,
                    skipped == 1 ? "" : "s");
        if (ranks && !apart)
            tb_note(f, fmt, "/%s: every rank ran %s as rank 0 (%d %s, %d ranks)", k->table, k->same, nodes, k->many,
                    ranks + 1);
        else if (ranks > 1)
            tb_note(f, fmt, "/%s: %d of the %d ranks besides rank 0 ran %s than rank 0", k->table, apart, ranks,
                    k->other);
    }
}
