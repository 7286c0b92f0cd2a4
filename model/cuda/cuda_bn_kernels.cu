/* cuda_bn_kernels.cu - BatchNorm (+ residual add + ReLU) on own kernels, for
 * the layouts and types cuDNN's fused path does not take (cuda_bn.c).
 *
 * Training forward, as cpu/cpu_bn.c computes it:
 *   1. partial sums per channel: S slices of the channel's M = N*H*W
 *      values, each {sum, sum of squares} in double of (x - shift), shift =
 *      the channel's first value (so large means do not cancel);
 *   2. one thread per channel adds its S partials in slice order (the
 *      result does not depend on timing), then mean, biased variance,
 *      invstd = 1/sqrt(var + eps), the saved and running statistics
 *      (running_var with the unbiased M/(M-1) factor, momentum), and the
 *      per-channel coefficients mean and scale = gamma * invstd;
 *   3. elementwise y = act((x - mean) * scale + beta + z).
 * Backward: the same two reductions of g = relu ? (y > 0 ? dy : 0) : dy
 * and g * (x - mean), then dx (+)= (g - dbeta/M - (x - mean) * q) * k with
 * k = gamma * invstd, q = dgamma * invstd / M, and dz (+)= g.
 * The elementwise steps use _rn intrinsics (no fused multiply-add), the
 * order of operations of the CPU code.
 *
 * Reductions by layout: NCHW keeps a channel as N planes of H*W, so a block
 * of 256 threads reduces one slice of one channel; NHWC interleaves the
 * channels, so a block of 32x8 threads takes 32 neighbouring channels (the
 * loads coalesce) and 8 rows at a time of a slice of rows.
 */
#include "model/cuda/cuda_kernels.cuh"

/* slice counts: cu_bn_slices (cuda_index.h) */
static int slices(const cu_bn_shape *s) { return cu_bn_slices((size_t)s->N * s->H * s->W, s->layout); }

/* partials [S*C] double2, then 4 float coefficient arrays [C] */
extern "C" size_t cu_bn_scratch_bytes(const cu_bn_shape *s) {
    return (size_t)slices(s) * s->C * sizeof(double2) + 4 * (size_t)s->C * sizeof(float);
}

/* ---- step 1: partial sums ---------------------------------------------------------- */

/* What a reduction adds up for element i of channel c: the forward sums
 * (x - shift) and its square; the backward sums g and g * (x - mean). */
template <typename T, int BWD>
struct bn_term {
    const T *x, *y, *dy;
    const float *mean; /* backward */
    int relu;
    __device__ __forceinline__ void get(size_t i, int c, double shift, double *a, double *b) const {
        if (!BWD) {
            double v = (double)cu_ld(x, i) - shift;
            *a = v;
            *b = v * v;
        } else {
            float g = relu && cu_ld(y, i) <= 0.0f ? 0.0f : cu_ld(dy, i);
            *a = g;
            *b = (double)g * ((double)cu_ld(x, i) - (double)mean[c]);
        }
    }
};

template <typename T, int BWD>
__global__ void bn_partials_nchw(bn_term<T, BWD> t, int N, int C, int HW, int S, double2 *part) {
    __shared__ double sa[CU_THREADS], sb[CU_THREADS];
    const int c = blockIdx.y, s = blockIdx.x;
    const size_t M = (size_t)N * HW;
    size_t j0, j1;
    cu_slice_range(M, S, s, &j0, &j1);
    const double shift = BWD ? 0.0 : (double)cu_ld(t.x, (size_t)c * HW);
    double a = 0.0, b = 0.0;
    for (size_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
        size_t n = j / (size_t)HW, hw = j - n * (size_t)HW;
        double da, db;
        t.get((n * C + c) * (size_t)HW + hw, c, shift, &da, &db);
        a += da;
        b += db;
    }
    sa[threadIdx.x] = a;
    sb[threadIdx.x] = b;
    __syncthreads();
    for (int k = CU_THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) {
            sa[threadIdx.x] += sa[threadIdx.x + k];
            sb[threadIdx.x] += sb[threadIdx.x + k];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) part[(size_t)s * C + c] = make_double2(sa[0], sb[0]);
}

template <typename T, int BWD>
__global__ void bn_partials_nhwc(bn_term<T, BWD> t, size_t M, int C, int S, double2 *part) {
    __shared__ double sa[8][33], sb[8][33];
    const int c = blockIdx.x * 32 + threadIdx.x, s = blockIdx.y;
    size_t r0, r1;
    cu_slice_range(M, S, s, &r0, &r1);
    double a = 0.0, b = 0.0;
    if (c < C) {
        const double shift = BWD ? 0.0 : (double)cu_ld(t.x, (size_t)c);
        for (size_t r = r0 + threadIdx.y; r < r1; r += 8) {
            double da, db;
            t.get(r * C + c, c, shift, &da, &db);
            a += da;
            b += db;
        }
    }
    sa[threadIdx.y][threadIdx.x] = a;
    sb[threadIdx.y][threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int k = 1; k < 8; k++) {
            a += sa[k][threadIdx.x];
            b += sb[k][threadIdx.x];
        }
        part[(size_t)s * C + c] = make_double2(a, b);
    }
}

template <typename T, int BWD>
static void partials(cudaStream_t st, const cu_bn_shape *s, bn_term<T, BWD> t, double2 *part) {
    int S = slices(s);
    if (s->layout == TB_NCHW) {
        dim3 grid(S, s->C);
        bn_partials_nchw<T, BWD><<<grid, CU_THREADS, 0, st>>>(t, s->N, s->C, s->H * s->W, S, part);
    } else {
        dim3 grid((s->C + 31) / 32, S), block(32, 8);
        bn_partials_nhwc<T, BWD><<<grid, block, 0, st>>>(t, (size_t)s->N * s->H * s->W, s->C, S,
                                                         part);
    }
    TB_CUDA_CHECK_LAUNCH("BatchNorm partial sums");
}

/* ---- step 2: per channel ----------------------------------------------------------------- */

/* coef: mean[C], scale[C] (then two unused arrays) */
template <typename T>
__global__ void bn_finalize_train(const double2 *part, int S, int C, size_t M, const T *x,
                                  size_t first_stride, const float *gamma, float *rmean,
                                  float *rvar, float *smean, float *sinv, double mom, double eps,
                                  float *coef) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s = 0.0, ss = 0.0;
    for (int k = 0; k < S; k++) {
        double2 p = part[(size_t)k * C + c];
        s += p.x;
        ss += p.y;
    }
    const double shift = (double)cu_ld(x, (size_t)c * first_stride);
    const double dmean = s / (double)M, mean = shift + dmean;
    double var = ss / (double)M - dmean * dmean;
    if (var < 0.0) var = 0.0;
    const double invstd = 1.0 / sqrt(var + eps);
    smean[c] = (float)mean;
    sinv[c] = (float)invstd;
    rmean[c] = (float)((1.0 - mom) * (double)rmean[c] + mom * mean);
    rvar[c] = (float)((1.0 - mom) * (double)rvar[c] + mom * var * (double)M / (double)(M - 1));
    coef[c] = (float)mean;
    coef[C + c] = (float)((double)gamma[c] * invstd);
}

__global__ void bn_finalize_infer(int C, const float *gamma, const float *rmean,
                                  const float *rvar, double eps, float *coef) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    coef[c] = rmean[c];
    coef[C + c] = (float)((double)gamma[c] / sqrt((double)rvar[c] + eps));
}

/* coef: mean[C], k[C], gmean[C], q[C] */
__global__ void bn_finalize_backward(const double2 *part, int S, int C, size_t M,
                                     const float *gamma, const float *smean, const float *sinv,
                                     float *dgamma, float *dbeta, float *coef) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double sg = 0.0, sgx = 0.0;
    for (int k = 0; k < S; k++) {
        double2 p = part[(size_t)k * C + c];
        sg += p.x;
        sgx += p.y;
    }
    const double invstd = sinv[c];
    const double db = sg, dg = sgx * invstd;
    dbeta[c] = (float)db;
    dgamma[c] = (float)dg;
    coef[c] = smean[c];
    coef[C + c] = (float)((double)gamma[c] * invstd);
    coef[2 * C + c] = (float)(db / (double)M);
    coef[3 * C + c] = (float)(dg * invstd / (double)M);
}

/* ---- step 3: elementwise ------------------------------------------------------------------- */

template <typename T>
__global__ void bn_apply(const T *x, const T *z, T *y, size_t n, int C, size_t HW, tb_layout l,
                         int relu, const float *coef, const float *beta) {
    CU_FOR(i, n) {
        int c = tb_layout_channel(l, C, HW, i);
        float v = __fadd_rn(__fmul_rn(__fsub_rn(cu_ld(x, i), coef[c]), coef[C + c]), beta[c]);
        if (z) v = __fadd_rn(v, cu_ld(z, i));
        if (relu) v = v < 0.0f ? 0.0f : v; /* keeps NaN, as torch.relu */
        cu_st(y, i, v);
    }
}

template <typename T>
__global__ void bn_apply_backward(const T *x, const T *y, const T *dy, T *dx, T *dz, size_t n,
                                  int C, size_t HW, tb_layout l, int relu, int acc_dx, int acc_dz,
                                  const float *coef) {
    CU_FOR(i, n) {
        int c = tb_layout_channel(l, C, HW, i);
        /* read everything before writing: dx or dz may alias dy */
        float g = relu && cu_ld(y, i) <= 0.0f ? 0.0f : cu_ld(dy, i);
        float xm = __fsub_rn(cu_ld(x, i), coef[c]);
        float v = __fmul_rn(__fsub_rn(__fsub_rn(g, coef[2 * C + c]), __fmul_rn(xm, coef[3 * C + c])),
                            coef[C + c]);
        float dzo = dz && acc_dz ? cu_ld(dz, i) : 0.0f;
        float dxo = acc_dx ? cu_ld(dx, i) : 0.0f;
        if (dz) cu_st(dz, i, acc_dz ? __fadd_rn(dzo, g) : g);
        cu_st(dx, i, acc_dx ? __fadd_rn(dxo, v) : v);
    }
}

/* ---- launchers ---------------------------------------------------------------------------- */

static float *coef_of(const cu_bn_shape *s, void *scratch) {
    return (float *)((double2 *)scratch + (size_t)slices(s) * s->C);
}

template <typename T>
static void train(cudaStream_t st, const cu_bn_shape *s, const void *x, const void *z, void *y,
                  int relu, const float *gamma, const float *beta, float *rm, float *rv,
                  float *sm, float *si, double mom, double eps, void *scratch) {
    bn_term<T, 0> t = {(const T *)x, NULL, NULL, NULL, 0};
    double2 *part = (double2 *)scratch;
    float *coef = coef_of(s, scratch);
    partials<T, 0>(st, s, t, part);
    size_t M = (size_t)s->N * s->H * s->W, HW = (size_t)s->H * s->W;
    size_t first_stride = s->layout == TB_NCHW ? HW : 1; /* channel c's first element */
    bn_finalize_train<T><<<(s->C + 127) / 128, 128, 0, st>>>(part, slices(s), s->C, M, (const T *)x,
                                                            first_stride, gamma, rm, rv, sm, si,
                                                            mom, eps, coef);
    TB_CUDA_CHECK_LAUNCH("BatchNorm statistics");
    size_t n = M * s->C;
    bn_apply<T><<<cu_blocks(n), CU_THREADS, 0, st>>>((const T *)x, (const T *)z, (T *)y, n, s->C,
                                                     HW, s->layout, relu, coef, beta);
    TB_CUDA_CHECK_LAUNCH("BatchNorm apply");
}

template <typename T>
static void infer(cudaStream_t st, const cu_bn_shape *s, const void *x, const void *z, void *y,
                  int relu, const float *gamma, const float *beta, const float *rm,
                  const float *rv, double eps, void *scratch) {
    float *coef = coef_of(s, scratch);
    bn_finalize_infer<<<(s->C + 127) / 128, 128, 0, st>>>(s->C, gamma, rm, rv, eps, coef);
    TB_CUDA_CHECK_LAUNCH("BatchNorm inference coefficients");
    size_t HW = (size_t)s->H * s->W, n = (size_t)s->N * HW * s->C;
    bn_apply<T><<<cu_blocks(n), CU_THREADS, 0, st>>>((const T *)x, (const T *)z, (T *)y, n, s->C,
                                                     HW, s->layout, relu, coef, beta);
    TB_CUDA_CHECK_LAUNCH("BatchNorm inference apply");
}

template <typename T>
static void backward(cudaStream_t st, const cu_bn_shape *s, const void *x, const void *y,
                     const void *dy, void *dx, void *dz, int relu, int acc_dx, int acc_dz,
                     const float *gamma, const float *sm, const float *si, float *dgamma,
                     float *dbeta, void *scratch) {
    bn_term<T, 1> t = {(const T *)x, (const T *)y, (const T *)dy, sm, relu};
    double2 *part = (double2 *)scratch;
    float *coef = coef_of(s, scratch);
    partials<T, 1>(st, s, t, part);
    size_t M = (size_t)s->N * s->H * s->W, HW = (size_t)s->H * s->W;
    bn_finalize_backward<<<(s->C + 127) / 128, 128, 0, st>>>(part, slices(s), s->C, M, gamma, sm,
                                                            si, dgamma, dbeta, coef);
    TB_CUDA_CHECK_LAUNCH("BatchNorm backward sums");
    size_t n = M * s->C;
    bn_apply_backward<T><<<cu_blocks(n), CU_THREADS, 0, st>>>(
        (const T *)x, (const T *)y, (const T *)dy, (T *)dx, (T *)dz, n, s->C, HW, s->layout, relu,
        acc_dx, acc_dz, coef);
    TB_CUDA_CHECK_LAUNCH("BatchNorm backward apply");
}

extern "C" void cu_bn_train_kernels(cudaStream_t st, const cu_bn_shape *s, const void *x,
                                    const void *z, void *y, int relu, const float *gamma,
                                    const float *beta, float *running_mean, float *running_var,
                                    float *save_mean, float *save_invstd, double momentum,
                                    double eps, void *scratch) {
    CU_DISPATCH(s->dtype, train, st, s, x, z, y, relu, gamma, beta, running_mean, running_var,
                save_mean, save_invstd, momentum, eps, scratch);
}

extern "C" void cu_bn_infer_kernels(cudaStream_t st, const cu_bn_shape *s, const void *x,
                                    const void *z, void *y, int relu, const float *gamma,
                                    const float *beta, const float *running_mean,
                                    const float *running_var, double eps, void *scratch) {
    CU_DISPATCH(s->dtype, infer, st, s, x, z, y, relu, gamma, beta, running_mean, running_var, eps,
                scratch);
}

extern "C" void cu_bn_backward_kernels(cudaStream_t st, const cu_bn_shape *s, const void *x,
                                       const void *y, const void *dy, void *dx, void *dz, int relu,
                                       int acc_dx, int acc_dz, const float *gamma,
                                       const float *save_mean, const float *save_invstd,
                                       float *dgamma, float *dbeta, void *scratch) {
    CU_DISPATCH(s->dtype, backward, st, s, x, y, dy, dx, dz, relu, acc_dx, acc_dz, gamma,
                save_mean, save_invstd, dgamma, dbeta, scratch);
}
