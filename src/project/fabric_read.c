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

static int read_bench_text(const char *path, tb_ar_sample **out, int *ranks, int *hosts, char *err,
                           size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read all-reduce table '%s': %s", path, strerror(errno));
        return -1;
    }
    char line[4096], copy[4096], seen[64][64];
    int time_col = -1, size_col = -1, nranks = 0, nseen = 0, n = 0, cap = 0;
    *out = NULL;
    while (fgets(line, sizeof line, f)) {
        snprintf(copy, sizeof copy, "%s", line);
        char *tok[64];
        int nt = tokens(copy, tok, 64);
        if (nt == 0) continue;
        if (tok[0][0] == '#') {
            /* "#  Rank  0 on host ..." (trainbench) or "#  Rank  0 Group 0 Pid 1 on host ..." */
            int k = strcmp(tok[0], "#") == 0 ? 1 : 0;
            if (k < nt && strcmp(tok[k], "Rank") == 0) {
                nranks++;
                for (int i = k; i + 1 < nt; i++)
                    if (strcmp(tok[i], "on") == 0) {
                        int dup = 0;
                        for (int j = 0; j < nseen; j++) dup |= strcmp(seen[j], tok[i + 1]) == 0;
                        if (!dup && nseen < 64) snprintf(seen[nseen++], sizeof seen[0], "%s", tok[i + 1]);
                        break;
                    }
            }
            if (time_col < 0) { /* the header: "# size count type redop [root] time algbw ..." */
                int sc = -1, tc = -1;
                for (int i = k; i < nt; i++) {
                    if (sc < 0 && strcmp(tok[i], "size") == 0) sc = i - k;
                    if (tc < 0 && strcmp(tok[i], "time") == 0) tc = i - k;
                }
                if (sc >= 0 && tc > sc) {
                    size_col = sc;
                    time_col = tc;
                }
            }
            continue;
        }
        if (time_col < 0 || nt <= time_col) continue;
        char *e1, *e2;
        double bytes = strtod(tok[size_col], &e1), us = strtod(tok[time_col], &e2);
        if (*e1 || *e2 || !isdigit((unsigned char)tok[size_col][0])) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            *out = realloc(*out, (size_t)cap * sizeof **out);
            if (!*out) TB_FATAL("out of host memory");
        }
        (*out)[n].bytes = bytes;
        (*out)[n].seconds = 1e-6 * us;
        n++;
    }
    fclose(f);
    if (time_col < 0 || n == 0 || nranks < 2) {
        free(*out);
        *out = NULL;
        snprintf(err, errlen,
                 "'%s' is not an all-reduce table: expected the console output of 'trainbench "
                 "allreduce-bench' or nccl-tests' all_reduce_perf (a '# size ... time' header, "
                 "'#  Rank N' lines for 2 or more ranks, and rows); found %d rank line%s, %d row%s",
                 path, nranks, nranks == 1 ? "" : "s", n, n == 1 ? "" : "s");
        return -1;
    }
    for (int i = 0; i < n; i++) (*out)[i].ranks = nranks;
    *ranks = nranks;
    *hosts = nseen;
    return n;
}

int tb_fabric_read_bench(const char *path, tb_ar_sample **out, int *ranks, int *hosts, char *err,
                         size_t errlen) {
    *out = NULL;
    *ranks = *hosts = 0;
    if (is_hdf5(path)) return read_bench_h5(path, out, ranks, hosts, err, errlen);
    return read_bench_text(path, out, ranks, hosts, err, errlen);
}
