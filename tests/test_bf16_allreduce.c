/* test_bf16_allreduce.c - what --allreduce-dtype bf16 costs in accuracy,
 * measured (the time it buys is measured on a GPU: bench/gpu_nccl.sh).
 *
 * 1. Rounding: comm/bf16.h's float32 -> bfloat16 is round to nearest even
 *    (ties, carries into the exponent, NaN, Inf, denormals), against a
 *    reference written from the definition.
 * 2. The compression hook's error, on the host: k ranks each hold a
 *    gradient vector (per-tensor scales from 1e-4 to 1e-1, normal values,
 *    as ResNet gradients spread); the hook casts each to bf16 and sums them
 *    as NCCL's ring does, each partial sum rounded to bf16 before the next
 *    hop; the result is compared with the float32 sum. Printed per k: the
 *    relative L2 error of the summed vector, and the median and 99th
 *    percentile relative element error. Bounds: the L2 error within
 *    (1 + k/2) units of bf16 rounding (2^-9 relative each); float32's own
 *    error is ~2^-24.
 * 3. Under mpirun (np 2, 3): tb_comm_allreduce_sum_bf16 (MPI's user op,
 *    the MPI path's bf16 sum) equals the exact pairwise rounding with 2
 *    ranks and is within the same bound with 3. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bf16.h"
#include "comm/comm.h"
#include "core/rng.h"
#include "tests/tb_test.h"

/* Reference rounding from the definition: the two bf16 neighbours of f,
 * the nearer one, the even one on a tie. */
static uint16_t ref_bf16(float f) {
    if (isnan(f)) return 0x7fc0;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    if ((u & 0xffffu) == 0) return lo;
    double vh = (double)tb_bf16_to_f32(hi);
    if (isinf(vh)) vh = copysign(ldexp(1.0, 128), (double)f); /* the next step past the largest finite */
    double dl = fabs((double)tb_bf16_to_f32(lo) - f), dh = fabs(vh - f);
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

static void check_rounding(void) {
    tb_rng r;
    tb_rng_seed(&r, 11, 0);
    int bad = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)tb_rng_u64(&r);
        if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u; /* exact ties */
        float f;
        memcpy(&f, &u, 4);
        if (isnan(f)) continue;
        uint16_t got = tb_f32_to_bf16(f), want = ref_bf16(f);
        if (got != want && bad++ < 5) printf("  %08x: got %04x want %04x\n", u, got, want);
    }
    TB_CHECK(bad == 0, "%d of 2e6 random floats round differently from the definition", bad);
    float nan = NAN, inf = INFINITY;
    TB_CHECK(isnan(tb_bf16_to_f32(tb_f32_to_bf16(nan))), "NaN stays NaN");
    TB_CHECK(isinf(tb_bf16_to_f32(tb_f32_to_bf16(inf))), "Inf stays Inf");
    TB_CHECK(tb_bf16_to_f32(tb_f32_to_bf16(1.0f + 1.0f / 256)) == 1.0f, "1 + 2^-8 ties to even 1");
    TB_CHECK(tb_bf16_to_f32(tb_f32_to_bf16(1.0f + 3.0f / 256)) == 1.0f + 4.0f / 256, "1 + 3*2^-8 ties to even");
}

/* Gradient-like values of rank q: tensors of 4096 elements with scales
 * spread over three decades. */
static float grad_value(int q, size_t i) {
    tb_rng r;
    tb_rng_seed(&r, 1000 + (uint64_t)q, i);
    double scale = pow(10.0, -4.0 + 3.0 * (double)((i / 4096) % 16) / 15.0);
    return (float)(scale * tb_rng_normal(&r));
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The bf16 ring sum of element i over k ranks, starting at rank (i mod k),
 * each hop adding in float32 and rounding to bf16. */
static float ring_bf16(int k, size_t i) {
    int q0 = (int)(i % (size_t)k);
    uint16_t acc = tb_f32_to_bf16(grad_value(q0, i));
    for (int h = 1; h < k; h++) {
        float mine = tb_bf16_to_f32(tb_f32_to_bf16(grad_value((q0 + h) % k, i)));
        acc = tb_f32_to_bf16(tb_bf16_to_f32(acc) + mine);
    }
    return tb_bf16_to_f32(acc);
}

static void check_hook_error(void) {
    const size_t n = 65536;
    const int ks[] = {2, 4, 8, 16, 64};
    double *rel = malloc(n * sizeof *rel);
    printf("# bf16 all-reduce vs float32 sum, %zu gradient-like elements (scales 1e-4..1e-1)\n", n);
    printf("# %5s %14s %14s %14s %12s\n", "ranks", "rel L2 err", "median rel", "p99 rel", "bound L2");
    for (size_t kk = 0; kk < sizeof ks / sizeof ks[0]; kk++) {
        int k = ks[kk];
        double num = 0, den = 0;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            double exact = 0;
            for (int q = 0; q < k; q++) exact += grad_value(q, i);
            float f32 = (float)exact;
            double e = (double)ring_bf16(k, i) - (double)f32;
            num += e * e;
            den += (double)f32 * f32;
            if (f32 != 0) rel[m++] = fabs(e / f32);
        }
        qsort(rel, m, sizeof *rel, cmp_d);
        double l2 = sqrt(num / den), bound = (1.0 + k / 2.0) * ldexp(1.0, -9);
        printf("  %5d %14.3e %14.3e %14.3e %12.3e\n", k, l2, rel[m / 2], rel[m * 99 / 100], bound);
        TB_CHECK(l2 <= bound, "%d ranks: relative L2 error %.3e above (1 + k/2) x 2^-9 = %.3e", k, l2, bound);
        TB_CHECK(l2 >= ldexp(1.0, -12), "%d ranks: relative L2 error %.3e implausibly small for bf16", k, l2);
    }
    free(rel);
}

/* Under mpirun: the MPI path's bf16 sum. */
static void check_mpi_sum(void) {
    tb_comm *w = tb_comm_world();
    int rank = tb_comm_rank(w), k = tb_comm_size(w);
    if (k < 2) return;
    const size_t n = 100003; /* odd, more than one MPI segment in most libraries */
    uint16_t *buf = malloc(n * sizeof *buf);
    for (size_t i = 0; i < n; i++) buf[i] = tb_f32_to_bf16(grad_value(rank, i));
    tb_comm_allreduce_sum_bf16(w, buf, n);
    size_t exact_mismatch = 0;
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double exact = 0;
        for (int q = 0; q < k; q++) exact += grad_value(q, i);
        double e = (double)tb_bf16_to_f32(buf[i]) - (double)(float)exact;
        num += e * e;
        den += exact * exact;
        if (k == 2) { /* one addition: the result is determined */
            uint16_t want = tb_f32_to_bf16(tb_bf16_to_f32(tb_f32_to_bf16(grad_value(0, i))) +
                                           tb_bf16_to_f32(tb_f32_to_bf16(grad_value(1, i))));
            exact_mismatch += buf[i] != want;
        }
    }
    double l2 = sqrt(num / den), bound = (1.0 + k / 2.0) * ldexp(1.0, -9);
    if (rank == 0) printf("# MPI bf16 sum over %d ranks: relative L2 error %.3e (bound %.3e)\n", k, l2, bound);
    TB_CHECK(exact_mismatch == 0, "2 ranks: %zu elements differ from the pairwise bf16 rounding", exact_mismatch);
    TB_CHECK(l2 <= bound, "MPI bf16 sum over %d ranks: relative L2 error %.3e above %.3e", k, l2, bound);
    free(buf);
}

int main(int argc, char **argv) {
    tb_comm_info info;
    tb_comm_init(&argc, &argv, &info);
    if (info.rank == 0) {
        check_rounding();
        check_hook_error();
    }
    check_mpi_sum();
    int64_t failed = tb_test_failures;
    tb_comm_allreduce_max(tb_comm_world(), &failed, 1, TB_INT64);
    int rc = info.rank == 0 ? tb_test_exit("bf16_allreduce") : (failed ? 1 : 0);
    tb_comm_finalize();
    return rc;
}
