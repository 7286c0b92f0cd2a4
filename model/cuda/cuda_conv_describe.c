/* cuda_conv_describe.c - what a convolution plan runs, in words (the
 * results file's conv_algorithms, the run's plan lines): per batch size and
 * direction, the graph API's engine or the legacy algorithm, its math
 * type, workspace and measured time, and what the other API offered; a
 * plan on padded channels (cuda_conv_pad.c) says so first. */
#include <stdio.h>
#include <string.h>

#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_conv_plan.h"

static const char *fwd_names[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                  "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
static const char *data_names[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
                                   "WINOGRAD_NONFUSED"};
static const char *filter_names[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
                                     "WINOGRAD_NONFUSED", "FFT_TILING"};

static const char *math_name(cudnnMathType_t m) {
    return m == CUDNN_FMA_MATH ? "fma" : m == CUDNN_TENSOR_OP_MATH ? "tensor-op"
           : m == CUDNN_DEFAULT_MATH                              ? "default"
                                                                  : "tensor-op+conversion";
}

/* Moves *used past k characters snprintf wrote into buf[len] (clamped
 * when the text was truncated). */
static void advance(size_t *used, size_t len, int k) {
    if (k > 0) *used += (size_t)k < len - *used ? (size_t)k : len - *used - 1;
}

/* Appends what runs for beta b of direction dir ("data+": accumulate):
 * the graph API's engine, or the legacy algorithm and what the graph API
 * offered against it. */
static void describe_choice(char *buf, size_t len, size_t *used, const char *dir, const char *const *names,
                            int nnames, const conv_choice *c, int b) {
    if (*used + 1 >= len) return;
    if (b == 1 && !c->graph[1] && c->graph_engine[1] < 0) return; /* the same legacy algorithm as beta 0 */
    const char *nm = c->algo >= 0 && c->algo < nnames ? names[c->algo] : "?";
    int k;
    if (c->graph[b]) {
        k = snprintf(buf + *used, len - *used, " %s%s ", dir, b ? "+" : "");
        advance(used, len, k);
        if (*used + 1 >= len) return;
        k = cu_cgraph_describe(c->graph[b], buf + *used, len - *used);
        advance(used, len, k);
        if (*used + 1 >= len || c->ms < 0) return;
        k = snprintf(buf + *used, len - *used, " vs legacy %s %.3f ms", nm, (double)c->ms);
    } else {
        /* what the graph API measured (not "graph-api": that names what runs) */
        char alt[64] = "";
        if (c->graph_engine[b] >= 0 && c->graph_ms[b] >= 0)
            snprintf(alt, sizeof alt, "; graph engine %lld %.3f ms", c->graph_engine[b], (double)c->graph_ms[b]);
        if (c->ms >= 0)
            k = snprintf(buf + *used, len - *used, " %s%s legacy %s (%s, %.1f MiB, %.3f ms%s)", dir,
                         b ? "+" : "", nm, math_name(c->math), (double)c->ws / 1048576.0, (double)c->ms, alt);
        else
            k = snprintf(buf + *used, len - *used, " %s%s legacy %s (%s, %.1f MiB, heuristic)", dir,
                         b ? "+" : "", nm, math_name(c->math), (double)c->ws / 1048576.0);
    }
    advance(used, len, k);
}

int tb_cuda_conv_plan_padded(const void *plan) {
    const conv_plan *p = plan;
    return p ? cu_conv_pad_channels(p->pad) : 0;
}

int tb_cuda_conv_plan_on_graph(const void *plan) {
    const conv_plan *p = plan;
    if (p && p->pad) return tb_cuda_conv_plan_on_graph(cu_conv_pad_inner(p->pad));
    int n = 0;
    for (int i = 0; p && i < p->ne; i++) {
        const conv_choice *cs[3] = {&p->e[i].fwd, &p->e[i].data, &p->e[i].filter};
        for (int d = 0; d < 3; d++)
            for (int b = 0; b < 2; b++) n += cs[d]->graph[b] != NULL;
    }
    return n;
}

void cu_conv_plan_describe(tb_backend *be, void *plan, char *buf, size_t len) {
    conv_plan *p = plan;
    size_t used = 0;
    buf[0] = '\0';
    if (p->pad) { /* what runs: the padded plan */
        cu_conv_pad_describe(be, p->pad, buf, len);
        return;
    }
    for (int i = 0; i < p->ne && used + 1 < len; i++) {
        const conv_entry *e = &p->e[i];
        int k = snprintf(buf + used, len - used, "%sn=%d:", i ? "; " : "", e->n);
        advance(&used, len, k);
        describe_choice(buf, len, &used, "fwd", fwd_names, 8, &e->fwd, 0);
        for (int b = 0; b < 2 && e->has_data; b++)
            describe_choice(buf, len, &used, "data", data_names, 6, &e->data, b);
        for (int b = 0; b < 2; b++) describe_choice(buf, len, &used, "filter", filter_names, 7, &e->filter, b);
    }
}

