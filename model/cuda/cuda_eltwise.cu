/* cuda_eltwise.cu - ReLU, the residual add, the non-finite checks, and the
 * linear layer's bias fallbacks on the GPU (the counterpart of
 * cpu/cpu_eltwise.c): flat grid-stride loops over all elements; the layout
 * does not matter to them. */
#include "model/cuda/cuda_kernels.cuh"

template <typename T>
__global__ void relu_fwd(const T *x, T *y, size_t n) {
    CU_FOR(i, n) {
        float v = cu_ld(x, i);
        cu_st(y, i, v < 0.0f ? 0.0f : v); /* NaN stays NaN */
    }
}

/* torch threshold_backward: y <= 0 ? 0 : dy */
template <typename T>
__global__ void relu_bwd(const T *y, const T *dy, T *dx, size_t n, int acc) {
    CU_FOR(i, n) {
        float g = cu_ld(y, i) <= 0.0f ? 0.0f : cu_ld(dy, i);
        cu_st(dx, i, acc ? __fadd_rn(cu_ld(dx, i), g) : g);
    }
}

template <typename T>
__global__ void add_fwd(const T *a, const T *b, T *y, size_t n) {
    CU_FOR(i, n) cu_st(y, i, __fadd_rn(cu_ld(a, i), cu_ld(b, i)));
}

template <typename T>
__global__ void pass_grad(const T *dy, T *d, size_t n, int acc) {
    CU_FOR(i, n) cu_st(d, i, acc ? __fadd_rn(cu_ld(d, i), cu_ld(dy, i)) : cu_ld(dy, i));
}

template <typename T>
static void relu_fwd_launch(cudaStream_t st, const void *x, void *y, size_t n) {
    relu_fwd<T><<<cu_blocks(n), CU_THREADS, 0, st>>>((const T *)x, (T *)y, n);
}
template <typename T>
static void relu_bwd_launch(cudaStream_t st, const void *y, const void *dy, void *dx, size_t n, int acc) {
    relu_bwd<T><<<cu_blocks(n), CU_THREADS, 0, st>>>((const T *)y, (const T *)dy, (T *)dx, n, acc);
}
template <typename T>
static void add_fwd_launch(cudaStream_t st, const void *a, const void *b, void *y, size_t n) {
    add_fwd<T><<<cu_blocks(n), CU_THREADS, 0, st>>>((const T *)a, (const T *)b, (T *)y, n);
}
template <typename T>
static void pass_grad_launch(cudaStream_t st, const void *dy, void *d, size_t n, int acc) {
    pass_grad<T><<<cu_blocks(n), CU_THREADS, 0, st>>>((const T *)dy, (T *)d, n, acc);
}

extern "C" void cu_relu_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y) {
    cu_check(x, "relu_forward", "x");
    cu_check(y, "relu_forward", "y");
    cu_check_same(x, y, "relu_forward", "x", "y");
    size_t n = tb_tensor_numel(x);
    if (!n) return;
    CU_DISPATCH(x->dtype, relu_fwd_launch, cu_stream(be), x->data, y->data, n);
    TB_CUDA_CHECK_LAUNCH("relu_forward");
}

extern "C" void cu_relu_backward(tb_backend *be, const tb_tensor *y, const tb_tensor *dy,
                                 const tb_tensor *dx, int accumulate) {
    const char *op = "relu_backward";
    cu_check(y, op, "y");
    cu_check(dy, op, "dy");
    cu_check(dx, op, "dx");
    cu_check_same(y, dy, op, "y", "dy");
    cu_check_same(y, dx, op, "y", "dx");
    size_t n = tb_tensor_numel(y);
    if (!n) return;
    CU_DISPATCH(y->dtype, relu_bwd_launch, cu_stream(be), y->data, dy->data, dx->data, n, accumulate);
    TB_CUDA_CHECK_LAUNCH(op);
}

extern "C" void cu_add_forward(tb_backend *be, const tb_tensor *a, const tb_tensor *b,
                               const tb_tensor *y) {
    const char *op = "add_forward";
    cu_check(a, op, "a");
    cu_check(b, op, "b");
    cu_check(y, op, "y");
    cu_check_same(a, b, op, "a", "b");
    cu_check_same(a, y, op, "a", "y");
    size_t n = tb_tensor_numel(a);
    if (!n) return;
    CU_DISPATCH(a->dtype, add_fwd_launch, cu_stream(be), a->data, b->data, y->data, n);
    TB_CUDA_CHECK_LAUNCH(op);
}

/* d (+)= dy for one of the two inputs of the add. */
static void pass_gradient(tb_backend *be, const tb_tensor *dy, const tb_tensor *d, int accumulate,
                          const char *name) {
    cu_check(d, "add_backward", name);
    cu_check_same(dy, d, "add_backward", "dy", name);
    size_t n = tb_tensor_numel(dy);
    if (!n || (!accumulate && d->data == dy->data)) return;
    CU_DISPATCH(dy->dtype, pass_grad_launch, cu_stream(be), dy->data, d->data, n, accumulate);
    TB_CUDA_CHECK_LAUNCH("add_backward");
}

extern "C" void cu_add_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *da,
                                int accumulate_a, const tb_tensor *db, int accumulate_b) {
    cu_check(dy, "add_backward", "dy");
    if (da) pass_gradient(be, dy, da, accumulate_a, "da");
    if (db) pass_gradient(be, dy, db, accumulate_b, "db");
}

/* ---- checks ------------------------------------------------------------------------------ */

__global__ void count_nonfinite_k(const float *x, size_t n, unsigned long long *count) {
    unsigned long long c = 0;
    CU_FOR(i, n) c += !isfinite(x[i]);
    /* an integer sum: the same whatever the order */
    for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0 && c) atomicAdd(count, c);
}

__global__ void check_nonfinite_k(const float *x, size_t n, int32_t *found) {
    int bad = 0;
    CU_FOR(i, n) bad |= !isfinite(x[i]);
    if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) *found = 1;
}

extern "C" size_t cu_count_nonfinite(tb_backend *be, const tb_real *x, size_t n) {
    if (!n) return 0;
    unsigned long long *count = (unsigned long long *)cu_scratch(be, sizeof *count);
    unsigned long long host = 0;
    cudaStream_t st = cu_stream(be);
    TB_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof *count, st));
    count_nonfinite_k<<<cu_blocks(n), CU_THREADS, 0, st>>>(x, n, count);
    TB_CUDA_CHECK_LAUNCH("count_nonfinite");
    TB_CUDA_CHECK(cudaMemcpyAsync(&host, count, sizeof host, cudaMemcpyDeviceToHost, st));
    TB_CUDA_CHECK(cudaStreamSynchronize(st));
    return (size_t)host;
}

extern "C" void cu_check_nonfinite(tb_backend *be, const tb_real *x, size_t n, tb_step_scalars *sc) {
    if (!n) return;
    check_nonfinite_k<<<cu_blocks(n), CU_THREADS, 0, cu_stream(be)>>>(x, n, &sc->found_inf);
    TB_CUDA_CHECK_LAUNCH("check_nonfinite");
}

/* ---- the linear layer's bias, when cuBLASLt has no epilogue for it ------------------------ */

template <typename T>
__global__ void bias_add_k(T *y, const float *b, int N, int M) {
    CU_FOR(i, (size_t)N * M) cu_st(y, i, __fadd_rn(cu_ld(y, i), b[i % (size_t)M]));
}

/* db[m] = sum over rows of dy[n,m], one thread per m, rows in order (double) */
template <typename T>
__global__ void bias_grad_k(const T *dy, float *db, int N, int M) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M) return;
    double s = 0.0;
    for (int n = 0; n < N; n++) s += cu_ld(dy, (size_t)n * M + m);
    db[m] = (float)s;
}

template <typename T>
static void bias_add_launch(cudaStream_t st, void *y, const float *b, int N, int M) {
    bias_add_k<T><<<cu_blocks((size_t)N * M), CU_THREADS, 0, st>>>((T *)y, b, N, M);
}
template <typename T>
static void bias_grad_launch(cudaStream_t st, const void *dy, float *db, int N, int M) {
    bias_grad_k<T><<<(M + 127) / 128, 128, 0, st>>>((const T *)dy, db, N, M);
}

extern "C" void cu_bias_add(cudaStream_t st, tb_dtype dt, void *y, const float *b, int N, int M) {
    CU_DISPATCH(dt, bias_add_launch, st, y, b, N, M);
    TB_CUDA_CHECK_LAUNCH("linear bias");
}

extern "C" void cu_bias_grad(cudaStream_t st, tb_dtype dt, const void *dy, float *db, int N, int M) {
    CU_DISPATCH(dt, bias_grad_launch, st, dy, db, N, M);
    TB_CUDA_CHECK_LAUNCH("linear bias gradient");
}
