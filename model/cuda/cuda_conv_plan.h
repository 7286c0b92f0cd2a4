/* cuda_conv_plan.h - a convolution node's plan, as cuda_conv.c makes it
 * and cuda_conv_describe.c reports it (private to those two files).
 *
 * A plan holds the filter descriptor and one entry per batch size it has
 * run: the x/y descriptors and, per direction, the algorithm chosen. */
#ifndef TB_CUDA_CONV_PLAN_H
#define TB_CUDA_CONV_PLAN_H

#include "model/cuda/cuda_internal.h"

#define CONV_ALGOS 16 /* more than any direction's algorithm count */

typedef struct {
    int algo;                 /* cudnnConvolution*Algo_t */
    cudnnMathType_t math;
    size_t ws;                /* workspace bytes */
    float ms;                 /* measured time, or -1 (heuristic choice) */
    cudnnConvolutionDescriptor_t conv; /* this direction's math type */
    /* the graph API, by beta (forward: [0] only): the plan that runs, or
     * NULL (legacy); what it offered when the legacy algorithm won */
    cu_cgraph *graph[2];
    float graph_ms[2];        /* -1: not measured or none */
    long long graph_engine[2]; /* -1: none */
} conv_choice;

typedef struct {
    int n;
    cudnnTensorDescriptor_t x, y;
    conv_choice fwd, data, filter;
    int has_data;
} conv_entry;

typedef struct {
    tb_conv_geom g;
    tb_dtype dtype;
    tb_layout layout;
    int h, w, max_n;
    cudnnFilterDescriptor_t f;
    /* the buffers of the largest batch, for measuring other batch sizes */
    const void *xb, *wb;
    void *yb, *dxb, *dwb, *dyb;
    conv_entry *e;
    int ne, cap;
    /* the conv on copies padded to more input channels (cuda_conv_pad.c),
     * which runs instead of the entries above; NULL: it does not */
    cu_conv_pad *pad;
} conv_plan;

/* The chosen time of a direction: the graph plan's when it runs, else the
 * legacy algorithm's; -1 when not measured. */
static inline float cu_conv_choice_ms(const conv_choice *c) { return c->graph[0] ? cu_cgraph_ms(c->graph[0]) : c->ms; }

#endif
