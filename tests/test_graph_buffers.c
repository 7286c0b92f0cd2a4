/* test_graph_buffers.c - does every op read what the op before it wrote?
 *
 * Runs training steps of ResNet-50 on the CPU backend with every op of the
 * backend table wrapped, and checks two things about the buffers:
 *
 *  1. Lifetimes. The hash of every activation is taken right after the
 *     forward op that wrote it, of every gradient right after the backward
 *     op that wrote it, and of the BatchNorm saved statistics and the
 *     weights after forward. Right before each op, the activations, saved
 *     statistics, weights and gradients it reads (dy, and dx when it
 *     accumulates) are hashed again and must be unchanged; after backward,
 *     every activation and saved statistic must still be what forward wrote.
 *     A scratch buffer, workspace or gradient-arena slot shared by two live
 *     tensors shows up here, named by node.
 *  2. Fresh buffers. Every op is run a second time, on a second CPU backend
 *     whose scratch is filled with NaN, on private copies of its inputs
 *     taken before the real call (outputs it overwrites are NaN-filled,
 *     outputs it adds to are copies), and its outputs must equal the real
 *     call's bit for bit. An op that reads stale scratch, its own output
 *     through an alias, or anything not among its arguments differs here.
 *
 * Both checks run under several cuts of the work: 1, 2, 3 and 24 OpenMP
 * threads (more threads than cores: what a many-core machine picks), a
 * scratch cap of 128 KiB (convs cut into many bands), and GEMM grouping
 * forced off and on (conv_min_cols 1 and 1<<20); with 2 and 24 threads two
 * steps, so the second reads scratch the first left behind. Geometries: the
 * golden tests' ResNet-50 cases (batch 2 at 64x48, batch 4 at 96x96), fused
 * and unfused.
 * Exit 0 when every check passes, 1 otherwise.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cpu/cpu_backend.h"
#include "model/cpu/cpu_internal.h" /* split knobs and the scratch to poison */
#include "model/model.h"
#include "core/log.h"
#include "core/rng.h"
#include "tests/tb_test.h"

/* ---- state of the wrapped run ----------------------------------------------- */

static tb_backend g_real;    /* the real CPU table (copied before wrapping) */
static tb_backend *g_fresh;  /* second backend, same cut, NaN scratch */
static tb_model *g_m;
static uint64_t *g_act_hash; /* [nacts] after the producer's forward op */
static uint64_t *g_grad_hash;/* [nacts] after the backward op that wrote it */
static unsigned char *g_grad_valid;
static uint64_t g_params_hash;
static int g_fwd_next;       /* node whose forward op comes next */
static int g_bwd_node;       /* node whose backward ops run now */
static int g_bwd_ops_left;   /* backward ops still to come for g_bwd_node */
static int g_lifetime_bad, g_fresh_bad, g_ops_checked;
static const char *g_config;

static uint64_t hash_bytes(const void *p, size_t bytes) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 29;
    }
    for (; i < bytes; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static size_t act_bytes(int id) {
    const tb_act *a = &g_m->g.acts[id];
    return a->bytes_per_sample * (size_t)g_m->batch;
}

static uint64_t act_hash(int id) { return hash_bytes(g_m->g.acts[id].data, act_bytes(id)); }
static uint64_t grad_hash(int id) { return hash_bytes(g_m->g.acts[id].grad, act_bytes(id)); }

static const char *producer_name(int id) {
    int p = g_m->g.acts[id].producer;
    return p < 0 ? "the input" : g_m->g.nodes[p].name;
}

static int node_is_bn(int i) { return g_m->g.nodes[i].kind == TB_NODE_BN; }
static uint64_t stats_hash(int i) {
    const tb_node *nd = &g_m->g.nodes[i];
    size_t c = (size_t)g_m->pt.items[nd->param].numel;
    return hash_bytes(nd->save_mean, 2 * c * sizeof(tb_real));
}
static uint64_t *g_stats_hash; /* [nnodes] */

/* ---- 1. lifetimes ------------------------------------------------------------- */

static void expect_act(int id, const char *when) {
    if (id < 0) return;
    if (act_hash(id) != g_act_hash[id]) {
        g_lifetime_bad++;
        printf("FAIL [%s] activation of %s changed since forward wrote it (%s)\n", g_config,
               producer_name(id), when);
    }
}

static void expect_grad(int id, const char *when) {
    if (id < 0 || !g_m->g.acts[id].need_grad) return;
    if (!g_grad_valid[id]) {
        g_lifetime_bad++;
        printf("FAIL [%s] gradient of %s read before anything wrote it (%s)\n", g_config,
               producer_name(id), when);
    } else if (grad_hash(id) != g_grad_hash[id]) {
        g_lifetime_bad++;
        printf("FAIL [%s] gradient of %s changed since it was written (%s)\n", g_config,
               producer_name(id), when);
    }
}

static void wrote_grad(int id) {
    if (id < 0 || !g_m->g.acts[id].need_grad) return;
    g_grad_hash[id] = grad_hash(id);
    g_grad_valid[id] = 1;
}

/* Called by every forward op wrapper after the real op. */
static void forward_done(void) {
    const tb_node *nd = &g_m->g.nodes[g_fwd_next];
    g_act_hash[nd->out] = act_hash(nd->out);
    if (node_is_bn(g_fwd_next)) g_stats_hash[g_fwd_next] = stats_hash(g_fwd_next);
    g_fwd_next++;
}

/* Number of backend calls node i makes in backward (graph.c's loop). */
static int backward_ops(int i) {
    const tb_node *nd = &g_m->g.nodes[i];
    int has_dx = nd->in >= 0 && g_m->g.acts[nd->in].need_grad;
    switch (nd->kind) {
    case TB_NODE_CONV: return 1 + has_dx;
    case TB_NODE_BN: case TB_NODE_ADD: case TB_NODE_LINEAR: return 1;
    default: return has_dx;
    }
}

/* Called by every backward op wrapper before the real op: which node it
 * belongs to (graph.c runs nodes last to first), and the reads checked. */
static int backward_begin(const char *op, int reads_dx, int reads_dz) {
    if (g_bwd_ops_left == 0) {
        do g_bwd_node--;
        while (g_bwd_node >= 0 && backward_ops(g_bwd_node) == 0);
        TB_ASSERT(g_bwd_node >= 0);
        g_bwd_ops_left = backward_ops(g_bwd_node);
    }
    g_bwd_ops_left--;
    const tb_node *nd = &g_m->g.nodes[g_bwd_node];
    char when[160];
    snprintf(when, sizeof when, "before %s of %s", op, nd->name);
    expect_act(nd->in, when);
    expect_act(nd->in2, when);
    expect_act(nd->out, when);
    expect_grad(nd->out, when);
    if (reads_dx) expect_grad(nd->in, when);
    if (reads_dz) expect_grad(nd->in2, when);
    if (node_is_bn(g_bwd_node) && stats_hash(g_bwd_node) != g_stats_hash[g_bwd_node]) {
        g_lifetime_bad++;
        printf("FAIL [%s] saved batch statistics of %s changed since forward (%s)\n", g_config,
               nd->name, when);
    }
    if (hash_bytes(g_m->params, g_m->pt.n_train * sizeof(tb_real)) != g_params_hash) {
        g_lifetime_bad++;
        printf("FAIL [%s] the weights changed between forward and %s\n", g_config, when);
    }
    return g_bwd_node;
}

static void backward_end(int node, int wrote_dx, int wrote_dz) {
    const tb_node *nd = &g_m->g.nodes[node];
    if (wrote_dx) wrote_grad(nd->in);
    if (wrote_dz) wrote_grad(nd->in2);
}

/* ---- 2. fresh buffers --------------------------------------------------------- */

static void *xalloc(size_t bytes) {
    void *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    TB_ASSERT(p);
    return p;
}

static void *dup_bytes(const void *p, size_t bytes) {
    void *q = xalloc(bytes ? bytes : 1);
    if (bytes) memcpy(q, p, bytes);
    return q;
}

static void *nan_bytes(size_t bytes) {
    tb_real *q = xalloc(bytes ? bytes : 1);
    for (size_t i = 0; i < bytes / sizeof(tb_real); i++) q[i] = NAN;
    return q;
}

static tb_tensor dup_t(const tb_tensor *t) {
    tb_tensor c = *t;
    c.data = dup_bytes(t->data, tb_tensor_numel(t) * sizeof(tb_real));
    return c;
}

/* Output of the fresh run: a copy when the op adds to it, else NaN. */
static tb_tensor out_t(const tb_tensor *t, int accumulate) {
    if (accumulate) return dup_t(t);
    tb_tensor c = *t;
    c.data = nan_bytes(tb_tensor_numel(t) * sizeof(tb_real));
    return c;
}

static void same(const char *op, const char *what, const void *real, const void *fresh,
                 size_t n) {
    if (memcmp(real, fresh, n * sizeof(tb_real)) == 0) return;
    const tb_real *a = real, *b = fresh;
    double worst = 0.0;
    size_t at = 0, differ = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(a[i] == b[i]) && !(a[i] != a[i] && b[i] != b[i])) {
            differ++;
            if (!(d <= worst)) worst = d, at = i;
        }
    }
    if (!differ) return; /* same NaNs, different payloads */
    g_fresh_bad++;
    printf("FAIL [%s] %s: %s differs from a run on fresh buffers at %zu of %zu elements "
           "(worst |diff| %.3g at %zu: %.9g vs %.9g)\n",
           g_config, op, what, differ, n, worst, at, (double)a[at], (double)b[at]);
}

static void same_t(const char *op, const char *what, const tb_tensor *real,
                   const tb_tensor *fresh) {
    same(op, what, real->data, fresh->data, tb_tensor_numel(real));
}

static void free_t(tb_tensor *t) { free(t->data); }

/* ---- the wrappers ------------------------------------------------------------- */

static void w_conv_forward(tb_backend *be, void *plan, const tb_conv_geom *g, const tb_tensor *x,
                           const tb_tensor *w, const tb_tensor *y) {
    tb_tensor X = dup_t(x), W = dup_t(w), Y = out_t(y, 0);
    g_real.conv_forward(be, plan, g, x, w, y);
    g_real.conv_forward(g_fresh, NULL, g, &X, &W, &Y);
    same_t("conv_forward", "y", y, &Y);
    free_t(&X), free_t(&W), free_t(&Y);
    g_ops_checked++;
    forward_done();
}

static void w_conv_backward_data(tb_backend *be, void *plan, const tb_conv_geom *g,
                                 const tb_tensor *dy, const tb_tensor *w, const tb_tensor *dx,
                                 int accumulate) {
    int node = backward_begin("conv_backward_data", accumulate, 0);
    tb_tensor DY = dup_t(dy), W = dup_t(w), DX = out_t(dx, accumulate);
    g_real.conv_backward_data(be, plan, g, dy, w, dx, accumulate);
    g_real.conv_backward_data(g_fresh, NULL, g, &DY, &W, &DX, accumulate);
    same_t("conv_backward_data", "dx", dx, &DX);
    free_t(&DY), free_t(&W), free_t(&DX);
    g_ops_checked++;
    backward_end(node, 1, 0);
}

static void w_conv_backward_filter(tb_backend *be, void *plan, const tb_conv_geom *g,
                                   const tb_tensor *x, const tb_tensor *dy, const tb_tensor *dw,
                                   int accumulate) {
    backward_begin("conv_backward_filter", 0, 0);
    tb_tensor X = dup_t(x), DY = dup_t(dy), DW = out_t(dw, accumulate);
    g_real.conv_backward_filter(be, plan, g, x, dy, dw, accumulate);
    g_real.conv_backward_filter(g_fresh, NULL, g, &X, &DY, &DW, accumulate);
    same_t("conv_backward_filter", "dw", dw, &DW);
    free_t(&X), free_t(&DY), free_t(&DW);
    g_ops_checked++;
}

static void w_bn_forward_train(tb_backend *be, const tb_bn_args *a) {
    size_t c = (size_t)a->x->c, cb = c * sizeof(tb_real);
    tb_tensor X = dup_t(a->x), Y = out_t(a->y, 0), Z;
    if (a->z) Z = dup_t(a->z);
    tb_bn_args f = *a;
    f.x = &X, f.y = &Y, f.z = a->z ? &Z : NULL;
    f.gamma = dup_bytes(a->gamma, cb), f.beta = dup_bytes(a->beta, cb);
    f.running_mean = dup_bytes(a->running_mean, cb), f.running_var = dup_bytes(a->running_var, cb);
    f.save_mean = nan_bytes(cb), f.save_invstd = nan_bytes(cb);
    g_real.bn_forward_train(be, a);
    g_real.bn_forward_train(g_fresh, &f);
    same_t("bn_forward_train", "y", a->y, &Y);
    same("bn_forward_train", "save_mean", a->save_mean, f.save_mean, c);
    same("bn_forward_train", "save_invstd", a->save_invstd, f.save_invstd, c);
    same("bn_forward_train", "running_mean", a->running_mean, f.running_mean, c);
    same("bn_forward_train", "running_var", a->running_var, f.running_var, c);
    free_t(&X), free_t(&Y);
    if (a->z) free_t(&Z);
    free((void *)f.gamma), free((void *)f.beta), free(f.running_mean), free(f.running_var);
    free(f.save_mean), free(f.save_invstd);
    g_ops_checked++;
    forward_done();
}

static void w_bn_backward(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g) {
    int node = backward_begin("bn_backward", g->accumulate_dx, g->dz && g->accumulate_dz);
    size_t c = (size_t)a->x->c, cb = c * sizeof(tb_real);
    tb_tensor X = dup_t(a->x), Y = dup_t(a->y), Z, DY = dup_t(g->dy);
    tb_tensor DX = out_t(g->dx, g->accumulate_dx), DZ;
    if (a->z) Z = dup_t(a->z);
    if (g->dz) DZ = out_t(g->dz, g->accumulate_dz);
    tb_bn_args f = *a;
    f.x = &X, f.y = &Y, f.z = a->z ? &Z : NULL;
    f.gamma = dup_bytes(a->gamma, cb), f.beta = dup_bytes(a->beta, cb);
    f.running_mean = dup_bytes(a->running_mean, cb), f.running_var = dup_bytes(a->running_var, cb);
    f.save_mean = dup_bytes(a->save_mean, cb), f.save_invstd = dup_bytes(a->save_invstd, cb);
    tb_bn_grads fg = *g;
    fg.dy = &DY, fg.dx = &DX, fg.dz = g->dz ? &DZ : NULL;
    fg.dgamma = nan_bytes(cb), fg.dbeta = nan_bytes(cb);
    g_real.bn_backward(be, a, g);
    g_real.bn_backward(g_fresh, &f, &fg);
    same_t("bn_backward", "dx", g->dx, &DX);
    if (g->dz) same_t("bn_backward", "dz", g->dz, &DZ);
    same("bn_backward", "dgamma", g->dgamma, fg.dgamma, c);
    same("bn_backward", "dbeta", g->dbeta, fg.dbeta, c);
    free_t(&X), free_t(&Y), free_t(&DY), free_t(&DX);
    if (a->z) free_t(&Z);
    if (g->dz) free_t(&DZ);
    free((void *)f.gamma), free((void *)f.beta), free(f.running_mean), free(f.running_var);
    free(f.save_mean), free(f.save_invstd), free(fg.dgamma), free(fg.dbeta);
    g_ops_checked++;
    backward_end(node, 1, g->dz != NULL);
}

static void w_relu_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y) {
    tb_tensor X = dup_t(x), Y = out_t(y, 0);
    g_real.relu_forward(be, x, y);
    g_real.relu_forward(g_fresh, &X, &Y);
    same_t("relu_forward", "y", y, &Y);
    free_t(&X), free_t(&Y);
    g_ops_checked++;
    forward_done();
}

static void w_relu_backward(tb_backend *be, const tb_tensor *y, const tb_tensor *dy,
                            const tb_tensor *dx, int accumulate) {
    int node = backward_begin("relu_backward", accumulate, 0);
    tb_tensor Y = dup_t(y), DY = dup_t(dy), DX = out_t(dx, accumulate);
    g_real.relu_backward(be, y, dy, dx, accumulate);
    g_real.relu_backward(g_fresh, &Y, &DY, &DX, accumulate);
    same_t("relu_backward", "dx", dx, &DX);
    free_t(&Y), free_t(&DY), free_t(&DX);
    g_ops_checked++;
    backward_end(node, 1, 0);
}

static void w_add_forward(tb_backend *be, const tb_tensor *a, const tb_tensor *b,
                          const tb_tensor *y) {
    tb_tensor A = dup_t(a), B = dup_t(b), Y = out_t(y, 0);
    g_real.add_forward(be, a, b, y);
    g_real.add_forward(g_fresh, &A, &B, &Y);
    same_t("add_forward", "y", y, &Y);
    free_t(&A), free_t(&B), free_t(&Y);
    g_ops_checked++;
    forward_done();
}

static void w_add_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *da, int acc_a,
                           const tb_tensor *db, int acc_b) {
    int node = backward_begin("add_backward", acc_a, acc_b);
    tb_tensor DY = dup_t(dy), DA = out_t(da, acc_a), DB = out_t(db, acc_b);
    g_real.add_backward(be, dy, da, acc_a, db, acc_b);
    g_real.add_backward(g_fresh, &DY, &DA, acc_a, &DB, acc_b);
    same_t("add_backward", "da", da, &DA);
    same_t("add_backward", "db", db, &DB);
    free_t(&DY), free_t(&DA), free_t(&DB);
    g_ops_checked++;
    backward_end(node, 1, 1);
}

static void w_maxpool_forward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                              const tb_tensor *y) {
    tb_tensor X = dup_t(x), Y = out_t(y, 0);
    g_real.maxpool_forward(be, g, x, y);
    g_real.maxpool_forward(g_fresh, g, &X, &Y);
    same_t("maxpool_forward", "y", y, &Y);
    free_t(&X), free_t(&Y);
    g_ops_checked++;
    forward_done();
}

static void w_maxpool_backward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                               const tb_tensor *y, const tb_tensor *dy, const tb_tensor *dx,
                               int accumulate) {
    int node = backward_begin("maxpool_backward", accumulate, 0);
    tb_tensor X = dup_t(x), Y = dup_t(y), DY = dup_t(dy), DX = out_t(dx, accumulate);
    g_real.maxpool_backward(be, g, x, y, dy, dx, accumulate);
    g_real.maxpool_backward(g_fresh, g, &X, &Y, &DY, &DX, accumulate);
    same_t("maxpool_backward", "dx", dx, &DX);
    free_t(&X), free_t(&Y), free_t(&DY), free_t(&DX);
    g_ops_checked++;
    backward_end(node, 1, 0);
}

static void w_avgpool_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y) {
    tb_tensor X = dup_t(x), Y = out_t(y, 0);
    g_real.avgpool_forward(be, x, y);
    g_real.avgpool_forward(g_fresh, &X, &Y);
    same_t("avgpool_forward", "y", y, &Y);
    free_t(&X), free_t(&Y);
    g_ops_checked++;
    forward_done();
}

static void w_avgpool_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *dx,
                               int accumulate) {
    int node = backward_begin("avgpool_backward", accumulate, 0);
    tb_tensor DY = dup_t(dy), DX = out_t(dx, accumulate);
    g_real.avgpool_backward(be, dy, dx, accumulate);
    g_real.avgpool_backward(g_fresh, &DY, &DX, accumulate);
    same_t("avgpool_backward", "dx", dx, &DX);
    free_t(&DY), free_t(&DX);
    g_ops_checked++;
    backward_end(node, 1, 0);
}

static void w_linear_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                             const tb_real *b, const tb_tensor *y) {
    tb_tensor X = dup_t(x), W = dup_t(w), Y = out_t(y, 0);
    tb_real *B = dup_bytes(b, (size_t)w->n * sizeof(tb_real));
    g_real.linear_forward(be, x, w, b, y);
    g_real.linear_forward(g_fresh, &X, &W, B, &Y);
    same_t("linear_forward", "y", y, &Y);
    free_t(&X), free_t(&W), free_t(&Y), free(B);
    g_ops_checked++;
    forward_done();
}

static void w_linear_backward(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                              const tb_tensor *dy, const tb_tensor *dx, int accumulate_dx,
                              const tb_tensor *dw, tb_real *db) {
    int node = backward_begin("linear_backward", dx && accumulate_dx, 0);
    size_t m = (size_t)w->n;
    tb_tensor X = dup_t(x), W = dup_t(w), DY = dup_t(dy), DW = out_t(dw, 0), DX;
    if (dx) DX = out_t(dx, accumulate_dx);
    tb_real *DB = nan_bytes(m * sizeof(tb_real));
    g_real.linear_backward(be, x, w, dy, dx, accumulate_dx, dw, db);
    g_real.linear_backward(g_fresh, &X, &W, &DY, dx ? &DX : NULL, accumulate_dx, &DW, DB);
    if (dx) same_t("linear_backward", "dx", dx, &DX);
    same_t("linear_backward", "dw", dw, &DW);
    same("linear_backward", "db", db, DB, m);
    free_t(&X), free_t(&W), free_t(&DY), free_t(&DW), free(DB);
    if (dx) free_t(&DX);
    g_ops_checked++;
    backward_end(node, dx != NULL, 0);
}

static void w_softmax_xent(tb_backend *be, const tb_tensor *logits, const int32_t *labels,
                           double smoothing, tb_step_scalars *sc, const tb_tensor *dlogits) {
    /* forward is over: what backward will read is fixed from here on */
    g_params_hash = hash_bytes(g_m->params, g_m->pt.n_train * sizeof(tb_real));
    tb_tensor L = dup_t(logits), DL = out_t(dlogits, 0);
    tb_step_scalars fsc = *sc; /* the fresh run reads the same scalars (CPU: host memory) */
    fsc.loss = NAN;
    g_real.softmax_xent(be, logits, labels, smoothing, sc, dlogits);
    g_real.softmax_xent(g_fresh, &L, labels, smoothing, &fsc, &DL);
    same("softmax_xent", "loss", &sc->loss, &fsc.loss, 1);
    same_t("softmax_xent", "dlogits", dlogits, &DL);
    free_t(&L), free_t(&DL);
    g_ops_checked++;
    wrote_grad(g_m->g.output);
}

static void wrap(tb_backend *be) {
    g_real = *be;
    be->conv_forward = w_conv_forward;
    be->conv_backward_data = w_conv_backward_data;
    be->conv_backward_filter = w_conv_backward_filter;
    be->bn_forward_train = w_bn_forward_train;
    be->bn_backward = w_bn_backward;
    be->relu_forward = w_relu_forward;
    be->relu_backward = w_relu_backward;
    be->add_forward = w_add_forward;
    be->add_backward = w_add_backward;
    be->maxpool_forward = w_maxpool_forward;
    be->maxpool_backward = w_maxpool_backward;
    be->avgpool_forward = w_avgpool_forward;
    be->avgpool_backward = w_avgpool_backward;
    be->linear_forward = w_linear_forward;
    be->linear_backward = w_linear_backward;
    be->softmax_xent = w_softmax_xent;
}

/* ---- one configuration -------------------------------------------------------- */

typedef struct {
    const char *name;
    int threads;
    size_t ws_cap_bytes;  /* 0: the backend's default */
    int conv_min_cols;    /* 0: the backend's default */
} cut;

static tb_backend *make_backend(const cut *c) {
    tb_backend_opts bo = {.threads = c->threads};
    tb_backend *be = tb_cpu_backend_create(&bo);
    cpu_state *st = cpu_state_of(be);
    if (c->ws_cap_bytes) st->ws_cap_bytes = c->ws_cap_bytes;
    if (c->conv_min_cols) st->conv_min_cols = c->conv_min_cols;
    return be;
}

static void run_case(const cut *c, int n, int h, int w, int classes, int fuse, int steps) {
    char label[160];
    snprintf(label, sizeof label, "%s, resnet50 %dx3x%dx%d%s, %d step%s", c->name, n, h, w,
             fuse ? "" : " unfused", steps, steps > 1 ? "s" : "");
    g_config = label;
    tb_backend *be = make_backend(c);
    g_fresh = make_backend(c);
    tb_resnet_config cfg;
    TB_ASSERT(tb_resnet_config_init(&cfg, "resnet50", classes) == 0);
    tb_model_opts o = tb_model_default_opts();
    o.fuse = fuse;
    g_m = tb_model_create(&cfg, be, n, h, w, &o);
    tb_model_init(g_m, 24);
    /* the fresh backend's scratch: as large as the model's plans made the
     * real one, all NaN, so a read of stale scratch shows */
    cpu_state *rs = cpu_state_of(be), *fs = cpu_state_of(g_fresh);
    tb_real *ws = cpu_workspace(fs, rs->ws_stride);
    for (size_t i = 0; i < fs->ws_stride * (size_t)fs->threads; i++) ws[i] = NAN;
    wrap(be);

    size_t na = (size_t)g_m->g.nacts, nn = (size_t)g_m->g.nnodes;
    g_act_hash = calloc(na, sizeof *g_act_hash);
    g_grad_hash = calloc(na, sizeof *g_grad_hash);
    g_grad_valid = calloc(na, 1);
    g_stats_hash = calloc(nn, sizeof *g_stats_hash);
    TB_ASSERT(g_act_hash && g_grad_hash && g_grad_valid && g_stats_hash);

    tb_rng rng;
    tb_rng_seed(&rng, 7, 0);
    size_t ni = (size_t)n * 3 * h * w;
    float *img = malloc(ni * sizeof *img);
    int32_t *lab = malloc((size_t)n * sizeof *lab);
    TB_ASSERT(img && lab);
    int lifetime0 = g_lifetime_bad, fresh0 = g_fresh_bad, ops0 = g_ops_checked;
    for (int step = 0; step < steps; step++) {
        for (size_t i = 0; i < ni; i++) img[i] = (float)tb_rng_normal(&rng);
        for (int i = 0; i < n; i++) lab[i] = (int32_t)tb_rng_below(&rng, (uint64_t)classes);
        tb_model_set_batch(g_m, img, lab, n);
        g_act_hash[g_m->g.input] = act_hash(g_m->g.input);
        memset(g_grad_valid, 0, na);
        g_fwd_next = 0;
        tb_model_forward(g_m, 1);
        TB_ASSERT(g_fwd_next == g_m->g.nnodes);
        tb_model_loss(g_m, 0.1, 1.0);
        g_bwd_node = g_m->g.nnodes;
        g_bwd_ops_left = 0;
        tb_model_backward(g_m, NULL, NULL);
        for (int i = 0; i < g_m->g.nnodes; i++) {
            char when[160];
            snprintf(when, sizeof when, "after backward, step %d", step);
            expect_act(g_m->g.nodes[i].out, when);
            if (node_is_bn(i) && stats_hash(i) != g_stats_hash[i]) {
                g_lifetime_bad++;
                printf("FAIL [%s] saved batch statistics of %s changed (%s)\n", g_config,
                       g_m->g.nodes[i].name, when);
            }
        }
        tb_sgd_args sgd = {0.01, 0.9, 1, 1.0};
        tb_model_sgd_step(g_m, &sgd, 1e-4, 0);
    }
    TB_CHECK(g_lifetime_bad == lifetime0, "[%s] %d tensors changed while still needed", label,
             g_lifetime_bad - lifetime0);
    TB_CHECK(g_fresh_bad == fresh0, "[%s] %d op outputs differ on fresh buffers", label,
             g_fresh_bad - fresh0);
    printf("%-64s %5d ops, %2d threads, scratch %6.1f MiB/thread: %s\n", label,
           g_ops_checked - ops0, rs->threads, (double)rs->ws_stride * sizeof(tb_real) / (1 << 20),
           g_lifetime_bad == lifetime0 && g_fresh_bad == fresh0 ? "PASS" : "FAIL");
    fflush(stdout);
    free(img), free(lab);
    free(g_act_hash), free(g_grad_hash), free(g_grad_valid), free(g_stats_hash);
    tb_model_destroy(g_m);
    g_m = NULL;
    be->destroy(be);
    g_fresh->destroy(g_fresh);
}

int main(void) {
    static const cut cuts[] = {
        {"1 thread", 1, 0, 0},
        {"2 threads (golden tests)", 2, 0, 0},
        {"3 threads", 3, 0, 0},
        {"24 threads (many-core)", 24, 0, 0},
        {"2 threads, 128 KiB scratch cap", 2, (size_t)128 << 10, 0},
        {"3 threads, no grouping", 3, 0, 1},
        {"3 threads, grouping always", 3, 0, 1 << 20},
    };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
        run_case(&cuts[i], 2, 64, 48, 7, 1, i == 1 || i == 3 ? 2 : 1);
    run_case(&cuts[1], 4, 96, 96, 23, 1, 1);
    run_case(&cuts[3], 4, 96, 96, 23, 1, 1);
    run_case(&cuts[2], 2, 64, 48, 7, 0, 1);
    return tb_test_exit("test_graph_buffers");
}
