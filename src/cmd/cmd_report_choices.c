/* cmd_report_choices.c - `trainbench report A.h5 B.h5`'s lists of what ran
 * another way in B, from rank 0's row: the BatchNorms (/batchnorms: each
 * node's --fuse mode and kernels) and the convolutions (/conv_algorithms:
 * each direction's engine or algorithm), times left out (they differ on
 * every run). Called by cmd_report_compare.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "src/cmd/cmd_report.h"
#include "src/results/results.h"

/* Rank 0's text in column col of table name, NULL when the file has none. */
static const char *rank0_text(const tb_results *r, const char *name, const char *col) {
    const tb_rtable *t = tb_results_table(r, name);
    if (!t) return NULL;
    for (size_t i = 0; i < t->rows; i++)
        if (tb_rtable_num(t, "rank", i) == 0.0) return tb_rtable_str(t, col, i);
    return NULL;
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

/* The table, made at its first row. */
static tb_tab *table(tb_tab **t, tb_format fmt) {
    static const tb_col cols[] = {
        {.head = "batchnorm", .key = "batchnorm", .left = 1},
        {.head = "A", .key = "a", .left = 1, .gap = 2},
        {.head = "B", .key = "b", .left = 1, .gap = 2},
    };
    if (!*t)
        *t = tb_tab_new(fmt, "/batchnorms: the BatchNorms that ran another way (rank 0; --fuse mode and kernels, "
                             "times left out)", cols, 3);
    return *t;
}

/* Adds the row for node name (of text a or b, whichever has it) to *t when
 * its choice differs; returns 1 when it did. */
static int compare_node(tb_tab **t, tb_format fmt, const char *name, const char *a, const char *b) {
    size_t na = 0, nb = 0;
    const char *la = line_of(a, name, &na), *lb = line_of(b, name, &nb);
    char ca[600] = "(absent)", cb[600] = "(absent)";
    if (la) choice_of(la, na, ca, sizeof ca);
    if (lb) choice_of(lb, nb, cb, sizeof cb);
    if (strcmp(ca, cb) == 0) return 0;
    tb_tab_str(table(t, fmt), name);
    tb_tab_str(*t, ca);
    tb_tab_str(*t, cb);
    return 1;
}

/* Each line's node name into name (len bytes); returns the text after the line. */
static const char *next_name(const char *p, char *name, size_t len) {
    const char *end = strchr(p, '\n'), *colon = strstr(p, ": ");
    const size_t n = colon && (!end || colon < end) ? (size_t)(colon - p) : 0;
    snprintf(name, len, "%.*s", (int)(n < len - 1 ? n : len - 1), p);
    return end ? end + 1 : p + strlen(p);
}

/* compare(&t, fmt, name, a, b) for each node of A, then each only B has:
 * adds its rows to *t, returns 1 when the node differs. Counts the nodes
 * into *nodes and those that differ into *differ; returns the table. */
typedef int (*compare_fn)(tb_tab **t, tb_format fmt, const char *name, const char *a, const char *b);
static tb_tab *compare_all(tb_format fmt, const char *a, const char *b, compare_fn compare, int *differ, int *nodes) {
    tb_tab *t = NULL;
    char name[256];
    size_t n;
    *differ = *nodes = 0;
    for (int pass = 0; pass < 2; pass++)
        for (const char *p = pass ? b : a; *p;) {
            p = next_name(p, name, sizeof name);
            if (!name[0] || (pass && line_of(a, name, &n))) continue;
            ++*nodes;
            *differ += compare(&t, fmt, name, a, b);
        }
    return t;
}

void tb_report_compare_choices(FILE *f, tb_format fmt, const tb_results *ra, const tb_results *rb) {
    const char *a = rank0_text(ra, "batchnorms", "choices"), *b = rank0_text(rb, "batchnorms", "choices");
    if (!a && !b) return;
    if (!a || !b) {
        tb_note(f, fmt, "/batchnorms: only %s has it (how each BatchNorm ran): nothing to compare", a ? "A" : "B");
        return;
    }
    int differ, nodes;
    tb_tab *t = compare_all(fmt, a, b, compare_node, &differ, &nodes);
    if (t) {
        tb_note(f, fmt, "/batchnorms: %d of %d BatchNorms ran another way in B (rank 0)", differ, nodes);
        tb_tab_print(t, f);
    } else
        tb_note(f, fmt, "/batchnorms: every BatchNorm ran the same way in A and B (%d, rank 0)", nodes);
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

/* Adds a row to *t for each part of conv name that differs; returns 1 when one did. */
static int compare_conv(tb_tab **t, tb_format fmt, const char *name, const char *a, const char *b) {
    static const tb_col cols[] = {
        {.head = "convolution", .key = "convolution", .left = 1},
        {.head = "part", .key = "part", .left = 1, .gap = 2},
        {.head = "A", .key = "a", .left = 1, .gap = 2},
        {.head = "B", .key = "b", .left = 1, .gap = 2},
    };
    int na, nb, rows = 0;
    conv_part *pa = conv_parts(a, name, &na), *pb = conv_parts(b, name, &nb);
    for (int i = 0; i < na + nb; i++) { /* A's parts, then those only B has */
        const conv_part *p = i < na ? &pa[i] : &pb[i - na];
        const char *ta = part_text(pa, na, p->key), *tb = part_text(pb, nb, p->key);
        if (i >= na && ta) continue;
        if (ta && tb && strcmp(ta, tb) == 0) continue;
        if (!*t)
            *t = tb_tab_new(fmt, "/conv_algorithms: the parts that ran another engine or algorithm (rank 0; times, the "
                                 "alternative not chosen and how the choice was made left out)", cols, 4);
        tb_tab_str(*t, name);
        tb_tab_str(*t, p->key);
        tb_tab_str(*t, ta ? ta : "(absent)");
        tb_tab_str(*t, tb ? tb : "(absent)");
        rows++;
    }
    free(pa);
    free(pb);
    return rows > 0;
}

void tb_report_compare_convs(FILE *f, tb_format fmt, const tb_results *ra, const tb_results *rb) {
    const char *a = rank0_text(ra, "conv_algorithms", "algorithms");
    const char *b = rank0_text(rb, "conv_algorithms", "algorithms");
    if (!a && !b) return;
    if (!a || !b) {
        tb_note(f, fmt, "/conv_algorithms: only %s has it (what each convolution ran): nothing to compare", a ? "A" : "B");
        return;
    }
    int differ, convs;
    tb_tab *t = compare_all(fmt, a, b, compare_conv, &differ, &convs);
    if (t) {
        tb_note(f, fmt, "/conv_algorithms: %d of %d convolutions ran another engine or algorithm in B (rank 0)", differ,
                convs);
        tb_tab_print(t, f);
    } else
        tb_note(f, fmt, "/conv_algorithms: every convolution ran the same engines and algorithms in A and B (%d, rank 0)",
                convs);
}
