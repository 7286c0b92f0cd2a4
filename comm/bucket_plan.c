/* bucket_plan.c - bucket cutting and the fixed launch order (see bucket_plan.h). */
#include "comm/bucket_plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"

int tb_bucket_plan(const size_t *tensor_offsets, int ntensors, size_t cap_elems, size_t first_elems,
                   tb_bucket **out) {
    TB_ASSERT(ntensors >= 1 && tensor_offsets[0] == 0);
    if (cap_elems < 1) cap_elems = 1;
    if (first_elems < 1 || first_elems > cap_elems) first_elems = cap_elems; /* as grad_sync.c, the header, project */
    tb_bucket *b = calloc((size_t)ntensors, sizeof *b);
    if (!b) TB_FATAL("out of host memory");
    int nb = 0;
    size_t end = tensor_offsets[ntensors];
    for (int i = ntensors - 1; i >= 0; i--) {
        size_t start = tensor_offsets[i];
        TB_ASSERT(start <= end);
        size_t want = nb == 0 ? first_elems : cap_elems;
        if (end - start >= want || i == 0) {
            b[nb].offset = start;
            b[nb].count = end - start;
            nb++;
            end = start;
        }
    }
    /* cut back to front: reverse into ascending offsets */
    for (int i = 0; i < nb / 2; i++) {
        tb_bucket tmp = b[i];
        b[i] = b[nb - 1 - i];
        b[nb - 1 - i] = tmp;
    }
    *out = b;
    return nb;
}

void tb_bucket_tracker_init(tb_bucket_tracker *t, const tb_bucket *b, int nb) {
    TB_ASSERT(nb >= 1);
    t->b = b;
    t->nb = nb;
    t->remaining = calloc((size_t)nb, sizeof *t->remaining);
    if (!t->remaining) TB_FATAL("out of host memory");
    tb_bucket_tracker_begin(t);
}

void tb_bucket_tracker_free(tb_bucket_tracker *t) {
    free(t->remaining);
    t->remaining = NULL;
}

void tb_bucket_tracker_begin(tb_bucket_tracker *t) {
    for (int i = 0; i < t->nb; i++) t->remaining[i] = t->b[i].count;
    t->next = t->nb - 1;
}

int tb_bucket_tracker_ready(tb_bucket_tracker *t, size_t offset, size_t count, int *launch) {
    size_t end = offset + count;
    const tb_bucket *last = &t->b[t->nb - 1];
    TB_ASSERT(end >= offset && end <= last->offset + last->count);
    /* the last bucket starting at or before offset */
    int lo = 0, hi = t->nb - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t->b[mid].offset <= offset) lo = mid;
        else hi = mid - 1;
    }
    for (int i = lo; i < t->nb && t->b[i].offset < end; i++) {
        const tb_bucket *bk = &t->b[i];
        size_t a = offset > bk->offset ? offset : bk->offset;
        size_t z = end < bk->offset + bk->count ? end : bk->offset + bk->count;
        if (z <= a) continue;
        if (z - a > t->remaining[i])
            TB_FATAL("gradient range [%zu, +%zu) reported twice: bucket %d has only %zu elements left", offset,
                     count, i, t->remaining[i]);
        t->remaining[i] -= z - a;
    }
    int n = 0;
    while (t->next >= 0 && t->remaining[t->next] == 0) launch[n++] = t->next--;
    return n;
}

int tb_bucket_tracker_incomplete(const tb_bucket_tracker *t, size_t *missing) {
    for (int i = t->nb - 1; i >= 0; i--)
        if (t->remaining[i] != 0) {
            if (missing) *missing = t->remaining[i];
            return i;
        }
    return -1;
}
