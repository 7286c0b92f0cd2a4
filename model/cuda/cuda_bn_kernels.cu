/* cuda_bn_kernels.cu - BatchNorm (+ residual add + ReLU) on own kernels, for
 * the layouts and types cuDNN's fused path does not take (cuda_bn.c).
 *
 * Training forward, as cpu/cpu_bn.c computes it:
 *   1. partial sums per channel: S slices of the channel's M = N*H*W
 *      values, each {sum, sum of squares} in double of (x - shift), shift =
 *      the channel's first value (so large means do not cancel);
 *   2. one warp per channel adds its S partials (lane l slices l, l + 32,
 *      ... in order, the lanes folded in a fixed butterfly: the result
 *      does not depend on timing), then mean, biased variance,
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
 *
 * The vector path (NHWC, C a multiple of V = 16 / element size, 16-byte
 * aligned buffers: every ResNet BatchNorm in 16-bit and float32 NHWC) does
 * the same three steps with 16-byte loads and stores, each thread owning V
 * channels for the whole kernel (cu_bn_vec_geom, cuda_index.h): their
 * shift, mean and coefficients stay in registers, no channel index is
 * computed per element (the scalar kernels divide a 64-bit index for every
 * element); each thread takes two rows a pass, every load issued first;
 * the elementwise steps cut the rows finer than the sums, for enough
 * blocks on small layers (cu_bn_vec_apply_geom). The arithmetic per
 * element is the scalar kernels' (the sums in
 * double, the elementwise steps in float with _rn intrinsics); only the
 * order of the double additions differs.
 *
 * The ReLU mask (vector path, with a ReLU, where the caller gives one: the
 * node's reserve space, cuda_bn.c): the forward writes a byte per 16-byte
 * word of y, bit k set where element k was kept (cu_relu_keep_bits), and
 * the backward reads that byte instead of the word of y: one read of an
 * activation-sized tensor fewer in each of its two passes (16 bytes
 * become 1). The bits are the test the backward makes on y, so its
 * results are the same bits either way.
 */
#include <string.h>

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
    const uint8_t *mask; /* backward, vector path: the forward's ReLU mask (NULL: y is read) */
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
__global__ void __launch_bounds__(CU_BN_VEC_THREADS)
    bn_partials_vec(bn_term<T, BWD> t, size_t M, int C, cu_bn_vgeom g, double2 *part);

/* g: the vector path's geometry, or NULL */
template <typename T, int BWD>
static void partials(cudaStream_t st, const cu_bn_shape *s, bn_term<T, BWD> t, const cu_bn_vgeom *g,
                     double2 *part) {
    int S = slices(s);
    if (g) {
        dim3 grid(g->gx, g->S), block(g->bx, g->by);
        bn_partials_vec<T, BWD><<<grid, block, 0, st>>>(t, (size_t)s->N * s->H * s->W, s->C, *g, part);
    } else if (s->layout == TB_NCHW) {
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

/* Channel c's S partials, added by one warp: lane l takes slices l, l +
 * 32, ... in order, then the lanes' sums fold in a butterfly of fixed order
 * (every lane ends with the same sum, whatever the timing). Up to 512
 * slices a channel: 32 loads in flight where a thread per channel had 8, a
 * loop of 16 round trips where it had 64. */
#define BN_FIN_WARPS 4 /* channels (warps) per block of the finalize kernels */
__device__ __forceinline__ int fin_channel() { return blockIdx.x * BN_FIN_WARPS + (int)(threadIdx.x / 32); }
__device__ __forceinline__ double2 fin_sum(const double2 *part, int S, int C, int c) {
    double a = 0.0, b = 0.0;
    for (int k = threadIdx.x & 31; k < S; k += 32) {
        const double2 p = part[(size_t)k * C + c];
        a += p.x;
        b += p.y;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    return make_double2(a, b);
}
static unsigned fin_blocks(int C) { return (unsigned)((C + BN_FIN_WARPS - 1) / BN_FIN_WARPS); }

/* coef: mean[C], scale[C] (then two unused arrays); grid fin_blocks(C) x
 * 32 * BN_FIN_WARPS threads */
template <typename T>
__global__ void bn_finalize_train(const double2 *part, int S, int C, size_t M, const T *x,
                                  size_t first_stride, const float *gamma, float *rmean,
                                  float *rvar, float *smean, float *sinv, double mom, double eps,
                                  float *coef) {
    const int c = fin_channel();
    if (c >= C) return; /* the whole warp */
    const double2 sum = fin_sum(part, S, C, c);
    if (threadIdx.x & 31) return;
    const double s = sum.x, ss = sum.y;
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

/* coef: mean[C], k[C], gmean[C], q[C]; grid as bn_finalize_train */
__global__ void bn_finalize_backward(const double2 *part, int S, int C, size_t M,
                                     const float *gamma, const float *smean, const float *sinv,
                                     float *dgamma, float *dbeta, float *coef) {
    const int c = fin_channel();
    if (c >= C) return; /* the whole warp */
    const double2 sum = fin_sum(part, S, C, c);
    if (threadIdx.x & 31) return;
    const double sg = sum.x, sgx = sum.y;
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

/* ---- the vector path (NHWC, C % V == 0, 16-byte aligned) ---------------------------------- */

template <typename T> struct alignas(16) bn_vec { /* one 16-byte word of V elements */
    static constexpr int V = 16 / sizeof(T);
    T e[V];
};
template <typename T> __device__ __forceinline__ bn_vec<T> vld(const T *p, size_t j) {
    const uint4 w = reinterpret_cast<const uint4 *>(p)[j];
    bn_vec<T> v;
    memcpy(&v, &w, sizeof w);
    return v;
}
template <typename T> __device__ __forceinline__ void vst(T *p, size_t j, const bn_vec<T> &v) {
    uint4 w;
    memcpy(&w, &v, sizeof w);
    reinterpret_cast<uint4 *>(p)[j] = w;
}

/* step 1's terms of one word: the forward's (x - shift) and its square;
 * the backward's g and g * (x - mean) */
template <typename T>
__device__ __forceinline__ void add_fwd(const bn_vec<T> &xv, const float *ref, double *a, double *b) {
#pragma unroll
    for (int k = 0; k < bn_vec<T>::V; k++) {
        double v = (double)cu_f(xv.e[k]) - (double)ref[k];
        a[k] += v;
        b[k] += v * v;
    }
}
template <typename T>
__device__ __forceinline__ void add_bwd(const bn_vec<T> &xv, const bn_vec<T> &dv, unsigned keep, const float *ref,
                                        double *a, double *b) {
#pragma unroll
    for (int k = 0; k < bn_vec<T>::V; k++) {
        float gk = keep >> k & 1u ? cu_f(dv.e[k]) : 0.0f;
        a[k] += gk;
        b[k] += (double)gk * ((double)cu_f(xv.e[k]) - (double)ref[k]);
    }
}

/* Which elements of word j the ReLU kept (bit k: element k; all without a
 * ReLU): from the forward's mask where there is one, else from y. */
template <typename T>
__device__ __forceinline__ unsigned keep_word(int relu, const uint8_t *mask, const T *y, size_t j) {
    if (!relu) return 0xffu;
    if (mask) return mask[j];
    const bn_vec<T> yv = vld(y, j);
    return cu_relu_keep_bits<T, bn_vec<T>::V>(yv.e);
}

/* step 1: partial sums of slice s for this thread's V channels, two rows
 * at a time (every load of both issued first), the block's by rows of
 * them added in shared memory in ty order; part[s][c] */
template <typename T, int BWD>
__global__ void __launch_bounds__(CU_BN_VEC_THREADS)
    bn_partials_vec(bn_term<T, BWD> t, size_t M, int C, cu_bn_vgeom g, double2 *part) {
    constexpr int V = bn_vec<T>::V, NT = CU_BN_VEC_THREADS;
    __shared__ double red[2 * NT * V]; /* cu_bn_vec_smem_doubles: [sums | squares][k][thread] */
    size_t r, end, step;
    const int cv = cu_bn_vec_thread(&g, M, blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, &r, &end, &step);
    const int tid = threadIdx.y * g.bx + threadIdx.x;
    double a[V], b[V];
    float ref[V]; /* forward: the channel's first value (the shift); backward: its mean */
#pragma unroll
    for (int k = 0; k < V; k++) a[k] = b[k] = 0.0, ref[k] = 0.0f;
    if (cv < g.nv) {
#pragma unroll
        for (int k = 0; k < V; k++) ref[k] = BWD ? t.mean[cv * V + k] : cu_ld(t.x, (size_t)cv * V + k);
        for (; r < end; r += 2 * step) {
            const size_t j0 = r * (size_t)g.nv + cv, j1 = (r + step) * (size_t)g.nv + cv;
            const int two = r + step < end;
            const bn_vec<T> x0 = vld(t.x, j0), x1 = two ? vld(t.x, j1) : x0;
            if (!BWD) {
                add_fwd(x0, ref, a, b);
                if (two) add_fwd(x1, ref, a, b);
            } else {
                const bn_vec<T> d0 = vld(t.dy, j0), d1 = two ? vld(t.dy, j1) : d0;
                const unsigned k0 = keep_word(t.relu, t.mask, t.y, j0), k1 = two ? keep_word(t.relu, t.mask, t.y, j1) : 0u;
                add_bwd(x0, d0, k0, ref, a, b);
                if (two) add_bwd(x1, d1, k1, ref, a, b);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < V; k++) red[k * NT + tid] = a[k], red[(V + k) * NT + tid] = b[k];
    __syncthreads();
    if (threadIdx.y != 0 || cv >= g.nv) return;
    for (int y = 1; y < g.by; y++) {
        const int o = y * g.bx + threadIdx.x;
#pragma unroll
        for (int k = 0; k < V; k++) a[k] += red[k * NT + o], b[k] += red[(V + k) * NT + o];
    }
#pragma unroll
    for (int k = 0; k < V; k++) part[(size_t)blockIdx.y * C + (size_t)cv * V + k] = make_double2(a[k], b[k]);
}

/* y = act((x - mean) * scale + beta + z) of one word */
template <typename T>
__device__ __forceinline__ bn_vec<T> apply_word(const bn_vec<T> &xv, const bn_vec<T> &zv, int has_z, int relu,
                                                const float *mu, const float *sc, const float *be) {
    bn_vec<T> yv;
#pragma unroll
    for (int k = 0; k < bn_vec<T>::V; k++) {
        float v = __fadd_rn(__fmul_rn(__fsub_rn(cu_f(xv.e[k]), mu[k]), sc[k]), be[k]);
        if (has_z) v = __fadd_rn(v, cu_f(zv.e[k]));
        if (relu) v = v < 0.0f ? 0.0f : v; /* keeps NaN, as torch.relu */
        yv.e[k] = cu_to<T>(v);
    }
    return yv;
}

/* step 3 forward over this thread's rows (g: cu_bn_vec_apply_geom's), two
 * at a time, both rows read before either is written (y may be x); mask
 * (with relu, or NULL): each word's ReLU mask byte */
template <typename T>
__global__ void __launch_bounds__(CU_BN_VEC_THREADS)
    bn_apply_vec(const T *x, const T *z, T *y, size_t M, int C, cu_bn_vgeom g, int relu, const float *coef,
                 const float *beta, uint8_t *mask) {
    constexpr int V = bn_vec<T>::V;
    size_t r, end, step;
    const int cv = cu_bn_vec_thread(&g, M, blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, &r, &end, &step);
    if (cv >= g.nv) return;
    float mu[V], sc[V], be[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        const int c = cv * V + k;
        mu[k] = coef[c], sc[k] = coef[C + c], be[k] = beta[c];
    }
    for (; r < end; r += 2 * step) {
        const size_t j0 = r * (size_t)g.nv + cv, j1 = (r + step) * (size_t)g.nv + cv;
        const int two = r + step < end;
        const bn_vec<T> x0 = vld(x, j0), x1 = two ? vld(x, j1) : x0;
        const bn_vec<T> z0 = z ? vld(z, j0) : x0, z1 = z && two ? vld(z, j1) : x1;
        const bn_vec<T> y0 = apply_word(x0, z0, z != NULL, relu, mu, sc, be);
        vst(y, j0, y0);
        if (mask) mask[j0] = (uint8_t)cu_relu_keep_bits<T, V>(y0.e);
        if (two) {
            const bn_vec<T> y1 = apply_word(x1, z1, z != NULL, relu, mu, sc, be);
            vst(y, j1, y1);
            if (mask) mask[j1] = (uint8_t)cu_relu_keep_bits<T, V>(y1.e);
        }
    }
}

/* step 3 backward: dx (+)= (g - gmean - (x - mean) * q) * k, dz (+)= g
 * (g: cu_bn_vec_apply_geom's; mask: the forward's, or NULL: y is read) */
template <typename T>
__global__ void __launch_bounds__(CU_BN_VEC_THREADS)
    bn_apply_backward_vec(const T *x, const T *y, const T *dy, T *dx, T *dz, size_t M, int C, cu_bn_vgeom g,
                          int relu, int acc_dx, int acc_dz, const float *coef, const uint8_t *mask) {
    constexpr int V = bn_vec<T>::V;
    size_t r, end, step;
    const int cv = cu_bn_vec_thread(&g, M, blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, &r, &end, &step);
    if (cv >= g.nv) return;
    float mu[V], kk[V], gm[V], q[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        const int c = cv * V + k;
        mu[k] = coef[c], kk[k] = coef[C + c], gm[k] = coef[2 * C + c], q[k] = coef[3 * C + c];
    }
    for (; r < end; r += step) {
        const size_t j = r * (size_t)g.nv + cv;
        /* read everything before writing: dx or dz may alias dy */
        const bn_vec<T> xv = vld(x, j), dv = vld(dy, j);
        const unsigned keep = keep_word(relu, mask, y, j);
        bn_vec<T> dxo = dv, dzo = dv, dxv, dzv;
        if (acc_dx) dxo = vld(dx, j);
        if (dz && acc_dz) dzo = vld(dz, j);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float gk = keep >> k & 1u ? cu_f(dv.e[k]) : 0.0f;
            float xm = __fsub_rn(cu_f(xv.e[k]), mu[k]);
            float v = __fmul_rn(__fsub_rn(__fsub_rn(gk, gm[k]), __fmul_rn(xm, q[k])), kk[k]);
            dzv.e[k] = cu_to<T>(acc_dz ? __fadd_rn(cu_f(dzo.e[k]), gk) : gk);
            dxv.e[k] = cu_to<T>(acc_dx ? __fadd_rn(cu_f(dxo.e[k]), v) : v);
        }
        if (dz) vst(dz, j, dzv);
        vst(dx, j, dxv);
    }
}

/* The vector path's geometry for this call, or 0: the scalar kernels. */
static int vec_geom(const cu_bn_shape *s, const void *const *bufs, int nbufs, cu_bn_vgeom *g) {
    if (s->layout != TB_NHWC) return 0;
    for (int i = 0; i < nbufs; i++)
        if (bufs[i] && ((uintptr_t)bufs[i] & 15u)) return 0;
    return cu_bn_vec_geom(s->C, (int)tb_dtype_size(s->dtype), (size_t)s->N * s->H * s->W, g);
}

/* ---- launchers ---------------------------------------------------------------------------- */

static float *coef_of(const cu_bn_shape *s, void *scratch) {
    return (float *)((double2 *)scratch + (size_t)slices(s) * s->C);
}

template <typename T>
static void train(cudaStream_t st, const cu_bn_shape *s, const void *x, const void *z, void *y,
                  int relu, const float *gamma, const float *beta, float *rm, float *rv,
                  float *sm, float *si, double mom, double eps, void *scratch, void *mask, int *wrote) {
    bn_term<T, 0> t = {(const T *)x, NULL, NULL, NULL, 0, NULL};
    double2 *part = (double2 *)scratch;
    float *coef = coef_of(s, scratch);
    const void *bufs[] = {x, z, y};
    cu_bn_vgeom g;
    const int vec = vec_geom(s, bufs, 3, &g);
    partials<T, 0>(st, s, t, vec ? &g : NULL, part);
    size_t M = (size_t)s->N * s->H * s->W, HW = (size_t)s->H * s->W;
    size_t first_stride = s->layout == TB_NCHW ? HW : 1; /* channel c's first element */
    bn_finalize_train<T><<<fin_blocks(s->C), 32 * BN_FIN_WARPS, 0, st>>>(
        part, slices(s), s->C, M, (const T *)x, first_stride, gamma, rm, rv, sm, si, mom, eps, coef);
    TB_CUDA_CHECK_LAUNCH("BatchNorm statistics");
    size_t n = M * s->C;
    *wrote = vec && relu && mask;
    if (vec) {
        const cu_bn_vgeom ga = cu_bn_vec_apply_geom(&g, M);
        bn_apply_vec<T><<<dim3(ga.gx, ga.S), dim3(ga.bx, ga.by), 0, st>>>(
            (const T *)x, (const T *)z, (T *)y, M, s->C, ga, relu, coef, beta, *wrote ? (uint8_t *)mask : NULL);
    } else
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
    const void *bufs[] = {x, z, y};
    cu_bn_vgeom g;
    if (vec_geom(s, bufs, 3, &g)) {
        const cu_bn_vgeom ga = cu_bn_vec_apply_geom(&g, (size_t)s->N * HW);
        bn_apply_vec<T><<<dim3(ga.gx, ga.S), dim3(ga.bx, ga.by), 0, st>>>((const T *)x, (const T *)z, (T *)y,
                                                                           (size_t)s->N * HW, s->C, ga, relu, coef,
                                                                           beta, NULL);
    } else
        bn_apply<T><<<cu_blocks(n), CU_THREADS, 0, st>>>((const T *)x, (const T *)z, (T *)y, n, s->C,
                                                         HW, s->layout, relu, coef, beta);
    TB_CUDA_CHECK_LAUNCH("BatchNorm inference apply");
}

template <typename T>
static void backward(cudaStream_t st, const cu_bn_shape *s, const void *x, const void *y,
                     const void *dy, void *dx, void *dz, int relu, int acc_dx, int acc_dz,
                     const float *gamma, const float *sm, const float *si, float *dgamma,
                     float *dbeta, void *scratch, const void *mask) {
    double2 *part = (double2 *)scratch;
    float *coef = coef_of(s, scratch);
    const void *bufs[] = {x, relu ? y : NULL, dy, dx, dz};
    cu_bn_vgeom g;
    const int vec = vec_geom(s, bufs, 5, &g);
    const uint8_t *m = vec && relu ? (const uint8_t *)mask : NULL; /* the scalar kernels read y */
    bn_term<T, 1> t = {(const T *)x, (const T *)y, (const T *)dy, sm, relu, m};
    partials<T, 1>(st, s, t, vec ? &g : NULL, part);
    size_t M = (size_t)s->N * s->H * s->W, HW = (size_t)s->H * s->W;
    bn_finalize_backward<<<fin_blocks(s->C), 32 * BN_FIN_WARPS, 0, st>>>(part, slices(s), s->C, M, gamma, sm, si,
                                                                         dgamma, dbeta, coef);
    TB_CUDA_CHECK_LAUNCH("BatchNorm backward sums");
    size_t n = M * s->C;
    if (vec) {
        const cu_bn_vgeom ga = cu_bn_vec_apply_geom(&g, M);
        bn_apply_backward_vec<T><<<dim3(ga.gx, ga.S), dim3(ga.bx, ga.by), 0, st>>>(
            (const T *)x, (const T *)y, (const T *)dy, (T *)dx, (T *)dz, M, s->C, ga, relu, acc_dx, acc_dz, coef, m);
    } else
        bn_apply_backward<T><<<cu_blocks(n), CU_THREADS, 0, st>>>(
            (const T *)x, (const T *)y, (const T *)dy, (T *)dx, (T *)dz, n, s->C, HW, s->layout, relu,
            acc_dx, acc_dz, coef);
    TB_CUDA_CHECK_LAUNCH("BatchNorm backward apply");
}

extern "C" int cu_bn_train_kernels(cudaStream_t st, const cu_bn_shape *s, const void *x,
                                   const void *z, void *y, int relu, const float *gamma,
                                   const float *beta, float *running_mean, float *running_var,
                                   float *save_mean, float *save_invstd, double momentum,
                                   double eps, void *scratch, void *relu_mask) {
    int wrote = 0;
    CU_DISPATCH(s->dtype, train, st, s, x, z, y, relu, gamma, beta, running_mean, running_var,
                save_mean, save_invstd, momentum, eps, scratch, relu_mask, &wrote);
    return wrote;
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
                                       float *dgamma, float *dbeta, void *scratch,
                                       const void *relu_mask) {
    CU_DISPATCH(s->dtype, backward, st, s, x, y, dy, dx, dz, relu, acc_dx, acc_dz, gamma,
                save_mean, save_invstd, dgamma, dbeta, scratch, relu_mask);
}
