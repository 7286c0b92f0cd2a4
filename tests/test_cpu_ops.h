/* test_cpu_ops.h - what the two files of test_cpu_ops share (see
 * test_cpu_ops.c for the method and tolerances): checks and their report,
 * random data, finite differences, expected failures. */
#ifndef TB_TEST_CPU_OPS_H
#define TB_TEST_CPU_OPS_H

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/rng.h"
#include "model/cpu/cpu_backend.h"
#include "model/cpu/cpu_internal.h" /* to force the conv code paths */

#define FWD_ATOL 1e-5
#define FWD_RTOL 1e-5
#define FD_ATOL 1e-4
#define FD_RTOL 1e-4
#define FD_H 1e-6          /* finite-difference step (double reference) */
#define FD_SAMPLES 400     /* entries checked per gradient at most */

extern int g_checks, g_failed;
extern tb_rng g_rng;

/* ---- reporting ------------------------------------------------------------- */

static inline void report(const char *what, double maxabs, double maxrel, int ok) {
    g_checks++;
    if (!ok) g_failed++;
    printf("%-64s maxabs %9.2e  maxrel %9.2e  %s\n", what, maxabs, maxrel, ok ? "PASS" : "FAIL");
    fflush(stdout);
}

/* got[idx[i]] against ref[i] (+ base[idx[i]] when base), i < n; idx NULL:
 * the identity. */
static inline int check_at(const char *what, const float *got, const size_t *idx, const double *ref,
                    size_t n, const double *base, double atol, double rtol) {
    double maxabs = 0.0, maxrel = 0.0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        size_t j = idx ? idx[i] : i;
        double r = ref[i] + (base ? base[j] : 0.0);
        double e = fabs((double)got[j] - r);
        if (!(e <= atol + rtol * fabs(r))) ok = 0; /* NaN fails */
        if (!(e <= maxabs)) maxabs = e;
        if (r != 0.0 && !(e / fabs(r) <= maxrel)) maxrel = e / fabs(r);
    }
    report(what, maxabs, maxrel, ok);
    return ok;
}

static inline int check_all(const char *what, const float *got, const double *ref, size_t n,
                     double atol, double rtol) {
    return check_at(what, got, NULL, ref, n, NULL, atol, rtol);
}

/* ---- data ---------------------------------------------------------------------- */

/* n uniform values in [lo, hi), rounded to float: d gets the same values. */
static inline void fill_uniform(float *f, double *d, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(lo + (hi - lo) * tb_rng_uniform(&g_rng));
        if (d) d[i] = f[i];
    }
}

static inline void fill_nan(float *f, size_t n) {
    for (size_t i = 0; i < n; i++) f[i] = NAN;
}

static inline double *dalloc(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) tb_die("test: out of memory");
    return p;
}

static inline tb_tensor tensor(void *data, int n, int c, int h, int w) {
    tb_tensor t = {data, n, c, h, w, TB_F32, TB_NCHW};
    return t;
}

/* Up to FD_SAMPLES entry indices of an n-entry tensor: all when few. */
static inline size_t pick(size_t n, size_t *idx) {
    if (n <= FD_SAMPLES) {
        for (size_t i = 0; i < n; i++) idx[i] = i;
        return n;
    }
    for (size_t i = 0; i < FD_SAMPLES; i++) idx[i] = (size_t)tb_rng_below(&g_rng, n);
    return FD_SAMPLES;
}

/* Central differences of L (reading v through ctx) at the entries idx. */
typedef double (*loss_fn)(void *ctx);
static inline void fd(loss_fn L, void *ctx, double *v, const size_t *idx, size_t ns, double *g) {
    for (size_t i = 0; i < ns; i++) {
        double save = v[idx[i]];
        v[idx[i]] = save + FD_H;
        double lp = L(ctx);
        v[idx[i]] = save - FD_H;
        double lm = L(ctx);
        v[idx[i]] = save;
        g[i] = (lp - lm) / (2.0 * FD_H);
    }
}

static inline double dot(const double *a, const double *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ---- expected failures ----------------------------------------------------------- */

extern jmp_buf g_jmp;
extern volatile int g_expect_fatal;

static inline void abort_hook(int code) {
    if (g_expect_fatal) longjmp(g_jmp, 1);
    exit(code);
}

/* Runs stmt, which must end in tb_die / TB_FATAL (its message is printed). */
#define EXPECT_FATAL(what, stmt)                                                   \
    do {                                                                           \
        printf("# expecting an error from: %s\n", what);                           \
        fflush(stdout);                                                            \
        g_expect_fatal = 1;                                                        \
        if (setjmp(g_jmp) == 0) {                                                  \
            stmt;                                                                  \
            g_expect_fatal = 0;                                                    \
            report(what, 0.0, 0.0, 0);                                             \
        } else {                                                                   \
            g_expect_fatal = 0;                                                    \
            report(what, 0.0, 0.0, 1);                                             \
        }                                                                          \
    } while (0)

static inline int conv_out(int in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }

typedef struct {
    int n, c, h, w, k, s, p;
} pool_case;

/* in test_cpu_ops_layers.c */
void test_relu(tb_backend *be);
void test_add(tb_backend *be);
void test_maxpool(tb_backend *be, const pool_case *q);
void test_avgpool(tb_backend *be);
void test_linear(tb_backend *be);
void test_xent(tb_backend *be, double eps, double gscale, double spread);
void test_sgd(tb_backend *be, float momentum, int nesterov);
void test_backend_contract(tb_backend *be);

#endif
