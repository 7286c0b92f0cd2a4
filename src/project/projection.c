/* projection.c - alpha-beta all-reduce costs, bucket overlap, and the
 * projected step (see projection.h). */
#include "src/project/projection.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

void tb_proj_profile_free(tb_proj_profile *p) {
    free(p->ranges);
    p->ranges = NULL;
    p->nranges = 0;
}

const char *tb_ar_algo_name(tb_ar_algo a) {
    switch (a) {
    case TB_AR_RING: return "ring";
    case TB_AR_TREE: return "tree";
    case TB_AR_HIER: return "hier";
    default: return "auto";
    }
}

int tb_ar_algo_parse(const char *s, tb_ar_algo *a) {
    for (int i = TB_AR_AUTO; i <= TB_AR_HIER; i++)
        if (strcmp(s, tb_ar_algo_name((tb_ar_algo)i)) == 0) {
            *a = (tb_ar_algo)i;
            return 0;
        }
    return -1;
}

/* ---- costs ---------------------------------------------------------------------------------- */

/* m nodes of p ranks for n ranks on f; 0, or -1 when the fabric lacks a network. */
static int layout(const tb_fabric *f, int n, int *m, int *p, char *err, size_t errlen) {
    int rpn = f->ranks_per_node > 0 ? f->ranks_per_node : n;
    if (rpn > n) rpn = n;
    *m = (n + rpn - 1) / rpn;
    *p = *m > 1 ? rpn : n;
    if (*m > 1 && !(f->inter_bw_GBps > 0)) {
        if (err) {
            char remedy[200];
            if (strncmp(f->name, "fit", 3) == 0)
                snprintf(remedy, sizeof remedy, "the fit measured one host: give --ranks-per-node N when one node holds "
                         "them, or a preset with a network (--list-fabrics)");
            else
                snprintf(remedy, sizeof remedy, "add one (--fabric %.90s+ndr400x8, or a file with inter_bw_GBps)",
                         f->name);
            snprintf(err, errlen, "fabric '%s' describes one node of %d rank%s and no network, so it cannot carry %d "
                     "ranks; %s", f->name, rpn, rpn == 1 ? "" : "s", n, remedy);
        }
        return -1;
    }
    if (*p > 1 && !(f->intra_bw_GBps > 0)) { /* hops inside a node are not free */
        if (err)
            snprintf(err, errlen,
                 "fabric '%s' describes no intra-node link, so it cannot carry %d ranks in a node; add "
                 "one (--fabric nvlink4-h100+%s)",
                 f->name, *p, f->name);
        return -1;
    }
    return 0;
}

/* The network rate of the emptiest of m nodes of p ranks holding n (filled in order: the last holds the rest),
 * in bytes/s: a node's network rate comes from its ranks' NICs, so a last node of 1 rank in 8 has 1/8 of it. */
static double net_bw(const tb_fabric *f, int n, int m, int p) {
    int last = n - (m - 1) * p;
    return 1e9 * f->inter_bw_GBps * (last > 0 && last < p ? (double)last / p : 1.0);
}

/* The ring's bus bandwidth in bytes/s (n ranks on m nodes of p). */
static double ring_bw(const tb_fabric *f, int n, int m, int p) {
    if (m == 1) return 1e9 * f->intra_bw_GBps;
    if (p == 1) return net_bw(f, n, m, p);
    return fmin(1e9 * f->intra_bw_GBps, net_bw(f, n, m, p));
}

/* NCCL's log2i (log2Down): the tree's network depth for m nodes */
static int floor_log2(int m) {
    int k = 0;
    while ((2 << k) <= m) k++;
    return k;
}

int tb_allreduce_cost(const tb_fabric *f, int n, double bytes, tb_ar_cost *c, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    c->hier_s = NAN;
    if (n < 2) {
        c->nodes = c->per_node = 1;
        c->best = TB_AR_RING;
        return 0;
    }
    int m, p;
    if (layout(f, n, &m, &p, err, errlen) != 0) return -1;
    c->nodes = m;
    c->per_node = p;
    double a_in = 1e-6 * f->alpha_intra_us, a_net = 1e-6 * f->alpha_inter_us, b = ring_bw(f, n, m, p);
    double base = 1e-6 * f->base_us; /* once per collective (NCCL's base latency) */
    int steps = 2 * (n - 1), net_steps = 2 * (m - 1);
    c->ring_s = base + 2.0 * (n - 1) / n * bytes / b + (steps - net_steps) * a_in + net_steps * a_net;
    c->tree_s = base + 2.0 * bytes / b + 2.0 * ((p - 1) * a_in + floor_log2(m) * a_net);
    if (m > 1 && p > 1 && f->intra_bw_GBps > 0)
        c->hier_s = base + 2.0 * (p - 1) / p * bytes / (1e9 * f->intra_bw_GBps) +
                    2.0 * (m - 1) / m * bytes / net_bw(f, n, m, p) + 2.0 * (p - 1) * a_in +
                    2.0 * (m - 1) * a_net;
    c->best = TB_AR_RING;
    c->best_s = c->ring_s;
    if (c->tree_s < c->best_s) {
        c->best = TB_AR_TREE;
        c->best_s = c->tree_s;
    }
    /* hier is a what-if only (algo=hier): NCCL's tuner chooses between ring and tree (NVLS and
     * CollNet need switch support the fabrics here do not describe), so AUTO does too. */
    return 0;
}

double tb_ar_cost_time(const tb_ar_cost *c, tb_ar_algo a) {
    switch (a) {
    case TB_AR_RING: return c->ring_s;
    case TB_AR_TREE: return c->tree_s;
    case TB_AR_HIER: return isnan(c->hier_s) ? c->best_s : c->hier_s;
    default: return c->best_s;
    }
}

double tb_bcast_cost(const tb_fabric *f, int n, double bytes) {
    if (n < 2 || !(bytes > 0)) return 0;
    int m, p;
    if (layout(f, n, &m, &p, NULL, 0) != 0) return NAN;
    /* a pipelined chain from the root: n - m hops inside nodes, m - 1 between them */
    return 1e-6 * (f->base_us + (n - m) * f->alpha_intra_us + (m - 1) * f->alpha_inter_us) +
           bytes / ring_bw(f, n, m, p);
}

double tb_fabric_ring_busbw_GBps(const tb_fabric *f, int n) {
    int m, p;
    if (n < 2 || layout(f, n, &m, &p, NULL, 0) != 0) return NAN;
    return 1e-9 * ring_bw(f, n, m, p);
}

double tb_busbw_GBps(int n, double bytes, double seconds) {
    if (n < 2 || !(seconds > 0)) return NAN;
    return bytes / seconds * 2.0 * (n - 1) / n * 1e-9;
}

/* ---- buckets and overlap ------------------------------------------------------------------------ */

tb_proj_knobs tb_proj_knobs_of(const tb_proj_profile *p) {
    tb_proj_knobs k = {p->bucket_bytes, p->first_bucket_bytes, p->wire_scale > 0 ? p->wire_scale : 1.0, 1.0,
                       p->overlap, p->bn_broadcast, TB_AR_AUTO, 1};
    return k;
}

int tb_proj_share(const tb_proj_knobs *k, int ranks) {
    return k->share > 1 ? (k->share < ranks ? k->share : ranks) : 1;
}

static int by_offset_desc(const void *a, const void *b) {
    double x = ((const tb_grad_range *)a)->offset, y = ((const tb_grad_range *)b)->offset;
    return x > y ? -1 : x < y;
}


int tb_proj_buckets(const tb_proj_profile *p, const tb_proj_knobs *k, tb_proj_bucket **out) {
    *out = NULL;
    if (p->nranges == 0) return 0;
    tb_grad_range *r = malloc((size_t)p->nranges * sizeof *r);
    tb_proj_bucket *b = calloc((size_t)p->nranges, sizeof *b);
    if (!r || !b) TB_FATAL("out of host memory");
    memcpy(r, p->ranges, (size_t)p->nranges * sizeof *r);
    qsort(r, (size_t)p->nranges, sizeof *r, by_offset_desc);
    double cap = k->bucket_bytes > 0 ? k->bucket_bytes : 1;
    /* the first bucket cut (launched first) closes at its own cap */
    double first = k->first_bucket_bytes > 0 && k->first_bucket_bytes < cap ? k->first_bucket_bytes : cap;
    int nb = 0;
    double acc = 0, wire = 0, ready = 0, lo = 0;
    for (int i = 0; i < p->nranges; i++) { /* from the end of the buffer, as grad_sync cuts */
        acc += r[i].bytes; /* the caps hold the gradients' own bytes: a bf16 wire halves what moves, */
        wire += r[i].bytes * k->byte_scale; /* not how the buffer is cut (comm/grad_sync_dev.c) */
        lo = r[i].offset * k->byte_scale;
        ready = fmax(ready, r[i].ready_s * k->batch_scale);
        if (acc >= (nb == 0 ? first : cap) || i == p->nranges - 1) {
            b[nb].offset = lo;
            b[nb].bytes = wire;
            b[nb].ready_s = ready;
            nb++;
            acc = wire = 0;
            ready = 0;
        }
    }
    free(r); /* cut from the end: already in launch order, last layers first */
    *out = b;
    return nb;
}

double tb_proj_schedule(tb_proj_bucket *b, int n, double backward_end_s, int overlap) {
    double free_at = 0;
    for (int i = 0; i < n; i++) {
        double ready = overlap ? b[i].ready_s : fmax(b[i].ready_s, backward_end_s);
        b[i].start_s = fmax(ready, free_at);
        b[i].end_s = b[i].start_s + b[i].cost_s;
        free_at = b[i].end_s;
    }
    return n > 0 ? fmax(0.0, free_at - backward_end_s) : 0.0;
}

/* ---- the step -------------------------------------------------------------------------------- */

static double compute_step(const tb_proj_profile *p, double k) {
    double phases = p->data_s + p->h2d_s + p->forward_s + p->backward_s + p->optimizer_s;
    double overhead = p->step_s > phases ? p->step_s - phases : 0;
    return k * (p->data_s + p->h2d_s + p->forward_s + p->backward_s) + p->optimizer_s + overhead;
}

int tb_project(const tb_proj_profile *p, const tb_fabric *f, int ranks, const tb_proj_knobs *k,
               tb_proj_result *r, tb_proj_bucket **buckets, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    if (buckets) *buckets = NULL;
    r->ranks = ranks;
    r->nodes = 1;
    r->compute_s = compute_step(p, k->batch_scale);
    tb_proj_bucket *b = NULL;
    int nb = tb_proj_buckets(p, k, &b);
    r->buckets = nb;
    double largest = -1;
    for (int i = 0; i < nb && ranks > 1; i++) {
        if (!(b[i].bytes > 0)) continue; /* nothing to sum: NCCL returns at once (cost 0) */
        if (tb_allreduce_cost(f, ranks, b[i].bytes, &b[i].cost, err, errlen) != 0) {
            free(b);
            return -1;
        }
        b[i].cost_s = tb_ar_cost_time(&b[i].cost, k->algo);
        r->comm_s += b[i].cost_s;
        r->nodes = b[i].cost.nodes;
        if (b[i].bytes > largest) {
            largest = b[i].bytes;
            r->algo = k->algo == TB_AR_AUTO ? b[i].cost.best : k->algo;
        }
    }
    /* ranks time-slicing one device: the compute of all of them (backward,
     * and so the ready times, share x as long), nothing overlapped */
    int share = tb_proj_share(k, ranks);
    for (int i = 0; i < nb; i++) b[i].ready_s *= share;
    if (ranks > 1) {
        r->exposed_s = tb_proj_schedule(b, nb, share * p->backward_s * k->batch_scale, share > 1 ? 0 : k->overlap);
        r->bcast_s = k->bn_broadcast ? tb_bcast_cost(f, ranks, p->state_bytes) : 0;
        double bytes = p->grad_bytes * k->byte_scale;
        r->busbw_GBps = tb_busbw_GBps(ranks, bytes, r->comm_s);
    } else {
        r->busbw_GBps = NAN;
        r->algo = TB_AR_AUTO;
    }
    r->step_s = share * r->compute_s + r->exposed_s + r->bcast_s;
    r->img_per_s = r->step_s > 0 ? ranks * p->batch * k->batch_scale / r->step_s : 0;
    r->efficiency = r->step_s > 0 ? r->compute_s / r->step_s : 0;
    if (buckets) *buckets = b;
    else free(b);
    return 0;
}

static double eff_at(const tb_proj_profile *p, const tb_fabric *f, int ranks, const tb_proj_knobs *k,
                     double factor) {
    tb_fabric g = *f;
    g.intra_bw_GBps *= factor;
    g.inter_bw_GBps *= factor;
    tb_proj_result r;
    char err[512];
    if (tb_project(p, &g, ranks, k, &r, NULL, err, sizeof err) != 0) return NAN;
    return r.efficiency;
}

double tb_proj_bandwidth_factor(const tb_proj_profile *p, const tb_fabric *f, int ranks,
                                const tb_proj_knobs *k, double eff) {
    if (ranks < 2 || !(eff > 0)) return NAN;
    double top = eff_at(p, f, ranks, k, 1e12);
    if (!(eff < top)) return NAN;
    double lo = 1e-9, hi = 1e12; /* eff rises with the factor */
    for (int i = 0; i < 200 && hi / lo > 1 + 1e-9; i++) {
        double mid = sqrt(lo * hi);
        if (eff_at(p, f, ranks, k, mid) < eff) lo = mid;
        else hi = mid;
    }
    return sqrt(lo * hi);
}
