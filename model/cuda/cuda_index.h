/* cuda_index.h - the own kernels' index arithmetic beyond model/layout.h,
 * written once for the device (the .cu files) and the host, so that
 * tests/test_cuda_host.c checks the arithmetic the GPU runs against brute
 * force on a machine without a GPU. Plain C (TB_HD functions). */
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
 * a cap (NCHW: 4096 values a slice, at most 256 slices; NHWC: 256 rows, at
 * most 512). */
#define CU_BN_NCHW_PER_SLICE 4096
#define CU_BN_NCHW_MAX_SLICES 256
#define CU_BN_NHWC_PER_SLICE 256
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

#endif
