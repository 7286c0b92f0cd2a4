/* cpu_fused.c - the fused convolution + BatchNorm ops of --fuse graph on the
 * CPU (backend.h): the reference twins of model/cuda/fused_ops.c, each
 * composed of the CPU's unfused arithmetic (cpu_conv.c's convolutions, the
 * same per-channel double sums as cpu_bn.c), so a test can hold the GPU's
 * fused graphs against the unfused computation on the same inputs, and the
 * fused schedule (model/graph_fused.c) runs on any machine.
 *
 *   fconv_forward         y = conv(pro(x), w); sum, sqsum of y per channel
 *   bn_finalize           statistics, running update, scale and bias
 *   bn_apply              y = act(x * scale + bias + z | z * zs + zb)
 *   fconv_backward_filter dw = corr(pro(x), dy)
 *   fconv_backward_data   dr = convT(dy, w) * mask; dgamma, dbeta
 *   bn_input_grad         dx (+)= the folded BN's input gradient
 *
 * pro(x) = relu(x * scale + bias) is materialised in a scratch buffer
 * (malloc per call: this backend is the reference, not the fast path).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cpu/cpu_internal.h"

void *cpu_fconv_plan(tb_backend *be, const tb_fconv_args *a, unsigned want, unsigned *got) {
    (void)be, (void)a;
    *got = want; /* every fused op is composed of ops the CPU has */
    return NULL;
}

void cpu_fconv_plan_free(tb_backend *be, void *plan) { (void)be, (void)plan; }

void cpu_fconv_plan_describe(tb_backend *be, void *plan, char *buf, size_t len) {
    (void)be, (void)plan;
    snprintf(buf, len, "cpu: the unfused ops in turn");
}

void cpu_plan_session(tb_backend *be, const char *session) { (void)be, (void)session; }

/* The CPU keeps no choices: each run times again (--fuse fastest). */
int cpu_choice_get(tb_backend *be, const char *key, char *out, size_t len) {
    (void)be, (void)key, (void)out, (void)len;
    return 0;
}

void cpu_choice_put(tb_backend *be, const char *key, const char *value) { (void)be, (void)key, (void)value; }

static void fold_check(const char *op, const tb_fconv_args *a) {
    if (!a->pro || !a->pro->scale || !a->pro->bias)
        TB_FATAL("cpu %s: the folded BatchNorm's scale and bias are missing", op);
}

/* relu(x * scale + bias) per channel of x [N,C,H,W], into a new buffer. */
static tb_tensor prologue(tb_backend *be, const char *op, const tb_tensor *x, const tb_bn_fold *pro) {
    cpu_check(x, op, "x");
    size_t HW = (size_t)x->h * x->w, n = tb_tensor_numel(x);
    tb_tensor t = *x;
    t.data = cpu_aligned_alloc(n * sizeof(tb_real), "the fused conv's prologue");
    const tb_real *xs = x->data; /* [N,C,H,W] */
    tb_real *ts = t.data;        /* [N,C,H,W] */
    const int C = x->c, N = x->n;
#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int c = 0; c < C; c++) {
        const tb_real s = pro->scale[c], b = pro->bias[c];
        for (int i = 0; i < N; i++) {
            size_t o = ((size_t)i * C + c) * HW;
            for (size_t k = 0; k < HW; k++) {
                tb_real v = xs[o + k] * s + b;
                ts[o + k] = v < 0 ? 0 : v; /* keeps NaN, as torch.relu */
            }
        }
    }
    return t;
}

void cpu_fconv_forward(tb_backend *be, void *plan, const tb_fconv_args *a) {
    const char *op = "fconv_forward";
    tb_tensor t;
    const tb_tensor *src = a->x;
    if (a->pro) {
        t = prologue(be, op, a->x, a->pro);
        src = &t;
    }
    cpu_conv_forward(be, plan, a->g, src, a->w, a->y);
    if (a->pro) free(t.data);
    if (!a->sum || !a->sqsum) TB_FATAL("cpu %s: sum or sqsum is NULL", op);
    const tb_tensor *y = a->y;
    const int C = y->c, N = y->n;
    const size_t HW = (size_t)y->h * y->w;
    const tb_real *yd = y->data; /* [N,C,Ho,Wo] */
#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int c = 0; c < C; c++) {
        double s = 0, ss = 0;
        for (int i = 0; i < N; i++) {
            const tb_real *p = yd + ((size_t)i * C + c) * HW;
            for (size_t k = 0; k < HW; k++) {
                s += p[k];
                ss += (double)p[k] * p[k];
            }
        }
        a->sum[c] = (tb_real)s;
        a->sqsum[c] = (tb_real)ss;
    }
}

void cpu_bn_finalize(tb_backend *be, void *plan, const tb_bn_finalize_args *a) {
    (void)be, (void)plan;
    if (a->count < 2) TB_FATAL("cpu bn_finalize: training batch norm needs more than 1 value per channel");
    for (int c = 0; c < a->C; c++) {
        double mean = (double)a->sum[c] / a->count;
        double var = (double)a->sqsum[c] / a->count - mean * mean;
        if (var < 0) var = 0; /* rounding of E[x^2] - E[x]^2 */
        double invstd = 1.0 / sqrt(var + a->eps);
        double unbiased = var * a->count / (a->count - 1);
        a->save_mean[c] = (tb_real)mean;
        a->save_invstd[c] = (tb_real)invstd;
        a->running_mean[c] = (tb_real)((1 - a->momentum) * a->running_mean[c] + a->momentum * mean);
        a->running_var[c] = (tb_real)((1 - a->momentum) * a->running_var[c] + a->momentum * unbiased);
        double scale = a->gamma[c] * invstd;
        a->scale[c] = (tb_real)scale;
        a->bias[c] = (tb_real)(a->beta[c] - mean * scale);
    }
}

void cpu_bn_apply(tb_backend *be, const tb_bn_apply_args *a) {
    const char *op = "bn_apply";
    cpu_check_xyz(op, a->x, a->y, a->z);
    if ((a->zscale != NULL) != (a->zbias != NULL) || (a->zscale && !a->z))
        TB_FATAL("cpu %s: zscale and zbias go together, with z", op);
    const int C = a->x->c, N = a->x->n, relu = a->relu;
    const size_t HW = (size_t)a->x->h * a->x->w;
    const tb_real *x = a->x->data, *z = a->z ? (const tb_real *)a->z->data : NULL; /* [N,C,H,W] */
    tb_real *y = a->y->data;                                                       /* [N,C,H,W] */
#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int c = 0; c < C; c++) {
        const tb_real s = a->scale[c], b = a->bias[c];
        const tb_real zs = a->zscale ? a->zscale[c] : 1, zb = a->zbias ? a->zbias[c] : 0;
        for (int i = 0; i < N; i++) {
            size_t o = ((size_t)i * C + c) * HW;
            for (size_t k = 0; k < HW; k++) {
                tb_real v = x[o + k] * s + b;
                if (z) v += a->zscale ? z[o + k] * zs + zb : z[o + k];
                y[o + k] = relu && v < 0 ? 0 : v;
            }
        }
    }
}

void cpu_fconv_backward_filter(tb_backend *be, void *plan, const tb_fconv_args *a) {
    fold_check("fconv_backward_filter", a);
    tb_tensor t = prologue(be, "fconv_backward_filter", a->x, a->pro);
    cpu_conv_backward_filter(be, plan, a->g, &t, a->dy, a->dw, 0);
    free(t.data);
}

void cpu_fconv_backward_data(tb_backend *be, void *plan, const tb_fconv_args *a) {
    const char *op = "fconv_backward_data";
    fold_check(op, a);
    const tb_bn_fold *f = a->pro;
    if (!f->mean || !f->invstd || !a->dgamma || !a->dbeta || !a->dr)
        TB_FATAL("cpu %s: the folded BatchNorm's statistics, its gradients or dr are missing", op);
    cpu_check(a->dr, op, "dr");
    cpu_check_same_shape(a->x, a->dr, op, "x", "dr");
    /* dr = convT(dy, w), then masked where the BN's output was cut by the ReLU */
    cpu_conv_backward_data(be, plan, a->g, a->dy, a->w, a->dr, 0);
    const int C = a->x->c, N = a->x->n;
    const size_t HW = (size_t)a->x->h * a->x->w;
    const tb_real *x = a->x->data; /* [N,C,H,W] */
    tb_real *dr = a->dr->data;
#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int c = 0; c < C; c++) {
        const tb_real s = f->scale[c], b = f->bias[c];
        const double mean = f->mean[c], invstd = f->invstd[c];
        double sd = 0, sdx = 0;
        for (int i = 0; i < N; i++) {
            size_t o = ((size_t)i * C + c) * HW;
            for (size_t k = 0; k < HW; k++) {
                if (!(x[o + k] * s + b > 0)) dr[o + k] = 0;
                sd += dr[o + k];
                sdx += dr[o + k] * ((x[o + k] - mean) * invstd);
            }
        }
        a->dgamma[c] = (tb_real)sdx;
        a->dbeta[c] = (tb_real)sd;
    }
}

void cpu_bn_input_grad(tb_backend *be, const tb_fconv_args *a) {
    const char *op = "bn_input_grad";
    fold_check(op, a);
    const tb_bn_fold *f = a->pro;
    if (!f->mean || !f->invstd || !f->gamma || !a->dgamma || !a->dbeta || !a->dr || !a->dx)
        TB_FATAL("cpu %s: the folded BatchNorm's statistics, gamma, gradients, dr or dx are missing", op);
    cpu_check(a->dx, op, "dx");
    cpu_check_same_shape(a->x, a->dx, op, "x", "dx");
    cpu_check_same_shape(a->x, a->dr, op, "x", "dr");
    const int C = a->x->c, N = a->x->n, acc = a->accumulate_dx;
    const size_t HW = (size_t)a->x->h * a->x->w;
    const double M = (double)N * HW;
    const tb_real *x = a->x->data, *dr = a->dr->data; /* [N,C,H,W] */
    tb_real *dx = a->dx->data;
#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int c = 0; c < C; c++) {
        const double mean = f->mean[c], invstd = f->invstd[c], k = f->gamma[c] * invstd;
        const double sd = a->dbeta[c], sdx = a->dgamma[c];
        for (int i = 0; i < N; i++) {
            size_t o = ((size_t)i * C + c) * HW;
            for (size_t j = 0; j < HW; j++) {
                double xhat = (x[o + j] - mean) * invstd;
                tb_real v = (tb_real)(k * (dr[o + j] - (sd + xhat * sdx) / M));
                dx[o + j] = acc ? dx[o + j] + v : v;
            }
        }
    }
}
