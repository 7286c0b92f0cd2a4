/* scaling.c - rank summaries into scaling rows, and the two printed tables. */
#include "src/scaling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tb_rank_summary_add(tb_rank_summary *s, const tb_step_record *r) {
    s->steps++;
    s->samples += r->n;
    for (int p = 0; p < TB_PH_COUNT; p++) s->phase_s[p] += r->phase[p];
    s->step_s += r->total;
    s->comm_busy_s += r->sync.busy_s;
    s->comm_bytes += r->sync.bytes;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static tb_spread spread(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    tb_spread s = {v[0], n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[n - 1]};
    return s;
}

void tb_scaling_row_from(tb_scaling_row *row, const tb_rank_summary *per_rank, int k,
                         int batch_per_rank, double dataset_size, double util_pct_or_neg) {
    memset(row, 0, sizeof *row);
    row->ranks = k;
    row->global_batch = k * batch_per_rank;
    double *v = malloc((size_t)k * sizeof *v);
    double samples = 0, slowest = 0;
    for (int r = 0; r < k; r++) {
        samples += per_rank[r].samples;
        if (per_rank[r].elapsed_s > slowest) slowest = per_rank[r].elapsed_s;
    }
    row->img_per_s = slowest > 0 ? samples / slowest : 0;
    row->img_per_s_per_rank = row->img_per_s / k;
    row->epoch_time_s = row->img_per_s > 0 ? dataset_size / row->img_per_s : 0;

    for (int r = 0; r < k; r++) v[r] = 1e3 * per_rank[r].step_s / per_rank[r].steps;
    row->step_ms = spread(v, k);
    for (int p = 0; p < TB_PH_COUNT; p++) {
        for (int r = 0; r < k; r++) v[r] = 1e3 * per_rank[r].phase_s[p] / per_rank[r].steps;
        row->phase_ms[p] = spread(v, k);
    }
    for (int r = 0; r < k; r++) {
        const tb_rank_summary *s = &per_rank[r];
        v[r] = 100.0 * (s->phase_s[TB_PH_FWD] + s->phase_s[TB_PH_BWD] + s->phase_s[TB_PH_OPT]) / s->step_s;
    }
    row->device_util_pct = util_pct_or_neg >= 0 ? util_pct_or_neg : spread(v, k).median;
    for (int r = 0; r < k; r++) v[r] = 100.0 * per_rank[r].phase_s[TB_PH_COMM] / per_rank[r].step_s;
    row->comm_share_pct = spread(v, k).median;
    if (k > 1) {
        for (int r = 0; r < k; r++)
            v[r] = per_rank[r].comm_busy_s > 0
                       ? per_rank[r].comm_bytes / per_rank[r].comm_busy_s * 2.0 * (k - 1) / k * 1e-9
                       : 0;
        row->allreduce_busbw_GBps = spread(v, k).median;
    }
    free(v);
}

void tb_scaling_finish(tb_scaling_row *rows, int nrows) {
    for (int i = 0; i < nrows; i++) {
        rows[i].speedup = rows[0].img_per_s > 0 ? rows[i].img_per_s / rows[0].img_per_s : 0;
        rows[i].efficiency = rows[i].epoch_time_s > 0
                                 ? rows[0].epoch_time_s / (rows[i].ranks * rows[i].epoch_time_s)
                                 : 0;
    }
}

void tb_scaling_print_seed(FILE *f, const tb_scaling_row *rows, int nrows, double dataset_size,
                           const char *util_label) {
    const tb_scaling_row *one = &rows[0], *n = &rows[nrows - 1];
    char head_n[32], t_n[32], u_n[48], bw_n[32];
    snprintf(head_n, sizeof head_n, "%d ranks", n->ranks);
    snprintf(t_n, sizeof t_n, "%.1f s", n->epoch_time_s);
    snprintf(u_n, sizeof u_n, "%.0f %% (median)", n->device_util_pct);
    if (n->ranks > 1) snprintf(bw_n, sizeof bw_n, "%.2f GB/s", n->allreduce_busbw_GBps);
    else snprintf(bw_n, sizeof bw_n, "-");
    fprintf(f, "#\n# scaling (weak: %d samples per rank and step; epoch = %.0f samples)\n",
            one->global_batch, dataset_size);
    fprintf(f, "# %-28s %12s %18s  %s\n", "metric", "1 rank", head_n, "note");
    fprintf(f, "  %-28s %10.1f s %18s  scaling efficiency %.1f %% = %.1f / (%d x %.1f)\n",
            "epoch time", one->epoch_time_s, t_n, 100.0 * n->efficiency, one->epoch_time_s, n->ranks,
            n->epoch_time_s);
    fprintf(f, "  %-28s %10.0f %% %18s  %s\n", "mean device utilisation", one->device_util_pct, u_n,
            util_label);
    fprintf(f, "  %-28s %12s %18s  all-reduce bus bandwidth in training\n", "interconnect bandwidth", "-",
            bw_n);
}

void tb_scaling_print_full(FILE *f, const tb_scaling_row *rows, int nrows) {
    fprintf(f, "#\n# %5s %7s %9s %9s %7s %7s %10s %7s %9s %7s\n", "ranks", "gbatch", "img/s", "img/s/rk",
            "speedup", "eff %", "epoch s", "util %", "busbw", "comm %");
    fprintf(f, "# %5s %7s %9s %9s %7s %7s %10s %7s %9s %7s\n", "", "", "", "", "", "", "", "", "(GB/s)", "");
    for (int i = 0; i < nrows; i++) {
        const tb_scaling_row *r = &rows[i];
        fprintf(f, "  %5d %7d %9.2f %9.2f %7.2f %7.1f %10.1f %7.1f %9.3f %7.1f\n", r->ranks,
                r->global_batch, r->img_per_s, r->img_per_s_per_rank, r->speedup, 100.0 * r->efficiency,
                r->epoch_time_s, r->device_util_pct, r->allreduce_busbw_GBps, r->comm_share_pct);
    }
    fprintf(f, "#\n# step time by phase, ms per step: min / median / max over ranks\n");
    fprintf(f, "# %5s %22s", "ranks", "step");
    for (int p = 0; p < TB_PH_COUNT; p++) fprintf(f, " %22s", tb_phase_name[p]);
    fprintf(f, "\n");
    for (int i = 0; i < nrows; i++) {
        const tb_scaling_row *r = &rows[i];
        fprintf(f, "  %5d %7.1f/%6.1f/%7.1f", r->ranks, r->step_ms.min, r->step_ms.median, r->step_ms.max);
        for (int p = 0; p < TB_PH_COUNT; p++)
            fprintf(f, " %7.1f/%6.1f/%7.1f", r->phase_ms[p].min, r->phase_ms[p].median,
                    r->phase_ms[p].max);
        fprintf(f, "\n");
    }
}
