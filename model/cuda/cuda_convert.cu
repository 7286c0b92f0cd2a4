/* cuda_convert.cu - dtype / layout conversion and the input ops on the
 * GPU (the counterpart of cpu/cpu_convert.c), with the same index math
 * (model/layout.h) and arithmetic:
 *   convert    dst[n,c,h,w] (+)= src[n,c,h,w]: float32 sum, one rounding
 *   convert_many  the same for a list of tensor pairs in one launch (up to
 *              CU_CVT_ITEMS a launch, passed by value; cuda_convert_many.c);
 *   input_u8   dst[n,c,h,w] = ((float)src[n,h,w',c] / 255 - mean[c]) / std[c]
 *              with w' = flip[n] ? W-1-w : w, IEEE division (__fdiv_rn), so
 *              a float32 input is bit-identical to the loader's float path.
 *   input_rows dst[n,c,h,w] = pool[rows[n],c,h,w] (float32 NCHW), one
 *              rounding: the resident batch's gather and conversion in one
 *              kernel (was a device copy per row, then convert).
 *   pad_channels    dst[p][0..cout) = src[p][0..cin), then zeros: a pixel's
 *              channels (NHWC activations, KRSC filters) padded, for a conv
 *              that runs faster on 4 or 8 input channels than on 3
 *              (cuda_conv_pad.c, the fused stem);
 *   unpad_channels  dst[p][0..ckeep) (+)= src[p][0..ckeep) of cfull: its
 *              filter gradient back (copies, or a float32 sum rounded once
 *              more).
 * One thread per destination element, in the destination's order (the
 * writes coalesce; a layout change reads with a stride), the index math in
 * 32 bits below 2^31 elements (64 above); convert with no layout change (or
 * 1x1 spatial) is a plain element-by-element pass; pad_channels one thread
 * a pixel.
 */
#include "model/cuda/cuda_kernels.cuh"

/* Element i of a [N,C,H,W] tensor in layout l -> its coordinates, and
 * back, in the index type I: model/layout.h's functions, the 32-bit ones
 * where the tensor has fewer than 2^31 elements (a 64-bit division is
 * several times the instructions of a 32-bit one, and three an element
 * made the weights' conversion compute-bound). */
__device__ __forceinline__ void coords(tb_layout l, unsigned C, unsigned H, unsigned W, unsigned i, unsigned *n,
                                       unsigned *c, unsigned *h, unsigned *w) {
    tb_layout_coords32(l, C, H, W, i, n, c, h, w);
}
__device__ __forceinline__ void coords(tb_layout l, size_t C, size_t H, size_t W, size_t i, size_t *n, size_t *c,
                                       size_t *h, size_t *w) {
    int a, b, d, e;
    tb_layout_coords(l, (int)C, (int)H, (int)W, i, &a, &b, &d, &e);
    *n = (size_t)a, *c = (size_t)b, *h = (size_t)d, *w = (size_t)e;
}
__device__ __forceinline__ unsigned offset(tb_layout l, unsigned C, unsigned H, unsigned W, unsigned n, unsigned c,
                                           unsigned h, unsigned w) {
    return tb_layout_offset32(l, C, H, W, n, c, h, w);
}
__device__ __forceinline__ size_t offset(tb_layout l, size_t C, size_t H, size_t W, size_t n, size_t c, size_t h,
                                         size_t w) {
    return tb_layout_offset(l, (int)C, (int)H, (int)W, (int)n, (int)c, (int)h, (int)w);
}

template <typename S, typename D, typename I>
__global__ void convert_k(I N, I C, I H, I W, tb_layout sl, const S *src, tb_layout dl, D *dst, int acc) {
    I n_el = N * C * H * W;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n_el; i += (I)gridDim.x * blockDim.x) {
        I n, c, h, w;
        coords(dl, C, H, W, i, &n, &c, &h, &w);
        float v = cu_ld(src, offset(sl, C, H, W, n, c, h, w));
        if (acc) v = __fadd_rn(v, cu_ld(dst, i));
        cu_st(dst, i, v);
    }
}

/* The same order in both (one layout, or H = W = 1, where NCHW and NHWC
 * coincide: every 1x1 filter and the linear layer's): element i to i. */
template <typename S, typename D> __global__ void convert_flat_k(size_t n_el, const S *src, D *dst, int acc) {
    CU_FOR(i, n_el) {
        float v = cu_ld(src, i);
        if (acc) v = __fadd_rn(v, cu_ld(dst, i));
        cu_st(dst, i, v);
    }
}

/* The list's items copied from the kernel parameters to shared memory
 * once per block (each by a constant offset: a parameter array indexed at
 * run time would be copied to every thread's local memory); each element
 * finds its item by bisection over the starts. */
static_assert(CU_CVT_ITEMS <= CU_THREADS, "convert_many_k copies one item a thread into shared memory");
static_assert(sizeof(cu_cvt_list) <= 4096, "convert_many_k's list goes by value: 4 KB of parameters before CUDA 12.1");
template <typename S, typename D>
__global__ void convert_many_k(const cu_cvt_list list, int acc) {
    __shared__ cu_cvt_item it[CU_CVT_ITEMS];
#pragma unroll
    for (int q = 0; q < CU_CVT_ITEMS; q++)
        if ((int)threadIdx.x == q && q < list.k) it[q] = list.it[q];
    __syncthreads();
    const int k = list.k;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < list.total; i += gridDim.x * blockDim.x) {
        const cu_cvt_item *t = &it[cu_cvt_item_of(it, k, i)];
        const unsigned j = i - t->start;
        float v = cu_ld((const S *)t->src, cu_cvt_src_of(t, j));
        if (acc) v = __fadd_rn(v, cu_ld((const D *)t->dst, j));
        cu_st((D *)t->dst, j, v);
    }
}

/* One thread per pixel; COUT > 0: the padded pixel is one aligned store of
 * COUT elements (8 or 16 bytes for 16-bit types at 4 or 8 channels) */
template <typename T, int COUT> struct __align__(COUT * sizeof(T)) cu_px {
    T v[COUT];
};
template <typename T, int COUT>
__global__ void pad_px_k(const T *src, T *dst, size_t pixels, int cin, float fill) {
    CU_FOR(p, pixels) {
        cu_px<T, COUT> r;
#pragma unroll
        for (int c = 0; c < COUT; c++) r.v[c] = c < cin ? src[p * cin + c] : cu_to<T>(fill);
        ((cu_px<T, COUT> *)dst)[p] = r;
    }
}

template <typename T> __global__ void pad_k(const T *src, T *dst, size_t pixels, int cin, int cout, float fill) {
    CU_FOR(i, pixels * (size_t)cout) {
        size_t p = i / (size_t)cout;
        int c = (int)(i % (size_t)cout);
        dst[i] = c < cin ? src[p * cin + c] : cu_to<T>(fill);
    }
}

template <typename T>
__global__ void unpad_k(const T *src, T *dst, size_t pixels, int cfull, int ckeep, int acc) {
    CU_FOR(i, pixels * (size_t)ckeep) {
        size_t p = i / (size_t)ckeep;
        int c = (int)(i % (size_t)ckeep);
        float v = cu_ld(src, p * cfull + c);
        if (acc) v = __fadd_rn(v, cu_ld(dst, i));
        cu_st(dst, i, v);
    }
}

template <typename D, typename I>
__global__ void input_k(I N, I H, I W, const uint8_t *src, const uint8_t *flip, tb_input_norm norm, tb_layout dl,
                        D *dst) {
    I n_el = N * 3 * H * W;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n_el; i += (I)gridDim.x * blockDim.x) {
        I n, c, h, w;
        coords(dl, (I)3, H, W, i, &n, &c, &h, &w);
        I ws = flip && flip[n] ? W - 1 - w : w;
        float v = (float)src[offset(TB_NHWC, (I)3, H, W, n, c, h, ws)];
        float x = __fdiv_rn(__fsub_rn(__fdiv_rn(v, 255.0f), norm.mean[c]), norm.std[c]);
        cu_st(dst, i, x);
    }
}

template <typename D, typename I>
__global__ void input_rows_k(I N, I C, I H, I W, const float *pool, const int32_t *rows, tb_layout dl, D *dst) {
    size_t per = (size_t)C * H * W; /* one pool row (the pool itself may pass 2^31 elements) */
    I n_el = N * C * H * W;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n_el; i += (I)gridDim.x * blockDim.x) {
        I n, c, h, w;
        coords(dl, C, H, W, i, &n, &c, &h, &w);
        const float *row = pool + (size_t)rows[n] * per;
        cu_st(dst, i, row[offset(TB_NCHW, C, H, W, (I)0, c, h, w)]);
    }
}

template <typename S, typename D>
static void convert_launch2(cudaStream_t st, int N, int C, int H, int W, tb_layout sl, const void *src, tb_layout dl,
                            void *dst, int acc) {
    size_t n = (size_t)N * C * H * W;
    const S *s = (const S *)src;
    D *d = (D *)dst;
    if (sl == dl || (H == 1 && W == 1))
        convert_flat_k<S, D><<<cu_blocks(n), CU_THREADS, 0, st>>>(n, s, d, acc);
    else if (n < ((size_t)1 << 31))
        convert_k<S, D, unsigned><<<cu_blocks(n), CU_THREADS, 0, st>>>(N, C, H, W, sl, s, dl, d, acc);
    else
        convert_k<S, D, size_t><<<cu_blocks(n), CU_THREADS, 0, st>>>(N, C, H, W, sl, s, dl, d, acc);
}

template <typename S>
static void convert_launch(cudaStream_t st, tb_dtype dt, int N, int C, int H, int W, tb_layout sl,
                           const void *src, tb_layout dl, void *dst, int acc) {
    switch (dt) {
    case TB_F32: convert_launch2<S, float>(st, N, C, H, W, sl, src, dl, dst, acc); break;
    case TB_BF16: convert_launch2<S, __nv_bfloat16>(st, N, C, H, W, sl, src, dl, dst, acc); break;
    case TB_F16: convert_launch2<S, __half>(st, N, C, H, W, sl, src, dl, dst, acc); break;
    default: TB_FATAL("cuda convert: no kernel for %s", tb_dtype_name(dt));
    }
}

template <typename T>
static void pad_launch(cudaStream_t st, size_t pixels, int cin, int cout, const void *src, void *dst, float fill) {
    const T *s = (const T *)src;
    T *d = (T *)dst;
    int al = ((uintptr_t)dst % (cout * sizeof(T))) == 0;
    if (cout == 4 && al)
        pad_px_k<T, 4><<<cu_blocks(pixels), CU_THREADS, 0, st>>>(s, d, pixels, cin, fill);
    else if (cout == 8 && al)
        pad_px_k<T, 8><<<cu_blocks(pixels), CU_THREADS, 0, st>>>(s, d, pixels, cin, fill);
    else
        pad_k<T><<<cu_blocks(pixels * cout), CU_THREADS, 0, st>>>(s, d, pixels, cin, cout, fill);
}

template <typename T>
static void unpad_launch(cudaStream_t st, size_t pixels, int cfull, int ckeep, const void *src, void *dst, int acc) {
    unpad_k<T><<<cu_blocks(pixels * ckeep), CU_THREADS, 0, st>>>((const T *)src, (T *)dst, pixels, cfull, ckeep, acc);
}

/* a 32-bit index below 2^31 elements (as convert_launch2) */
template <typename D>
static void input_launch(cudaStream_t st, int N, int H, int W, const uint8_t *src, const uint8_t *flip,
                         tb_input_norm norm, tb_layout dl, void *dst) {
    size_t n = (size_t)N * 3 * H * W;
    if (n < ((size_t)1 << 31))
        input_k<D, unsigned><<<cu_blocks(n), CU_THREADS, 0, st>>>(N, H, W, src, flip, norm, dl, (D *)dst);
    else
        input_k<D, size_t><<<cu_blocks(n), CU_THREADS, 0, st>>>(N, H, W, src, flip, norm, dl, (D *)dst);
}

template <typename D>
static void input_rows_launch(cudaStream_t st, int N, int C, int H, int W, const float *pool, const int32_t *rows,
                              tb_layout dl, void *dst) {
    size_t n = (size_t)N * C * H * W;
    if (n < ((size_t)1 << 31))
        input_rows_k<D, unsigned><<<cu_blocks(n), CU_THREADS, 0, st>>>(N, C, H, W, pool, rows, dl, (D *)dst);
    else
        input_rows_k<D, size_t><<<cu_blocks(n), CU_THREADS, 0, st>>>(N, C, H, W, pool, rows, dl, (D *)dst);
}

extern "C" void cu_convert(tb_backend *be, const tb_tensor *src, const tb_tensor *dst,
                           int accumulate) {
    const char *op = "convert";
    cu_check(src, op, "src");
    cu_check(dst, op, "dst");
    if (src->n != dst->n || src->c != dst->c || src->h != dst->h || src->w != dst->w)
        TB_FATAL("cuda convert: src [%d,%d,%d,%d] and dst [%d,%d,%d,%d] differ", src->n, src->c,
                 src->h, src->w, dst->n, dst->c, dst->h, dst->w);
    if (!tb_tensor_numel(src)) return;
    CU_DISPATCH(src->dtype, convert_launch, cu_stream(be), dst->dtype, src->n, src->c, src->h,
                src->w, src->layout, src->data, dst->layout, dst->data, accumulate);
    TB_CUDA_CHECK_LAUNCH(op);
}

/* at most CU_CVT_BLOCKS blocks (the grid-stride loop does the rest): each
 * block's copy of the items is then paid for by many elements */
#define CU_CVT_BLOCKS 2048u
template <typename S, typename D>
static void convert_many_launch2(cudaStream_t st, const cu_cvt_list *list, int acc) {
    unsigned b = cu_blocks(list->total);
    convert_many_k<S, D><<<b < CU_CVT_BLOCKS ? b : CU_CVT_BLOCKS, CU_THREADS, 0, st>>>(*list, acc);
}

template <typename S>
static void convert_many_launch(cudaStream_t st, tb_dtype dt, const cu_cvt_list *list, int acc) {
    switch (dt) {
    case TB_F32: convert_many_launch2<S, float>(st, list, acc); break;
    case TB_BF16: convert_many_launch2<S, __nv_bfloat16>(st, list, acc); break;
    case TB_F16: convert_many_launch2<S, __half>(st, list, acc); break;
    default: TB_FATAL("cuda convert_many: no kernel for %s", tb_dtype_name(dt));
    }
}

extern "C" void cu_convert_many_launch(cudaStream_t st, tb_dtype sdt, tb_dtype ddt, const cu_cvt_list *list,
                                      int acc) {
    if (list->k < 1 || list->k > CU_CVT_ITEMS) TB_FATAL("cuda convert_many: %d items in a launch", list->k);
    CU_DISPATCH(sdt, convert_many_launch, st, ddt, list, acc);
    TB_CUDA_CHECK_LAUNCH("convert_many");
}

extern "C" void cu_input_u8(tb_backend *be, const uint8_t *src, const uint8_t *flip,
                            const tb_input_norm *norm, const tb_tensor *dst) {
    cu_check(dst, "input_u8", "dst");
    if (!src || !norm) TB_FATAL("cuda input_u8: NULL argument");
    if (dst->c != 3) TB_FATAL("cuda input_u8: the input has %d channels, not 3", dst->c);
    if (!tb_tensor_numel(dst)) return;
    CU_DISPATCH(dst->dtype, input_launch, cu_stream(be), dst->n, dst->h, dst->w, src, flip, *norm,
                dst->layout, dst->data);
    TB_CUDA_CHECK_LAUNCH("input_u8");
}

extern "C" void cu_input_rows(tb_backend *be, const float *pool, const int32_t *rows,
                              const tb_tensor *dst) {
    cu_check(dst, "input_rows", "dst");
    if (!pool || !rows) TB_FATAL("cuda input_rows: NULL argument");
    if (!tb_tensor_numel(dst)) return;
    CU_DISPATCH(dst->dtype, input_rows_launch, cu_stream(be), dst->n, dst->c, dst->h, dst->w, pool,
                rows, dst->layout, dst->data);
    TB_CUDA_CHECK_LAUNCH("input_rows");
}

extern "C" void cu_pad_channels(cudaStream_t st, tb_dtype dt, size_t pixels, int cin, int cout, const void *src,
                                void *dst, float fill) {
    if (!pixels) return;
    if (cin < 1 || cout < cin) TB_FATAL("cuda pad_channels: %d channels padded to %d", cin, cout);
    CU_DISPATCH(dt, pad_launch, st, pixels, cin, cout, src, dst, fill);
    TB_CUDA_CHECK_LAUNCH("pad_channels");
}

extern "C" void cu_unpad_channels(cudaStream_t st, tb_dtype dt, size_t pixels, int cfull, int ckeep, const void *src,
                                  void *dst, int accumulate) {
    if (!pixels) return;
    if (ckeep < 1 || cfull < ckeep) TB_FATAL("cuda unpad_channels: %d of %d channels kept", ckeep, cfull);
    CU_DISPATCH(dt, unpad_launch, st, pixels, cfull, ckeep, src, dst, accumulate);
    TB_CUDA_CHECK_LAUNCH("unpad_channels");
}
