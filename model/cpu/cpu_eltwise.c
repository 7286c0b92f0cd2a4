/* cpu_eltwise.c - ReLU and the residual add on the CPU: flat loops over
 * all elements (the vector level's, cpu_kern.h), split across threads in
 * contiguous blocks. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/log.h"
#include "model/cpu/cpu_internal.h"
#include "model/cpu/cpu_kern.h"

/* Runs STMT on each thread's contiguous share [lo, hi) of n elements (STMT
 * calls the vector level's loops, cpu_kern.h). */
#define CPU_SHARES(be, n, lo, hi, STMT)                                                      \
    do {                                                                                     \
        _Pragma("omp parallel num_threads(cpu_state_of(be)->threads)") {                     \
            size_t lo, hi;                                                                   \
            cpu_kern_share((n), omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);      \
            if (hi > lo) STMT;                                                               \
        }                                                                                    \
    } while (0)

void cpu_relu_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y) {
    cpu_check(x, "relu_forward", "x");
    cpu_check(y, "relu_forward", "y");
    cpu_check_same_shape(x, y, "relu_forward", "x", "y");
    const size_t n = tb_tensor_numel(x);
    const tb_real *xd = x->data; /* [N,C,H,W] */
    tb_real *yd = y->data;       /* [N,C,H,W] */
    const cpu_kern *k = cpu_kern_get();
    CPU_SHARES(be, n, lo, hi, k->relu(xd + lo, yd + lo, hi - lo)); /* NaN stays NaN */
}

void cpu_relu_backward(tb_backend *be, const tb_tensor *y, const tb_tensor *dy,
                       const tb_tensor *dx, int accumulate) {
    const char *op = "relu_backward";
    cpu_check(y, op, "y");
    cpu_check(dy, op, "dy");
    cpu_check(dx, op, "dx");
    cpu_check_same_shape(y, dy, op, "y", "dy");
    cpu_check_same_shape(y, dx, op, "y", "dx");
    const size_t n = tb_tensor_numel(y);
    const tb_real *yd = y->data;   /* [N,C,H,W] forward output */
    const tb_real *dyd = dy->data; /* [N,C,H,W] */
    tb_real *dxd = dx->data;       /* [N,C,H,W] */
    const cpu_kern *k = cpu_kern_get();
    /* torch threshold_backward: y <= 0 ? 0 : dy */
    CPU_SHARES(be, n, lo, hi, k->relu_backward(yd + lo, dyd + lo, dxd + lo, hi - lo, accumulate));
}

void cpu_add_forward(tb_backend *be, const tb_tensor *a, const tb_tensor *b,
                     const tb_tensor *y) {
    const char *op = "add_forward";
    cpu_check(a, op, "a");
    cpu_check(b, op, "b");
    cpu_check(y, op, "y");
    cpu_check_same_shape(a, b, op, "a", "b");
    cpu_check_same_shape(a, y, op, "a", "y");
    const size_t n = tb_tensor_numel(a);
    const tb_real *ad = a->data, *bd = b->data; /* [N,C,H,W] */
    tb_real *yd = y->data;                      /* [N,C,H,W] */
    const cpu_kern *k = cpu_kern_get();
    CPU_SHARES(be, n, lo, hi, k->add(ad + lo, bd + lo, yd + lo, hi - lo));
}

/* d (+)= dy for one of the two inputs of the add. */
static void pass_gradient(tb_backend *be, const tb_tensor *dy, const tb_tensor *d, int accumulate,
                          const char *name) {
    cpu_check(d, "add_backward", name);
    cpu_check_same_shape(dy, d, "add_backward", "dy", name);
    const size_t n = tb_tensor_numel(dy);
    const tb_real *dyd = dy->data; /* [N,C,H,W] */
    tb_real *dd = d->data;         /* [N,C,H,W] */
    const cpu_kern *k = cpu_kern_get();
    if (accumulate) {
        CPU_SHARES(be, n, lo, hi, k->accumulate(dd + lo, dyd + lo, hi - lo));
    } else if (dd != dyd) {
        CPU_SHARES(be, n, lo, hi, memcpy(dd + lo, dyd + lo, (hi - lo) * sizeof *dd));
    }
}

void cpu_add_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *da,
                      int accumulate_a, const tb_tensor *db, int accumulate_b) {
    cpu_check(dy, "add_backward", "dy");
    if (da) pass_gradient(be, dy, da, accumulate_a, "da");
    if (db) pass_gradient(be, dy, db, accumulate_b, "db");
}

/* NaN or +-Inf values in x[n] (training stops on the first step that has any). */
size_t cpu_count_nonfinite(tb_backend *be, const tb_real *x, size_t n) {
    const int threads = cpu_state_of(be)->threads;
    size_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static) num_threads(threads)
    for (size_t i = 0; i < n; i++) bad += !isfinite(x[i]);
    return bad;
}

/* found_inf = 1 when x[n] holds a NaN or Inf (the fp16 overflow check). */
void cpu_check_nonfinite(tb_backend *be, const tb_real *x, size_t n, tb_step_scalars *sc) {
    if (cpu_count_nonfinite(be, x, n)) sc->found_inf = 1;
}
