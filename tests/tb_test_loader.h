/* tb_test_loader.h - the loader options and creation the loader tests share:
 * a training transform into uint8 NHWC rows, one rank, the settings each
 * test varies as arguments. Header-only, for the test executables. */
#ifndef TB_TEST_LOADER_H
#define TB_TEST_LOADER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/loader.h"

/* batch samples of side x side per step, `threads` workers, `prefetch`
 * slots, train transform, uint8 NHWC, flip on the host, seed `seed`. */
static inline tb_loader_opts tbl_opts(const tb_dataset *ds, int batch, int side, int threads, int prefetch,
                                      uint64_t seed) {
    tb_loader_opts o;
    memset(&o, 0, sizeof o);
    o.ds = ds;
    o.batch = batch;
    o.image_size = side;
    o.train = 1;
    o.threads = threads;
    o.prefetch = prefetch;
    o.world = 1;
    o.seed = seed;
    o.format = TB_OUT_U8_NHWC;
    return o;
}

/* The loader, or the test ends with the loader's one-line reason. */
static inline tb_loader *tbl_make(const tb_loader_opts *o) {
    char err[512];
    tb_loader *ld = tb_loader_create(o, err, sizeof err);
    if (!ld) {
        printf("FAIL: tb_loader_create: %s\n", err);
        exit(1);
    }
    return ld;
}

#endif
