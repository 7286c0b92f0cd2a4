/* fuzz_jpeg.c - libFuzzer target: JPEG decode + train/eval transform, the
 * loader's per-sample path (tb_sample_render, then tb_sample_store).
 *
 * Input: a 32-byte control block, then the JPEG bytes.
 *   [0]      bits 0-1 decode mode (FAST, PARTIAL, FULL, FAST_ALL)
 *            bit 2    train (RandomResizedCrop + flip) else eval
 *            bit 3    explicit crop box from [4..11] (tb_geometry_from_box),
 *                     which may lie outside the image
 *            bit 4    flip (explicit box only)
 *            bits 5-6 output format (F32 NCHW, F32 NHWC, U8 NHWC; 3 -> 0)
 *   [1..2]   output side S = 1 + (little-endian u16 % 320)
 *   [3]      unused
 *   [4..11]  box top, left, height, width: little-endian int16
 *   [12..31] ten uniform draws, little-endian u16 / 65536, used in turn
 *            (and again from the first when RandomResizedCrop needs more)
 * Shorter inputs are padded with zeros. Every outcome the JPEG path has for
 * a bad file is a return value (jpeg.h), so any tb_die / TB_FATAL here is a
 * crash, as are sanitizer reports.
 *
 * Seeds: tests/fuzz/corpus/jpeg (make_corpus.py): small JPEGs of each kind
 * the decoder has a path for (grayscale, CMYK, YCCK, progressive, restart
 * markers, arithmetic coding, 4:4:4 / 4:2:2 / 4:2:0 / 4:4:0, odd sizes down
 * to 1x1) under control blocks that pick every mode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/transform.h"
#include "tests/fuzz/fuzz_common.h"

#define FZ_HEADER 32
#define FZ_DRAWS 10
#define FZ_MAX_SIDE 320

typedef struct {
    const uint8_t *draws; /* FZ_DRAWS little-endian u16 */
    int next;
} draw_source;

static double draw(void *ctx) {
    draw_source *d = ctx;
    const uint8_t *p = d->draws + 2 * (d->next++ % FZ_DRAWS);
    return (double)(p[0] | p[1] << 8) / 65536.0;
}

static int16_t le16s(const uint8_t *p) { return (int16_t)(uint16_t)(p[0] | p[1] << 8); }

static tb_sampler *g_sampler;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fz_init(0); /* no tb_die allowed on this path */
    g_sampler = tb_sampler_create();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t hdr[FZ_HEADER] = {0};
    memcpy(hdr, data, size < FZ_HEADER ? size : FZ_HEADER);
    const uint8_t *jpeg = data + (size < FZ_HEADER ? size : FZ_HEADER);
    size_t len = size < FZ_HEADER ? 0 : size - FZ_HEADER;

    /* a copy of exactly len bytes, so a read past the end is caught */
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) abort();
    memcpy(buf, jpeg, len);

    tb_decode_mode mode = (tb_decode_mode)(hdr[0] & 3);
    int train = (hdr[0] >> 2) & 1, explicit_box = (hdr[0] >> 3) & 1, flip = (hdr[0] >> 4) & 1;
    int fmt_bits = (hdr[0] >> 5) & 3;
    tb_out_format fmt = fmt_bits == 1 ? TB_OUT_F32_NHWC : fmt_bits == 2 ? TB_OUT_U8_NHWC : TB_OUT_F32_NCHW;
    int S = 1 + (hdr[1] | hdr[2] << 8) % FZ_MAX_SIDE;
    draw_source ds = {hdr + 12, 0};
    tb_geometry geom;
    if (explicit_box) {
        tb_box box = {le16s(hdr + 4), le16s(hdr + 6), le16s(hdr + 8), le16s(hdr + 10)};
        geom = tb_geometry_from_box(box, S, flip);
    }

    uint8_t *rgbx = malloc((size_t)S * S * 4);
    void *out = malloc(tb_sample_bytes(fmt, S));
    if (!rgbx || !out) abort();
    char err[256];
    tb_render_info info;
    int rc = tb_sample_render(g_sampler, buf, len, mode, train, S, draw, &ds, explicit_box ? &geom : NULL,
                              rgbx, &info, err, sizeof err);
    if (rc == 0) {
        tb_sample_store(rgbx, S, fmt, out, 0);
    } else if (rc == TB_RENDER_BAD_FILE || rc == TB_RENDER_BAD_DATA) {
        fprintf(stderr, "jpeg: %s\n", err); /* /dev/null unless TB_FUZZ_VERBOSE */
    } else {
        abort(); /* not one of the documented results */
    }
    fz_outcome = rc == 0;
    free(out);
    free(rgbx);
    free(buf);
    return 0;
}
