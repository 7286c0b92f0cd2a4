/* graph.h - a network as a list of nodes over activation tensors, executed
 * forward and backward through the backend table.
 *
 * The forward pass is one loop over nodes; the backward pass is the same loop
 * reversed. Gradients of a tensor read by several nodes (a residual block's
 * input) are summed by the accumulate flag: the first node to write a
 * gradient overwrites it, later ones add.
 *
 * Memory is planned on the host before anything is allocated
 * (tb_graph_plan_memory): the activation side is ONE allocation (every
 * activation at the largest batch, each BatchNorm's saved statistics and
 * the reserve space its backend plan asked for), and the gradients share a
 * second arena whose offsets come from their lifetimes in the backward
 * pass. */
#ifndef TB_GRAPH_H
#define TB_GRAPH_H

#include "model/backend.h"
#include "model/op_profile.h"
#include "model/params.h"

typedef enum {
    TB_NODE_CONV,    /* out = conv(in, weight)                       */
    TB_NODE_BN,      /* out = act(bn(in) + in2), in2 optional          */
    TB_NODE_RELU,    /* out = max(in, 0)                              */
    TB_NODE_ADD,     /* out = in + in2                                */
    TB_NODE_MAXPOOL, /* out = maxpool(in)                             */
    TB_NODE_AVGPOOL, /* out[N,C,1,1] = mean_hw(in)                    */
    TB_NODE_LINEAR,  /* out[N,M] = in[N,K] W^T + b                    */
} tb_node_kind;

/* --fuse graph: what becomes of a BatchNorm node (model/graph_fused.c).
 * UNFUSED: its own bn_forward_train / bn_backward, as without fusion.
 * APPLY: statistics from its conv's epilogue, bn_finalize, then bn_apply
 *        writes its output (a block's end with the residual, the stem).
 * FOLD:  statistics from its conv; no output written: the next conv reads
 *        relu(x * scale + bias) in its prologue, and that conv's backward
 *        makes this node's gradients.
 * ZFOLD: statistics from its conv (a shortcut's BN without ReLU); no output
 *        written: the block end's bn_apply adds z * scale + bias. */
typedef enum { TB_BNF_UNFUSED = 0, TB_BNF_APPLY, TB_BNF_FOLD, TB_BNF_ZFOLD } tb_bn_fuse_mode;

typedef struct {
    tb_node_kind kind;
    char name[TB_PARAM_NAME_MAX]; /* module path, e.g. "layer2.0.downsample.1" */
    int in, in2;                  /* activation ids (in2 = -1: none) */
    int out;
    int relu;                     /* BN: ReLU fused after the (add and) affine */
    int param;                    /* first parameter: conv/fc weight, BN gamma; -1 none.
                                     BN: beta = +1, running_mean +2, running_var +3,
                                     num_batches_tracked +4. LINEAR: bias = +1 */
    tb_conv_geom conv;
    tb_pool_geom pool;
    void *plan;                   /* backend's conv or BN plan */
    tb_real *save_mean;           /* BN [C] batch mean (device) */
    tb_real *save_invstd;         /* BN [C] batch 1/std (device) */
    void *reserve;                /* BN: what the plan keeps from forward to backward */
    size_t reserve_bytes;         /* BN: asked for by bn_plan (0: none; --fuse fastest: the
                                     larger of its two plans') */
    int plan_fcand;               /* BN: the fcand its plan was made for (tb_graph_bn_args:
                                     stats_elsewhere, y_in_consumer) */
    void *plan_alt;               /* BN, --fuse fastest: a plan for running it unfused
                                     (made for TB_BNF_UNFUSED), until the timing chose */
    int has_plan_alt;             /* plan_alt was made (NULL is a valid plan: the CPU's) */
    size_t state_offset;          /* BN: planned offset of save_mean (then save_invstd,
                                     then reserve) in the activation arena */
    size_t reserve_offset;        /* BN: planned offset of its reserve space (after the state) */
    /* --fuse graph (model/graph_fused.c) */
    int fcand;                    /* BN: the tb_bn_fuse_mode the node list allows */
    int fmode;                    /* BN: the mode it runs in (fcand, or less where the
                                     backend has no engine, or, under --fuse fastest,
                                     where the fused ops measured slower) */
    int ftimed;                   /* BN, --fuse fastest (graph_fused_time.c): bit 0 its fold
                                     was timed (ftime_ms[0]: folded, applied), bit 1 its
                                     statistics (ftime_ms[1]: fused, unfused) */
    double ftime_ms[2][2];
    int fpeer;                    /* BN FOLD: the conv that reads it; ZFOLD: the block-end
                                     BN that adds it; -1 none */
    int fstats;                   /* BN: the conv whose epilogue makes its statistics */
    int fconv;                    /* CONV: runs as the backend's fused op (fconv_forward) */
    void *fplan;                  /* CONV: its fused plan (NULL is valid: the CPU's) */
    int fpro;                     /* CONV: the BN folded into its prologue, or -1 */
    tb_real *fsum, *fsqsum;       /* BN [C]: its conv's sum and sum of squares (device) */
    tb_real *fscale, *fbias;      /* BN [C]: bn_finalize's affine (device) */
} tb_node;

typedef struct {
    int c, h, w;                  /* per-sample shape; N is the batch of the call */
    size_t bytes_per_sample;
    void *data;                   /* device [Nmax,c,h,w] in the activation arena */
    size_t data_offset;           /* planned offset in the activation arena */
    void *grad;                   /* device [Nmax,c,h,w] in the gradient arena; NULL
                                     when no gradient is needed (the input image) */
    int producer;                 /* node index; -1 for the graph input */
    int need_grad;
    size_t grad_offset;           /* planned offset in the gradient arena */
} tb_act;

typedef struct {
    tb_node *nodes;
    int nnodes, nodes_cap;
    tb_act *acts;
    int nacts, acts_cap;
    int input, output;            /* activation ids of image and logits */
    int max_batch;
    tb_dtype dtype;
    tb_layout layout;
    int fuse_graph;               /* --fuse graph: conv + BatchNorm fusion (graph_fused.c) */
    int fuse_timed;               /* --fuse fastest: fused per BatchNorm where timed faster
                                     (graph_fused_time.c) */
    /* device memory owned by the graph */
    void *act_arena;
    size_t act_arena_bytes;       /* planned: activations + BN state + BN reserves */
    size_t act_bytes;             /* of which activations */
    size_t bn_state_bytes;        /* of which saved BN statistics */
    size_t bn_reserve_bytes;      /* of which BN reserve space */
    void *grad_arena;
    size_t grad_arena_bytes;      /* planned */
    size_t grad_bytes_unplanned;  /* what one buffer per tensor would take */
    unsigned char *grad_written;  /* [nacts] host scratch for backward */
    tb_op_prof *prof;             /* --op-profile: times every op of forward and backward
                                     (and the model's own, model.c); NULL: off */
    int wgrad_branches;           /* convs whose weight gradient went to the backend's
                                     second queue (be->branch_begin) in the last backward
                                     that sent any there (the op profile's steps send none) */
    int wgrad_branching;          /* the same, counted during the current backward */
    /* the weight gradients' conversions into the float32 flat gradients
     * (tb_graph_weight_grad_to_flat) waiting for the end of a backward
     * that has no grad-ready hook: there they run as one convert_many
     * ("weight_grads" in the op profile); with a hook, each runs when its
     * gradient is made, before the hook hands the range over */
    tb_tensor *gc_src, *gc_dst;   /* [gc_cap] op gradient, flat gradient */
    int gc_n, gc_cap, gc_defer;
} tb_graph;

/* Where the parameters live (device pointers) when the graph runs. */
typedef struct {
    const tb_param_table *table;
    tb_real *params;              /* [n_train] master weights (the op weights in fp32) */
    tb_real *grads;               /* [n_train] */
    tb_real *state;               /* [n_state] BN running statistics */
    int64_t *counters;            /* [n_counters] host: num_batches_tracked */
    /* Conv and fc weights in the op dtype and layout, at the flat offsets
     * (element i of the flat buffer is element i here, in the op dtype);
     * NULL when the ops read the flat tb_real NCHW buffers directly. The
     * model refreshes op_params from params; backward writes the weight
     * gradients into op_grads and converts them into grads. */
    void *op_params;
    void *op_grads;
} tb_graph_params;

/* Called by backward once the gradients of one node's parameters have been
 * QUEUED: [offset, offset + count) of the flat gradient buffer is final in
 * stream order, not necessarily yet on the device. The hook runs on the
 * host in stream order, so a caller that hands the range to communication
 * records an event on the compute stream inside the hook and lets the
 * communication stream wait for it (or polls it); only when that event has
 * completed are the gradients in memory. (On the CPU backend the op has
 * finished when the hook runs.) */
typedef void (*tb_grad_ready_fn)(void *ctx, size_t offset, size_t count);

/* ---- building (model/resnet.c) --------------------------------------------- */
int tb_graph_add_act(tb_graph *g, int c, int h, int w);
int tb_graph_add_node(tb_graph *g, const tb_node *n);

/* ---- memory and execution ----------------------------------------------------- */
/* The memory plan, on the host only: activation offsets, BN state and
 * reserve offsets (each node's reserve_bytes must be set), the gradient
 * arena's offsets, and every *_bytes total of the graph. */
void tb_graph_plan_memory(tb_graph *g, const tb_param_table *pt);
/* The host memory the first step will still write: the activation and
 * gradient arenas where be's memory is the host's (the CPU backend; they
 * are allocated unwritten, core/host_memory.h says why that matters), 0 on
 * a device. */
size_t tb_graph_host_bytes_unwritten(const tb_graph *g, tb_backend *be);
/* Asks the backend for BN plans (their reserve sizes), plans the memory,
 * allocates the two arenas, then asks for conv plans on the real buffers:
 * p's parameter and gradient buffers must exist already. */
void tb_graph_allocate(tb_graph *g, tb_backend *be, const tb_graph_params *p);
void tb_graph_free(tb_graph *g, tb_backend *be);

/* Device view of activation `id` (or its gradient) for a batch of n. */
tb_tensor tb_graph_act(const tb_graph *g, int id, int n);
tb_tensor tb_graph_grad(const tb_graph *g, int id, int n);

void tb_graph_forward(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, int train);
/* The conv/fc weight of param index i as the ops see it (op buffers when
 * p has them), or its gradient. */
tb_tensor tb_graph_weight(const tb_graph *g, const tb_graph_params *p, int i);
tb_tensor tb_graph_weight_grad(const tb_graph *g, const tb_graph_params *p, int i);
/* Expects the gradient of the output (logits) to be written already. */
void tb_graph_backward(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n,
                       tb_grad_ready_fn ready, void *ready_ctx);

/* ---- the parts model/graph_fused.c shares --------------------------------------- */
/* One node's forward / backward as the unfused graph runs it. */
void tb_graph_forward_node(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, int train, int i);
void tb_graph_backward_node(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, int i,
                            tb_grad_ready_fn ready, void *ready_ctx);
/* The gradient of activation id as an output: 0 when none is needed; else
 * *t and *acc (1: an earlier node wrote it, add), and it counts as written. */
int tb_graph_grad_target(tb_graph *g, int id, int n, tb_tensor *t, int *acc);
/* A BN node's op arguments for a batch of n (x, z, y filled in). */
void tb_graph_bn_args(const tb_graph *g, const tb_node *nd, const tb_graph_params *p, int n, tb_tensor *x,
                      tb_tensor *z, tb_tensor *y, tb_bn_args *a);
/* A weight gradient written into the op buffer, converted into the flat
 * one: now, or at the end of a backward without a grad-ready hook (gc_*). */
void tb_graph_weight_grad_to_flat(tb_graph *g, tb_backend *be, const tb_graph_params *p,
                                  const tb_param *pw, const tb_tensor *dw, tb_op_phase phase);
/* A conv's weight gradient beside its data gradient (backend.h branch_*),
 * for conv_backward (graph.c) and conv_backward_fused (graph_fused.c):
 * wgrad_begin before the weight gradient's ops gives 1 when they go to the
 * backend's second queue (never while the op profile times each op
 * alone); wgrad_end after them ends the branch, or, in order, hands the
 * range of pw over to the ready hook now; wgrad_join after the ops queued
 * beside the branch joins it and then hands the range over (the hook's
 * event then follows the weight gradient). */
int tb_graph_wgrad_begin(tb_graph *g, tb_backend *be);
void tb_graph_wgrad_end(tb_backend *be, int side, const tb_param *pw, tb_grad_ready_fn ready, void *ready_ctx);
void tb_graph_wgrad_join(tb_graph *g, tb_backend *be, int side, const tb_param *pw, tb_grad_ready_fn ready,
                         void *ready_ctx);
/* tb_real [C] values each BN node keeps in the activation arena: save_mean
 * and save_invstd, and with --fuse graph sum, sqsum, scale and bias. */
static inline size_t tb_graph_bn_state_count(const tb_graph *g) { return g->fuse_graph ? 6 : 2; }
/* The node whose backward step runs node i's backward: i, or for a BN that
 * --fuse graph may fold into the next conv (fcand FOLD), that conv. */
static inline int tb_graph_bwd_node(const tb_graph *g, int i) {
    const tb_node *nd = &g->nodes[i];
    return g->fuse_graph && nd->kind == TB_NODE_BN && nd->fcand == TB_BNF_FOLD ? nd->fpeer : i;
}

#endif
