/* fabric_read.c - the all-reduce timings that `project --fabric fit:FILE`
 * fits (see fabric.h): an allreduce-bench results file, or the console
 * table of `trainbench allreduce-bench` or nccl-tests' all_reduce_perf. */
#include "src/project/fabric.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "src/results/results.h"

/* ---- reading bench tables ------------------------------------------------------------------ */

int tb_fabric_count_hosts(const char *hostnames) {
    if (!hostnames || !*hostnames) return 0;
    int n = 1, depth = 0;
    for (const char *p = hostnames; *p; p++) {
        if (*p == '(') depth++;
        else if (*p == ')') depth--;
        else if (*p == ',' && depth == 0) n++;
    }
    /* a long list ends "..., ... and K more" (provenance.h): that entry stands for K */
    const char *more = strstr(hostnames, "... and ");
    int k = 0;
    if (more && sscanf(more, "... and %d more", &k) == 1 && k > 0) n += k - 1;
    return n;
}

static int is_hdf5(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char sig[8] = {0};
    size_t got = fread(sig, 1, 8, f);
    fclose(f);
    return got == 8 && memcmp(sig, "\211HDF\r\n\032\n", 8) == 0;
}

static int read_bench_h5(const char *path, tb_ar_sample **out, int *ranks, int *hosts, char *err,
                         size_t errlen) {
    tb_results r;
    if (tb_results_load(path, &r, err, errlen) != 0) return -1;
    const tb_rtable *t = tb_results_table(&r, "allreduce");
    int world = (int)tb_results_num(&r, "world_size", 0);
    if (!t || t->rows == 0 || !tb_rtable_col(t, "bytes") || !tb_rtable_col(t, "time_us") || world < 1) {
        snprintf(err, errlen,
                 "'%s' has no /allreduce table with bytes and time_us and a world_size attribute; "
                 "write one with 'trainbench allreduce-bench --results FILE'",
                 path);
        tb_results_free(&r);
        return -1;
    }
    /* allreduce-bench writes status "aborted" when a sum was wrong (its
     * #wrong column, abort_reason): such timings describe no working fabric */
    const char *status = tb_results_str(&r, "status", "complete");
    if (strcmp(status, "complete") != 0) {
        snprintf(err, errlen,
                 "'%s' holds an all-reduce run with status '%s' (see its wrong column: 'trainbench report %s'): "
                 "its timings cannot describe a fabric; fit a run that reports 0 wrong elements",
                 path, status, path);
        tb_results_free(&r);
        return -1;
    }
    *ranks = world;
    *hosts = tb_fabric_count_hosts(tb_results_str(&r, "hostnames", ""));
    *out = calloc(t->rows, sizeof **out);
    if (!*out) TB_FATAL("out of host memory");
    for (size_t i = 0; i < t->rows; i++) {
        (*out)[i].ranks = world;
        (*out)[i].bytes = tb_rtable_num(t, "bytes", i);
        (*out)[i].seconds = 1e-6 * tb_rtable_num(t, "time_us", i);
    }
    int n = (int)t->rows;
    tb_results_free(&r);
    return n;
}

/* Splits s at blanks into at most max tokens (s is modified). */
static int tokens(char *s, char **tok, int max) {
    int n = 0;
    for (char *p = strtok(s, " \t\r\n"); p && n < max; p = strtok(NULL, " \t\r\n")) tok[n++] = p;
    return n;
}

/* One run's console table as read so far (read_bench_text). */
typedef struct {
    const char *path;
    int lineno;
    int size_col, time_col;  /* in a row's tokens; -1 until the table's header */
    int redop_col, root_col; /* -1: none in the header */
    int wrong_col[4], nwrong; /* the #wrong columns (nccl-tests: out of place, in place) */
    int header_line;         /* the line of the "# size ... time" header, 0 before it */
    int rank0_line;          /* the line of "#  Rank 0", 0 before it */
    int start_line;          /* "# trainbench allreduce-bench:" or "# Collective test starting:" */
    int nranks, nseen, capseen; /* the table's "#  Rank N" lines; distinct hosts among them */
    char **seen;
    tb_ar_sample *out;
    int n, cap;
} text_table;

/* Refuses a second run in the file (-1, the line in err): appended logs
 * (tee -a, >>) fit as the sum of their runs' ranks otherwise. */
static int second_run(text_table *t, const char *what, int first, char *err, size_t errlen) {
    snprintf(err, errlen,
             "'%s' holds more than one run (%s at line %d, the first at line %d): give one run's output "
             "(split a log that several runs were appended to)",
             t->path, what, t->lineno, first);
    return -1;
}

/* A "#  Rank N ... on HOST ..." line of the run's head: counted, its host noted. */
static int text_rank(text_table *t, char **tok, int nt, int k, char *err, size_t errlen) {
    if (t->header_line) return second_run(t, "a '#  Rank' line after the table", t->header_line, err, errlen);
    if (k + 1 < nt && strcmp(tok[k + 1], "0") == 0) {
        if (t->rank0_line) return second_run(t, "a second '#  Rank 0' line", t->rank0_line, err, errlen);
        t->rank0_line = t->lineno;
    }
    t->nranks++;
    for (int i = k; i + 1 < nt; i++)
        if (strcmp(tok[i], "on") == 0) {
            int dup = 0;
            for (int j = 0; j < t->nseen && !dup; j++) dup = strcmp(t->seen[j], tok[i + 1]) == 0;
            if (!dup) {
                if (t->nseen == t->capseen) {
                    t->capseen = t->capseen ? 2 * t->capseen : 64;
                    t->seen = realloc(t->seen, (size_t)t->capseen * sizeof *t->seen);
                    if (!t->seen) TB_FATAL("out of host memory");
                }
                t->seen[t->nseen] = strdup(tok[i + 1]);
                if (!t->seen[t->nseen++]) TB_FATAL("out of host memory");
            }
            break;
        }
    return 0;
}

/* A comment line: a run's first line, a rank line, or the table's header
 * ("# size count type redop [root] time algbw busbw #wrong ..."). */
static int text_comment(text_table *t, const char *line, char **tok, int nt, char *err, size_t errlen) {
    int k = strcmp(tok[0], "#") == 0 ? 1 : 0;
    if (strstr(line, "# trainbench allreduce-bench:") == line || strstr(line, "# Collective test starting:") == line) {
        if (t->start_line) return second_run(t, "a second run's first line", t->start_line, err, errlen);
        t->start_line = t->lineno;
    }
    /* "#  Rank  0 on host ..." (trainbench) or "#  Rank  0 Group 0 Pid 1 on host ..." (nccl-tests) */
    if (k < nt && strcmp(tok[k], "Rank") == 0) return text_rank(t, tok, nt, k, err, errlen);
    /* nccl-tests names its test: all_gather_perf's times are no all-reduce's */
    const char *coll = strstr(line, "# Collective test starting:");
    if (coll == line && k + 3 < nt && !strstr(tok[k + 3], "all_reduce")) {
        snprintf(err, errlen,
                 "'%s' line %d: the output of nccl-tests' %s, not all_reduce_perf: its times are not all-reduces'; "
                 "fit all_reduce_perf's output or trainbench allreduce-bench's",
                 t->path, t->lineno, tok[k + 3]);
        return -1;
    }
    /* the footer of a run whose check failed (trainbench's and nccl-tests'): "# Out of bounds values : 3 FAILED" */
    const char *oob = strstr(line, "Out of bounds values");
    if (oob && strstr(oob, "FAILED")) {
        snprintf(err, errlen,
                 "'%s' line %d: the run reports wrong values (%.*s): its times cannot describe a fabric; fit a run "
                 "that reports 'Out of bounds values : 0 OK'",
                 t->path, t->lineno, (int)strcspn(oob, "\r\n"), oob);
        return -1;
    }
    if (k >= nt || strcmp(tok[k], "size") != 0) return 0;
    int tc = -1;
    for (int i = k; i < nt && tc < 0; i++)
        if (strcmp(tok[i], "time") == 0) tc = i - k;
    if (tc < 0) return 0;
    if (t->header_line) return second_run(t, "a second table header", t->header_line, err, errlen);
    t->header_line = t->lineno;
    t->size_col = 0;
    t->time_col = tc;
    for (int i = k; i < nt; i++) {
        if (strcmp(tok[i], "redop") == 0 && t->redop_col < 0) t->redop_col = i - k;
        if (strcmp(tok[i], "root") == 0 && t->root_col < 0) t->root_col = i - k;
        if (strcmp(tok[i], "#wrong") == 0 && t->nwrong < 4) t->wrong_col[t->nwrong++] = i - k;
    }
    return 0;
}

/* A row of the table: bytes and time noted; -1 (the line in err) for a
 * row of another collective or of wrong sums. */
static int text_row(text_table *t, char **tok, int nt, char *err, size_t errlen) {
    if (t->time_col < 0 || nt <= t->time_col) return 0;
    char *e1, *e2;
    double bytes = strtod(tok[t->size_col], &e1), us = strtod(tok[t->time_col], &e2);
    if (*e1 || *e2 || !isdigit((unsigned char)tok[t->size_col][0])) return 0;
    /* nccl-tests' all_gather_perf, broadcast_perf, alltoall_perf ... reduce nothing: redop "none" */
    if (t->redop_col >= 0 && t->redop_col < nt && strcmp(tok[t->redop_col], "none") == 0) {
        snprintf(err, errlen,
                 "'%s' line %d: redop 'none', a collective that reduces nothing (nccl-tests' all_gather_perf, "
                 "broadcast_perf, ...), not an all-reduce; fit all_reduce_perf's output or trainbench "
                 "allreduce-bench's",
                 t->path, t->lineno);
        return -1;
    }
    /* nccl-tests' reduce_perf sums too, to one root: an all-reduce's root is -1 */
    if (t->root_col >= 0 && t->root_col < nt && strcmp(tok[t->root_col], "-1") != 0) {
        snprintf(err, errlen,
                 "'%s' line %d: root %s, a rooted collective (nccl-tests' reduce_perf), not an all-reduce (root "
                 "-1); fit all_reduce_perf's output or trainbench allreduce-bench's",
                 t->path, t->lineno, tok[t->root_col]);
        return -1;
    }
    for (int i = 0; i < t->nwrong; i++) { /* "N/A": not checked (-c 0) */
        const char *w = t->wrong_col[i] < nt ? tok[t->wrong_col[i]] : "N/A";
        if (strcmp(w, "N/A") == 0 || strtod(w, NULL) == 0) continue;
        snprintf(err, errlen,
                 "'%s' line %d: %s wrong elements (#wrong) at %.0f bytes: the run's sums were wrong, so its times "
                 "cannot describe a fabric; fit a run that reports 0 wrong elements",
                 t->path, t->lineno, w, bytes);
        return -1;
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->out = realloc(t->out, (size_t)t->cap * sizeof *t->out);
        if (!t->out) TB_FATAL("out of host memory");
    }
    t->out[t->n].bytes = bytes;
    t->out[t->n].seconds = 1e-6 * us;
    t->n++;
    return 0;
}

static int read_bench_text(const char *path, tb_ar_sample **out, int *ranks, int *hosts, char *err,
                           size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read all-reduce table '%s': %s", path, strerror(errno));
        return -1;
    }
    text_table t;
    memset(&t, 0, sizeof t);
    t.path = path;
    t.size_col = t.time_col = t.redop_col = t.root_col = -1;
    char line[4096], copy[4096];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        t.lineno++;
        snprintf(copy, sizeof copy, "%s", line);
        char *tok[64];
        int nt = tokens(copy, tok, 64);
        if (nt == 0) continue;
        if (tok[0][0] == '#') rc = text_comment(&t, line, tok, nt, err, errlen);
        else rc = text_row(&t, tok, nt, err, errlen);
    }
    fclose(f);
    for (int i = 0; i < t.nseen; i++) free(t.seen[i]);
    free(t.seen);
    if (rc == 0 && (t.time_col < 0 || t.n == 0 || t.nranks < 2)) {
        snprintf(err, errlen,
                 "'%s' is not an all-reduce table: expected the console output of 'trainbench "
                 "allreduce-bench' or nccl-tests' all_reduce_perf (a '# size ... time' header, "
                 "'#  Rank N' lines for 2 or more ranks, and rows); found %d rank line%s, %d row%s",
                 path, t.nranks, t.nranks == 1 ? "" : "s", t.n, t.n == 1 ? "" : "s");
        rc = -1;
    }
    if (rc != 0) {
        free(t.out);
        return -1;
    }
    for (int i = 0; i < t.n; i++) t.out[i].ranks = t.nranks;
    *out = t.out;
    *ranks = t.nranks;
    *hosts = t.nseen;
    return t.n;
}

int tb_fabric_read_bench(const char *path, tb_ar_sample **out, int *ranks, int *hosts, char *err,
                         size_t errlen) {
    *out = NULL;
    *ranks = *hosts = 0;
    if (is_hdf5(path)) return read_bench_h5(path, out, ranks, hosts, err, errlen);
    return read_bench_text(path, out, ranks, hosts, err, errlen);
}
