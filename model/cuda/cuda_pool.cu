/* cuda_pool.cu - max pooling and global average pooling on the GPU (the
 * counterpart of cpu/cpu_pool.c), NCHW and NHWC.
 *
 * Max pooling follows PyTorch exactly, as the CPU code does: padding counts
 * as -inf, a window is scanned kh outer, kw inner over its in-bounds
 * elements, and a value replaces the maximum when it is strictly greater or
 * NaN, so ties go to the first maximum (and the last NaN wins). The
 * backward pass routes each dy to its window's argmax only and is a gather
 * without atomics: every input adds the dy of the windows whose argmax it
 * is in (oh, ow) order, onto dx (acc) or 0, as the CPU does. Deterministic,
 * and bit for bit the CPU's sums rounded once to the element type.
 *
 * Speed. The ResNet stem, bf16 NHWC batch 256: x [256,64,112,112] (411 MB)
 * -> y [256,64,56,56] (103 MB), k3 s2 p1. At ~3 TB/s the floor is 0.17 ms
 * forward (read x, write y) and 0.31 ms backward (read x and dy, write dx:
 * 925 MB). The first version spent 1.0 ms and 9.7 ms: scalar loads, 64-bit
 * index division per element, and a backward that rescanned the up to 4
 * windows of every input (36 loads of x per input element). Now:
 *  - Index math in 32 bits when x has < 2^31 elements (a 64-bit variant
 *    otherwise), one decomposition per thread or block, not per element.
 *  - NHWC: threads along C, 16-byte accesses (8 bf16/fp16 or 4 fp32
 *    channels) when C is a multiple of that and the data 16-byte aligned;
 *    else one channel per thread (still coalesced along C). NCHW: threads
 *    along W.
 *  - k3 s2 (ResNet) compiled with both constant; other windows generic.
 *  - Forward: a thread per output (vector): its window's 9 loads hit L1/L2
 *    (2.25 loads per x element), DRAM moves x and y once: ~0.2 ms.
 *  - Backward, tiled single pass: a block owns a 16x16 tile of input
 *    positions and 8 channel vectors (64 bf16 channels). It computes the
 *    argmax of each window touching the tile once (9x9 windows for k3 s2:
 *    1.27 per output, the 17 % halo) and keeps it in shared memory as a
 *    uint8 offset kh*k + kw with the window's dy (81 x 64 x 3 B = 15.2 KiB);
 *    then each owned input compares its offset in its <= 4 windows and sums
 *    the matching dy. DRAM: x once (its halo rows and columns are the
 *    neighbouring tiles', which run next and hit L2), dy once (+ halo, L2),
 *    dx written once: ~925 MB, ~0.33 ms.
 *    The two-pass alternative (a kernel writing every window's argmax as a
 *    uint8 to a [N,C,Ho,Wo] scratch, a second gathering from it) moves 102
 *    MB more (51 MB written, read back), needs a second launch and a 51 MB
 *    scratch reserved by a plan the max-pool op does not have: the table's
 *    maxpool ops take no plan, and growing a workspace inside the captured
 *    step is not allowed. The tile keeps the argmax on chip instead.
 *  - k > 15 (offsets past uint8, tiles past shared memory): the recomputing
 *    gather (one thread per input rescans its windows), slow but exact.
 */
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_kernels.cuh"

typedef struct {
    tb_dtype dtype;
    tb_layout layout;
    int N, C, H, W, Ho, Wo; /* input [N,C,H,W], output [N,C,Ho,Wo] */
    int k, stride, pad;
} cu_pool_shape;

/* V consecutive elements moved as one access (16 bytes on the vector path). */
template <typename T, int V> struct alignas(sizeof(T) * V) cu_pack {
    T v[V];
};

/* Window (oh, ow) starting at (h0, w0) = (oh*stride - pad, ow*stride - pad)
 * of V channels at xb (rs, cs: element strides of a row and a column): its
 * maxima m[] and argmax offsets a[] = kh*k + kw. K: k when compiled in, 0
 * for s.k at run time. */
template <typename T, int V, int K, typename I>
__device__ __forceinline__ void window_scan(const T *xb, I rs, I cs, int h0, int w0, int k, int H,
                                            int W, float (&m)[V], int (&a)[V]) {
    const int kk = K ? K : k;
    const int kh0 = max(0, -h0), kh1 = min(kk, H - h0);
    const int kw0 = max(0, -w0), kw1 = min(kk, W - w0);
#pragma unroll
    for (int j = 0; j < V; j++) {
        m[j] = -INFINITY;
        a[j] = kh0 * kk + kw0; /* the first in-bounds element */
    }
    if constexpr (K != 0) {
#pragma unroll
        for (int kh = 0; kh < K; kh++) {
            if (kh < kh0 || kh >= kh1) continue;
            const T *row = xb + (I)(h0 + kh) * rs;
#pragma unroll
            for (int kw = 0; kw < K; kw++) {
                if (kw < kw0 || kw >= kw1) continue;
                const cu_pack<T, V> p = *(const cu_pack<T, V> *)(row + (I)(w0 + kw) * cs);
#pragma unroll
                for (int j = 0; j < V; j++) {
                    const float v = cu_f(p.v[j]);
                    if (v > m[j] || v != v) { /* strict '>', NaN wins */
                        m[j] = v;
                        a[j] = kh * K + kw;
                    }
                }
            }
        }
    } else {
        for (int kh = kh0; kh < kh1; kh++) {
            const T *row = xb + (I)(h0 + kh) * rs;
            for (int kw = kw0; kw < kw1; kw++) {
                const cu_pack<T, V> p = *(const cu_pack<T, V> *)(row + (I)(w0 + kw) * cs);
#pragma unroll
                for (int j = 0; j < V; j++) {
                    const float v = cu_f(p.v[j]);
                    if (v > m[j] || v != v) {
                        m[j] = v;
                        a[j] = kh * kk + kw;
                    }
                }
            }
        }
    }
}

/* The kernels say __launch_bounds__(256, 1): with a bare (256), ptxas of
 * CUDA 13 held some of them to 32 registers and spilled to local memory;
 * they need 25 to 80. */

/* One thread per output (V channels in NHWC): items = N*Ho*Wo*C/V (NHWC),
 * N*C*Ho*Wo (NCHW); KS: k3 s2 compiled in. */
template <typename T, int V, int L, int KS, typename I>
__global__ void __launch_bounds__(CU_POOL_THREADS, 1)
    maxpool_fwd(cu_pool_shape s, const T *__restrict__ x, T *__restrict__ y, I items) {
    constexpr int K = KS ? 3 : 0;
    const int stride = KS ? 2 : s.stride;
    const I step = (I)gridDim.x * blockDim.x;
    for (I it = (I)blockIdx.x * blockDim.x + threadIdx.x; it < items; it += step) {
        I p = it;
        const T *xb;
        I rs, cs;
        if constexpr (L == TB_NHWC) {
            const I cvn = (I)(s.C / V);
            const I cvec = p % cvn;
            p /= cvn;
            rs = (I)s.W * (I)s.C;
            cs = (I)s.C;
            xb = x + cvec * V; /* + the image below */
        } else {
            rs = (I)s.W;
            cs = 1;
            xb = x;
        }
        const int ow = (int)(p % (I)s.Wo);
        p /= (I)s.Wo;
        const int oh = (int)(p % (I)s.Ho);
        p /= (I)s.Ho; /* NHWC: the image; NCHW: the plane n*C + c */
        xb += p * (I)s.H * rs;
        float m[V];
        int a[V];
        window_scan<T, V, K, I>(xb, rs, cs, oh * stride - s.pad, ow * stride - s.pad, s.k, s.H,
                                s.W, m, a);
        cu_pack<T, V> o;
#pragma unroll
        for (int j = 0; j < V; j++) o.v[j] = cu_to<T>(m[j]);
        *(cu_pack<T, V> *)(y + it * V) = o; /* NHWC: (pixel*C/V + cvec)*V; NCHW: it */
    }
}

/* The tiled backward (see the top and cu_pool_tiling): per block, stage 1
 * fills the shared slots of the windows touching the tile (argmax offsets
 * and dy), stage 2 gathers every owned input's gradient from them. */
template <typename T, int V, int L, int KS, typename I>
__global__ void __launch_bounds__(CU_POOL_THREADS, 1)
    maxpool_bwd_tiled(cu_pool_shape s, cu_pool_tiling t, const T *__restrict__ x,
                      const T *__restrict__ dy, T *__restrict__ dx, int acc, I blocks) {
    constexpr int K = KS ? 3 : 0;
    const int k = KS ? 3 : s.k, stride = KS ? 2 : s.stride, pad = s.pad;
    extern __shared__ __align__(16) unsigned char cu_pool_smem[];
    cu_pack<T, V> *sdy = (cu_pack<T, V> *)cu_pool_smem; /* [slots] */
    cu_pack<unsigned char, V> *sarg =
        (cu_pack<unsigned char, V> *)(cu_pool_smem + (size_t)t.nwh * t.nww * t.cv * sizeof(cu_pack<T, V>));
    /* strides in elements: x/dx rows and columns, dy rows and columns, and
     * between channel vectors */
    const I rs = L == TB_NHWC ? (I)s.W * (I)s.C : (I)s.W, cs = L == TB_NHWC ? (I)s.C : 1;
    const I drs = L == TB_NHWC ? (I)s.Wo * (I)s.C : (I)s.Wo, dcs = cs;
    const I xcv = L == TB_NHWC ? (I)V : (I)s.H * (I)s.W, dcv = L == TB_NHWC ? (I)V : (I)s.Ho * (I)s.Wo;
    const int area_log2 = 2 * t.tile_log2;

    for (I b = blockIdx.x; b < blocks; b += gridDim.x) {
        int n, g, th, tw, ih0, ih1, oh0, oh1, iw0, iw1, ow0, ow1;
        if constexpr (sizeof(I) == 4) cu_pool_tile_block32(&t, (unsigned)b, &n, &g, &th, &tw);
        else cu_pool_tile_block64(&t, (unsigned long long)b, &n, &g, &th, &tw);
        cu_pool_tile_span(th, t.tile, s.H, k, stride, pad, s.Ho, &ih0, &ih1, &oh0, &oh1);
        cu_pool_tile_span(tw, t.tile, s.W, k, stride, pad, s.Wo, &iw0, &iw1, &ow0, &ow1);
        const int nwh = max(0, oh1 - oh0 + 1), nww = max(0, ow1 - ow0 + 1), nwin = nwh * nww;
        const int c0 = g * t.cv, ncv = min(t.cv, t.cvecs - c0); /* channel vectors here */
        const T *xb, *dyb;
        T *dxb;
        if constexpr (L == TB_NHWC) {
            xb = x + (I)n * (I)s.H * rs + (I)c0 * V;
            dxb = dx + (I)n * (I)s.H * rs + (I)c0 * V;
            dyb = dy + (I)n * (I)s.Ho * drs + (I)c0 * V;
        } else {
            xb = x + ((I)n * (I)s.C + (I)c0) * xcv;
            dxb = dx + ((I)n * (I)s.C + (I)c0) * xcv;
            dyb = dy + ((I)n * (I)s.C + (I)c0) * dcv;
        }

        /* stage 1: argmax and dy of each (window, channel vector) */
        for (int it = threadIdx.x; it < nwin * t.cv; it += blockDim.x) {
            int w, cv;
            if constexpr (L == TB_NHWC) {
                cv = it & (t.cv - 1);
                w = it >> t.cv_log2;
            } else {
                w = it % nwin;
                cv = it / nwin;
            }
            if (cv >= ncv) continue;
            const int oh = oh0 + w / nww, ow = ow0 + w % nww;
            float m[V];
            int a[V];
            window_scan<T, V, K, I>(xb + (I)cv * xcv, rs, cs, oh * stride - pad, ow * stride - pad,
                                    k, s.H, s.W, m, a);
            const int slot = cu_pool_slot((tb_layout)L, w, cv, t.cv, nwin);
            sdy[slot] = *(const cu_pack<T, V> *)(dyb + (I)cv * dcv + (I)oh * drs + (I)ow * dcs);
            cu_pack<unsigned char, V> ap;
#pragma unroll
            for (int j = 0; j < V; j++) ap.v[j] = (unsigned char)a[j];
            sarg[slot] = ap;
        }
        __syncthreads();

        /* stage 2: each owned input sums the dy of the windows it is the argmax of */
        for (int it = threadIdx.x; it < (t.cv << area_log2); it += blockDim.x) {
            int pos, cv;
            if constexpr (L == TB_NHWC) {
                cv = it & (t.cv - 1);
                pos = it >> t.cv_log2;
            } else {
                pos = it & ((1 << area_log2) - 1);
                cv = it >> area_log2;
            }
            const int ih = ih0 + (pos >> t.tile_log2), iw = iw0 + (pos & (t.tile - 1));
            if (cv >= ncv || ih >= ih1 || iw >= iw1) continue;
            T *dp = dxb + (I)cv * xcv + (I)ih * rs + (I)iw * cs;
            float gsum[V];
            if (acc) {
                const cu_pack<T, V> p = *(const cu_pack<T, V> *)dp;
#pragma unroll
                for (int j = 0; j < V; j++) gsum[j] = cu_f(p.v[j]);
            } else {
#pragma unroll
                for (int j = 0; j < V; j++) gsum[j] = 0.0f;
            }
            int any = 0, ha, hb, wa, wb;
            cu_pool_windows(ih, k, stride, pad, s.Ho, &ha, &hb);
            cu_pool_windows(iw, k, stride, pad, s.Wo, &wa, &wb);
            for (int oh = ha; oh <= hb; oh++) {
                const int row = (ih - (oh * stride - pad)) * k;
                for (int ow = wa; ow <= wb; ow++) {
                    const int me = row + iw - (ow * stride - pad);
                    const int slot = cu_pool_slot((tb_layout)L, (oh - oh0) * nww + (ow - ow0), cv, t.cv, nwin);
                    const cu_pack<unsigned char, V> ap = sarg[slot];
                    const cu_pack<T, V> d = sdy[slot];
#pragma unroll
                    for (int j = 0; j < V; j++)
                        if (ap.v[j] == me) {
                            gsum[j] = __fadd_rn(gsum[j], cu_f(d.v[j]));
                            any = 1;
                        }
                }
            }
            if (acc && !any) continue; /* dx stays as it is, bit for bit */
            cu_pack<T, V> o;
#pragma unroll
            for (int j = 0; j < V; j++) o.v[j] = cu_to<T>(gsum[j]);
            *(cu_pack<T, V> *)dp = o;
        }
        __syncthreads(); /* the slots are refilled for the next tile */
    }
}

/* k > CU_POOL_MAX_K: one thread per input element rescans each window that
 * contains it (the CPU's scan) and adds the dy of those whose argmax it is. */
template <typename T, typename I>
__global__ void __launch_bounds__(CU_POOL_THREADS, 1)
    maxpool_bwd_recompute(cu_pool_shape s, const T *__restrict__ x, const T *__restrict__ dy,
                          T *__restrict__ dx, int acc, I n_in) {
    const I rs = s.layout == TB_NHWC ? (I)s.W * (I)s.C : (I)s.W, cs = s.layout == TB_NHWC ? (I)s.C : 1;
    const I drs = s.layout == TB_NHWC ? (I)s.Wo * (I)s.C : (I)s.Wo;
    const I step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n_in; i += step) {
        I p = i;
        int c, ih, iw;
        if (s.layout == TB_NHWC) {
            c = (int)(p % (I)s.C), p /= (I)s.C;
            iw = (int)(p % (I)s.W), p /= (I)s.W;
            ih = (int)(p % (I)s.H), p /= (I)s.H; /* p: the image */
        } else {
            iw = (int)(p % (I)s.W), p /= (I)s.W;
            ih = (int)(p % (I)s.H), p /= (I)s.H;
            c = 0; /* p: the plane */
        }
        const T *xb = s.layout == TB_NHWC ? x + p * (I)s.H * rs + (I)c : x + p * (I)s.H * rs;
        const T *dyb = s.layout == TB_NHWC ? dy + p * (I)s.Ho * drs + (I)c : dy + p * (I)s.Ho * drs;
        float g = acc ? cu_f(dx[i]) : 0.0f;
        int any = 0, ha, hb, wa, wb;
        cu_pool_windows(ih, s.k, s.stride, s.pad, s.Ho, &ha, &hb);
        cu_pool_windows(iw, s.k, s.stride, s.pad, s.Wo, &wa, &wb);
        for (int oh = ha; oh <= hb; oh++)
            for (int ow = wa; ow <= wb; ow++) {
                float m[1];
                int a[1];
                const int h0 = oh * s.stride - s.pad, w0 = ow * s.stride - s.pad;
                window_scan<T, 1, 0, I>(xb, rs, cs, h0, w0, s.k, s.H, s.W, m, a);
                if (a[0] == (ih - h0) * s.k + (iw - w0)) {
                    g = __fadd_rn(g, cu_f(dyb[(I)oh * drs + (I)ow * cs]));
                    any = 1;
                }
            }
        if (!acc || any) dx[i] = cu_to<T>(g);
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

/* dx[n,c,h,w] (+)= dy[n,c] / (H*W); the plane's (n, c) in 32-bit index math
 * below 2^31 elements (as the conversions: three 64-bit divisions an
 * element made this 0.14 ms of the H200's bf16 step for 13M elements) */
__device__ __forceinline__ void avg_nc(tb_layout l, int C, int H, int W, uint32_t i, uint32_t *n, uint32_t *c) {
    uint32_t h, w;
    tb_layout_coords32(l, (uint32_t)C, (uint32_t)H, (uint32_t)W, i, n, c, &h, &w);
}
__device__ __forceinline__ void avg_nc(tb_layout l, int C, int H, int W, size_t i, size_t *n, size_t *c) {
    int a, b, h, w;
    tb_layout_coords(l, C, H, W, i, &a, &b, &h, &w);
    *n = (size_t)a, *c = (size_t)b;
}

template <typename T, typename I>
__global__ void avgpool_bwd(cu_pool_shape s, const T *dy, T *dx, int acc) {
    const I n_in = (I)s.N * (I)s.C * (I)s.H * (I)s.W;
    const float hw = (float)((size_t)s.H * s.W);
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n_in; i += (I)gridDim.x * blockDim.x) {
        I n, c;
        avg_nc(s.layout, s.C, s.H, s.W, i, &n, &c);
        float v = __fdiv_rn(cu_ld(dy, (size_t)n * s.C + c), hw);
        cu_st(dx, i, acc ? __fadd_rn(cu_ld(dx, i), v) : v);
    }
}

/* ---- launchers: dtype, then access width and layout, then index width and window ---- */

#define CU_POOL_INDEX32_LIMIT ((size_t)1 << 31)
static_assert(CU_POOL_THREADS == CU_THREADS, "cu_blocks sizes the forward's grid for CU_THREADS");

typedef struct {
    int wide;   /* 64-bit indices */
    int vector; /* 16-byte accesses along C */
} cu_pool_path;

/* Which kernels a call takes: 64-bit indices when x or y has 2^31 elements
 * or more (y can be the larger: an even window padded by half of it), vector accesses for NHWC with C a multiple of the vector and every
 * pointer 16-byte aligned; flags (tb_cuda_pool_force) force the wide and the
 * scalar ones. */
static cu_pool_path pool_path(tb_backend *be, const cu_pool_shape *s, const void *a,
                              const void *b, const void *c, const void *d) {
    const int flags = cu_pool_force_flags(be);
    const size_t n_in = (size_t)s->N * s->C * s->H * s->W, n_out = (size_t)s->N * s->C * s->Ho * s->Wo;
    const size_t vec = 16 / tb_dtype_size(s->dtype);
    const uintptr_t ptrs = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d;
    cu_pool_path p;
    p.wide = n_in >= CU_POOL_INDEX32_LIMIT || n_out >= CU_POOL_INDEX32_LIMIT || (flags & TB_CUDA_POOL_WIDE);
    p.vector = s->layout == TB_NHWC && (size_t)s->C % vec == 0 && ptrs % 16 == 0 &&
               !(flags & TB_CUDA_POOL_SCALAR);
    return p;
}

static unsigned pool_grid(size_t blocks) {
    return blocks < 0x7fffffffu ? (unsigned)(blocks ? blocks : 1) : 0x7fffffffu;
}

template <typename T, int V, int L, int KS, typename I>
static void fwd_go(cudaStream_t st, const cu_pool_shape *s, const void *x, void *y) {
    const size_t items = (size_t)s->N * s->C * s->Ho * s->Wo / V;
    maxpool_fwd<T, V, L, KS, I><<<cu_blocks(items), CU_POOL_THREADS, 0, st>>>(*s, (const T *)x, (T *)y, (I)items);
}
template <typename T, int V, int L>
static void fwd_pick(cudaStream_t st, const cu_pool_shape *s, const void *x, void *y, int wide) {
    if (wide) fwd_go<T, V, L, 0, unsigned long long>(st, s, x, y);
    else if (s->k == 3 && s->stride == 2) fwd_go<T, V, L, 1, unsigned>(st, s, x, y);
    else fwd_go<T, V, L, 0, unsigned>(st, s, x, y);
}
template <typename T>
static void maxpool_fwd_launch(cudaStream_t st, const cu_pool_shape *s, const void *x, void *y,
                               cu_pool_path p) {
    if (s->layout == TB_NCHW) fwd_pick<T, 1, TB_NCHW>(st, s, x, y, p.wide);
    else if (p.vector) fwd_pick<T, 16 / sizeof(T), TB_NHWC>(st, s, x, y, p.wide);
    else fwd_pick<T, 1, TB_NHWC>(st, s, x, y, p.wide);
}

template <typename T, int V, int L, int KS, typename I>
static void bwd_go(cudaStream_t st, const cu_pool_shape *s, const cu_pool_tiling *t, const void *x,
                   const void *dy, void *dx, int acc) {
    const size_t blocks = cu_pool_tile_blocks(t, s->N);
    maxpool_bwd_tiled<T, V, L, KS, I><<<pool_grid(blocks), CU_POOL_THREADS, t->smem, st>>>(
        *s, *t, (const T *)x, (const T *)dy, (T *)dx, acc, (I)blocks);
}
template <typename T, int V, int L>
static void bwd_pick(cudaStream_t st, const cu_pool_shape *s, const void *x, const void *dy,
                     void *dx, int acc, int wide) {
    cu_pool_tiling t;
    if (!cu_pool_tiling_for((tb_layout)L, s->C, s->H, s->W, s->Ho, s->Wo, s->k, s->stride,
                            (int)sizeof(T), V > 1, &t)) {
        const size_t n = (size_t)s->N * s->C * s->H * s->W;
        if (wide)
            maxpool_bwd_recompute<T, unsigned long long><<<cu_blocks(n), CU_POOL_THREADS, 0, st>>>(
                *s, (const T *)x, (const T *)dy, (T *)dx, acc, (unsigned long long)n);
        else
            maxpool_bwd_recompute<T, unsigned><<<cu_blocks(n), CU_POOL_THREADS, 0, st>>>(
                *s, (const T *)x, (const T *)dy, (T *)dx, acc, (unsigned)n);
        return;
    }
    if (wide) bwd_go<T, V, L, 0, unsigned long long>(st, s, &t, x, dy, dx, acc);
    else if (s->k == 3 && s->stride == 2) bwd_go<T, V, L, 1, unsigned>(st, s, &t, x, dy, dx, acc);
    else bwd_go<T, V, L, 0, unsigned>(st, s, &t, x, dy, dx, acc);
}
template <typename T>
static void maxpool_bwd_launch(cudaStream_t st, const cu_pool_shape *s, const void *x,
                               const void *dy, void *dx, int acc, cu_pool_path p) {
    if (s->layout == TB_NCHW) bwd_pick<T, 1, TB_NCHW>(st, s, x, dy, dx, acc, p.wide);
    else if (p.vector) bwd_pick<T, 16 / sizeof(T), TB_NHWC>(st, s, x, dy, dx, acc, p.wide);
    else bwd_pick<T, 1, TB_NHWC>(st, s, x, dy, dx, acc, p.wide);
}
template <typename T>
static void avgpool_fwd_launch(cudaStream_t st, const cu_pool_shape *s, const void *x, void *y) {
    avgpool_fwd<T><<<cu_blocks((size_t)s->N * s->C), CU_THREADS, 0, st>>>(*s, (const T *)x, (T *)y);
}
template <typename T>
static void avgpool_bwd_launch(cudaStream_t st, const cu_pool_shape *s, const void *dy, void *dx,
                               int acc) {
    size_t n = (size_t)s->N * s->C * s->H * s->W;
    if (n < CU_POOL_INDEX32_LIMIT)
        avgpool_bwd<T, uint32_t><<<cu_blocks(n), CU_THREADS, 0, st>>>(*s, (const T *)dy, (T *)dx, acc);
    else
        avgpool_bwd<T, size_t><<<cu_blocks(n), CU_THREADS, 0, st>>>(*s, (const T *)dy, (T *)dx, acc);
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
    cu_pool_path p = pool_path(be, &s, x->data, y->data, x->data, y->data);
    CU_DISPATCH(x->dtype, maxpool_fwd_launch, cu_stream(be), &s, x->data, y->data, p);
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
    cu_pool_path p = pool_path(be, &s, x->data, dy->data, dx->data, x->data);
    CU_DISPATCH(x->dtype, maxpool_bwd_launch, cu_stream(be), &s, x->data, dy->data, dx->data,
                accumulate, p);
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
