/* tb_test_jpeg.h - small JPEG fixtures for the C tests of the feed path
 * (tests/test_loader_feed.c, tests/test_batch_upload.c): a temporary
 * directory, pictures encoded with TurboJPEG, list files of them. Header
 * only, every function static: include it in one test program. */
#ifndef TB_TEST_JPEG_H
#define TB_TEST_JPEG_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>

#include "core/rng.h"
#include "data/dataset.h"
#include "tests/tb_test.h"

static char tbj_dir[256];

/* Creates the temporary directory (once). */
static void tbj_init(void) {
    tb_test_tmp(tbj_dir, sizeof tbj_dir, "tb_feed_XXXXXX");
    if (!mkdtemp(tbj_dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static void tbj_cleanup(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tbj_dir);
    if (system(cmd) != 0) printf("warning: could not remove %s\n", tbj_dir);
}

static const char *tbj_path(const char *name) {
    static char buf[8][512];
    static int k = 0;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tbj_dir, name);
    return buf[k];
}

static void tbj_write_bytes(const char *p, const void *data, size_t n) {
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        printf("FAIL: cannot write %s\n", p);
        exit(1);
    }
}

/* A smooth colour picture with some noise (different left and right, so a
 * mirror shows), TurboJPEG quality 90. Returns the JPEG (tjFree it). */
static unsigned char *tbj_make(int w, int h, int subsamp, int flags, uint64_t seed, unsigned long *size) {
    unsigned char *px = malloc((size_t)w * h * 3);
    if (!px) exit(1);
    tb_rng r;
    tb_rng_seed(&r, seed, 77);
    double fx = 0.01 + 0.04 * tb_rng_uniform(&r), fy = 0.01 + 0.04 * tb_rng_uniform(&r);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                double v = 128 + 90 * sin(fx * x * (c + 1) + fy * y) + 40.0 * x / w + 8 * (tb_rng_uniform(&r) - 0.5);
                px[((size_t)y * w + x) * 3 + c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    tjhandle tj = tjInitCompress();
    unsigned char *jpg = NULL;
    *size = 0;
    if (tjCompress2(tj, px, w, 0, h, TJPF_RGB, &jpg, size, subsamp, 90, flags) != 0) {
        printf("FAIL: tjCompress2: %s\n", tjGetErrorStr2(tj));
        exit(1);
    }
    tjDestroy(tj);
    free(px);
    return jpg;
}

static void tbj_write(const char *p, int w, int h, int subsamp, int flags, uint64_t seed) {
    unsigned long n;
    unsigned char *j = tbj_make(w, h, subsamp, flags, seed, &n);
    tbj_write_bytes(p, j, n);
    tjFree(j);
}

/* A w x h 4:2:0 JPEG whose headers pass and whose data is damaged: the
 * scan cut short at 60 % and the end marker kept (bad for libjpeg, and so
 * for the CPU path and the emulated GPU decoder). */
static inline void tbj_write_damaged(const char *p, int w, int h, uint64_t seed) {
    unsigned long len;
    unsigned char *jp = tbj_make(w, h, TJSAMP_420, 0, seed, &len);
    memcpy(jp + len * 6 / 10, "\xff\xd9", 2);
    tbj_write_bytes(p, jp, len * 6 / 10 + 2);
    tjFree(jp);
}

/* n JPEGs under DIR/sub listed in DIR/list with label = index (so a label
 * names its sample); every bad_every-th is not a JPEG; every
 * progressive_every-th is progressive (0: none). Sides 40..86 x 30..72. */
static void tbj_make_list(const char *list, const char *sub, int n, int bad_every, int progressive_every) {
    mkdir(tbj_path(sub), 0777);
    FILE *f = fopen(tbj_path(list), "w");
    const int ss[3] = {TJSAMP_420, TJSAMP_444, TJSAMP_422};
    for (int i = 0; i < n; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s/s%03d.jpg", sub, i);
        if (bad_every && i % bad_every == bad_every - 1)
            tbj_write_bytes(tbj_path(name), "not a jpeg\n", 11);
        else
            tbj_write(tbj_path(name), 40 + (i * 7) % 47, 30 + (i * 5) % 43, ss[i % 3],
                      progressive_every && i % progressive_every == 0 ? TJFLAG_PROGRESSIVE : 0, (uint64_t)i);
        fprintf(f, "%s %d\n", name, i);
    }
    fclose(f);
}

/* Opens the list file DIR/list into *ds, or the test ends with the reason. */
static inline void tbj_open_list(const char *list, tb_dataset *ds) {
    char err[256];
    if (tb_dataset_open(tbj_path(list), ds, err, sizeof err) != 0) {
        printf("FAIL: open list: %s\n", err);
        exit(1);
    }
}

#endif
