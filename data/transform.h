/* transform.h - one sample from JPEG bytes to an S x S training input, with
 * torchvision's semantics:
 *
 *   train: RandomResizedCrop(S, scale=(0.08, 1), ratio=(3/4, 4/3)),
 *          RandomHorizontalFlip(0.5), ToTensor, Normalize(ImageNet)
 *   eval:  Resize(round(S*256/224)) on the shorter side, CenterCrop(S),
 *          ToTensor, Normalize(ImageNet)
 *
 * with PIL images underneath (torchvision's default path): crops and
 * resizes are Pillow's BILINEAR resample (data/resample.h). The random draws
 * come from a caller's uniform source, so the loader can key them by sample
 * and a test can feed torchvision's algorithm the same draws.
 *
 * Decoding (tb_decode_mode): FAST scales in the DCT domain by the largest
 * reduction among 1/8, 1/4 and 1/2 (of tjGetScalingFactors) that keeps the
 * crop at least as large as its resized output (never an upscale), and
 * decodes only the crop's rows and iMCU-aligned columns; FAST_ALL chooses
 * among every factor k/8 <= 1 instead (measured slower: libjpeg-turbo's
 * 3x3..7x7 and, for 4:2:0 chroma, 10x10..14x14 scaled IDCTs are plain C,
 * while 1/2, 1/4, 1/8 and 1 have SIMD paths); PARTIAL decodes only the
 * crop's rows and columns at full scale (pixels identical to FULL); FULL
 * decodes the whole image with TurboJPEG (pixels identical to Pillow's
 * pipeline). */
#ifndef TB_TRANSFORM_H
#define TB_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "data/jpeg.h"
#include "data/loader.h"

/* A uniform draw in [0, 1). */
typedef double (*tb_uniform_fn)(void *ctx);

/* torchvision's crop box: rows [top, top+height), columns [left, left+width). */
typedef struct {
    int top, left, height, width;
} tb_box;

/* RandomResizedCrop.get_params(img, scale=(0.08, 1.0), ratio=(3/4, 4/3))
 * for an H x W image, step for step: up to 10 attempts, each drawing the
 * area fraction and the log aspect ratio (both rounded to float32, as
 * torch's uniform_ on a float tensor; exp in float32), w =
 * round(sqrt(area*ratio)), h = round(sqrt(area/ratio)) (round half to
 * even), accepted when 0 < w <= W and 0 < h <= H, then top and left as
 * floor(u * (H-h+1)) and floor(u * (W-w+1)); otherwise the central crop of
 * the clamped aspect ratio. Draws: 2 per attempt, 2 more on acceptance. */
tb_box tb_rrc_box(int H, int W, tb_uniform_fn uniform, void *ctx);

/* RandomHorizontalFlip(0.5): one draw, flipped when float32(u) < 0.5. */
int tb_flip_draw(tb_uniform_fn uniform, void *ctx);

/* What Pillow resizes and which of its outputs are kept. */
typedef struct {
    tb_box clip;        /* the picture that is resized: the crop (train) or the whole image (eval) */
    int out_w, out_h;   /* its size after the resize (train: S x S; eval: the resized image) */
    int out_x0, out_y0; /* first output pixel kept (eval: the centre crop's offset) */
    int size;           /* S: pixels kept per side */
    int flip;           /* mirror the S x S result left-right */
} tb_geometry;

/* Train geometry: crop box and flip from the draws (box first, then flip). */
tb_geometry tb_geometry_train(int H, int W, int S, tb_uniform_fn uniform, void *ctx);
/* Train geometry for a given box and flip (tests, benchmarks). */
tb_geometry tb_geometry_from_box(tb_box box, int S, int flip);
/* Eval geometry: Resize(round(S*256/224)) with torchvision's rule for the
 * long side (int(short_new * long / short)), then CenterCrop(S) at
 * (int(round((h-S)/2)), int(round((w-S)/2))) (Python's round). */
tb_geometry tb_geometry_eval(int H, int W, int S);
/* Eval resize target for output side S: round(S * 256 / 224). */
int tb_eval_resize_size(int S);

/* Per-thread decoding and resampling state. */
typedef struct tb_sampler tb_sampler;
tb_sampler *tb_sampler_create(void);
void tb_sampler_destroy(tb_sampler *sp);
/* 1: tb_sample_render leaves the flip to the consumer: it draws the flip as
 * always (the same draws, the same crop box), reports it in
 * tb_render_info.flip and renders the picture unflipped (the loader's
 * uint8 output with per-sample flip flags, mirrored on the device by the
 * backend's input_u8 op). Mirroring the rendered S x S picture afterwards
 * gives exactly the flipped render. 0 (the default): flip applied. */
void tb_sampler_defer_flip(tb_sampler *sp, int on);

/* Timings and choices of the last tb_sample_render call. */
typedef struct {
    int width, height;     /* the JPEG's full size */
    tb_box box;            /* the picture resized (train: the crop box) */
    int flip;              /* the geometry's flip (applied unless deferred) */
    int scale_num;         /* DCT scale used: num/8 */
    int dec_w, dec_h;      /* pixels decoded (after scaling and iMCU widening) */
    double decode_s, resize_s;
} tb_render_info;

/* tb_sample_render's failures: the file is bad whatever the crop (no
 * header, truncated), or damaged data was met decoding this crop. */
#define TB_RENDER_BAD_FILE (-1)
#define TB_RENDER_BAD_DATA (-2)

/* Renders a sample into rgbx [S][S][4] (uint8 RGBX, X unused, flip
 * applied). The geometry
 * comes from `geom` when non-NULL, else from the image size: train (draws
 * from `uniform`) or eval. 0 on success, else TB_RENDER_BAD_* with the
 * reason in err. */
int tb_sample_render(tb_sampler *sp, const uint8_t *jpeg, size_t len, tb_decode_mode mode, int train, int S,
                     tb_uniform_fn uniform, void *ctx, const tb_geometry *geom, uint8_t *rgbx,
                     tb_render_info *info, char *err, size_t errlen);

/* The first half of tb_sample_render, without decoding: the same file
 * checks (header, end-of-image marker, size limit, box inside the image),
 * the same geometry from the same draws (or `geom`), and the coding facts
 * of the header. The GPU decode path plans every sample with it on the
 * CPU, so a file is bad, and a crop box is drawn, exactly as on the CPU
 * path. 0, or TB_RENDER_BAD_FILE with the reason in err. */
typedef struct {
    int width, height;     /* the JPEG's full size */
    tb_geometry g;         /* the picture resized and its output */
    tb_jpeg_format fmt;    /* progressive, precision, components, sampling */
} tb_sample_plan_info;
int tb_sample_plan(tb_sampler *sp, const uint8_t *jpeg, size_t len, int train, int S, tb_uniform_fn uniform,
                   void *ctx, const tb_geometry *geom, tb_sample_plan_info *out, char *err, size_t errlen);

/* ImageNet normalisation of torchvision's Normalize, in float32. */
extern const float tb_imagenet_mean[3], tb_imagenet_std[3];

/* Writes sample j of a batch from rgbx [S][S][4]: float32 NCHW normalised
 * ((v/255 - mean)/std in float32, as ToTensor + Normalize), float32 NHWC
 * normalised, or uint8 NHWC (RGB) unchanged. */
void tb_sample_store(const uint8_t *rgbx, int S, tb_out_format fmt, void *images, int j);

/* Bytes per sample of a format. */
size_t tb_sample_bytes(tb_out_format fmt, int S);

#endif
