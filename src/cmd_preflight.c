/* cmd_preflight.c - `trainbench preflight`: find a bad node before a long
 * run. Under the same launcher as the training job:
 *
 * 1. roll call: rank 0 collects every rank's row point to point with a
 *    deadline, so a dead or hung rank is named instead of hanging the job;
 * 2. the launch checks (launch_check.h): singleton trap, shared devices,
 *    different binaries/versions/libraries/arguments, NCCL/UCX variables;
 * 3. a per-rank table: host, local rank, device, binding or PCI bus id,
 *    versions, and the NCCL/UCX/MPI/threading environment;
 * 4. one timed all-reduce over all ranks with a deadline, checked element by
 *    element, reported as nccl-tests does (algbw, busbw, #wrong).
 * Exit 0 only when all of it passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "data/jpeg.h"
#include "model/backend.h"
#include "src/cli.h"
#include "src/commands.h"
#include "src/faults.h"
#include "src/h5io.h"
#include "src/launch_check.h"
#include "src/core/log.h"
#include "src/core/version.h"

typedef struct {
    char host[64];
    int local_rank, local_size;
    char device[128];
    char key[64];
    char versions[256];
    char env[1024];
} pf_row;

/* Test-only fault injection (faults.h): TB_TEST_FAULT=hang-rollcall:R or
 * hang-allreduce:R makes rank R stop answering at that point. */
static void maybe_hang(const char *where, int rank) {
    char kind[32];
    snprintf(kind, sizeof kind, "hang-%s", where);
    if (!tb_fault(kind, rank, -1)) return;
    struct timespec ts = {3600, 0};
    nanosleep(&ts, NULL);
}

int tb_cmd_preflight(int argc, char **argv) {
    double timeout = 60;
    size_t bytes = (size_t)64 << 20;
    char backend[TB_OPT_STR_MAX] = "auto";
    int threads = 0;
    const tb_opt opts[] = {
        {"timeout", TB_OPT_DOUBLE, &timeout, 0.1, 86400, NULL, "seconds to wait for a rank or the all-reduce"},
        {"bytes", TB_OPT_SIZE, &bytes, 4, 1e11, NULL, "size of the timed all-reduce"},
        {"backend", TB_OPT_CHOICE, backend, 0, 0, "cpu|cuda|auto", "device to report"},
        {"threads", TB_OPT_INT, &threads, 0, 4096, NULL, "CPU threads (0: cores / ranks on the host)"},
        {NULL, 0, NULL, 0, 0, NULL, NULL},
    };
    tb_cli_parse("preflight", "[mpirun -np N] trainbench preflight [options]", argc, argv, opts);

    tb_comm_info info;
    tb_comm_init(&argc, &argv, &info);
    tb_launch_check_singleton(&info);
    tb_comm *w = tb_comm_world();

    tb_backend_opts bo = {.threads = threads, .device = info.local_rank};
    char err[256];
    tb_backend *be = tb_backend_create(backend, &bo, err, sizeof err);
    if (!be) tb_die("preflight: %s", err);

    /* 1. roll call */
    pf_row me;
    memset(&me, 0, sizeof me);
    snprintf(me.host, sizeof me.host, "%s", info.host);
    me.local_rank = info.local_rank;
    me.local_size = info.local_size;
    snprintf(me.device, sizeof me.device, "%.16s: %.100s", be->name, be->device);
    snprintf(me.key, sizeof me.key, "%s", be->device_key[0] ? be->device_key : "-");
    char mpi[128], h5[32];
    tb_comm_library_version(mpi, sizeof mpi);
    tb_h5_library_version(h5, sizeof h5);
    snprintf(me.versions, sizeof me.versions, "trainbench %.16s (%.24s), %.40s, HDF5 %.12s, %.24s, %.100s",
             tb_version_string, tb_git_revision, mpi, h5, tb_jpeg_version(), be->versions);
    tb_launch_env(me.env, sizeof me.env, 1);
    maybe_hang("rollcall", info.rank);
    pf_row *rows = calloc((size_t)info.world, sizeof *rows);
    int *arrived = calloc((size_t)info.world, sizeof *arrived);
    int missing = tb_comm_roll_call(w, &me, rows, sizeof me, timeout, arrived);
    if (info.rank == 0 && missing > 0) {
        char list[1024] = "";
        size_t used = 0;
        for (int r = 0; r < info.world && used < sizeof list; r++)
            if (!arrived[r]) used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", used ? ", " : "", r);
        tb_die("preflight: rank%s %s did not answer within %g s (%s never reported): check %s, then "
               "rerun",
               missing > 1 ? "s" : "", list, timeout, missing > 1 ? "their hosts" : "its host",
               missing > 1 ? "those nodes" : "that node");
    }

    /* 2. launch mistakes (a collective: everyone answered) */
    tb_launch_check_ranks(&info, be, "preflight", argc, argv);

    /* 3. the table */
    if (info.rank == 0) {
        int hosts = 0;
        for (int r = 0; r < info.world; r++) {
            int seen = 0;
            for (int q = 0; q < r; q++) seen |= strcmp(rows[q].host, rows[r].host) == 0;
            hosts += !seen;
        }
        printf("# trainbench preflight: %d rank%s on %d host%s\n#\n", info.world, info.world > 1 ? "s" : "",
               hosts, hosts > 1 ? "s" : "");
        printf("# %4s  %-16s %7s  %-40s %-16s\n", "rank", "host", "local", "device", "bus id / cpus");
        for (int r = 0; r < info.world; r++)
            printf("  %4d  %-16s %3d/%-3d  %-40.40s %-16s\n", r, rows[r].host, rows[r].local_rank,
                   rows[r].local_size, rows[r].device, rows[r].key);
        printf("#\n# versions (identical on every rank: the launch check compared them)\n#   %s\n",
               rows[0].versions);
        printf("#\n# environment (NCCL_*, UCX_*, OMPI_MCA_*, CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS)\n");
        for (int r = 0; r < info.world; r++)
            printf("#   rank %d: %s\n", r, rows[r].env[0] ? rows[r].env : "(none set)");
        fflush(stdout);
    }

    /* 4. one timed, checked all-reduce */
    size_t count = bytes / sizeof(float);
    float *buf = malloc(count * sizeof *buf);
    if (!buf) tb_die("preflight: cannot allocate %zu bytes for the all-reduce; lower --bytes", bytes);
    for (size_t i = 0; i < count; i++) buf[i] = (float)((i + (size_t)info.rank) % 32);
    maybe_hang("allreduce", info.rank);
    double secs = 0;
    if (tb_comm_allreduce_sum_timeout(w, buf, count, TB_FLOAT32, timeout, &secs) != 0)
        tb_die("preflight: the all-reduce of %zu bytes did not finish within %g s: a rank or the "
               "interconnect between them is stuck; run preflight on subsets of the hosts to find it",
               bytes, timeout);
    long long wrong = 0;
    for (size_t i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < info.world; r++) want += (double)((i + (size_t)r) % 32);
        wrong += buf[i] != (float)want;
    }
    int64_t totals[1] = {wrong};
    tb_comm_allreduce_sum(w, totals, 1, TB_INT64);
    tb_comm_allreduce_max(w, &secs, 1, TB_FLOAT64);
    if (info.rank == 0) {
        double algbw = (double)bytes / secs * 1e-9;
        double busbw = algbw * (info.world > 1 ? 2.0 * (info.world - 1) / info.world : 0.0);
        printf("#\n# all-reduce: %zu bytes float32 sum over %d ranks in %.3f ms, algbw %.3f GB/s, "
               "busbw %.3f GB/s, #wrong %lld\n",
               bytes, info.world, secs * 1e3, algbw, busbw, (long long)totals[0]);
        printf("# preflight: %s\n", totals[0] ? "FAILED (wrong all-reduce results)" : "OK");
    }
    free(buf);
    free(rows);
    free(arrived);
    be->destroy(be);
    int rc = totals[0] ? 1 : 0;
    tb_comm_finalize();
    return rc;
}
