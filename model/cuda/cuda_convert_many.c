/* cuda_convert_many.c - convert_many (backend.h): convert for each pair of
 * a list in one kernel launch per 64 pairs (cuda_convert.cu's
 * convert_many_k), for the op weights' refresh after each step and the
 * weight gradients' conversion at the end of a backward without a
 * grad-ready hook (graph.c), 54 small conversions each in ResNet-50 that
 * each took a launch (0.40 ms of the H200's bf16 step, each way). A
 * launch's items go to the kernel by value (cu_cvt_list): nothing is kept
 * on the device, so a captured graph holds its own copy.
 * Pairs that do not share a source and a destination dtype, or one of 2^30
 * elements or more, are converted pair by pair, as all are with
 * TB_CONVERT_MANY=off. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_internal.h"

int cu_convert_many_from_env(void) {
    return cu_env_on_off("TB_CONVERT_MANY", 1,
                         "the op weights' refresh and the weight gradients' conversion in one launch, or one per tensor");
}

/* 1 when the pairs take one pass: shared dtypes, each under 2^30 elements. */
static int one_pass(const tb_tensor *src, const tb_tensor *dst, int n) {
    for (int p = 0; p < n; p++)
        if (src[p].dtype != src[0].dtype || dst[p].dtype != dst[0].dtype ||
            tb_tensor_numel(&src[p]) >= ((size_t)1 << 30))
            return 0;
    return n > 0;
}

typedef struct {
    tb_backend *be;
    tb_dtype sdt, ddt;
    int accumulate;
} launch_ctx;

static void launch(void *ctx, const cu_cvt_list *list) {
    const launch_ctx *c = ctx;
    cu_convert_many_launch(cu_stream(c->be), c->sdt, c->ddt, list, c->accumulate);
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
    if (!cu_state_of(be)->convert_many || !one_pass(src, dst, n)) { /* TB_CONVERT_MANY=off, or they differ */
        for (int p = 0; p < n; p++) cu_convert(be, &src[p], &dst[p], accumulate);
        return;
    }
    launch_ctx c = {be, src[0].dtype, dst[0].dtype, accumulate};
    cu_state_of(be)->cvt_launches += cu_convert_many_lists(src, dst, n, launch, &c);
}

int cu_convert_many_lists(const tb_tensor *src, const tb_tensor *dst, int n, cu_cvt_emit emit, void *ctx) {
    cu_cvt_list *list = calloc(1, sizeof *list);
    if (!list) TB_FATAL("out of host memory");
    int launches = 0;
    for (int p = 0; p <= n; p++) {
        size_t ne = p < n ? tb_tensor_numel(&src[p]) : 0;
        /* the launch so far when it is full, would pass 2^31 elements, or the list ends */
        if (list->k > 0 && (p == n || list->k == CU_CVT_ITEMS || (size_t)list->total + ne >= ((size_t)1 << 31))) {
            emit(ctx, list);
            launches++;
            memset(list, 0, sizeof *list);
        }
        if (!ne) continue;
        cu_cvt_item *t = &list->it[list->k++];
        t->src = src[p].data, t->dst = dst[p].data;
        t->start = list->total, t->n = (unsigned)ne;
        t->C = (unsigned)src[p].c, t->H = (unsigned)src[p].h, t->W = (unsigned)src[p].w;
        t->flat = src[p].layout == dst[p].layout || (src[p].h == 1 && src[p].w == 1);
        t->sl = src[p].layout, t->dl = dst[p].layout;
        list->total += (unsigned)ne;
    }
    free(list);
    return launches;
}

long tb_cuda_convert_many_launches(tb_backend *be) { return cu_state_of(be)->cvt_launches; }
