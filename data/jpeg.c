/* jpeg.c - region and whole-image JPEG decode to RGBX (see jpeg.h). libjpeg
 * errors and warnings longjmp back here, so a bad file is a return value. */
#include "data/jpeg.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} error_mgr;

struct tb_jpeg {
    struct jpeg_decompress_struct cinfo;
    error_mgr jerr;
    int header_ok;            /* tb_jpeg_header succeeded, cinfo holds a header */
    tjhandle tj;              /* TurboJPEG decompressor, made on first use */
    uint8_t *px;              /* decoded RGB */
    size_t px_cap;
    uint8_t *cmyk;            /* CMYK rows before conversion */
    size_t cmyk_cap;
    char err[JMSG_LENGTH_MAX + 64];
};

/* libjpeg ran into an error: keep its message and jump back. */
static void on_error_exit(j_common_ptr c) {
    error_mgr *e = (error_mgr *)c->err;
    tb_jpeg *j = (tb_jpeg *)((char *)e - offsetof(tb_jpeg, jerr));
    (*c->err->format_message)(c, j->err);
    longjmp(e->jump, 1);
}

/* A warning means damaged data (corrupt entropy data, premature end of
 * file): the file is bad. Two warnings about metadata we do not use are
 * let through. Trace messages are dropped. */
static void on_emit_message(j_common_ptr c, int level) {
    if (level >= 0) return;
    int code = c->err->msg_code;
    if (code == JWRN_JFIF_MAJOR || code == JWRN_BOGUS_ICC) return;
    error_mgr *e = (error_mgr *)c->err;
    tb_jpeg *j = (tb_jpeg *)((char *)e - offsetof(tb_jpeg, jerr));
    (*c->err->format_message)(c, j->err);
    longjmp(e->jump, 1);
}

tb_jpeg *tb_jpeg_create(void) {
    tb_jpeg *j = calloc(1, sizeof *j);
    if (!j) TB_FATAL("out of host memory");
    j->cinfo.err = jpeg_std_error(&j->jerr.pub);
    j->jerr.pub.error_exit = on_error_exit;
    j->jerr.pub.emit_message = on_emit_message;
    jpeg_create_decompress(&j->cinfo);
    return j;
}

void tb_jpeg_destroy(tb_jpeg *j) {
    if (!j) return;
    jpeg_destroy_decompress(&j->cinfo);
    if (j->tj) tjDestroy(j->tj);
    free(j->px);
    free(j->cmyk);
    free(j);
}

const char *tb_jpeg_error(const tb_jpeg *j) { return j->err; }

static uint8_t *grow(uint8_t **p, size_t *cap, size_t need) {
    if (need > *cap) {
        free(*p);
        *cap = need + need / 4;
        *p = malloc(*cap);
        if (!*p) TB_FATAL("out of host memory (%zu bytes) for a decoded image", *cap);
    }
    return *p;
}

/* Whether the image in buf[0..len) reaches its end-of-image marker (EOI),
 * found by walking its markers from SOI: each segment's length is skipped
 * (an EXIF thumbnail's own EOI inside APP1 is not the image's), each scan's
 * entropy-coded data is searched for the marker after it (there FF is
 * followed by 00 or a restart marker, never by D9). 1: EOI reached, whatever
 * follows it (a motion photo appends a video; some writers pad); 0: the file
 * ends first (truncated); -1: bytes where a marker must be, a structure
 * libjpeg judges itself (with the last 4 KiB searched for EOI). */
static int reaches_eoi(const uint8_t *buf, size_t len) {
    size_t i = 2; /* after SOI */
    while (i < len) {
        if (buf[i] != 0xFF) return -1;
        while (i < len && buf[i] == 0xFF) i++; /* fill bytes */
        if (i >= len) return 0;
        uint8_t m = buf[i++];
        if (m == 0xD9) return 1;
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue; /* TEM, RSTn: no length */
        if (m == 0x00 || m == 0xD8) return -1;
        if (len - i < 2) return 0;
        size_t seg = (size_t)buf[i] << 8 | buf[i + 1];
        if (seg < 2) return -1;
        if (len - i < seg) return 0;
        i += seg;
        if (m != 0xDA) continue;
        for (;;) { /* SOS: its entropy-coded data, up to the next marker */
            const uint8_t *p = memchr(buf + i, 0xFF, len - i);
            if (!p) return 0;
            i = (size_t)(p - buf);
            if (len - i < 2) return 0;
            uint8_t n = buf[i + 1];
            if (n == 0xFF) i += 1; /* fill before a marker */
            else if (n == 0x00 || (n >= 0xD0 && n <= 0xD7)) i += 2;
            else break; /* the marker at i */
        }
    }
    return 0;
}

static int tail_has_eoi(const uint8_t *buf, size_t len) {
    size_t stop = len > 4096 + 2 ? len - 4096 - 2 : 0;
    for (size_t i = len; i >= stop + 2; i--)
        if (buf[i - 2] == 0xFF && buf[i - 1] == 0xD9) return 1;
    return 0;
}

static int has_eoi(const uint8_t *buf, size_t len) {
    int r = reaches_eoi(buf, len);
    return r < 0 ? tail_has_eoi(buf, len) : r;
}

static void read_header(tb_jpeg *j, const uint8_t *buf, size_t len) {
    jpeg_mem_src(&j->cinfo, buf, (unsigned long)len);
    jpeg_read_header(&j->cinfo, TRUE);
}

int tb_jpeg_header(tb_jpeg *j, const uint8_t *buf, size_t len, int *w, int *h) {
    if (j->header_ok) jpeg_abort_decompress(&j->cinfo); /* a header read but not decoded */
    j->header_ok = 0;
    j->err[0] = '\0';
    if (len == 0) {
        snprintf(j->err, sizeof j->err, "empty file");
        return -1;
    }
    if (len < 4 || buf[0] != 0xFF || buf[1] != 0xD8) {
        snprintf(j->err, sizeof j->err, "not a JPEG file (no start-of-image marker)");
        return -1;
    }
    if (!has_eoi(buf, len)) {
        snprintf(j->err, sizeof j->err, "truncated JPEG file (it ends before its end-of-image marker)");
        return -1;
    }
    if (setjmp(j->jerr.jump)) {
        jpeg_abort_decompress(&j->cinfo);
        return -1;
    }
    read_header(j, buf, len);
    if ((int64_t)j->cinfo.image_width * j->cinfo.image_height > TB_JPEG_MAX_PIXELS) {
        snprintf(j->err, sizeof j->err, "image of %ux%u pixels is larger than the %lld accepted",
                 j->cinfo.image_width, j->cinfo.image_height, (long long)TB_JPEG_MAX_PIXELS);
        jpeg_abort_decompress(&j->cinfo);
        return -1;
    }
    *w = (int)j->cinfo.image_width;
    *h = (int)j->cinfo.image_height;
    j->header_ok = 1;
    return 0;
}

void tb_jpeg_header_format(const tb_jpeg *j, tb_jpeg_format *f) {
    TB_ASSERT(j->header_ok);
    const struct jpeg_decompress_struct *ci = &j->cinfo;
    memset(f, 0, sizeof *f);
    f->progressive = ci->progressive_mode != 0;
    f->arithmetic = ci->arith_code != 0;
    /* libjpeg-turbo 2.x rejects lossless (SOF3) at jpeg_read_header; kept for completeness */
    f->lossless = 0;
    f->precision = ci->data_precision;
    f->components = ci->num_components;
    f->ycbcr = ci->num_components == 3 && ci->jpeg_color_space == JCS_YCbCr;
    for (int c = 0; c < ci->num_components && c < 4; c++) {
        f->h_samp[c] = ci->comp_info[c].h_samp_factor;
        f->v_samp[c] = ci->comp_info[c].v_samp_factor;
    }
}

/* Pillow reads 4-component JPEGs as "CMYK;I" (Adobe polarity: inverted)
 * and converts to RGB with cmyk2rgb(); this is both steps in one. */
static inline uint8_t muldiv255(int a, int b) {
    int t = a * b + 128;
    return (uint8_t)(((t >> 8) + t) >> 8);
}

static void cmyk_to_rgbx(const uint8_t *cmyk, uint8_t *rgbx, int n) {
    for (int x = 0; x < n; x++, cmyk += 4, rgbx += 4) {
        int nk = cmyk[3]; /* 255 - (255 - k) */
        for (int c = 0; c < 3; c++) {
            int v = nk - muldiv255(255 - cmyk[c], nk);
            rgbx[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
        rgbx[3] = 255;
    }
}

/* The libjpeg calls of a region decode; errors longjmp out of it to
 * tb_jpeg_decode_region (a separate function, so no local of this one is
 * live across the setjmp). */
static void decode_region(tb_jpeg *j, int num, int x0, int y0, int x1, int y1, tb_rgbx_region *out) {
    struct jpeg_decompress_struct *ci = &j->cinfo;
    int cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    ci->out_color_space = cmyk ? JCS_CMYK : JCS_EXT_RGBX; /* gray -> RGB replicates */
    ci->scale_num = (unsigned)num;
    ci->scale_denom = 8;
    ci->dct_method = JDCT_ISLOW;
    ci->do_fancy_upsampling = TRUE;
    jpeg_start_decompress(ci);
    TB_ASSERT(x1 <= (int)ci->output_width && y1 <= (int)ci->output_height);

    JDIMENSION xoff = (JDIMENSION)x0, cw = (JDIMENSION)(x1 - x0);
    if (cw < ci->output_width) jpeg_crop_scanline(ci, &xoff, &cw);
    if (y0 > 0) jpeg_skip_scanlines(ci, (JDIMENSION)y0);

    int rows = y1 - y0, stride = (int)cw * 4;
    uint8_t *px = grow(&j->px, &j->px_cap, (size_t)stride * (size_t)rows);
    uint8_t *cm = cmyk ? grow(&j->cmyk, &j->cmyk_cap, (size_t)cw * 4 * 16) : NULL;
    int done = 0;
    while (done < rows) {
        JSAMPROW rp[16];
        int want = rows - done < 16 ? rows - done : 16;
        for (int r = 0; r < want; r++)
            rp[r] = cmyk ? cm + (size_t)r * cw * 4 : px + (size_t)(done + r) * stride;
        int got = (int)jpeg_read_scanlines(ci, rp, (JDIMENSION)want);
        if (got <= 0) ERREXIT(ci, JERR_INPUT_EMPTY);
        if (cmyk)
            for (int r = 0; r < got; r++) cmyk_to_rgbx(rp[r], px + (size_t)(done + r) * stride, (int)cw);
        done += got;
    }
    if (ci->output_scanline == ci->output_height)
        jpeg_finish_decompress(ci);
    else
        jpeg_abort_decompress(ci);
    out->px = px;
    out->w = (int)cw;
    out->h = rows;
    out->stride = stride;
    out->x0 = (int)xoff;
    out->y0 = y0;
}

int tb_jpeg_decode_region(tb_jpeg *j, int num, int x0, int y0, int x1, int y1, tb_rgbx_region *out) {
    TB_ASSERT(j->header_ok);
    TB_ASSERT(num >= 1 && num <= 8 && x0 < x1 && y0 < y1 && x0 >= 0 && y0 >= 0);
    j->header_ok = 0;
    if (setjmp(j->jerr.jump)) {
        jpeg_abort_decompress(&j->cinfo);
        return -1;
    }
    decode_region(j, num, x0, y0, x1, y1, out);
    return 0;
}

int tb_jpeg_decode_full(tb_jpeg *j, const uint8_t *buf, size_t len, tb_rgbx_region *out) {
    int w, h;
    if (tb_jpeg_header(j, buf, len, &w, &h) != 0) return -1; /* same file checks as the region path */
    jpeg_abort_decompress(&j->cinfo);
    j->header_ok = 0;
    if (!j->tj) {
        j->tj = tjInitDecompress();
        if (!j->tj) TB_FATAL("TurboJPEG: tjInitDecompress: %s", tjGetErrorStr2(NULL));
    }
    int tw, th, subsamp, cs;
    if (tjDecompressHeader3(j->tj, buf, (unsigned long)len, &tw, &th, &subsamp, &cs) != 0) {
        snprintf(j->err, sizeof j->err, "%s", tjGetErrorStr2(j->tj));
        return -1;
    }
    int cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    size_t stride = (size_t)tw * 4;
    uint8_t *px = grow(&j->px, &j->px_cap, stride * (size_t)th);
    uint8_t *dst = px;
    if (cmyk) dst = grow(&j->cmyk, &j->cmyk_cap, (size_t)tw * 4 * (size_t)th);
    /* accurate integer IDCT and fancy upsampling, as Pillow; the first warning stops the decode (damaged data,
     * as in the region path: a 5 KB file whose header says 16384x16384 was decoded whole before failing) */
    if (tjDecompress2(j->tj, buf, (unsigned long)len, dst, tw, 0, th, cmyk ? TJPF_CMYK : TJPF_RGBX,
                      TJFLAG_STOPONWARNING) != 0) {
        snprintf(j->err, sizeof j->err, "%s", tjGetErrorStr2(j->tj));
        if (j->px_cap > TB_JPEG_KEEP_BYTES) { /* a damaged file's size: not one to keep for the next image */
            free(j->px), j->px = NULL, j->px_cap = 0;
            free(j->cmyk), j->cmyk = NULL, j->cmyk_cap = 0;
        }
        return -1;
    }
    if (cmyk)
        for (int y = 0; y < th; y++) cmyk_to_rgbx(dst + (size_t)y * tw * 4, px + (size_t)y * stride, tw);
    out->px = px;
    out->w = tw;
    out->h = th;
    out->stride = (int)stride;
    out->x0 = 0;
    out->y0 = 0;
    return 0;
}

int tb_jpeg_scale_nums(int nums[8]) {
    int n = 0, count = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&count);
    if (!sf) TB_FATAL("TurboJPEG: tjGetScalingFactors: %s", tjGetErrorStr2(NULL));
    for (int i = 0; i < count && n < 8; i++) {
        if (sf[i].num > sf[i].denom || (sf[i].num * 8) % sf[i].denom != 0) continue;
        nums[n++] = sf[i].num * 8 / sf[i].denom;
    }
    /* largest first (the library lists them so; keep it explicit) */
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (nums[b] > nums[a]) {
                int t = nums[a];
                nums[a] = nums[b];
                nums[b] = t;
            }
    return n;
}

#define TB_STR2(x) #x
#define TB_STR(x) TB_STR2(x)

const char *tb_jpeg_version(void) {
#ifdef LIBJPEG_TURBO_VERSION
    return "libjpeg-turbo " TB_STR(LIBJPEG_TURBO_VERSION);
#else
    return "libjpeg " TB_STR(JPEG_LIB_VERSION);
#endif
}
