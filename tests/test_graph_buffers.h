/* test_graph_buffers.h - what the two files of test_graph_buffers share
 * (see test_graph_buffers.c): the wrapped run's state, the lifetime checks
 * and the fresh-buffer copies the wrappers use. */
#ifndef TB_TEST_GRAPH_BUFFERS_H
#define TB_TEST_GRAPH_BUFFERS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/rng.h"
#include "model/cpu/cpu_backend.h"
#include "model/cpu/cpu_internal.h" /* split knobs and the scratch to poison */
#include "model/model.h"
#define TB_TEST_SHARED_COUNTS /* test_graph_buffers.c defines them */
#include "tests/tb_test.h"

/* ---- state of the wrapped run ----------------------------------------------- */

extern tb_backend g_real;    /* the real CPU table (copied before wrapping) */
extern tb_backend *g_fresh;  /* second backend, same cut, NaN scratch */
extern tb_model *g_m;
extern uint64_t *g_act_hash; /* [nacts] after the producer's forward op */
extern uint64_t *g_grad_hash;/* [nacts] after the backward op that wrote it */
extern unsigned char *g_grad_valid;
extern uint64_t g_params_hash;  /* the weights after forward (whole, once a step) */
extern char g_when[160];        /* the backward op now running, for the weights' fault line */
extern int g_fwd_next;       /* node whose forward op comes next */
extern int g_bwd_node;       /* node whose backward ops run now */
extern int g_bwd_ops_left;   /* backward ops still to come for g_bwd_node */
extern int g_lifetime_bad, g_fresh_bad, g_ops_checked;
extern const char *g_config;
/* bn_tune's calls while the model is made (tuned_record): one per
 * BatchNorm, each to be given the buffers its step's bn_backward is given
 * (tuned_match, from the bn_backward wrapper) */
typedef struct {
    const void *x, *y, *z, *dy, *dx, *dz, *plan, *reserve;
    const tb_real *rm, *rv, *sm, *si, *dgamma, *dbeta;
    size_t reserve_bytes;
    int n, relu, acc, matched;
} tuned_args;
void tuned_record(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g);
void tuned_match(const tb_bn_args *a, const tb_bn_grads *g);

/* Four independent lanes of FNV-1a-style steps, folded at the end (one
 * lane's chain of multiplies ran at a quarter of the speed over ResNet-50's
 * 100 MB of weights, hashed whole once a step). Every
 * step is a bijection of the lane's state for a given word, so a changed
 * word always changes its lane, and the fold is a bijection of each lane
 * given the others: one changed word always changes the hash. */
static inline uint64_t hash_step(uint64_t h, uint64_t w) {
    h = (h ^ w) * 1099511628211ull;
    return h ^ (h >> 29);
}
static inline uint64_t hash_bytes(const void *p, size_t bytes) {
    const unsigned char *b = p;
    uint64_t h[4] = {1469598103934665603ull, 1469598103934665603ull ^ 1, 1469598103934665603ull ^ 2,
                     1469598103934665603ull ^ 3};
    size_t i = 0;
    for (; i + 32 <= bytes; i += 32) {
        uint64_t w[4];
        memcpy(w, b + i, 32);
        for (int k = 0; k < 4; k++) h[k] = hash_step(h[k], w[k]);
    }
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h[0] = hash_step(h[0], w);
    }
    for (; i < bytes; i++) h[1] = hash_step(h[1], b[i]);
    return hash_step(hash_step(hash_step(h[0], h[1]), h[2]), h[3]);
}

static inline size_t act_bytes(int id) {
    const tb_act *a = &g_m->g.acts[id];
    return a->bytes_per_sample * (size_t)g_m->batch;
}

static inline uint64_t act_hash(int id) { return hash_bytes(g_m->g.acts[id].data, act_bytes(id)); }
static inline uint64_t grad_hash(int id) { return hash_bytes(g_m->g.acts[id].grad, act_bytes(id)); }

static inline const char *producer_name(int id) {
    int p = g_m->g.acts[id].producer;
    return p < 0 ? "the input" : g_m->g.nodes[p].name;
}

static inline int node_is_bn(int i) { return g_m->g.nodes[i].kind == TB_NODE_BN; }
static inline uint64_t stats_hash(int i) {
    const tb_node *nd = &g_m->g.nodes[i];
    size_t c = (size_t)g_m->pt.items[nd->param].numel;
    return hash_bytes(nd->save_mean, 2 * c * sizeof(tb_real));
}
extern uint64_t *g_stats_hash; /* [nnodes] */

/* ---- 1. lifetimes ------------------------------------------------------------- */

/* The weights from the end of forward to the end of backward: their whole
 * pages read-only, a write there ends the test with a line naming the
 * backward op that made it (g_when); the bytes before the first and after
 * the last whole page hashed before every backward op. (Hashing all 100 MB
 * of ResNet-50's weights before each of its ~170 backward ops was most of
 * this test's time.) */
void weights_lock(void);
void weights_unlock(void);
int weights_edges_changed(void);

static inline void expect_act(int id, const char *when) {
    if (id < 0) return;
    if (act_hash(id) != g_act_hash[id]) {
        g_lifetime_bad++;
        printf("FAIL [%s] activation of %s changed since forward wrote it (%s)\n", g_config,
               producer_name(id), when);
    }
}

static inline void expect_grad(int id, const char *when) {
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

static inline void wrote_grad(int id) {
    if (id < 0 || !g_m->g.acts[id].need_grad) return;
    g_grad_hash[id] = grad_hash(id);
    g_grad_valid[id] = 1;
}

/* Called by every forward op wrapper after the real op. */
static inline void forward_done(void) {
    const tb_node *nd = &g_m->g.nodes[g_fwd_next];
    g_act_hash[nd->out] = act_hash(nd->out);
    if (node_is_bn(g_fwd_next)) g_stats_hash[g_fwd_next] = stats_hash(g_fwd_next);
    g_fwd_next++;
}

/* Number of backend calls node i makes in backward (graph.c's loop). */
static inline int backward_ops(int i) {
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
static inline int backward_begin(const char *op, int reads_dx, int reads_dz) {
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
    /* the weights' read-only pages fault on a write (weights_lock); here only the
     * bytes outside whole pages, at either end, are hashed */
    if (weights_edges_changed()) {
        g_lifetime_bad++;
        printf("FAIL [%s] the weights changed between forward and %s\n", g_config, when);
    }
    snprintf(g_when, sizeof g_when, "%s of %s", op, nd->name);
    return g_bwd_node;
}

static inline void backward_end(int node, int wrote_dx, int wrote_dz) {
    const tb_node *nd = &g_m->g.nodes[node];
    if (wrote_dx) wrote_grad(nd->in);
    if (wrote_dz) wrote_grad(nd->in2);
}

/* ---- 2. fresh buffers --------------------------------------------------------- */

static inline void *xalloc(size_t bytes) {
    void *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    TB_ASSERT(p);
    return p;
}

static inline void *dup_bytes(const void *p, size_t bytes) {
    void *q = xalloc(bytes ? bytes : 1);
    if (bytes) memcpy(q, p, bytes);
    return q;
}

static inline void *nan_bytes(size_t bytes) {
    tb_real *q = xalloc(bytes ? bytes : 1);
    for (size_t i = 0; i < bytes / sizeof(tb_real); i++) q[i] = NAN;
    return q;
}

static inline tb_tensor dup_t(const tb_tensor *t) {
    tb_tensor c = *t;
    c.data = dup_bytes(t->data, tb_tensor_numel(t) * sizeof(tb_real));
    return c;
}

/* Output of the fresh run: a copy when the op adds to it, else NaN. */
static inline tb_tensor out_t(const tb_tensor *t, int accumulate) {
    if (accumulate) return dup_t(t);
    tb_tensor c = *t;
    c.data = nan_bytes(tb_tensor_numel(t) * sizeof(tb_real));
    return c;
}

static inline void same(const char *op, const char *what, const void *real, const void *fresh,
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

static inline void same_t(const char *op, const char *what, const tb_tensor *real,
                   const tb_tensor *fresh) {
    same(op, what, real->data, fresh->data, tb_tensor_numel(real));
}

static inline void free_t(tb_tensor *t) { free(t->data); }

/* in test_graph_buffers_wrap.c */
void wrap(tb_backend *be);

#endif
