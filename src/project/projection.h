/* projection.h - what N ranks should reach, from one rank's measured step
 * and a fabric (fabric.h): the alpha-beta cost of each gradient bucket's
 * all-reduce, the part of it left exposed after the backward pass, the step
 * time, img/s and weak-scaling efficiency.
 *
 * All-reduce of S bytes on n ranks, m = ceil(n / ranks_per_node) nodes of
 * p ranks, B = bus bandwidth (per direction), alpha per step, each plus the
 * fabric's base latency once (NCCL's baseLatencies; 0 on MPI's hosts):
 *   ring  2(n-1)/n S / B_ring + (2(n-1) - 2(m-1)) alpha_intra + 2(m-1) alpha_inter
 *         B_ring = intra (one node) or min(intra, network per node): a flat
 *         ring crosses every node boundary once per channel, so each node's
 *         NICs carry 2(n-1)/n S in each direction
 *   tree  2 S / B_ring + 2 ((p-1) alpha_intra + floor(log2 m) alpha_inter)
 *         (NCCL's double binary tree: algorithm bandwidth B/2, a chain
 *         inside the node, a tree across nodes)
 *   hier  2(p-1)/p S / B_intra + 2(m-1)/m S / B_net
 *         + 2(p-1) alpha_intra + 2(m-1) alpha_inter
 *         (reduce-scatter in the node, all-reduce of 1/p across nodes on
 *         all NICs at once, all-gather in the node; only when m > 1, p > 1;
 *         a two-level all-reduce, as Horovod's hierarchical one, that NCCL
 *         does not run: asked for by algo=hier, never chosen by auto)
 * The step and latency terms follow NCCL's own tuning model
 * (src/graph/tuning.cc: ring nsteps 2(n-1) with 2(nNodes-1) of them on the
 * network; tree 2((p-1) intra + log2(nNodes) inter)). busbw = algbw x
 * 2(n-1)/n as nccl-tests reports it, so a ring's busbw is B_ring.
 *
 * A fabric with ranks in a node needs its intra-node link (hops inside a
 * node are not free). Buckets of no bytes cost nothing.
 *
 * Overlap: buckets are cut from the gradient ranges as comm/grad_sync.c
 * cuts them (whole ranges accumulated from the end of the flat buffer until
 * a bucket reaches the cap; the first bucket cut, DDP-style, at the first
 * bucket's cap; bf16 on the wire halves each bucket's bytes, not the cut,
 * as comm/grad_sync_dev.c does) and become ready when backward has finished
 * their last range. They are launched in one fixed order, last layers first
 * (every rank must issue the collectives in the same order), each when it
 * is ready and the one before it has been launched; one communication
 * stream or thread runs them one after the other, so bucket i starts at
 * max(ready_i, end_{i-1}). With overlap off they all start when backward
 * ends. exposed = how long the last one ends after backward.
 *
 * Step: the 1-rank step (data + h2d + forward + backward + optimizer + the
 * loop's own overhead, compute scaled by batch_scale except the optimizer)
 * + exposed + the BatchNorm statistics broadcast before each forward.
 * efficiency = step(1) / step(N) (weak scaling: T1 / (N x TN)).
 *
 * Shared device (share = s > 1, min(s, N) ranks per device, as
 * `--share-gpu` runs them): the device time-slices between the ranks'
 * processes, so a rank's step holds the compute of all s (s x the 1-rank
 * step), and the all-reduces do not overlap it: one rank's NCCL kernel can
 * only finish once its peer's process holds the device, so every bucket
 * costs its full time after the compute (overlap off, serialized). */
#ifndef TB_PROJECTION_H
#define TB_PROJECTION_H

#include "src/project/fabric.h"

/* A slice of the flat gradient buffer and when backward finished it. */
typedef struct {
    double offset, bytes;      /* bytes into the buffer */
    double ready_s;            /* from the start of backward */
} tb_grad_range;

/* One rank's step, the projection's input. */
typedef struct {
    char what[512];            /* where it comes from (printed) */
    char ready_source[160];    /* how the ready times were obtained */
    double batch;              /* samples per rank and step */
    double data_s, h2d_s, forward_s, backward_s, optimizer_s;
    double step_s;             /* >= the phases' sum; the rest is loop overhead */
    double grad_bytes;         /* all-reduced per step */
    double state_bytes;        /* BN statistics broadcast per step (0: none) */
    double bucket_bytes;       /* the run's bucket cap */
    double first_bucket_bytes; /* the run's first bucket cap (0: bucket_bytes) */
    int overlap;               /* the run overlapped buckets with backward */
    int bn_broadcast;          /* the run broadcast the BN statistics before every forward */
    double wire_scale;         /* bytes on the wire per gradient byte (0.5: --allreduce-dtype bf16; 0: 1) */
    tb_grad_range *ranges;     /* in the order backward finished them */
    int nranges;
} tb_proj_profile;

void tb_proj_profile_free(tb_proj_profile *p);

typedef enum { TB_AR_AUTO, TB_AR_RING, TB_AR_TREE, TB_AR_HIER } tb_ar_algo;
const char *tb_ar_algo_name(tb_ar_algo a);
/* "auto|ring|tree|hier"; 0, or -1 */
int tb_ar_algo_parse(const char *s, tb_ar_algo *a);

typedef struct {
    int nodes, per_node;       /* m and p */
    double ring_s, tree_s, hier_s;  /* hier NAN on one node or one rank per node */
    tb_ar_algo best;           /* the faster of ring and tree, NCCL's choice */
    double best_s;
} tb_ar_cost;

/* The all-reduce of `bytes` on n ranks. Returns 0, or -1 with a line in
 * err when the fabric cannot carry it (more ranks than one node and no
 * network described). */
int tb_allreduce_cost(const tb_fabric *f, int n, double bytes, tb_ar_cost *c, char *err, size_t errlen);
/* The time of algorithm a (AUTO: the best of ring and tree). */
double tb_ar_cost_time(const tb_ar_cost *c, tb_ar_algo a);
/* Broadcast as NCCL runs it (ring only, src/graph/tuning.cc): a pipelined
 * chain from the root, base + (n-m) alpha_intra + (m-1) alpha_inter +
 * S / B_ring. Every hop's latency counts (the last rank's first chunk
 * passes n-1 ranks); NCCL's own model charges one hop where its channels
 * are alike, but broadcast has no other algorithm for that to choose.
 * MPI's binomial tree, ceil(log2 n) (alpha + S/B), is faster at many ranks
 * for small S: for the CPU backend's MPI_Bcast this is an upper bound. */
double tb_bcast_cost(const tb_fabric *f, int n, double bytes);
/* The ring's bus bandwidth on n ranks (GB/s): the node's links on one
 * node, else the slower of them and the network per node; NAN when the
 * fabric cannot carry n ranks. */
double tb_fabric_ring_busbw_GBps(const tb_fabric *f, int n);
/* nccl-tests: algbw x 2(n-1)/n, in GB/s. */
double tb_busbw_GBps(int n, double bytes, double seconds);

typedef struct {
    double bucket_bytes;       /* bucket cap */
    double first_bucket_bytes; /* the first bucket's cap (0 or >= bucket_bytes: bucket_bytes) */
    double byte_scale;         /* 1; 0.5 for bf16 gradients */
    double batch_scale;        /* per-rank batch x this: compute and ready times scale */
    int overlap;
    int bn_broadcast;          /* the BN statistics broadcast before every forward */
    tb_ar_algo algo;
    int share;                 /* ranks time-slicing one device (--share-gpu); 0 or 1: a device each */
} tb_proj_knobs;

/* The knobs of the profiled run itself. */
tb_proj_knobs tb_proj_knobs_of(const tb_proj_profile *p);
/* Ranks per device at `ranks` ranks under k: min(share, ranks), 1 when
 * each rank has its own device. */
int tb_proj_share(const tb_proj_knobs *k, int ranks);

typedef struct {
    double offset, bytes;      /* bytes after byte_scale */
    double ready_s, start_s, end_s;  /* from the start of backward */
    tb_ar_cost cost;
    double cost_s;             /* of the algorithm used */
} tb_proj_bucket;

/* The buckets of the profile under the knobs, in launch order (descending
 * offset: last layers first), with ready times; costs and times zero.
 * Returns the count; *out malloc'd. */
int tb_proj_buckets(const tb_proj_profile *p, const tb_proj_knobs *k, tb_proj_bucket **out);
/* Launches the buckets in order (cost_s and ready_s set): fills start_s
 * and end_s; returns the exposed time after backward_end_s. */
double tb_proj_schedule(tb_proj_bucket *b, int n, double backward_end_s, int overlap);

typedef struct {
    int ranks, nodes, buckets;
    double compute_s;          /* the 1-rank step at the knobs' batch */
    double comm_s;             /* summed bucket all-reduce times */
    double exposed_s, bcast_s;
    double step_s, img_per_s, efficiency;
    double busbw_GBps;         /* of the summed all-reduce time */
    tb_ar_algo algo;           /* used for the largest bucket */
} tb_proj_result;

/* One projection. buckets (may be NULL) receives the schedule, malloc'd,
 * in launch order. Returns 0, or -1 with a line in err. */
int tb_project(const tb_proj_profile *p, const tb_fabric *f, int ranks, const tb_proj_knobs *k,
               tb_proj_result *r, tb_proj_bucket **buckets, char *err, size_t errlen);

/* The factor by which the fabric's bandwidths must be multiplied for the
 * projection to reach efficiency `eff` at `ranks` (bisection; < 1 means the
 * measured run reached less than the fabric allows). NAN when no bandwidth
 * gets there (the latencies alone cost more) or eff >= what infinite
 * bandwidth gives. */
double tb_proj_bandwidth_factor(const tb_proj_profile *p, const tb_fabric *f, int ranks,
                                const tb_proj_knobs *k, double eff);

#endif
