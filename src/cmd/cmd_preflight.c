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
 *    element, reported as nccl-tests does (algbw, busbw, #wrong): over MPI
 *    on host buffers, or (--comm nccl, the default with a GPU and NCCL) over
 *    NCCL on device buffers. An untimed warm-up all-reduce of the same size
 *    goes first (the first one includes connection setup, buffer
 *    registration and, for NCCL, loading its kernels), then a barrier with
 *    the deadline, so every rank starts the timed one together.
 * With GPUs also: each rank's device is local rank mod the devices it sees,
 * and its bus id goes into the table (two ranks on one GPU are a launch
 * mistake); the NCCL library loaded vs the one compiled against, per rank;
 * the P2P / NVLink topology between the GPUs of each host's ranks (NVML).
 * Exit 0 only when all of it passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "comm/nccl.h"
#include "core/cli.h"
#include "core/cpu_features.h"
#include "core/faults.h"
#include "core/log.h"
#include "core/stall_guard.h"
#include "core/timer.h"
#include "core/version.h"
#include "data/jpeg.h"
#include "model/backend.h"
#include "model/cpu/cpu_blas.h"
#include "src/cmd/commands.h"
#include "src/device/device.h"
#include "src/results/results.h"
#include "src/train/train.h"

typedef struct {
    char host[64];
    int local_rank, local_size;
    char device[128];
    char key[64];
    char versions[256];
    char env[1024];
    char nccl[160];       /* NCCL compiled vs loaded, its verdict ("" without NCCL) */
    char blas[64];        /* BLAS kernels and the CPU's vector level: "SkylakeX (avx512)" */
    int nccl_bad;         /* the verdict is an error */
} pf_row;

/* Test-only fault injection (faults.h): TB_TEST_FAULT=hang-rollcall:R,
 * hang-checks:R (after the roll call, before the launch checks),
 * hang-allreduce:R (before the warm-up) or hang-barrier:R (after the
 * warm-up, before the barrier of the timed all-reduce) makes rank R stop
 * answering at that point. */
static void maybe_hang(const char *where, int rank) {
    char kind[32];
    snprintf(kind, sizeof kind, "hang-%s", where);
    if (!tb_fault(kind, rank, -1)) return;
    struct timespec ts = {3600, 0};
    nanosleep(&ts, NULL);
}

/* This rank's GPU against the GPUs of the lower local ranks on its host
 * (NVML, by PCI bus id): NVLink, P2P reads, common PCIe ancestor; lines
 * for rank 0 to print, "" when there is nothing to say. Collective. */
static void gpu_topology(const tb_comm_info *info, const tb_backend *be, char *out, size_t len) {
    typedef struct {
        char host[64], bus[64];
        int local_rank;
    } who;
    who me;
    memset(&me, 0, sizeof me);
    snprintf(me.host, sizeof me.host, "%s", info->host);
    snprintf(me.bus, sizeof me.bus, "%s", be->device_key + 4);
    me.local_rank = info->local_rank;
    who *all = calloc((size_t)info->world, sizeof *all);
    if (!all) TB_FATAL("out of host memory");
    tb_comm_allgather(tb_comm_world(), &me, all, sizeof me);
    out[0] = '\0';
    char err[256];
    tb_nvml *nv = tb_nvml_open(err, sizeof err);
    tb_nvml_dev *mine = nv ? tb_nvml_device(nv, me.bus, err, sizeof err) : NULL;
    size_t used = 0;
    if (!mine && info->local_rank == 0)
        used += (size_t)snprintf(out + used, len - used, "#   %s: NVML: %s\n", info->host, err);
    for (int q = 0; mine && q < info->world && used < len; q++) {
        if (strcmp(all[q].host, me.host) != 0 || all[q].local_rank >= me.local_rank) continue;
        tb_nvml_dev *other = tb_nvml_device(nv, all[q].bus, err, sizeof err);
        int nvlink = 0, p2p = 0, level = -1;
        if (!other || tb_nvml_peer(mine, other, &nvlink, &p2p, &level) != 0) {
            used += (size_t)snprintf(out + used, len - used, "#   %s: rank %d (%s) - rank %d (%s): NVML cannot say\n",
                                     me.host, q, all[q].bus, info->rank, me.bus);
            continue;
        }
        used += (size_t)snprintf(out + used, len - used, "#   %s: rank %d (%s) - rank %d (%s): %s%s, P2P read %s\n",
                                 me.host, q, all[q].bus, info->rank, me.bus, nvlink ? "NVLink, " : "",
                                 strcmp(all[q].bus, me.bus) == 0 ? "the same GPU" : tb_nvml_level_name(level),
                                 p2p ? "ok" : "not supported");
    }
    tb_nvml_close(nv);
    free(all);
}

static _Noreturn void stuck(const char *which, size_t bytes, double timeout) {
    tb_die("preflight: the %sall-reduce of %zu bytes did not finish within %g s: a rank or the interconnect between "
           "them is stuck; run preflight on subsets of the hosts to find it",
           which, bytes, timeout);
}

/* The barrier right before the timer starts, with the deadline. */
static void start_together(tb_comm *w, double timeout) {
    if (tb_comm_barrier_timeout(w, timeout) != 0)
        tb_die("preflight: the barrier before the timed all-reduce did not complete within %g s: a rank stopped "
               "after the warm-up all-reduce; run preflight on subsets of the hosts to find it",
               timeout);
}

/* Waits for the NCCL all-reduce that e follows, under the deadline. */
static void nccl_wait(tb_backend *be, tb_nccl *n, tb_event *e, const char *which, size_t bytes, double timeout) {
    double t0 = tb_now();
    while (!be->event_done(be, e)) {
        tb_nccl_check_async(n, "preflight's all-reduce");
        if (tb_now() - t0 > timeout) {
            tb_nccl_abort_all();
            stuck(which, bytes, timeout);
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* NCCL all-reduces of buf (host, count floats) on device buffers under the
 * deadline: the untimed warm-up (its host seconds in *warm_s), a second
 * untimed one whose host seconds to queue it are summed over the ranks,
 * then, from the same inputs after a barrier, the one timed with events
 * (returned), queued behind a hold of the stream that long (backend.h
 * tb_stream_hold_ms; as allreduce-bench --comm nccl: the call returns once
 * NCCL has queued it, and without the hold the events would time that
 * host-side queueing as the transfer); its result back into buf. A
 * communicator that does not form or an all-reduce that does not finish
 * ends preflight with a message. */
static double nccl_allreduce(tb_comm *w, tb_backend *be, int device, float *buf, size_t count, double timeout,
                             int rank, double *warm_s) {
    size_t bytes = count * sizeof *buf;
    /* rank 0's id reaches the others in a plain broadcast: under the guard, as
     * every collective of preflight (ncclCommInitRank then polls its own) */
    if (tb_comm_size(w) > 1)
        tb_stall_guard_arm(timeout, "preflight", "the NCCL communicator's set-up (rank 0's id broadcast, then "
                           "ncclCommInitRank)");
    tb_nccl *n = tb_nccl_create(w, device, timeout);
    tb_stall_guard_disarm();
    float *d = be->alloc(be, bytes);
    tb_event *e0 = be->event_create(be, 1), *e1 = be->event_create(be, 1);
    /* warm-up: NCCL sets up its connections and loads its kernels in the
     * first collective of a communicator (the hold's kernel the backend
     * loaded when it was made: cu_hold_load) */
    be->copy_h2d(be, d, buf, bytes);
    be->sync(be);
    double t0 = tb_now();
    tb_nccl_allreduce_sum(n, d, d, count, TB_DEV_F32, be->native_stream(be, NULL));
    be->event_record(be, e1, NULL);
    nccl_wait(be, n, e1, "warm-up ", bytes, timeout);
    *warm_s = tb_now() - t0;
    /* the host's time to queue one, connections made: summed over the ranks, the same hold on every rank */
    t0 = tb_now();
    tb_nccl_allreduce_sum(n, d, d, count, TB_DEV_F32, be->native_stream(be, NULL));
    double queue_s = tb_now() - t0, unused;
    be->event_record(be, e1, NULL);
    nccl_wait(be, n, e1, "second untimed ", bytes, timeout);
    if (tb_comm_allreduce_sum_timeout(w, &queue_s, 1, TB_FLOAT64, timeout, &unused) != 0)
        stuck("queueing times' ", sizeof queue_s, timeout);
    const double hold_ms = tb_stream_hold_ms(1e3 * queue_s);
    /* the timed one, from the same inputs (the untimed ones summed them) */
    be->copy_h2d(be, d, buf, bytes);
    be->sync(be);
    maybe_hang("barrier", rank);
    start_together(w, timeout);
    be->stream_hold(be, NULL, hold_ms);
    be->event_record(be, e0, NULL);
    tb_nccl_allreduce_sum(n, d, d, count, TB_DEV_F32, be->native_stream(be, NULL));
    be->event_record(be, e1, NULL);
    nccl_wait(be, n, e1, "", bytes, timeout + 1e-3 * hold_ms);
    double secs = be->event_elapsed_ms(be, e0, e1) * 1e-3;
    be->copy_d2h(be, buf, d, bytes);
    be->event_destroy(be, e0);
    be->event_destroy(be, e1);
    be->release(be, d);
    tb_nccl_destroy(n);
    return secs;
}

/* Rank r's inputs: element i is (i + r) mod 32 (sums stay exact in float). */
static void fill_inputs(float *buf, size_t count, int rank) {
    for (size_t i = 0; i < count; i++) buf[i] = (float)((i + (size_t)rank) % 32);
}

/* The same over MPI on host memory: warm-up (host seconds in *warm_s), buf
 * refilled with the inputs, the barrier, the timed all-reduce (returned). */
static double mpi_allreduce(tb_comm *w, float *buf, size_t count, double timeout, int rank, double *warm_s) {
    size_t bytes = count * sizeof *buf;
    if (tb_comm_allreduce_sum_timeout(w, buf, count, TB_FLOAT32, timeout, warm_s) != 0)
        stuck("warm-up ", bytes, timeout);
    fill_inputs(buf, count, rank); /* the warm-up summed it */
    maybe_hang("barrier", rank);
    start_together(w, timeout);
    double secs = 0;
    if (tb_comm_allreduce_sum_timeout(w, buf, count, TB_FLOAT32, timeout, &secs) != 0) stuck("", bytes, timeout);
    return secs;
}

/* This rank's row of the roll call: host, device, versions, environment, BLAS and NCCL. */
static void my_row(const tb_comm_info *info, const tb_backend *be, int use_nccl, pf_row *row) {
    memset(row, 0, sizeof *row);
    snprintf(row->host, sizeof row->host, "%s", info->host);
    row->local_rank = info->local_rank;
    row->local_size = info->local_size;
    snprintf(row->device, sizeof row->device, "%.16s: %.100s", be->name, be->device);
    snprintf(row->key, sizeof row->key, "%s", be->device_key[0] ? be->device_key : "-");
    char mpi[128], h5[32];
    tb_comm_library_version(mpi, sizeof mpi);
    tb_h5_library_version(h5, sizeof h5);
    snprintf(row->versions, sizeof row->versions, "trainbench %.16s (%.24s), %.40s, HDF5 %.12s, %.24s, %.100s",
             tb_version_string, tb_git_revision, mpi, h5, tb_jpeg_version(), be->versions);
    tb_launch_env(row->env, sizeof row->env, 1);
    const tb_cpu_blas_info *blas = tb_cpu_blas_info_get();
    snprintf(row->blas, sizeof row->blas, "%.31s%s (%s)", blas->kernels, blas->below_best ? "!" : "",
             tb_cpu_isa_name(tb_cpu_isa_best(tb_cpu_features_get())));
    if (tb_nccl_built()) {
        int c = 0, l = 0;
        tb_nccl_versions(&c, &l);
        tb_lib_check chk;
        tb_version_judge(TB_LIB_NCCL, c, l, &chk);
        snprintf(row->nccl, sizeof row->nccl, "compiled %s, loaded %s: %s", chk.compiled_s, chk.loaded_s,
                 tb_verdict_name(chk.verdict));
        row->nccl_bad = chk.verdict == TB_VER_ERROR || (use_nccl && chk.verdict == TB_VER_ABSENT);
    }
}

/* Rank 0 collects every rank's row with a deadline; a rank that does not answer is named and ends
 * the run. */
static pf_row *roll_call(tb_comm *w, const tb_comm_info *info, pf_row *me, double timeout) {
    maybe_hang("rollcall", info->rank);
    pf_row *rows = calloc((size_t)info->world, sizeof *rows);
    int *arrived = calloc((size_t)info->world, sizeof *arrived);
    int missing = tb_comm_roll_call(w, me, rows, sizeof *me, timeout, arrived);
    if (info->rank == 0 && missing > 0) {
        char list[1024] = "";
        size_t used = 0;
        for (int r = 0; r < info->world && used < sizeof list; r++)
            if (!arrived[r]) used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", used ? ", " : "", r);
        tb_die("preflight: rank%s %s did not answer within %g s (%s never reported): check %s, then "
               "rerun",
               missing > 1 ? "s" : "", list, timeout, missing > 1 ? "their hosts" : "its host",
               missing > 1 ? "those nodes" : "that node");
    }
    free(arrived);
    return rows;
}

/* Rank 0: the per-rank table, versions, environment, NCCL libraries and GPU topology. */
static void print_table(const tb_comm_info *info, const pf_row *rows, int gpu, const size_t *tcounts,
                        const char *topos) {
    int hosts = 0;
    for (int r = 0; r < info->world; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++) seen |= strcmp(rows[q].host, rows[r].host) == 0;
        hosts += !seen;
    }
    printf("# trainbench preflight: %d rank%s on %d host%s\n#\n", info->world, info->world > 1 ? "s" : "",
           hosts, hosts > 1 ? "s" : "");
    printf("# %4s  %-16s %7s  %-40s %-16s %s\n", "rank", "host", "local", "device", "bus id / cpus",
           "BLAS kernels (cpu level)");
    int below = 0;
    for (int r = 0; r < info->world; r++) {
        printf("  %4d  %-16s %3d/%-3d  %-40.40s %-16s %s\n", r, rows[r].host, rows[r].local_rank,
               rows[r].local_size, rows[r].device, rows[r].key, rows[r].blas);
        below |= strchr(rows[r].blas, '!') != NULL;
    }
    char kinds[1024];
    if (tb_provenance_distinct(kinds, sizeof kinds, rows[0].device, sizeof *rows, info->world, 0) > 1)
        printf("# devices differ between ranks: %s; a training job's steps wait for the slowest (one model per "
               "job for a clean scaling table)\n",
               kinds);
    if (below)
        printf("# !: kernels below what that CPU can run (OPENBLAS_CORETYPE set there, or a BLAS built "
               "without them): the CPU backend runs slower on it\n");
    const char *note = tb_cpu_blas_info_get()->note;
    if (note[0]) printf("# BLAS choice (rank 0): %s\n", note);
    printf("#\n# versions (identical on every rank: the launch check compared them)\n#   %s\n",
           rows[0].versions);
    printf("#\n# environment as launched (NCCL_*, UCX_*, OMPI_MCA_ transport choices: pml, btl, mtl, osc, coll, "
           "oob_tcp_if, hwloc; CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS)\n");
    for (int r = 0; r < info->world; r++)
        printf("#   rank %d: %s\n", r, rows[r].env[0] ? rows[r].env : "(none set)");
    char own[512];
    tb_comm_env_defaults(own, sizeof own);
    if (own[0]) printf("#   and trainbench's defaults, where the launch set none (every rank): %s\n", own);
    if (rows[0].nccl[0]) {
        printf("#\n# NCCL library, compiled against vs loaded\n");
        for (int r = 0; r < info->world; r++) printf("#   rank %d: %s\n", r, rows[r].nccl);
    }
    if (gpu) {
        printf("#\n# GPU topology between the ranks of each host (NVML)\n");
        size_t at = 0;
        for (int r = 0; r < info->world; r++) {
            if (tcounts[r] > 1) printf("%s", topos + at);
            at += tcounts[r];
        }
    }
    fflush(stdout);
}

/* One timed, checked all-reduce over all ranks, reported as nccl-tests does (rank 0): nonzero on
 * every rank when it was wrong, or when the NCCL library is bad (nccl_bad: rank 0's verdict over
 * the roll call's rows, summed with the wrong count so that every rank fails together). */
static int timed_allreduce(tb_comm *w, const tb_comm_info *info, tb_backend *be, int use_nccl, int device,
                           size_t bytes, double timeout, int nccl_bad) {
    size_t count = bytes / sizeof(float);
    float *buf = malloc(count * sizeof *buf);
    if (!buf) tb_die("preflight: cannot allocate %zu bytes for the all-reduce; lower --bytes", bytes);
    fill_inputs(buf, count, info->rank);
    maybe_hang("allreduce", info->rank);
    double secs = 0, warm = 0;
    if (use_nccl) secs = nccl_allreduce(w, be, device, buf, count, timeout, info->rank, &warm);
    else secs = mpi_allreduce(w, buf, count, timeout, info->rank, &warm);
    long long wrong = 0;
    for (size_t i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < info->world; r++) want += (double)((i + (size_t)r) % 32);
        wrong += buf[i] != (float)want;
    }
    if (info->world > 1)
        tb_stall_guard_arm(timeout, "preflight", "the sum of the check (all-reduces of the #wrong counts and times)");
    int64_t totals[2] = {wrong, info->rank == 0 && nccl_bad};
    tb_comm_allreduce_sum(w, totals, 2, TB_INT64);
    nccl_bad = totals[1] > 0;
    double times[2] = {secs, warm};
    tb_comm_allreduce_max(w, times, 2, TB_FLOAT64);
    secs = times[0];
    warm = times[1];
    if (info->rank == 0) {
        double algbw = (double)bytes / secs * 1e-9;
        double busbw = algbw * (info->world > 1 ? 2.0 * (info->world - 1) / info->world : 0.0);
        printf("#\n# all-reduce (%s): %zu bytes float32 sum over %d ranks in %.3f ms, algbw %.3f GB/s, "
               "busbw %.3f GB/s, #wrong %lld\n",
               use_nccl ? "NCCL, device buffers" : "MPI, host buffers", bytes, info->world, secs * 1e3, algbw, busbw,
               (long long)totals[0]);
        printf("#   timed after an untimed warm-up all-reduce of the same size (%.3f ms on the slowest rank: "
               "connection setup%s) and a barrier%s\n",
               warm * 1e3, use_nccl ? ", NCCL's kernels loaded" : "",
               use_nccl ? ", queued behind a hold of the stream (its events time the transfer, not the queueing)" : "");
        if (nccl_bad) printf("# the NCCL library loaded does not match the one trainbench was built for (above)\n");
        printf("# preflight: %s\n", totals[0] ? "FAILED (wrong all-reduce results)" : nccl_bad ? "FAILED (NCCL library)" : "OK");
    }
    free(buf);
    return totals[0] || nccl_bad ? 1 : 0;
}

int tb_cmd_preflight(int argc, char **argv) {
    double timeout = 60;
    size_t bytes = (size_t)64 << 20;
    char backend[TB_OPT_STR_MAX] = "auto", comm[TB_OPT_STR_MAX] = "auto";
    int threads = 0, share_gpu = 0;
    const tb_opt opts[] = {
        {"timeout", TB_OPT_DOUBLE, &timeout, 0.1, 86400, NULL, "seconds to wait for a rank or the all-reduce"},
        {"bytes", TB_OPT_SIZE, &bytes, 4, 1e11, NULL, "size of the timed all-reduce (whole float32 values: rounded down to 4 bytes)"},
        {"backend", TB_OPT_CHOICE, backend, 0, 0, "cpu|cuda|auto", "device to report"},
        {"threads", TB_OPT_INT, &threads, 0, 4096, NULL, "CPU threads (0: cores / ranks on the host)"},
        {"comm", TB_OPT_CHOICE, comm, 0, 0, "auto|nccl|mpi", "the timed all-reduce's path; auto: nccl on a GPU when built, else mpi"},
        {"share-gpu", TB_OPT_FLAG, &share_gpu, 0, 0, NULL, "ranks may share a GPU (as train --comm mpi --share-gpu)"},
        {NULL, 0, NULL, 0, 0, NULL, NULL},
    };
    tb_cli_parse("preflight", "[mpirun -np N] trainbench preflight [options]", argc, argv, opts);
    bytes -= bytes % sizeof(float); /* the bytes the all-reduce moves: its bandwidth's numerator */

    tb_comm_info info;
    /* a rank that never reaches MPI_Init: the roll call cannot see it */
    tb_stall_guard_arm(timeout, "start-up", TB_GUARD_MPI_INIT);
    tb_comm_init(&argc, &argv, &info);
    tb_launch_check_singleton(&info);
    tb_stall_guard_disarm(); /* every rank is past MPI_Init: the roll call's deadline from here */
    tb_comm *w = tb_comm_world();

    int ndev = 0, device = tb_launch_pick_device(&info, backend, &ndev);
    tb_backend_opts bo = {.threads = threads, .device = device >= 0 ? device : 0, .local_rank = info.local_rank,
                          .no_autotune = 1};
    char err[512];
    tb_backend *be = tb_backend_create(backend, &bo, err, sizeof err);
    if (!be) tb_die("preflight: %s", err);
    int gpu = strcmp(be->name, "cuda") == 0;
    if (!gpu) device = -1, ndev = 0;
    int use_nccl = strcmp(comm, "nccl") == 0 || (strcmp(comm, "auto") == 0 && gpu && tb_nccl_built() && !share_gpu);
    if (use_nccl && !gpu) tb_die("preflight --comm nccl: needs a GPU (the %s backend was chosen)", be->name);
    if (use_nccl && !tb_nccl_built()) tb_die("preflight --comm nccl: this trainbench was built without NCCL");

    /* 1. roll call */
    pf_row me;
    my_row(&info, be, use_nccl, &me);
    pf_row *rows = roll_call(w, &info, &me, timeout);

    /* 2. launch mistakes (a collective: everyone answered the roll call,
     * but a rank may yet stop in a driver's query: the guard names the
     * phase instead of hanging). The test's hang (hang-checks) comes before
     * the arm, as a frozen rank's: hanging under a guard of its own, that
     * rank's line came as soon as rank 0's, and the launcher's kill then
     * took rank 0's line in about one run in three */
    maybe_hang("checks", info.rank);
    if (info.world > 1) /* one rank waits for nobody */
        tb_stall_guard_arm(timeout, "preflight", "the launch checks (collectives of every rank, after the roll call)");
    tb_launch_check_ranks(&info, be, ndev, device, share_gpu, "preflight", argc, argv);
    if (use_nccl && share_gpu && info.world > 1) tb_launch_check_share_gpu_nccl(&info, "preflight");
    char topo[2048] = "";
    tb_stall_guard_phase("the GPU topology exchange (NVML queries, then a gather to rank 0)");
    if (gpu) gpu_topology(&info, be, topo, sizeof topo);
    size_t *tcounts = info.rank == 0 ? calloc((size_t)info.world, sizeof *tcounts) : NULL;
    char *topos = tb_comm_gather_bytes(w, topo, strlen(topo) + 1, 0, tcounts);
    tb_stall_guard_disarm(); /* the all-reduces keep deadlines of their own */

    /* 3. the table */
    if (info.rank == 0) print_table(&info, rows, gpu, tcounts, topos);
    free(topos);
    free(tcounts);
    int nccl_bad = 0;
    for (int r = 0; info.rank == 0 && r < info.world; r++) nccl_bad |= rows[r].nccl_bad;

    /* 4. one timed, checked all-reduce */
    int failed = timed_allreduce(w, &info, be, use_nccl, device, bytes, timeout, nccl_bad);
    free(rows);
    /* a rank that never gets to MPI_Finalize (stuck in a driver's teardown) */
    if (info.world > 1)
        tb_stall_guard_arm(timeout, "end", "the end of the run (MPI_Finalize returns once every rank has reached it)");
    else
        tb_stall_guard_disarm();
    be->destroy(be);
    int rc = failed;
    tb_comm_finalize();
    tb_stall_guard_disarm();
    return rc;
}
