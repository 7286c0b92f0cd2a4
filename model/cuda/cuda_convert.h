/* cuda_convert.h - the CUDA backend's conversions between dtypes and
 * layouts (cuda_convert.cu's kernels, cuda_convert_many.c's batching): one
 * tensor, many in one launch, and the stem's channel padding. Plain C
 * launchers; cu_cvt_item_of and cu_cvt_src_of are the batched kernel's
 * index math, compiled for the device and for its host test
 * (tests/test_cuda_host_kernels.c). */
#ifndef TB_CUDA_CONVERT_H
#define TB_CUDA_CONVERT_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "model/backend.h"
#include "model/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cuda_convert_many.c: convert for each pair, in one launch where they share dtypes */
void cu_convert_many(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int n, int accumulate);
/* TB_CONVERT_MANY: on (unset, empty: 1) or off (0: each pair its own
 * convert, the path before it: an A/B, and a fallback without a rebuild);
 * anything else is one line, and the job ends. */
int cu_convert_many_from_env(void);

/* convert_many's launch (cuda_convert_many.c), passed to the kernel by
 * value (3 KB of kernel parameters: no table in device memory to keep in
 * step with a captured graph): item q covers elements [start, start + n)
 * of the launch's index space (items in start order, n > 0, total under
 * 2^31); flat: the same element order on both sides (layouts equal, or
 * 1x1). */
#define CU_CVT_ITEMS 64
typedef struct {
    const void *src;
    void *dst;
    unsigned start, n, C, H, W;
    int flat;
    tb_layout sl, dl;
} cu_cvt_item;
typedef struct {
    cu_cvt_item it[CU_CVT_ITEMS];
    int k;          /* items */
    unsigned total; /* elements */
} cu_cvt_list;
/* convert_many_k's index math, written once for the kernel and its host
 * test: the item of it[0..k) covering element i of the launch (bisection
 * over the starts), and the source element of that item's destination
 * element j (32-bit layout math: items are under 2^30 elements). */
static inline TB_HD int cu_cvt_item_of(const cu_cvt_item *it, int k, unsigned i) {
    int lo = 0, hi = k - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (it[mid].start <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}
static inline TB_HD unsigned cu_cvt_src_of(const cu_cvt_item *t, unsigned j) {
    if (t->flat) return j;
    unsigned n, c, h, w;
    tb_layout_coords32(t->dl, t->C, t->H, t->W, j, &n, &c, &h, &w);
    return tb_layout_offset32(t->sl, t->C, t->H, t->W, n, c, h, w);
}
/* The launches convert_many makes of n pairs (shared dtypes, each under
 * 2^30 elements): at most CU_CVT_ITEMS items and under 2^31 elements each,
 * empty pairs left out; emit(ctx, list) once a launch; the count. */
typedef void (*cu_cvt_emit)(void *ctx, const cu_cvt_list *list);
int cu_convert_many_lists(const tb_tensor *src, const tb_tensor *dst, int n, cu_cvt_emit emit, void *ctx);

/* cuda_convert.cu: one tensor; one batched launch (src of dtype sdt, dst of ddt) */
void cu_convert(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int accumulate);
void cu_convert_many_launch(cudaStream_t st, tb_dtype sdt, tb_dtype ddt, const cu_cvt_list *list, int acc);
/* dst [pixels][cout] = src [pixels][cin] then `fill` (0; other values only
 * for the planted-error test switch tb_cuda_conv_pad_fill); and back:
 * dst [pixels][ckeep] (+)= the first ckeep channels of src [pixels][cfull]. */
void cu_pad_channels(cudaStream_t st, tb_dtype dt, size_t pixels, int cin, int cout, const void *src, void *dst,
                     float fill);
void cu_unpad_channels(cudaStream_t st, tb_dtype dt, size_t pixels, int cfull, int ckeep, const void *src, void *dst,
                       int accumulate);

#ifdef __cplusplus
}
#endif

#endif
