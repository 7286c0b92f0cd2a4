/* test_grad_sync.c - the bucketed all-reduce under mpirun (np 1, 2, 3):
 * buffers of odd sizes, tensor boundaries that straddle bucket edges, ready
 * ranges reported out of order and in pieces, overlap on and off, float32
 * and float64. Each rank fills its buffer with values that depend on rank
 * and index; after finish every element must equal the exact sum over ranks
 * (integers below 2^24, so float sums are exact). Also checks the blocking
 * collectives and sub-communicators of the first n ranks.
 *
 * Mixed orders: in each step every rank reports its ranges in an order of
 * its own (descending as backward does, ascending, random, or the whole
 * buffer at once as a rank without samples does). The buckets must still
 * be summed pairwise with the same bucket on every rank: a mismatch shows
 * as wrong sums (values depend on the index) or as MPI_ERR_TRUNCATE, which
 * aborts the job.
 *
 * Every case runs twice: with the gradient thread's default wait (a
 * non-blocking all-reduce tested with sleeps, TB_GRAD_SYNC_POLL_US unset)
 * and with MPI's blocking all-reduce (TB_GRAD_SYNC_POLL_US=0); one case
 * also with long sleeps (5 ms). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/grad_sync.h"
#include "core/log.h"
#include "core/rng.h"
#include "tests/tb_test.h"

static double value(int rank, size_t i) { return (double)((i * 7 + (size_t)rank * 13) % 1000); }

typedef enum { ORDER_DESCENDING, ORDER_ASCENDING, ORDER_RANDOM, ORDER_WHOLE, ORDER_COUNT } report_order;
static const char *const order_name[ORDER_COUNT] = {"descending", "ascending", "random", "whole"};

/* Reports every tensor of off[0..ntensors] as ready, each in two pieces
 * (the second piece first), tensors in the given order. */
static void report_ready(tb_grad_sync *gs, const size_t *off, int ntensors, report_order order,
                         tb_rng *r) {
    if (order == ORDER_WHOLE) {
        tb_grad_sync_ready(gs, 0, off[ntensors]);
        return;
    }
    int *perm = malloc((size_t)ntensors * sizeof *perm);
    for (int k = 0; k < ntensors; k++) perm[k] = order == ORDER_ASCENDING ? k : ntensors - 1 - k;
    if (order == ORDER_RANDOM)
        for (int k = ntensors - 1; k > 0; k--) {
            int j = (int)tb_rng_below(r, (uint64_t)k + 1), tmp = perm[k];
            perm[k] = perm[j];
            perm[j] = tmp;
        }
    for (int q = 0; q < ntensors; q++) {
        int k = perm[q];
        size_t a = off[k], z = off[k + 1], mid = a + (z - a) / 3;
        if (z > mid) tb_grad_sync_ready(gs, mid, z - mid);
        if (mid > a) tb_grad_sync_ready(gs, a, mid - a);
    }
    free(perm);
}

/* mixed: each rank reports in its own order (rank + step picks it);
 * otherwise every rank reports descending, as backward does. */
/* The cut itself, by hand: 10 tensors of 10 floats (40 bytes each), cap 100
 * bytes. Without a first-bucket cap, from the end: [70,100) [40,70) [10,40)
 * [0,10); with 40 bytes, the first bucket cut is one tensor, [90,100), and
 * the later cut points move: [60,90) [30,60) [0,30). A first cap at or
 * above the bucket cap changes nothing. */
static void cut_case(tb_comm *c) {
    size_t off[11];
    for (int i = 0; i <= 10; i++) off[i] = (size_t)i * 10;
    float buf[100];
    static const size_t firsts[] = {0, 40, 100, 400};
    static const size_t want[][5] = {{0, 10, 40, 70, 100}, {0, 30, 60, 90, 100}, {0, 10, 40, 70, 100},
                                     {0, 10, 40, 70, 100}};
    for (int k = 0; k < 4; k++) {
        tb_grad_sync *gs = tb_grad_sync_create(c, buf, 100, TB_FLOAT32, off, 10, 100, firsts[k], 1);
        int nb = tb_grad_sync_bucket_count(gs);
        TB_CHECK(nb == 4, "cap 100 B, first %zu B: %d buckets, expected 4", firsts[k], nb);
        for (int b = 0; b < nb && b < 4; b++) {
            size_t o, n;
            tb_grad_sync_bucket(gs, b, &o, &n);
            TB_CHECK(o == want[k][b] && o + n == want[k][b + 1], "cap 100 B, first %zu B: bucket %d is [%zu, %zu), "
                     "expected [%zu, %zu)", firsts[k], b, o, o + n, want[k][b], want[k][b + 1]);
        }
        tb_grad_sync_destroy(gs);
    }
}

static void run_case(tb_comm *c, size_t count, int ntensors, size_t bucket_bytes, size_t first_bytes,
                     int overlap, tb_comm_type t, uint64_t seed, int mixed) {
    int rank = tb_comm_rank(c), size = tb_comm_size(c);
    size_t es = t == TB_FLOAT32 ? 4 : 8;
    /* random tensor boundaries, identical on every rank */
    tb_rng r;
    tb_rng_seed(&r, seed, 1);
    size_t *off = malloc((size_t)(ntensors + 1) * sizeof *off);
    off[0] = 0;
    for (int i = 1; i < ntensors; i++) off[i] = tb_rng_below(&r, count);
    off[ntensors] = count;
    for (int i = 1; i < ntensors; i++) /* sort */
        for (int j = i; j > 1 && off[j] < off[j - 1]; j--) {
            size_t tmp = off[j];
            off[j] = off[j - 1];
            off[j - 1] = tmp;
        }
    char *buf = malloc(count * es);
    tb_grad_sync *gs = tb_grad_sync_create(c, buf, count, t, off, ntensors, bucket_bytes, first_bytes, overlap);
    int nsteps = mixed ? 2 * ORDER_COUNT : 3;
    tb_rng order_rng;
    tb_rng_seed(&order_rng, seed, 100 + (uint64_t)rank); /* a different random order per rank */
    for (int step = 0; step < nsteps; step++) {
        for (size_t i = 0; i < count; i++) {
            double v = value(rank, i + (size_t)step);
            if (t == TB_FLOAT32) ((float *)buf)[i] = (float)v;
            else ((double *)buf)[i] = v;
        }
        tb_grad_sync_begin(gs);
        report_order order = mixed ? (report_order)((rank + step) % ORDER_COUNT) : ORDER_DESCENDING;
        report_ready(gs, off, ntensors, order, &order_rng);
        tb_grad_sync_step st;
        tb_grad_sync_finish(gs, &st);
        size_t wrong = 0;
        for (size_t i = 0; i < count; i++) {
            double want = 0;
            for (int q = 0; q < size; q++) want += value(q, i + (size_t)step);
            double got = t == TB_FLOAT32 ? ((float *)buf)[i] : ((double *)buf)[i];
            wrong += got != want;
        }
        TB_CHECK(wrong == 0, "count %zu tensors %d bucket %zu first %zu overlap %d %s step %d, rank %d "
                 "reporting %s: %zu wrong", count, ntensors, bucket_bytes, first_bytes, overlap,
                 t == TB_FLOAT32 ? "f32" : "f64", step, rank, order_name[order], wrong);
        TB_CHECK(st.buckets == tb_grad_sync_bucket_count(gs), "bucket count reported");
    }
    /* buckets tile the buffer and hold whole tensors */
    size_t next = 0;
    for (int i = 0; i < tb_grad_sync_bucket_count(gs); i++) {
        size_t o, n;
        tb_grad_sync_bucket(gs, i, &o, &n);
        int on_boundary = 0;
        for (int k = 0; k <= ntensors; k++) on_boundary |= off[k] == o;
        TB_CHECK(o == next && on_boundary, "bucket %d starts at %zu (expected %zu, tensor start)", i, o, next);
        next = o + n;
    }
    TB_CHECK(next == count, "buckets cover %zu of %zu", next, count);
    tb_grad_sync_destroy(gs);
    free(buf);
    free(off);
}

int main(int argc, char **argv) {
    tb_comm_info info;
    tb_comm_init(&argc, &argv, &info);
    tb_comm *w = tb_comm_world();
    printf("# rank %d of %d on %s\n", info.rank, info.world, info.host);

    static const size_t counts[] = {1, 7, 1023, 100003};
    static const int ntens[] = {1, 3, 17, 161};
    static const size_t bbytes[] = {4, 100, 4096, 1 << 20};
    static const char *const polls[] = {NULL, "0"};
    for (int pi = 0; pi < 2; pi++) {
        if (polls[pi]) setenv("TB_GRAD_SYNC_POLL_US", polls[pi], 1);
        else unsetenv("TB_GRAD_SYNC_POLL_US");
        double want = polls[pi] ? 0 : 200e-6;
        TB_CHECK(tb_grad_sync_poll_s() == want, "TB_GRAD_SYNC_POLL_US=%s gives %g s",
                 polls[pi] ? polls[pi] : "(unset)", tb_grad_sync_poll_s());
        for (int ci = 0; ci < 4; ci++)
            for (int bi = 0; bi < 4; bi++)
                for (int ov = 0; ov < 2; ov++) {
                    int nt = ntens[ci] > (int)counts[ci] ? (int)counts[ci] : ntens[ci];
                    for (int mixed = 0; mixed < 2; mixed++)
                        run_case(w, counts[ci], nt, bbytes[bi], mixed ? bbytes[bi] / 3 : 0, ov,
                                 ov ? TB_FLOAT32 : TB_FLOAT64, (uint64_t)(ci * 10 + bi), mixed);
                }
    }
    setenv("TB_GRAD_SYNC_POLL_US", "5000", 1);
    TB_CHECK(tb_grad_sync_poll_s() == 5e-3, "TB_GRAD_SYNC_POLL_US=5000 gives %g s", tb_grad_sync_poll_s());
    run_case(w, 100003, 161, 4096, 1000, 1, TB_FLOAT32, 7, 1);
    unsetenv("TB_GRAD_SYNC_POLL_US");

    cut_case(w);

    /* the sleeping all-reduce on its own, every type it takes */
    {
        double d[5] = {1, 2, 3, 4, info.rank};
        tb_comm_allreduce_sum_idle(w, d, 5, TB_FLOAT64, 1e-3);
        double rs = (double)info.world * (info.world - 1) / 2;
        TB_CHECK(d[0] == info.world && d[3] == 4.0 * info.world && d[4] == rs, "allreduce_sum_idle f64 %g %g",
                 d[0], d[4]);
        int64_t q[2] = {info.rank, 1};
        tb_comm_allreduce_sum_idle(w, q, 2, TB_INT64, 0);
        TB_CHECK(q[1] == info.world && q[0] == (int64_t)rs, "allreduce_sum_idle int64 blocking %lld",
                 (long long)q[1]);
    }

    /* blocking collectives */
    int64_t v[3] = {info.rank, -info.rank, 5};
    tb_comm_allreduce_sum(w, v, 3, TB_INT64);
    int64_t s = (int64_t)info.world * (info.world - 1) / 2;
    TB_CHECK(v[0] == s && v[1] == -s && v[2] == 5 * info.world, "allreduce int64 %lld", (long long)v[0]);
    double mx = info.rank;
    tb_comm_allreduce_max(w, &mx, 1, TB_FLOAT64);
    TB_CHECK(mx == info.world - 1, "allreduce max %g", mx);
    float b[4] = {0};
    if (info.rank == 0) b[0] = 1.5f, b[3] = -2;
    tb_comm_bcast(w, b, 4, TB_FLOAT32, 0);
    TB_CHECK(b[0] == 1.5f && b[3] == -2, "bcast");
    int *all = malloc((size_t)info.world * sizeof *all);
    int me = 100 + info.rank;
    tb_comm_allgather(w, &me, all, sizeof me);
    for (int q = 0; q < info.world; q++) TB_CHECK(all[q] == 100 + q, "allgather[%d] = %d", q, all[q]);
    free(all);
    /* sub-communicators of the first n ranks */
    for (int n = 1; n <= info.world; n++) {
        tb_comm *sub = tb_comm_first_n(w, n);
        TB_CHECK((sub != NULL) == (info.rank < n), "membership of first %d", n);
        if (sub) {
            TB_CHECK(tb_comm_size(sub) == n && tb_comm_rank(sub) == info.rank, "sub %d: size %d rank %d",
                     n, tb_comm_size(sub), tb_comm_rank(sub));
            run_case(sub, 1023, 17, 100, 0, 1, TB_FLOAT32, 99, 1);
            tb_comm_free(sub);
        }
        tb_comm_barrier(w);
    }

    /* every rank's verdict decides every rank's exit status */
    int64_t failed = tb_test_failures;
    tb_comm_allreduce_sum(w, &failed, 1, TB_INT64);
    int rc = tb_test_exit("test_grad_sync");
    tb_comm_finalize();
    return failed ? 1 : rc;
}
