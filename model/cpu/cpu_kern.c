/* cpu_kern.c - the CPU backend's own inner loops for one vector level (see
 * cpu_kern.h); compiled once per level by cmake/TbDispatch.cmake with that
 * level's -m flags, TB_ISA_SUFFIX and -ffp-contract=off. Plain C that the
 * compiler vectorises at the level's width ('#pragma omp simd' where a loop
 * has no reduction; the sums keep CPU_KERN_LANES explicit accumulators, so
 * no reduction order depends on the width). */
#include "model/cpu/cpu_kern.h"

#include <stdint.h>
#include <string.h>

#include "core/cpu_dispatch.h"

#define L CPU_KERN_LANES

static void relu(const tb_real *x, tb_real *y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = x[i] < 0 ? 0 : x[i];
}

static void relu_backward(const tb_real *y, const tb_real *dy, tb_real *dx, size_t n, int accumulate) {
    if (accumulate) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] += y[i] <= 0 ? 0 : dy[i];
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] = y[i] <= 0 ? 0 : dy[i];
    }
}

static void add(const tb_real *a, const tb_real *b, tb_real *y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void accumulate(tb_real *d, const tb_real *s, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) d[i] += s[i];
}

/* y <= 0 ? 0 : d, as a bit mask: the same value (+0.0f where y <= 0, d
 * where y > 0 or y is NaN), but a compare and an and that every level
 * vectorises, where the select left loops with a conditional load of d
 * scalar (BatchNorm's backward sums ran 4-13x slower than its forward's). */
#ifdef TB_REAL_DOUBLE
typedef uint64_t real_bits;
#else
typedef uint32_t real_bits;
#endif
static inline tb_real relu_mask(tb_real y, tb_real d) {
    real_bits b;
    _Static_assert(sizeof b == sizeof d, "real_bits is tb_real's width");
    memcpy(&b, &d, sizeof b);
    b &= y <= 0 ? (real_bits)0 : ~(real_bits)0;
    memcpy(&d, &b, sizeof b);
    return d;
}

/* ---- BatchNorm ------------------------------------------------------------------ */

static void bn_sums(const tb_real *x, size_t n, double shift, double *lanes) {
    double s[L], ss[L];
    for (int l = 0; l < L; l++) {
        s[l] = lanes[l];
        ss[l] = lanes[L + l];
    }
    size_t i = 0;
    for (; i + L <= n; i += L)
        for (int l = 0; l < L; l++) {
            double v = (double)x[i + l] - shift;
            s[l] += v;
            ss[l] += v * v;
        }
    for (int l = 0; i < n; i++, l++) {
        double v = (double)x[i] - shift;
        s[l] += v;
        ss[l] += v * v;
    }
    for (int l = 0; l < L; l++) {
        lanes[l] = s[l];
        lanes[L + l] = ss[l];
    }
}

static void bn_apply(const tb_real *x, const tb_real *z, tb_real *y, size_t n, tb_real mean, tb_real scale,
                     tb_real beta, int relu_on) {
    if (z) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            tb_real v = (x[i] - mean) * scale + beta + z[i];
            y[i] = relu_on && v < 0 ? 0 : v; /* keeps NaN, as torch.relu */
        }
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            tb_real v = (x[i] - mean) * scale + beta;
            y[i] = relu_on && v < 0 ? 0 : v;
        }
    }
}

static void bn_backward_sums(const tb_real *x, const tb_real *y, const tb_real *dy, size_t n, tb_real mean,
                             int relu_on, double *lanes) {
    double sg[L], sgx[L];
    for (int l = 0; l < L; l++) {
        sg[l] = lanes[l];
        sgx[l] = lanes[L + l];
    }
    const double dm = (double)mean;
    size_t i = 0;
    /* each block of L is masked first, then summed lane by lane */
    for (; i + L <= n; i += L) {
        tb_real g[L];
        if (relu_on) {
            for (int l = 0; l < L; l++) g[l] = relu_mask(y[i + l], dy[i + l]);
        } else {
            for (int l = 0; l < L; l++) g[l] = dy[i + l];
        }
        for (int l = 0; l < L; l++) {
            sg[l] += g[l];
            sgx[l] += (double)g[l] * ((double)x[i + l] - dm);
        }
    }
    for (int l = 0; i < n; i++, l++) {
        tb_real g = relu_on ? relu_mask(y[i], dy[i]) : dy[i];
        sg[l] += g;
        sgx[l] += (double)g * ((double)x[i] - dm);
    }
    for (int l = 0; l < L; l++) {
        lanes[l] = sg[l];
        lanes[L + l] = sgx[l];
    }
}

static void bn_backward_apply(const tb_real *x, const tb_real *y, const tb_real *dy, tb_real *dx, tb_real *dz,
                              size_t n, tb_real mean, tb_real gmean, tb_real q, tb_real k, int relu_on, int acc_dx,
                              int acc_dz) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        /* read everything before writing: dx or dz may be dy */
        tb_real g = relu_on ? relu_mask(y[i], dy[i]) : dy[i];
        tb_real v = (g - gmean - (x[i] - mean) * q) * k;
        if (dz) dz[i] = acc_dz ? dz[i] + g : g;
        dx[i] = acc_dx ? dx[i] + v : v;
    }
}

/* ---- im2col / col2im rows --------------------------------------------------------- */

static void gather(tb_real *dst, const tb_real *src, int n, int stride) {
    if (stride == 2) { /* the strided convs of a ResNet */
#pragma omp simd
        for (int i = 0; i < n; i++) dst[i] = src[2 * i];
    } else {
        for (int i = 0; i < n; i++) dst[i] = src[(size_t)i * stride];
    }
}

static void scatter_add(tb_real *dst, const tb_real *src, int n, int stride) {
    for (int i = 0; i < n; i++) dst[(size_t)i * stride] += src[i];
}

/* ---- SGD, sums ------------------------------------------------------------------------ */

static void sgd(tb_real *p, const tb_real *grad, tb_real *buf, size_t n, tb_real lr, tb_real mom, tb_real gs,
                tb_real wd, int nesterov) {
    if (mom == 0) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) p[i] -= lr * (grad[i] * gs + wd * p[i]);
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            tb_real g = grad[i] * gs + wd * p[i];
            tb_real b = mom * buf[i] + g;
            buf[i] = b;
            p[i] -= lr * (nesterov ? g + mom * b : b);
        }
    }
}

static void sum(const tb_real *x, size_t n, double *lanes) {
    double s[L];
    for (int l = 0; l < L; l++) s[l] = lanes[l];
    size_t i = 0;
    for (; i + L <= n; i += L)
        for (int l = 0; l < L; l++) s[l] += (double)x[i + l];
    for (int l = 0; i < n; i++, l++) s[l] += (double)x[i];
    for (int l = 0; l < L; l++) lanes[l] = s[l];
}

const cpu_kern TB_ISA_FN(cpu_kern) = {relu,    relu_backward, add,    accumulate,  bn_sums, bn_apply,
                                      bn_backward_sums, bn_backward_apply, gather, scatter_add, sgd, sum};

/* ---- the choice (once, in the baseline object) -------------------------------------------- */
#if defined(TB_ISA_IS_baseline)
#if defined(TB_CPU_DISPATCH_X86)
extern const cpu_kern cpu_kern_avx2, cpu_kern_avx512;
static const cpu_kern *const k_tables[TB_ISA_NLEVELS] = {&cpu_kern_baseline, &cpu_kern_avx2, &cpu_kern_avx512};
#else
static const cpu_kern *const k_tables[TB_ISA_NLEVELS] = {&cpu_kern_baseline, NULL, NULL};
#endif

const cpu_kern *cpu_kern_of(int level) { return level >= 0 && level < TB_ISA_NLEVELS ? k_tables[level] : NULL; }

const cpu_kern *cpu_kern_get(void) { return k_tables[tb_cpu_level()]; }
#endif
