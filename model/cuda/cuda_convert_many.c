/* cuda_convert_many.c - convert_many (backend.h): convert for each pair of
 * a list in one kernel launch (cuda_convert.cu's convert_many_k), for the
 * op weights' refresh after each step, 54 small conversions in ResNet-50
 * that each took a launch (0.40 ms of the H200's bf16 step). The list's
 * items (cu_cvt_item) live on the device and are uploaded again only when
 * they change (cu_dev_table), never inside a CUDA graph capture: a list
 * that changed there, or pairs that do not share a source and a
 * destination dtype, are converted pair by pair. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/cuda_internal.h"

/* The pairs' items, in launches of up to CU_CVT_ITEMS and under 2^31
 * elements (items zeroed by the caller: compared as bytes); *nlaunch
 * launches, launch L's items [first[L], first[L + 1]) with totals[L]
 * elements. 0 when the pairs do not share a source and a destination dtype,
 * or one is too large. */
static int plan_items(const tb_tensor *src, const tb_tensor *dst, int n, cu_cvt_item *items, int *first,
                      unsigned *totals, int *nlaunch) {
    int k = 0, L = 0;
    unsigned used = 0;
    for (int p = 0; p < n; p++) {
        if (src[p].dtype != src[0].dtype || dst[p].dtype != dst[0].dtype) return 0;
        size_t ne = tb_tensor_numel(&src[p]);
        if (!ne) continue;
        if (ne >= ((size_t)1 << 30)) return 0;
        if (k == 0 || k - first[L - 1] == CU_CVT_ITEMS || (size_t)used + ne >= ((size_t)1 << 31)) {
            first[L++] = k; /* a new launch */
            used = 0;
        }
        cu_cvt_item *t = &items[k++];
        t->src = src[p].data, t->dst = dst[p].data;
        t->start = used, t->n = (unsigned)ne;
        t->C = (unsigned)src[p].c, t->H = (unsigned)src[p].h, t->W = (unsigned)src[p].w;
        t->flat = src[p].layout == dst[p].layout || (src[p].h == 1 && src[p].w == 1);
        t->sl = src[p].layout, t->dl = dst[p].layout;
        used += (unsigned)ne;
        totals[L - 1] = used;
    }
    first[L] = k;
    *nlaunch = L;
    return 1;
}

void cu_convert_many(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int n, int accumulate) {
    const char *op = "convert_many";
    for (int p = 0; p < n; p++) {
        cu_check(&src[p], op, "src");
        cu_check(&dst[p], op, "dst");
        if (src[p].n != dst[p].n || src[p].c != dst[p].c || src[p].h != dst[p].h || src[p].w != dst[p].w)
            TB_FATAL("cuda convert_many: pair %d: src [%d,%d,%d,%d] and dst [%d,%d,%d,%d] differ", p, src[p].n,
                     src[p].c, src[p].h, src[p].w, dst[p].n, dst[p].c, dst[p].h, dst[p].w);
    }
    cu_cvt_item *items = calloc((size_t)(n > 0 ? n : 1), sizeof *items);
    int *first = malloc(((size_t)n + 2) * sizeof *first), nl = 0;
    unsigned *totals = malloc(((size_t)n + 1) * sizeof *totals);
    if (!items || !first || !totals) TB_FATAL("out of host memory");
    cu_state *st = cu_state_of(be);
    int one_pass = n > 0 && plan_items(src, dst, n, items, first, totals, &nl);
    size_t bytes = (size_t)(one_pass ? first[nl] : 0) * sizeof *items;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (one_pass && !cu_dev_table_holds(&st->cvt_items, items, bytes))
        TB_CUDA_CHECK(cudaStreamIsCapturing(cu_stream(be), &cs));
    if (!one_pass || cs != cudaStreamCaptureStatusNone) { /* no new table inside a capture */
        for (int p = 0; p < n; p++) cu_convert(be, &src[p], &dst[p], accumulate);
    } else {
        const cu_cvt_item *d = cu_dev_table_put(be, &st->cvt_items, items, bytes, "convert_many item table");
        for (int L = 0; L < nl; L++)
            cu_convert_many_launch(cu_stream(be), src[0].dtype, dst[0].dtype, d + first[L], first[L + 1] - first[L],
                                   totals[L], accumulate);
    }
    free(items), free(first), free(totals);
}
