/* jpeg.h - JPEG decoding for the loader, on libjpeg-turbo.
 *
 * Two paths that give the same pixels where they overlap:
 *   - region decode (libjpeg API): DCT-domain scaling by num/8, then only the
 *     rows (jpeg_skip_scanlines) and columns (jpeg_crop_scanline, which
 *     widens to iMCU boundaries) that a crop needs;
 *   - whole-image decode (TurboJPEG API, tjDecompress2), the reference.
 * Both use the accurate integer IDCT and fancy upsampling, as Pillow does.
 * Output is always 8-bit RGBX (4 bytes a pixel, X unused, which libjpeg-turbo
 * writes as cheaply as RGB and the resampler vectorises): grayscale is
 * replicated, CMYK/YCCK is read as CMYK and converted as Pillow does (Adobe
 * inverted polarity, then cmyk2rgb).
 *
 * A damaged file is never fatal here: every decode call returns -1 and the
 * reason (libjpeg's own message) is in tb_jpeg_error(). Any libjpeg warning
 * (corrupt data, premature end of file, ...) makes the file bad, and so does
 * a file that ends before its end-of-image marker (truncated; the markers
 * are walked, so data after the marker is ignored), checked before decoding
 * because a region decode stops at the last row it needs. */
#ifndef TB_JPEG_H
#define TB_JPEG_H

#include <stddef.h>
#include <stdint.h>
#include <turbojpeg.h>

#include "core/log.h"

/* Checks a TurboJPEG call that must not fail (set-up, encoding our own
 * images): prints file:line, the rank and tjGetErrorStr2, ends the job. */
#define TJ_CHECK(handle, call)                                                      \
    do {                                                                            \
        if ((call) != 0) TB_FATAL("TurboJPEG: %s: %s", #call, tjGetErrorStr2(handle)); \
    } while (0)

/* Largest image accepted (pixels); bigger ones are bad files. */
#define TB_JPEG_MAX_PIXELS ((int64_t)1 << 28)
/* Largest file read as a sample (bytes): 4 a pixel of the largest image
 * accepted; a bigger file (a sparse or misnamed one) is a bad file, not
 * read into memory whole. */
#define TB_JPEG_MAX_FILE_BYTES (4 * TB_JPEG_MAX_PIXELS)
/* A decoder keeps its largest image's buffer for the next; after a failed
 * decode, one above this is let go (a damaged header's size, not the set's). */
#define TB_JPEG_KEEP_BYTES ((size_t)64 << 20)

/* Decoded pixels of a rectangle of the (scaled) image. */
typedef struct {
    uint8_t *px;   /* [h][stride] RGBX bytes */
    int w, h;      /* pixels */
    int stride;    /* bytes per row */
    int x0, y0;    /* position of px[0] in the (scaled) image */
} tb_rgbx_region;

typedef struct tb_jpeg tb_jpeg; /* decoder state and buffers; one per thread */

tb_jpeg *tb_jpeg_create(void);
void tb_jpeg_destroy(tb_jpeg *j);

/* Checks the end-of-image marker and reads the header of buf[0..len).
 * 0: *w, *h are the full size and tb_jpeg_decode_region may follow;
 * -1: bad file. */
int tb_jpeg_header(tb_jpeg *j, const uint8_t *buf, size_t len, int *w, int *h);

/* What the header of the last successful tb_jpeg_header says about the
 * coding, for deciding whether another decoder (nvJPEG) can take the file. */
typedef struct {
    int progressive;          /* SOF2/SOF6/SOF10/SOF14 */
    int arithmetic;           /* arithmetic entropy coding (SOF9..SOF15) */
    int lossless;             /* SOF3 and the other lossless processes */
    int precision;            /* bits per sample (8 or 12) */
    int components;           /* 1, 3 or 4 */
    int ycbcr;                /* 3 components coded as YCbCr (not RGB, not CMYK/YCCK) */
    int h_samp[4], v_samp[4]; /* sampling factors per component */
} tb_jpeg_format;
/* Fills *f from the header read by the last tb_jpeg_header that returned 0
 * (before any decode call). */
void tb_jpeg_header_format(const tb_jpeg *j, tb_jpeg_format *f);

/* After tb_jpeg_header: decodes the image scaled by num/8 (1..8; the scaled
 * size is ceil(w*num/8) x ceil(h*num/8)), columns [x0,x1) and rows [y0,y1)
 * of the scaled image, into *out (which may start left of x0: iMCU
 * alignment). The pixels are those of a whole-image decode at that scale,
 * except within 2 pixels of a side of the decoded rectangle that is not an
 * image border (libjpeg's upsampling at a crop edge): callers ask for a
 * margin. The buffer is the decoder's, valid until its next call. */
int tb_jpeg_decode_region(tb_jpeg *j, int num, int x0, int y0, int x1, int y1, tb_rgbx_region *out);

/* The whole image at full size with tjDecompress2 (reference path). */
int tb_jpeg_decode_full(tb_jpeg *j, const uint8_t *buf, size_t len, tb_rgbx_region *out);

/* Why the last call returned -1 (one line). */
const char *tb_jpeg_error(const tb_jpeg *j);

/* DCT scaling factors num/8 <= 1 that this libjpeg-turbo offers
 * (tjGetScalingFactors), largest first; returns how many (<= 8). */
int tb_jpeg_scale_nums(int nums[8]);

/* "libjpeg-turbo 2.1.5" */
const char *tb_jpeg_version(void);

#endif
