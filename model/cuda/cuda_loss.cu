/* cuda_loss.cu - mean softmax cross-entropy with label smoothing on the GPU
 * (the counterpart of cpu/cpu_loss.c); the loss stays on the device.
 *
 * One block per row n of logits l [N,M], in double as the CPU:
 *   lse = max + log sum_c exp(l[c] - max)
 *   loss_n  = (1-eps) * (lse - l[y_n]) + eps * mean_c (lse - l[c])
 *   dl[n,c] = (exp(l[c] - lse) - q[c]) / N * gs,  q = (1-eps) onehot(y_n) + eps/M
 * with gs = sc->grad_scale * sc->loss_scale read on the device. Each block
 * writes loss_n to the scratch; the last block to finish (a counter)
 * sums them in row order into sc->loss and resets the counter, so the mean
 * is the same whatever order the blocks ran in. A label outside [0, M)
 * (the host checks them on upload) makes the loss NaN.
 */
#include "model/cuda/cuda_kernels.cuh"

#define LOSS_THREADS 256

__device__ double block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int k = LOSS_THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

__device__ double block_max(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int k = LOSS_THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) sh[threadIdx.x] = fmax(sh[threadIdx.x], sh[threadIdx.x + k]);
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

template <typename T>
__global__ void xent(const T *l, const int32_t *labels, int N, int M, double eps,
                     tb_step_scalars *sc, T *dl, unsigned int *done, double *rows) {
    __shared__ double sh[LOSS_THREADS];
    __shared__ int last;
    const int n = blockIdx.x;
    const T *ln = l + (size_t)n * M;
    const int y = labels[n];
    const int ok = y >= 0 && y < M;
    /* read before the barriers below, so dl may alias l (one block per row,
     * every other read of l[n,c] is by the thread that then writes dl[n,c]) */
    const double ly = ok && threadIdx.x == 0 ? (double)cu_ld(ln, y) : 0.0;
    double mx = -INFINITY;
    for (int c = threadIdx.x; c < M; c += LOSS_THREADS) mx = fmax(mx, (double)cu_ld(ln, c));
    mx = block_max(mx, sh);
    double se = 0.0, sl = 0.0;
    for (int c = threadIdx.x; c < M; c += LOSS_THREADS) {
        double v = cu_ld(ln, c);
        se += exp(v - mx);
        sl += v;
    }
    se = block_sum(se, sh);
    sl = block_sum(sl, sh);
    const double lse = mx + log(se);
    if (threadIdx.x == 0) rows[n] = ok ? (1.0 - eps) * (lse - ly) + eps * (lse - sl / M) : NAN;
    if (dl) {
        const double gs = (double)sc->grad_scale * (double)sc->loss_scale;
        T *dn = dl + (size_t)n * M;
        for (int c = threadIdx.x; c < M; c += LOSS_THREADS) {
            double q = eps / M + (c == y ? 1.0 - eps : 0.0);
            cu_st(dn, c, (float)((exp((double)cu_ld(ln, c) - lse) - q) / N * gs));
        }
    }
    /* the last block sums the rows in order */
    __threadfence();
    if (threadIdx.x == 0) last = atomicAdd(done, 1u) == (unsigned)(N - 1);
    __syncthreads();
    if (last && threadIdx.x == 0) {
        __threadfence();
        double total = 0.0;
        for (int k = 0; k < N; k++) total += ((volatile double *)rows)[k];
        sc->loss = (float)(total / N);
        *done = 0;
    }
}

template <typename T>
static void xent_launch(cudaStream_t st, const void *l, const int32_t *labels, int N, int M,
                        double eps, tb_step_scalars *sc, void *dl, void *scratch) {
    unsigned int *done = (unsigned int *)scratch;
    double *rows = (double *)((char *)scratch + 64);
    xent<T><<<N, LOSS_THREADS, 0, st>>>((const T *)l, labels, N, M, eps, sc, (T *)dl, done, rows);
}

extern "C" void cu_softmax_xent(tb_backend *be, const tb_tensor *logits, const int32_t *labels,
                                double smoothing, tb_step_scalars *sc, const tb_tensor *dlogits) {
    const char *op = "softmax_xent";
    cu_check(logits, op, "logits");
    const int N = logits->n, M = logits->c * logits->h * logits->w;
    if (N < 1 || M < 1) TB_FATAL("cuda %s: empty logits [%d,%d]", op, N, M);
    if (dlogits) {
        cu_check(dlogits, op, "dlogits");
        cu_check_same(logits, dlogits, op, "logits", "dlogits");
    }
    if (!labels || !sc) TB_FATAL("cuda %s: labels or step scalars are NULL", op);
    void *scratch = cu_loss_scratch(be, N);
    CU_DISPATCH(logits->dtype, xent_launch, cu_stream(be), logits->data, labels, N, M, smoothing,
                sc, dlogits ? dlogits->data : NULL, scratch);
    TB_CUDA_CHECK_LAUNCH(op);
}
