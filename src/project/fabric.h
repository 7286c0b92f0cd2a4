/* fabric.h - what the projection (projection.h) knows about the wires: an
 * alpha-beta description of the links inside a node and between nodes.
 *
 *   intra_bw_GBps  bus bandwidth one rank reaches to the other ranks of its
 *                  node, per direction (a ring's per-link rate: NVLink,
 *                  PCIe); alpha_intra_us its latency per ring step
 *   inter_bw_GBps  all of a node's network ports together, per direction
 *                  (8 x 400 Gb/s NDR = 400 GB/s); alpha_inter_us per step
 *   ranks_per_node ranks sharing one node's intra-node links and NICs
 *
 * A fabric comes from a named preset (tb_fabric_presets: datasheet rates,
 * each with its source), from a key = value file, from a fit of alpha and
 * 1/beta to measured all-reduce times (an allreduce-bench table, or the
 * buckets a training run timed), or from two of those joined with '+'
 * (the first gives the node, the second the network: nvlink4-h100+ndr400x8).
 *
 * The fit: a ring all-reduce of S bytes on n ranks takes
 *   t = 2(n-1) alpha + 2(n-1)/n S / B      (B = 1/beta = bus bandwidth)
 * which is linear in (alpha, beta); rows of (n, S, t) give both by least
 * squares weighted by 1/t^2 (relative errors, so 8-byte and 64-MB rows
 * count alike). */
#ifndef TB_FABRIC_H
#define TB_FABRIC_H

#include <stddef.h>

typedef struct {
    char name[96];
    char source[512];          /* where the numbers come from (printed) */
    int ranks_per_node;        /* 0: unknown (a single-node fabric: every rank in one node) */
    double intra_bw_GBps, alpha_intra_us;
    double inter_bw_GBps, alpha_inter_us;  /* 0: no network described */
    double base_us;            /* once per collective (NCCL's base latency; 0 for MPI's hosts) */
} tb_fabric;

typedef struct {
    const char *name;
    const char *what;          /* one line */
    tb_fabric f;
} tb_fabric_preset;

extern const tb_fabric_preset tb_fabric_presets[];
extern const int tb_fabric_npresets;

/* A measured all-reduce: n ranks, bytes per rank, seconds. */
typedef struct {
    int ranks;
    double bytes, seconds;
} tb_ar_sample;

typedef struct {
    double alpha_s;            /* latency per ring step */
    double beta_s_per_byte;    /* 1 / bus bandwidth */
    double bw_GBps;            /* 1e-9 / beta */
    double rms_rel, max_rel;   /* residuals relative to the measured time */
    int used;                  /* samples fitted */
} tb_ab_fit;

/* Least squares of the ring model over the samples (ranks >= 2, bytes > 0,
 * seconds > 0; others are skipped). Returns 0, or -1 with a line in err
 * when fewer than 2 usable samples remain. alpha is kept >= 0 (refit with
 * alpha = 0 when the free fit goes negative, and with only 2 samples,
 * which any pair would fit exactly). */
int tb_ab_fit_samples(const tb_ar_sample *s, int n, tb_ab_fit *out, char *err, size_t errlen);
/* The fitted ring time for n ranks and `bytes` (seconds). */
double tb_ab_fit_time(const tb_ab_fit *fit, int ranks, double bytes);

/* All-reduce samples from an allreduce-bench table: trainbench's own
 * console output or nccl-tests' (the header line that names "size" and
 * "time" columns, the "Rank N" lines for the rank count; time in us), or a
 * results file of `trainbench allreduce-bench --results` (/allreduce:
 * bytes, time_us; root attributes world_size, hostnames). *hosts gets the
 * number of distinct hosts (0 when unknown). Returns the sample count
 * (malloc'd in *out), or -1 with a line in err. */
int tb_fabric_read_bench(const char *path, tb_ar_sample **out, int *ranks, int *hosts, char *err,
                         size_t errlen);

/* The fabric that a fit describes: ranks_per_node = ranks / hosts of the
 * measurement; one rank per host gives the network rates (inter), more
 * than one on a single host the node rates (intra) of a node of the ranks
 * measured (no network: more ranks need --ranks-per-node, when one node
 * holds them, or a fabric with a network). */
void tb_fabric_from_fit(tb_fabric *f, const tb_ab_fit *fit, int ranks, int hosts, const char *what);

/* Resolves --fabric: a preset name, A+B, or a key = value file (keys
 * name, source, ranks_per_node, intra_bw_GBps, alpha_intra_us,
 * inter_bw_GBps, alpha_inter_us; '#' starts a comment). "fit:FILE" fits a
 * bench table (tb_fabric_read_bench). Returns 0, or -1 with one line in err. */
int tb_fabric_resolve(const char *spec, tb_fabric *f, char *err, size_t errlen);

/* Number of hosts in a results file's "hostnames" attribute ("a (2 ranks),
 * b (1 rank)" or "a, b"; a long one ending ", ... and K more" counts K for
 * that entry); 0 for an empty string. */
int tb_fabric_count_hosts(const char *hostnames);

/* "NDR 400 Gb/s x 8 per node: intra 450 GB/s / 3.4 us, ..." in buf. */
void tb_fabric_describe(const tb_fabric *f, char *buf, size_t len);

#endif
