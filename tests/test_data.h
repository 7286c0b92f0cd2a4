/* test_data.h - what the two files of test_data share: the temporary
 * directory, paths in it, and JPEGs made with TurboJPEG. */
#ifndef TB_TEST_DATA_H
#define TB_TEST_DATA_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/rng.h"
#include "data/dataset.h"
#include "data/jpeg.h"
#include "data/loader.h"
#include "data/resample.h"
#include "data/transform.h"
#define TB_TEST_SHARED_COUNTS /* test_data.c defines them */
#include "tests/tb_test.h"

extern char g_dir[256];
extern const char *g_bin;

static inline const char *path(const char *name) {
    static char buf[8][512];
    static int k = 0;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static inline void write_bytes(const char *p, const void *data, size_t n) {
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        printf("FAIL: cannot write %s\n", p);
        exit(1);
    }
}

/* A smooth colour picture with some noise, encoded with TurboJPEG. Returns
 * the JPEG (tjFree it) and its size. */
static inline unsigned char *make_jpeg(int w, int h, int subsamp, int flags, int pf, uint64_t seed, unsigned long *size) {
    int ch = tjPixelSize[pf];
    unsigned char *px = malloc((size_t)w * h * ch);
    tb_rng r;
    tb_rng_seed(&r, seed, 77);
    double fx = 0.01 + 0.04 * tb_rng_uniform(&r), fy = 0.01 + 0.04 * tb_rng_uniform(&r);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ch; c++) {
                double v = 128 + 90 * sin(fx * x * (c + 1) + fy * y) + 8 * (tb_rng_uniform(&r) - 0.5);
                px[((size_t)y * w + x) * ch + c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    tjhandle tj = tjInitCompress();
    unsigned char *jpg = NULL;
    *size = 0;
    TJ_CHECK(tj, tjCompress2(tj, px, w, 0, h, pf, &jpg, size, subsamp, 90, flags));
    tjDestroy(tj);
    free(px);
    return jpg;
}

static inline void write_jpeg(const char *p, int w, int h, int subsamp, int flags, int pf, uint64_t seed) {
    unsigned long n;
    unsigned char *j = make_jpeg(w, h, subsamp, flags, pf, seed, &n);
    write_bytes(p, j, n);
    tjFree(j);
}

/* in test_data_files.c */
void test_bad_files(void);
void test_dataset(void);

#endif
