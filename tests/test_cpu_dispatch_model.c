/* test_cpu_dispatch_model.c - the CPU backend's own loops (model/cpu/
 * cpu_kern.h) at every vector level this CPU has: each level's table
 * against a scalar statement of what the loop computes, bit for bit, on
 * lengths around the vector tails, unaligned starts, and values with NaN,
 * -0 and exact zeros (ReLU's edges). Part of test_cpu_dispatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_features.h"
#include "core/rng.h"
#include "model/cpu/cpu_kern.h"
#include "tests/tb_test.h"

static int same(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

static void fill(tb_rng *r, tb_real *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double u = tb_rng_uniform(r);
        x[i] = (tb_real)(4.0 * u - 2.0);
        if (i % 29 == 3) x[i] = 0;
        if (i % 31 == 5) x[i] = (tb_real)-0.0;
    }
}

/* Scalar lanes as cpu_kern.h states them. */
static void ref_bn_sums(const tb_real *x, size_t n, double shift, double *lanes) {
    for (size_t i = 0; i < n; i++) {
        double v = (double)x[i] - shift;
        lanes[i % CPU_KERN_LANES] += v;
        lanes[CPU_KERN_LANES + i % CPU_KERN_LANES] += v * v;
    }
}

/* One length n at element offset off: every entry of level k against the
 * scalar statements; returns the number of entries that differ. */
static int check_len(const cpu_kern *k, tb_rng *r, size_t n, size_t off) {
    size_t cap = n + off + 8;
    tb_real *x = calloc(cap, sizeof *x), *y = calloc(cap, sizeof *y), *z = calloc(cap, sizeof *z);
    tb_real *a = calloc(cap, sizeof *a), *b = calloc(cap, sizeof *b), *w = calloc(cap, sizeof *w);
    tb_real *v = calloc(cap, sizeof *v);
    fill(r, x, cap);
    fill(r, y, cap);
    fill(r, z, cap);
    if (n > 7) x[off + 7] = (tb_real)NAN;
    if (n > 11) y[off + 11] = (tb_real)NAN; /* a NaN ReLU output passes its gradient through, as torch's */
    int bad = 0;
    tb_real *X = x + off, *Y = y + off, *Z = z + off, *A = a + off, *B = b + off;

    k->relu(X, A, n); /* y = relu(x) */
    for (size_t i = 0; i < n; i++) B[i] = X[i] < 0 ? 0 : X[i];
    bad += !same(A, B, n * sizeof *A);
    for (int acc = 0; acc < 2; acc++) { /* dx (+)= y <= 0 ? 0 : dy */
        memcpy(a, z, cap * sizeof *a);
        memcpy(b, z, cap * sizeof *b);
        k->relu_backward(Y, X, A, n, acc);
        for (size_t i = 0; i < n; i++) B[i] = acc ? B[i] + (Y[i] <= 0 ? 0 : X[i]) : (Y[i] <= 0 ? 0 : X[i]);
        bad += !same(a, b, cap * sizeof *a);
    }
    k->add(X, Y, A, n);
    for (size_t i = 0; i < n; i++) B[i] = X[i] + Y[i];
    bad += !same(A, B, n * sizeof *A);
    memcpy(a, z, cap * sizeof *a);
    memcpy(b, z, cap * sizeof *b);
    k->accumulate(A, X, n);
    for (size_t i = 0; i < n; i++) B[i] += X[i];
    bad += !same(a, b, cap * sizeof *a);

    /* BatchNorm: sums (lanes carried over two calls, as over images), apply, backward */
    double la[2 * CPU_KERN_LANES] = {0}, lb[2 * CPU_KERN_LANES] = {0};
    k->bn_sums(Y, n, 0.25, la);
    k->bn_sums(Z, n, 0.25, la);
    ref_bn_sums(Y, n, 0.25, lb);
    ref_bn_sums(Z, n, 0.25, lb);
    bad += !same(la, lb, sizeof la);
    for (int zr = 0; zr < 4; zr++) {
        const tb_real *zz = zr & 1 ? Z : NULL;
        int relu = zr >> 1;
        k->bn_apply(X, zz, A, n, (tb_real)0.3, (tb_real)1.7, (tb_real)-0.2, relu);
        for (size_t i = 0; i < n; i++) {
            tb_real t = (X[i] - (tb_real)0.3) * (tb_real)1.7 + (tb_real)-0.2;
            if (zz) t += zz[i];
            B[i] = relu && t < 0 ? 0 : t;
        }
        bad += !same(A, B, n * sizeof *A);
    }
    for (int relu = 0; relu < 2; relu++) {
        double ga[2 * CPU_KERN_LANES] = {0}, gb[2 * CPU_KERN_LANES] = {0};
        k->bn_backward_sums(X, Y, Z, n, (tb_real)0.1, relu, ga);
        for (size_t i = 0; i < n; i++) {
            tb_real g = relu && Y[i] <= 0 ? 0 : Z[i];
            gb[i % CPU_KERN_LANES] += g;
            gb[CPU_KERN_LANES + i % CPU_KERN_LANES] += (double)g * ((double)X[i] - (double)(tb_real)0.1);
        }
        bad += !same(ga, gb, sizeof ga);
        /* dx = dy (aliased), dz separate and accumulated */
        memcpy(a, z, cap * sizeof *a);
        memcpy(b, z, cap * sizeof *b);
        memcpy(v, y, cap * sizeof *v);
        memcpy(w, y, cap * sizeof *w);
        k->bn_backward_apply(X, Y, A, A, v + off, n, (tb_real)0.1, (tb_real)0.05, (tb_real)0.7, (tb_real)1.3, relu, 0,
                             1);
        for (size_t i = 0; i < n; i++) {
            tb_real g = relu && Y[i] <= 0 ? 0 : B[i];
            tb_real t = (g - (tb_real)0.05 - (X[i] - (tb_real)0.1) * (tb_real)0.7) * (tb_real)1.3;
            w[off + i] = w[off + i] + g;
            B[i] = t;
        }
        bad += !same(a, b, cap * sizeof *a) + !same(v, w, cap * sizeof *v);
    }

    /* im2col / col2im rows, strides 1..3 */
    for (int s = 1; s <= 3; s++) {
        size_t m = n / (size_t)s;
        k->gather(A, X, (int)m, s);
        for (size_t i = 0; i < m; i++) B[i] = X[i * s];
        bad += !same(A, B, m * sizeof *A);
        memcpy(a, z, cap * sizeof *a);
        memcpy(b, z, cap * sizeof *b);
        k->scatter_add(A, Y, (int)m, s);
        for (size_t i = 0; i < m; i++) B[i * s] += Y[i];
        bad += !same(a, b, cap * sizeof *a);
    }

    /* SGD: plain, momentum, Nesterov */
    for (int mode = 0; mode < 3; mode++) {
        tb_real mom = mode ? (tb_real)0.9 : 0, lr = (tb_real)0.1, gs = (tb_real)0.5, wd = (tb_real)1e-4;
        memcpy(a, x, cap * sizeof *a);
        memcpy(b, x, cap * sizeof *b);
        memcpy(v, z, cap * sizeof *v);
        memcpy(w, z, cap * sizeof *w);
        if (n > 7) a[off + 7] = b[off + 7] = 1; /* a NaN parameter is not the point here */
        k->sgd(A, Y, v + off, n, lr, mom, gs, wd, mode == 2);
        for (size_t i = 0; i < n; i++) {
            tb_real g = Y[i] * gs + wd * B[i];
            if (mom == 0) {
                B[i] -= lr * g;
            } else {
                tb_real bb = mom * w[off + i] + g;
                w[off + i] = bb;
                B[i] -= lr * (mode == 2 ? g + mom * bb : bb);
            }
        }
        bad += !same(a, b, cap * sizeof *a) + !same(v, w, cap * sizeof *v);
    }
    double sa[CPU_KERN_LANES] = {0}, sb[CPU_KERN_LANES] = {0};
    k->sum(Y, n, sa);
    for (size_t i = 0; i < n; i++) sb[i % CPU_KERN_LANES] += (double)Y[i];
    bad += !same(sa, sb, sizeof sa);
    free(x);
    free(y);
    free(z);
    free(a);
    free(b);
    free(w);
    free(v);
    return bad;
}

/* Failures (printed); levels are those this CPU runs. */
int test_model_levels(const int *levels, int nlevels) {
    const size_t lens[] = {1, 2, 7, 15, 16, 17, 31, 33, 49, 63, 64, 65, 100, 196, 1003};
    for (int l = 0; l < nlevels; l++) {
        const cpu_kern *k = cpu_kern_of(levels[l]);
        TB_CHECK(k != NULL, "no cpu_kern table for level %d", levels[l]);
        if (!k) continue;
        tb_rng r;
        tb_rng_seed(&r, 5, 5);
        int bad = 0;
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
            for (size_t off = 0; off < 3; off++) bad += check_len(k, &r, lens[i], off);
        TB_CHECK(bad == 0, "cpu_kern level %s: %d loop results differ from the scalar statements",
              tb_cpu_isa_name((tb_isa_level)levels[l]), bad);
    }
    /* the comparison can fail: a sum fed one different element is caught */
    double la[CPU_KERN_LANES] = {0}, lb[CPU_KERN_LANES] = {0};
    tb_real x[40], y[40];
    for (int i = 0; i < 40; i++) x[i] = y[i] = (tb_real)(i * 0.37);
    y[23] = nextafterf((float)y[23], 100.0f);
    cpu_kern_of(levels[nlevels - 1])->sum(x, 40, la);
    cpu_kern_of(levels[nlevels - 1])->sum(y, 40, lb);
    TB_CHECK(!same(la, lb, sizeof la), "a one-ulp change in one summand went unseen");
    printf("# cpu_kern: %d checks, %d failed\n", tb_test_checks, tb_test_failures);
    return tb_test_failures; /* this file's count (tb_test.h's counters are per file) */
}
