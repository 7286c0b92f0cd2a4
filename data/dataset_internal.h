/* dataset_internal.h - what the two halves of the sample index share:
 * data/dataset.c (ImageFolder directories, the public calls) and
 * data/dataset_list.c (a `PATH LABEL` list file). */
#ifndef TB_DATASET_INTERNAL_H
#define TB_DATASET_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"
#include "data/dataset.h"

static inline void tb_ds_set_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static inline void *tb_ds_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) TB_FATAL("out of host memory (%zu bytes) while indexing the data set", n);
    return p;
}

static inline void *tb_ds_xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) TB_FATAL("out of host memory (%zu bytes) while indexing the data set", n);
    return p;
}

/* A `PATH LABEL` list file (dataset.h): 0, or -1 with the reason in err. */
int tb_ds_open_list(const char *path, tb_dataset *ds, char *err, size_t errlen);

#endif
