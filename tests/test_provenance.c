/* test_provenance.c - the results file's hostnames and device_names lists
 * (tb_provenance_distinct, src/results/provenance.h): distinct names in
 * rank order with their rank counts; a single device name bare, as a
 * one-model job always recorded it; several devices separated by "; "
 * (a CPU's name holds a comma); and a list longer than its buffer (hosts
 * of a 600-node job in the 4096 bytes an attribute gets) ending in
 * "... and K more" with every name it shows whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/results/provenance.h"
#include "tests/tb_test.h"

#define STRIDE 64

/* world rows of STRIDE chars: name(r) */
static char *rows(int world, const char *(*name)(int, char *)) {
    char *all = calloc((size_t)world, STRIDE);
    if (!all) exit(1);
    for (int r = 0; r < world; r++) {
        char tmp[STRIDE];
        snprintf(all + (size_t)r * STRIDE, STRIDE, "%s", name(r, tmp));
    }
    return all;
}

static const char *same_gpu(int r, char *tmp) {
    (void)r, (void)tmp;
    return "NVIDIA H200";
}
static const char *two_gpus(int r, char *tmp) {
    (void)tmp;
    return r < 3 ? "NVIDIA H100 80GB HBM3" : "NVIDIA H200";
}
static const char *cpus(int r, char *tmp) {
    (void)tmp;
    return r == 0 ? "AMD EPYC 7B13, 1 thread" : "AMD EPYC 7B13, 2 threads";
}
static const char *node(int r, char *tmp) { /* 8 ranks a node */
    snprintf(tmp, STRIDE, "gpu-node-%04d.cluster.example.org", r / 8);
    return tmp;
}

int main(void) {
    char buf[4096];
    char *a = rows(8, same_gpu);
    int k = tb_provenance_distinct(buf, sizeof buf, a, STRIDE, 8, 0);
    TB_CHECK(k == 1 && strcmp(buf, "NVIDIA H200") == 0, "one model: bare (%d, '%s')", k, buf);
    free(a);
    a = rows(5, two_gpus);
    k = tb_provenance_distinct(buf, sizeof buf, a, STRIDE, 5, 0);
    TB_CHECK(k == 2 && strcmp(buf, "NVIDIA H100 80GB HBM3 (3 ranks); NVIDIA H200 (2 ranks)") == 0,
             "two models with their counts (%d, '%s')", k, buf);
    free(a);
    a = rows(3, cpus);
    k = tb_provenance_distinct(buf, sizeof buf, a, STRIDE, 3, 0);
    TB_CHECK(k == 2 && strcmp(buf, "AMD EPYC 7B13, 1 thread (1 rank); AMD EPYC 7B13, 2 threads (2 ranks)") == 0,
             "CPU devices, '; ' between them (%d, '%s')", k, buf);
    free(a);
    a = rows(16, node);
    k = tb_provenance_distinct(buf, sizeof buf, a, STRIDE, 16, 1);
    TB_CHECK(k == 2 && strcmp(buf, "gpu-node-0000.cluster.example.org (8 ranks), "
                                   "gpu-node-0001.cluster.example.org (8 ranks)") == 0,
             "hosts always counted, ', ' between them (%d, '%s')", k, buf);
    free(a);
    /* 600 nodes x 8 ranks: about 26 kB of list for 4096 bytes */
    int world = 600 * 8;
    a = rows(world, node);
    k = tb_provenance_distinct(buf, sizeof buf, a, STRIDE, world, 1);
    const char *tail = strstr(buf, ", ... and ");
    int more = -1, shown = 0;
    if (tail) sscanf(tail, ", ... and %d more", &more);
    for (const char *p = buf; (p = strstr(p, " (8 ranks)")) != NULL; p++) shown++;
    /* every name shown whole: each entry is "gpu-node-NNNN.cluster.example.org (8 ranks)" */
    int whole = 1;
    for (int i = 0; i < shown; i++) {
        char want[96];
        snprintf(want, sizeof want, "gpu-node-%04d.cluster.example.org (8 ranks)", i);
        whole &= strstr(buf, want) != NULL;
    }
    TB_CHECK(k == 600 && strlen(buf) < sizeof buf && tail && more > 0 && shown + more == 600 && shown > 50 && whole,
             "600 hosts in 4096 bytes: %d shown whole, then '... and %d more' (%zu bytes)", shown, more, strlen(buf));
    printf("tail: %s\n", tail ? tail : "(none)");
    free(a);
    return tb_test_exit("provenance");
}
