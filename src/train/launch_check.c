/* launch_check.c - start-up checks for launch mistakes (see launch_check.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_ISSET */
#include "src/train/launch_check.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/device_map.h"
#include "comm/nccl.h"
#include "core/log.h"
#include "core/version.h"
#include "data/jpeg.h"
#include "src/device/device.h"
#include "src/results/results.h"

extern char **environ;

/* ---- the singleton trap ----------------------------------------------------------------- */

/* The task count a launcher announced, and which variable said so. */
static int launcher_tasks(const char **var) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS",
                                 "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        /* SLURM_NTASKS alone is also set in a batch script outside srun */
        if (i >= 3 && !getenv("SLURM_STEP_ID")) continue;
        if (v && atoi(v) > 1) {
            *var = vars[i];
            return atoi(v);
        }
    }
    return 1;
}

void tb_launch_check_singleton(const tb_comm_info *info) {
    if (info->world > 1) return;
    const char *var = NULL;
    int n = launcher_tasks(&var);
    if (n <= 1) return;
    char mpi[128];
    tb_comm_library_version(mpi, sizeof mpi);
    tb_die("launch mistake: the launcher started %d tasks (%s=%s) but MPI sees a world of 1, so "
           "every task would train alone as rank 0; under Slurm use srun --mpi=pmix, "
           "otherwise the mpirun of the MPI trainbench was built with (%s)",
           n, var, getenv(var), mpi);
}

/* ---- fingerprints ------------------------------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t hash_str(const char *s) { return fnv1a(0xcbf29ce484222325ULL, s, strlen(s)); }

static uint64_t hash_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint64_t h = 0xcbf29ce484222325ULL;
    unsigned char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) h = fnv1a(h, buf, n);
    fclose(f);
    return h;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* NCCL_ and UCX_ settings must agree across ranks (but UCX_NET_DEVICES,
 * which multi-rail wrappers set per rank); with `all`, also the
 * MPI transport choices a user makes (not mpirun's own OMPI_MCA_orte_*,
 * ess, pmix... bookkeeping) and the device and thread selection. */
static int relevant(const char *kv, int all) {
    static const char *const user[] = {"OMPI_MCA_pml", "OMPI_MCA_btl", "OMPI_MCA_mtl", "OMPI_MCA_osc",
                                       "OMPI_MCA_coll", "OMPI_MCA_oob_tcp_if", "OMPI_MCA_hwloc",
                                       "CUDA_VISIBLE_DEVICES=", "OMP_NUM_THREADS="};
    /* each rank its closest NIC: the multi-rail wrappers set it per rank */
    if (strncmp(kv, "UCX_NET_DEVICES=", 16) == 0) return 0;
    if (strncmp(kv, "NCCL_", 5) == 0 || strncmp(kv, "UCX_", 4) == 0) return 1;
    if (!all) return 0;
    for (size_t i = 0; i < sizeof user / sizeof user[0]; i++)
        if (strncmp(kv, user[i], strlen(user[i])) == 0) return 1;
    return 0;
}

void tb_launch_env(char *buf, size_t len, int all_relevant) {
    int n = 0;
    /* what the launch set: trainbench's own defaults (tb_comm_env_defaults) are said apart */
    for (char **e = environ; *e; e++) n += relevant(*e, all_relevant) && !tb_comm_env_ours(*e);
    const char **v = malloc((size_t)(n + 1) * sizeof *v);
    n = 0;
    for (char **e = environ; *e; e++)
        if (relevant(*e, all_relevant) && !tb_comm_env_ours(*e)) v[n++] = *e;
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? " " : "", v[i]);
    free(v);
}

int tb_launch_pick_device(const tb_comm_info *info, const char *backend, int *devices) {
    *devices = 0;
    if (strcmp(backend, "cpu") == 0) return -1;
    int n = tb_gpu_device_count(NULL, 0);
    if (n <= 0) return -1;
    *devices = n;
    return tb_device_for_local_rank(info->local_rank, n);
}

typedef struct {
    char host[64];
    char device_key[64];
    int local_rank, devices, device;
    char version[96];
    char args[256];        /* the start of the command line, for messages */
    uint64_t exe_hash, libs_hash, args_hash, env_hash;
} fingerprint;

/* The first NCCL_/UCX_ variable on which `mine` (this rank's, `who`) and
 * rank 0's list differ, described in buf; 0 when they agree. */
static int env_difference(const char *mine, const char *root, const char *who, char *buf, size_t len) {
    /* both lists are sorted "NAME=value" joined by spaces */
    char *a = strdup(mine), *b = strdup(root);
    char *sa = NULL, *sb = NULL;
    char *x = strtok_r(a, " ", &sa), *y = strtok_r(b, " ", &sb);
    int diff = 0;
    while (x || y) {
        size_t nx = x ? strcspn(x, "=") : 0, ny = y ? strcspn(y, "=") : 0;
        int c = !x ? 1 : !y ? -1 : strncmp(x, y, nx > ny ? nx : ny);
        if (c == 0 && strcmp(x, y) == 0) {
            x = strtok_r(NULL, " ", &sa);
            y = strtok_r(NULL, " ", &sb);
            continue;
        }
        if (c == 0)
            snprintf(buf, len, "%.*s is '%s' on %s but '%s' on rank 0", (int)nx, x, x + nx + 1, who,
                     y + ny + 1);
        else if (c < 0)
            snprintf(buf, len, "%.*s is set on %s (%s) but not on rank 0", (int)nx, x, who, x + nx + 1);
        else
            snprintf(buf, len, "%.*s is set on rank 0 (%s) but not on %s", (int)ny, y, y + ny + 1, who);
        diff = 1;
        break;
    }
    free(a);
    free(b);
    return diff;
}

void tb_launch_check_ranks(const tb_comm_info *info, const tb_backend *be, int devices, int device,
                           int allow_shared_gpu, const char *subcommand, int argc, char **argv) {
    tb_comm *w = tb_comm_world();
    fingerprint me;
    memset(&me, 0, sizeof me);
    snprintf(me.host, sizeof me.host, "%s", info->host);
    if (be) snprintf(me.device_key, sizeof me.device_key, "%s", be->device_key);
    me.local_rank = info->local_rank;
    me.devices = be && strncmp(be->device_key, "gpu:", 4) == 0 ? devices : 0;
    me.device = me.devices ? device : -1;
    snprintf(me.version, sizeof me.version, "%s (%s)", tb_version_string, tb_git_revision);
    me.exe_hash = hash_file("/proc/self/exe");

    char buf[4096];
    size_t used = (size_t)snprintf(buf, sizeof buf, "%s", subcommand);
    for (int i = 0; i < argc && used < sizeof buf; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, " %s", argv[i]);
    snprintf(me.args, sizeof me.args, "%.255s", buf);
    me.args_hash = hash_str(buf);

    char libs[1024];
    char mpi[256], h5[32];
    tb_comm_library_version(mpi, sizeof mpi);
    tb_h5_library_version(h5, sizeof h5);
    int nccl_compiled = 0, nccl_loaded = 0; /* ranks on other NCCL libraries cannot form a communicator */
    if (me.devices) tb_nccl_versions(&nccl_compiled, &nccl_loaded); /* (a CPU run makes none) */
    snprintf(libs, sizeof libs, "%s|%s|%s|%s|NCCL %d", mpi, h5, tb_jpeg_version(), be ? be->versions : "",
             nccl_loaded);
    me.libs_hash = hash_str(libs);

    char env[4096];
    tb_launch_env(env, sizeof env, 0);
    me.env_hash = hash_str(env);

    fingerprint *all = calloc((size_t)info->world, sizeof *all);
    tb_comm_allgather(w, &me, all, sizeof me);

    /* every rank reaches the same verdict from the same data */
    char why[1024] = "";
    for (int r = 0; r < info->world && !why[0]; r++) {
        const fingerprint *f = &all[r], *z = &all[0];
        if (f->exe_hash != z->exe_hash && strcmp(f->version, z->version) == 0)
            snprintf(why, sizeof why,
                     "rank %d on %s runs another trainbench binary than rank 0 on %s (both say %s, "
                     "but the files differ: hash %016llx vs %016llx); install the same build on "
                     "every node",
                     r, f->host, z->host, f->version, (unsigned long long)f->exe_hash,
                     (unsigned long long)z->exe_hash);
        else if (f->exe_hash != z->exe_hash)
            snprintf(why, sizeof why,
                     "rank %d on %s runs trainbench %s, rank 0 on %s runs %s; install the same "
                     "build on every node",
                     r, f->host, f->version, z->host, z->version);
        else if (f->libs_hash != z->libs_hash)
            snprintf(why, sizeof why,
                     "rank %d on %s loaded other MPI, HDF5, libjpeg-turbo, NCCL or compute libraries "
                     "than rank 0 on %s; check LD_LIBRARY_PATH and the installed versions on %s "
                     "(trainbench preflight lists them)",
                     r, f->host, z->host, f->host);
        else if (f->args_hash != z->args_hash)
            snprintf(why, sizeof why,
                     "rank %d on %s was started as '%s' but rank 0 as '%s'; start every rank with the same "
                     "arguments, in the same order (the ranks of one job train one model)",
                     r, f->host, f->args, z->args);
    }
    if (!why[0]) { /* where the devices went (comm/device_map.h) */
        tb_devmap_row *rows = calloc((size_t)info->world, sizeof *rows);
        if (!rows) TB_FATAL("out of host memory");
        for (int r = 0; r < info->world; r++) {
            snprintf(rows[r].host, sizeof rows[r].host, "%s", all[r].host);
            snprintf(rows[r].key, sizeof rows[r].key, "%s", all[r].device_key);
            rows[r].local_rank = all[r].local_rank;
            rows[r].devices = all[r].devices;
            rows[r].device = all[r].device;
        }
        tb_device_map_check(rows, info->world, allow_shared_gpu, why, sizeof why);
        free(rows);
    }
    if (!why[0]) {
        int env_differs = 0;
        for (int r = 1; r < info->world; r++) env_differs |= all[r].env_hash != all[0].env_hash;
        if (env_differs) {
            /* rank 0's list to everyone, each rank's first difference back */
            char own[4096];
            memcpy(own, env, sizeof own);
            tb_comm_bcast(w, env, sizeof env, TB_BYTES, 0);
            char mine[256] = "", *diffs = calloc((size_t)info->world, sizeof mine), who[96];
            snprintf(who, sizeof who, "rank %d (%.64s)", info->rank, info->host);
            env_difference(own, env, who, mine, sizeof mine);
            tb_comm_allgather(w, mine, diffs, sizeof mine);
            for (int r = 1; r < info->world && !why[0]; r++)
                if (diffs[(size_t)r * sizeof mine])
                    snprintf(why, sizeof why,
                             "%s; export NCCL/UCX settings to every rank (mpirun -x NAME, or set "
                             "them in the job script)",
                             diffs + (size_t)r * sizeof mine);
            free(diffs);
        }
    }
    free(all);
    if (why[0]) {
        tb_say_error("launch mistake: %s", why); /* its control characters escaped (an argument's newline) */
        tb_comm_exit_all(w, 1);
    }
}

void tb_launch_check_share_gpu_nccl(const tb_comm_info *info, const char *subcommand) {
    int compiled = 0, loaded = 0;
    tb_nccl_versions(&compiled, &loaded);
    char why[512];
    int v = tb_share_gpu_nccl_verdict(loaded, getenv("NCCL_MULTI_RANK_GPU_ENABLE"), why, sizeof why);
    if (v < 0) {
        tb_say_error("%s: %s", subcommand, why);
        tb_comm_exit_all(tb_comm_world(), 1);
    }
    if (info->rank != 0) return;
    if (v == 0) tb_warn("%s", why);
    else printf("%s\n", why);
    fflush(stdout);
}

int tb_launch_ranks_per_device(const tb_comm_info *info, const tb_backend *be) {
    char mine[128], *all = calloc((size_t)info->world, sizeof mine);
    if (!all) TB_FATAL("out of host memory");
    const char *key = be && be->device_key[0] ? be->device_key : "";
    snprintf(mine, sizeof mine, "%.63s|%.63s", info->host, key);
    tb_comm_allgather(tb_comm_world(), mine, all, sizeof mine);
    int most = 1;
    for (int r = 0; r < info->world; r++) {
        if (!strchr(all + (size_t)r * sizeof mine, '|')[1]) continue; /* no device */
        int n = 0;
        for (int q = 0; q < info->world; q++)
            n += strcmp(all + (size_t)r * sizeof mine, all + (size_t)q * sizeof mine) == 0;
        if (n > most) most = n;
    }
    free(all);
    return most;
}

tb_core_row *tb_launch_cpu_rows(const tb_comm_info *info) {
    tb_core_row me, *all = calloc((size_t)info->world, sizeof me);
    if (!all) TB_FATAL("out of host memory");
    memset(&me, 0, sizeof me);
    snprintf(me.host, sizeof me.host, "%s", info->host);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && c < (int)(8 * sizeof me.mask); c++)
            if (CPU_ISSET(c, &set)) me.mask[c / 8] |= (unsigned char)(1u << (c % 8));
    tb_comm_allgather(tb_comm_world(), &me, all, sizeof me);
    return all;
}

int tb_launch_core_sharing(const tb_comm_info *info, tb_core_row *rows, int threads, char *what, size_t len) {
    int *all = calloc((size_t)info->world, sizeof *all);
    if (!all) TB_FATAL("out of host memory");
    tb_comm_allgather(tb_comm_world(), &threads, all, sizeof threads);
    for (int q = 0; q < info->world; q++) rows[q].threads = all[q];
    free(all);
    return tb_core_sharing(rows, info->world, what, len);
}
