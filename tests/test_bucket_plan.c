/* test_bucket_plan.c - the device gradient path's bucket plan and launch
 * order (comm/bucket_plan.h), on the host:
 *
 *  - ResNet-50's real tensor boundaries: buckets hold whole tensors, tile
 *    the buffer, the first bucket cut (the buffer's last) is the small one
 *    (>= 1 MiB, closed at the first tensor boundary past it), the others
 *    reach the 25 MiB cap except the one at offset 0; the plan is printed;
 *  - the host path (comm/grad_sync.c) cuts its buckets with this plan: for
 *    the same caps in bytes its buckets are the plan's, element for element
 *    (its byte-to-element conversion and first-bucket size included);
 *  - fixed launch order: whatever order and pieces the ranges are reported
 *    in (descending as backward, ascending, random, the whole buffer at
 *    once as a rank without samples), every bucket is launched exactly
 *    once, in the order nb-1 .. 0, and never before all its elements were
 *    reported;
 *  - incomplete buckets are found. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bucket_plan.h"
#include "comm/grad_sync.h"
#include "core/rng.h"
#include "model/resnet.h"
#include "tests/tb_test.h"

/* Tensor boundaries of the trainable flat buffer of a model. */
static int model_offsets(const char *name, size_t **off) {
    tb_resnet_config cfg;
    tb_resnet_config_init(&cfg, name, 1000);
    tb_param_table pt;
    tb_graph g;
    memset(&pt, 0, sizeof pt);
    memset(&g, 0, sizeof g);
    tb_resnet_build(&cfg, 224, 224, 1, &pt, &g);
    *off = malloc(((size_t)pt.count + 1) * sizeof **off);
    int nt = 0;
    for (int i = 0; i < pt.count; i++)
        if (tb_param_store_of(pt.items[i].role) == TB_STORE_TRAIN) (*off)[nt++] = pt.items[i].offset;
    (*off)[nt] = pt.n_train;
    tb_params_free(&pt);
    free(g.nodes);
    free(g.acts);
    return nt;
}

static int is_boundary(const size_t *off, int nt, size_t x) {
    for (int i = 0; i <= nt; i++)
        if (off[i] == x) return 1;
    return 0;
}

static void check_plan_shape(const char *model, const size_t *off, int nt, size_t cap, size_t first) {
    tb_bucket *b;
    int nb = tb_bucket_plan(off, nt, cap, first, &b);
    size_t at = 0;
    for (int i = 0; i < nb; i++) {
        TB_CHECK(b[i].offset == at, "%s: bucket %d starts at %zu, expected %zu (buckets tile the buffer)", model, i,
                 b[i].offset, at);
        TB_CHECK(is_boundary(off, nt, b[i].offset) && is_boundary(off, nt, b[i].offset + b[i].count),
                 "%s: bucket %d [%zu, +%zu) does not hold whole tensors", model, i, b[i].offset, b[i].count);
        at += b[i].count;
    }
    TB_CHECK(at == off[nt], "%s: buckets cover %zu of %zu elements", model, at, off[nt]);
    /* the last bucket of the buffer is the first cut: >= first, and
     * without its lowest tensor it would be < first (closed at the first
     * boundary past it) */
    const tb_bucket *l = &b[nb - 1];
    TB_CHECK(nb == 1 || l->count >= first, "%s: the first bucket holds %zu < %zu elements", model, l->count, first);
    for (int t = 0; t < nt; t++)
        if (off[t] == l->offset && nb > 1)
            TB_CHECK(off[nt] - off[t + 1] < first, "%s: the first bucket did not close at the first boundary past %zu",
                     model, first);
    for (int i = 1; i < nb - 1; i++)
        TB_CHECK(b[i].count >= cap, "%s: middle bucket %d holds %zu < cap %zu", model, i, b[i].count, cap);
    printf("# %s, cap %.0f MiB, first %.0f MiB: %d buckets (MiB, buffer order):", model, cap * 4 / 1048576.0,
           first * 4 / 1048576.0, nb);
    for (int i = 0; i < nb; i++) printf(" %.2f", b[i].count * 4 / 1048576.0);
    printf("\n");
    free(b);
}

/* The host path (grad_sync.c), given caps in bytes, holds the buckets the
 * plan cuts from the same caps in elements (first 0: cut like the rest). */
static void check_same_as_host_path(const size_t *off, int nt, size_t cap_bytes, size_t first_bytes) {
    tb_bucket *b;
    int nb = tb_bucket_plan(off, nt, cap_bytes / 4, first_bytes / 4, &b);
    tb_grad_sync *gs =
        tb_grad_sync_create(tb_comm_world(), NULL, off[nt], TB_FLOAT32, off, nt, cap_bytes, first_bytes, 1);
    int same = tb_grad_sync_bucket_count(gs) == nb;
    for (int i = 0; same && i < nb; i++) {
        size_t o, c;
        tb_grad_sync_bucket(gs, i, &o, &c);
        same = o == b[i].offset && c == b[i].count;
    }
    TB_CHECK(same, "cap %zu B, first %zu B: the device plan (%d buckets) differs from grad_sync.c's (%d)", cap_bytes,
             first_bytes, nb,
             tb_grad_sync_bucket_count(gs));
    tb_grad_sync_destroy(gs);
    free(b);
}

typedef enum { ORD_DESC, ORD_ASC, ORD_RANDOM, ORD_WHOLE, ORD_N } order;
static const char *const ord_name[ORD_N] = {"descending", "ascending", "random", "whole"};

/* Reports every tensor (in two pieces, the upper first) in the order given,
 * and checks each launch against what was reported so far. */
static void check_order(const size_t *off, int nt, size_t cap, size_t first, order ord, tb_rng *r) {
    tb_bucket *b;
    int nb = tb_bucket_plan(off, nt, cap, first, &b);
    tb_bucket_tracker tr;
    tb_bucket_tracker_init(&tr, b, nb);
    int *launch = calloc((size_t)nb, sizeof *launch), *seq = calloc((size_t)nb, sizeof *seq);
    unsigned char *reported = calloc(off[nt], 1);
    size_t *got = calloc((size_t)nb, sizeof *got); /* elements of each bucket reported so far */
    int nseq = 0, premature = 0, late = 0;
    int *perm = malloc((size_t)nt * sizeof *perm);
    for (int k = 0; k < nt; k++) perm[k] = ord == ORD_ASC ? k : nt - 1 - k;
    if (ord == ORD_RANDOM)
        for (int k = nt - 1; k > 0; k--) {
            int j = (int)tb_rng_below(r, (uint64_t)k + 1), tmp = perm[k];
            perm[k] = perm[j];
            perm[j] = tmp;
        }
    int pieces = ord == ORD_WHOLE ? 1 : 2 * nt;
    for (int p = 0; p < pieces; p++) {
        size_t a, z;
        if (ord == ORD_WHOLE) {
            a = 0;
            z = off[nt];
        } else {
            int k = perm[p / 2];
            size_t mid = off[k] + (off[k + 1] - off[k]) / 3;
            a = p % 2 == 0 ? mid : off[k];
            z = p % 2 == 0 ? off[k + 1] : mid;
        }
        if (z == a) continue;
        memset(reported + a, 1, z - a);
        for (int i = 0; i < nb; i++) { /* the pieces are disjoint: overlaps add up */
            size_t end = b[i].offset + b[i].count, lo = a > b[i].offset ? a : b[i].offset, hi = z < end ? z : end;
            got[i] += hi > lo ? hi - lo : 0;
        }
        int n = tb_bucket_tracker_ready(&tr, a, z - a, launch);
        for (int j = 0; j < n; j++) {
            const tb_bucket *bk = &b[launch[j]];
            for (size_t e = bk->offset; e < bk->offset + bk->count; e++) premature += !reported[e];
            if (nseq < nb) seq[nseq] = launch[j];
            nseq++;
        }
        /* and none late: every bucket complete, with every bucket after it launched, goes at this report */
        int due = 0;
        while (due < nb && got[nb - 1 - due] == b[nb - 1 - due].count) due++;
        late += nseq != due;
    }
    int in_order = nseq == nb;
    for (int i = 0; in_order && i < nb; i++) in_order = seq[i] == nb - 1 - i;
    TB_CHECK(in_order, "%s order, %d buckets: launched %d, not in the order nb-1..0", ord_name[ord], nb, nseq);
    TB_CHECK(premature == 0, "%s order: %d elements launched before they were reported", ord_name[ord], premature);
    TB_CHECK(late == 0, "%s order: %d reports after which a complete bucket next in line waited (no overlap)",
             ord_name[ord], late);
    TB_CHECK(tb_bucket_tracker_incomplete(&tr, NULL) == -1, "%s order: buckets left incomplete", ord_name[ord]);
    /* a new step starts from scratch; the buffer's last element missing
     * holds back every launch (the last bucket goes first); its first
     * element missing holds back bucket 0 only */
    tb_bucket_tracker_begin(&tr);
    int n = tb_bucket_tracker_ready(&tr, 0, off[nt] - 1, launch);
    size_t missing = 0;
    TB_CHECK(n == 0, "all but the last element: %d buckets launched, none may be", n);
    TB_CHECK(tb_bucket_tracker_incomplete(&tr, &missing) == nb - 1 && missing == 1,
             "the incomplete bucket is the last one with 1 element missing (got %d, %zu)",
             tb_bucket_tracker_incomplete(&tr, NULL), missing);
    tb_bucket_tracker_begin(&tr);
    n = tb_bucket_tracker_ready(&tr, 1, off[nt] - 1, launch);
    TB_CHECK(n == nb - 1 && (nb == 1 || launch[n - 1] == 1), "all but the first element: %d of %d launched", n, nb);
    TB_CHECK(tb_bucket_tracker_incomplete(&tr, &missing) == 0 && missing == 1,
             "the incomplete bucket is bucket 0 with 1 element missing");
    tb_bucket_tracker_free(&tr);
    free(perm);
    free(reported);
    free(got);
    free(launch);
    free(seq);
    free(b);
}

int main(void) {
    tb_rng r;
    tb_rng_seed(&r, 7, 0);
    const char *models[] = {"resnet18", "resnet50"};
    for (int m = 0; m < 2; m++) {
        size_t *off;
        int nt = model_offsets(models[m], &off);
        size_t MiB = 1048576 / 4; /* elements */
        check_plan_shape(models[m], off, nt, 25 * MiB, 1 * MiB);
        check_plan_shape(models[m], off, nt, 4 * MiB, 1 * MiB);
        check_plan_shape(models[m], off, nt, 25 * MiB, 25 * MiB);
        check_same_as_host_path(off, nt, (size_t)25 << 20, 0);
        check_same_as_host_path(off, nt, (size_t)1 << 20, 0);
        check_same_as_host_path(off, nt, (size_t)25 << 20, (size_t)1 << 20); /* the defaults */
        check_same_as_host_path(off, nt, (size_t)5 << 20, (size_t)2 << 20);
        for (int o = 0; o < ORD_N; o++) {
            check_order(off, nt, 25 * MiB, 1 * MiB, (order)o, &r);
            check_order(off, nt, MiB / 8, MiB / 64, (order)o, &r);
            check_order(off, nt, 1, 1, (order)o, &r); /* one tensor per bucket */
        }
        free(off);
    }
    /* odd synthetic boundaries: a zero-size tensor, a huge one */
    size_t odd[] = {0, 10, 10, 1000000, 1000003, 1000100};
    for (int o = 0; o < ORD_N; o++) check_order(odd, 5, 50, 3, (order)o, &r);
    check_plan_shape("synthetic", odd, 5, 50, 3);
    /* a first bucket asked above the cap is cut at the cap, as the host path (and the header) do: 10
     * tensors of 10 floats, cap 100 B, first 200 B */
    size_t ten[11];
    for (int i = 0; i <= 10; i++) ten[i] = (size_t)i * 10;
    check_same_as_host_path(ten, 10, 100, 200);
    return tb_test_exit("bucket_plan");
}
