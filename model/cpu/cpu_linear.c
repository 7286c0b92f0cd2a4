/* cpu_linear.c - the fully connected layer on the CPU (SGEMM).
 *
 *   x [N,K] (the input tensor viewed as rows), w [M,K], b [M], y [N,M]
 *   forward   y  = x w^T + b
 *   backward  dx (+)= dy w,  dw = dy^T x,  db = sum over rows of dy
 * Each GEMM is cut into one column band per thread (single-threaded BLAS
 * calls, see cpu_internal.h).
 */
#include <cblas.h>
#include <omp.h>

#include "core/log.h"
#include "model/cpu/cpu_internal.h"

/* Rows N, inner size K and outputs M of a linear layer, checked. */
static void linear_dims(const char *op, const tb_tensor *x, const tb_tensor *w,
                        const tb_tensor *y, int *N, int *K, int *M) {
    cpu_check(x, op, "x");
    cpu_check(w, op, "w");
    cpu_check(y, op, "y");
    *N = x->n;
    *K = x->c * x->h * x->w;
    *M = w->n;
    if (*N < 1 || *K < 1 || *M < 1 || w->c * w->h * w->w != *K || y->n != *N ||
        y->c * y->h * y->w != *M)
        TB_FATAL("cpu %s: x [%d,%d,%d,%d], w [%d,%d,%d,%d], y [%d,%d,%d,%d] do not fit "
                 "y[N,M] = x[N,K] w[M,K]^T",
                 op, x->n, x->c, x->h, x->w, w->n, w->c, w->h, w->w, y->n, y->c, y->h, y->w);
}

/* [lo, hi) of `total` for thread t of nt. */
static void band(int total, int t, int nt, int *lo, int *hi) {
    *lo = (int)((long long)total * t / nt);
    *hi = (int)((long long)total * (t + 1) / nt);
}

void cpu_linear_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                        const tb_real *b, const tb_tensor *y) {
    int N, K, M;
    linear_dims("linear_forward", x, w, y, &N, &K, &M);
    if (!b) TB_FATAL("cpu linear_forward: bias is NULL");
    const tb_real *xd = x->data; /* [N,K] */
    const tb_real *wd = w->data; /* [M,K] */
    tb_real *yd = y->data;       /* [N,M] */

#pragma omp parallel num_threads(cpu_state_of(be)->threads)
    {
        int m0, m1;
        band(M, omp_get_thread_num(), omp_get_num_threads(), &m0, &m1);
        if (m1 > m0) {
            cpu_gemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, m1 - m0, K, 1.0f, xd, K,
                        wd + (size_t)m0 * K, K, 0.0f, yd + m0, M);
            for (int n = 0; n < N; n++)
                for (int m = m0; m < m1; m++) yd[(size_t)n * M + m] += b[m];
        }
    }
}

void cpu_linear_backward(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                         const tb_tensor *dy, const tb_tensor *dx, int accumulate_dx,
                         const tb_tensor *dw, tb_real *db) {
    const char *op = "linear_backward";
    int N, K, M;
    linear_dims(op, x, w, dy, &N, &K, &M);
    cpu_check(dw, op, "dw");
    cpu_check_same_shape(w, dw, op, "w", "dw");
    if (dx) {
        cpu_check(dx, op, "dx");
        cpu_check_same_shape(x, dx, op, "x", "dx");
    }
    if (!db) TB_FATAL("cpu %s: db is NULL", op);
    const tb_real *xd = x->data;   /* [N,K] */
    const tb_real *wd = w->data;   /* [M,K] */
    const tb_real *dyd = dy->data; /* [N,M] */
    tb_real *dwd = dw->data;       /* [M,K] */
    tb_real *dxd = dx ? (tb_real *)dx->data : NULL; /* [N,K] */

#pragma omp parallel num_threads(cpu_state_of(be)->threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int lo, hi;
        /* dx[:, k0:k1] (+)= dy w[:, k0:k1] */
        band(K, t, nt, &lo, &hi);
        if (dxd && hi > lo)
            cpu_gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, hi - lo, M, 1.0f, dyd, M,
                        wd + lo, K, accumulate_dx ? 1.0f : 0.0f, dxd + lo, K);
        /* dw[m0:m1, :] = dy[:, m0:m1]^T x;  db[m0:m1] = column sums of dy */
        band(M, t, nt, &lo, &hi);
        if (hi > lo) {
            cpu_gemm(CblasRowMajor, CblasTrans, CblasNoTrans, hi - lo, K, N, 1.0f, dyd + lo, M,
                        xd, K, 0.0f, dwd + (size_t)lo * K, K);
            for (int m = lo; m < hi; m++) {
                double s = 0.0;
                for (int n = 0; n < N; n++) s += dyd[(size_t)n * M + m];
                db[m] = (tb_real)s;
            }
        }
    }
}
