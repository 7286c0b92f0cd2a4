/* scaling.h - per-rank step summaries, and the 1-vs-N scaling table built
 * from them (the headline of docs/SEEDS.md section 1).
 *
 * Every row comes from the same procedure: the first k ranks train with the
 * same per-rank batch for warm-up + timed steps while the others wait
 * (weak scaling). For a row of k ranks:
 *   img/s        = samples of all k ranks / slowest rank's wall time
 *   speedup      = img/s(k) / img/s(1)
 *   efficiency   = T(1) / (k * T(k)), T = epoch time = dataset / img/s
 *   device util  = median over ranks of compute (fwd+bwd+opt) / step time
 *                  (CPU backend); NVML GPU-Util over the timed steps on GPUs
 *                  (SM activity beside it, on Hopper: GPM)
 *   busbw        = all-reduce bytes * 2(k-1)/k / time inside all-reduce
 *   comm share   = median over ranks of exposed all-reduce / step time
 *   comm busy    = median over ranks of the all-reduce's running time per
 *                  step (overlapped or not); exposed = what the step waited
 *
 * The tables are printed by the functions below from rows that the live run
 * (tb_scaling_row_from, tb_rank_row_from) and `trainbench report` (from the
 * results file, results_read.h) fill alike, so both print the same table in
 * text, markdown or CSV (table_print.h). A NaN in a row prints as "-". */
#ifndef TB_SCALING_H
#define TB_SCALING_H

#include <stdio.h>

#include "src/results/step_phases.h"
#include "src/results/table_print.h"

/* One rank's timed steps. */
typedef struct {
    int steps;
    double samples;                 /* this rank's samples */
    double phase_s[TB_PH_COUNT];    /* summed */
    double step_s;                  /* summed step times */
    double elapsed_s;               /* wall time of the timed stretch */
    double comm_busy_s, comm_bytes; /* inside all-reduce calls */
    double bcast_s;                 /* the BatchNorm statistics broadcasts (in the allreduce phase) */
    /* the device (zeros on the CPU backend) */
    int util_samples;               /* NVML samples behind the two below (0: none) */
    int util_short;                 /* NVML read, but the window was shorter than
                                       TB_NVML_UTIL_MIN_WINDOW_S: util_pct NaN */
    double util_pct, sm_active_pct; /* mean GPU-Util and GPM SM activity (NaN: no GPM) */
    double peak_mem_bytes;          /* the backend's peak allocation */
    int skipped_steps;              /* fp16 updates skipped for overflow (device counter) */
    int graph_steps;                /* steps replayed from a CUDA graph */
    double cpu_s;                   /* process CPU time over the timed stretch (all threads) */
    double loader_cpu_s;            /* of it, the JPEG loader's threads (0: no loader) */
} tb_rank_summary;

void tb_rank_summary_add(tb_rank_summary *s, const tb_step_record *r);

typedef struct {
    double min, median, max;
} tb_spread;

typedef struct {
    int ranks, global_batch;
    double img_per_s, img_per_s_per_rank, speedup, efficiency;
    double epoch_time_s, device_util_pct, allreduce_busbw_GBps, comm_share_pct;
    double sm_active_pct;           /* median GPM SM activity (NaN: none) */
    double comm_busy_ms, exposed_comm_ms; /* medians per step */
    double bcast_ms;                /* median per step: the BN statistics broadcast, part of exposed_comm_ms */
    double peak_mem_mb;             /* the largest rank's */
    tb_spread step_ms;
    tb_spread phase_ms[TB_PH_COUNT];
} tb_scaling_row;

/* Fills a row from the k summaries of its ranks (rank 0 only). Its
 * device_util_pct: NVML's GPU-Util where every rank sampled it; with
 * cpu_backend the compute share of the step (forward+backward+optimizer);
 * else NaN (not measured). */
void tb_scaling_row_from(tb_scaling_row *row, const tb_rank_summary *per_rank, int k,
                         int batch_per_rank, double dataset_size, int cpu_backend);
/* Speedup and efficiency against rows[0] (which must be the 1-rank row). */
void tb_scaling_finish(tb_scaling_row *rows, int nrows);

/* The seed's shape: metric x 1 rank x N ranks, with the formula's inputs.
 * util_label: what "device utilisation" measures (tb_scaling_util_label). */
void tb_scaling_write_seed(FILE *f, tb_format fmt, const tb_scaling_row *rows, int nrows,
                           double dataset_size, const char *util_label);
/* Every row, every column; then the per-phase breakdown (min/median/max). */
void tb_scaling_write_full(FILE *f, tb_format fmt, const tb_scaling_row *rows, int nrows);
/* The text renderings of the two (the live run's console output). */
void tb_scaling_print_seed(FILE *f, const tb_scaling_row *rows, int nrows, double dataset_size,
                           const char *util_label);
void tb_scaling_print_full(FILE *f, const tb_scaling_row *rows, int nrows);
/* What the utilisation column measures on a backend ("cpu": the compute
 * share of the step). */
const char *tb_scaling_util_label(const char *backend);
/* The device and communication columns of every row (GPU runs print it
 * after the notes): SM activity, all-reduce busy and exposed ms, peak
 * memory. */
void tb_scaling_write_device(FILE *f, tb_format fmt, const tb_scaling_row *rows, int nrows);

/* One rank of the training run: ms per timed step by phase (the /ranks
 * table of the results file). */
typedef struct {
    int rank, steps;
    double samples, img_per_s, step_ms;
    double phase_ms[TB_PH_COUNT];
    char host[64];
} tb_rank_row;

void tb_rank_row_from(tb_rank_row *row, const tb_rank_summary *s, int rank, const char *host);
/* "training run, ms per step by rank": ranks without timed steps are left
 * out; a host column when any row names one. */
void tb_rank_rows_write(FILE *f, tb_format fmt, const tb_rank_row *rows, int n);

#endif
