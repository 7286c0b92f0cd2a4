/* batchfile.c - reading and validating golden-step batch files. */
#include "src/batchfile.h"

#include <stdlib.h>
#include <string.h>

#include "src/h5io.h"
#include "src/log.h"

void tb_batchfile_read(const char *path, int classes, int min_side, tb_batchfile *b) {
    memset(b, 0, sizeof *b);
    hid_t f = tb_h5_open_read(path, "batch file", "check the --batch path");
    int64_t d[8], ld[8];
    if (!tb_h5_exists(f, "/images") || !tb_h5_exists(f, "/labels"))
        tb_die("batch file '%s' needs datasets /images [N,3,H,W] and /labels [N]", path);
    int nd = tb_h5_shape(f, "/images", d);
    if (nd != 4 || d[1] != 3 || d[0] < 1)
        tb_die("batch file '%s': /images must be [N,3,H,W] with N >= 1 (float32, NCHW)", path);
    if (tb_h5_is_float(f, "/images") != 1)
        tb_die("batch file '%s': /images must be floating point (float32)", path);
    if (d[2] < min_side || d[3] < min_side)
        tb_die("batch file '%s': images of %lldx%lld are too small for a ResNet; each side needs "
               "at least %d pixels",
               path, (long long)d[2], (long long)d[3], min_side);
    if (d[0] > 1 << 20 || d[2] > 1 << 14 || d[3] > 1 << 14)
        tb_die("batch file '%s': /images of [%lld,3,%lld,%lld] is implausibly large", path,
               (long long)d[0], (long long)d[2], (long long)d[3]);
    int lnd = tb_h5_shape(f, "/labels", ld);
    if (lnd != 1 || ld[0] != d[0])
        tb_die("batch file '%s': /labels must be [N] with N = %lld to match /images", path,
               (long long)d[0]);
    if (tb_h5_is_float(f, "/labels") != 0)
        tb_die("batch file '%s': /labels must be integers (int64)", path);
    b->n = (int)d[0];
    b->h = (int)d[2];
    b->w = (int)d[3];
    size_t count = (size_t)b->n * 3 * (size_t)b->h * (size_t)b->w;
    b->images = malloc(count * sizeof *b->images);
    int64_t *l64 = malloc((size_t)b->n * sizeof *l64);
    b->labels = malloc((size_t)b->n * sizeof *b->labels);
    if (!b->images || !l64 || !b->labels) TB_FATAL("out of host memory for batch '%s'", path);
    tb_h5_read_f32(f, "/images", b->images);
    tb_h5_read_i64(f, "/labels", l64);
    for (int i = 0; i < b->n; i++) {
        if (l64[i] < 0 || l64[i] >= classes)
            tb_die("batch file '%s': label %lld of sample %d is outside [0, %d), the model's "
                   "classes",
                   path, (long long)l64[i], i, classes);
        b->labels[i] = (int32_t)l64[i];
    }
    free(l64);
    H5_CHECK(H5Fclose(f));
}

void tb_batchfile_free(tb_batchfile *b) {
    free(b->images);
    free(b->labels);
    memset(b, 0, sizeof *b);
}
