/* graph.h - a network as a list of nodes over activation tensors, executed
 * forward and backward through the backend table.
 *
 * The forward pass is one loop over nodes; the backward pass is the same loop
 * reversed. Gradients of a tensor read by several nodes (a residual block's
 * input) are summed by the accumulate flag: the first node to write a
 * gradient overwrites it, later ones add. Gradient buffers share one arena
 * whose offsets are planned from their lifetimes in the backward pass. */
#ifndef TB_GRAPH_H
#define TB_GRAPH_H

#include "model/backend.h"
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
    void *plan;                   /* backend's conv plan */
    tb_real *save_mean;           /* BN [C] batch mean (device) */
    tb_real *save_invstd;         /* BN [C] batch 1/std (device) */
} tb_node;

typedef struct {
    int c, h, w;                  /* per-sample shape; N is the batch of the call */
    size_t bytes_per_sample;
    void *data;                   /* device [Nmax,c,h,w] */
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
    /* device memory owned by the graph */
    void *act_arena;
    size_t act_arena_bytes;
    void *grad_arena;
    size_t grad_arena_bytes;      /* planned */
    size_t grad_bytes_unplanned;  /* what one buffer per tensor would take */
    unsigned char *grad_written;  /* [nacts] host scratch for backward */
} tb_graph;

/* Where the parameters live (device pointers) when the graph runs. */
typedef struct {
    const tb_param_table *table;
    tb_real *params;              /* [n_train] master weights (the op weights in fp32) */
    tb_real *grads;               /* [n_train] */
    tb_real *state;               /* [n_state] BN running statistics */
    int64_t *counters;            /* [n_counters] host: num_batches_tracked */
} tb_graph_params;

/* Called after backward has written the gradients of one node's parameters:
 * [offset, offset + count) of the flat gradient buffer is final. */
typedef void (*tb_grad_ready_fn)(void *ctx, size_t offset, size_t count);

/* ---- building (model/resnet.c) --------------------------------------------- */
int tb_graph_add_act(tb_graph *g, int c, int h, int w);
int tb_graph_add_node(tb_graph *g, const tb_node *n);

/* ---- memory and execution ----------------------------------------------------- */
/* Allocates activations and the planned gradient arena for batch max_batch,
 * asks the backend for conv plans. */
void tb_graph_allocate(tb_graph *g, tb_backend *be, const tb_param_table *pt);
void tb_graph_free(tb_graph *g, tb_backend *be);

/* Device view of activation `id` (or its gradient) for a batch of n. */
tb_tensor tb_graph_act(const tb_graph *g, int id, int n);
tb_tensor tb_graph_grad(const tb_graph *g, int id, int n);

void tb_graph_forward(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, int train);
/* Expects the gradient of the output (logits) to be written already. */
void tb_graph_backward(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n,
                       tb_grad_ready_fn ready, void *ready_ctx);

#endif
