/* graph.c - building, allocating and running the node list (see graph.h;
 * the memory plan: graph_memory.c). */
#include "model/graph.h"

#include "model/graph_fused.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

int tb_graph_add_act(tb_graph *g, int c, int h, int w) {
    if (g->nacts == g->acts_cap) {
        g->acts_cap = g->acts_cap ? 2 * g->acts_cap : 256;
        g->acts = realloc(g->acts, (size_t)g->acts_cap * sizeof *g->acts);
        if (!g->acts) TB_FATAL("out of host memory for the graph");
    }
    tb_act *a = &g->acts[g->nacts];
    memset(a, 0, sizeof *a);
    a->c = c;
    a->h = h;
    a->w = w;
    a->producer = -1;
    a->need_grad = 1;
    return g->nacts++;
}

int tb_graph_add_node(tb_graph *g, const tb_node *n) {
    if (g->nnodes == g->nodes_cap) {
        g->nodes_cap = g->nodes_cap ? 2 * g->nodes_cap : 256;
        g->nodes = realloc(g->nodes, (size_t)g->nodes_cap * sizeof *g->nodes);
        if (!g->nodes) TB_FATAL("out of host memory for the graph");
    }
    int id = g->nnodes++;
    g->nodes[id] = *n;
    TB_ASSERT(n->out >= 0 && n->out < g->nacts && g->acts[n->out].producer == -1);
    g->acts[n->out].producer = id;
    return id;
}

tb_tensor tb_graph_act(const tb_graph *g, int id, int n) {
    const tb_act *a = &g->acts[id];
    tb_tensor t = {a->data, n, a->c, a->h, a->w, g->dtype, g->layout};
    return t;
}

tb_tensor tb_graph_grad(const tb_graph *g, int id, int n) {
    const tb_act *a = &g->acts[id];
    TB_ASSERT(a->grad != NULL);
    tb_tensor t = {a->grad, n, a->c, a->h, a->w, g->dtype, g->layout};
    return t;
}

/* "graph-<hash>" of what planning depends on: the batch, dtype, layout, the
 * fusion, and every node's kind, geometry and activation shapes. */
static void session_name(const tb_graph *g, char *out, size_t len) {
    uint64_t h = 0xcbf29ce484222325ULL;
    int head[4] = {g->max_batch, (int)g->dtype, (int)g->layout, g->fuse_graph + g->fuse_timed};
    const int *v = head;
    for (int i = -1; i < g->nnodes; i++) {
        int node[9];
        if (i >= 0) {
            const tb_node *nd = &g->nodes[i];
            const tb_act *a = &g->acts[nd->out];
            int tmp[9] = {(int)nd->kind, nd->conv.cin, nd->conv.cout, nd->conv.k, nd->conv.stride, nd->conv.pad,
                          a->c, a->h, a->w};
            memcpy(node, tmp, sizeof node);
            v = node;
        }
        for (int k = 0; k < (i < 0 ? 4 : 9); k++) h = (h ^ (uint64_t)(unsigned)v[k]) * 0x100000001b3ULL;
    }
    snprintf(out, len, "graph-%016llx", (unsigned long long)h);
}

/* Lets the backend time its ways of running each BatchNorm on the real
 * buffers (bn_tune), given a training step's args at the largest batch. */
static void tune_bns(tb_graph *g, tb_backend *be, const tb_graph_params *p) {
    const tb_param *it = p->table->items;
    const int n = g->max_batch;
    for (int i = 0; i < g->nnodes; i++) {
        tb_node *nd = &g->nodes[i];
        if (nd->kind != TB_NODE_BN || !g->acts[nd->in].need_grad) continue;
        tb_tensor x, z, y;
        tb_bn_args a;
        tb_graph_bn_args(g, nd, p, n, &x, &z, &y, &a);
        if ((size_t)n * x.h * x.w < 2) continue; /* no training BatchNorm: the run's own check says so */
        int has_dz = nd->in2 >= 0 && g->acts[nd->in2].need_grad;
        tb_tensor dy = tb_graph_grad(g, nd->out, n), dx = tb_graph_grad(g, nd->in, n);
        tb_tensor dz = has_dz ? tb_graph_grad(g, nd->in2, n) : dx;
        tb_bn_grads gr = {&dy, &dx, has_dz ? &dz : NULL, 0, 0, p->grads + it[nd->param].offset,
                          p->grads + it[nd->param + 1].offset};
        be->bn_tune(be, &a, &gr);
    }
}

void tb_graph_allocate(tb_graph *g, tb_backend *be, const tb_graph_params *p) {
    const tb_param_table *pt = p->table;
    char session[32];
    session_name(g, session, sizeof session);
    be->plan_session(be, session); /* the plan cache's lock: one process of a node plans this graph */
    if (g->fuse_graph) tb_fused_candidates(g); /* bn_plan reads them (stats_elsewhere) */
    for (int i = 0; i < g->nnodes; i++) { /* reserve sizes first: they are in the plan */
        tb_node *nd = &g->nodes[i];
        if (nd->kind != TB_NODE_BN) continue;
        tb_tensor x, z, y;
        tb_bn_args a;
        nd->plan_fcand = nd->fcand;
        tb_graph_bn_args(g, nd, p, g->max_batch, &x, &z, &y, &a); /* data pointers still NULL */
        nd->reserve_bytes = 0;
        nd->plan = be->bn_plan(be, &a, &nd->reserve_bytes);
        if (g->fuse_timed && nd->fcand != TB_BNF_UNFUSED) { /* the unfused alternative, timed later */
            size_t alt = 0;
            a.stats_elsewhere = a.y_in_consumer = 0;
            nd->plan_alt = be->bn_plan(be, &a, &alt);
            nd->has_plan_alt = 1;
            if (alt > nd->reserve_bytes) nd->reserve_bytes = alt; /* either may run in that space */
        }
    }
    tb_graph_plan_memory(g, pt);
    g->act_arena = be->alloc(be, g->act_arena_bytes);
    g->grad_arena = be->alloc(be, g->grad_arena_bytes);
    for (int a = 0; a < g->nacts; a++) {
        tb_act *act = &g->acts[a];
        act->data = (char *)g->act_arena + act->data_offset;
        act->grad = act->need_grad ? (char *)g->grad_arena + act->grad_offset : NULL;
    }
    g->grad_written = calloc((size_t)g->nacts, 1);
    if (!g->grad_written) TB_FATAL("out of host memory for the graph");

    for (int i = 0; i < g->nnodes; i++) {
        tb_node *nd = &g->nodes[i];
        if (nd->kind == TB_NODE_BN) {
            size_t c = (size_t)pt->items[nd->param].numel;
            char *base = (char *)g->act_arena + nd->state_offset;
            size_t nstate = tb_graph_bn_state_count(g);
            nd->save_mean = (tb_real *)base;
            nd->save_invstd = nd->save_mean + c;
            if (g->fuse_graph) { /* [C] each: sum, sqsum, scale, bias */
                nd->fsum = nd->save_mean + 2 * c;
                nd->fsqsum = nd->fsum + c;
                nd->fscale = nd->fsqsum + c;
                nd->fbias = nd->fscale + c;
            }
            nd->reserve = nd->reserve_bytes ? (char *)g->act_arena + nd->reserve_offset : NULL;
            be->zero(be, nd->save_mean, nstate * c * sizeof(tb_real));
        } else if (nd->kind == TB_NODE_CONV) {
            /* on the real buffers: a backend may time algorithms on them */
            int need_dx = g->acts[nd->in].need_grad;
            tb_tensor x = tb_graph_act(g, nd->in, g->max_batch);
            tb_tensor y = tb_graph_act(g, nd->out, g->max_batch);
            tb_tensor dy = tb_graph_grad(g, nd->out, g->max_batch);
            tb_tensor dx = need_dx ? tb_graph_grad(g, nd->in, g->max_batch) : x;
            tb_tensor w = tb_graph_weight(g, p, nd->param);
            tb_tensor dw = tb_graph_weight_grad(g, p, nd->param);
            nd->plan = be->conv_plan(be, &nd->conv, &x, &w, &y, need_dx ? &dx : NULL, &dw, &dy);
        }
    }
    tune_bns(g, be, p);
    if (g->fuse_graph) tb_fused_plan(g, be, p);
    be->plan_session(be, NULL);
}

void tb_graph_free(tb_graph *g, tb_backend *be) {
    if (g->fuse_graph) tb_fused_free(g, be);
    for (int i = 0; i < g->nnodes; i++) {
        tb_node *nd = &g->nodes[i];
        if (nd->kind == TB_NODE_CONV && nd->plan) be->conv_plan_free(be, nd->plan);
        if (nd->kind == TB_NODE_BN && nd->plan) be->bn_plan_free(be, nd->plan);
        if (nd->kind == TB_NODE_BN && nd->has_plan_alt) be->bn_plan_free(be, nd->plan_alt);
    }
    if (g->act_arena) be->release(be, g->act_arena);
    if (g->grad_arena) be->release(be, g->grad_arena);
    free(g->grad_written);
    free(g->gc_src);
    free(g->nodes);
    free(g->acts);
    memset(g, 0, sizeof *g);
}

/* ---- execution ------------------------------------------------------------------ */

/* A weight [rows, cols, k, k] (or [rows, cols]) as the ops see it: in the op
 * buffer (op dtype and layout) when there is one, else a view of the flat
 * tb_real buffer (the graph then runs tb_real NCHW). */
static tb_tensor weight_in(const tb_graph *g, tb_real *flat, void *op, const tb_param *p) {
    tb_tensor t = {NULL, (int)p->shape[0], (int)p->shape[1],
                   p->ndim == 4 ? (int)p->shape[2] : 1, p->ndim == 4 ? (int)p->shape[3] : 1,
                   g->dtype, g->layout};
    if (op) {
        t.data = (char *)op + p->offset * tb_dtype_size(g->dtype);
    } else {
        TB_ASSERT(g->dtype == TB_REAL_DTYPE && g->layout == TB_NCHW);
        t.data = flat + p->offset;
    }
    return t;
}

/* The same weight as a tb_real NCHW view of a flat buffer (master copy). */
static tb_tensor weight_flat(tb_real *flat, const tb_param *p) {
    tb_tensor t = {flat + p->offset, (int)p->shape[0], (int)p->shape[1],
                   p->ndim == 4 ? (int)p->shape[2] : 1, p->ndim == 4 ? (int)p->shape[3] : 1,
                   TB_REAL_DTYPE, TB_NCHW};
    return t;
}

tb_tensor tb_graph_weight(const tb_graph *g, const tb_graph_params *p, int i) {
    return weight_in(g, p->params, p->op_params, &p->table->items[i]);
}

tb_tensor tb_graph_weight_grad(const tb_graph *g, const tb_graph_params *p, int i) {
    return weight_in(g, p->grads, p->op_grads, &p->table->items[i]);
}

/* After backward wrote a weight gradient into the op buffer: into the flat
 * tb_real gradient buffer (overwriting, as the op did), now, or with the
 * others at the end of a backward without a grad-ready hook (nothing reads
 * the flat gradients before it ends; the op buffers are not written again
 * in it). */
void tb_graph_weight_grad_to_flat(tb_graph *g, tb_backend *be, const tb_graph_params *p,
                                  const tb_param *pw, const tb_tensor *dw, tb_op_phase phase) {
    if (!p->op_grads) return;
    tb_tensor flat = weight_flat(p->grads, pw);
    if (g->gc_defer && g->gc_n < g->gc_cap) {
        g->gc_src[g->gc_n] = *dw;
        g->gc_dst[g->gc_n++] = flat;
        return;
    }
    tb_op_prof_begin(g->prof, pw->name, phase, TB_OPK_GRAD_CONVERT);
    be->convert(be, dw, &flat, 0);
    tb_op_prof_end(g->prof);
}

/* A backward's start: its weight gradients' conversions wait for its end
 * when it has no grad-ready hook (room for one per weight), else none do. */
static void grad_converts_begin(tb_graph *g, int defer) {
    g->gc_n = 0;
    g->gc_defer = defer;
    if (!defer) return;
    int need = 0;
    for (int i = 0; i < g->nnodes; i++) need += g->nodes[i].kind == TB_NODE_CONV || g->nodes[i].kind == TB_NODE_LINEAR;
    if (g->gc_cap < need) {
        free(g->gc_src);
        g->gc_src = malloc(2 * (size_t)need * sizeof *g->gc_src);
        if (!g->gc_src) TB_FATAL("out of host memory for the graph");
        g->gc_dst = g->gc_src + need;
        g->gc_cap = need;
    }
}

/* A backward's end: the conversions that waited, as one convert_many. */
static void grad_converts_flush(tb_graph *g, tb_backend *be) {
    const int n = g->gc_defer ? g->gc_n : 0;
    g->gc_defer = g->gc_n = 0;
    if (!n) return;
    tb_op_prof_begin(g->prof, "weight_grads", TB_OPP_BACKWARD, TB_OPK_GRAD_CONVERT);
    be->convert_many(be, g->gc_src, g->gc_dst, n, 0);
    tb_op_prof_end(g->prof);
}

void tb_graph_bn_args(const tb_graph *g, const tb_node *nd, const tb_graph_params *p, int n, tb_tensor *x,
                      tb_tensor *z, tb_tensor *y, tb_bn_args *a) {
    const tb_param *it = p->table->items;
    *x = tb_graph_act(g, nd->in, n);
    *y = tb_graph_act(g, nd->out, n);
    if (nd->in2 >= 0) *z = tb_graph_act(g, nd->in2, n);
    memset(a, 0, sizeof *a);
    a->x = x;
    a->z = nd->in2 >= 0 ? z : NULL;
    a->y = y;
    a->relu = nd->relu;
    a->gamma = p->params + it[nd->param].offset;
    a->beta = p->params + it[nd->param + 1].offset;
    a->running_mean = p->state + it[nd->param + 2].offset;
    a->running_var = p->state + it[nd->param + 3].offset;
    a->save_mean = nd->save_mean;
    a->save_invstd = nd->save_invstd;
    a->momentum = 0.1;
    a->eps = 1e-5;
    a->plan = nd->plan;
    a->reserve = nd->reserve;
    a->reserve_bytes = nd->reserve_bytes;
    a->stats_elsewhere = nd->plan_fcand != TB_BNF_UNFUSED;
    a->y_in_consumer = nd->plan_fcand == TB_BNF_FOLD && nd->relu;
}

void tb_graph_forward_node(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, int train, int i) {
    const tb_param *it = p->table->items;
    tb_op_prof *prof = g->prof;
    {
        const tb_node *nd = &g->nodes[i];
        tb_tensor x = tb_graph_act(g, nd->in, n);
        tb_tensor y = tb_graph_act(g, nd->out, n);
        static const tb_op_kind fwd_kind[] = {
            [TB_NODE_CONV] = TB_OPK_CONV_FWD,       [TB_NODE_BN] = TB_OPK_BN_FWD,
            [TB_NODE_RELU] = TB_OPK_RELU_FWD,       [TB_NODE_ADD] = TB_OPK_ADD_FWD,
            [TB_NODE_MAXPOOL] = TB_OPK_MAXPOOL_FWD, [TB_NODE_AVGPOOL] = TB_OPK_AVGPOOL_FWD,
            [TB_NODE_LINEAR] = TB_OPK_LINEAR_FWD,
        };
        tb_op_prof_begin(prof, nd->name, TB_OPP_FORWARD, fwd_kind[nd->kind]);
        switch (nd->kind) {
        case TB_NODE_CONV: {
            tb_tensor w = tb_graph_weight(g, p, nd->param);
            be->conv_forward(be, nd->plan, &nd->conv, &x, &w, &y);
            break;
        }
        case TB_NODE_BN: {
            tb_tensor z;
            tb_bn_args a;
            tb_graph_bn_args(g, nd, p, n, &x, &z, &y, &a);
            if (train) {
                be->bn_forward_train(be, &a);
                p->counters[it[nd->param + 4].offset] += 1;
            } else {
                be->bn_forward_infer(be, &a);
            }
            break;
        }
        case TB_NODE_RELU: be->relu_forward(be, &x, &y); break;
        case TB_NODE_ADD: {
            tb_tensor x2 = tb_graph_act(g, nd->in2, n);
            be->add_forward(be, &x, &x2, &y);
            break;
        }
        case TB_NODE_MAXPOOL: be->maxpool_forward(be, &nd->pool, &x, &y); break;
        case TB_NODE_AVGPOOL: be->avgpool_forward(be, &x, &y); break;
        case TB_NODE_LINEAR: {
            tb_tensor w = tb_graph_weight(g, p, nd->param);
            be->linear_forward(be, &x, &w, p->params + it[nd->param + 1].offset, &y);
            break;
        }
        }
        tb_op_prof_end(prof);
    }
}

void tb_graph_forward(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, int train) {
    TB_ASSERT(n >= 1 && n <= g->max_batch);
    if (train && g->fuse_graph) {
        tb_fused_forward(g, be, p, n);
        return;
    }
    for (int i = 0; i < g->nnodes; i++) tb_graph_forward_node(g, be, p, n, train, i);
}

/* Gradient target for input `id`: NULL when none is needed; *acc tells
 * whether an earlier node already wrote it (then we add). */
int tb_graph_grad_target(tb_graph *g, int id, int n, tb_tensor *t, int *acc) {
    if (id < 0 || !g->acts[id].need_grad) return 0;
    *t = tb_graph_grad(g, id, n);
    *acc = g->grad_written[id];
    g->grad_written[id] = 1;
    return 1;
}

int tb_graph_wgrad_begin(tb_graph *g, tb_backend *be) {
    return !(g->prof && g->prof->in_step) && be->branch_begin(be);
}

void tb_graph_wgrad_end(tb_backend *be, int side, const tb_param *pw, tb_grad_ready_fn ready, void *ready_ctx) {
    if (side) be->branch_end(be);
    /* in order, the weight gradient is final: hand it over before dx is computed */
    else if (ready) ready(ready_ctx, pw->offset, pw->numel);
}

void tb_graph_wgrad_join(tb_graph *g, tb_backend *be, int side, const tb_param *pw, tb_grad_ready_fn ready,
                         void *ready_ctx) {
    if (!side) return;
    be->branch_join(be);
    g->wgrad_branching++;
    if (ready) ready(ready_ctx, pw->offset, pw->numel);
}

/* A conv's weight gradient dw = corr(x, dy), then its input gradient dx
 * (+)= convT(dy, w) (dx NULL: none needed). Where the backend has a second
 * queue, dw goes there and runs beside dx (tb_graph_wgrad_*). */
static void conv_backward(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, const tb_node *nd,
                          const tb_tensor *dy, const tb_tensor *dx, int acc, tb_grad_ready_fn ready,
                          void *ready_ctx) {
    const tb_param *pw = &p->table->items[nd->param];
    tb_op_prof *prof = g->prof;
    tb_tensor x = tb_graph_act(g, nd->in, n);            /* [n, cin, h, w] */
    tb_tensor w = tb_graph_weight(g, p, nd->param);      /* [cout, cin, k, k] */
    tb_tensor dw = tb_graph_weight_grad(g, p, nd->param);
    int side = dx && tb_graph_wgrad_begin(g, be);
    tb_op_prof_begin(prof, nd->name, TB_OPP_BACKWARD_FILTER, TB_OPK_CONV_WGRAD);
    be->conv_backward_filter(be, nd->plan, &nd->conv, &x, dy, &dw, 0);
    tb_op_prof_end(prof);
    tb_graph_weight_grad_to_flat(g, be, p, pw, &dw, TB_OPP_BACKWARD_FILTER);
    tb_graph_wgrad_end(be, side, pw, ready, ready_ctx);
    if (dx) {
        tb_op_prof_begin(prof, nd->name, TB_OPP_BACKWARD_DATA, TB_OPK_CONV_DGRAD);
        be->conv_backward_data(be, nd->plan, &nd->conv, dy, &w, dx, acc);
        tb_op_prof_end(prof);
    }
    tb_graph_wgrad_join(g, be, side, pw, ready, ready_ctx);
}

void tb_graph_backward_node(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, int i,
                            tb_grad_ready_fn ready, void *ready_ctx) {
    const tb_param *it = p->table->items;
    tb_op_prof *prof = g->prof;
    {
        const tb_node *nd = &g->nodes[i];
        TB_ASSERT(g->grad_written[nd->out]);
        tb_tensor dy = tb_graph_grad(g, nd->out, n);
        tb_tensor dx, dx2;
        int acc = 0, acc2 = 0;
        int has_dx = tb_graph_grad_target(g, nd->in, n, &dx, &acc);
        switch (nd->kind) {
        case TB_NODE_CONV:
            conv_backward(g, be, p, n, nd, &dy, has_dx ? &dx : NULL, acc, ready, ready_ctx);
            break;
        case TB_NODE_BN: {
            tb_tensor x, z, y;
            tb_bn_args a;
            tb_graph_bn_args(g, nd, p, n, &x, &z, &y, &a);
            int has_dz = tb_graph_grad_target(g, nd->in2, n, &dx2, &acc2);
            TB_ASSERT(has_dx);
            tb_bn_grads gr = {&dy, &dx, has_dz ? &dx2 : NULL, acc, acc2,
                              p->grads + it[nd->param].offset,
                              p->grads + it[nd->param + 1].offset};
            tb_op_prof_begin(prof, nd->name, TB_OPP_BACKWARD, TB_OPK_BN_BWD);
            be->bn_backward(be, &a, &gr);
            tb_op_prof_end(prof);
            if (ready) ready(ready_ctx, it[nd->param].offset, 2 * it[nd->param].numel);
            break;
        }
        case TB_NODE_RELU: {
            tb_tensor y = tb_graph_act(g, nd->out, n);
            if (has_dx) {
                tb_op_prof_begin(prof, nd->name, TB_OPP_BACKWARD, TB_OPK_RELU_BWD);
                be->relu_backward(be, &y, &dy, &dx, acc);
                tb_op_prof_end(prof);
            }
            break;
        }
        case TB_NODE_ADD: {
            int has_dx2 = tb_graph_grad_target(g, nd->in2, n, &dx2, &acc2);
            TB_ASSERT(has_dx && has_dx2);
            tb_op_prof_begin(prof, nd->name, TB_OPP_BACKWARD, TB_OPK_ADD_BWD);
            be->add_backward(be, &dy, &dx, acc, &dx2, acc2);
            tb_op_prof_end(prof);
            break;
        }
        case TB_NODE_MAXPOOL: {
            tb_tensor x = tb_graph_act(g, nd->in, n);
            tb_tensor y = tb_graph_act(g, nd->out, n);
            if (has_dx) {
                tb_op_prof_begin(prof, nd->name, TB_OPP_BACKWARD, TB_OPK_MAXPOOL_BWD);
                be->maxpool_backward(be, &nd->pool, &x, &y, &dy, &dx, acc);
                tb_op_prof_end(prof);
            }
            break;
        }
        case TB_NODE_AVGPOOL:
            if (has_dx) {
                tb_op_prof_begin(prof, nd->name, TB_OPP_BACKWARD, TB_OPK_AVGPOOL_BWD);
                be->avgpool_backward(be, &dy, &dx, acc);
                tb_op_prof_end(prof);
            }
            break;
        case TB_NODE_LINEAR: {
            const tb_param *pw = &it[nd->param];
            tb_tensor x = tb_graph_act(g, nd->in, n);
            tb_tensor w = tb_graph_weight(g, p, nd->param);
            tb_tensor dw = tb_graph_weight_grad(g, p, nd->param);
            tb_op_prof_begin(prof, nd->name, TB_OPP_BACKWARD, TB_OPK_LINEAR_BWD);
            be->linear_backward(be, &x, &w, &dy, has_dx ? &dx : NULL, acc, &dw,
                                p->grads + it[nd->param + 1].offset);
            tb_op_prof_end(prof);
            tb_graph_weight_grad_to_flat(g, be, p, pw, &dw, TB_OPP_BACKWARD);
            if (ready) ready(ready_ctx, pw->offset, pw->numel + it[nd->param + 1].numel);
            break;
        }
        }
    }
}

void tb_graph_backward(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n,
                       tb_grad_ready_fn ready, void *ready_ctx) {
    TB_ASSERT(n >= 1 && n <= g->max_batch);
    memset(g->grad_written, 0, (size_t)g->nacts);
    g->grad_written[g->output] = 1; /* written by the loss */
    g->wgrad_branching = 0;
    grad_converts_begin(g, !ready);
    if (g->fuse_graph)
        tb_fused_backward(g, be, p, n, ready, ready_ctx);
    else
        for (int i = g->nnodes - 1; i >= 0; i--) tb_graph_backward_node(g, be, p, n, i, ready, ready_ctx);
    grad_converts_flush(g, be);
    if (g->wgrad_branching) g->wgrad_branches = g->wgrad_branching;
}
