/* cuda_index.h - the own kernels' index arithmetic beyond model/layout.h,
 * written once for the device (the .cu files) and the host, so that the
 * cuda_host test (tests/test_cuda_host_descs.c and _kernels.c) checks the
 * arithmetic the GPU runs against brute force on a machine without a GPU.
 * Plain C (TB_HD functions). */
#ifndef TB_CUDA_INDEX_H
#define TB_CUDA_INDEX_H

#include <stddef.h>

#include "model/cuda/cuda_internal.h"
#include "model/layout.h"

/* Max pooling along one axis: the outputs o in [0, out) whose window
 * [o*stride - pad, o*stride - pad + k) contains input index i are
 * [*o0, *o1] (none when *o0 > *o1). */
static inline TB_HD void cu_pool_windows(int i, int k, int stride, int pad, int out, int *o0,
                                         int *o1) {
    int lo = i + pad - k + 1; /* o*stride >= lo */
    int hi = (i + pad) / stride;
    *o0 = lo <= 0 ? 0 : (lo + stride - 1) / stride;
    *o1 = hi < out - 1 ? hi : out - 1;
}

/* Max pooling's tiled backward (cuda_pool.cu). A block owns a tile x tile
 * square of input positions of one image and cv channel vectors (NHWC:
 * vec consecutive channels each; NCHW: vec = 1, cv channels), computes the
 * argmax of every window touching the tile once into shared memory (a
 * uint8 offset kh*k + kw inside the window, with the window's dy), then
 * gathers each owned input's gradient from there. */
#define CU_POOL_MAX_K 15        /* k*k - 1 <= 224 fits the uint8 offset */
#define CU_POOL_SMEM_MAX 49152  /* dynamic shared memory without opt-in */
#define CU_POOL_THREADS 256
#define CU_POOL_TILE_MAX 16

typedef struct {
    int vec;             /* channels per access: 16 B / element size, or 1 */
    int cvecs;           /* C / vec: channel vectors (NHWC) or channels (NCHW) */
    int cv, cv_log2;     /* channel vectors a block handles (a power of two) */
    int groups;          /* ceil(cvecs / cv) */
    int tile, tile_log2; /* input positions a block owns: tile x tile */
    int tiles_h, tiles_w;
    int nwh, nww;        /* most windows one tile touches along h, w */
    unsigned smem;       /* shared bytes: nwh*nww*cv slots of vec x (esize + 1) */
} cu_pool_tiling;

/* Tile t of size `tile` along an axis of `in` inputs: it owns inputs
 * [*i0, *i1) and touches windows [*o0, *o1] (none when *o0 > *o1, inputs
 * past the last window). */
static inline TB_HD void cu_pool_tile_span(int t, int tile, int in, int k, int stride, int pad,
                                           int out, int *i0, int *i1, int *o0, int *o1) {
    int a = t * tile, b = a + tile < in ? a + tile : in, lo, hi, unused;
    cu_pool_windows(a, k, stride, pad, out, &lo, &unused);
    cu_pool_windows(b - 1, k, stride, pad, out, &unused, &hi);
    *i0 = a;
    *i1 = b;
    *o0 = lo;
    *o1 = hi;
}

/* The most windows any tile of that size touches along an axis. */
static inline TB_HD int cu_pool_tile_windows(int tile, int k, int stride, int out) {
    int n = (tile + k - 2) / stride + 1;
    return n < out ? n : out;
}

/* The tiling for a pool over [., C, H, W] -> [., C, Ho, Wo] with elements
 * of esize bytes; vector: NHWC with C % (16 / esize) == 0 and 16-byte
 * aligned data. Tiles shrink (16, 8, ..., 1) until the shared memory fits.
 * 0 when k > CU_POOL_MAX_K (the recomputing kernel takes those). */
static inline TB_HD int cu_pool_tiling_for(tb_layout l, int C, int H, int W, int Ho, int Wo, int k,
                                           int stride, int esize, int vector, cu_pool_tiling *t) {
    if (k > CU_POOL_MAX_K) return 0;
    t->vec = l == TB_NHWC && vector ? 16 / esize : 1;
    t->cvecs = C / t->vec;
    int cap = l == TB_NCHW ? 4 : t->vec > 1 ? 8 : 32;
    t->cv = 1;
    t->cv_log2 = 0;
    while (t->cv < cap && t->cv < t->cvecs) {
        t->cv *= 2;
        t->cv_log2++;
    }
    t->groups = (t->cvecs + t->cv - 1) / t->cv;
    t->tile = CU_POOL_TILE_MAX;
    t->tile_log2 = 4;
    for (;;) {
        t->nwh = cu_pool_tile_windows(t->tile, k, stride, Ho);
        t->nww = cu_pool_tile_windows(t->tile, k, stride, Wo);
        t->smem = (unsigned)t->nwh * (unsigned)t->nww * (unsigned)t->cv * (unsigned)t->vec *
                  (unsigned)(esize + 1);
        if (t->smem <= CU_POOL_SMEM_MAX || t->tile == 1) break;
        t->tile /= 2;
        t->tile_log2--;
    }
    t->tiles_h = (H + t->tile - 1) / t->tile;
    t->tiles_w = (W + t->tile - 1) / t->tile;
    return 1;
}

/* Blocks of a tiling over N images, and block b's image, channel group and
 * tile (tiles along w fastest: neighbours share their halo through L2). */
static inline TB_HD size_t cu_pool_tile_blocks(const cu_pool_tiling *t, int N) {
    return (size_t)N * (size_t)t->groups * (size_t)t->tiles_h * (size_t)t->tiles_w;
}
/* 32-bit (b < 2^32) and 64-bit versions: the kernels' index width. */
static inline TB_HD void cu_pool_tile_block32(const cu_pool_tiling *t, unsigned b, int *n, int *g,
                                              int *th, int *tw) {
    *tw = (int)(b % (unsigned)t->tiles_w);
    b /= (unsigned)t->tiles_w;
    *th = (int)(b % (unsigned)t->tiles_h);
    b /= (unsigned)t->tiles_h;
    *g = (int)(b % (unsigned)t->groups);
    *n = (int)(b / (unsigned)t->groups);
}
static inline TB_HD void cu_pool_tile_block64(const cu_pool_tiling *t, unsigned long long b, int *n,
                                              int *g, int *th, int *tw) {
    *tw = (int)(b % (unsigned long long)t->tiles_w);
    b /= (unsigned long long)t->tiles_w;
    *th = (int)(b % (unsigned long long)t->tiles_h);
    b /= (unsigned long long)t->tiles_h;
    *g = (int)(b % (unsigned long long)t->groups);
    *n = (int)(b / (unsigned long long)t->groups);
}

/* Shared-memory slot of window w (of nwin, row-major in the tile's window
 * rectangle) and channel vector cv: channel vectors adjacent in NHWC, where
 * neighbouring threads take neighbouring channels; windows adjacent in
 * NCHW, where they take neighbouring columns. */
static inline TB_HD int cu_pool_slot(tb_layout l, int w, int cv, int cvs, int nwin) {
    return l == TB_NHWC ? w * cvs + cv : cv * nwin + w;
}

/* SGD: the segment holding element v of the concatenation the kernel walks:
 * the last one with start <= v (starts ascend; zero-count segments share a
 * start with the next and are skipped). */
static inline TB_HD int cu_sgd_find(const cu_sgd_seg *segs, int nseg, size_t v) {
    int lo = 0, hi = nseg - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (segs[mid].start <= v) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* BatchNorm partial sums: a channel's M values (or NHWC rows) in S slices
 * of `per` each, the last ones possibly short or empty; S grows with M up to
 * a cap (NCHW: 4096 values a slice, at most 256 slices; NHWC: 64 rows, at
 * most 512: a ResNet-50 layer4 BatchNorm at batch 256, 12544 rows of 512
 * channels, gets 196 slices, 392 blocks of the vector path for 132 SMs,
 * where 256 rows a slice gave 98, too few loads in flight). */
#define CU_BN_NCHW_PER_SLICE 4096
#define CU_BN_NCHW_MAX_SLICES 256
#define CU_BN_NHWC_PER_SLICE 64
#define CU_BN_NHWC_MAX_SLICES 512
static inline TB_HD int cu_bn_slices(size_t M, tb_layout l) {
    size_t per = l == TB_NCHW ? CU_BN_NCHW_PER_SLICE : CU_BN_NHWC_PER_SLICE;
    size_t cap = l == TB_NCHW ? CU_BN_NCHW_MAX_SLICES : CU_BN_NHWC_MAX_SLICES;
    size_t n = (M + per - 1) / per;
    return (int)(n < 1 ? 1 : n > cap ? cap : n);
}
/* [*j0, *j1) of slice s of S over M values. */
static inline TB_HD void cu_slice_range(size_t M, int S, int s, size_t *j0, size_t *j1) {
    size_t per = (M + (size_t)S - 1) / (size_t)S;
    size_t a = (size_t)s * per, b = a + per;
    *j0 = a < M ? a : M;
    *j1 = b < M ? b : M;
}

/* The BatchNorm kernels' vector path (NHWC with C a multiple of V = 16 /
 * element size, every buffer 16-byte aligned): a thread moves V
 * neighbouring channels of a row as one 16-byte word. Grid gx x S, blocks
 * of bx x by threads (bx <= 32 channel vectors side by side, so a warp
 * reads whole rows); thread (tx, ty) of block (bxi, s) owns channel vector
 * cv = bxi * bx + tx (channels cv*V ... cv*V + V-1) for the whole kernel,
 * so its per-channel values stay in registers, and walks rows r0 + ty,
 * r0 + ty + by, ... < r1 of slice s (cu_slice_range over the M rows, S =
 * cu_bn_slices). The partial-sum kernel adds a block's by rows of sums in
 * shared memory: 2 doubles per channel per thread. */
#define CU_BN_VEC_THREADS 256
typedef struct {
    int V, nv;  /* channels per vector, vectors per row (C / V) */
    int bx, by; /* block */
    int gx, S;  /* grid: channel-vector groups x slices */
} cu_bn_vgeom;

/* 1 and the geometry when C takes vectors of esize-byte elements, else 0. */
static inline TB_HD int cu_bn_vec_geom(int C, int esize, size_t M, cu_bn_vgeom *g) {
    int V = 16 / esize;
    if (C <= 0 || C % V != 0) return 0;
    g->V = V;
    g->nv = C / V;
    g->bx = g->nv < 32 ? g->nv : 32;
    g->by = CU_BN_VEC_THREADS / g->bx;
    g->gx = (g->nv + g->bx - 1) / g->bx;
    g->S = cu_bn_slices(M, TB_NHWC);
    return 1;
}

/* Bytes of the ReLU mask (cuda_kernels.cuh, cu_relu_keep_bits) of an
 * [N,C,H,W] NHWC tensor of esize-byte elements: one per 16-byte word (word
 * j = row * C/V + channel vector, the vector path's and bn_apply's order);
 * 0 when C takes no 16-byte words. */
static inline TB_HD size_t cu_bn_mask_bytes(int N, int C, int H, int W, int esize) {
    int V = 16 / esize;
    if (N <= 0 || C <= 0 || H <= 0 || W <= 0 || C % V != 0) return 0;
    return (size_t)N * H * W * (size_t)(C / V);
}

/* Thread (tx, ty) of block (bxi, s): its channel vector (>= nv: idle) and
 * its rows first, first + step, ... < end. */
static inline TB_HD int cu_bn_vec_thread(const cu_bn_vgeom *g, size_t M, int bxi, int s, int tx, int ty,
                                         size_t *first, size_t *end, size_t *step) {
    size_t r0, r1;
    cu_slice_range(M, g->S, s, &r0, &r1);
    *first = r0 + (size_t)ty;
    *end = r1;
    *step = (size_t)g->by;
    return bxi * g->bx + tx;
}

/* Shared-memory doubles the partial-sum kernel uses per block: 2 per channel per thread */
static inline TB_HD size_t cu_bn_vec_smem_doubles(const cu_bn_vgeom *g) {
    return (size_t)2 * g->bx * g->by * g->V;
}

/* The elementwise kernels keep no sums, so they may cut the rows finer
 * than the partial sums (whose S sizes the scratch): at least
 * CU_BN_VEC_APPLY_BLOCKS blocks where there are rows for them (a slice of
 * at least 2 * by rows: each thread takes 2 rows a pass), so a small
 * layer4 batch still fills the GPU. */
#define CU_BN_VEC_APPLY_BLOCKS 1024
static inline TB_HD cu_bn_vgeom cu_bn_vec_apply_geom(const cu_bn_vgeom *g, size_t M) {
    cu_bn_vgeom a = *g;
    size_t want = (CU_BN_VEC_APPLY_BLOCKS + (size_t)g->gx - 1) / (size_t)g->gx;
    size_t most = (M + 2 * (size_t)g->by - 1) / (2 * (size_t)g->by);
    if (want > most) want = most;
    if (want > 65535) want = 65535;
    if ((int)want > a.S) a.S = (int)want;
    return a;
}

#endif
