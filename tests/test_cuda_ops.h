/* test_cuda_ops.h - what the two files of test_cuda_ops share (see
 * test_cuda_ops.c for the method and tolerances): the precisions, the two
 * backends, the comparison and its report, tensors on both backends. */
#ifndef TB_TEST_CUDA_OPS_H
#define TB_TEST_CUDA_OPS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/rng.h"
#include "model/cpu/cpu_backend.h"
#include "model/cuda/cuda_backend.h"
#include "model/layout.h"

typedef struct {
    const char *name;
    tb_dtype dt;
    tb_layout l;
    int tf32;
    double tol;
} prec;

static const prec k_precs[] = {
    {"fp32 NCHW", TB_F32, TB_NCHW, 0, 1e-5}, {"fp32 NHWC", TB_F32, TB_NHWC, 0, 1e-5},
    {"tf32 NCHW", TB_F32, TB_NCHW, 1, 2e-3}, {"tf32 NHWC", TB_F32, TB_NHWC, 1, 2e-3},
    {"bf16 NCHW", TB_BF16, TB_NCHW, 0, 1e-2}, {"bf16 NHWC", TB_BF16, TB_NHWC, 0, 1e-2},
    {"fp16 NCHW", TB_F16, TB_NCHW, 0, 4e-3}, {"fp16 NHWC", TB_F16, TB_NHWC, 0, 4e-3},
};

extern tb_backend *g_cpu, *g_gpu, *g_gpu_tf32;
extern tb_rng g_rng;
extern int g_checks, g_failed;

static inline tb_backend *gpu_for(const prec *p) { return p->tf32 ? g_gpu_tf32 : g_gpu; }

/* The tolerance for outputs that each sum K products (see the header):
 * fp32 grows as sqrt(K) past K = 1024; tf32, bf16 and fp16 keep theirs. */
static inline double tol_sum(const prec *p, double K) {
    if (p->dt != TB_F32 || p->tf32 || K <= 1024) return p->tol;
    return p->tol * sqrt(K / 1024.0);
}

static inline void report(const char *what, double maxerr, double maxref, int ok) {
    g_checks++;
    if (!ok) g_failed++;
    printf("%-72s err %9.2e of max %9.2e  %s\n", what, maxerr, maxref, ok ? "PASS" : "FAIL");
    fflush(stdout);
}

/* got vs ref over n floats: tol * max(max|ref|, scale) + tol * |ref| (tol
 * 0: exact); scale: the size of the terms the output is a difference of,
 * where those cancel (0: none) */
static inline int compare_scaled(const char *what, const float *got, const float *ref, size_t n, double tol,
                                 double scale) {
    double maxref = 0, maxerr = 0;
    for (size_t i = 0; i < n; i++) maxref = fmax(maxref, fabs(ref[i]));
    double top = fmax(maxref, scale);
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)ref[i]);
        if (!(e <= tol * top + tol * fabs(ref[i])) && !(got[i] == ref[i])) ok = 0;
        if (!(e <= maxerr)) maxerr = e;
    }
    report(what, maxerr, maxref, ok);
    return ok;
}

static inline int compare(const char *what, const float *got, const float *ref, size_t n, double tol) {
    return compare_scaled(what, got, ref, n, tol, 0);
}

/* ---- tensors on both backends ---------------------------------------------------------------- */

/* A tensor [n,c,h,w]: host float32 NCHW values (representable in the
 * precision's dtype), the CPU copy (float32 NCHW) and the GPU copy (dtype,
 * layout). */
typedef struct {
    int n, c, h, w;
    float *host;
    tb_tensor cpu, gpu;
    tb_backend *gb;
} pair;

static inline float round_to(tb_dtype dt, float v) {
    return dt == TB_BF16 ? tb_bf16_to_f32(tb_f32_to_bf16(v))
           : dt == TB_F16 ? tb_f16_to_f32(tb_f32_to_f16(v))
                          : v;
}

static inline void upload(pair *t) {
    size_t n = tb_tensor_numel(&t->cpu), es = tb_dtype_size(t->gpu.dtype);
    memcpy(t->cpu.data, t->host, n * 4);
    char *buf = malloc(n * es);
    for (int a = 0; a < t->n; a++)
        for (int c = 0; c < t->c; c++)
            for (int y = 0; y < t->h; y++)
                for (int x = 0; x < t->w; x++)
                    tb_host_store(buf, t->gpu.dtype,
                                  tb_layout_offset(t->gpu.layout, t->c, t->h, t->w, a, c, y, x),
                                  t->host[tb_layout_offset(TB_NCHW, t->c, t->h, t->w, a, c, y, x)]);
    t->gb->copy_h2d(t->gb, t->gpu.data, buf, n * es);
    free(buf);
}

/* The GPU copy, as float32 NCHW. */
static inline float *download(const pair *t) {
    size_t n = tb_tensor_numel(&t->gpu), es = tb_dtype_size(t->gpu.dtype);
    char *buf = malloc(n * es);
    float *out = malloc(n * 4);
    t->gb->copy_d2h(t->gb, buf, t->gpu.data, n * es);
    for (int a = 0; a < t->n; a++)
        for (int c = 0; c < t->c; c++)
            for (int y = 0; y < t->h; y++)
                for (int x = 0; x < t->w; x++)
                    out[tb_layout_offset(TB_NCHW, t->c, t->h, t->w, a, c, y, x)] = (float)tb_host_load(
                        buf, t->gpu.dtype, tb_layout_offset(t->gpu.layout, t->c, t->h, t->w, a, c, y, x));
    free(buf);
    return out;
}

/* kind: 0 uniform [lo,hi), 1 small integers in [lo,hi] (ties for max pool), 2 zeros */
static inline pair mk(const prec *p, int n, int c, int h, int w, int kind, double lo, double hi) {
    pair t = {n, c, h, w, NULL, {0}, {0}, gpu_for(p)};
    size_t ne = (size_t)n * c * h * w;
    t.host = malloc(ne * 4);
    for (size_t i = 0; i < ne; i++) {
        double v = kind == 0 ? lo + (hi - lo) * tb_rng_uniform(&g_rng)
                   : kind == 1 ? lo + (double)tb_rng_below(&g_rng, (uint64_t)(hi - lo + 1))
                               : 0.0;
        t.host[i] = round_to(p->dt, (float)v);
    }
    tb_tensor tc = {g_cpu->alloc(g_cpu, ne * 4), n, c, h, w, TB_F32, TB_NCHW};
    tb_tensor tg = {t.gb->alloc(t.gb, ne * tb_dtype_size(p->dt)), n, c, h, w, p->dt, p->l};
    t.cpu = tc;
    t.gpu = tg;
    upload(&t);
    return t;
}

static inline void drop(pair *t) {
    g_cpu->release(g_cpu, t->cpu.data);
    t->gb->release(t->gb, t->gpu.data);
    free(t->host);
}

/* GPU result vs the CPU result of the same op. */
static inline int same_scaled(const char *what, const pair *t, double tol, double scale) {
    float *g = download(t);
    int ok = compare_scaled(what, g, t->cpu.data, tb_tensor_numel(&t->cpu), tol, scale);
    free(g);
    return ok;
}

static inline int same(const char *what, const pair *t, double tol) { return same_scaled(what, t, tol, 0); }

/* A float vector on both backends. */
typedef struct {
    size_t n;
    float *cpu, *gpu;
    tb_backend *gb;
} vec;

static inline vec mkv(tb_backend *gb, size_t n, double lo, double hi) {
    vec v = {n, g_cpu->alloc(g_cpu, n * 4), gb->alloc(gb, n * 4), gb};
    for (size_t i = 0; i < n; i++) v.cpu[i] = (float)(lo + (hi - lo) * tb_rng_uniform(&g_rng));
    gb->copy_h2d(gb, v.gpu, v.cpu, n * 4);
    return v;
}

static inline int samev(const char *what, const vec *v, double tol) {
    float *g = malloc(v->n * 4);
    v->gb->copy_d2h(v->gb, g, v->gpu, v->n * 4);
    int ok = compare(what, g, v->cpu, v->n, tol);
    free(g);
    return ok;
}

static inline void dropv(vec *v) {
    g_cpu->release(g_cpu, v->cpu);
    v->gb->release(v->gb, v->gpu);
}

/* in test_cuda_ops_layers.c */
void test_eltwise(const prec *p);
void test_pools(const prec *p);
void test_linear(const prec *p, int N, int K, int M);
void test_xent(const prec *p, int N, int M, double eps);
void test_sgd(tb_backend *gb, double momentum, int nesterov);
void test_loss_scale_growth(tb_backend *gb);
void test_convert_input(void);
void test_convert_many(void);
void test_pad_kernels(void);
void test_input_rows(void);
void test_ordering(void);
void test_memory_accounting(void);

#endif
