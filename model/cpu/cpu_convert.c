/* cpu_convert.c - dtype / layout conversion and the input ops (uint8
 * batches, resident rows) on the CPU, element by element with the index math of model/layout.h (the same
 * functions the CUDA kernels use).
 *
 * The CPU computes in float32 NCHW, but convert handles every dtype and
 * layout pair so that the host can prepare and read back the 16-bit and
 * channels-last tensors of the CUDA backend's tests, and so that the
 * arithmetic here (float32 sum, then one rounding to the destination) is
 * the reference for the GPU's convert kernel.
 */
#include <omp.h>

#include "core/log.h"
#include "model/cpu/cpu_internal.h"
#include "model/layout.h"

static void convert_check(const tb_tensor *src, const tb_tensor *dst) {
    if (!src || !dst || (!src->data && tb_tensor_numel(src)) || (!dst->data && tb_tensor_numel(dst)))
        TB_FATAL("cpu convert: NULL tensor or data");
    if (src->n != dst->n || src->c != dst->c || src->h != dst->h || src->w != dst->w)
        TB_FATAL("cpu convert: src [%d,%d,%d,%d] and dst [%d,%d,%d,%d] differ", src->n, src->c,
                 src->h, src->w, dst->n, dst->c, dst->h, dst->w);
}

/* dst (+)= src. Values pass through float32 (double when either side is
 * float64): v = src (+ dst) in that precision, then one rounding to dst. */
void cpu_convert(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int accumulate) {
    convert_check(src, dst);
    const int C = src->c, H = src->h, W = src->w;
    const size_t n = tb_tensor_numel(src);
    const int wide = src->dtype == TB_F64 || dst->dtype == TB_F64;
    const void *sp = src->data;
    void *dp = dst->data;
    /* one order for both (same layout, or one channel, or one pixel a
     * channel: a weight vector, a linear layer's): element i is element i,
     * without the index math (most of this op's time on op copies of the
     * weights) */
    const int same_order = src->layout == dst->layout || C == 1 || (size_t)H * W == 1;

#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (size_t i = 0; i < n; i++) { /* i walks dst in its own order */
        size_t j = i;
        if (!same_order) {
            int nn, c, h, w;
            tb_layout_coords(dst->layout, C, H, W, i, &nn, &c, &h, &w);
            j = tb_layout_offset(src->layout, C, H, W, nn, c, h, w);
        }
        double v = tb_host_load(sp, src->dtype, j);
        if (wide) {
            if (accumulate) v += tb_host_load(dp, dst->dtype, i);
        } else {
            float f = (float)v;
            if (accumulate) f += (float)tb_host_load(dp, dst->dtype, i);
            v = f;
        }
        tb_host_store(dp, dst->dtype, i, v);
    }
}

/* Each pair k < n as cpu_convert (the CUDA backend does them in one launch). */
void cpu_convert_many(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int n, int accumulate) {
    for (int k = 0; k < n; k++) cpu_convert(be, &src[k], &dst[k], accumulate);
}

/* dst[n,c,h,w] = ((float)src[n,h,w',c] / 255 - mean[c]) / std[c] in float32,
 * w' = flip[n] ? W-1-w : w, rounded once to dst's dtype. */
void cpu_input_u8(tb_backend *be, const uint8_t *src, const uint8_t *flip,
                  const tb_input_norm *norm, const tb_tensor *dst) {
    if (!src || !dst || !dst->data || !norm) TB_FATAL("cpu input_u8: NULL argument");
    if (dst->c != 3) TB_FATAL("cpu input_u8: the input has %d channels, not 3", dst->c);
    const int H = dst->h, W = dst->w;
    const size_t n = tb_tensor_numel(dst);
    void *dp = dst->data;

#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (size_t i = 0; i < n; i++) {
        int nn, c, h, w;
        tb_layout_coords(dst->layout, 3, H, W, i, &nn, &c, &h, &w);
        int ws = flip && flip[nn] ? W - 1 - w : w;
        uint8_t v = src[(((size_t)nn * H + h) * W + ws) * 3 + c];
        float x = ((float)v / 255.0f - norm->mean[c]) / norm->std[c];
        tb_host_store(dp, dst->dtype, i, x);
    }
}

/* dst[n,c,h,w] = pool[rows[n],c,h,w] (float32 NCHW), rounded once to dst's
 * dtype: the values of copying the rows into a float32 NCHW tensor and
 * converting it (cpu_convert, accumulate 0), in one loop. */
void cpu_input_rows(tb_backend *be, const float *pool, const int32_t *rows, const tb_tensor *dst) {
    if (!pool || !rows || !dst || !dst->data) TB_FATAL("cpu input_rows: NULL argument");
    const int C = dst->c, H = dst->h, W = dst->w;
    const size_t per = (size_t)C * H * W; /* one pool row */
    const size_t n = tb_tensor_numel(dst);
    void *dp = dst->data;

#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (size_t i = 0; i < n; i++) { /* i walks dst in its own order */
        int nn, c, h, w;
        tb_layout_coords(dst->layout, C, H, W, i, &nn, &c, &h, &w);
        const float *row = pool + (size_t)rows[nn] * per;
        tb_host_store(dp, dst->dtype, i, row[tb_layout_offset(TB_NCHW, C, H, W, 0, c, h, w)]);
    }
}
