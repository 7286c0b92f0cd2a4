/* test_fabric_read.c - the all-reduce tables that `project --fabric fit:`
 * reads (src/project/fabric_read.c): trainbench's console table and
 * nccl-tests' all_reduce_perf output (written here from nccl-tests' own
 * format strings, src/util.cu: writeDeviceReport, writeResultHeader,
 * writeBenchmarkLinePreamble/Body, writeResultFooter) give the ranks,
 * hosts and timings the fit needs; a file that holds more than one run is
 * refused, not read as one run of all their ranks.
 *
 *   test_fabric_read TMPDIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/project/fabric.h"
#include "src/project/projection.h"
#include "tests/tb_test.h"

static const char *g_tmp = ".";

static double ring_time(int n, double bytes, double alpha, double bw) {
    return 2.0 * (n - 1) * alpha + 2.0 * (n - 1) / n * bytes / bw;
}

/* A run of nccl-tests' all_reduce_perf (or another of its tests: prog, redop) on `ranks` ranks of one host,
 * 8 B to 128 MiB by 8, alpha 3 us and 360 GB/s; every row's two #wrong are `wrong` ("0", "N/A"), but the
 * 4th row's out-of-place one is `bad` when given; the footer counts `oob` wrong values. Appends to text. */
typedef struct {
    const char *prog, *redop, *wrong, *bad;
    int ranks, oob;
    const char *root; /* the root column's value; NULL: -1 (an all-reduce) */
} nccl_run;

static size_t nccl_text(char *text, size_t len, size_t used, const nccl_run *r) {
#define ADD(...) used += (size_t)snprintf(text + used, len - used, __VA_ARGS__)
    ADD("# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803\n");
    ADD("# Collective test starting: %s\n", r->prog);
    ADD("# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d iters: %d agg iters: %d "
        "validation: %d graph: %d unalign: %d\n#\n# Using devices\n",
        1, 1, 8L, 134217728L, 8L, "factor", 1, 20, 1, 1, 0, 0);
    for (int k = 0; k < r->ranks; k++)
        ADD("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n", k, 0, 4242 + k, "node07", k, 0,
            0x1b + k, 0, "NVIDIA H100 80GB HBM3");
    ADD("#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "",
        "", "");
    ADD("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type", "redop",
        "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", 0, "");
    ADD("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "", "",
        "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", 0, "");
    int row = 0;
    for (long b = 8; b <= 134217728; b *= 8, row++) {
        double us = 1e6 * ring_time(r->ranks, (double)b, 3e-6, 3.6e11);
        const char *w1 = row == 3 && r->bad ? r->bad : r->wrong;
        ADD("%12li  %12li  %8s  %6s  %6s", b, b / 4, "float", r->redop, r->root ? r->root : "-1");
        ADD("  %7.2f  %6.2f  %6.2f  %6s", us, b / us * 1e-3, 0.0, w1);
        ADD("  %7.2f  %6.2f  %6.2f  %6s\n", us, b / us * 1e-3, 0.0, r->wrong);
    }
    ADD("# %-20s : %d %s\n", "Out of bounds values", r->oob, r->oob ? "FAILED" : "OK");
    ADD("# %-20s : %g %s\n#\n# Collective test concluded: %s\n", "Avg bus bandwidth", 100.0, "", r->prog);
#undef ADD
    return used;
}

/* trainbench allreduce-bench's table on `ranks` ranks, one a host: 10 us, 2 GB/s; root: its root column (-1)
 * or, 0, the older layout without it; `wrong`: every row's #wrong ("0", "N/A"), the 2nd row's `bad` when given.
 * Appends to text. */
static size_t tb_text(char *text, size_t len, size_t used, int ranks, int root, const char *wrong,
                      const char *bad) {
#define ADD(...) used += (size_t)snprintf(text + used, len - used, __VA_ARGS__)
    ADD("# trainbench allreduce-bench: %d ranks, path mpi-host (Open MPI v4.1.4), in place, float sum\n", ranks);
    for (int k = 0; k < ranks; k++) ADD("#  Rank %2d on tbh%d\n", k, k + 1);
    ADD("#\n# %12s %12s %7s %7s %s%10s %8s %8s %7s\n", "size", "count", "type", "redop", root ? "   root " : "",
        "time", "algbw", "busbw", "#wrong");
    ADD("# %12s %12s %7s %7s %s%10s %8s %8s %7s\n", "(B)", "(elements)", "", "", root ? "        " : "", "(us)",
        "(GB/s)", "(GB/s)", "");
    int row = 0;
    for (double b = 1024; b <= 16777216; b *= 4, row++) {
        ADD("  %12.0f %12.0f %7s %7s ", b, b / 4, "float", "sum");
        if (root) ADD("%7d ", -1);
        ADD("%10.4f %8.3f %8.3f %7s\n", 1e6 * ring_time(ranks, b, 10e-6, 2e9), 0.0, 0.0,
            row == 1 && bad ? bad : wrong);
    }
    ADD("# Out of bounds values : 0 OK\n");
#undef ADD
    return used;
}

static void test_bench_text(void) {
    char path[1024], err[512], text[8192];
    tb_ar_sample *s;
    int ranks, hosts;
    tb_ab_fit fit;
    /* trainbench's console table, 2 ranks on 2 hosts: 10 us, 2 GB/s */
    int used = snprintf(text, sizeof text,
                        "# trainbench allreduce-bench: 2 ranks, path mpi-host (Open MPI v4.1.4), in place, float sum\n"
                        "#  Rank  0 on tbh1\n#  Rank  1 on tbh2\n#\n"
                        "#         size        count    type   redop       time    algbw    busbw  #wrong\n"
                        "#          (B)   (elements)                       (us)   (GB/s)   (GB/s)\n");
    for (double b = 1024; b <= 16777216; b *= 4)
        used += snprintf(text + used, sizeof text - (size_t)used, "  %12.0f %12.0f   float     sum %10.4f 0 0 0\n",
                         b, b / 4, 1e6 * ring_time(2, b, 10e-6, 2e9));
    snprintf(text + used, sizeof text - (size_t)used, "# Out of bounds values : 0 OK\n");
    snprintf(path, sizeof path, "%s/ar_trainbench.txt", g_tmp);
    tb_test_write_text(path, text);
    int n = tb_fabric_read_bench(path, &s, &ranks, &hosts, err, sizeof err);
    TB_CHECK(n == 8 && ranks == 2 && hosts == 2, "trainbench table: %d rows, %d ranks, %d hosts (%s)", n, ranks, hosts,
             n < 0 ? err : "");
    if (n > 0) {
        TB_CHECK(tb_ab_fit_samples(s, n, &fit, err, sizeof err) == 0, "fit: %s", err);
        TB_CHECK_CLOSE(fit.alpha_s, 10e-6, 0, 1e-5, "alpha from the console table");
        TB_CHECK_CLOSE(fit.bw_GBps, 2.0, 0, 1e-6, "bandwidth from the console table");
        tb_fabric f;
        tb_fabric_from_fit(&f, &fit, ranks, hosts, path);
        TB_CHECK(f.ranks_per_node == 1 && fabs(f.inter_bw_GBps - 2.0) < 1e-5 && fabs(f.alpha_inter_us - 10) < 1e-3,
                 "one rank per host: the network's rates (rpn %d, %g GB/s, %g us)", f.ranks_per_node,
                 f.inter_bw_GBps, f.alpha_inter_us);
    }
    free(s);
    /* nccl-tests' all_reduce_perf: 8 ranks on one node, root column, out-of-place time first */
    used = snprintf(text, sizeof text,
                    "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20\n"
                    "#\n# Using devices\n");
    for (int r = 0; r < 8; r++)
        used += snprintf(text + used, sizeof text - (size_t)used,
                         "#  Rank  %d Group  0 Pid  1234 on     node07 device  %d [0x1b] NVIDIA H100 80GB HBM3\n", r, r);
    used += snprintf(text + used, sizeof text - (size_t)used,
                     "#\n#                                                              out-of-place                       in-place\n"
                     "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
                     "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n");
    for (double b = 8; b <= 134217728; b *= 8)
        used += snprintf(text + used, sizeof text - (size_t)used,
                         "  %12.0f %12.0f     float     sum      -1 %8.3f 0 0 0 99999 0 0 0\n", b, b / 4,
                         1e6 * ring_time(8, b, 3e-6, 3.6e11));
    snprintf(text + used, sizeof text - (size_t)used, "# Out of bounds values : 0 OK\n# Avg bus bandwidth : 100\n");
    snprintf(path, sizeof path, "%s/ar_nccl.txt", g_tmp);
    tb_test_write_text(path, text);
    n = tb_fabric_read_bench(path, &s, &ranks, &hosts, err, sizeof err);
    TB_CHECK(n == 9 && ranks == 8 && hosts == 1, "nccl-tests table: %d rows, %d ranks, %d hosts (%s)", n, ranks, hosts,
             n < 0 ? err : "");
    if (n > 0) {
        TB_CHECK(tb_ab_fit_samples(s, n, &fit, err, sizeof err) == 0, "fit: %s", err);
        TB_CHECK_CLOSE(fit.bw_GBps, 360.0, 0, 1e-3, "bandwidth from nccl-tests' out-of-place column");
        TB_CHECK_CLOSE(fit.alpha_s, 3e-6, 0, 2e-3, "alpha from nccl-tests' table");
        tb_fabric f;
        tb_fabric_from_fit(&f, &fit, ranks, hosts, path);
        TB_CHECK(f.ranks_per_node == 8 && f.intra_bw_GBps > 359 && f.inter_bw_GBps == 0,
                 "one host: the node's rates for the 8 ranks measured, no network (got %d a node)", f.ranks_per_node);
        /* more ranks than the one host measured: refused, naming --ranks-per-node (it projected 4096 ranks "in one
         * node" on the node's links) */
        tb_ar_cost c;
        TB_CHECK(tb_allreduce_cost(&f, 16, 1e8, &c, err, sizeof err) == -1 && strstr(err, "--ranks-per-node"),
                 "16 ranks on a one-host fit of 8: '%s'", err);
        TB_CHECK(tb_allreduce_cost(&f, 8, 1e8, &c, err, sizeof err) == 0, "8 ranks on it: %s", err);
    }
    free(s);
    snprintf(path, sizeof path, "%s/ar_none.txt", g_tmp);
    tb_test_write_text(path, "hello\nworld\n");
    TB_CHECK(tb_fabric_read_bench(path, &s, &ranks, &hosts, err, sizeof err) == -1 &&
                 strstr(err, "is not an all-reduce table"),
             "not a table: '%s'", err);
}


/* Reads text from a file of the test's; the sample count, or -1 with the line in err. */
static int read_text(const char *name, const char *text, tb_ar_sample **s, int *ranks, int *hosts, char *err,
                     size_t errlen) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    tb_test_write_text(path, text);
    *s = NULL;
    return tb_fabric_read_bench(path, s, ranks, hosts, err, errlen);
}

/* Expects the table refused with a line holding `want`. */
static void refused(const char *name, const char *text, const char *want) {
    tb_ar_sample *s;
    int ranks, hosts;
    char err[1024] = "";
    int n = read_text(name, text, &s, &ranks, &hosts, err, sizeof err);
    TB_CHECK(n == -1 && strstr(err, want) && !strchr(err, '\n'),
             "%s: expected one line with '%s', got %d samples of %d ranks: '%s'", name, want, n, ranks, err);
    if (n >= 0) free(s);
}

/* Two runs in one file (a log appended to with tee -a or >>): refused, not read as one run of
 * both runs' ranks (it gave every row 4 ranks for 2 ranks' times: the fitted bandwidth 50 % high). */
static void test_appended_runs(void) {
    static char text[65536];
    size_t used = tb_text(text, sizeof text, 0, 2, 1, "0", NULL);
    tb_text(text, sizeof text, used, 2, 1, "0", NULL);
    refused("ar_two_tb.txt", text, "holds more than one run");
    nccl_run r = {"all_reduce_perf", "sum", "0", NULL, 8, 0, NULL};
    used = nccl_text(text, sizeof text, 0, &r);
    nccl_text(text, sizeof text, used, &r);
    refused("ar_two_nccl.txt", text, "holds more than one run");
    refused("ar_two_nccl.txt", text, "give one run's output");
    /* a second table under one set of rank lines (two sweeps' tables, their heads cut) */
    used = tb_text(text, sizeof text, 0, 2, 1, "0", NULL);
    char *table = strstr(text, "#\n# "); /* the "#" line before the header */
    TB_CHECK(table != NULL, "the trainbench sample has its header");
    if (table) {
        static char twice[65536];
        snprintf(twice, sizeof twice, "%s%s", text, table);
        refused("ar_two_tables.txt", twice, "a second table header");
    }
    /* one run of each is read, ranks counted once */
    tb_ar_sample *s;
    int ranks, hosts;
    char err[1024] = "";
    nccl_text(text, sizeof text, 0, &r);
    int n = read_text("ar_one_nccl.txt", text, &s, &ranks, &hosts, err, sizeof err);
    TB_CHECK(n == 9 && ranks == 8 && hosts == 1, "one nccl-tests run: %d rows, %d ranks, %d hosts (%s)", n, ranks,
             hosts, err);
    tb_ab_fit fit;
    if (n > 0) {
        TB_CHECK(tb_ab_fit_samples(s, n, &fit, err, sizeof err) == 0, "fit: %s", err);
        TB_CHECK_CLOSE(fit.bw_GBps, 360.0, 0, 1e-3, "bandwidth of nccl-tests' table (its format strings)");
        free(s);
    }
}

/* Runs that are no working all-reduce: refused, one line each (the text fit took their times). */
static void test_failed_or_other(void) {
    static char text[65536];
    nccl_run r = {"all_reduce_perf", "sum", "0", "3", 8, 1, NULL}; /* 3 wrong in a row, the footer FAILED */
    nccl_text(text, sizeof text, 0, &r);
    refused("ar_wrong_nccl.txt", text, "3 wrong elements (#wrong) at 4096 bytes");
    r.bad = NULL; /* the footer alone */
    nccl_text(text, sizeof text, 0, &r);
    refused("ar_oob_nccl.txt", text, "reports wrong values (Out of bounds values : 1 FAILED)");
    tb_text(text, sizeof text, 0, 2, 1, "0", "1");
    refused("ar_wrong_tb.txt", text, "1 wrong elements (#wrong) at 4096 bytes");
    tb_text(text, sizeof text, 0, 2, 0, "0", "2"); /* the layout before the root column */
    refused("ar_wrong_tb_old.txt", text, "2 wrong elements (#wrong) at 4096 bytes");
    nccl_run g = {"all_gather_perf", "none", "0", NULL, 8, 0, NULL};
    nccl_text(text, sizeof text, 0, &g);
    refused("ag_nccl.txt", text, "the output of nccl-tests' all_gather_perf, not all_reduce_perf");
    /* an older nccl-tests prints no test name: the redop says it */
    char *start = strstr(text, "# Collective test starting:");
    if (start) memcpy(start, "# Collective_test_starting:", 27);
    refused("ag_nccl_unnamed.txt", text, "redop 'none', a collective that reduces nothing");
    /* reduce_perf sums too, to root 0: unnamed, the root column says it */
    nccl_run rd = {"reduce_perf", "sum", "0", NULL, 8, 0, "0"};
    nccl_text(text, sizeof text, 0, &rd);
    start = strstr(text, "# Collective test starting:");
    if (start) memcpy(start, "# Collective_test_starting:", 27);
    refused("reduce_nccl_unnamed.txt", text, "root 0, a rooted collective (nccl-tests' reduce_perf)");
    /* unchecked runs (-c 0: N/A) are read */
    tb_ar_sample *s;
    int ranks, hosts;
    char err[1024] = "";
    nccl_run na = {"./build/all_reduce_perf", "sum", "N/A", NULL, 4, 0, NULL};
    nccl_text(text, sizeof text, 0, &na);
    int n = read_text("ar_na_nccl.txt", text, &s, &ranks, &hosts, err, sizeof err);
    TB_CHECK(n == 9 && ranks == 4, "an unchecked nccl-tests run: %d rows, %d ranks (%s)", n, ranks, err);
    if (n > 0) free(s);
    tb_text(text, sizeof text, 0, 2, 1, "N/A", NULL);
    n = read_text("ar_na_tb.txt", text, &s, &ranks, &hosts, err, sizeof err);
    TB_CHECK(n == 8 && ranks == 2, "an unchecked trainbench run: %d rows, %d ranks (%s)", n, ranks, err);
    if (n > 0) free(s);
}

/* trainbench's table with its root column (nccl-tests' places: time $6) and without it (older logs): the same fit */
static void test_own_layouts(void) {
    static char text[65536];
    double bw[2] = {0, 0}, alpha[2] = {0, 0};
    for (int root = 0; root < 2; root++) {
        tb_ar_sample *s;
        int ranks, hosts;
        char err[1024] = "";
        tb_text(text, sizeof text, 0, 2, root, "0", NULL);
        int n = read_text(root ? "ar_tb_root.txt" : "ar_tb_noroot.txt", text, &s, &ranks, &hosts, err, sizeof err);
        TB_CHECK(n == 8 && ranks == 2 && hosts == 2, "trainbench table, root column %d: %d rows, %d ranks (%s)", root,
                 n, ranks, err);
        tb_ab_fit fit;
        if (n > 0 && tb_ab_fit_samples(s, n, &fit, err, sizeof err) == 0) {
            bw[root] = fit.bw_GBps;
            alpha[root] = fit.alpha_s;
        }
        if (n > 0) free(s);
    }
    /* hosts counted past 64 (a fixed table of 64 names once gave 128 ranks on 128 hosts as 64 hosts) */
    {
        tb_ar_sample *s;
        int ranks, hosts;
        char err[1024] = "";
        tb_text(text, sizeof text, 0, 128, 1, "0", NULL);
        int n = read_text("ar_tb_128.txt", text, &s, &ranks, &hosts, err, sizeof err);
        TB_CHECK(n == 8 && ranks == 128 && hosts == 128, "128 ranks on 128 hosts: %d rows, %d ranks, %d hosts (%s)", n,
                 ranks, hosts, err);
        if (n > 0) free(s);
    }
    TB_CHECK(fabs(bw[0] - 2.0) < 1e-4 && fabs(bw[1] - 2.0) < 1e-4 && fabs(alpha[0] - 10e-6) < 1e-9 &&
                 fabs(alpha[1] - 10e-6) < 1e-9,
             "both layouts fit 2 GB/s and 10 us: %g, %g GB/s; %g, %g us", bw[0], bw[1], 1e6 * alpha[0], 1e6 * alpha[1]);
}

int main(int argc, char **argv) {
    if (argc > 1) g_tmp = argv[1];
    test_bench_text();
    test_appended_runs();
    test_failed_or_other();
    test_own_layouts();
    return tb_test_exit("test_fabric_read");
}
