/* device_map.c - the device rule and its launch mistakes (see device_map.h). */
#include "comm/device_map.h"

#include "comm/nccl.h" /* tb_nccl_version_parts */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tb_device_for_local_rank(int local_rank, int devices) {
    if (devices < 1 || local_rank < 0) return -1;
    return local_rank % devices;
}

static int is_gpu(const tb_devmap_row *r) { return strncmp(r->key, "gpu:", 4) == 0; }

int tb_device_map_check(const tb_devmap_row *rows, int n, int allow_shared_gpu, char *why, size_t len) {
    why[0] = '\0';
    for (int r = 0; r < n; r++) {
        const tb_devmap_row *b = &rows[r];
        if (!b->key[0]) continue;
        for (int q = 0; q < r; q++) {
            const tb_devmap_row *a = &rows[q];
            if (strcmp(a->host, b->host) != 0 || strcmp(a->key, b->key) != 0) continue;
            if (is_gpu(b) && allow_shared_gpu) continue;
            int on_host = 0;
            for (int k = 0; k < n; k++) on_host += strcmp(rows[k].host, b->host) == 0;
            if (is_gpu(b) && a->devices == b->devices && b->devices > 0 && on_host > b->devices &&
                a->device == b->device && a->local_rank % b->devices == b->local_rank % b->devices) {
                snprintf(why, len,
                         "ranks outnumber devices: %d ranks run on %s but they see %d CUDA device%s, so "
                         "device = local rank mod %d puts ranks %d and %d on one GPU (%s); start at most %d "
                         "rank%s per node (mpirun --map-by ppr:%d:node, srun --ntasks-per-node=%d "
                         "--gpus-per-node=%d)%s, or share a GPU on purpose with --comm mpi --share-gpu",
                         on_host, b->host, b->devices, b->devices == 1 ? "" : "s", b->devices, q, r,
                         b->key + 4, b->devices, b->devices == 1 ? "" : "s", b->devices, b->devices, b->devices,
                         b->devices == 1 ? "; or, if the node has more GPUs, every rank was given the same one "
                                           "(CUDA_VISIBLE_DEVICES=0 exported to all): give each rank its own"
                                         : "");
            } else if (is_gpu(b)) {
                snprintf(why, len,
                         "ranks %d and %d on %s share one device (%s): each rank picked its own device "
                         "ordinal (%d and %d of the %d and %d it sees), but both are the same GPU; give each "
                         "rank its own GPU (one rank per GPU: srun --ntasks-per-node=G --gpus-per-node=G; or "
                         "CUDA_VISIBLE_DEVICES per rank), or "
                         "share one on purpose with --comm mpi --share-gpu",
                         q, r, b->host, b->key, a->device, b->device, a->devices, b->devices);
            } else {
                snprintf(why, len,
                         "ranks %d and %d on %s share one device (%s); give each rank its own GPU or cores "
                         "(mpirun --map-by slot:PE=N --bind-to core, or one rank per GPU)",
                         q, r, b->host, b->key);
            }
            return -1;
        }
    }
    return 0;
}

int tb_share_gpu_nccl_verdict(int loaded, const char *multi_rank_env, char *why, size_t len) {
    int major, minor, patch;
    tb_nccl_version_parts(loaded, &major, &minor, &patch);
    if (loaded < TB_NCCL_MULTI_RANK_GPU_CODE) {
        snprintf(why, len,
                 "--share-gpu with --comm nccl: NCCL %d.%d.%d refuses two ranks on one GPU (\"Duplicate GPU "
                 "detected\"); NCCL 2.30 and newer allow it with NCCL_MULTI_RANK_GPU_ENABLE=1 "
                 "(tests/gpu/slim_nccl.sh builds one); this run shows what NCCL %d.%d says",
                 major, minor, patch, major, minor);
        return 0;
    }
    /* NCCL reads the variable as an integer, any non-zero one enables it */
    char *end = NULL;
    long on = multi_rank_env ? strtol(multi_rank_env, &end, 10) : 0;
    if (!multi_rank_env || !multi_rank_env[0] || *end || on == 0) {
        snprintf(why, len,
                 "--share-gpu with --comm nccl: NCCL %d.%d.%d runs several ranks on one GPU only with "
                 "NCCL_MULTI_RANK_GPU_ENABLE=1 (experimental in NCCL; it is %s%s%s; trainbench reads the "
                 "environment, not NCCL's config files): set it for every rank "
                 "(mpirun -x NCCL_MULTI_RANK_GPU_ENABLE=1), or use --comm mpi",
                 major, minor, patch, multi_rank_env ? "'" : "unset", multi_rank_env ? multi_rank_env : "",
                 multi_rank_env ? "'" : "");
        return -1;
    }
    snprintf(why, len,
             "# --share-gpu over NCCL %d.%d.%d (NCCL_MULTI_RANK_GPU_ENABLE=1, experimental in NCCL): the ranks "
             "share one GPU, which time-slices between their processes; the run tests the multi-rank NCCL "
             "path, its bandwidth is not a fabric's",
             major, minor, patch);
    return 1;
}

static int mask_count(const unsigned char *m, size_t len) {
    int c = 0;
    for (size_t b = 0; b < len; b++)
        for (int bit = 0; bit < 8; bit++) c += (m[b] >> bit) & 1;
    return c;
}

int tb_core_default_threads(const tb_core_row *rows, int n, int me, int host_cpus) {
    const tb_core_row *mine = &rows[me];
    int host_ranks = 0, overlapping = 0, cpus = mask_count(mine->mask, sizeof mine->mask);
    for (int q = 0; q < n; q++) {
        if (strcmp(rows[q].host, mine->host) != 0) continue;
        host_ranks++;
        int overlap = q == me;
        for (size_t b = 0; b < sizeof mine->mask && !overlap; b++) overlap = (rows[q].mask[b] & mine->mask[b]) != 0;
        overlapping += overlap;
    }
    int share = host_cpus / host_ranks, t = share;
    if (cpus > 0 && overlapping > 1) t = cpus / overlapping;
    else if (cpus >= share) t = cpus;
    return t > 0 ? t : 1;
}

int tb_core_sharing(const tb_core_row *rows, int n, char *what, size_t len) {
    if (len) what[0] = '\0';
    double worst = 1.0;
    int unknown = -1; /* the first rank of a host whose masks are unknown */
    for (int r = 0; r < n; r++) {
        int first = 1; /* each host once: at its lowest rank */
        for (int q = 0; q < r && first; q++) first = strcmp(rows[q].host, rows[r].host) != 0;
        if (!first) continue;
        unsigned char all[sizeof rows[r].mask] = {0};
        int ranks = 0, threads = 0, cpus = 0;
        for (int q = r; q < n; q++) {
            if (strcmp(rows[q].host, rows[r].host) != 0) continue;
            ranks++;
            threads += rows[q].threads > 0 ? rows[q].threads : 1;
            for (size_t b = 0; b < sizeof all; b++) all[b] |= rows[q].mask[b];
        }
        cpus = mask_count(all, sizeof all);
        if (cpus < 1) {
            if (unknown < 0) unknown = r;
            continue;
        }
        double per = (double)threads / cpus;
        if (per <= worst) continue;
        worst = per;
        snprintf(what, len, "host %s: %d rank%s with %d thread%s in all on %d CPU%s", rows[r].host, ranks,
                 ranks > 1 ? "s" : "", threads, threads > 1 ? "s" : "", cpus, cpus > 1 ? "s" : "");
    }
    if (worst > 1.0) return 1;
    if (unknown < 0) return 0;
    snprintf(what, len, "unknown: the CPUs the ranks of host %s may use could not be read", rows[unknown].host);
    return -1;
}
