/* test_gpu_resize.c - the GPU decode path's crop + resize on the host: the
 * packed tables (data/gpu_resize_plan.c) and the kernels' per-pixel
 * arithmetic (data/gpu_resize.h, the bodies of data/gpu_resize.cu) give
 * bit for bit the CPU path's Pillow-exact resize (tb_resample_rgbx) of the
 * same pixels, for train crops (RandomResizedCrop boxes, fallback included)
 * and eval geometry (resize + centre crop), whole images and ROI regions
 * (the decoded rectangle smaller than the image, at an offset), many
 * samples packed in one batch in the decode buffer's layout (tb_rs_layout:
 * 256-byte aligned regions, pitch 3 x width, as nvJPEG is given them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/gpu_resize.h"
#include "data/resample.h"
#include "data/transform.h"
#include "tests/tb_test.h"

static double draw(void *ctx) { return tb_rng_uniform((tb_rng *)ctx); }

int main(void) {
    const int sizes[3] = {24, 56, 224};
    tb_rng r;
    tb_rng_seed(&r, 5, 6);
    int cases = 0, bad_px = 0, bad_cases = 0, rois = 0, layout_bad = 0;
    for (int si = 0; si < 3; si++) {
        const int S = sizes[si];
        tb_rs_planner *p = tb_rs_planner_create(S);
        const int batch = 6;
        for (int rep = 0; rep < 6; rep++) {
            tb_rs_begin(p);
            tb_rs_desc d[6];
            uint8_t *imgs[6];
            tb_geometry gs[6];
            int Ws[6], Hs[6];
            size_t src_bytes;
            /* first pass: images, geometries, plans */
            tb_rs_region need[6];
            src_bytes = 5; /* the buffer's first bytes taken: the first region is aligned up */
            for (int j = 0; j < batch; j++) {
                int W = S / 2 + (int)(tb_rng_uniform(&r) * 3 * S) + 1, H = S / 2 + (int)(tb_rng_uniform(&r) * 3 * S) + 1;
                if (j == 5) W = 7, H = 5; /* an upscale */
                Ws[j] = W;
                Hs[j] = H;
                imgs[j] = malloc((size_t)W * H * 3);
                for (size_t i = 0; i < (size_t)W * H * 3; i++)
                    imgs[j][i] = (uint8_t)(tb_rng_uniform(&r) < 0.1 ? tb_rng_below(&r, 256) : (i * 7 / 3 + j * 31) & 255);
                gs[j] = (j % 3 == 2) ? tb_geometry_eval(H, W, S) : tb_geometry_train(H, W, S, draw, &r);
                gs[j].flip = 0;
                tb_rs_plan(p, &gs[j], W, H, j % 2 ? 2 : 0, j, &d[j], &need[j]);
            }
            /* second pass: the decode buffer's layout (tb_rs_layout, as the
             * nvJPEG path and the emulation lay it out): the whole image for
             * even j, the needed rectangle for odd j */
            tb_rs_region dec[6];
            for (int j = 0; j < batch; j++) {
                int whole = j % 2 == 0;
                dec[j] = whole ? (tb_rs_region){0, 0, Ws[j], Hs[j]} : need[j];
                size_t before = src_bytes;
                tb_rs_layout(&gs[j], dec[j], &src_bytes, &d[j]);
                int rw = dec[j].x1 - dec[j].x0, rh = dec[j].y1 - dec[j].y0;
                layout_bad += d[j].src_off % TB_RS_ALIGN != 0 || d[j].src_off < (int64_t)before ||
                              d[j].src_off >= (int64_t)before + TB_RS_ALIGN || d[j].src_pitch != 3 * rw ||
                              src_bytes != (size_t)d[j].src_off + (size_t)rw * rh * 3;
                rois += !whole && (rw < Ws[j] || rh < Hs[j]);
            }
            uint8_t *src = calloc(src_bytes, 1);
            for (int j = 0; j < batch; j++) {
                int rw = dec[j].x1 - dec[j].x0, rh = dec[j].y1 - dec[j].y0;
                for (int y = 0; y < rh; y++)
                    memcpy(src + d[j].src_off + (size_t)y * d[j].src_pitch,
                           imgs[j] + ((size_t)(dec[j].y0 + y) * Ws[j] + dec[j].x0) * 3, (size_t)rw * 3);
            }
            size_t tlen;
            const int32_t *tab = tb_rs_tables(p, &tlen);
            uint8_t *tmp = malloc(tb_rs_scratch_bytes(p) + 1), *out = malloc((size_t)batch * S * S * 3);
            tb_rs_run_host(d, batch, tab, S, src, tmp, out);
            /* the CPU path on the same pixels */
            for (int j = 0; j < batch; j++) {
                int W = Ws[j], H = Hs[j];
                uint8_t *rgbx = malloc((size_t)W * H * 4), *want = malloc((size_t)S * S * 4), *scratch = NULL;
                size_t cap = 0;
                for (size_t i = 0; i < (size_t)W * H; i++) {
                    memcpy(rgbx + 4 * i, imgs[j] + 3 * i, 3);
                    rgbx[4 * i + 3] = 0;
                }
                tb_axis ax, ay;
                memset(&ax, 0, sizeof ax);
                memset(&ay, 0, sizeof ay);
                const tb_geometry *g = &gs[j];
                tb_axis_plan(&ax, g->clip.width, 0, g->clip.width, g->out_w, g->out_x0, S);
                tb_axis_plan(&ay, g->clip.height, 0, g->clip.height, g->out_h, g->out_y0, S);
                tb_resample_rgbx(rgbx, W * 4, -g->clip.left, -g->clip.top, &ax, &ay, 0, want, S * 4, &scratch, &cap);
                int diff = 0;
                const uint8_t *o = out + (size_t)j * S * S * 3;
                for (int i = 0; i < S * S; i++)
                    for (int c = 0; c < 3; c++) diff += o[3 * i + c] != want[4 * i + c];
                bad_px += diff;
                bad_cases += diff > 0;
                if (diff && bad_cases <= 3)
                    printf("  S %d sample %d: %d values differ (image %dx%d, clip %d,%d %dx%d, out %dx%d at %d,%d)\n", S,
                           j, diff, W, H, g->clip.left, g->clip.top, g->clip.width, g->clip.height, g->out_w, g->out_h,
                           g->out_x0, g->out_y0);
                cases++;
                tb_axis_free(&ax);
                tb_axis_free(&ay);
                free(rgbx);
                free(want);
                free(scratch);
                free(imgs[j]);
            }
            free(src);
            free(tmp);
            free(out);
        }
        tb_rs_planner_destroy(p);
    }
    printf("# %d samples, %d from ROI regions, %d differing values\n", cases, rois, bad_px);
    TB_CHECK(bad_px == 0, "GPU resize arithmetic differs from the CPU path in %d values of %d samples", bad_px,
             bad_cases);
    TB_CHECK(layout_bad == 0, "decode buffer layout: %d regions not %d-byte aligned right after the previous one, "
             "with a pitch other than 3 x width or a size other than pitch x rows", layout_bad, TB_RS_ALIGN);
    TB_CHECK(cases == 108 && rois > 20, "%d samples, %d ROI regions: the cases were not exercised", cases, rois);
    return tb_test_exit("test_gpu_resize");
}
