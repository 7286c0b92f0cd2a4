/* graph_fused.c - --fuse graph: candidates, planning with fallbacks, and the
 * fused training step (see graph_fused.h). */
#include "model/graph_fused.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

const char *tb_bn_fuse_mode_name(int mode) {
    static const char *n[4] = {"unfused", "applied", "folded", "folded into the block end"};
    return mode >= 0 && mode < 4 ? n[mode] : "?";
}

/* How many nodes read activation act; *only: the last of them. */
static int consumers(const tb_graph *g, int act, int *only) {
    int n = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].in == act || g->nodes[i].in2 == act) {
            n++;
            *only = i;
        }
    return n;
}

void tb_fused_candidates(tb_graph *g) {
    for (int i = 0; i < g->nnodes; i++) {
        tb_node *nd = &g->nodes[i];
        nd->fcand = nd->fmode = TB_BNF_UNFUSED;
        nd->ftimed = 0;
        nd->fpeer = nd->fstats = nd->fpro = -1;
        nd->fconv = 0;
    }
    /* statistics from the conv that alone feeds the BN */
    for (int i = 0; i < g->nnodes; i++) {
        tb_node *nd = &g->nodes[i];
        int only = -1, prod = nd->kind == TB_NODE_BN ? g->acts[nd->in].producer : -1;
        if (prod < 0 || g->nodes[prod].kind != TB_NODE_CONV || consumers(g, nd->in, &only) != 1) continue;
        nd->fcand = TB_BNF_APPLY;
        nd->fstats = prod;
        g->nodes[prod].fpeer = i;
    }
    /* folded into the one conv that reads it, or into the block end that adds it */
    for (int i = 0; i < g->nnodes; i++) {
        tb_node *nd = &g->nodes[i];
        int c = -1, bo = -1;
        if (nd->fcand != TB_BNF_APPLY || nd->in2 >= 0 || consumers(g, nd->out, &c) != 1) continue;
        tb_node *nx = &g->nodes[c];
        if (nd->relu && nx->kind == TB_NODE_CONV && nx->in == nd->out && nx->fpeer >= 0 &&
            consumers(g, nx->out, &bo) == 1 && bo == nx->fpeer) {
            nd->fcand = TB_BNF_FOLD; /* the conv's forward makes its own BN's statistics too */
            nd->fpeer = c;
            nx->fpro = i;
        } else if (!nd->relu && nx->kind == TB_NODE_BN && nx->in2 == nd->out && nx->in != nd->out &&
                   nx->fcand != TB_BNF_UNFUSED) {
            nd->fcand = TB_BNF_ZFOLD;
            nd->fpeer = c;
        }
    }
    for (int i = 0; i < g->nnodes; i++) g->nodes[i].fmode = g->nodes[i].plan_fcand = g->nodes[i].fcand;
}

void tb_fused_count(const tb_graph *g, int planned, int counts[4]) {
    memset(counts, 0, 4 * sizeof *counts);
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].kind == TB_NODE_BN) counts[planned ? g->nodes[i].fmode : g->nodes[i].fcand]++;
}

void tb_fused_summary(const tb_graph *g, char *buf, size_t len) {
    int c[4];
    tb_fused_count(g, 1, c);
    int all = c[0] + c[1] + c[2] + c[3];
    snprintf(buf, len,
             "%d of %d BatchNorms on conv statistics: %d folded into the next conv, %d into the block end, %d "
             "applied; %d unfused",
             all - c[0], all, c[TB_BNF_FOLD], c[TB_BNF_ZFOLD], c[TB_BNF_APPLY], c[0]);
}

/* ---- planning ----------------------------------------------------------------------------- */

static tb_bn_fold fold_of(const tb_node *b, const tb_graph_params *p) {
    const tb_param *it = p->table->items;
    tb_bn_fold f = {b->fscale,
                    b->fbias,
                    b->save_mean,
                    b->save_invstd,
                    p->params + it[b->param].offset,
                    p->params + it[b->param + 1].offset};
    return f;
}

void tb_fused_finalize_args(tb_graph *g, const tb_graph_params *p, const tb_node *b, int n, tb_bn_finalize_args *fa) {
    tb_tensor x, z, y;
    tb_bn_args ba;
    tb_graph_bn_args(g, b, p, n, &x, &z, &y, &ba);
    tb_bn_finalize_args f = {x.c,
                             (double)n * x.h * x.w,
                             b->fsum,
                             b->fsqsum,
                             ba.gamma,
                             ba.beta,
                             ba.running_mean,
                             ba.running_var,
                             ba.save_mean,
                             ba.save_invstd,
                             b->fscale,
                             b->fbias,
                             ba.momentum,
                             ba.eps};
    *fa = f;
}

void tb_fused_conv_args(tb_graph *g, const tb_graph_params *p, int ci, int n, int pro, tb_bn_fold *f, tb_tensor t[8],
                        tb_fconv_args *a) {
    const tb_node *c = &g->nodes[ci], *b = pro ? &g->nodes[c->fpro] : NULL, *bo = NULL;
    if (c->fpeer >= 0 && g->nodes[c->fpeer].fmode != TB_BNF_UNFUSED) bo = &g->nodes[c->fpeer];
    memset(a, 0, sizeof *a);
    t[0] = tb_graph_act(g, b ? b->in : c->in, n);
    t[1] = tb_graph_weight(g, p, c->param);
    t[2] = tb_graph_act(g, c->out, n);
    t[3] = tb_graph_grad(g, c->out, n);
    t[4] = tb_graph_weight_grad(g, p, c->param);
    a->g = &c->conv;
    a->x = &t[0], a->w = &t[1], a->y = &t[2], a->dy = &t[3], a->dw = &t[4];
    a->conv_plan = c->plan;
    if (bo) a->sum = bo->fsum, a->sqsum = bo->fsqsum;
    if (!b) return;
    t[7] = tb_graph_act(g, b->out, n);
    a->xp = &t[7];
    const tb_param *it = p->table->items;
    *f = fold_of(b, p);
    t[5] = tb_graph_grad(g, b->in, n);
    t[6] = tb_graph_grad(g, b->out, n);
    a->pro = f;
    a->dx = &t[5], a->dr = &t[6];
    a->dgamma = p->grads + it[b->param].offset;
    a->dbeta = p->grads + it[b->param + 1].offset;
}

/* The nodes one kind of fallback moved, for its one line. */
typedef struct {
    int count;
    char names[160];
} fallback;

static void note(fallback *f, const char *name) {
    size_t used = strlen(f->names);
    if (f->count++ < 4)
        snprintf(f->names + used, sizeof f->names - used, "%s%s", used ? ", " : "", name);
    else if (f->count == 5)
        snprintf(f->names + used, sizeof f->names - used, ", ...");
}

static const char *missing_name(unsigned bits) {
    if (bits & TB_FCONV_FWD) return "conv + statistics with the BN in its prologue";
    if (bits & TB_FCONV_DGRAD) return "data gradient + ReLU mask + BN weight gradients";
    return "filter gradient with the BN in its prologue";
}

/* Conv node ci's fused plan; moves its folded input BN to APPLY and its
 * statistics BN to UNFUSED where the backend cannot run them. */
static void plan_conv(tb_graph *g, tb_backend *be, const tb_graph_params *p, int ci, fallback *down, fallback *off) {
    tb_node *c = &g->nodes[ci];
    int bo = c->fpeer >= 0 && g->nodes[c->fpeer].fmode != TB_BNF_UNFUSED ? c->fpeer : -1;
    if (c->fpro >= 0 && g->nodes[c->fpro].fmode != TB_BNF_FOLD) c->fpro = -1; /* its statistics failed */
    if (bo < 0 && c->fpro < 0) return;
    tb_tensor t[8];
    tb_bn_fold f;
    tb_fconv_args a;
    tb_bn_finalize_args fa;
    unsigned want = TB_FCONV_FWD | (c->fpro >= 0 ? TB_FCONV_WGRAD | TB_FCONV_DGRAD : 0), got = 0;
    tb_fused_conv_args(g, p, ci, g->max_batch, c->fpro >= 0, &f, t, &a);
    if (bo >= 0) tb_fused_finalize_args(g, p, &g->nodes[bo], g->max_batch, &fa), a.fin = &fa;
    void *plan = be->fconv_plan(be, &a, want, &got);
    if (c->fpro >= 0 && got != want) {
        tb_node *b = &g->nodes[c->fpro];
        note(&down[(want & ~got & TB_FCONV_FWD) ? 0 : (want & ~got & TB_FCONV_DGRAD) ? 1 : 2], b->name);
        b->fmode = TB_BNF_APPLY;
        c->fpro = -1;
        if (plan) be->fconv_plan_free(be, plan);
        want = TB_FCONV_FWD, got = 0;
        tb_fused_conv_args(g, p, ci, g->max_batch, 0, &f, t, &a);
        a.fin = bo >= 0 ? &fa : NULL;
        plan = be->fconv_plan(be, &a, want, &got);
    }
    if (bo >= 0 && !(got & TB_FCONV_FWD)) {
        note(off, g->nodes[bo].name);
        g->nodes[bo].fmode = TB_BNF_UNFUSED;
        if (plan) be->fconv_plan_free(be, plan);
        plan = NULL;
        got = 0;
    }
    c->fplan = plan;
    c->fconv = (got & TB_FCONV_FWD) != 0;
}

void tb_fused_plan(tb_graph *g, tb_backend *be, const tb_graph_params *p) {
    fallback down[3], off;
    memset(down, 0, sizeof down);
    memset(&off, 0, sizeof off);
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].kind == TB_NODE_CONV) plan_conv(g, be, p, i, down, &off);
    /* a shortcut BN folds into its block end's apply only if that block end
     * applies (an unfused one reads the shortcut's output: write it) */
    fallback zdown;
    memset(&zdown, 0, sizeof zdown);
    for (int i = 0; i < g->nnodes; i++) {
        tb_node *nd = &g->nodes[i];
        if (nd->kind == TB_NODE_BN && nd->fmode == TB_BNF_ZFOLD && g->nodes[nd->fpeer].fmode != TB_BNF_APPLY) {
            nd->fmode = TB_BNF_APPLY;
            note(&zdown, nd->name);
        }
    }
    if (zdown.count)
        tb_info("# fuse graph: %d shortcut BatchNorm%s applied instead of folded into the block end (that block end "
                "runs unfused): %s",
                zdown.count, zdown.count > 1 ? "s" : "", zdown.names);
    static const unsigned bit[3] = {TB_FCONV_FWD, TB_FCONV_DGRAD, TB_FCONV_WGRAD};
    for (int k = 0; k < 3; k++)
        if (down[k].count)
            tb_info("# fuse graph: %d BatchNorm%s applied instead of folded into the next conv (the %s backend has "
                    "no %s for %s): %s",
                    down[k].count, down[k].count > 1 ? "s" : "", be->name, missing_name(bit[k]),
                    down[k].count > 1 ? "them" : "it", down[k].names);
    if (off.count)
        tb_info("# fuse graph: %d BatchNorm%s unfused (the %s backend has no conv + statistics for %s conv): %s",
                off.count, off.count > 1 ? "s" : "", be->name, off.count > 1 ? "their" : "its", off.names);
    if (g->fuse_timed) tb_fused_time(g, be, p); /* --fuse fastest: down where unfused is faster */
    char sum[192];
    tb_fused_summary(g, sum, sizeof sum);
    tb_info("# fuse graph: %s", sum);
}

void tb_fused_free(tb_graph *g, tb_backend *be) {
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].fplan) be->fconv_plan_free(be, g->nodes[i].fplan);
        g->nodes[i].fplan = NULL;
        g->nodes[i].fconv = 0;
    }
}

/* ---- the training step -------------------------------------------------------------------- */

static void conv_forward_fused(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, int ci) {
    tb_node *c = &g->nodes[ci];
    tb_tensor t[8];
    tb_bn_fold f;
    tb_fconv_args a;
    tb_fused_conv_args(g, p, ci, n, c->fpro >= 0, &f, t, &a);
    tb_op_prof_begin(g->prof, c->name, TB_OPP_FORWARD, TB_OPK_CONV_FWD);
    be->fconv_forward(be, c->fplan, &a);
    tb_op_prof_end(g->prof);
    const tb_node *b = &g->nodes[c->fpeer]; /* its BN: fused whenever the plan exists */
    tb_bn_finalize_args fa;
    tb_fused_finalize_args(g, p, b, n, &fa);
    tb_op_prof_begin(g->prof, b->name, TB_OPP_FORWARD, TB_OPK_BN_FWD);
    be->bn_finalize(be, c->fplan, &fa);
    tb_op_prof_end(g->prof);
}

void tb_fused_apply_args(const tb_graph *g, const tb_node *nd, int n, tb_tensor t[3], tb_bn_apply_args *a) {
    t[0] = tb_graph_act(g, nd->in, n);
    t[1] = tb_graph_act(g, nd->out, n);
    tb_bn_apply_args b = {&t[0], nd->fscale, nd->fbias, NULL, NULL, NULL, nd->relu, &t[1], nd->plan, nd->reserve,
                          nd->reserve_bytes};
    if (nd->in2 >= 0) {
        const tb_node *zb = &g->nodes[g->acts[nd->in2].producer];
        if (zb->kind == TB_NODE_BN && zb->fmode == TB_BNF_ZFOLD) {
            t[2] = tb_graph_act(g, zb->in, n); /* the shortcut conv's raw output */
            b.zscale = zb->fscale, b.zbias = zb->fbias;
        } else {
            t[2] = tb_graph_act(g, nd->in2, n);
        }
        b.z = &t[2];
    }
    *a = b;
}

static void bn_forward_fused(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, int i) {
    const tb_node *nd = &g->nodes[i];
    p->counters[p->table->items[nd->param + 4].offset] += 1;
    if (nd->fmode != TB_BNF_APPLY) return; /* folded: its consumer applies it */
    tb_tensor t[3];
    tb_bn_apply_args a;
    tb_fused_apply_args(g, nd, n, t, &a);
    tb_op_prof_begin(g->prof, nd->name, TB_OPP_FORWARD, TB_OPK_BN_FWD);
    be->bn_apply(be, &a);
    tb_op_prof_end(g->prof);
}

void tb_fused_forward(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n) {
    for (int i = 0; i < g->nnodes; i++) {
        const tb_node *nd = &g->nodes[i];
        if (nd->kind == TB_NODE_CONV && nd->fconv)
            conv_forward_fused(g, be, p, n, i);
        else if (nd->kind == TB_NODE_BN && nd->fmode != TB_BNF_UNFUSED)
            bn_forward_fused(g, be, p, n, i);
        else
            tb_graph_forward_node(g, be, p, n, 1, i);
    }
}

/* A conv with a BN folded into its prologue: its filter gradient, then its
 * data gradient through the BN's ReLU and normalisation, which makes the
 * BN's parameter gradients and the gradient of the BN's input. Where the
 * backend has a second queue, the filter gradient goes there beside the
 * rest (tb_graph_wgrad_*). */
static void conv_backward_fused(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, int ci,
                                tb_grad_ready_fn ready, void *ready_ctx) {
    tb_node *c = &g->nodes[ci];
    const tb_node *b = &g->nodes[c->fpro];
    const tb_param *it = p->table->items, *pw = &it[c->param];
    TB_ASSERT(g->grad_written[c->out]);
    tb_tensor t[8];
    tb_bn_fold f;
    tb_fconv_args a;
    tb_fused_conv_args(g, p, ci, n, 1, &f, t, &a);
    int side = tb_graph_wgrad_begin(g, be);
    tb_op_prof_begin(g->prof, c->name, TB_OPP_BACKWARD_FILTER, TB_OPK_CONV_WGRAD);
    be->fconv_backward_filter(be, c->fplan, &a);
    tb_op_prof_end(g->prof);
    tb_graph_weight_grad_to_flat(g, be, p, pw, a.dw, TB_OPP_BACKWARD_FILTER);
    tb_graph_wgrad_end(be, side, pw, ready, ready_ctx);
    g->grad_written[b->out] = 1; /* dr: this op's scratch */
    int has_dx = tb_graph_grad_target(g, b->in, n, &t[5], &a.accumulate_dx);
    TB_ASSERT(has_dx);
    tb_op_prof_begin(g->prof, c->name, TB_OPP_BACKWARD_DATA, TB_OPK_CONV_DGRAD);
    be->fconv_backward_data(be, c->fplan, &a);
    tb_op_prof_end(g->prof);
    tb_op_prof_begin(g->prof, b->name, TB_OPP_BACKWARD, TB_OPK_BN_BWD);
    be->bn_input_grad(be, &a); /* reads dgamma and dbeta: they are ready only after it */
    tb_op_prof_end(g->prof);
    tb_graph_wgrad_join(g, be, side, pw, ready, ready_ctx);
    if (ready) ready(ready_ctx, it[b->param].offset, 2 * it[b->param].numel);
}

void tb_fused_backward(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, tb_grad_ready_fn ready,
                       void *ready_ctx) {
    for (int i = g->nnodes - 1; i >= 0; i--) {
        const tb_node *nd = &g->nodes[i];
        if (nd->kind == TB_NODE_BN && nd->fmode == TB_BNF_FOLD) {
            /* its conv's backward made its gradients */
            TB_ASSERT(g->grad_written[nd->out] && g->grad_written[nd->in]);
            continue;
        }
        if (nd->kind == TB_NODE_CONV && nd->fpro >= 0)
            conv_backward_fused(g, be, p, n, i, ready, ready_ctx);
        else
            tb_graph_backward_node(g, be, p, n, i, ready, ready_ctx);
    }
}
