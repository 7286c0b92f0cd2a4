/* cpu_kern.h - the CPU backend's own inner loops (everything that is not
 * BLAS), one table per vector level (core/cpu_dispatch.h): element-wise
 * ReLU and add, BatchNorm's statistics, normalisation and backward, the
 * im2col / col2im row copies, SGD, the pooling sums.
 *
 * model/cpu/cpu_kern.c is compiled once per level (baseline SSE2, avx2,
 * avx512), with no fused multiply-add anywhere; the ops (cpu_*.c) split the
 * work across OpenMP threads and call the table of tb_cpu_level() on their
 * slices. Every level computes the same bits: element-wise loops are the
 * same IEEE operations at any width, and the sums keep CPU_KERN_LANES
 * separate double accumulators (element i of a call goes to lane i mod
 * CPU_KERN_LANES), which the caller adds in a fixed order
 * (cpu_kern_lanes_sum), instead of a reduction whose order follows the
 * vector width. tests/test_cpu_dispatch holds the levels to each other. */
#ifndef TB_CPU_KERN_H
#define TB_CPU_KERN_H

#include <stddef.h>

#include "model/backend.h"

#define CPU_KERN_LANES 16

typedef struct {
    /* y[i] = x[i] < 0 ? 0 : x[i] (NaN stays NaN) */
    void (*relu)(const tb_real *x, tb_real *y, size_t n);
    /* dx[i] (+)= y[i] <= 0 ? 0 : dy[i] (torch's threshold_backward) */
    void (*relu_backward)(const tb_real *y, const tb_real *dy, tb_real *dx, size_t n, int accumulate);
    /* y[i] = a[i] + b[i] */
    void (*add)(const tb_real *a, const tb_real *b, tb_real *y, size_t n);
    /* d[i] += s[i] */
    void (*accumulate)(tb_real *d, const tb_real *s, size_t n);

    /* BatchNorm forward statistics: v = (double)x[i] - shift;
     * lanes[l] += v, lanes[LANES + l] += v * v, l = i mod LANES */
    void (*bn_sums)(const tb_real *x, size_t n, double shift, double *lanes);
    /* y[i] = act((x[i] - mean) * scale + beta (+ z[i])), act = ReLU when relu; z may be NULL */
    void (*bn_apply)(const tb_real *x, const tb_real *z, tb_real *y, size_t n, tb_real mean, tb_real scale,
                     tb_real beta, int relu);
    /* BatchNorm backward sums: g = relu && y[i] <= 0 ? 0 : dy[i];
     * lanes[l] += g, lanes[LANES + l] += (double)g * ((double)x[i] - mean) */
    void (*bn_backward_sums)(const tb_real *x, const tb_real *y, const tb_real *dy, size_t n, tb_real mean,
                             int relu, double *lanes);
    /* dx[i] (+)= (g - gmean - (x[i] - mean) * q) * k; dz[i] (+)= g when dz;
     * dx or dz may be dy itself (each element is read before it is written) */
    void (*bn_backward_apply)(const tb_real *x, const tb_real *y, const tb_real *dy, tb_real *dx, tb_real *dz,
                              size_t n, tb_real mean, tb_real gmean, tb_real q, tb_real k, int relu, int acc_dx,
                              int acc_dz);

    /* im2col row: dst[i] = src[i * stride], i < n */
    void (*gather)(tb_real *dst, const tb_real *src, int n, int stride);
    /* col2im row: dst[i * stride] += src[i], i < n */
    void (*scatter_add)(tb_real *dst, const tb_real *src, int n, int stride);

    /* SGD (cpu_sgd.c): g = grad * gs + wd * p; momentum 0: p -= lr * g;
     * else buf = mom * buf + g, p -= lr * (nesterov ? g + mom * buf : buf) */
    void (*sgd)(tb_real *p, const tb_real *grad, tb_real *buf, size_t n, tb_real lr, tb_real mom, tb_real gs,
                tb_real wd, int nesterov);
    /* lanes[i mod LANES] += x[i] (in double) */
    void (*sum)(const tb_real *x, size_t n, double *lanes);
} cpu_kern;

/* The table of the level the loops run at (tb_cpu_level()). */
const cpu_kern *cpu_kern_get(void);
/* A level's table (tests); NULL when this binary does not carry it. */
const cpu_kern *cpu_kern_of(int level);

/* lanes[0..LANES) added in a fixed pairwise order. */
static inline double cpu_kern_lanes_sum(const double *lanes) {
    double t[CPU_KERN_LANES];
    for (int l = 0; l < CPU_KERN_LANES; l++) t[l] = lanes[l];
    for (int w = CPU_KERN_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) t[l] = t[l] + t[l + w];
    return t[0];
}

/* Thread t of nt's contiguous share [*lo, *hi) of n elements (64-element
 * aligned starts, so every slice but the last is whole vectors). */
static inline void cpu_kern_share(size_t n, int t, int nt, size_t *lo, size_t *hi) {
    size_t blocks = (n + 63) / 64, per = (blocks + (size_t)nt - 1) / (size_t)nt;
    size_t a = (size_t)t * per * 64, b = a + per * 64;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

#endif
