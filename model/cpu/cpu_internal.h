/* cpu_internal.h - state and helpers shared by the CPU backend's files.
 *
 * The CPU backend keeps one cpu_state in be->priv: the worker thread count
 * and the convolution scratch buffer (one slice per thread). Every op checks
 * its tensors with cpu_check() first, so a bfloat16 or NHWC tensor dies with
 * a message that names the op, the tensor, its dtype and its layout.
 *
 * Threading: all parallelism is OpenMP with st->threads threads. BLAS is
 * called from inside those parallel regions, one single-threaded call per
 * thread on its own slice of the work, so there is exactly one thread pool
 * (two pools spinning on two cores cost more than they gain).
 */
#ifndef TB_CPU_INTERNAL_H
#define TB_CPU_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "model/backend.h"

/* GEMM on tb_real: SGEMM, or DGEMM in the fp64 verification build. */
#ifdef TB_REAL_DOUBLE
#define cpu_gemm cblas_dgemm
#define TB_CAP_REAL TB_CAP_F64
#else
#define cpu_gemm cblas_sgemm
#define TB_CAP_REAL TB_CAP_F32
#endif

typedef struct {
    int threads;            /* OpenMP threads used by every op */
    tb_real *ws;              /* conv scratch: threads slices of ws_stride floats */
    size_t ws_stride;       /* floats per thread slice (multiple of 16) */
    size_t ws_cap_bytes;    /* upper bound on the whole scratch (all threads) */
    int conv_min_cols;      /* aim for GEMMs at least this many columns wide */
    /* memory accounting and the event emulation (cpu_backend.c) */
    pthread_mutex_t lock;   /* guards the fields below */
    size_t mem_in_use, mem_peak;
    struct tb_event *events; /* every live event (a list), for tb_cpu_event_hold */
    int ev_hold;            /* test switch: recorded events stay pending */
    long ev_forced_waits;   /* event_wait calls that found their event pending */
} cpu_state;

static inline cpu_state *cpu_state_of(tb_backend *be) { return (cpu_state *)be->priv; }

/* ---- helpers (cpu_backend.c) --------------------------------------------- */

/* Dies unless t is a float32 NCHW tensor with data; op/name go in the message. */
void cpu_check(const tb_tensor *t, const char *op, const char *name);
/* Dies unless a and b have the same n, c, h, w. */
void cpu_check_same_shape(const tb_tensor *a, const tb_tensor *b, const char *op,
                          const char *na, const char *nb);
/* 64-byte aligned allocation; dies naming `what` when out of memory. */
void *cpu_aligned_alloc(size_t bytes, const char *what);
/* Makes the scratch hold at least floats_per_thread floats per thread and
 * returns its base; thread t uses base + t * st->ws_stride. Never call from
 * inside a parallel region. */
tb_real *cpu_workspace(cpu_state *st, size_t floats_per_thread);

/* ---- ops, in the order of backend.h ---------------------------------------- */

/* cpu_conv.c */
void *cpu_conv_plan(tb_backend *be, const tb_conv_geom *g, const tb_tensor *x,
                    const tb_tensor *w, const tb_tensor *y, const tb_tensor *dx,
                    const tb_tensor *dw, const tb_tensor *dy);
void cpu_conv_plan_free(tb_backend *be, void *plan);
void cpu_conv_plan_describe(tb_backend *be, void *plan, char *buf, size_t len);
void cpu_conv_forward(tb_backend *be, void *plan, const tb_conv_geom *g, const tb_tensor *x,
                      const tb_tensor *w, const tb_tensor *y);
void cpu_conv_backward_data(tb_backend *be, void *plan, const tb_conv_geom *g,
                            const tb_tensor *dy, const tb_tensor *w, const tb_tensor *dx,
                            int accumulate);
void cpu_conv_backward_filter(tb_backend *be, void *plan, const tb_conv_geom *g,
                              const tb_tensor *x, const tb_tensor *dy, const tb_tensor *dw,
                              int accumulate);

/* cpu_bn.c (and x, y, z of a BN op: float32 NCHW of one shape, z optional) */
void cpu_check_xyz(const char *op, const tb_tensor *x, const tb_tensor *y, const tb_tensor *z);
void *cpu_bn_plan(tb_backend *be, const tb_bn_args *a, size_t *reserve_bytes);
void cpu_bn_plan_free(tb_backend *be, void *plan);
void cpu_bn_plan_describe(tb_backend *be, void *plan, char *buf, size_t len);
void cpu_bn_forward_train(tb_backend *be, const tb_bn_args *a);
void cpu_bn_forward_infer(tb_backend *be, const tb_bn_args *a);
void cpu_bn_backward(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g);
void cpu_bn_tune(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g);

/* cpu_fused.c: fused conv + BatchNorm (--fuse graph), composed of the above */
void *cpu_fconv_plan(tb_backend *be, const tb_fconv_args *a, unsigned want, unsigned *got);
void cpu_fconv_plan_free(tb_backend *be, void *plan);
void cpu_fconv_plan_describe(tb_backend *be, void *plan, char *buf, size_t len);
void cpu_fconv_forward(tb_backend *be, void *plan, const tb_fconv_args *a);
void cpu_bn_finalize(tb_backend *be, void *plan, const tb_bn_finalize_args *a);
void cpu_bn_apply(tb_backend *be, const tb_bn_apply_args *a);
void cpu_fconv_backward_filter(tb_backend *be, void *plan, const tb_fconv_args *a);
void cpu_fconv_backward_data(tb_backend *be, void *plan, const tb_fconv_args *a);
void cpu_bn_input_grad(tb_backend *be, const tb_fconv_args *a);
void cpu_plan_session(tb_backend *be, const char *session);
int cpu_choice_get(tb_backend *be, const char *key, char *out, size_t len);
void cpu_choice_put(tb_backend *be, const char *key, const char *value);

/* cpu_eltwise.c */
void cpu_relu_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y);
void cpu_relu_backward(tb_backend *be, const tb_tensor *y, const tb_tensor *dy,
                       const tb_tensor *dx, int accumulate);
void cpu_add_forward(tb_backend *be, const tb_tensor *a, const tb_tensor *b,
                     const tb_tensor *y);
void cpu_add_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *da,
                      int accumulate_a, const tb_tensor *db, int accumulate_b);

/* cpu_pool.c */
void cpu_maxpool_forward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                         const tb_tensor *y);
void cpu_maxpool_backward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                          const tb_tensor *y, const tb_tensor *dy, const tb_tensor *dx,
                          int accumulate);
void cpu_avgpool_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y);
void cpu_avgpool_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *dx,
                          int accumulate);

/* cpu_linear.c */
void cpu_linear_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                        const tb_real *b, const tb_tensor *y);
void cpu_linear_backward(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                         const tb_tensor *dy, const tb_tensor *dx, int accumulate_dx,
                         const tb_tensor *dw, tb_real *db);

/* cpu_loss.c */
void cpu_softmax_xent(tb_backend *be, const tb_tensor *logits, const int32_t *labels,
                      double smoothing, tb_step_scalars *sc, const tb_tensor *dlogits);

/* cpu_sgd.c */
void cpu_sgd_update(tb_backend *be, const tb_sgd_op *a, const tb_sgd_segment *segs,
                    int nseg, tb_real *params, const tb_real *grads, tb_real *momentum);
void cpu_loss_scale_update(tb_backend *be, tb_step_scalars *sc, int growth_interval);

/* cpu_convert.c */
void cpu_convert(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int accumulate);
void cpu_convert_many(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int n, int accumulate);
void cpu_input_u8(tb_backend *be, const uint8_t *src, const uint8_t *flip,
                  const tb_input_norm *norm, const tb_tensor *dst);
void cpu_input_rows(tb_backend *be, const float *pool, const int32_t *rows, const tb_tensor *dst);

/* cpu_eltwise.c: checks */
size_t cpu_count_nonfinite(tb_backend *be, const tb_real *x, size_t n);
void cpu_check_nonfinite(tb_backend *be, const tb_real *x, size_t n, tb_step_scalars *sc);

#endif
