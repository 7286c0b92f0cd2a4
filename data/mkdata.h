/* mkdata.h - an ImageNet-like synthetic JPEG data set (`trainbench mkdata`):
 * photo-sized images (sides in [min_side, max_side]), 4:2:0, quality ~90,
 * in the ImageFolder layout OUT/class_XXX/img_XXXXXX.jpg.
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
} tb_mkdata_opts;

/* Renders image `index` of class `cls`: *rgb (malloc'd, [h][w][3]). */
void tb_mkdata_image(const tb_mkdata_opts *o, int cls, int index, uint8_t **rgb, int *w, int *h);

/* Writes the whole set under OUT.tmp and renames it to OUT when complete,
 * so OUT either does not exist or is whole. 0, or -1 with one line in err. */
int tb_mkdata_write(const tb_mkdata_opts *o, int64_t *bytes_written, char *err, size_t errlen);

/* Names used in the set (class_007, img_000123.jpg), zero-padded so that
 * sorting by name keeps the numeric order. */
void tb_mkdata_class_name(const tb_mkdata_opts *o, int cls, char *buf, size_t len);
void tb_mkdata_file_name(const tb_mkdata_opts *o, int index, char *buf, size_t len);

#endif
