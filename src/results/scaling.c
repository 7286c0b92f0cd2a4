/* scaling.c - rank summaries into scaling rows, and the two printed tables. */
#include "src/results/scaling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/device/device.h"
#include "src/results/table_print.h"

void tb_rank_summary_add(tb_rank_summary *s, const tb_step_record *r) {
    s->steps++;
    s->samples += r->n;
    for (int p = 0; p < TB_PH_COUNT; p++) s->phase_s[p] += r->phase[p];
    s->step_s += r->total;
    s->comm_busy_s += r->sync.busy_s;
    s->bcast_s += r->bcast_s;
    s->comm_bytes += r->sync.bytes;
    if (r->skipped_steps > s->skipped_steps) s->skipped_steps = r->skipped_steps;
    s->graph_steps += r->graph;
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
                         int batch_per_rank, double dataset_size, int cpu_backend) {
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
    int nvml = 1, gpm = 1, short_window = 0;
    for (int r = 0; r < k; r++) {
        nvml &= per_rank[r].util_samples > 0 && !per_rank[r].util_short;
        gpm &= per_rank[r].util_samples > 0 && !isnan(per_rank[r].sm_active_pct);
        short_window |= per_rank[r].util_short;
    }
    if (nvml)
        for (int r = 0; r < k; r++) v[r] = per_rank[r].util_pct;
    /* NVML's GPU-Util where every rank sampled it over a long enough window;
     * on the CPU backend the compute share above (v); otherwise none (a GPU
     * rank without NVML, or a row too short for it): never the compute
     * share under the device's name */
    row->device_util_pct = nvml ? spread(v, k).median : cpu_backend && !short_window ? spread(v, k).median : NAN;
    row->sm_active_pct = NAN;
    if (gpm) {
        for (int r = 0; r < k; r++) v[r] = per_rank[r].sm_active_pct;
        row->sm_active_pct = spread(v, k).median;
    }
    for (int r = 0; r < k; r++) v[r] = 1e3 * per_rank[r].comm_busy_s / per_rank[r].steps;
    row->comm_busy_ms = spread(v, k).median;
    row->exposed_comm_ms = row->phase_ms[TB_PH_COMM].median;
    for (int r = 0; r < k; r++) v[r] = 1e3 * per_rank[r].bcast_s / per_rank[r].steps;
    row->bcast_ms = spread(v, k).median;
    for (int r = 0; r < k; r++)
        if (per_rank[r].peak_mem_bytes / 1048576.0 > row->peak_mem_mb) row->peak_mem_mb = per_rank[r].peak_mem_bytes / 1048576.0;
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

const char *tb_scaling_util_label(const char *backend) {
    if (backend && strcmp(backend, "cpu") == 0)
        return "CPU: compute share of the step (forward+backward+optimizer)";
    return "device utilisation (median over ranks)";
}

/* "73 %", or "-" for a row whose utilisation was not measured (a window
 * too short for NVML's GPU-Util, src/device/nvml.h) */
static void util_cell(tb_tab *t, double pct, const char *suffix) {
    if (!isfinite(pct)) tb_tab_str(t, "-");
    else tb_tab_strf(t, "%.0f %%%s", pct, suffix);
}

/* "783.1 s", or "-" for a value a file read back lacks (it printed "nan s") or holds as inf */
static void unit_cell(tb_tab *t, double v, int decimals, const char *unit) {
    if (!isfinite(v)) tb_tab_str(t, "-");
    else tb_tab_strf(t, "%.*f%s", decimals, v, unit);
}

/* the note beside the utilisation: its source, and why a row has none */
static void util_note(tb_tab *t, const char *util_label, int missing) {
    if (!missing) tb_tab_str(t, util_label);
    else tb_tab_strf(t, "%s; '-': not sampled on every rank (a rank without NVML, or a row shorter than %.0f s, "
                     "too short for NVML's GPU-Util: raise --scaling-min-seconds)", util_label,
                     TB_NVML_UTIL_MIN_WINDOW_S);
}

/* One rank: no efficiency to show, so the table says what would give one. */
static void write_seed_one_rank(FILE *f, tb_format fmt, const tb_scaling_row *one, const char *title,
                                const char *util_label) {
    const tb_col cols[] = {
        {.head = "metric", .key = "metric", .width = 28, .left = 1},
        {.head = "1 rank", .key = "first_row", .width = 12},
        {.head = "note", .key = "note", .left = 1, .gap = 2},
    };
    tb_tab *t = tb_tab_new(fmt, title, cols, 3);
    tb_tab_str(t, "epoch time");
    unit_cell(t, one->epoch_time_s, 1, " s");
    tb_tab_str(t, "scaling efficiency needs 2 or more ranks: mpirun -np N trainbench");
    tb_tab_str(t, "mean device utilisation");
    util_cell(t, one->device_util_pct, "");
    util_note(t, util_label, !isfinite(one->device_util_pct));
    tb_tab_str(t, "interconnect bandwidth");
    tb_tab_str(t, "-");
    tb_tab_str(t, "all-reduce bus bandwidth in training (2 or more ranks)");
    tb_tab_print(t, f);
}

void tb_scaling_write_seed(FILE *f, tb_format fmt, const tb_scaling_row *rows, int nrows,
                           double dataset_size, const char *util_label) {
    if (nrows < 1) return;
    const tb_scaling_row *one = &rows[0], *n = &rows[nrows - 1];
    char title[160], head_1[32], head_n[32];
    snprintf(title, sizeof title, "scaling (weak: %d samples per rank and step; epoch = %.0f samples)",
             one->global_batch, dataset_size);
    if (nrows == 1 && one->ranks == 1) {
        write_seed_one_rank(f, fmt, one, title, util_label);
        return;
    }
    snprintf(head_1, sizeof head_1, "%d rank%s", one->ranks, one->ranks > 1 ? "s" : "");
    snprintf(head_n, sizeof head_n, "%d rank%s", n->ranks, n->ranks > 1 ? "s" : "");
    const tb_col cols[] = {
        {.head = "metric", .key = "metric", .width = 28, .left = 1},
        {.head = head_1, .key = "first_row", .width = 12},
        {.head = head_n, .key = "last_row", .width = 18},
        {.head = "note", .key = "note", .left = 1, .gap = 2},
    };
    tb_tab *t = tb_tab_new(fmt, title, cols, 4);
    tb_tab_str(t, "epoch time");
    unit_cell(t, one->epoch_time_s, 1, " s");
    unit_cell(t, n->epoch_time_s, 1, " s");
    if (!isfinite(n->efficiency) || !isfinite(one->epoch_time_s) || !isfinite(n->epoch_time_s))
        tb_tab_str(t, "scaling efficiency -: a row read from a file lacks a finite efficiency or epoch_time_s");
    else
        tb_tab_strf(t, "scaling efficiency %.1f %% = %.1f / (%d x %.1f)%s", 100.0 * n->efficiency,
                    one->epoch_time_s, n->ranks, n->epoch_time_s, n->efficiency > 1.0 ? " (super-linear)" : "");
    tb_tab_str(t, "mean device utilisation");
    util_cell(t, one->device_util_pct, "");
    util_cell(t, n->device_util_pct, " (median)");
    util_note(t, util_label, !isfinite(one->device_util_pct) || !isfinite(n->device_util_pct));
    tb_tab_str(t, "interconnect bandwidth");
    tb_tab_str(t, "-");
    unit_cell(t, n->allreduce_busbw_GBps, 2, " GB/s");
    tb_tab_str(t, "all-reduce bus bandwidth in training");
    tb_tab_print(t, f);
}

void tb_scaling_write_full(FILE *f, tb_format fmt, const tb_scaling_row *rows, int nrows) {
    const tb_col cols[] = {
        {.head = "ranks", .key = "ranks", .width = 5},
        {.head = "gbatch", .key = "global_batch", .width = 7},
        {.head = "img/s", .key = "img_per_s", .width = 9},
        {.head = "img/s/rk", .key = "img_per_s_per_rank", .width = 9},
        {.head = "speedup", .key = "speedup", .width = 7},
        {.head = "eff %", .key = "efficiency_pct", .width = 7},
        {.head = "epoch s", .key = "epoch_time_s", .width = 10},
        {.head = "util %", .key = "device_util_pct", .width = 7},
        {.head = "busbw", .unit = "GB/s", .key = "allreduce_busbw_GBps", .width = 9},
        {.head = "comm %", .key = "comm_share_pct", .width = 7},
    };
    tb_tab *t = tb_tab_new(fmt, "scaling, every row (efficiency = T1 / (N x TN), T = epoch time)", cols,
                           (int)(sizeof cols / sizeof cols[0]));
    for (int i = 0; i < nrows; i++) {
        const tb_scaling_row *r = &rows[i];
        tb_tab_int(t, r->ranks);
        tb_tab_int(t, r->global_batch);
        tb_tab_num(t, r->img_per_s, 2);
        tb_tab_num(t, r->img_per_s_per_rank, 2);
        tb_tab_num(t, r->speedup, 2);
        tb_tab_num(t, 100.0 * r->efficiency, 1);
        tb_tab_num(t, r->epoch_time_s, 1);
        tb_tab_num(t, r->device_util_pct, 1);
        tb_tab_num(t, r->allreduce_busbw_GBps, 3);
        tb_tab_num(t, r->comm_share_pct, 1);
    }
    tb_tab_print(t, f);

    /* a phase no row has a value for (a results file without the per-phase
     * columns) is left out */
    tb_col pcols[1 + 1 + TB_PH_COUNT];
    int np = 0, shown[TB_PH_COUNT];
    pcols[np++] = (tb_col){.head = "ranks", .key = "ranks", .width = 5};
    pcols[np++] = (tb_col){.head = "step", .key = "step_ms", .width = 22, .spread = 1};
    char keys[TB_PH_COUNT][48];
    for (int p = 0; p < TB_PH_COUNT; p++) {
        shown[p] = 0;
        for (int i = 0; i < nrows; i++) shown[p] |= !isnan(rows[i].phase_ms[p].median);
        snprintf(keys[p], sizeof keys[p], "%s_ms", tb_phase_name[p]);
        if (shown[p]) pcols[np++] = (tb_col){.head = tb_phase_name[p], .key = keys[p], .width = 22, .spread = 1};
    }
    t = tb_tab_new(fmt, "step time by phase, ms per step: min / median / max over ranks", pcols, np);
    for (int i = 0; i < nrows; i++) {
        const tb_scaling_row *r = &rows[i];
        tb_tab_int(t, r->ranks);
        tb_tab_spread(t, r->step_ms.min, r->step_ms.median, r->step_ms.max, 1);
        for (int p = 0; p < TB_PH_COUNT; p++)
            if (shown[p]) tb_tab_spread(t, r->phase_ms[p].min, r->phase_ms[p].median, r->phase_ms[p].max, 1);
    }
    tb_tab_print(t, f);
}

void tb_scaling_write_device(FILE *f, tb_format fmt, const tb_scaling_row *rows, int nrows) {
    const tb_col cols[] = {
        {.head = "ranks", .key = "ranks", .width = 5},
        {.head = "util %", .key = "device_util_pct", .width = 7},
        {.head = "SM act %", .key = "sm_active_pct", .width = 9},
        {.head = "comm busy", .unit = "ms", .key = "comm_busy_ms", .width = 10},
        {.head = "exposed", .unit = "ms", .key = "exposed_comm_ms", .width = 10},
        {.head = "overlap %", .key = "overlap_pct", .width = 9},
        {.head = "busbw", .unit = "GB/s", .key = "allreduce_busbw_GBps", .width = 9},
        {.head = "peak mem", .unit = "MiB", .key = "peak_mem_mb", .width = 10},
    };
    tb_tab *t = tb_tab_new(fmt,
                           "device and communication per step (util: NVML GPU-Util; SM act: GPM; busy: all-reduce "
                           "running; exposed: waited for, after backward and for the BN statistics broadcast; "
                           "overlap: the share of both hidden behind compute)",
                           cols, (int)(sizeof cols / sizeof cols[0]));
    for (int i = 0; i < nrows; i++) {
        const tb_scaling_row *r = &rows[i];
        tb_tab_int(t, r->ranks);
        tb_tab_num(t, r->device_util_pct, 1);
        tb_tab_num(t, r->sm_active_pct, 1);
        tb_tab_num(t, r->comm_busy_ms, 2);
        tb_tab_num(t, r->exposed_comm_ms, 2);
        double comm = r->comm_busy_ms + r->bcast_ms; /* all the communication the exposed time is part of */
        tb_tab_num(t, r->comm_busy_ms > 0 ? 100.0 * (1.0 - r->exposed_comm_ms / comm) : NAN, 1);
        tb_tab_num(t, r->allreduce_busbw_GBps, 3);
        tb_tab_num(t, r->peak_mem_mb, 0);
    }
    tb_tab_print(t, f);
}

void tb_scaling_print_seed(FILE *f, const tb_scaling_row *rows, int nrows, double dataset_size,
                           const char *util_label) {
    tb_scaling_write_seed(f, TB_FMT_TEXT, rows, nrows, dataset_size, util_label);
}

void tb_scaling_print_full(FILE *f, const tb_scaling_row *rows, int nrows) {
    tb_scaling_write_full(f, TB_FMT_TEXT, rows, nrows);
}

void tb_rank_row_from(tb_rank_row *row, const tb_rank_summary *s, int rank, const char *host) {
    memset(row, 0, sizeof *row);
    double ns = s->steps > 0 ? s->steps : 1;
    row->rank = rank;
    row->steps = s->steps;
    row->samples = s->samples;
    row->img_per_s = s->elapsed_s > 0 ? s->samples / s->elapsed_s : 0;
    row->step_ms = 1e3 * s->step_s / ns;
    for (int p = 0; p < TB_PH_COUNT; p++) row->phase_ms[p] = 1e3 * s->phase_s[p] / ns;
    snprintf(row->host, sizeof row->host, "%s", host ? host : "");
}

void tb_rank_rows_write(FILE *f, tb_format fmt, const tb_rank_row *rows, int n) {
    int with_host = 0;
    for (int r = 0; r < n; r++) with_host |= rows[r].host[0] != '\0';
    tb_col cols[4 + TB_PH_COUNT];
    int nc = 0;
    char keys[TB_PH_COUNT][48];
    cols[nc++] = (tb_col){.head = "rank", .key = "rank", .width = 5};
    cols[nc++] = (tb_col){.head = "step", .key = "step_ms", .width = 9};
    for (int p = 0; p < TB_PH_COUNT; p++) {
        snprintf(keys[p], sizeof keys[p], "%s_ms", tb_phase_name[p]);
        cols[nc++] = (tb_col){.head = tb_phase_name[p], .key = keys[p], .width = 9};
    }
    cols[nc++] = (tb_col){.head = "img/s", .key = "img_per_s", .width = 9};
    if (with_host) cols[nc++] = (tb_col){.head = "host", .key = "host", .left = 1, .gap = 2};
    tb_tab *t = tb_tab_new(fmt, "training run, ms per step by rank (timed steps only; img/s: the rank's own samples)", cols, nc);
    for (int r = 0; r < n; r++) {
        const tb_rank_row *s = &rows[r];
        if (s->steps == 0) continue;
        tb_tab_int(t, s->rank);
        tb_tab_num(t, s->step_ms, 2);
        for (int p = 0; p < TB_PH_COUNT; p++) tb_tab_num(t, s->phase_ms[p], 2);
        tb_tab_num(t, s->img_per_s, 2);
        if (with_host) tb_tab_str(t, s->host);
    }
    tb_tab_print(t, f);
}
