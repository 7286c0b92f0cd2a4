/* transform.c - torchvision's train/eval transforms on one JPEG: crop
 * geometry, crop-aware decode, Pillow-exact resize, flip, normalisation
 * (see transform.h). */
#include "data/transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/timer.h"
#include "data/jpeg.h"
#include "data/pixel_kern.h"
#include "data/resample.h"

/* ---- geometry ------------------------------------------------------------------ */

tb_box tb_rrc_box(int H, int W, tb_uniform_fn uniform, void *ctx) {
    const double scale_lo = 0.08, scale_hi = 1.0, ratio_lo = 3.0 / 4.0, ratio_hi = 4.0 / 3.0;
    /* torch.log(torch.tensor(ratio)): float32 */
    const double lr_lo = (double)logf((float)ratio_lo), lr_hi = (double)logf((float)ratio_hi);
    const double area = (double)H * (double)W;
    tb_box b;
    for (int attempt = 0; attempt < 10; attempt++) {
        float frac = (float)(scale_lo + (scale_hi - scale_lo) * uniform(ctx));
        double target_area = area * (double)frac;
        float log_ratio = (float)(lr_lo + (lr_hi - lr_lo) * uniform(ctx));
        double aspect = (double)expf(log_ratio);
        int w = (int)rint(sqrt(target_area * aspect));
        int h = (int)rint(sqrt(target_area / aspect));
        if (0 < w && w <= W && 0 < h && h <= H) {
            b.top = (int)(uniform(ctx) * (double)(H - h + 1));
            b.left = (int)(uniform(ctx) * (double)(W - w + 1));
            b.height = h;
            b.width = w;
            return b;
        }
    }
    /* fallback: central crop */
    double in_ratio = (double)W / (double)H;
    if (in_ratio < ratio_lo) {
        b.width = W;
        b.height = (int)rint(b.width / ratio_lo);
    } else if (in_ratio > ratio_hi) {
        b.height = H;
        b.width = (int)rint(b.height * ratio_hi);
    } else {
        b.width = W;
        b.height = H;
    }
    b.top = (H - b.height) / 2;
    b.left = (W - b.width) / 2;
    return b;
}

int tb_flip_draw(tb_uniform_fn uniform, void *ctx) { return (float)uniform(ctx) < 0.5f; }

tb_geometry tb_geometry_from_box(tb_box box, int S, int flip) {
    tb_geometry g;
    g.clip = box;
    g.out_w = g.out_h = S;
    g.out_x0 = g.out_y0 = 0;
    g.size = S;
    g.flip = flip;
    return g;
}

tb_geometry tb_geometry_train(int H, int W, int S, tb_uniform_fn uniform, void *ctx) {
    tb_box b = tb_rrc_box(H, W, uniform, ctx);
    int flip = tb_flip_draw(uniform, ctx);
    return tb_geometry_from_box(b, S, flip);
}

int tb_eval_resize_size(int S) { return (int)rint(S * 256.0 / 224.0); }

tb_geometry tb_geometry_eval(int H, int W, int S) {
    int rs = tb_eval_resize_size(S);
    int shorter = W <= H ? W : H, longer = W <= H ? H : W;
    int new_long = (int)((double)((int64_t)rs * longer) / (double)shorter);
    tb_geometry g;
    g.clip.top = g.clip.left = 0;
    g.clip.height = H;
    g.clip.width = W;
    g.out_w = W <= H ? rs : new_long;
    g.out_h = W <= H ? new_long : rs;
    TB_ASSERT(g.out_w >= S && g.out_h >= S);
    g.out_y0 = (int)rint((g.out_h - S) / 2.0);
    g.out_x0 = (int)rint((g.out_w - S) / 2.0);
    g.size = S;
    g.flip = 0;
    return g;
}

/* ---- rendering ------------------------------------------------------------------ */

struct tb_sampler {
    tb_jpeg *jpeg;
    tb_axis ax, ay;
    uint8_t *tmp;
    size_t tmp_cap;
    int nums[8], nnums;    /* DCT scale factors num/8 <= 1, largest first */
    int pow2[8], npow2;    /* those with SIMD IDCTs: 8, 4, 2, 1 */
    int defer_flip;        /* tb_sampler_defer_flip */
};

tb_sampler *tb_sampler_create(void) {
    tb_sampler *sp = calloc(1, sizeof *sp);
    if (!sp) TB_FATAL("out of host memory");
    sp->jpeg = tb_jpeg_create();
    sp->nnums = tb_jpeg_scale_nums(sp->nums);
    for (int i = 0; i < sp->nnums; i++)
        if ((sp->nums[i] & (sp->nums[i] - 1)) == 0) sp->pow2[sp->npow2++] = sp->nums[i];
    return sp;
}

void tb_sampler_defer_flip(tb_sampler *sp, int on) { sp->defer_flip = on != 0; }

void tb_sampler_destroy(tb_sampler *sp) {
    if (!sp) return;
    tb_jpeg_destroy(sp->jpeg);
    tb_axis_free(&sp->ax);
    tb_axis_free(&sp->ay);
    free(sp->tmp);
    free(sp);
}

/* One axis of the clip in the image scaled by num/8: the clip's first
 * scaled pixel c0, its extent n, and the box [in0, in1) relative to c0. */
static void scaled_clip(int start, int len, int full, int num, int *c0, int *n, double *in0, double *in1) {
    if (num == 8) { /* exact integers: Pillow's own arithmetic */
        *c0 = start;
        *n = len;
        *in0 = 0.0;
        *in1 = (double)len;
        return;
    }
    double f = num / 8.0, a = start * f, b = (start + len) * f;
    int scaled_full = (full * num + 7) / 8; /* libjpeg's output size */
    int lo = (int)floor(a), hi = (int)ceil(b);
    if (hi > scaled_full) hi = scaled_full;
    if (hi <= lo) hi = lo + 1;
    *c0 = lo;
    *n = hi - lo;
    *in0 = a - lo;
    *in1 = b - lo;
}

/* The file checks and the geometry shared by tb_sample_render and
 * tb_sample_plan: header (tb_jpeg_header's checks), the crop box from the
 * draws (or `geom`), the box inside the image. */
static int header_and_geometry(tb_sampler *sp, const uint8_t *jpeg, size_t len, int train, int S,
                               tb_uniform_fn uniform, void *ctx, const tb_geometry *geom, int *Wp, int *Hp,
                               tb_geometry *gp, char *err, size_t errlen) {
    int W, H;
    if (tb_jpeg_header(sp->jpeg, jpeg, len, &W, &H) != 0) {
        snprintf(err, errlen, "%s", tb_jpeg_error(sp->jpeg));
        return TB_RENDER_BAD_FILE;
    }
    tb_geometry g = geom ? *geom : train ? tb_geometry_train(H, W, S, uniform, ctx) : tb_geometry_eval(H, W, S);
    TB_ASSERT(g.size == S);
    if (g.clip.top < 0 || g.clip.left < 0 || g.clip.height < 1 || g.clip.width < 1 ||
        g.clip.top + g.clip.height > H || g.clip.left + g.clip.width > W) {
        snprintf(err, errlen, "crop box (%d,%d,%d,%d) outside the %dx%d image", g.clip.top, g.clip.left,
                 g.clip.height, g.clip.width, W, H);
        return TB_RENDER_BAD_FILE;
    }
    *Wp = W;
    *Hp = H;
    *gp = g;
    return 0;
}

int tb_sample_plan(tb_sampler *sp, const uint8_t *jpeg, size_t len, int train, int S, tb_uniform_fn uniform,
                   void *ctx, const tb_geometry *geom, tb_sample_plan_info *out, char *err, size_t errlen) {
    int rc = header_and_geometry(sp, jpeg, len, train, S, uniform, ctx, geom, &out->width, &out->height, &out->g,
                                 err, errlen);
    if (rc != 0) return rc;
    tb_jpeg_header_format(sp->jpeg, &out->fmt);
    return 0;
}

int tb_sample_render(tb_sampler *sp, const uint8_t *jpeg, size_t len, tb_decode_mode mode, int train, int S,
                     tb_uniform_fn uniform, void *ctx, const tb_geometry *geom, uint8_t *rgbx,
                     tb_render_info *info, char *err, size_t errlen) {
    double t0 = tb_now();
    int W, H;
    tb_geometry g;
    int rc0 = header_and_geometry(sp, jpeg, len, train, S, uniform, ctx, geom, &W, &H, &g, err, errlen);
    if (rc0 != 0) return rc0;
    /* DCT scale: the smallest num/8 that keeps the clip >= its resized size */
    int num = 8;
    if (mode == TB_DECODE_FAST || mode == TB_DECODE_FAST_ALL) {
        const int *nums = mode == TB_DECODE_FAST ? sp->pow2 : sp->nums;
        int n = mode == TB_DECODE_FAST ? sp->npow2 : sp->nnums;
        for (int i = 0; i < n; i++) /* largest first: the last that fits is the smallest */
            if ((int64_t)g.clip.width * nums[i] >= (int64_t)g.out_w * 8 &&
                (int64_t)g.clip.height * nums[i] >= (int64_t)g.out_h * 8)
                num = nums[i];
    }
    int cx0, cw, cy0, ch;
    double x_in0, x_in1, y_in0, y_in1;
    scaled_clip(g.clip.left, g.clip.width, W, num, &cx0, &cw, &x_in0, &x_in1);
    scaled_clip(g.clip.top, g.clip.height, H, num, &cy0, &ch, &y_in0, &y_in1);
    tb_axis_plan(&sp->ax, cw, x_in0, x_in1, g.out_w, g.out_x0, S);
    tb_axis_plan(&sp->ay, ch, y_in0, y_in1, g.out_h, g.out_y0, S);

    tb_rgbx_region r;
    int rc;
    if (mode == TB_DECODE_FULL) {
        rc = tb_jpeg_decode_full(sp->jpeg, jpeg, len, &r);
    } else {
        const int margin = 2; /* libjpeg's upsampling differs at a crop edge */
        int sw = (W * num + 7) / 8, sh = (H * num + 7) / 8;
        int x0 = cx0 + sp->ax.in_lo - margin, x1 = cx0 + sp->ax.in_hi + margin;
        int y0 = cy0 + sp->ay.in_lo - margin, y1 = cy0 + sp->ay.in_hi + margin;
        rc = tb_jpeg_decode_region(sp->jpeg, num, x0 < 0 ? 0 : x0, y0 < 0 ? 0 : y0, x1 > sw ? sw : x1,
                                   y1 > sh ? sh : y1, &r);
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s", tb_jpeg_error(sp->jpeg));
        /* the whole image was decoded: bad whatever the crop (known bad for every later epoch) */
        return mode == TB_DECODE_FULL ? TB_RENDER_BAD_FILE : TB_RENDER_BAD_DATA;
    }
    double t1 = tb_now();
    tb_resample_rgbx(r.px, r.stride, r.x0 - cx0, r.y0 - cy0, &sp->ax, &sp->ay, g.flip && !sp->defer_flip, rgbx,
                     S * 4, &sp->tmp, &sp->tmp_cap);
    double t2 = tb_now();
    if (info) {
        info->width = W;
        info->height = H;
        info->box = g.clip;
        info->flip = g.flip;
        info->scale_num = num;
        info->dec_w = r.w;
        info->dec_h = r.h;
        info->decode_s = t1 - t0;
        info->resize_s = t2 - t1;
    }
    return 0;
}

/* ---- output --------------------------------------------------------------------- */

/* torchvision's Normalize takes Python floats and makes float32 tensors. */
const float tb_imagenet_mean[3] = {(float)0.485, (float)0.456, (float)0.406};
const float tb_imagenet_std[3] = {(float)0.229, (float)0.224, (float)0.225};

size_t tb_sample_bytes(tb_out_format fmt, int S) {
    size_t px = (size_t)3 * S * S;
    return fmt == TB_OUT_U8_NHWC ? px : px * sizeof(float);
}

/* The loops are the vector level's (data/pixel_kern.h): ToTensor + Normalize
 * as ((float)v / 255 - mean) / std in float32, the same floats at every level. */
void tb_sample_store(const uint8_t *rgbx, int S, tb_out_format fmt, void *images, int j) {
    const size_t plane = (size_t)S * S;
    const tb_pixel_kern *k = tb_pixel_kern_get();
    switch (fmt) {
    case TB_OUT_F32_NCHW: {
        float *o = (float *)images + (size_t)j * 3 * plane;
        k->store_f32_planar(rgbx, plane, tb_imagenet_mean, tb_imagenet_std, o, o + plane, o + 2 * plane);
        break;
    }
    case TB_OUT_F32_NHWC:
        k->store_f32_packed(rgbx, plane, tb_imagenet_mean, tb_imagenet_std, (float *)images + (size_t)j * 3 * plane);
        break;
    case TB_OUT_U8_NHWC: k->store_u8_packed(rgbx, plane, (uint8_t *)images + (size_t)j * 3 * plane); break;
    }
}
