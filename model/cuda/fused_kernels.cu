/* fused_kernels.cu - the own kernels of --fuse graph (fused_cuda.h):
 *
 *   apply     y = act(x * s + b + r), r = 0, z or z * zs + zb, per channel:
 *             every BatchNorm output the fused schedule materialises (block
 *             ends, the stem) and the prologue the composition recomputes
 *   finalize  BN statistics from a conv's sums, one thread per channel, in
 *             double (the fallback of cuDNN's BN_FINALIZE graph)
 *   bn_dx     the BN input gradient from dr, x, the saved statistics and
 *             dgamma, dbeta (after the dgrad + dReLU + BN weights graph)
 *   sums      per-channel sum and sum of squares of y (the composition's
 *             statistics), double partials per slice of rows, combined in
 *             slice order (deterministic)
 *   dbn       the composition's BN weight gradients: dr masked by the ReLU
 *             output, then dbeta = sum dr and dgamma = sum dr * xhat, as
 *             the sums
 *   to_dtype  the prologue's scale and bias rounded to a 16-bit dtype
 * (The stem's input padded from 3 to 4 channels, MLPerf's, is
 * cu_pad_channels of cuda_convert.cu, shared with cuda_conv_pad.c.)
 *
 * apply and bn_dx take 16 bytes per thread (8 bf16/fp16 or 4 float values
 * of one pixel's channels) in NHWC when C is a multiple of that and the
 * buffers are 16-byte aligned, else one element per thread. Arithmetic is
 * float with explicit rounding steps (__fmul_rn / __fadd_rn: no FMA
 * contraction), as the CPU's twins compute. */
#include "model/cuda/cuda_kernels.cuh"
#include "model/cuda/fused_cuda.h"

__device__ __forceinline__ int fk_chan(size_t i, int C, size_t HW, int nhwc) {
    return nhwc ? (int)(i % (size_t)C) : (int)((i / HW) % (size_t)C);
}

__device__ __forceinline__ float fk_apply1(float x, int c, const float *s, const float *b, float z, int has_z,
                                           const float *zs, const float *zb, int relu) {
    float v = __fadd_rn(__fmul_rn(x, s[c]), b[c]);
    if (has_z) v = __fadd_rn(v, zs ? __fadd_rn(__fmul_rn(z, zs[c]), zb[c]) : z);
    return relu && v < 0.0f ? 0.0f : v; /* NaN stays NaN */
}

template <typename T>
__global__ void apply_k(const T *x, const float *s, const float *b, const T *z, const float *zs, const float *zb,
                        int relu, T *y, size_t n, int C, size_t HW, int nhwc) {
    CU_FOR(i, n) {
        int c = fk_chan(i, C, HW, nhwc);
        cu_st(y, i, fk_apply1(cu_ld(x, i), c, s, b, z ? cu_ld(z, i) : 0.0f, z != NULL, zs, zb, relu));
    }
}

/* NHWC, C % V == 0: V consecutive channels of one pixel per thread; mask
 * (or NULL): word j's ReLU mask byte (cu_relu_keep_bits) */
template <typename T>
__global__ void apply_vec_k(const T *x, const float *s, const float *b, const T *z, const float *zs, const float *zb,
                            int relu, T *y, size_t nvec, int C, uint8_t *mask) {
    constexpr int V = 16 / sizeof(T);
    CU_FOR(j, nvec) {
        int c0 = (int)((j * V) % (size_t)C);
        uint4 xv = reinterpret_cast<const uint4 *>(x)[j], zv = make_uint4(0, 0, 0, 0), yv;
        if (z) zv = reinterpret_cast<const uint4 *>(z)[j];
        const T *xe = reinterpret_cast<const T *>(&xv), *ze = reinterpret_cast<const T *>(&zv);
        T *ye = reinterpret_cast<T *>(&yv);
#pragma unroll
        for (int k = 0; k < V; k++)
            ye[k] = cu_to<T>(fk_apply1(cu_f(xe[k]), c0 + k, s, b, cu_f(ze[k]), z != NULL, zs, zb, relu));
        reinterpret_cast<uint4 *>(y)[j] = yv;
        if (mask) mask[j] = (uint8_t)cu_relu_keep_bits<T, V>(ye);
    }
}

__device__ __forceinline__ float fk_dx1(float dr, float x, int c, const float *mean, const float *invstd,
                                        const float *gamma, const float *dgamma, const float *dbeta, float inv_m) {
    float k = __fmul_rn(gamma[c], invstd[c]);
    float a = __fmul_rn(dbeta[c], inv_m), q = __fmul_rn(__fmul_rn(dgamma[c], invstd[c]), inv_m);
    return __fmul_rn(__fadd_rn(__fadd_rn(dr, -a), -__fmul_rn(__fadd_rn(x, -mean[c]), q)), k);
}

template <typename T>
__global__ void bn_dx_k(const T *dr, const T *x, const float *mean, const float *invstd, const float *gamma,
                        const float *dgamma, const float *dbeta, float inv_m, T *dx, int acc, size_t n, int C,
                        size_t HW, int nhwc) {
    CU_FOR(i, n) {
        int c = fk_chan(i, C, HW, nhwc);
        float v = fk_dx1(cu_ld(dr, i), cu_ld(x, i), c, mean, invstd, gamma, dgamma, dbeta, inv_m);
        cu_st(dx, i, acc ? __fadd_rn(cu_ld(dx, i), v) : v);
    }
}

template <typename T>
__global__ void bn_dx_vec_k(const T *dr, const T *x, const float *mean, const float *invstd, const float *gamma,
                            const float *dgamma, const float *dbeta, float inv_m, T *dx, int acc, size_t nvec, int C) {
    constexpr int V = 16 / sizeof(T);
    CU_FOR(j, nvec) {
        int c0 = (int)((j * V) % (size_t)C);
        uint4 dv = reinterpret_cast<const uint4 *>(dr)[j], xv = reinterpret_cast<const uint4 *>(x)[j], ov;
        uint4 av = acc ? reinterpret_cast<const uint4 *>(dx)[j] : make_uint4(0, 0, 0, 0);
        const T *de = reinterpret_cast<const T *>(&dv), *xe = reinterpret_cast<const T *>(&xv);
        const T *ae = reinterpret_cast<const T *>(&av);
        T *oe = reinterpret_cast<T *>(&ov);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float v = fk_dx1(cu_f(de[k]), cu_f(xe[k]), c0 + k, mean, invstd, gamma, dgamma, dbeta, inv_m);
            oe[k] = cu_to<T>(acc ? __fadd_rn(cu_f(ae[k]), v) : v);
        }
        reinterpret_cast<uint4 *>(dx)[j] = ov;
    }
}

__global__ void finalize_k(int C, double count, const float *sum, const float *sqsum, const float *gamma,
                           const float *beta, float *rmean, float *rvar, float *smean, float *sinv, float *scale,
                           float *bias, double momentum, double eps) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double mean = (double)sum[c] / count, var = (double)sqsum[c] / count - mean * mean;
    if (var < 0) var = 0; /* rounding of E[x^2] - E[x]^2 */
    double invstd = 1.0 / sqrt(var + eps), s = gamma[c] * invstd;
    smean[c] = (float)mean;
    sinv[c] = (float)invstd;
    rmean[c] = (float)((1 - momentum) * rmean[c] + momentum * mean);
    rvar[c] = (float)((1 - momentum) * rvar[c] + momentum * var * count / (count - 1));
    scale[c] = (float)s;
    bias[c] = (float)(beta[c] - mean * s);
}

template <typename T> __global__ void to_dtype_k(int C, const float *scale, const float *bias, T *out) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) out[c] = cu_to<T>(scale[c]), out[C + c] = cu_to<T>(bias[c]);
}

/* partial[slice][c] = {sum, sum of squares} over the slice's rows (row r =
 * pixel n*HW + hw); threads walk channels, blocks walk slices */
template <typename T>
__global__ void sums_part_k(const T *y, double *part, size_t rows, int C, size_t HW, int nhwc, int slices) {
    size_t per = (rows + slices - 1) / slices, r0 = (size_t)blockIdx.x * per, r1 = r0 + per < rows ? r0 + per : rows;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        double s = 0, q = 0;
        for (size_t r = r0; r < r1; r++) {
            size_t n = r / HW, hw = r % HW;
            float v = cu_ld(y, nhwc ? r * C + c : ((size_t)n * C + c) * HW + hw);
            s += v, q += (double)v * v;
        }
        part[((size_t)blockIdx.x * C + c) * 2] = s;
        part[((size_t)blockIdx.x * C + c) * 2 + 1] = q;
    }
}

/* the composition's BN weight gradients: dr masked in place where the
 * ReLU output xp is not positive, then per slice and channel {sum dr, sum
 * dr * xhat} (combined by sums_comb_k into dbeta, dgamma) */
template <typename T>
__global__ void dbn_part_k(T *dr, const T *x, const T *xp, const float *mean, const float *invstd, double *part,
                           size_t rows, int C, size_t HW, int nhwc, int slices) {
    size_t per = (rows + slices - 1) / slices, r0 = (size_t)blockIdx.x * per, r1 = r0 + per < rows ? r0 + per : rows;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        double s = 0, q = 0;
        for (size_t r = r0; r < r1; r++) {
            size_t n = r / HW, hw = r % HW, i = nhwc ? r * C + c : ((size_t)n * C + c) * HW + hw;
            float g = cu_ld(dr, i);
            if (!(cu_ld(xp, i) > 0.0f)) {
                g = 0.0f;
                cu_st(dr, i, 0.0f);
            }
            s += g, q += (double)g * ((double)cu_ld(x, i) - mean[c]) * invstd[c];
        }
        part[((size_t)blockIdx.x * C + c) * 2] = s;
        part[((size_t)blockIdx.x * C + c) * 2 + 1] = q;
    }
}

__global__ void sums_comb_k(const double *part, int slices, int C, float *sum, float *sqsum) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s = 0, q = 0;
#pragma unroll 8 /* 8 loads in flight, added in slice order */
    for (int k = 0; k < slices; k++) s += part[((size_t)k * C + c) * 2], q += part[((size_t)k * C + c) * 2 + 1];
    sum[c] = (float)s, sqsum[c] = (float)q;
}

/* ---- launchers --------------------------------------------------------------------------------- */

static int fk_al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static int fk_vec_ok(const cu_fk_shape *s, const void *a, const void *b, const void *c) {
    int V = 16 / (int)tb_dtype_size(s->dtype);
    return s->layout == TB_NHWC && s->C % V == 0 && fk_al16(a) && fk_al16(b) && fk_al16(c);
}

template <typename T>
static void apply_launch(cudaStream_t st, const cu_fk_shape *s, const void *x, const float *sc, const float *bi,
                         const void *z, const float *zs, const float *zb, int relu, void *y, void *mask, int *wrote) {
    size_t n = (size_t)s->N * s->C * s->H * s->W, HW = (size_t)s->H * s->W;
    if (fk_vec_ok(s, x, y, z ? z : x)) {
        size_t nv = n / (16 / sizeof(T));
        *wrote = relu && mask;
        apply_vec_k<T><<<cu_blocks(nv), CU_THREADS, 0, st>>>((const T *)x, sc, bi, (const T *)z, zs, zb, relu, (T *)y,
                                                             nv, s->C, *wrote ? (uint8_t *)mask : NULL);
    } else {
        apply_k<T><<<cu_blocks(n), CU_THREADS, 0, st>>>((const T *)x, sc, bi, (const T *)z, zs, zb, relu, (T *)y, n,
                                                        s->C, HW, s->layout == TB_NHWC);
    }
}

template <typename T>
static void bn_dx_launch(cudaStream_t st, const cu_fk_shape *s, const void *dr, const void *x, const float *mean,
                         const float *invstd, const float *gamma, const float *dgamma, const float *dbeta, void *dx,
                         int acc) {
    size_t n = (size_t)s->N * s->C * s->H * s->W, HW = (size_t)s->H * s->W;
    float inv_m = (float)(1.0 / ((double)s->N * HW));
    if (fk_vec_ok(s, dr, x, dx)) {
        size_t nv = n / (16 / sizeof(T));
        bn_dx_vec_k<T><<<cu_blocks(nv), CU_THREADS, 0, st>>>((const T *)dr, (const T *)x, mean, invstd, gamma, dgamma,
                                                             dbeta, inv_m, (T *)dx, acc, nv, s->C);
    } else {
        bn_dx_k<T><<<cu_blocks(n), CU_THREADS, 0, st>>>((const T *)dr, (const T *)x, mean, invstd, gamma, dgamma, dbeta,
                                                        inv_m, (T *)dx, acc, n, s->C, HW, s->layout == TB_NHWC);
    }
}

template <typename T>
static void to_dtype_launch(cudaStream_t st, int C, const float *scale, const float *bias, void *out) {
    to_dtype_k<T><<<(C + 255) / 256, 256, 0, st>>>(C, scale, bias, (T *)out);
}

static int fk_slices(const cu_fk_shape *s) {
    size_t rows = (size_t)s->N * s->H * s->W;
    return rows < 256 ? (int)rows : 256;
}

template <typename T> static void sums_launch(cudaStream_t st, const cu_fk_shape *s, const void *y, double *part) {
    size_t rows = (size_t)s->N * s->H * s->W;
    sums_part_k<T><<<fk_slices(s), 256, 0, st>>>((const T *)y, part, rows, s->C, (size_t)s->H * s->W,
                                                 s->layout == TB_NHWC, fk_slices(s));
}

template <typename T>
static void dbn_launch(cudaStream_t st, const cu_fk_shape *s, void *dr, const void *x, const void *xp,
                       const float *mean, const float *invstd, double *part) {
    size_t rows = (size_t)s->N * s->H * s->W;
    dbn_part_k<T><<<fk_slices(s), 256, 0, st>>>((T *)dr, (const T *)x, (const T *)xp, mean, invstd, part, rows, s->C,
                                                (size_t)s->H * s->W, s->layout == TB_NHWC, fk_slices(s));
}

extern "C" void cu_fk_dbn(cudaStream_t st, const cu_fk_shape *s, void *dr, const void *x, const void *xp,
                          const float *mean, const float *invstd, float *dgamma, float *dbeta, void *scratch) {
    if (!s->N || !s->C || !s->H || !s->W) return;
    CU_DISPATCH(s->dtype, dbn_launch, st, s, dr, x, xp, mean, invstd, (double *)scratch);
    sums_comb_k<<<(s->C + 127) / 128, 128, 0, st>>>((const double *)scratch, fk_slices(s), s->C, dbeta, dgamma);
    TB_CUDA_CHECK_LAUNCH("fused BN weight gradients (composition)");
}

extern "C" int cu_fk_apply(cudaStream_t st, const cu_fk_shape *s, const void *x, const float *scale, const float *bias,
                           const void *z, const float *zscale, const float *zbias, int relu, void *y, void *relu_mask) {
    if (!s->N || !s->C || !s->H || !s->W) return 0;
    int wrote = 0;
    CU_DISPATCH(s->dtype, apply_launch, st, s, x, scale, bias, z, zscale, zbias, relu, y, relu_mask, &wrote);
    TB_CUDA_CHECK_LAUNCH("bn_apply");
    return wrote;
}

extern "C" void cu_fk_finalize(cudaStream_t st, int C, double count, const float *sum, const float *sqsum,
                               const float *gamma, const float *beta, float *running_mean, float *running_var,
                               float *save_mean, float *save_invstd, float *scale, float *bias, double momentum,
                               double eps) {
    finalize_k<<<(C + 127) / 128, 128, 0, st>>>(C, count, sum, sqsum, gamma, beta, running_mean, running_var, save_mean,
                                                save_invstd, scale, bias, momentum, eps);
    TB_CUDA_CHECK_LAUNCH("bn_finalize");
}

extern "C" void cu_fk_to_dtype(cudaStream_t st, tb_dtype dt, int C, const float *scale, const float *bias, void *out) {
    CU_DISPATCH(dt, to_dtype_launch, st, C, scale, bias, out);
    TB_CUDA_CHECK_LAUNCH("fused prologue scale and bias");
}

extern "C" void cu_fk_bn_dx(cudaStream_t st, const cu_fk_shape *s, const void *dr, const void *x, const float *mean,
                            const float *invstd, const float *gamma, const float *dgamma, const float *dbeta, void *dx,
                            int acc) {
    if (!s->N || !s->C || !s->H || !s->W) return;
    CU_DISPATCH(s->dtype, bn_dx_launch, st, s, dr, x, mean, invstd, gamma, dgamma, dbeta, dx, acc);
    TB_CUDA_CHECK_LAUNCH("fused BN input gradient");
}

extern "C" size_t cu_fk_sums_scratch(const cu_fk_shape *s) { return (size_t)fk_slices(s) * s->C * 2 * sizeof(double); }

extern "C" void cu_fk_sums(cudaStream_t st, const cu_fk_shape *s, const void *y, float *sum, float *sqsum,
                           void *scratch) {
    if (!s->N || !s->C || !s->H || !s->W) return;
    CU_DISPATCH(s->dtype, sums_launch, st, s, y, (double *)scratch);
    sums_comb_k<<<(s->C + 127) / 128, 128, 0, st>>>((const double *)scratch, fk_slices(s), s->C, sum, sqsum);
    TB_CUDA_CHECK_LAUNCH("fused per-channel sums");
}
