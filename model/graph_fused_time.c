/* graph_fused_time.c - --fuse fastest: each fusion of a BatchNorm kept
 * only where it measured faster than the ops it replaces.
 *
 * From tb_fused_plan, after the backend said what it can run, two kinds of
 * choice, each timed both ways on the real buffers at the largest batch,
 * forward and backward as a training step runs them:
 *
 *  1. Folds first. A BN folded into the next conv's prologue:
 *       folded   that conv's fconv_forward with the prologue, its fused
 *                filter and data gradients and bn_input_grad
 *       applied  bn_apply writes the BN's output; the conv's conv +
 *                statistics without the prologue (a second fused plan,
 *                made only when this way is timed or was chosen), its
 *                plain filter and data gradients, the BN's bn_backward
 *     Where applied is faster the BN becomes APPLY and the conv runs on the
 *     second plan. A conv whose statistics have no plan without the
 *     prologue keeps its fold, untimed.
 *  2. Then each BN applied (APPLY) or folded into its block end (ZFOLD)
 *     whose conv reads a materialised input (no BN in its prologue):
 *       fused    fconv_forward (conv + sum and sum of squares),
 *                bn_finalize, bn_apply (APPLY only: a ZFOLD's is in its
 *                block end's), bn_backward on the plan made for statistics
 *                from elsewhere
 *       unfused  conv_forward, then bn_forward_train and bn_backward on the
 *                node's second BN plan (graph.c makes it under --fuse
 *                fastest), after bn_tune chose that plan's kernels
 *     Where unfused is faster the BN becomes UNFUSED on its second plan and
 *     its conv drops its fused plan. Block ends go first: one that goes
 *     unfused takes the shortcut BN folded into it down to APPLY (nothing
 *     adds it any more), which is then timed as applied. A BN the backend
 *     left unfused runs on its second plan too. BNs whose conv has a BN in
 *     its prologue are not timed (their count is in the line).
 * What is the same both ways (the conv's backward in 2) is not timed. The
 * second way must be faster by more than FT_MARGIN: ties keep the fusion.
 * A BN with one value per channel (batch 1 at 1x1) is left alone: the
 * run's own check refuses it with its line.
 *
 * Each way runs twice first (lazy plans; then the host's time to queue
 * one run), then FT_ROUNDS rounds of FT_REPS runs between two events, the
 * ways alternating, the device held first for the host's time to queue a
 * round (backend.h stream_hold); the fastest round of each counts. The
 * running statistics and dgamma, dbeta go to scratch; a weight gradient
 * the timing writes is overwritten by the first backward.
 *
 * Nodes of one problem share its first timing. A choice is kept with the
 * backend's (choice_get/_put: the CUDA plan cache, shared by the ranks of
 * a node): "fused|unfused <ms fused> <ms unfused>" (for a fold: folded,
 * applied), its word from the times as written, under a key of the conv's
 * and the BN's problem; one that does not parse, or whose word its times
 * do not give, is timed again with one line. A choice is about speed: a
 * stale one costs time, never a wrong result. One line per kind sums up
 * what was timed and chosen.
 */
#include "model/graph_fused.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/timer.h"

#define FT_MARGIN 0.02 /* unfused must be this much faster: fused is the tie's way */
#define FT_ROUNDS 3
#define FT_REPS 3

/* One timed choice. Apply: BN bi with its statistics from conv ci, applied
 * (way 0) or unfused (way 1). Fold: BN bi folded into conv ci's prologue
 * (way 0) or applied, ci then reading its output (way 1, on plan2: ci's
 * conv + statistics without the prologue, once has_plan2). */
typedef struct {
    tb_graph *g;
    tb_backend *be;
    const tb_graph_params *p;
    int bi, ci, n, fold;
    void *plan2;
    int has_plan2;
    tb_real *scratch; /* [4C] running mean, running var, dgamma, dbeta */
} ft_node;

/* The BN's args (plan: the fused or the unfused one) with its running
 * statistics and gradients in scratch; x, z, y, dy, dx, dz in t[]. */
static void bn_args(const ft_node *f, int unfused, tb_tensor t[6], tb_bn_args *a, tb_bn_grads *gr) {
    tb_graph *g = f->g;
    const tb_node *b = &g->nodes[f->bi];
    const int C = g->acts[b->in].c;
    tb_graph_bn_args(g, b, f->p, f->n, &t[0], &t[1], &t[2], a);
    a->running_mean = f->scratch, a->running_var = f->scratch + C;
    if (unfused) a->plan = b->plan_alt, a->stats_elsewhere = a->y_in_consumer = 0;
    int has_dz = b->in2 >= 0 && g->acts[b->in2].need_grad;
    t[3] = tb_graph_grad(g, b->out, f->n);
    t[4] = tb_graph_grad(g, b->in, f->n);
    t[5] = has_dz ? tb_graph_grad(g, b->in2, f->n) : t[4];
    tb_bn_grads r = {&t[3], &t[4], has_dz ? &t[5] : NULL, 0, 0, f->scratch + 2 * C, f->scratch + 3 * C};
    *gr = r;
}

/* A fold's two ways: conv ci's forward, filter and data gradients and BN
 * bi's backward, with the BN in ci's prologue (0) or applied (1). */
static void run_fold(const ft_node *f, int apply) {
    tb_graph *g = f->g;
    tb_backend *be = f->be;
    const tb_node *d = &g->nodes[f->ci], *a = &g->nodes[f->bi];
    const int C = g->acts[a->in].c;
    tb_tensor ct[8];
    tb_bn_fold fold;
    tb_fconv_args ca;
    tb_fused_conv_args(g, f->p, f->ci, f->n, !apply, &fold, ct, &ca);
    if (!apply) {
        ca.dgamma = f->scratch + 2 * C, ca.dbeta = f->scratch + 3 * C;
        be->fconv_forward(be, d->fplan, &ca);
        be->fconv_backward_filter(be, d->fplan, &ca);
        be->fconv_backward_data(be, d->fplan, &ca);
        be->bn_input_grad(be, &ca);
        return;
    }
    tb_tensor at[3], t[6];
    tb_bn_apply_args aa;
    tb_fused_apply_args(g, a, f->n, at, &aa);
    be->bn_apply(be, &aa);
    be->fconv_forward(be, f->plan2, &ca); /* has_plan2: timed only once it is made */
    be->conv_backward_filter(be, d->plan, &d->conv, ca.x, ca.dy, ca.dw, 0);
    tb_tensor dr = tb_graph_grad(g, a->out, f->n);
    be->conv_backward_data(be, d->plan, &d->conv, ca.dy, ca.w, &dr, 0);
    tb_bn_args ba;
    tb_bn_grads gr;
    bn_args(f, 0, t, &ba, &gr);
    be->bn_backward(be, &ba, &gr);
}

/* One training step's forward and backward of the BN and its conv's
 * forward, the fused way (0) or the unfused one (1); a fold's, run_fold. */
static void run_way(const ft_node *f, int unfused) {
    if (f->fold) {
        run_fold(f, unfused);
        return;
    }
    tb_graph *g = f->g;
    tb_backend *be = f->be;
    const tb_node *c = &g->nodes[f->ci], *b = &g->nodes[f->bi];
    tb_tensor t[6];
    tb_bn_args ba;
    tb_bn_grads gr;
    bn_args(f, unfused, t, &ba, &gr);
    if (unfused) {
        tb_tensor x = tb_graph_act(g, c->in, f->n), w = tb_graph_weight(g, f->p, c->param);
        tb_tensor y = tb_graph_act(g, c->out, f->n);
        be->conv_forward(be, c->plan, &c->conv, &x, &w, &y);
        be->bn_forward_train(be, &ba);
    } else {
        tb_tensor ct[8];
        tb_bn_fold fold;
        tb_fconv_args ca;
        tb_fused_conv_args(g, f->p, f->ci, f->n, 0, &fold, ct, &ca);
        be->fconv_forward(be, c->fplan, &ca);
        tb_bn_finalize_args fa;
        tb_fused_finalize_args(g, f->p, b, f->n, &fa);
        fa.running_mean = ba.running_mean, fa.running_var = ba.running_var;
        be->bn_finalize(be, c->fplan, &fa);
        if (b->fmode == TB_BNF_APPLY) {
            tb_tensor at[3];
            tb_bn_apply_args aa;
            tb_fused_apply_args(g, b, f->n, at, &aa);
            be->bn_apply(be, &aa);
        }
    }
    be->bn_backward(be, &ba, &gr);
}

/* ms[0], ms[1]: one run of the fused and the unfused way, the fastest
 * round of each. */
static void measure(const ft_node *f, double ms[2]) {
    tb_backend *be = f->be;
    double host[2];
    for (int k = 0; k < 2; k++) {
        run_way(f, k); /* lazy plans, first-touch */
        be->sync(be);
        double t0 = tb_now();
        run_way(f, k);
        host[k] = (tb_now() - t0) * 1e3;
        be->sync(be);
        ms[k] = -1.0;
    }
    tb_event *e0 = be->event_create(be, 1), *e1 = be->event_create(be, 1);
    for (int r = 0; r < FT_ROUNDS; r++)
        for (int k = 0; k < 2; k++) {
            be->stream_hold(be, NULL, tb_stream_hold_ms(host[k] * FT_REPS) + 0.05); /* the round back to back */
            be->event_record(be, e0, NULL);
            for (int i = 0; i < FT_REPS; i++) run_way(f, k);
            be->event_record(be, e1, NULL);
            be->event_wait(be, e1);
            double t = be->event_elapsed_ms(be, e0, e1) / FT_REPS;
            if (ms[k] < 0.0 || t < ms[k]) ms[k] = t;
        }
    be->event_destroy(be, e0);
    be->event_destroy(be, e1);
}

/* ms as a value holds it: "%.4f" read back (at most 1e6; the parser takes under 1e7) */
static double four_places(double ms) {
    char b[48];
    snprintf(b, sizeof b, "%.4f", ms < 1e6 ? ms : 1e6);
    return atof(b);
}

int tb_fused_time_pick(double ms_fused, double ms_unfused) { return ms_unfused < ms_fused * (1.0 - FT_MARGIN); }

void tb_fused_time_key(const tb_graph *g, int bi, int ci, int n, char *out, size_t len) {
    const tb_node *b = &g->nodes[bi], *c = &g->nodes[ci];
    const tb_act *x = &g->acts[c->in], *y = &g->acts[c->out];
    const int stats = c->fpeer >= 0 && g->nodes[c->fpeer].fmode != TB_BNF_UNFUSED;
    int z = 0; /* the residual: none, as it is (1), a shortcut BN folded into this apply (2) */
    if (b->in2 >= 0) {
        const tb_node *zb = &g->nodes[g->acts[b->in2].producer];
        z = zb->kind == TB_NODE_BN && zb->fmode == TB_BNF_ZFOLD ? 2 : 1;
    }
    snprintf(out, len, "fastest %s conv %d->%d k%d s%d p%d %dx%d->%dx%d%s bn relu%d z%d plan%d %s %s n%d",
             b->fmode == TB_BNF_FOLD ? "fold" : b->fmode == TB_BNF_ZFOLD ? "zfold" : "apply", c->conv.cin,
             c->conv.cout, c->conv.k, c->conv.stride, c->conv.pad, x->h, x->w, y->h, y->w,
             b->fmode == TB_BNF_FOLD ? (stats ? " stats" : " plain") : "", b->relu, z, b->plan_fcand,
             tb_dtype_name(g->dtype), tb_layout_name(g->layout), n);
}

void tb_fused_time_value(double ms_fused, double ms_unfused, char *out, size_t len) {
    /* the word from the times as written (rounded), so that the value parses as it was made */
    const double mf = four_places(ms_fused), mu = four_places(ms_unfused);
    snprintf(out, len, "%s %.4f %.4f", tb_fused_time_pick(mf, mu) ? "unfused" : "fused", mf, mu);
}

int tb_fused_time_parse(const char *v, int *unfused, double *ms_fused, double *ms_unfused) {
    char word[16], rest;
    double mf, mu;
    if (sscanf(v, "%15s %lf %lf %c", word, &mf, &mu, &rest) != 3) return -1;
    if (!(mf >= 0.0 && mu >= 0.0 && mf < 1e7 && mu < 1e7)) return -1;
    int u = strcmp(word, "unfused") == 0;
    if (!u && strcmp(word, "fused") != 0) return -1;
    if (u != tb_fused_time_pick(four_places(mf), four_places(mu))) return -1; /* the word its times give, as written */
    *unfused = u, *ms_fused = mf, *ms_unfused = mu;
    return 0;
}

/* What the timing did, for its line; the problems met so far (nodes of
 * one problem share its first node's times). */
#define FT_MEMO 256
typedef struct {
    int timed, problems, cached, unfused, untimed;
    double ms_chosen, ms_fused, ms_unfused;
    char names[160];
    int nmemo;
    struct {
        char key[200];
        double ms[2];
    } memo[FT_MEMO];
} ft_sum;

static void remember(ft_sum *s, const char *key, const double ms[2]) {
    if (s->nmemo == FT_MEMO) return;
    snprintf(s->memo[s->nmemo].key, sizeof s->memo[s->nmemo].key, "%s", key);
    s->memo[s->nmemo].ms[0] = ms[0], s->memo[s->nmemo].ms[1] = ms[1];
    s->nmemo++;
}

/* The times of problem key: met before in this graph, or kept in the
 * backend's store (1), else 0. */
static int known(tb_backend *be, ft_sum *s, const char *key, double ms[2]) {
    for (int i = 0; i < s->nmemo; i++)
        if (strcmp(s->memo[i].key, key) == 0) {
            ms[0] = s->memo[i].ms[0], ms[1] = s->memo[i].ms[1];
            return 1;
        }
    s->problems++;
    char v[64];
    int unfused;
    if (!be->choice_get(be, key, v, sizeof v)) return 0;
    if (tb_fused_time_parse(v, &unfused, &ms[0], &ms[1]) != 0) {
        tb_info("# fuse fastest: %s: \"%.40s\" is not a timed choice; timing again", key, v);
        return 0;
    }
    s->cached++;
    remember(s, key, ms);
    return 1;
}

/* f's scratch, zeroed; with tune, the unfused way's BN plan tuned (bn_tune:
 * its kernels chosen) before it is timed or run. */
static void ft_begin(ft_node *f, int tune) {
    tb_backend *be = f->be;
    const int C = f->g->acts[f->g->nodes[f->bi].in].c;
    f->scratch = be->alloc(be, 4 * (size_t)C * sizeof(tb_real));
    be->zero(be, f->scratch, 4 * (size_t)C * sizeof(tb_real));
    if (!tune) return;
    tb_tensor t[6];
    tb_bn_args ua;
    tb_bn_grads gr;
    bn_args(f, 1, t, &ua, &gr);
    be->bn_tune(be, &ua, &gr);
}

static void ft_end(ft_node *f) {
    f->be->sync(f->be);
    f->be->release(f->be, f->scratch);
    f->scratch = NULL;
}

/* Times (or finds in the backend's store) choice f; 1 when its second way
 * (unfused, or for a fold applied) is kept. need (NULL: none): makes what
 * the second way needs, only when it is timed or chosen; 0 from it keeps
 * the first way, the choice counted as not timed. */
static int decide(ft_node *f, ft_sum *s, int (*need)(ft_node *f)) {
    char key[200];
    tb_fused_time_key(f->g, f->bi, f->ci, f->n, key, sizeof key);
    double ms[2];
    int found = known(f->be, s, key, ms), second;
    if (need && (!found || tb_fused_time_pick(ms[0], ms[1])) && !need(f)) {
        s->untimed++;
        return 0;
    }
    if (!found) {
        char v[64];
        ft_begin(f, !f->fold);
        measure(f, ms);
        ft_end(f);
        tb_fused_time_value(ms[0], ms[1], v, sizeof v);
        f->be->choice_put(f->be, key, v);
        if (tb_fused_time_parse(v, &second, &ms[0], &ms[1]) != 0) /* the times as kept */
            TB_FATAL("fuse fastest: the value \"%s\" made for %s does not parse back", v, key);
        remember(s, key, ms);
    }
    second = tb_fused_time_pick(ms[0], ms[1]);
    tb_node *b = &f->g->nodes[f->bi];
    b->ftimed |= f->fold ? 1 : 2;
    b->ftime_ms[!f->fold][0] = ms[0], b->ftime_ms[!f->fold][1] = ms[1];
    if (found && second && !f->fold) { /* unfused from the store: its BN plan's kernels chosen before it runs */
        ft_begin(f, 1);
        ft_end(f);
    }
    s->timed++;
    s->ms_fused += ms[0], s->ms_unfused += ms[1];
    s->ms_chosen += second ? ms[1] : ms[0];
    if (second) {
        size_t used = strlen(s->names);
        if (s->unfused < 4)
            snprintf(s->names + used, sizeof s->names - used, "%s%s", used ? ", " : "", f->g->nodes[f->bi].name);
        else if (s->unfused == 4)
            snprintf(s->names + used, sizeof s->names - used, ", ...");
        s->unfused++;
    }
    return second;
}

/* BN b runs unfused from now on: on its second plan, its conv unfused. */
static void to_unfused(tb_graph *g, tb_backend *be, tb_node *b) {
    b->fmode = TB_BNF_UNFUSED;
    if (b->has_plan_alt) {
        be->bn_plan_free(be, b->plan);
        b->plan = b->plan_alt;
        b->plan_alt = NULL;
        b->has_plan_alt = 0;
        b->plan_fcand = TB_BNF_UNFUSED;
    }
    tb_node *c = b->fstats >= 0 ? &g->nodes[b->fstats] : NULL;
    if (c && c->fconv) {
        if (c->fplan) be->fconv_plan_free(be, c->fplan);
        c->fplan = NULL;
        c->fconv = 0;
    }
}

/* 1 when BN b has one value per channel at the largest batch: nothing to
 * time (a training step refuses it, with its own line). */
static int one_per_channel(const tb_graph *g, const tb_node *b) {
    const tb_act *x = &g->acts[b->in];
    return (size_t)g->max_batch * x->h * x->w < 2;
}

/* A fold's second way: conv ci's conv + statistics without the prologue
 * (f->plan2), made now where ci makes statistics; 0 when the backend has
 * none (the fold then stays, untimed). */
static int plan_without_prologue(ft_node *f) {
    tb_graph *g = f->g;
    const tb_node *d = &g->nodes[f->ci];
    const int bo = d->fpeer >= 0 && g->nodes[d->fpeer].fmode != TB_BNF_UNFUSED ? d->fpeer : -1;
    if (bo < 0) return 0; /* a fold lives only where its conv makes statistics (plan_conv): never here */
    tb_tensor t[8];
    tb_bn_fold fold;
    tb_fconv_args a;
    tb_bn_finalize_args fa;
    tb_fused_conv_args(g, f->p, f->ci, f->n, 0, &fold, t, &a);
    tb_fused_finalize_args(g, f->p, &g->nodes[bo], f->n, &fa);
    a.fin = &fa;
    unsigned got = 0;
    f->plan2 = f->be->fconv_plan(f->be, &a, TB_FCONV_FWD, &got);
    f->has_plan2 = (got & TB_FCONV_FWD) != 0;
    if (!f->has_plan2 && f->plan2) f->be->fconv_plan_free(f->be, f->plan2);
    if (!f->has_plan2) f->plan2 = NULL;
    return f->has_plan2;
}

/* BN a is applied from now on, conv d reading its output on f's plan2. */
static void to_applied(ft_node *f) {
    tb_node *a = &f->g->nodes[f->bi], *d = &f->g->nodes[f->ci];
    a->fmode = TB_BNF_APPLY;
    d->fpro = -1;
    if (d->fplan) f->be->fconv_plan_free(f->be, d->fplan);
    d->fplan = f->plan2;
    d->fconv = f->has_plan2;
    f->plan2 = NULL, f->has_plan2 = 0;
}

/* The folds: each BN folded into its conv's prologue timed against applied. */
static void time_folds(tb_graph *g, tb_backend *be, const tb_graph_params *p, ft_sum *s) {
    for (int i = 0; i < g->nnodes; i++) {
        tb_node *a = &g->nodes[i];
        if (a->kind != TB_NODE_BN || a->fmode != TB_BNF_FOLD) continue;
        ft_node f = {g, be, p, i, a->fpeer, g->max_batch, 1, NULL, 0, NULL};
        if (g->nodes[a->fpeer].fpro != i || one_per_channel(g, a)) {
            s->untimed++;
            continue;
        }
        if (decide(&f, s, plan_without_prologue)) /* the second plan made only to be timed or run */
            to_applied(&f);
        else if (f.has_plan2)
            be->fconv_plan_free(be, f.plan2);
    }
}

/* 1 when BN node i is timed in this pass (block ends first, then the rest). */
static int timed_now(const tb_graph *g, int i, int pass) {
    const tb_node *b = &g->nodes[i];
    if (b->kind != TB_NODE_BN || !b->has_plan_alt || (b->fmode != TB_BNF_APPLY && b->fmode != TB_BNF_ZFOLD)) return 0;
    if (one_per_channel(g, b)) return 0;
    const tb_node *c = &g->nodes[b->fstats];
    if (!c->fconv || c->fpro >= 0) return 0;
    const int block_end = b->fmode == TB_BNF_APPLY && b->in2 >= 0;
    return pass == 0 ? block_end : !block_end;
}

/* The applied BNs (and those folded into their block end): each timed
 * against unfused, block ends first. */
static void time_applied(tb_graph *g, tb_backend *be, const tb_graph_params *p, ft_sum *s) {
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < g->nnodes; i++) {
            if (!timed_now(g, i, pass)) continue;
            tb_node *b = &g->nodes[i];
            ft_node f = {g, be, p, i, b->fstats, g->max_batch, 0, NULL, 0, NULL};
            if (!decide(&f, s, NULL)) continue;
            to_unfused(g, be, b);
            if (b->in2 < 0) continue;
            tb_node *zb = &g->nodes[g->acts[b->in2].producer]; /* its shortcut's BN: applied now */
            if (zb->kind == TB_NODE_BN && zb->fmode == TB_BNF_ZFOLD) zb->fmode = TB_BNF_APPLY;
        }
    for (int i = 0; i < g->nnodes; i++) { /* left unfused by the backend: the unfused plan; the rest keep theirs */
        tb_node *b = &g->nodes[i];
        if (b->kind != TB_NODE_BN || !b->has_plan_alt) continue;
        if (b->fmode == TB_BNF_UNFUSED) {
            ft_node f = {g, be, p, i, -1, g->max_batch, 0, NULL, 0, NULL};
            if (!one_per_channel(g, b)) { /* its second plan tuned */
                ft_begin(&f, 1);
                ft_end(&f);
            }
            to_unfused(g, be, b);
            continue;
        }
        if (b->fmode != TB_BNF_FOLD && (g->nodes[b->fstats].fpro >= 0 || one_per_channel(g, b))) s->untimed++;
        be->bn_plan_free(be, b->plan_alt);
        b->plan_alt = NULL;
        b->has_plan_alt = 0;
    }
}

/* One line for a kind of choice: what is timed (noun, then how), what the
 * first way, the second and those left untimed are called. */
static void say(const ft_sum *s, int batch, const char *noun, const char *how, const char *first, const char *second,
                const char *chose, const char *untimed) {
    tb_info("# fuse fastest: %d %s%s timed%s (forward + backward at batch %d; %d problems, %d of them from the plan "
            "cache): %d %s%s%s%s; these ops %.3f ms a step as chosen, %.3f ms all %s, %.3f ms all %s; %d not timed "
            "(%s)",
            s->timed, noun, s->timed == 1 ? "" : "s", how, batch, s->problems, s->cached, s->unfused, chose,
            s->unfused ? " (" : "", s->names, s->unfused ? ")" : "", s->ms_chosen, s->ms_fused, first, s->ms_unfused,
            second, s->untimed, untimed);
}

void tb_fused_time(tb_graph *g, tb_backend *be, const tb_graph_params *p) {
    ft_sum *s = calloc(2, sizeof *s); /* folds, applied */
    if (!s) TB_FATAL("out of host memory");
    time_folds(g, be, p, &s[0]);
    time_applied(g, be, p, &s[1]);
    if (s[0].timed || s[0].untimed)
        say(&s[0], g->max_batch, "fold", ", the BN in the next conv's prologue against applied", "folded", "applied",
            "applied instead", "no conv + statistics without the prologue, or one value per channel");
    say(&s[1], g->max_batch, "BatchNorm", " on their conv's statistics and unfused", "fused", "unfused", "unfused",
        "their conv has a BN in its prologue, or one value per channel");
    free(s);
}
