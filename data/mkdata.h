/* mkdata.h - an ImageNet-like synthetic JPEG data set (`trainbench mkdata`):
 * photo-sized images (sides in [min_side, max_side]), 4:2:0, quality ~90,
 * in the ImageFolder layout OUT/class_XXX/img_XXXXXX.jpg. With
 * `--like imagenet` the sizes and codings follow ImageNet-1k's training set
 * instead (see TB_MKDATA_IMAGENET below).
 *
 * Every class has its own look: two stripe colours, a stripe orientation and
 * period, and a shape (disc, square, triangle, ring or cross) of its own
 * colour. Each image varies them (orientation and period jitter, phase,
 * brightness and colour shifts, a lighting gradient, 1-3 shapes at random
 * places and sizes, pixel noise), and the stripes cover the whole picture, so
 * a RandomResizedCrop of any part of it still shows its class: training on
 * the set makes the loss fall. Images depend only on (seed, class, index):
 * the set is the same for a seed whatever the thread count. */
#ifndef TB_MKDATA_H
#define TB_MKDATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *out;            /* directory to create (must not exist) */
    int classes, per_class;
    uint64_t seed;
    int threads;                /* 0: one per online CPU */
    int min_side, max_side;     /* image sides, pixels */
    int quality;                /* JPEG quality */
    int like;                   /* TB_MKDATA_PLAIN, or TB_MKDATA_IMAGENET: sizes and codings drawn per image
                                   (min_side, max_side and quality then unused) */
} tb_mkdata_opts;

/* --like imagenet: ImageNet-1k's training set (1,281,167 JPEGs, about 140 GB:
 * some 110 KB a file) as far as its shape matters to a loader, drawn per
 * image: 3 in 4 images have the long side 500 px (the size most of them were
 * stored at), the rest a long side of 200-800 px; aspect 4:3 (55 %), 3:2
 * (15 %), 1:1 (10 %), 16:9 (10 %), 5:4 (10 %), a quarter of them portrait;
 * quality 75, 85, 90 or 95 (a quarter each); chroma 4:2:0 (90 %), 4:4:4
 * (6 %), 4:2:2 (2 %), grayscale (2 %); 1 % progressive. These shares are
 * this preset's, chosen to resemble the set, not measured from it: mkdata
 * prints the set's mean file size and pixel count to set beside
 * ImageNet's. */
enum { TB_MKDATA_PLAIN = 0, TB_MKDATA_IMAGENET = 1 };

/* How image (cls, index) is coded. */
typedef struct {
    int quality;
    int subsamp;                /* TJSAMP_420, _444, _422, _GRAY */
    int progressive;
} tb_mkdata_coding;
tb_mkdata_coding tb_mkdata_coding_of(const tb_mkdata_opts *o, int cls, int index);

/* Renders image `index` of class `cls`: *rgb (malloc'd, [h][w][3]). */
void tb_mkdata_image(const tb_mkdata_opts *o, int cls, int index, uint8_t **rgb, int *w, int *h);

/* Writes the whole set under OUT.tmp and renames it to OUT when complete,
 * so OUT either does not exist or is whole; the bytes and pixels written
 * (either may be NULL). 0, or -1 with one line in err. */
int tb_mkdata_write(const tb_mkdata_opts *o, int64_t *bytes_written, int64_t *pixels, char *err, size_t errlen);

/* Names used in the set (class_007, img_000123.jpg), zero-padded so that
 * sorting by name keeps the numeric order. */
void tb_mkdata_class_name(const tb_mkdata_opts *o, int cls, char *buf, size_t len);
void tb_mkdata_file_name(const tb_mkdata_opts *o, int index, char *buf, size_t len);

#endif
