/* cpu_bn.c - batch normalisation (+ residual add + ReLU) on the CPU.
 *
 *   y = act(gamma * (x - mean) * invstd + beta + z)
 *
 * NCHW keeps each channel as N contiguous planes of H*W, so one thread owns
 * a channel and makes both of its passes (statistics, then normalise) while
 * the channel's data is still in cache. Statistics accumulate in double,
 * in cpu_kern.h's fixed lanes (the same sums at every vector level); the
 * inner loops are the vector level's.
 */
#include <math.h>
#include <stdio.h>
#include <omp.h>

#include "core/log.h"
#include "model/cpu/cpu_internal.h"
#include "model/cpu/cpu_kern.h"

void cpu_check_xyz(const char *op, const tb_tensor *x, const tb_tensor *y, const tb_tensor *z) {
    cpu_check(x, op, "x");
    cpu_check(y, op, "y");
    cpu_check_same_shape(x, y, op, "x", "y");
    if (z) {
        cpu_check(z, op, "z");
        cpu_check_same_shape(x, z, op, "x", "z");
    }
}

static void bn_check(const char *op, const tb_bn_args *a) {
    cpu_check_xyz(op, a->x, a->y, a->z);
    if (!a->gamma || !a->beta) TB_FATAL("cpu %s: gamma or beta is NULL", op);
}

/* No per-node state and nothing kept between forward and backward but the
 * saved statistics the graph owns. */
void *cpu_bn_plan(tb_backend *be, const tb_bn_args *a, size_t *reserve_bytes) {
    (void)be, (void)a;
    *reserve_bytes = 0;
    return NULL;
}

void cpu_bn_plan_free(tb_backend *be, void *plan) {
    (void)be, (void)plan;
}

void cpu_bn_plan_describe(tb_backend *be, void *plan, char *buf, size_t len) {
    (void)be, (void)plan;
    snprintf(buf, len, "kernels cpu");
}

void cpu_bn_forward_train(tb_backend *be, const tb_bn_args *a) {
    const char *op = "bn_forward_train";
    bn_check(op, a);
    if (!a->running_mean || !a->running_var || !a->save_mean || !a->save_invstd)
        TB_FATAL("cpu %s: running or saved statistics are NULL", op);
    const int N = a->x->n, C = a->x->c;
    const size_t HW = (size_t)a->x->h * a->x->w;
    const size_t M = (size_t)N * HW; /* values per channel */
    if (M < 2)
        TB_FATAL("cpu %s: training batch norm needs more than 1 value per channel (got "
                 "[%d,%d,%d,%d])", op, N, C, a->x->h, a->x->w);
    const tb_real *x = a->x->data;  /* [N,C,H,W] */
    const tb_real *z = a->z ? (const tb_real *)a->z->data : NULL; /* [N,C,H,W] or NULL */
    tb_real *y = a->y->data;        /* [N,C,H,W] */
    const double mom = a->momentum, eps = a->eps;
    const int relu = a->relu;

    const cpu_kern *k = cpu_kern_get();
#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int c = 0; c < C; c++) {
        /* pass 1: mean and biased variance, shifted by the channel's first
         * value so that large means do not cancel */
        const double shift = x[(size_t)c * HW];
        double lanes[2 * CPU_KERN_LANES] = {0};
        for (int n = 0; n < N; n++) k->bn_sums(x + ((size_t)n * C + c) * HW, HW, shift, lanes);
        const double s = cpu_kern_lanes_sum(lanes), ss = cpu_kern_lanes_sum(lanes + CPU_KERN_LANES);
        double dmean = s / (double)M;
        double mean = shift + dmean;
        double var = ss / (double)M - dmean * dmean;
        if (var < 0.0) var = 0.0;
        double invstd = 1.0 / sqrt(var + eps);
        a->save_mean[c] = (tb_real)mean;
        a->save_invstd[c] = (tb_real)invstd;
        a->running_mean[c] = (tb_real)((1.0 - mom) * a->running_mean[c] + mom * mean);
        a->running_var[c] =
            (tb_real)((1.0 - mom) * a->running_var[c] + mom * var * (double)M / (double)(M - 1));

        /* pass 2: normalise, add, activate */
        const tb_real fmean = (tb_real)mean;
        const tb_real scale = (tb_real)(a->gamma[c] * invstd);
        const tb_real beta = a->beta[c];
        for (int n = 0; n < N; n++) {
            size_t o = ((size_t)n * C + c) * HW;
            k->bn_apply(x + o, z ? z + o : NULL, y + o, HW, fmean, scale, beta, relu);
        }
    }
}

void cpu_bn_forward_infer(tb_backend *be, const tb_bn_args *a) {
    const char *op = "bn_forward_infer";
    bn_check(op, a);
    if (!a->running_mean || !a->running_var)
        TB_FATAL("cpu %s: running statistics are NULL", op);
    const int N = a->x->n, C = a->x->c;
    const size_t HW = (size_t)a->x->h * a->x->w;
    const tb_real *x = a->x->data;  /* [N,C,H,W] */
    const tb_real *z = a->z ? (const tb_real *)a->z->data : NULL; /* [N,C,H,W] or NULL */
    tb_real *y = a->y->data;        /* [N,C,H,W] */
    const int relu = a->relu;
    const cpu_kern *k = cpu_kern_get();

#pragma omp parallel for collapse(2) schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int n = 0; n < N; n++) {
        for (int c = 0; c < C; c++) {
            const tb_real mean = a->running_mean[c];
            const tb_real scale = (tb_real)(a->gamma[c] / sqrt((double)a->running_var[c] + a->eps));
            const tb_real beta = a->beta[c];
            size_t o = ((size_t)n * C + c) * HW;
            k->bn_apply(x + o, z ? z + o : NULL, y + o, HW, mean, scale, beta, relu);
        }
    }
}

void cpu_bn_backward(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g) {
    const char *op = "bn_backward";
    bn_check(op, a);
    cpu_check(g->dy, op, "dy");
    cpu_check(g->dx, op, "dx");
    cpu_check_same_shape(a->x, g->dy, op, "x", "dy");
    cpu_check_same_shape(a->x, g->dx, op, "x", "dx");
    if (g->dz) {
        cpu_check(g->dz, op, "dz");
        cpu_check_same_shape(a->x, g->dz, op, "x", "dz");
    }
    if (!a->save_mean || !a->save_invstd || !g->dgamma || !g->dbeta)
        TB_FATAL("cpu %s: saved statistics, dgamma or dbeta is NULL", op);
    const int N = a->x->n, C = a->x->c;
    const size_t HW = (size_t)a->x->h * a->x->w;
    const double M = (double)N * (double)HW;
    const tb_real *x = a->x->data;    /* [N,C,H,W] forward input */
    const tb_real *y = a->y->data;    /* [N,C,H,W] forward output (ReLU mask) */
    const tb_real *dy = g->dy->data;  /* [N,C,H,W] */
    tb_real *dx = g->dx->data;        /* [N,C,H,W] */
    tb_real *dz = g->dz ? (tb_real *)g->dz->data : NULL; /* [N,C,H,W] or NULL */
    const int relu = a->relu, acc_dx = g->accumulate_dx, acc_dz = g->accumulate_dz;
    const cpu_kern *k = cpu_kern_get();

#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int c = 0; c < C; c++) {
        const tb_real mean = a->save_mean[c];
        const double invstd = a->save_invstd[c];
        /* pass 1: dbeta = sum g, sum g * (x - mean), g = dy masked by the ReLU */
        double lanes[2 * CPU_KERN_LANES] = {0};
        for (int n = 0; n < N; n++) {
            size_t o = ((size_t)n * C + c) * HW;
            k->bn_backward_sums(x + o, y + o, dy + o, HW, mean, relu, lanes);
        }
        double dbeta = cpu_kern_lanes_sum(lanes), dgamma = cpu_kern_lanes_sum(lanes + CPU_KERN_LANES) * invstd;
        g->dbeta[c] = (tb_real)dbeta;
        g->dgamma[c] = (tb_real)dgamma;

        /* pass 2: dx = gamma*invstd * (g - dbeta/M - (x-mean)*invstd * dgamma/M) */
        const tb_real kk = (tb_real)(a->gamma[c] * invstd);
        const tb_real gmean = (tb_real)(dbeta / M);
        const tb_real q = (tb_real)(dgamma * invstd / M);
        for (int n = 0; n < N; n++) {
            size_t o = ((size_t)n * C + c) * HW;
            k->bn_backward_apply(x + o, y + o, dy + o, dx + o, dz ? dz + o : NULL, HW, mean, gmean, q, kk, relu,
                                 acc_dx, acc_dz);
        }
    }
}

/* One implementation: nothing to choose between. */
void cpu_bn_tune(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g) {
    (void)be, (void)a, (void)g;
}
