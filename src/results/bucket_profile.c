/* bucket_profile.c - the gradient-ready and bucket timeline recorder (see
 * bucket_profile.h). */
#include "src/results/bucket_profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/timer.h"

/* One rank count's recorded steps. */
typedef struct {
    int ranks, steps, cap;
    int nr, nb;                   /* ranges, buckets per step */
    size_t *r_off, *r_cnt;        /* [nr] elements, in the order backward finished them */
    size_t *b_off, *b_cnt;        /* [nb] elements, grad_sync order (ascending offsets) */
    double *ready;                /* [cap][nr] s from backward start */
    double *b_ready, *b_start, *b_end; /* [cap][nb] */
    double *bwd, *exposed;        /* [cap] */
    int64_t *step;                /* [cap] each sample's step in its row */
    size_t elem, bucket_bytes, first_bucket_bytes;
    int overlap;
    int skip;                     /* the row's untimed steps (tb_bprof_row_warmup); -1: tb_bprof_start's */
} group;

static struct {
    int on, skip;
    char clock[96];
    group *g;
    int ng;
    /* this step's ranges, and the callback being wrapped */
    size_t *off, *cnt;
    double *t;
    int n, cap;
    tb_grad_ready_fn fn;
    void *ctx;
} g_rec;

void tb_bprof_start(int skip) {
    g_rec.on = 1;
    g_rec.skip = skip > 0 ? skip : 0;
}

int tb_bprof_on(void) { return g_rec.on; }

static void recorder(void *unused, size_t offset, size_t count) {
    (void)unused;
    if (g_rec.n == g_rec.cap) {
        g_rec.cap = g_rec.cap ? 2 * g_rec.cap : 256;
        g_rec.off = realloc(g_rec.off, (size_t)g_rec.cap * sizeof *g_rec.off);
        g_rec.cnt = realloc(g_rec.cnt, (size_t)g_rec.cap * sizeof *g_rec.cnt);
        g_rec.t = realloc(g_rec.t, (size_t)g_rec.cap * sizeof *g_rec.t);
        if (!g_rec.off || !g_rec.cnt || !g_rec.t) TB_FATAL("out of host memory");
    }
    g_rec.off[g_rec.n] = offset;
    g_rec.cnt[g_rec.n] = count;
    g_rec.t[g_rec.n] = tb_now();
    g_rec.n++;
    if (g_rec.fn) g_rec.fn(g_rec.ctx, offset, count);
}

void tb_bprof_wrap(tb_grad_ready_fn *fn, void **ctx) {
    if (!g_rec.on) return;
    g_rec.fn = *fn;
    g_rec.ctx = *ctx;
    g_rec.n = 0;
    *fn = recorder;
    *ctx = NULL;
}

static void *grow(void *p, size_t bytes) {
    void *q = realloc(p, bytes);
    if (!q) TB_FATAL("out of host memory");
    return q;
}

static group *group_for(const tb_bprof_sample *x) {
    for (int i = 0; i < g_rec.ng; i++)
        if (g_rec.g[i].ranks == x->ranks) return &g_rec.g[i];
    g_rec.g = grow(g_rec.g, (size_t)(g_rec.ng + 1) * sizeof *g_rec.g);
    group *g = &g_rec.g[g_rec.ng++];
    memset(g, 0, sizeof *g);
    g->skip = -1;
    g->ranks = x->ranks;
    g->nr = x->nr;
    g->r_off = grow(NULL, (size_t)g->nr * sizeof *g->r_off);
    g->r_cnt = grow(NULL, (size_t)g->nr * sizeof *g->r_cnt);
    memcpy(g->r_off, x->r_off, (size_t)g->nr * sizeof *g->r_off);
    memcpy(g->r_cnt, x->r_cnt, (size_t)g->nr * sizeof *g->r_cnt);
    g->nb = x->nb;
    g->b_off = grow(NULL, (size_t)(g->nb ? g->nb : 1) * sizeof *g->b_off);
    g->b_cnt = grow(NULL, (size_t)(g->nb ? g->nb : 1) * sizeof *g->b_cnt);
    for (int i = 0; i < g->nb; i++) g->b_off[i] = x->b[i].off, g->b_cnt[i] = x->b[i].cnt;
    return g;
}

void tb_bprof_add(const tb_bprof_sample *x) {
    if (!g_rec.on || x->nr == 0) return; /* not recording, or no backward in this step */
    group *g = group_for(x);
    int same = g->nr == x->nr && g->nb == x->nb;
    for (int i = 0; same && i < g->nr; i++) same = g->r_off[i] == x->r_off[i] && g->r_cnt[i] == x->r_cnt[i];
    for (int b = 0; same && b < g->nb; b++) same = g->b_off[b] == x->b[b].off && g->b_cnt[b] == x->b[b].cnt;
    if (!same) return; /* another graph: not this rank count's timeline */
    if (g->steps == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 32;
        size_t c = (size_t)g->cap, nb = (size_t)(g->nb ? g->nb : 1);
        g->ready = grow(g->ready, c * (size_t)g->nr * sizeof *g->ready);
        g->b_ready = grow(g->b_ready, c * nb * sizeof *g->b_ready);
        g->b_start = grow(g->b_start, c * nb * sizeof *g->b_start);
        g->b_end = grow(g->b_end, c * nb * sizeof *g->b_end);
        g->bwd = grow(g->bwd, c * sizeof *g->bwd);
        g->exposed = grow(g->exposed, c * sizeof *g->exposed);
        g->step = grow(g->step, c * sizeof *g->step);
    }
    size_t s = (size_t)g->steps;
    double *ready = g->ready + s * (size_t)g->nr;
    for (int i = 0; i < g->nr; i++) ready[i] = x->r_ready[i];
    for (int b = 0; b < g->nb; b++) {
        double last = 0; /* without a measured one: the bucket is ready when its last range is */
        int measured = !isnan(x->b[b].ready_s);
        for (int i = 0; !measured && i < g->nr; i++)
            if (g->r_off[i] < g->b_off[b] + g->b_cnt[b] && g->r_off[i] + g->r_cnt[i] > g->b_off[b])
                last = fmax(last, ready[i]);
        g->b_ready[s * (size_t)g->nb + (size_t)b] = measured ? x->b[b].ready_s : last;
        g->b_start[s * (size_t)g->nb + (size_t)b] = x->b[b].start_s;
        g->b_end[s * (size_t)g->nb + (size_t)b] = x->b[b].end_s;
    }
    g->bwd[s] = x->backward_s;
    g->step[s] = x->step;
    g->exposed[s] = x->exposed_s;
    g->elem = x->elem_bytes;
    g->bucket_bytes = x->bucket_bytes;
    g->first_bucket_bytes = x->first_bucket_bytes;
    g->overlap = x->overlap;
    g->steps++;
    if (x->clock) snprintf(g_rec.clock, sizeof g_rec.clock, "%s", x->clock);
}

void tb_bprof_step(int ranks, int64_t step, int nb, const tb_bucket_time *b, size_t elem_bytes,
                   size_t bucket_bytes, size_t first_bucket_bytes, int overlap, double t_bwd0, double t_bwd1,
                   double t_done) {
    int nr = g_rec.n;
    g_rec.n = 0;
    if (!g_rec.on || nr == 0) return;
    double *r_ready = grow(NULL, (size_t)nr * sizeof *r_ready);
    for (int i = 0; i < nr; i++) r_ready[i] = g_rec.t[i] - t_bwd0;
    tb_bprof_sample x = {.ranks = ranks, .step = step, .nr = nr, .r_off = g_rec.off, .r_cnt = g_rec.cnt,
                         .r_ready = r_ready,
                         .nb = nb, .b = b, .elem_bytes = elem_bytes, .bucket_bytes = bucket_bytes,
                         .first_bucket_bytes = first_bucket_bytes, .overlap = overlap,
                         .backward_s = t_bwd1 - t_bwd0, .exposed_s = t_done - t_bwd1,
                         .clock = "host clock (synchronous step)"};
    tb_bprof_add(&x);
    free(r_ready);
}

void tb_bprof_tables_init(tb_table *grad_ready, tb_table *buckets) {
    tb_table_init(grad_ready, "grad_ready",
                  "ranks:i,range:i,offset:i,bytes:i,ready_ms,backward_ms,bucket_bytes:i,overlap:i,steps:i,"
                  "first_bucket_bytes:i");
    tb_table_init(buckets, "buckets",
                  "ranks:i,bucket:i,offset:i,bytes:i,ready_ms,start_ms,end_ms,backward_ms,exposed_ms,steps:i");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[first*stride + col], v[(first+1)*stride + col], ... up to n rows, in ms. */
static double median_ms(const double *v, int first, int n, int stride, int col) {
    int k = n - first;
    double *x = malloc((size_t)k * sizeof *x);
    if (!x) TB_FATAL("out of host memory");
    for (int i = 0; i < k; i++) x[i] = v[(size_t)(first + i) * (size_t)stride + (size_t)col];
    qsort(x, (size_t)k, sizeof *x, cmp_double);
    double m = k % 2 ? x[k / 2] : 0.5 * (x[k / 2 - 1] + x[k / 2]);
    free(x);
    return 1e3 * m;
}

static int by_start_ms(const void *a, const void *b) {
    const double *x = a, *y = b; /* {start_ms, index} */
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] > y[1] ? -1 : x[1] < y[1]);
}

void tb_bprof_row_warmup(int ranks, int steps) {
    for (int i = 0; i < g_rec.ng; i++)
        if (g_rec.g[i].ranks == ranks) g_rec.g[i].skip = steps;
}

/* The rows of one rank count: medians over its steps after the warm-up. */
static void add_rows(const group *g, tb_table *grad_ready, tb_table *buckets) {
    int64_t skip = g->skip >= 0 ? g->skip : g_rec.skip;
    int first = 0; /* the first timed sample; none: every sample, as a row of warm-up alone has */
    while (first < g->steps && g->step[first] < skip) first++;
    if (first == g->steps) first = 0;
    int used = g->steps - first;
    double bwd = median_ms(g->bwd, first, g->steps, 1, 0);
    double exposed = median_ms(g->exposed, first, g->steps, 1, 0);
    double e = (double)g->elem;
    for (int i = 0; i < g->nr; i++) {
        double row[10] = {g->ranks, i, e * (double)g->r_off[i], e * (double)g->r_cnt[i],
                          median_ms(g->ready, first, g->steps, g->nr, i), bwd, (double)g->bucket_bytes,
                          g->overlap, used, (double)g->first_bucket_bytes};
        tb_table_row(grad_ready, row, NULL);
    }
    double (*order)[2] = malloc((size_t)(g->nb ? g->nb : 1) * sizeof *order);
    if (!order) TB_FATAL("out of host memory");
    for (int b = 0; b < g->nb; b++) {
        order[b][0] = median_ms(g->b_start, first, g->steps, g->nb, b);
        order[b][1] = b;
    }
    qsort(order, (size_t)g->nb, sizeof *order, by_start_ms);
    for (int k = 0; k < g->nb; k++) {
        int b = (int)order[k][1];
        double row[10] = {g->ranks, b, e * (double)g->b_off[b], e * (double)g->b_cnt[b],
                          median_ms(g->b_ready, first, g->steps, g->nb, b), order[k][0],
                          median_ms(g->b_end, first, g->steps, g->nb, b), bwd, exposed, used};
        tb_table_row(buckets, row, NULL);
    }
    free(order);
}

void tb_bprof_tables_fill(tb_table *grad_ready, tb_table *buckets) {
    if (g_rec.clock[0]) {
        tb_attrs_str(&grad_ready->attrs, "clock", g_rec.clock);
        tb_attrs_str(&buckets->attrs, "clock", g_rec.clock);
    }
    for (int gi = 0; gi < g_rec.ng; gi++) {
        group *g = &g_rec.g[gi];
        if (g->steps > 0) add_rows(g, grad_ready, buckets);
        free(g->r_off);
        free(g->r_cnt);
        free(g->b_off);
        free(g->b_cnt);
        free(g->ready);
        free(g->b_ready);
        free(g->b_start);
        free(g->b_end);
        free(g->bwd);
        free(g->exposed);
        free(g->step);
    }
    free(g_rec.g);
    free(g_rec.off);
    free(g_rec.cnt);
    free(g_rec.t);
    memset(&g_rec, 0, sizeof g_rec);
}
