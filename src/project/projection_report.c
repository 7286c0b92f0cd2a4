/* projection_report.c - the tables of `trainbench project` and its
 * /projection rows (see projection_report.h). */
#include "src/project/projection_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

static const tb_proj_measured *meas_at(const tb_proj_request *q, int ranks) {
    for (int i = 0; i < q->nmeas; i++)
        if (q->meas[i].ranks == ranks) return &q->meas[i];
    return NULL;
}

static double ms(double s) { return 1e3 * s; }

/* The projection of n ranks under k; -1 after one line on stderr. */
static int run(const tb_proj_request *q, int n, const tb_proj_knobs *k, tb_proj_result *r, tb_proj_bucket **b) {
    char err[1024];
    if (tb_project(q->p, q->f, n, k, r, b, err, sizeof err) != 0) {
        tb_say_error("project: %s", err);
        return -1;
    }
    return 0;
}

/* The allreduce phase the fabric explains when backward takes bwd_s (the
 * one measured at that rank count), the ready times stretched alike: the
 * all-reduce's own share of a difference, apart from a slower backward. */
static int replay_comm(const tb_proj_request *q, int n, double bwd_s, double *comm_s) {
    tb_proj_profile p = *q->p;
    double scale = q->p->backward_s > 0 ? bwd_s / q->p->backward_s : 1;
    p.ranges = malloc((size_t)(p.nranges ? p.nranges : 1) * sizeof *p.ranges);
    if (!p.ranges) TB_FATAL("out of host memory");
    for (int i = 0; i < p.nranges; i++) {
        p.ranges[i] = q->p->ranges[i];
        p.ranges[i].ready_s *= scale;
    }
    p.backward_s = bwd_s;
    tb_proj_knobs k = q->base;
    k.batch_scale = 1;
    tb_proj_result r;
    char err[1024];
    int rc = tb_project(&p, q->f, n, &k, &r, NULL, err, sizeof err);
    if (rc != 0) tb_say_error("project: %s", err);
    *comm_s = rc == 0 ? r.exposed_s + r.bcast_s : NAN;
    free(p.ranges);
    return rc;
}

/* ---- header ---------------------------------------------------------------------------------- */

static void print_inputs(FILE *f, tb_format fmt, const tb_proj_request *q) {
    const tb_proj_profile *p = q->p;
    const tb_proj_knobs *k = &q->base;
    double phases = p->data_s + p->h2d_s + p->forward_s + p->backward_s + p->optimizer_s;
    tb_proj_bucket *b;
    int nb = tb_proj_buckets(p, k, &b);
    free(b);
    char fab[1024];
    tb_fabric_describe(q->f, fab, sizeof fab);
    tb_note(f, fmt, "trainbench project: what N ranks should reach, from one rank's step and the fabric");
    tb_note(f, fmt, "profile: %s", p->what);
    tb_note(f, fmt,
            "1-rank step %.1f ms: data %.1f, h2d %.1f, forward %.1f, backward %.1f, optimizer %.1f, other %.1f ms",
            ms(p->step_s), ms(p->data_s), ms(p->h2d_s), ms(p->forward_s), ms(p->backward_s),
            ms(p->optimizer_s), ms(p->step_s > phases ? p->step_s - phases : 0));
    tb_note(f, fmt, "gradient ready times: %s", p->ready_source);
    char first[64] = "";
    if (k->first_bucket_bytes > 0 && k->first_bucket_bytes < k->bucket_bytes)
        snprintf(first, sizeof first, " (the first at %.3g)", k->first_bucket_bytes / 1048576.0);
    /* a bucket closes once it holds its size (comm/bucket_plan.h, as DDP's bucket_cap_mb): its last tensor
     * may take it past it */
    tb_note(f, fmt,
            "projected with: batch x%g per rank, gradients %.1f MB (x%g bytes) in %d bucket%s closed at %.3g MiB%s, "
            "overlap %s, all-reduce %s; BN statistics %.1f kB %s",
            k->batch_scale, 1e-6 * p->grad_bytes * k->byte_scale, k->byte_scale, nb, nb == 1 ? "" : "s",
            k->bucket_bytes / 1048576.0, first,
            k->share > 1 ? "off (ranks share a device)" : k->overlap ? "on" : "off",
            k->algo == TB_AR_AUTO ? "the faster of ring and tree (NCCL's choice)" : tb_ar_algo_name(k->algo),
            1e-3 * p->state_bytes, k->bn_broadcast ? "broadcast per step" : "not broadcast (--broadcast-buffers off)");
    tb_note(f, fmt, "fabric %s", fab);
    tb_note(f, fmt, "  source: %s", q->f->source);
}

/* ---- the main table ------------------------------------------------------------------------------ */

static int print_main(FILE *f, tb_format fmt, const tb_proj_request *q) {
    const tb_col cols[] = {
        {.head = "ranks", .key = "ranks", .width = 5},
        {.head = "nodes", .key = "nodes", .width = 5},
        {.head = "algo", .key = "algo", .width = 4},
        {.head = "ar sum", .unit = "ms", .key = "comm_ms", .width = 8},
        {.head = "busbw", .unit = "GB/s", .key = "busbw_GBps", .width = 8},
        {.head = "exposed", .unit = "ms", .key = "exposed_ms", .width = 8},
        {.head = "step", .unit = "ms", .key = "step_ms", .width = 8},
        {.head = "img/s", .key = "img_per_s", .width = 9},
        {.head = "eff %", .key = "efficiency_pct", .width = 6},
        {.head = "meas step", .unit = "ms", .key = "measured_step_ms", .width = 9, .gap = 3},
        {.head = "meas exposed", .unit = "ms", .key = "measured_exposed_ms", .width = 8},
        {.head = "meas img/s", .key = "measured_img_per_s", .width = 9},
        {.head = "meas eff %", .key = "measured_efficiency_pct", .width = 6},
    };
    tb_tab *t = tb_tab_new(fmt,
                           "projection per rank count (eff = T1 / (N x TN) at the same per-rank batch; exposed = "
                           "all-reduce after backward + BN statistics broadcast); measured rows beside it",
                           cols, (int)(sizeof cols / sizeof cols[0]));
    int rc = 0;
    for (int i = 0; i < q->nranks && rc == 0; i++) {
        tb_proj_result r;
        if ((rc = run(q, q->ranks[i], &q->base, &r, NULL)) != 0) break;
        const tb_proj_measured *m = meas_at(q, q->ranks[i]);
        tb_tab_int(t, r.ranks);
        tb_tab_int(t, r.nodes);
        tb_tab_str(t, r.ranks > 1 ? tb_ar_algo_name(r.algo) : "-");
        tb_tab_num(t, r.ranks > 1 ? ms(r.comm_s) : NAN, 2);
        tb_tab_num(t, r.busbw_GBps, 3);
        tb_tab_num(t, ms(r.exposed_s + r.bcast_s), 2);
        tb_tab_num(t, ms(r.step_s), 2);
        tb_tab_num(t, r.img_per_s, 2);
        tb_tab_num(t, 100 * r.efficiency, 1);
        tb_tab_num(t, m ? m->step_ms : NAN, 2);
        tb_tab_num(t, m ? m->exposed_ms : NAN, 2);
        tb_tab_num(t, m ? m->img_per_s : NAN, 2);
        tb_tab_num(t, m ? 100 * m->efficiency : NAN, 1);
    }
    tb_tab_print(t, f);
    return rc;
}

static int print_whatif(FILE *f, tb_format fmt, const tb_proj_request *q) {
    if (q->nw == 0) return 0;
    tb_col cols[2 + TB_PROJ_MAX_WHATIF];
    int nc = 0;
    cols[nc++] = (tb_col){.head = "ranks", .key = "ranks", .width = 5};
    cols[nc++] = (tb_col){.head = "as run", .key = "efficiency_pct", .width = 7};
    char keys[TB_PROJ_MAX_WHATIF][80];
    for (int w = 0; w < q->nw; w++) {
        snprintf(keys[w], sizeof keys[w], "if_%s_efficiency_pct", q->w[w].key);
        cols[nc++] = (tb_col){.head = q->w[w].label, .key = keys[w], .width = 8};
    }
    tb_tab *t = tb_tab_new(fmt, "what would change it: projected efficiency % under each change alone", cols, nc);
    int rc = 0;
    for (int i = 0; i < q->nranks && rc == 0; i++) {
        tb_proj_result r;
        if ((rc = run(q, q->ranks[i], &q->base, &r, NULL)) != 0) break;
        tb_tab_int(t, q->ranks[i]);
        tb_tab_num(t, 100 * r.efficiency, 1);
        for (int w = 0; w < q->nw && rc == 0; w++) {
            if ((rc = run(q, q->ranks[i], &q->w[w].k, &r, NULL)) != 0) break;
            tb_tab_num(t, 100 * r.efficiency, 1);
        }
    }
    tb_tab_print(t, f);
    return rc;
}

/* ---- buckets ---------------------------------------------------------------------------------- */

static int print_buckets(FILE *f, tb_format fmt, const tb_proj_request *q, int n) {
    tb_proj_result r;
    tb_proj_bucket *b;
    if (run(q, n, &q->base, &r, &b) != 0) return -1;
    const tb_rtable *mt = q->run ? tb_results_table(q->run, "buckets") : NULL;
    size_t mrow[256];
    int nm = 0;
    for (size_t i = 0; mt && i < mt->rows && nm < 256; i++)
        if (tb_rtable_num(mt, "ranks", i) == n) mrow[nm++] = i;
    const tb_col cols[] = {
        {.head = "#", .key = "launch", .width = 2},
        {.head = "MiB", .key = "mib", .width = 6},
        {.head = "ready", .key = "ready_ms", .width = 8},
        {.head = "ring", .key = "ring_ms", .width = 8},
        {.head = "tree", .key = "tree_ms", .width = 8},
        {.head = "hier", .key = "hier_ms", .width = 8},
        {.head = "start", .key = "start_ms", .width = 8},
        {.head = "end", .key = "end_ms", .width = 8},
        {.head = "meas MiB", .key = "measured_mib", .width = 6, .gap = 3},
        {.head = "meas ready", .key = "measured_ready_ms", .width = 8},
        {.head = "meas start", .key = "measured_start_ms", .width = 8},
        {.head = "meas end", .key = "measured_end_ms", .width = 8},
        {.head = "meas ar", .key = "measured_ar_ms", .width = 8},
    };
    char title[256];
    snprintf(title, sizeof title,
             "%d ranks: buckets in launch order, ms from the start of backward (predicted backward ends at %.1f)", n,
             ms(q->p->backward_s * q->base.batch_scale) * tb_proj_share(&q->base, n));
    tb_tab *t = tb_tab_new(fmt, title, cols, (int)(sizeof cols / sizeof cols[0]));
    int rows = r.buckets > nm ? r.buckets : nm;
    for (int i = 0; i < rows; i++) {
        if (i < r.buckets) {
            const tb_proj_bucket *x = &b[i];
            tb_tab_int(t, i);
            tb_tab_num(t, x->bytes / 1048576.0, 2);
            tb_tab_num(t, ms(x->ready_s), 1);
            tb_tab_num(t, ms(x->cost.ring_s), 2);
            tb_tab_num(t, ms(x->cost.tree_s), 2);
            tb_tab_num(t, ms(x->cost.hier_s), 2);
            tb_tab_num(t, ms(x->start_s), 1);
            tb_tab_num(t, ms(x->end_s), 1);
        } else {
            tb_tab_int(t, i);
            for (int c = 0; c < 7; c++) tb_tab_str(t, fmt == TB_FMT_CSV ? "" : "-");
        }
        if (i < nm) {
            size_t k = mrow[i];
            double st = tb_rtable_num(mt, "start_ms", k), en = tb_rtable_num(mt, "end_ms", k);
            tb_tab_num(t, tb_rtable_num(mt, "bytes", k) / 1048576.0, 2);
            tb_tab_num(t, tb_rtable_num(mt, "ready_ms", k), 1);
            tb_tab_num(t, st, 1);
            tb_tab_num(t, en, 1);
            tb_tab_num(t, en - st, 2);
        } else {
            for (int c = 0; c < 5; c++) tb_tab_num(t, NAN, 1);
        }
    }
    tb_tab_print(t, f);
    if (nm > 0) {
        double mb = 0;
        for (int i = 0; i < nm; i++) mb += tb_rtable_num(mt, "bytes", mrow[i]);
        double bwd = tb_rtable_num(mt, "backward_ms", mrow[0]), exp = tb_rtable_num(mt, "exposed_ms", mrow[0]);
        tb_note(f, fmt, "%d ranks measured (rank 0, medians): backward ends at %.1f ms, the all-reduce wait after it "
                        "%.1f ms; %.1f MB in %d bucket%s",
                n, bwd, exp, 1e-6 * mb, nm, nm == 1 ? "" : "s");
    }
    free(b);
    return 0;
}

/* ---- where the measured rows differ ------------------------------------------------------------- */

typedef struct {
    const char *phase;
    double measured, predicted;
    char reading[256];
} diff_row;

static int cmp_abs_desc(const void *a, const void *b) {
    double x = fabs(((const diff_row *)a)->measured - ((const diff_row *)a)->predicted);
    double y = fabs(((const diff_row *)b)->measured - ((const diff_row *)b)->predicted);
    return x > y ? -1 : x < y;
}

static int print_differences(FILE *f, tb_format fmt, const tb_proj_request *q) {
    const tb_col cols[] = {
        {.head = "ranks", .key = "ranks", .width = 5},
        {.head = "phase", .key = "phase", .width = 9, .left = 1},
        {.head = "measured", .unit = "ms", .key = "measured_ms", .width = 9},
        {.head = "predicted", .unit = "ms", .key = "predicted_ms", .width = 9},
        {.head = "difference", .unit = "ms", .key = "difference_ms", .width = 10},
        {.head = "reading", .key = "reading", .left = 1, .gap = 2},
    };
    tb_tab *t = NULL;
    const tb_proj_profile *p = q->p;
    double k = q->base.batch_scale;
    const double one[TB_PH_COUNT] = {p->data_s * k, p->h2d_s * k, p->forward_s * k, p->backward_s * k, 0,
                                     p->optimizer_s};
    char (*lines)[1024] = calloc((size_t)(q->nmeas ? q->nmeas : 1), sizeof *lines);
    if (!lines) TB_FATAL("out of host memory");
    int nlines = 0, rc = 0;
    for (int i = 0; i < q->nmeas && rc == 0; i++) {
        const tb_proj_measured *m = &q->meas[i];
        if (m->ranks < 2 || isnan(m->step_ms) || isnan(m->phase_ms[TB_PH_BWD])) continue;
        tb_proj_result r;
        double comm_s = 0;
        if ((rc = run(q, m->ranks, &q->base, &r, NULL)) != 0) break;
        if ((rc = replay_comm(q, m->ranks, 1e-3 * m->phase_ms[TB_PH_BWD], &comm_s)) != 0) break;
        if (!t) t = tb_tab_new(fmt, "where the measured rows differ from the projection, by phase (ms per step)", cols,
                               (int)(sizeof cols / sizeof cols[0]));
        diff_row d[TB_PH_COUNT + 2];
        int nd = 0;
        for (int ph = 0; ph < TB_PH_COUNT; ph++) {
            diff_row *x = &d[nd++];
            x->phase = tb_phase_name[ph];
            x->measured = m->phase_ms[ph];
            if (ph == TB_PH_COMM) {
                x->predicted = ms(comm_s);
                double diff = x->measured - x->predicted;
                snprintf(x->reading, sizeof x->reading,
                         diff >= 0 ? "exposed all-reduce %.1f ms more than the fabric explains (it predicts %.1f with "
                                     "the backward measured here; %.1f with the 1-rank one)"
                                   : "exposed all-reduce %.1f ms less than the fabric predicts (%.1f with the backward "
                                     "measured here; %.1f with the 1-rank one)",
                         fabs(diff), x->predicted, ms(r.exposed_s + r.bcast_s));
            } else {
                int sh = tb_proj_share(&q->base, m->ranks);
                x->predicted = ms(one[ph]) * sh;
                double diff = x->measured - x->predicted;
                char base[32] = "on 1 rank";
                if (sh > 1) snprintf(base, sizeof base, "%d x 1 rank", sh);
                snprintf(x->reading, sizeof x->reading, "%s than %s%s", diff >= 0 ? "slower" : "faster", base,
                         ph == TB_PH_BWD && diff > 0 ? " (compute shares the machine with the all-reduce)" : "");
            }
        }
        diff_row *st = &d[nd++];
        st->phase = "step";
        st->measured = m->step_ms;
        st->predicted = ms(r.step_s);
        if (isnan(m->efficiency)) /* a file without /scaling's efficiency printed "measured nan %" */
            snprintf(st->reading, sizeof st->reading, "the whole step: projected %.1f %% efficiency (the file "
                     "records no measured one)", 100 * r.efficiency);
        else
            snprintf(st->reading, sizeof st->reading, "the whole step: measured %.1f %% efficiency, projected "
                     "%.1f %%", 100 * m->efficiency, 100 * r.efficiency);
        for (int j = 0; j < nd; j++) {
            tb_tab_int(t, m->ranks);
            tb_tab_str(t, d[j].phase);
            tb_tab_num(t, d[j].measured, 1);
            tb_tab_num(t, d[j].predicted, 1);
            tb_tab_strf(t, "%+.1f", d[j].measured - d[j].predicted);
            tb_tab_str(t, d[j].reading);
        }
        /* the sentence: the step's difference and its three largest parts */
        qsort(d, (size_t)(nd - 1), sizeof *d, cmp_abs_desc);
        int used = snprintf(lines[nlines], sizeof lines[0], "%d ranks: measured step %.1f ms, projected %.1f (%+.1f):",
                            m->ranks, st->measured, st->predicted, st->measured - st->predicted);
        for (int j = 0; j < 3 && j < nd - 1 && used < (int)sizeof lines[0]; j++) {
            double diff = d[j].measured - d[j].predicted;
            if (strcmp(d[j].phase, "allreduce") == 0)
                used += snprintf(lines[nlines] + used, sizeof lines[0] - (size_t)used, "%s exposed all-reduce %.1f ms %s",
                                 j ? ";" : "", fabs(diff), diff >= 0 ? "more than the fabric explains" : "less than the fabric predicts");
            else
                used += snprintf(lines[nlines] + used, sizeof lines[0] - (size_t)used, "%s %s %+.1f ms", j ? ";" : "",
                                 d[j].phase, diff);
        }
        nlines++;
    }
    if (t) tb_tab_print(t, f);
    if (t && q->base.share > 1)
        tb_note(f, fmt,
                "share=%d: up to %d ranks time-slice one device, so each phase is predicted at min(%d, ranks) x its "
                "1-rank time and the all-reduces after the compute (overlap has no effect); a rank's events see its "
                "collectives partly inside backward (the peer's time slice), so compare the step",
                q->base.share, q->base.share, q->base.share);
    for (int i = 0; i < nlines; i++) tb_note(f, fmt, "%s", lines[i]);
    free(lines);
    return rc;
}

/* The bandwidth each measured efficiency implies, and what the run's own
 * all-reduces reached. */
static void print_implied(FILE *f, tb_format fmt, const tb_proj_request *q) {
    for (int i = 0; i < q->nmeas; i++) {
        const tb_proj_measured *m = &q->meas[i];
        if (m->ranks < 2 || !(m->efficiency > 0)) continue;
        double x = tb_proj_bandwidth_factor(q->p, q->f, m->ranks, &q->base, m->efficiency);
        double ring = tb_fabric_ring_busbw_GBps(q->f, m->ranks);
        char seen[128] = "";
        if (!isnan(m->busbw_GBps) && m->busbw_GBps > 0)
            snprintf(seen, sizeof seen, "; the run's all-reduces reached %.4g GB/s", m->busbw_GBps);
        if (isnan(x))
            tb_note(f, fmt,
                    "%d ranks%s%s: measured efficiency %.1f %% is above what any bandwidth gives on this fabric's "
                    "latencies and this profile%s",
                    m->ranks, m->label[0] ? " " : "", m->label, 100 * m->efficiency, seen);
        else
            tb_note(f, fmt,
                    "%d ranks%s%s: measured efficiency %.1f %% is what the projection gives at %.3g x the fabric's "
                    "bandwidth (ring bus bandwidth %.4g GB/s instead of %.4g), if communication were the only loss%s",
                    m->ranks, m->label[0] ? " " : "", m->label, 100 * m->efficiency, x, x * ring, ring, seen);
    }
}

int tb_proj_report(FILE *f, tb_format fmt, const tb_proj_request *q) {
    print_inputs(f, fmt, q);
    if (print_main(f, fmt, q) != 0 || print_whatif(f, fmt, q) != 0) return -1;
    for (int i = 0; i < q->nbucket_ranks; i++)
        if (q->bucket_ranks[i] > 1 && print_buckets(f, fmt, q, q->bucket_ranks[i]) != 0) return -1;
    if (print_differences(f, fmt, q) != 0) return -1;
    print_implied(f, fmt, q);
    return 0;
}

void tb_proj_store(tb_table *t, const tb_proj_request *q) {
    char names[2048];
    int used = snprintf(names, sizeof names,
                        "ranks:i,nodes:i,buckets:i,comm_ms,exposed_ms,step_ms,img_per_s,efficiency,busbw_GBps,"
                        "measured_step_ms,measured_img_per_s,measured_efficiency,measured_exposed_ms");
    for (int w = 0; w < q->nw; w++)
        used += snprintf(names + used, sizeof names - (size_t)used, ",if_%s_efficiency,if_%s_img_per_s", q->w[w].key,
                         q->w[w].key);
    tb_table_init(t, "projection", names);
    tb_table_add_string_column(t, "algo");
    for (int i = 0; i < q->nranks; i++) {
        tb_proj_result r;
        char err[1024];
        if (tb_project(q->p, q->f, q->ranks[i], &q->base, &r, NULL, err, sizeof err) != 0) continue;
        const tb_proj_measured *m = meas_at(q, q->ranks[i]);
        double row[13 + 2 * TB_PROJ_MAX_WHATIF] = {
            r.ranks, r.nodes, r.buckets, ms(r.comm_s), ms(r.exposed_s + r.bcast_s), ms(r.step_s), r.img_per_s,
            r.efficiency, r.busbw_GBps, m ? m->step_ms : NAN, m ? m->img_per_s : NAN, m ? m->efficiency : NAN,
            m ? m->exposed_ms : NAN};
        for (int w = 0; w < q->nw; w++) {
            tb_proj_result x;
            int ok = tb_project(q->p, q->f, q->ranks[i], &q->w[w].k, &x, NULL, err, sizeof err) == 0;
            row[13 + 2 * w] = ok ? x.efficiency : NAN;
            row[14 + 2 * w] = ok ? x.img_per_s : NAN;
        }
        tb_table_row(t, row, r.ranks > 1 ? tb_ar_algo_name(r.algo) : "-");
    }
}
