/* test_device_map.c - the GPU placement rule and its launch mistakes
 * (comm/device_map.h) on simulated hosts: device counts and PCI bus ids as
 * the ranks would report them.
 *
 *  - device = local rank mod visible devices: 8 ranks on an 8-GPU node,
 *    one device per task (Slurm --gpus-per-task=1), 2 nodes;
 *  - ranks outnumber devices: 3 ranks, 2 GPUs -> ranks 0 and 2 named;
 *  - the same GPU by another route (CUDA_VISIBLE_DEVICES=0 for every rank):
 *    bus ids compared across the host's ranks;
 *  - the same bus id on different hosts is fine; --share-gpu allows GPUs
 *    (not CPU sets) to be shared;
 *  - CPU sets as before;
 *  - --share-gpu over NCCL: the loaded version and NCCL_MULTI_RANK_GPU_ENABLE
 *    decide (below 2.30 NCCL's own refusal, 2.30+ without the variable ours,
 *    with it allowed). */
#include <stdio.h>
#include <string.h>

#include "comm/device_map.h"
#include "tests/tb_test.h"

static const char *const bus[8] = {"0000:18:00.0", "0000:2A:00.0", "0000:3A:00.0", "0000:5D:00.0",
                                   "0000:9A:00.0", "0000:AB:00.0", "0000:BA:00.0", "0000:DB:00.0"};

/* rank r on host, seeing `devices` GPUs whose ordinal i has bus id ids[i]. */
static void gpu_row(tb_devmap_row *row, const char *host, int local, int devices, const char *const *ids) {
    memset(row, 0, sizeof *row);
    snprintf(row->host, sizeof row->host, "%s", host);
    row->local_rank = local;
    row->devices = devices;
    row->device = tb_device_for_local_rank(local, devices);
    snprintf(row->key, sizeof row->key, "gpu:%s", ids[row->device]);
}

static int verdict(const tb_devmap_row *rows, int n, int share, char *why) {
    int rc = tb_device_map_check(rows, n, share, why, 512);
    printf("#   %s\n", rc ? why : "ok");
    return rc;
}

/* rank r of n on host h: threads t, cores [c0, c1] */
static void core_row(tb_core_row *row, const char *h, int t, int c0, int c1) {
    memset(row, 0, sizeof *row);
    snprintf(row->host, sizeof row->host, "%s", h);
    row->threads = t;
    for (int c = c0; c <= c1; c++) row->mask[c / 8] |= (unsigned char)(1u << (c % 8));
}

static void test_core_sharing(void) {
    printf("# CPU backend: ranks sharing CPUs\n");
    tb_core_row c[6];
    char what[160];
    for (int r = 0; r < 4; r++) core_row(&c[r], "vm", 1, 0, 1); /* mpirun --oversubscribe: unbound */
    TB_CHECK(tb_core_sharing(c, 4, what, sizeof what) == 1 &&
                 strcmp(what, "host vm: 4 ranks with 4 threads in all on 2 CPUs") == 0,
             "4 unbound ranks on 2 cores: '%s'", what);
    TB_CHECK(tb_core_sharing(c, 2, what, sizeof what) == 0 && what[0] == '\0', "2 unbound on 2 cores: '%s'", what);
    core_row(&c[0], "vm", 1, 0, 0);
    core_row(&c[1], "vm", 1, 1, 1);
    TB_CHECK(tb_core_sharing(c, 2, what, sizeof what) == 0, "2 ranks bound to a core each: fine");
    core_row(&c[0], "vm", 2, 0, 1);
    core_row(&c[1], "vm", 2, 1, 2);
    TB_CHECK(tb_core_sharing(c, 2, what, sizeof what) == 1 && strstr(what, "4 threads in all on 3 CPUs"),
             "overlapping sets, 2 threads each: '%s'", what);
    /* two hosts: a at 1.5 threads a core, b at 2: b is named */
    core_row(&c[0], "a", 1, 0, 1), core_row(&c[1], "b", 2, 0, 1), core_row(&c[2], "a", 1, 0, 1);
    core_row(&c[3], "a", 1, 0, 1), core_row(&c[4], "b", 2, 0, 1), core_row(&c[5], "x", 1, 0, 0);
    TB_CHECK(tb_core_sharing(c, 6, what, sizeof what) == 1 &&
                 strcmp(what, "host b: 2 ranks with 4 threads in all on 2 CPUs") == 0,
             "the most crowded host: '%s'", what);
    core_row(&c[1], "b", 1, 0, 1), core_row(&c[4], "b", 1, 0, 1);
    TB_CHECK(tb_core_sharing(c, 6, what, sizeof what) == 1 && strstr(what, "host a: 3 ranks"), "a alone: '%s'",
             what);
    /* 4 ranks of 8 threads on one host whose masks could not be read:
     * unknown, not "no", and never a count of 0 CPUs */
    for (int r = 0; r < 4; r++) core_row(&c[r], "blind", 8, 0, -1);
    TB_CHECK(tb_core_sharing(c, 4, what, sizeof what) == -1 &&
                 strcmp(what, "unknown: the CPUs the ranks of host blind may use could not be read") == 0,
             "no mask known: unknown: '%s'", what);
    core_row(&c[4], "vm", 4, 0, 1); /* another host sharing: that verdict wins */
    TB_CHECK(tb_core_sharing(c, 5, what, sizeof what) == 1 && strstr(what, "host vm: 1 rank with 4 threads"),
             "a known host shares: '%s'", what);
    core_row(&c[0], "big", 8, 0, 1023);
    TB_CHECK(tb_core_sharing(c, 1, what, sizeof what) == 0, "1024 cores: fine");
}

/* --threads' default from the ranks' masks */
static void test_default_threads(void) {
    printf("# --threads' default\n");
    tb_core_row c[6];
    for (int r = 0; r < 4; r++) core_row(&c[r], "box", 0, 0, 7); /* docker --cpuset-cpus=0-7 on 64 CPUs */
    core_row(&c[4], "other", 0, 0, 63);
    core_row(&c[5], "other", 0, 0, 63);
    TB_CHECK(tb_core_default_threads(c, 6, 1, 64) == 2, "4 unbound ranks in an 8-CPU set: 2 each, got %d",
             tb_core_default_threads(c, 6, 1, 64));
    TB_CHECK(tb_core_default_threads(c, 6, 4, 64) == 32, "2 unbound ranks on 64 CPUs: 32 each, got %d",
             tb_core_default_threads(c, 6, 4, 64));
    for (int r = 0; r < 4; r++) core_row(&c[r], "vm", 0, 0, 1);
    TB_CHECK(tb_core_default_threads(c, 4, 3, 2) == 1, "4 unbound ranks on 2 CPUs: 1, got %d",
             tb_core_default_threads(c, 4, 3, 2));
    core_row(&c[0], "n", 0, 0, 0), core_row(&c[1], "n", 0, 1, 1); /* mpirun's --bind-to core */
    TB_CHECK(tb_core_default_threads(c, 2, 0, 8) == 4,
             "bound to a core each on 8 CPUs: the host's share (the backend caps it and says how to launch), got %d",
             tb_core_default_threads(c, 2, 0, 8));
    core_row(&c[0], "s", 0, 0, 7), core_row(&c[1], "s", 0, 8, 15); /* srun -n2 --cpus-per-task=8 on 64 CPUs */
    TB_CHECK(tb_core_default_threads(c, 2, 1, 16) == 8, "Slurm's 16 CPUs of the job, 8 a task: 8, got %d",
             tb_core_default_threads(c, 2, 1, 16));
    core_row(&c[0], "pod", 0, 0, 7); /* one rank per container, a set of 8 on 64 online */
    TB_CHECK(tb_core_default_threads(c, 1, 0, 8) == 8, "one rank in a container of 8: 8, got %d",
             tb_core_default_threads(c, 1, 0, 8));
    core_row(&c[0], "k", 0, 0, 31), core_row(&c[1], "k", 0, 0, 31), core_row(&c[2], "k", 0, 32, 63);
    TB_CHECK(tb_core_default_threads(c, 3, 0, 64) == 16 && tb_core_default_threads(c, 3, 2, 64) == 32,
             "np 3 bound to sockets of 32: 16, 16 and 32 (the share, 21, left CPUs idle and oversubscribed one socket)");
    core_row(&c[0], "n", 0, 0, 3), core_row(&c[1], "n", 0, 4, 7); /* --map-by slot:PE=4 */
    TB_CHECK(tb_core_default_threads(c, 2, 1, 8) == 4, "PE=4 each on 8 CPUs: 4, got %d",
             tb_core_default_threads(c, 2, 1, 8));
    core_row(&c[0], "n", 0, 0, -1), core_row(&c[1], "n", 0, 0, -1);
    TB_CHECK(tb_core_default_threads(c, 2, 0, 8) == 4, "no mask: online / ranks, got %d",
             tb_core_default_threads(c, 2, 0, 8));
    core_row(&c[0], "n", 0, 0, 3), core_row(&c[1], "n", 0, 2, 5), core_row(&c[2], "n", 0, 6, 7);
    TB_CHECK(tb_core_default_threads(c, 3, 0, 8) == 2 && tb_core_default_threads(c, 3, 2, 8) == 2,
             "overlapping sets: 4 CPUs / 2 ranks; a set of its own (2): the host's share (8/3)");
}

int main(void) {
    tb_devmap_row rows[16];
    char why[512];

    TB_CHECK(tb_device_for_local_rank(5, 8) == 5 && tb_device_for_local_rank(0, 1) == 0 &&
                 tb_device_for_local_rank(3, 1) == 0 && tb_device_for_local_rank(2, 2) == 0 &&
                 tb_device_for_local_rank(1, 0) == -1,
             "local rank mod devices");

    printf("# 2 nodes x 8 ranks, all 8 GPUs visible\n");
    for (int r = 0; r < 16; r++) gpu_row(&rows[r], r < 8 ? "gpu01" : "gpu02", r % 8, 8, bus);
    TB_CHECK(verdict(rows, 16, 0, why) == 0, "8 ranks on 8 GPUs per node: fine");
    TB_CHECK(rows[13].device == 5, "rank 13 (local 5) takes device 5, got %d", rows[13].device);

    printf("# 8 ranks, one GPU each (--gpus-per-task=1: every rank sees 1 device, its own)\n");
    for (int r = 0; r < 8; r++) {
        const char *mine[1] = {bus[r]};
        gpu_row(&rows[r], "gpu01", r, 1, mine);
    }
    TB_CHECK(verdict(rows, 8, 0, why) == 0, "one device per task: fine");
    TB_CHECK(rows[7].device == 0, "each rank uses ordinal 0 of its one device");

    printf("# 3 ranks on a host showing them 2 GPUs\n");
    for (int r = 0; r < 3; r++) gpu_row(&rows[r], "gpu01", r, 2, bus);
    TB_CHECK(verdict(rows, 3, 0, why) != 0 && strstr(why, "ranks outnumber devices: 3 ranks run on gpu01") &&
                 strstr(why, "ranks 0 and 2 on one GPU (0000:18:00.0)") && strstr(why, "at most 2 ranks per node"),
             "ranks outnumber devices: '%s'", why);
    TB_CHECK(verdict(rows, 3, 1, why) == 0, "--share-gpu: 3 ranks on 2 GPUs allowed");

    printf("# 2 ranks, one GPU (the lent machine): refused, or shared on purpose\n");
    for (int r = 0; r < 2; r++) gpu_row(&rows[r], "h100", r, 1, bus);
    TB_CHECK(verdict(rows, 2, 0, why) != 0 && strstr(why, "ranks outnumber devices: 2 ranks run on h100") &&
                 strstr(why, "--comm mpi --share-gpu"),
             "2 ranks on 1 GPU: '%s'", why);
    TB_CHECK(verdict(rows, 2, 1, why) == 0, "--share-gpu: allowed");

    printf("# CUDA_VISIBLE_DEVICES=0 exported to all 4 ranks of an 8-GPU node\n");
    for (int r = 0; r < 4; r++) {
        const char *only0[1] = {bus[0]};
        gpu_row(&rows[r], "gpu01", r, 1, only0);
    }
    /* each sees one device, 4 ranks > 1 device: reported as outnumbering, naming this cause too */
    TB_CHECK(verdict(rows, 4, 0, why) != 0 && strstr(why, "ranks 0 and 1") && strstr(why, "0000:18:00.0") &&
                 strstr(why, "CUDA_VISIBLE_DEVICES=0 exported to all"),
             "same GPU for every rank: '%s'", why);

    printf("# two ranks with different device counts that land on one GPU\n");
    gpu_row(&rows[0], "gpu01", 0, 2, bus);            /* sees 2, takes ordinal 0 = 18:00 */
    {
        const char *only0[1] = {bus[0]};
        gpu_row(&rows[1], "gpu01", 1, 1, only0);      /* sees only 18:00 */
    }
    TB_CHECK(verdict(rows, 2, 0, why) != 0 && strstr(why, "ranks 0 and 1 on gpu01 share one device (gpu:0000:18:00.0)") &&
                 strstr(why, "both are the same GPU"),
             "another route to one GPU: '%s'", why);

    printf("# the same bus id on two hosts\n");
    gpu_row(&rows[0], "gpu01", 0, 1, bus);
    gpu_row(&rows[1], "gpu02", 0, 1, bus);
    TB_CHECK(verdict(rows, 2, 0, why) == 0, "the same bus id on different hosts is fine");

    printf("# CPU backend: bound CPU sets\n");
    memset(rows, 0, 2 * sizeof rows[0]);
    for (int r = 0; r < 2; r++) {
        snprintf(rows[r].host, sizeof rows[r].host, "node1");
        rows[r].local_rank = r;
        rows[r].device = -1;
        snprintf(rows[r].key, sizeof rows[r].key, "cpus:0");
    }
    TB_CHECK(verdict(rows, 2, 0, why) != 0 && strstr(why, "ranks 0 and 1 on node1 share one device (cpus:0)"),
             "shared CPU set: '%s'", why);
    TB_CHECK(verdict(rows, 2, 1, why) != 0, "--share-gpu does not allow shared CPU sets");
    rows[0].key[0] = rows[1].key[0] = '\0';
    TB_CHECK(verdict(rows, 2, 0, why) == 0, "unbound ranks: nothing to compare");

    /* --share-gpu over NCCL */
    char w[512];
    TB_CHECK(tb_share_gpu_nccl_verdict(22809, "1", w, sizeof w) == 0 && strstr(w, "NCCL 2.28.9 refuses") &&
                 strstr(w, "Duplicate GPU detected"),
             "NCCL 2.28.9: NCCL's refusal, announced: '%s'", w);
    TB_CHECK(tb_share_gpu_nccl_verdict(22999, NULL, w, sizeof w) == 0, "2.29.99 is before 2.30");
    TB_CHECK(tb_share_gpu_nccl_verdict(23007, NULL, w, sizeof w) == -1 && strstr(w, "NCCL 2.30.7") &&
                 strstr(w, "it is unset") && strstr(w, "mpirun -x NCCL_MULTI_RANK_GPU_ENABLE=1"),
             "2.30.7 without the variable: refused: '%s'", w);
    TB_CHECK(tb_share_gpu_nccl_verdict(23007, "0", w, sizeof w) == -1 && strstr(w, "it is '0'"),
             "2.30.7 with the variable 0: refused: '%s'", w);
    TB_CHECK(tb_share_gpu_nccl_verdict(23000, "yes", w, sizeof w) == -1, "not an integer: refused");
    TB_CHECK(tb_share_gpu_nccl_verdict(23000, "", w, sizeof w) == -1, "empty: refused");
    TB_CHECK(tb_share_gpu_nccl_verdict(23000, "2", w, sizeof w) == 1, "any non-zero integer, as NCCL reads it");
    TB_CHECK(tb_share_gpu_nccl_verdict(23000, "1", w, sizeof w) == 1 && strstr(w, "NCCL 2.30.0") &&
                 strstr(w, "not a fabric's"),
             "2.30.0 with the variable: allowed: '%s'", w);
    TB_CHECK(tb_share_gpu_nccl_verdict(23203, "1", w, sizeof w) == 1, "2.32.3 with the variable: allowed");
    test_core_sharing();
    test_default_threads();
    return tb_test_exit("device_map");
}
