/* cmd_report_choices.c - `trainbench report A.h5 B.h5`'s list of the
 * BatchNorms that ran another way in B (/batchnorms, rank 0's row): each
 * node's --fuse mode and kernels, the times left out (they differ on every
 * run). Called by cmd_report_compare.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/cmd/cmd_report.h"
#include "src/results/results.h"

/* Rank 0's /batchnorms text, NULL when the file has none. */
static const char *rank0_choices(const tb_results *r) {
    const tb_rtable *t = tb_results_table(r, "batchnorms");
    if (!t) return NULL;
    for (size_t i = 0; i < t->rows; i++)
        if (tb_rtable_num(t, "rank", i) == 0.0) return tb_rtable_str(t, "choices", i);
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

void tb_report_compare_choices(FILE *f, tb_format fmt, const tb_results *ra, const tb_results *rb) {
    const char *a = rank0_choices(ra), *b = rank0_choices(rb);
    if (!a && !b) return;
    if (!a || !b) {
        tb_note(f, fmt, "/batchnorms: only %s has it (how each BatchNorm ran): nothing to compare", a ? "A" : "B");
        return;
    }
    tb_tab *t = NULL;
    int differ = 0, nodes = 0;
    char name[256];
    size_t n;
    for (const char *p = a; *p;) {
        p = next_name(p, name, sizeof name);
        if (!name[0]) continue;
        nodes++;
        differ += compare_node(&t, fmt, name, a, b);
    }
    for (const char *p = b; *p;) { /* the nodes only B has */
        p = next_name(p, name, sizeof name);
        if (name[0] && !line_of(a, name, &n)) differ += compare_node(&t, fmt, name, a, b);
    }
    if (t) {
        tb_note(f, fmt, "/batchnorms: %d of %d BatchNorms ran another way in B (rank 0)", differ, nodes);
        tb_tab_print(t, f);
    } else
        tb_note(f, fmt, "/batchnorms: every BatchNorm ran the same way in A and B (%d, rank 0)", nodes);
}
