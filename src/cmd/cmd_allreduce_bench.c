/* cmd_allreduce_bench.c - `trainbench allreduce-bench`: nccl-tests style
 * all-reduce sweep on the path training uses, chosen with --comm: mpi (MPI
 * on host buffers, the CPU backend's path: the gradient thread's
 * non-blocking call and wait, comm/grad_sync.h) or nccl (NCCL on device
 * buffers of the GPU local rank mod visible devices, the CUDA backend's
 * path):
 *
 *   #       size         count    type   redop    root       time   algbw   busbw  #wrong
 *   #        (B)    (elements)                             (us)  (GB/s)  (GB/s)
 *
 * root: -1 (an all-reduce has none); the column keeps nccl-tests' places:
 * time $6, algbw $7, busbw $8, #wrong $9 of a row (awk). Tables written
 * before it (no root column) are still read by project --fabric fit:.
 * time: mean per all-reduce over --iters after one untimed all-reduce of the
 * size (as nccl-tests', even with -w 0) and --warmup more, combined over the
 * ranks by -a as nccl-tests' -a: 0 rank 0's, 1 the mean of the ranks' (the
 * default, as nccl-tests'), 2 the fastest rank's, 3 the slowest's (what
 * this command reported before -a; a results file without the attribute
 * `average` holds that); the header's first line says which
 * (mpi: host clock around each call; nccl: CUDA events on the stream
 * around the --iters collectives queued back to back behind a hold of the
 * stream (nccl_loop), the device's time from the first one's start to the
 * last one's end. nccl-tests times
 * otherwise: a host timer around its loop of queued collectives, read
 * after a stream synchronize, so its figure also holds the host's
 * queueing and the sync's wake-up, which tell at small sizes; it records
 * events only with -I, per iteration);
 * algbw = size / time; busbw = algbw * 2(n-1)/n (what each link carries);
 * #wrong: elements of the last timed all-reduce of each size that differ
 * from the exact sum (inputs are small integers, so float sums are exact),
 * summed over the ranks; the other all-reduces are not checked (nccl-tests
 * checks separate, untimed ones). nccl: the output buffer is zeroed before
 * the timed all-reduces, so a result left by the warm-up cannot pass;
 * mpi: in place, the buffer holds the inputs again before each.
 * Sizes: -b, then times -f up to -e, each rounded down to whole elements
 * (at least one; -e below one element is refused), and a size that rounds
 * to the previous row's element count is not measured again: every row is
 * a distinct size, as a fit of the table (project --fabric fit:) needs.
 *
 * mpi: the sum is in place, as in training, so every all-reduce (warm-up
 * and timed) starts from the inputs again: the buffer is restored from a
 * copy and the ranks meet at a barrier, neither timed; each all-reduce is
 * timed on its own. Repeating an in-place sum without that multiplies the
 * values by the world size each time (inf after ~80 float iterations on 3
 * ranks), and would time arithmetic on inf. nccl: out of place (inputs to
 * the buffer; NCCL runs the same kernels in place), so the all-reduces can
 * be queued back to back from the same inputs: timing each on its own
 * would count NCCL's host-side queueing (a thread of its own per call with
 * a non-blocking communicator of several ranks) as device time. An NCCL
 * all-reduce that has not finished after --timeout ends the run
 * (ncclCommAbort) instead of hanging it. On both paths a rank that never
 * joins (frozen, stuck in a driver) ends the run through the stall guard
 * (core/stall_guard.h) instead of holding the others for ever: after
 * --timeout at start-up, at the end, and in the sweep for each all-reduce
 * (mpi: with its barrier; nccl: --iters or --warmup queued together get
 * --timeout each) and each sum of the time and the check.
 *
 * --share-gpu lets ranks share a GPU (--comm nccl: NCCL >= 2.30 with
 * NCCL_MULTI_RANK_GPU_ENABLE=1): the header, the bandwidth line and the
 * results file (attribute shared_gpu) then say how many ranks share one,
 * so that the figure is not read as a fabric's.
 *
 * --results FILE: the table as a results file (kind allreduce-bench,
 * provenance attributes, /allreduce with bytes, count, time_us, algbw_GBps,
 * busbw_GBps, wrong), which `trainbench project --fabric fit:FILE` fits. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/bf16.h"
#include "comm/comm.h"
#include "comm/grad_sync.h"
#include "comm/nccl.h"
#include "core/cli.h"
#include "core/faults.h"
#include "core/log.h"
#include "core/stall_guard.h"
#include "core/timer.h"
#include "model/backend.h"
#include "src/cmd/commands.h"
#include "src/results/results.h"
#include "src/train/train.h"

static double input_value(int rank, size_t i) { return (double)((i + 3 * (size_t)rank) % 64); }

/* Element types: float and double on both paths, bf16 on NCCL (inputs
 * below 64: sums of up to 4 ranks are exact in bfloat16's 8 bits). */
typedef enum { EL_F32, EL_F64, EL_BF16 } el_type;
static size_t el_size(el_type t) { return t == EL_F32 ? 4 : t == EL_F64 ? 8 : 2; }

static void fill(void *buf, size_t count, el_type t, int rank) {
    for (size_t i = 0; i < count; i++) {
        if (t == EL_F32) ((float *)buf)[i] = (float)input_value(rank, i);
        else if (t == EL_F64) ((double *)buf)[i] = input_value(rank, i);
        else ((uint16_t *)buf)[i] = tb_f32_to_bf16((float)input_value(rank, i));
    }
}

/* Elements that differ from the exact sum; in bf16 beyond 4 ranks (sums
 * past 256), by more than a rounding per addition of bfloat16's 8 bits. */
static long long count_wrong(const void *buf, size_t count, el_type t, int world) {
    long long wrong = 0;
    for (size_t i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < world; r++) want += input_value(r, i);
        double got = t == EL_F32 ? ((const float *)buf)[i]
                     : t == EL_F64 ? ((const double *)buf)[i]
                                   : tb_bf16_to_f32(((const uint16_t *)buf)[i]);
        double tol = 0;
        if (t == EL_BF16 && want > 256) tol = (world - 1) * ldexp(1.0, (int)floor(log2(want)) - 7);
        wrong += fabs(got - want) > tol;
    }
    return wrong;
}

/* Test only (TB_TEST_FAULT=wrong-sum:RANK:ROW): one element of this rank's
 * sum made wrong, as a faulty link or reduction would, for the check to
 * catch. */
static void spoil(void *buf, size_t count, el_type t) {
    size_t i = count / 2;
    if (t == EL_F32) ((float *)buf)[i] += 1.0f;
    else if (t == EL_F64) ((double *)buf)[i] += 1.0;
    else ((uint16_t *)buf)[i] ^= 0x4000; /* bf16: an exponent bit */
}

/* The NCCL path: device buffers on the CUDA backend's device and stream. */
typedef struct {
    tb_backend *be;
    tb_nccl *nccl;
    void *buf, *inputs;          /* device */
    tb_event *e0, *e1;
    double timeout;
    int row;                     /* the size row (test hook freeze-nccl) */
    int rank;
    double queue_s;              /* host seconds to queue one all-reduce, in the size's untimed loop */
} nccl_bench;

/* Waits for e, recorded after n all-reduces, with a deadline of --timeout
 * per all-reduce: a hung one ends the run. */
static void wait_deadline(nccl_bench *nb, tb_event *e, size_t bytes, int n) {
    double t0 = tb_now();
    while (!nb->be->event_done(nb->be, e)) {
        tb_nccl_check_async(nb->nccl, "the all-reduce");
        if (tb_now() - t0 > nb->timeout * n) {
            tb_nccl_abort_all();
            tb_die("allreduce-bench: the NCCL all-reduces of %zu bytes did not finish within %g s (--timeout %g s "
                   "for each of the %d queued together): a rank or the interconnect is stuck; run trainbench "
                   "preflight to find which",
                   bytes, nb->timeout * n, nb->timeout, n);
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

/* n all-reduces of count elements, inputs -> buf, queued back to back
 * between one pair of events: seconds per all-reduce. Each call returns
 * once NCCL has queued it (with a non-blocking communicator, from a thread
 * NCCL starts for each call), so one event pair per all-reduce would count
 * that host-side queueing as device time; and where a small all-reduce
 * runs faster than the host queues the next, the device waits between
 * them even when they are queued back to back. The timed loop (timed = 1)
 * therefore queues them behind a hold of the stream for the time the
 * untimed loop took to queue as many (the slowest rank's; backend.h's
 * tb_stream_hold_ms): they start back to back, and the events time the
 * device. */
static double nccl_loop(nccl_bench *nb, tb_comm *w, size_t count, el_type t, int n, int timed) {
    tb_backend *be = nb->be;
    be->sync(be);
    /* the slowest rank's hold on every rank: a rank whose hold ended first
     * would time the others' longer holds in its first all-reduce */
    double hold_ms = timed && nb->queue_s > 0 ? tb_stream_hold_ms(1e3 * n * nb->queue_s) : 0.0;
    if (timed) tb_comm_allreduce_max(w, &hold_ms, 1, TB_FLOAT64);
    tb_comm_barrier(w);
    if (tb_fault("freeze-nccl", nb->rank, nb->row)) tb_stall_guard_freeze(); /* test only: never queues */
    if (hold_ms > 0) be->stream_hold(be, NULL, hold_ms);
    be->event_record(be, nb->e0, NULL);
    tb_dev_type dt = t == EL_F32 ? TB_DEV_F32 : t == EL_F64 ? TB_DEV_F64 : TB_DEV_BF16;
    double t0 = tb_now(), first = 0;
    for (int i = 0; i < n; i++) {
        tb_nccl_allreduce_sum(nb->nccl, nb->inputs, nb->buf, count, dt, be->native_stream(be, NULL));
        if (i == 0) first = tb_now() - t0; /* a size's first call may set up buffers: left out where there are more */
    }
    if (!timed) nb->queue_s = n > 1 ? (tb_now() - t0 - first) / (n - 1) : first;
    be->event_record(be, nb->e1, NULL);
    wait_deadline(nb, nb->e1, count * el_size(t), n);
    return be->event_elapsed_ms(be, nb->e0, nb->e1) * 1e-3 / n;
}

/* -a 0..3 as nccl-tests' (common.cu, Allreduce(..., average)): the word in the header and the results file. */
static const char *const k_average[] = {"rank 0", "mean", "min", "max"};
static const char *const k_average_says[] = {"rank 0's", "the mean over ranks", "the fastest rank's",
                                             "the slowest rank's"};

/* The command line. */
typedef struct {
    size_t minb, maxb;
    int factor;           /* -f: each size is the previous one times this */
    int iters, warmup, check, share_gpu;
    int average;          /* -a: the ranks' times combined as nccl-tests' -a (k_average) */
    int ngpus;            /* -g: GPUs per rank, nccl-tests' flag; 1 only */
    double timeout;
    char dtype[TB_OPT_STR_MAX], results[TB_OPT_STR_MAX], comm[TB_OPT_STR_MAX], op[TB_OPT_STR_MAX], t_start[32];
} bench_args;

/* A sweep: its arguments, the path it times and what it has measured. */
typedef struct {
    bench_args a;
    tb_comm_info info;
    tb_comm *w;
    nccl_bench nb;
    int use_nccl, device, ndev;
    el_type t;
    size_t es;            /* bytes per element */
    char shared[160];     /* "" or how many ranks share one GPU */
    char lib[256];        /* the library on the path */
    const char *path;     /* "nccl-device" or "mpi-host" */
    double poll_s;        /* the gradient thread's test interval (grad_sync.h) */
    char *hosts;          /* world x 64 chars */
    char *devices;        /* --comm nccl: world x TB_DEVICE_NAME_MAX, each rank's GPU */
    int *device_ids;      /* --comm nccl: world, each rank's CUDA device */
    tb_table tab;         /* rank 0 with --results */
    double sum_bus;
    int nsizes;
    long long total_wrong;
} bench;

static void parse_args(int argc, char **argv, bench_args *a) {
    *a = (bench_args){.minb = 8, .maxb = (size_t)128 << 20, .factor = 2, .iters = 20, .warmup = 5, .check = 1,
                      .timeout = 300, .dtype = "float", .comm = "mpi", .op = "sum", .average = 1, .ngpus = 1};
    tb_utc_now(a->t_start, sizeof a->t_start);
    const tb_opt opts[] = {
        {"minbytes", TB_OPT_SIZE, &a->minb, 1, 1e12, NULL, "smallest message"},
        {"maxbytes", TB_OPT_SIZE, &a->maxb, 1, 1e12, NULL, "largest message"},
        {"stepfactor", TB_OPT_FACTOR, &a->factor, 2, 1024, NULL, "multiply the size by this"},
        {"iters", TB_OPT_INT, &a->iters, 1, 1000000, NULL, "timed all-reduces per size"},
        {"warmup", TB_OPT_INT, &a->warmup, 0, 1000000, NULL, "untimed all-reduces per size, after the one every size gets first"},
        {"average", TB_OPT_INT, &a->average, 0, 3, NULL, "the time reported, as nccl-tests' -a: 0 rank 0's, 1 the mean over ranks, 2 the fastest rank's, 3 the slowest's"},
        {"check", TB_OPT_INT, &a->check, 0, 1, NULL, "check the last timed all-reduce of each size against the exact sum (1) or not (0)"},
        {"dtype", TB_OPT_CHOICE, a->dtype, 0, 0, "float|double|bf16", "element type (bf16: --comm nccl)"},
        {"op", TB_OPT_CHOICE, a->op, 0, 0, "sum", "the reduction, as nccl-tests' -o: sum (the gradients')"},
        {"comm", TB_OPT_CHOICE, a->comm, 0, 0, "mpi|nccl", "mpi: host buffers over MPI (the CPU backend's path); nccl: device buffers over NCCL (the CUDA backend's)"},
        {"timeout", TB_OPT_DOUBLE, &a->timeout, 0.1, 1e7, NULL, "seconds an all-reduce, the start-up or the end may wait for the other ranks before the run ends"},
        {"results", TB_OPT_STRING, a->results, 0, 0, NULL, "also write the table to this HDF5 results file"},
        {"ngpus", TB_OPT_INT, &a->ngpus, 1, 1e6, NULL, "GPUs per rank, as nccl-tests' -g: 1 (one GPU per rank; launch more ranks for more GPUs)"},
        {"share-gpu", TB_OPT_FLAG, &a->share_gpu, 0, 0, NULL, "ranks may share a GPU (--comm nccl: NCCL >= 2.30, NCCL_MULTI_RANK_GPU_ENABLE=1): a test of the path, not a fabric"},
        {NULL, 0, NULL, 0, 0, NULL, NULL},
    };
    tb_cli_parse_aliased("allreduce-bench",
                         "trainbench allreduce-bench [-b MIN] [-e MAX] [-f FACTOR] [options]", argc,
                         argv, opts, "b=minbytes,e=maxbytes,f=stepfactor,n=iters,w=warmup,c=check,d=dtype,a=average,g=ngpus,o=op,"
                         "warmup_iters=warmup,datatype=dtype"); /* nccl-tests' spellings where the meaning is the same */
    if (a->ngpus != 1)
        tb_die("allreduce-bench: -g %d: one GPU per rank only (nccl-tests' -g drives several from one process); "
               "start %d times the ranks instead (mpirun -np)",
               a->ngpus, a->ngpus);
    if (a->minb > a->maxb) tb_die("allreduce-bench: -b %zu is larger than -e %zu", a->minb, a->maxb);
}

/* The CUDA backend for --comm nccl, the launch checks, and the path's library, buffers and events. */
static void open_path(bench *b, int argc, char **argv) {
    nccl_bench *nb = &b->nb;
    b->device = -1;
    if (b->use_nccl) {
        if (!tb_nccl_built())
            tb_die("allreduce-bench --comm nccl: this trainbench was built without NCCL; use --comm mpi");
        b->device = tb_launch_pick_device(&b->info, "cuda", &b->ndev);
        tb_backend_opts bo = {.device = b->device >= 0 ? b->device : 0, .no_autotune = 1};
        char err[512];
        nb->be = tb_backend_create("cuda", &bo, err, sizeof err);
        if (!nb->be) tb_die("allreduce-bench --comm nccl: %s", err);
    }
    tb_launch_check_ranks(&b->info, nb->be, b->ndev, b->device, b->a.share_gpu, "allreduce-bench", argc, argv);
    if (b->use_nccl && b->a.share_gpu && b->info.world > 1)
        tb_launch_check_share_gpu_nccl(&b->info, "allreduce-bench");
    int sharing = b->use_nccl ? tb_launch_ranks_per_device(&b->info, nb->be) : 1;
    if (sharing > 1)
        snprintf(b->shared, sizeof b->shared, "%d ranks share one GPU: the bandwidth of that path, not of a fabric",
                 sharing);
    b->es = el_size(b->t);
    tb_comm_library_version(b->lib, sizeof b->lib);
    if (b->use_nccl) {
        int c = 0, l = 0;
        tb_nccl_versions(&c, &l);
        int major, minor, patch;
        tb_nccl_version_parts(l, &major, &minor, &patch);
        snprintf(b->lib, sizeof b->lib, "NCCL %d.%d.%d on %.100s", major, minor, patch, nb->be->device);
        nb->nccl = tb_nccl_create(b->w, b->device, b->a.timeout);
        nb->buf = nb->be->alloc(nb->be, b->a.maxb + b->es);
        nb->inputs = nb->be->alloc(nb->be, b->a.maxb + b->es);
        nb->e0 = nb->be->event_create(nb->be, 1);
        nb->e1 = nb->be->event_create(nb->be, 1);
    }
    b->path = b->use_nccl ? "nccl-device" : "mpi-host";
    b->poll_s = tb_grad_sync_poll_s(); /* the gradient thread's call (grad_sync.h) */
}

/* Rank 0: the path, the hosts and the table's head. */
static void print_header(bench *b) {
    const tb_comm_info *info = &b->info;
    printf("# trainbench allreduce-bench: %d ranks, path %s (%s), %s, %s sum, time: %s (-a %d)", info->world, b->path,
           b->lib, b->use_nccl ? "out of place" : "in place", b->a.dtype, k_average_says[b->a.average], b->a.average);
    if (b->use_nccl)
        printf(", the timed all-reduces queued behind a hold of the stream: the device's time\n");
    else if (b->poll_s > 0)
        printf(", MPI_Iallreduce tested every <= %.0f us (TB_GRAD_SYNC_POLL_US), as training's\n", 1e6 * b->poll_s);
    else
        printf(", blocking MPI_Allreduce (TB_GRAD_SYNC_POLL_US=0), as training's\n");
    for (int r = 0; r < info->world; r++)
        if (b->devices) /* nccl-tests' rank lines */
            printf("#  Rank %2d on %s device %2d %s\n", r, b->hosts + 64 * r, b->device_ids[r],
                   b->devices + (size_t)TB_DEVICE_NAME_MAX * r);
        else
            printf("#  Rank %2d on %s\n", r, b->hosts + 64 * r);
    if (b->shared[0]) printf("# busbw: %s (NCCL_MULTI_RANK_GPU_ENABLE)\n", b->shared);
    if (b->a.results[0]) tb_table_init(&b->tab, "allreduce", "bytes:i,count:i,time_us,algbw_GBps,busbw_GBps,wrong:i");
    printf("#\n# %12s %12s %7s %7s %7s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "root", "time", "algbw",
           "busbw", "#wrong");
    printf("# %12s %12s %7s %7s %7s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)",
           "");
}

/* With several ranks, the stall guard's next deadline: n calls of
 * --timeout each from now (stall_guard.h's extension: no new thread). */
static void guard_next(const bench *b, int n) {
    if (b->info.world > 1) tb_stall_guard_extend(b->a.timeout, n);
}

/* The sweep's guard names the size it waits in (size row `row`). */
static void guard_size(const bench *b, size_t count, int row) {
    if (b->info.world < 2) return;
    char phase[256];
    snprintf(phase, sizeof phase, "the all-reduces of %zu bytes (size row %d: 1 untimed + %d warm-up + %d timed, each with its "
             "barrier, then the sums of the time and the check)", count * b->es, row, b->a.warmup, b->a.iters);
    tb_stall_guard_phase(phase);
    if (tb_fault("freeze-size", b->info.rank, row)) tb_stall_guard_freeze(); /* test only: stops in the sweep */
}

/* This rank's seconds per all-reduce combined over the ranks as -a says (0 rank 0's, 1 the mean, 2 the
 * least, 3 the most), in place. */
static void over_ranks(bench *b, double *dt) {
    guard_next(b, 1);
    switch (b->a.average) {
    case 0: tb_comm_bcast(b->w, dt, 1, TB_FLOAT64, 0); break;
    case 1:
        tb_comm_allreduce_sum(b->w, dt, 1, TB_FLOAT64);
        *dt /= b->info.world;
        break;
    case 2: tb_comm_allreduce_min(b->w, dt, 1, TB_FLOAT64); break;
    default: tb_comm_allreduce_max(b->w, dt, 1, TB_FLOAT64); break;
    }
}

/* Mean seconds per all-reduce of count elements over --iters after --warmup (over the ranks as -a says);
 * buf then holds the last timed all-reduce. */
static double time_size(bench *b, void *buf, void *inputs, size_t count) {
    nccl_bench *nb = &b->nb;
    size_t es = b->es;
    fill(inputs, count, b->t, b->info.rank);
    if (b->use_nccl) nb->be->copy_h2d(nb->be, nb->inputs, inputs, count * es);
    double dt = 0;
    /* untimed first: one all-reduce of the size (nccl-tests' BenchTime does one, even with -w 0: a size's
     * first call may set up connections or buffers), then --warmup more */
    int untimed = 1 + b->a.warmup;
    if (b->use_nccl) { /* out of place: every all-reduce sums the inputs, none grows the values */
        /* each loop: a barrier, then its all-reduces queued together */
        nb->row = b->nsizes;
        nb->rank = b->info.rank;
        guard_next(b, untimed + 1);
        (void)nccl_loop(nb, b->w, count, b->t, untimed, 0);
        nb->be->zero(nb->be, nb->buf, count * es); /* the check reads what the timed ones wrote (before the clock) */
        guard_next(b, b->a.iters + 1);
        dt = nccl_loop(nb, b->w, count, b->t, b->a.iters, 1) * b->a.iters;
    }
    for (int i = 0; !b->use_nccl && i < untimed + b->a.iters; i++) {
        memcpy(buf, inputs, count * es); /* untimed: back to the inputs */
        guard_next(b, 1);
        tb_comm_barrier(b->w);
        double t0 = tb_now();
        if (i == 0 && tb_fault("slow-first", b->info.rank, b->nsizes)) /* test only: a slow first call */
            nanosleep(&(struct timespec){1, 0}, NULL);
        tb_comm_allreduce_sum_idle(b->w, buf, count, b->t == EL_F32 ? TB_FLOAT32 : TB_FLOAT64, b->poll_s);
        if (i >= untimed) dt += tb_now() - t0;
    }
    if (b->use_nccl) nb->be->copy_d2h(nb->be, buf, nb->buf, count * es);
    dt /= b->a.iters;
    if (tb_fault("slow-time", b->info.rank, b->nsizes)) dt += 1.0; /* test only: this rank's time 1 s longer */
    over_ranks(b, &dt);
    return dt;
}

/* Every size from -b to -e: time it, check it, print its row (rank 0). */
static void sweep(bench *b) {
    const bench_args *a = &b->a;
    size_t es = b->es;
    void *buf = malloc(a->maxb + es), *inputs = malloc(a->maxb + es);
    if (!buf || !inputs) tb_die("allreduce-bench: cannot allocate 2 x %zu bytes; lower -e", a->maxb);
    size_t prev_count = 0;
    for (size_t bytes = a->minb; bytes <= a->maxb;
         bytes = bytes > a->maxb / (size_t)a->factor ? a->maxb + 1 : bytes * (size_t)a->factor) {
        /* whole elements only, at least one (-e holds one: checked); a size
         * that rounds to the previous row's count is that row again */
        size_t count = bytes / es;
        if (count == 0) count = 1;
        if (count == prev_count) continue;
        prev_count = count;
        guard_size(b, count, b->nsizes);
        double dt = time_size(b, buf, inputs, count);
        if (tb_fault("wrong-sum", b->info.rank, b->nsizes)) spoil(buf, count, b->t); /* test only */
        long long wrong = 0;
        if (a->check) { /* buf holds the last timed all-reduce */
            wrong = count_wrong(buf, count, b->t, b->info.world);
            int64_t wsum = wrong;
            guard_next(b, 1);
            tb_comm_allreduce_sum(b->w, &wsum, 1, TB_INT64);
            wrong = wsum;
        }
        b->total_wrong += wrong;
        double algbw = (double)(count * es) / dt * 1e-9;
        double busbw = algbw * (b->info.world > 1 ? 2.0 * (b->info.world - 1) / b->info.world : 0.0);
        b->sum_bus += busbw;
        b->nsizes++;
        if (b->info.rank == 0) {
            char wrong_s[24] = "N/A";
            if (a->check) snprintf(wrong_s, sizeof wrong_s, "%lld", wrong);
            printf("  %12zu %12zu %7s %7s %7d %10.2f %8.3f %8.3f %7s\n", count * es, count,
                   b->t == EL_F32 ? "float" : b->t == EL_F64 ? "double" : "bf16", "sum", -1, dt * 1e6, algbw, busbw,
                   wrong_s);
            double row[6] = {(double)(count * es), (double)count, dt * 1e6, algbw, busbw,
                             a->check ? (double)wrong : -1};
            if (a->results[0]) tb_table_row(&b->tab, row, NULL);
        }
    }
    free(buf);
    free(inputs);
}

/* Rank 0 with --results: the table as a results file of kind allreduce-bench. */
static void write_results(bench *b, int argc, char **argv) {
    const bench_args *ar = &b->a;
    tb_attrs a;
    memset(&a, 0, sizeof a);
    tb_backend none = {.name = "none"};
    snprintf(none.device, sizeof none.device, "host buffers (%.32s sum)", ar->dtype);
    tb_provenance_fill(&a, "allreduce-bench", argc, argv, b->use_nccl ? b->nb.be : &none, b->info.world, b->hosts,
                      b->devices);
    char t_end[32];
    tb_utc_now(t_end, sizeof t_end);
    tb_attrs_str(&a, "kind", "allreduce-bench");
    tb_attrs_str(&a, "start_time", ar->t_start);
    tb_attrs_str(&a, "end_time", t_end);
    /* DESIGN.md's two statuses: a sweep whose sums were wrong did not do
     * what was asked (exit 1), so it is aborted, with the count as reason */
    tb_attrs_str(&a, "status", b->total_wrong ? "aborted" : "complete");
    if (b->total_wrong) {
        char why[160];
        snprintf(why, sizeof why, "%lld wrong elements in the all-reduce sums (the #wrong column)", b->total_wrong);
        tb_attrs_str(&a, "abort_reason", why);
    }
    tb_attrs_str(&a, "path", b->path);
    tb_attrs_str(&a, "dtype", ar->dtype);
    tb_attrs_int(&a, "iters", ar->iters);
    tb_attrs_int(&a, "warmup", ar->warmup);
    /* the ranks' times combined as -a: "rank 0", "mean", "min" or "max" (a file without it: max) */
    tb_attrs_str(&a, "average", k_average[ar->average]);
    tb_attrs_str(&a, "shared_gpu", b->shared[0] ? b->shared : "no (one rank per device)");
    const tb_table *tabs[1] = {&b->tab};
    tb_results_write(ar->results, &a, tabs, 1);
    tb_attrs_free(&a);
    tb_table_free(&b->tab);
    printf("# results written to %s\n", ar->results);
}

/* --results can be written (rank 0 looks; every rank stops together with
 * its line when it cannot), before the sweep rather than after it. */
static void check_results_path(bench *b) {
    char why[8400] = "";
    if (b->info.rank == 0 && b->a.results[0])
        tb_output_path_check(b->a.results, TB_OUT_RESULTS, "results file", "--results", why, sizeof why);
    tb_comm_bcast(b->w, why, sizeof why, TB_BYTES, 0);
    if (!why[0]) return;
    tb_say_error("allreduce-bench: %s", why);
    tb_comm_exit_all(b->w, 1);
}

static void close_path(bench *b) {
    nccl_bench *nb = &b->nb;
    if (!b->use_nccl) return;
    nb->be->sync(nb->be);
    nb->be->event_destroy(nb->be, nb->e0);
    nb->be->event_destroy(nb->be, nb->e1);
    nb->be->release(nb->be, nb->buf);
    nb->be->release(nb->be, nb->inputs);
    tb_nccl_destroy(nb->nccl);
    nb->be->destroy(nb->be);
}

int tb_cmd_allreduce_bench(int argc, char **argv) {
    static bench b;
    memset(&b, 0, sizeof b);
    parse_args(argc, argv, &b.a);
    b.use_nccl = strcmp(b.a.comm, "nccl") == 0;
    b.t = strcmp(b.a.dtype, "double") == 0 ? EL_F64 : strcmp(b.a.dtype, "bf16") == 0 ? EL_BF16 : EL_F32;
    if (b.t == EL_BF16 && !b.use_nccl)
        tb_die("allreduce-bench: --dtype bf16 needs --comm nccl (MPI has no bfloat16 sum)");
    if (b.a.maxb < el_size(b.t))
        tb_die("allreduce-bench: -e %zu is less than one %s element (%zu bytes): give -e %zu or more", b.a.maxb,
               b.a.dtype, el_size(b.t), el_size(b.t));

    /* a rank that never reaches MPI_Init or the first collectives */
    tb_stall_guard_arm(b.a.timeout, "start-up", TB_GUARD_MPI_INIT);
    tb_comm_init(&argc, &argv, &b.info);
    tb_launch_check_singleton(&b.info);
    b.w = tb_comm_world();
    tb_stall_guard_phase("the start-up check of the results file (a broadcast from rank 0)");
    check_results_path(&b);
    b.nb.timeout = b.a.timeout;
    tb_stall_guard_phase("the launch checks and the path's set-up (collectives of every rank)");
    open_path(&b, argc, argv);

    b.hosts = calloc((size_t)b.info.world, 64);
    if (!b.hosts) TB_FATAL("out of host memory");
    tb_stall_guard_phase("the gather of the host (and device) names");
    tb_comm_gather(b.w, b.info.host, b.hosts, 64, 0);
    if (b.use_nccl) { /* the GPU of each rank: the header's rank lines, device_names */
        b.devices = calloc((size_t)b.info.world, TB_DEVICE_NAME_MAX);
        b.device_ids = calloc((size_t)b.info.world, sizeof *b.device_ids);
        if (!b.devices || !b.device_ids) TB_FATAL("out of host memory");
        tb_comm_gather(b.w, b.nb.be->device, b.devices, TB_DEVICE_NAME_MAX, 0);
        tb_comm_gather(b.w, &b.device, b.device_ids, sizeof b.device, 0);
    }
    if (b.info.world > 1) /* each all-reduce of the sweep gets --timeout (guard_next) */
        tb_stall_guard_arm(b.a.timeout, "allreduce-bench", "the sweep's first collective");
    else
        tb_stall_guard_disarm();
    if (b.info.rank == 0) print_header(&b);
    sweep(&b);
    /* after the last collective of the sweep: a rank that never gets to
     * MPI_Finalize (stuck in a driver's teardown) */
    if (b.info.world > 1)
        tb_stall_guard_arm(b.a.timeout, "end",
                           "the end of the run (MPI_Finalize returns once every rank has reached it; rank 0 "
                           "writes the results file before it)");
    else
        tb_stall_guard_disarm();
    if (b.info.rank == 0) {
        printf("# Out of bounds values : %lld %s\n", b.total_wrong, b.total_wrong ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %.3f GB/s%s%s%s\n", b.nsizes ? b.sum_bus / b.nsizes : 0.0,
               b.shared[0] ? " (" : "", b.shared, b.shared[0] ? ")" : "");
        if (b.a.results[0]) write_results(&b, argc, argv);
    }
    free(b.hosts);
    free(b.devices);
    free(b.device_ids);
    close_path(&b);
    tb_comm_finalize();
    tb_stall_guard_disarm();
    return b.total_wrong ? 1 : 0;
}
