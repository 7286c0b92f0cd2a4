/* batchfile.h - the golden-step batch file: /images float32 [N,3,H,W]
 * (normalised) and /labels int64 [N]. */
#ifndef TB_BATCHFILE_H
#define TB_BATCHFILE_H

#include <stdint.h>

typedef struct {
    int n, h, w;
    float *images;     /* [n,3,h,w] */
    int32_t *labels;   /* [n] */
} tb_batchfile;

/* Reads and validates path (shapes, types, labels in [0, classes), image
 * sides >= min_side); dies with one line naming the problem. */
void tb_batchfile_read(const char *path, int classes, int min_side, tb_batchfile *b);
void tb_batchfile_free(tb_batchfile *b);

#endif
