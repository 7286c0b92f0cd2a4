/* cuda_pool.cu - max pooling and global average pooling on the GPU (the
 * counterpart of cpu/cpu_pool.c), NCHW and NHWC.
 *
 * Max pooling follows PyTorch exactly, as the CPU code does: padding counts
 * as -inf, a window is scanned kh outer, kw inner over its in-bounds
 * elements, and a value replaces the maximum when it is strictly greater or
 * NaN, so ties go to the first maximum (and the last NaN wins). The
 * backward pass is a gather without atomics: one thread per input element
 * visits the (at most ceil(k/s)^2) windows that contain it, recomputes each
 * window's argmax by the same scan, and adds dy of the windows whose argmax
 * it is, in (oh, ow) order. Deterministic, and tied gradients reach only
 * the first maximum.
 */
#include "model/cuda/cuda_kernels.cuh"

typedef struct {
    tb_dtype dtype;
    tb_layout layout;
    int N, C, H, W, Ho, Wo; /* input [N,C,H,W], output [N,C,Ho,Wo] */
    int k, stride, pad;
} cu_pool_shape;

/* Window (oh, ow) of plane (n, c): its maximum and argmax (ih * W + iw). */
template <typename T>
__device__ __forceinline__ void window_max(const T *x, const cu_pool_shape &s, int n, int c,
                                           int oh, int ow, float *m_out, int *idx_out) {
    int h0 = oh * s.stride - s.pad, w0 = ow * s.stride - s.pad;
    int h1 = min(h0 + s.k, s.H), w1 = min(w0 + s.k, s.W);
    h0 = max(h0, 0);
    w0 = max(w0, 0);
    float m = -INFINITY;
    int idx = h0 * s.W + w0; /* the first in-bounds element */
    for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) {
            float v = cu_ld(x, tb_layout_offset(s.layout, s.C, s.H, s.W, n, c, ih, iw));
            if (v > m || v != v) {
                m = v;
                idx = ih * s.W + iw;
            }
        }
    *m_out = m;
    *idx_out = idx;
}

template <typename T>
__global__ void maxpool_fwd(cu_pool_shape s, const T *x, T *y) {
    size_t n_out = (size_t)s.N * s.C * s.Ho * s.Wo;
    CU_FOR(i, n_out) {
        int n, c, oh, ow;
        tb_layout_coords(s.layout, s.C, s.Ho, s.Wo, i, &n, &c, &oh, &ow);
        float m;
        int idx;
        window_max(x, s, n, c, oh, ow, &m, &idx);
        cu_st(y, i, m);
    }
}

template <typename T>
__global__ void maxpool_bwd(cu_pool_shape s, const T *x, const T *dy, T *dx, int acc) {
    size_t n_in = (size_t)s.N * s.C * s.H * s.W;
    CU_FOR(i, n_in) {
        int n, c, ih, iw;
        tb_layout_coords(s.layout, s.C, s.H, s.W, i, &n, &c, &ih, &iw);
        /* windows oh with oh*stride - pad <= ih <= oh*stride - pad + k - 1 */
        int oh0, oh1, ow0, ow1;
        cu_pool_windows(ih, s.k, s.stride, s.pad, s.Ho, &oh0, &oh1);
        cu_pool_windows(iw, s.k, s.stride, s.pad, s.Wo, &ow0, &ow1);
        const int me = ih * s.W + iw;
        float g = 0.0f;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) {
                float m;
                int idx;
                window_max(x, s, n, c, oh, ow, &m, &idx);
                if (idx == me)
                    g = __fadd_rn(g, cu_ld(dy, tb_layout_offset(s.layout, s.C, s.Ho, s.Wo, n, c, oh, ow)));
            }
        cu_st(dx, i, acc ? __fadd_rn(cu_ld(dx, i), g) : g);
    }
}

/* y[n,c] = mean over the plane, summed in double */
template <typename T>
__global__ void avgpool_fwd(cu_pool_shape s, const T *x, T *y) {
    size_t planes = (size_t)s.N * s.C, HW = (size_t)s.H * s.W;
    CU_FOR(p, planes) {
        int n = (int)(p / (size_t)s.C), c = (int)(p % (size_t)s.C);
        double acc = 0.0;
        for (size_t j = 0; j < HW; j++) {
            size_t off = s.layout == TB_NCHW ? p * HW + j : ((size_t)n * HW + j) * s.C + c;
            acc += cu_ld(x, off);
        }
        cu_st(y, p, (float)(acc / (double)HW)); /* [N,C,1,1]: the same in both layouts */
    }
}

template <typename T>
__global__ void avgpool_bwd(cu_pool_shape s, const T *dy, T *dx, int acc) {
    size_t n_in = (size_t)s.N * s.C * s.H * s.W;
    const float hw = (float)((size_t)s.H * s.W);
    CU_FOR(i, n_in) {
        int n, c, h, w;
        tb_layout_coords(s.layout, s.C, s.H, s.W, i, &n, &c, &h, &w);
        float v = __fdiv_rn(cu_ld(dy, (size_t)n * s.C + c), hw);
        cu_st(dx, i, acc ? __fadd_rn(cu_ld(dx, i), v) : v);
    }
}

template <typename T>
static void maxpool_fwd_launch(cudaStream_t st, const cu_pool_shape *s, const void *x, void *y) {
    size_t n = (size_t)s->N * s->C * s->Ho * s->Wo;
    maxpool_fwd<T><<<cu_blocks(n), CU_THREADS, 0, st>>>(*s, (const T *)x, (T *)y);
}
template <typename T>
static void maxpool_bwd_launch(cudaStream_t st, const cu_pool_shape *s, const void *x,
                               const void *dy, void *dx, int acc) {
    size_t n = (size_t)s->N * s->C * s->H * s->W;
    maxpool_bwd<T><<<cu_blocks(n), CU_THREADS, 0, st>>>(*s, (const T *)x, (const T *)dy, (T *)dx, acc);
}
template <typename T>
static void avgpool_fwd_launch(cudaStream_t st, const cu_pool_shape *s, const void *x, void *y) {
    avgpool_fwd<T><<<cu_blocks((size_t)s->N * s->C), CU_THREADS, 0, st>>>(*s, (const T *)x, (T *)y);
}
template <typename T>
static void avgpool_bwd_launch(cudaStream_t st, const cu_pool_shape *s, const void *dy, void *dx,
                               int acc) {
    size_t n = (size_t)s->N * s->C * s->H * s->W;
    avgpool_bwd<T><<<cu_blocks(n), CU_THREADS, 0, st>>>(*s, (const T *)dy, (T *)dx, acc);
}

static cu_pool_shape pool_shape(const char *op, const tb_pool_geom *g, const tb_tensor *x,
                                const tb_tensor *y) {
    cu_check(x, op, "x");
    cu_check(y, op, "y");
    if (g->k < 1 || g->stride < 1 || g->pad < 0 || g->pad > g->k / 2)
        TB_FATAL("cuda %s: bad pool geometry k=%d stride=%d pad=%d (pad must be <= k/2)", op,
                 g->k, g->stride, g->pad);
    int ho = (x->h + 2 * g->pad - g->k) / g->stride + 1;
    int wo = (x->w + 2 * g->pad - g->k) / g->stride + 1;
    if (x->h + 2 * g->pad < g->k || x->w + 2 * g->pad < g->k || y->n != x->n || y->c != x->c ||
        y->h != ho || y->w != wo || y->dtype != x->dtype || y->layout != x->layout)
        TB_FATAL("cuda %s: x [%d,%d,%d,%d] and y [%d,%d,%d,%d] do not fit max pool k=%d "
                 "stride=%d pad=%d",
                 op, x->n, x->c, x->h, x->w, y->n, y->c, y->h, y->w, g->k, g->stride, g->pad);
    cu_pool_shape s = {x->dtype, x->layout, x->n, x->c, x->h, x->w, ho, wo, g->k, g->stride, g->pad};
    return s;
}

extern "C" void cu_maxpool_forward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                                   const tb_tensor *y) {
    cu_pool_shape s = pool_shape("maxpool_forward", g, x, y);
    if (!tb_tensor_numel(y)) return;
    CU_DISPATCH(x->dtype, maxpool_fwd_launch, cu_stream(be), &s, x->data, y->data);
    TB_CUDA_CHECK_LAUNCH("maxpool_forward");
}

extern "C" void cu_maxpool_backward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                                    const tb_tensor *y, const tb_tensor *dy, const tb_tensor *dx,
                                    int accumulate) {
    const char *op = "maxpool_backward";
    cu_pool_shape s = pool_shape(op, g, x, y);
    cu_check(dy, op, "dy");
    cu_check(dx, op, "dx");
    cu_check_same(y, dy, op, "y", "dy");
    cu_check_same(x, dx, op, "x", "dx");
    if (!tb_tensor_numel(x)) return;
    CU_DISPATCH(x->dtype, maxpool_bwd_launch, cu_stream(be), &s, x->data, dy->data, dx->data,
                accumulate);
    TB_CUDA_CHECK_LAUNCH(op);
}

extern "C" void cu_avgpool_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y) {
    const char *op = "avgpool_forward";
    cu_check(x, op, "x");
    cu_check(y, op, "y");
    if (y->n != x->n || y->c != x->c || y->h != 1 || y->w != 1 || x->h * x->w < 1 ||
        y->dtype != x->dtype)
        TB_FATAL("cuda %s: x [%d,%d,%d,%d] needs y [%d,%d,1,1], got [%d,%d,%d,%d]", op, x->n,
                 x->c, x->h, x->w, x->n, x->c, y->n, y->c, y->h, y->w);
    cu_pool_shape s = {x->dtype, x->layout, x->n, x->c, x->h, x->w, 1, 1, 0, 1, 0};
    if (!tb_tensor_numel(y)) return;
    CU_DISPATCH(x->dtype, avgpool_fwd_launch, cu_stream(be), &s, x->data, y->data);
    TB_CUDA_CHECK_LAUNCH(op);
}

extern "C" void cu_avgpool_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *dx,
                                    int accumulate) {
    const char *op = "avgpool_backward";
    cu_check(dy, op, "dy");
    cu_check(dx, op, "dx");
    if (dy->n != dx->n || dy->c != dx->c || dy->h != 1 || dy->w != 1 || dx->h * dx->w < 1 ||
        dy->dtype != dx->dtype)
        TB_FATAL("cuda %s: dx [%d,%d,%d,%d] needs dy [%d,%d,1,1], got [%d,%d,%d,%d]", op, dx->n,
                 dx->c, dx->h, dx->w, dx->n, dx->c, dy->n, dy->c, dy->h, dy->w);
    cu_pool_shape s = {dx->dtype, dx->layout, dx->n, dx->c, dx->h, dx->w, 1, 1, 0, 1, 0};
    if (!tb_tensor_numel(dx)) return;
    CU_DISPATCH(dx->dtype, avgpool_bwd_launch, cu_stream(be), &s, dy->data, dx->data, accumulate);
    TB_CUDA_CHECK_LAUNCH(op);
}
