/* batchfile.c - reading and validating golden-step batch files. */
#include "src/results/batchfile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "src/results/h5io.h"

/* 1 when every element of the dataset was written: one created but never
 * written (or only in part) reads as fill values, so a 2 KB file could
 * declare gigabytes of zero images that reading would allocate and fill.
 * Chunked: every chunk is stored (H5Dget_space_status says "part" for any
 * compressed dataset); contiguous and compact: the storage is allocated. */
static int fully_written(hid_t f, const char *name) {
    hid_t ds = H5_CHECK(H5Dopen2(f, name, H5P_DEFAULT));
    hid_t dcpl = H5_CHECK(H5Dget_create_plist(ds));
    int ok;
    if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hid_t space = H5_CHECK(H5Dget_space(ds));
        hsize_t dims[32], chunk[32], want = 1, have = 0;
        int nd = (int)H5_CHECK(H5Sget_simple_extent_dims(space, dims, NULL));
        ok = H5Pget_chunk(dcpl, nd, chunk) == nd;
        for (int i = 0; ok && i < nd; i++) {
            ok = chunk[i] > 0;
            if (ok) want *= (dims[i] + chunk[i] - 1) / chunk[i];
        }
#if H5_VERSION_GE(1, 10, 5)
        ok = ok && H5Dget_num_chunks(ds, space, &have) >= 0 && have == want;
#else
        (void)have; /* no chunk count before HDF5 1.10.5: not checked */
#endif
        H5_CHECK(H5Sclose(space));
    } else {
        H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
        H5_CHECK(H5Dget_space_status(ds, &status));
        ok = status == H5D_SPACE_STATUS_ALLOCATED;
    }
    H5_CHECK(H5Pclose(dcpl));
    H5_CHECK(H5Dclose(ds));
    return ok;
}

void tb_batchfile_read(const char *path, int classes, int min_side, tb_batchfile *b) {
    memset(b, 0, sizeof *b);
    hid_t f = tb_h5_open_read(path, "batch file", "check the path (step --batch, train --batch-file)");
    int64_t d[8], ld[8];
    if (!tb_h5_exists(f, "/images") || !tb_h5_exists(f, "/labels"))
        tb_die("batch file '%s' needs datasets /images [N,3,H,W] and /labels [N]", path);
    int nd = tb_h5_shape(f, "/images", d);
    if (nd != 4 || d[1] != 3 || d[0] < 1)
        tb_die("batch file '%s': /images must be [N,3,H,W] with N >= 1 (float32, NCHW)", path);
    if (tb_h5_is_float(f, "/images") != 1)
        tb_die("batch file '%s': /images must be floating point (float32)", path);
    /* an empty image is never valid (and the labels are read through the images buffer) */
    if (min_side < 1) min_side = 1;
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
    if (!fully_written(f, "/images") || !fully_written(f, "/labels"))
        tb_die("batch file '%s': /images or /labels holds no data (created but never written, "
               "or only in part)",
               path);
    b->n = (int)d[0];
    b->h = (int)d[2];
    b->w = (int)d[3];
    size_t count = (size_t)b->n * 3 * (size_t)b->h * (size_t)b->w;
    b->images = malloc(count * sizeof *b->images);
    b->labels = malloc((size_t)b->n * sizeof *b->labels);
    if (!b->images || !b->labels) TB_FATAL("out of host memory for batch '%s'", path);
    /* The int64 labels are read into the images buffer (n * 8 bytes <= its
     * n * 3 * H * W * 4) before the images: no buffer of this function's own
     * is left allocated when a read or a check ends the job (under a fuzzer
     * the abort hook returns to the caller, which frees b). */
    tb_h5_read_i64(f, "/labels", (int64_t *)(void *)b->images);
    for (int i = 0; i < b->n; i++) {
        int64_t l;
        memcpy(&l, (const char *)b->images + (size_t)i * sizeof l, sizeof l);
        if (l < 0 || l >= classes)
            tb_die("batch file '%s': label %lld of sample %d is outside [0, %d), the model's "
                   "classes",
                   path, (long long)l, i, classes);
        b->labels[i] = (int32_t)l;
    }
    tb_h5_read_f32(f, "/images", b->images);
    tb_h5_close_read(f);
    /* a NaN or Inf pixel makes every weight NaN after one step: refused before it runs */
    for (size_t i = 0; i < count; i++)
        if (!isfinite(b->images[i]))
            tb_die("batch file '%s': /images holds %s at element %zu (sample %zu); a batch must be finite: "
                   "check how the file was made",
                   path, isnan(b->images[i]) ? "NaN" : "Inf", i, i / (count / (size_t)b->n));
}

void tb_batchfile_free(tb_batchfile *b) {
    free(b->images);
    free(b->labels);
    memset(b, 0, sizeof *b);
}
