/* cmd_allreduce_bench.c - `trainbench allreduce-bench`: nccl-tests style
 * all-reduce sweep on the path training uses (MPI on host buffers here, the
 * gradient thread's non-blocking call and wait, comm/grad_sync.h):
 *
 *   #       size         count    type   redop     time   algbw   busbw  #wrong
 *   #        (B)    (elements)                     (us)  (GB/s)  (GB/s)
 *
 * time: mean per all-reduce over --iters after --warmup, the slowest rank's;
 * algbw = size / time; busbw = algbw * 2(n-1)/n (what each link carries);
 * #wrong: elements of the last timed all-reduce that differ from the exact
 * sum (inputs are small integers, so float sums are exact).
 *
 * The sum is in place, as in training, so every all-reduce (warm-up and
 * timed) starts from the inputs again: the buffer is restored from a copy
 * and the ranks meet at a barrier, neither of them timed; each all-reduce is
 * timed on its own. Repeating an in-place sum without that multiplies the
 * values by the world size each time (inf after ~80 float iterations on 3
 * ranks), and would time arithmetic on inf.
 *
 * --results FILE: the table as a results file (kind allreduce-bench,
 * provenance attributes, /allreduce with bytes, count, time_us, algbw_GBps,
 * busbw_GBps, wrong), which `trainbench project --fabric fit:FILE` fits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/grad_sync.h"
#include "src/cli.h"
#include "src/commands.h"
#include "src/launch_check.h"
#include "src/provenance.h"
#include "src/results.h"
#include "src/core/log.h"
#include "src/core/timer.h"

static double input_value(int rank, size_t i) { return (double)((i + 3 * (size_t)rank) % 64); }

static void fill(void *buf, size_t count, tb_comm_type t, int rank) {
    for (size_t i = 0; i < count; i++) {
        if (t == TB_FLOAT32) ((float *)buf)[i] = (float)input_value(rank, i);
        else ((double *)buf)[i] = input_value(rank, i);
    }
}

static long long count_wrong(const void *buf, size_t count, tb_comm_type t, int world) {
    long long wrong = 0;
    for (size_t i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < world; r++) want += input_value(r, i);
        double got = t == TB_FLOAT32 ? ((const float *)buf)[i] : ((const double *)buf)[i];
        wrong += got != want;
    }
    return wrong;
}

int tb_cmd_allreduce_bench(int argc, char **argv) {
    size_t minb = 8, maxb = (size_t)128 << 20, factor_sz = 2;
    int iters = 20, warmup = 5, check = 1;
    char dtype[TB_OPT_STR_MAX] = "float", results[TB_OPT_STR_MAX] = "", t_start[32];
    tb_utc_now(t_start, sizeof t_start);
    const tb_opt opts[] = {
        {"minbytes", TB_OPT_SIZE, &minb, 1, 1e12, NULL, "smallest message"},
        {"maxbytes", TB_OPT_SIZE, &maxb, 1, 1e12, NULL, "largest message"},
        {"stepfactor", TB_OPT_SIZE, &factor_sz, 2, 1024, NULL, "multiply the size by this"},
        {"iters", TB_OPT_INT, &iters, 1, 1000000, NULL, "timed all-reduces per size"},
        {"warmup", TB_OPT_INT, &warmup, 0, 1000000, NULL, "untimed all-reduces per size"},
        {"check", TB_OPT_INT, &check, 0, 1, NULL, "verify every result (1) or not (0)"},
        {"dtype", TB_OPT_CHOICE, dtype, 0, 0, "float|double", "element type"},
        {"results", TB_OPT_STRING, results, 0, 0, NULL, "also write the table to this HDF5 results file"},
        {NULL, 0, NULL, 0, 0, NULL, NULL},
    };
    tb_cli_parse_aliased("allreduce-bench",
                         "trainbench allreduce-bench [-b MIN] [-e MAX] [-f FACTOR] [options]", argc,
                         argv, opts, "b=minbytes,e=maxbytes,f=stepfactor,n=iters,w=warmup,c=check,d=dtype");
    if (minb > maxb) tb_die("allreduce-bench: -b %zu is larger than -e %zu", minb, maxb);

    tb_comm_info info;
    tb_comm_init(&argc, &argv, &info);
    tb_launch_check_singleton(&info);
    tb_launch_check_ranks(&info, NULL, "allreduce-bench", argc, argv);
    tb_comm *w = tb_comm_world();
    tb_comm_type t = strcmp(dtype, "double") == 0 ? TB_FLOAT64 : TB_FLOAT32;
    size_t es = t == TB_FLOAT32 ? 4 : 8;
    char lib[256];
    tb_comm_library_version(lib, sizeof lib);
    double poll_s = tb_grad_sync_poll_s(); /* the gradient thread's call (grad_sync.h) */

    char *hosts = calloc((size_t)info.world, 64);
    tb_table tab;
    memset(&tab, 0, sizeof tab);
    tb_comm_gather(w, info.host, hosts, 64, 0);
    if (info.rank == 0) {
        printf("# trainbench allreduce-bench: %d ranks, path mpi-host (%s), in place, %s sum, ", info.world,
               lib, dtype);
        if (poll_s > 0)
            printf("MPI_Iallreduce tested every <= %.0f us (TB_GRAD_SYNC_POLL_US), as training's\n", 1e6 * poll_s);
        else
            printf("blocking MPI_Allreduce (TB_GRAD_SYNC_POLL_US=0), as training's\n");
        for (int r = 0; r < info.world; r++) printf("#  Rank %2d on %s\n", r, hosts + 64 * r);
        if (results[0]) tb_table_init(&tab, "allreduce", "bytes:i,count:i,time_us,algbw_GBps,busbw_GBps,wrong:i");
        printf("#\n# %12s %12s %7s %7s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "time",
               "algbw", "busbw", "#wrong");
        printf("# %12s %12s %7s %7s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
               "(GB/s)", "");
    }

    void *buf = malloc(maxb + es), *inputs = malloc(maxb + es);
    if (!buf || !inputs) tb_die("allreduce-bench: cannot allocate 2 x %zu bytes; lower -e", maxb);
    double sum_bus = 0;
    int nsizes = 0;
    long long total_wrong = 0;
    for (size_t bytes = minb; bytes <= maxb; bytes *= factor_sz) {
        size_t count = bytes / es;
        if (count == 0) count = 1;
        fill(inputs, count, t, info.rank);
        double dt = 0;
        for (int i = 0; i < warmup + iters; i++) {
            memcpy(buf, inputs, count * es); /* untimed: back to the inputs */
            tb_comm_barrier(w);
            double t0 = tb_now();
            tb_comm_allreduce_sum_idle(w, buf, count, t, poll_s);
            if (i >= warmup) dt += tb_now() - t0;
        }
        dt /= iters;
        tb_comm_allreduce_max(w, &dt, 1, TB_FLOAT64);

        long long wrong = 0;
        if (check) { /* buf holds the last timed all-reduce */
            wrong = count_wrong(buf, count, t, info.world);
            int64_t wsum = wrong;
            tb_comm_allreduce_sum(w, &wsum, 1, TB_INT64);
            wrong = wsum;
        }
        total_wrong += wrong;
        double algbw = (double)(count * es) / dt * 1e-9;
        double busbw = algbw * (info.world > 1 ? 2.0 * (info.world - 1) / info.world : 0.0);
        sum_bus += busbw;
        nsizes++;
        if (info.rank == 0) {
            char wrong_s[24] = "N/A";
            if (check) snprintf(wrong_s, sizeof wrong_s, "%lld", wrong);
            printf("  %12zu %12zu %7s %7s %10.2f %8.3f %8.3f %7s\n", count * es, count,
                   t == TB_FLOAT32 ? "float" : "double", "sum", dt * 1e6, algbw, busbw, wrong_s);
            double row[6] = {(double)(count * es), (double)count, dt * 1e6, algbw, busbw,
                             check ? (double)wrong : -1};
            if (results[0]) tb_table_row(&tab, row, NULL);
        }
        if (bytes > maxb / factor_sz) break;
    }
    if (info.rank == 0) {
        printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %.3f GB/s\n", nsizes ? sum_bus / nsizes : 0.0);
        if (results[0]) {
            tb_attrs a;
            memset(&a, 0, sizeof a);
            tb_backend none = {.name = "none"};
            snprintf(none.device, sizeof none.device, "host buffers (%s sum)", dtype);
            tb_provenance_fill(&a, "allreduce-bench", argc, argv, &none, info.world, hosts);
            char t_end[32];
            tb_utc_now(t_end, sizeof t_end);
            tb_attrs_str(&a, "kind", "allreduce-bench");
            tb_attrs_str(&a, "start_time", t_start);
            tb_attrs_str(&a, "end_time", t_end);
            tb_attrs_str(&a, "status", total_wrong ? "wrong results" : "complete");
            tb_attrs_str(&a, "path", "mpi-host");
            tb_attrs_str(&a, "dtype", dtype);
            tb_attrs_int(&a, "iters", iters);
            tb_attrs_int(&a, "warmup", warmup);
            const tb_table *tabs[1] = {&tab};
            tb_results_write(results, &a, tabs, 1);
            tb_attrs_free(&a);
            tb_table_free(&tab);
            printf("# results written to %s\n", results);
        }
    }
    free(hosts);
    free(buf);
    free(inputs);
    tb_comm_finalize();
    return total_wrong ? 1 : 0;
}
