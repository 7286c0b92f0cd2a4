/* test_op_profile.c - model/op_profile.h on the CPU backend: a profiled
 * training step of ResNet-18 through the mixed-precision plumbing (op
 * weight copies, gradient conversion, loss scaling, the uint8 input op), so
 * every op kind the GPU step runs is timed here too; counts per step
 * computed from the graph; times >= 0 and their sums; the profiler only
 * observes (the profiled model trains bit-identically to an unprofiled
 * one); a pool too small drops ops instead of writing past it; ops outside
 * a step are not recorded; the asynchronous (event) step's window holds
 * every op it queues, with host-to-device copies made slow (3 ms each) so
 * that an op queued before the step's start event would show by
 * milliseconds (the first GPU run: the step scalars' upload fell outside,
 * and its ops spanned 9.985 ms of a 7.784 ms step). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "core/log.h"
#include "core/rng.h"
#include "model/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/op_profile.h"
#include "src/train/trainer.h"
#include "tests/tb_test.h"

static tb_backend *g_be;

enum { N = 3, S = 32, CLASSES = 5 };

static tb_model *make(void) {
    tb_resnet_config cfg;
    TB_ASSERT(tb_resnet_config_init(&cfg, "resnet18", CLASSES) == 0);
    tb_model_opts o = tb_model_default_opts();
    o.op_copies = 1; /* weight refresh and gradient conversion, as bf16 runs them */
    o.loss_scaling.init_scale = 1024;
    o.loss_scaling.growth_interval = 2000;
    tb_model *m = tb_model_create(&cfg, g_be, N, S, S, &o);
    tb_model_init(m, 11);
    return m;
}

static void count_ready(void *ctx, size_t offset, size_t count) {
    (void)offset, (void)count;
    ++*(int *)ctx;
}

/* One training step on a uint8 batch (upload, flips, input op); ready
 * (NULL: none) counts the grad-ready hook's calls. */
static void step_hooked(tb_model *m, uint64_t seed, int *ready) {
    uint8_t img[N * S * S * 3], flip[N];
    int32_t y[N];
    tb_rng r;
    tb_rng_seed(&r, seed, 1);
    for (size_t i = 0; i < sizeof img; i++) img[i] = (uint8_t)tb_rng_below(&r, 256);
    for (int j = 0; j < N; j++) {
        flip[j] = (uint8_t)(j & 1);
        y[j] = (int32_t)tb_rng_below(&r, CLASSES);
    }
    tb_input_norm norm = {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
    tb_model_set_batch_u8(m, img, flip, y, N, &norm);
    tb_model_forward(m, 1);
    tb_model_loss(m, 0.1, 1.0);
    tb_model_backward(m, ready ? count_ready : NULL, ready);
    tb_sgd_args a = {0.01, 0.9, 0, 1.0};
    tb_model_sgd_step(m, &a, 1e-4, 0);
}

static void step(tb_model *m, uint64_t seed) { step_hooked(m, seed, NULL); }

static int count_nodes(const tb_model *m, tb_node_kind k) {
    int c = 0;
    for (int i = 0; i < m->g.nnodes; i++) c += m->g.nodes[i].kind == k;
    return c;
}

/* With a grad-ready hook each weight gradient is converted before its
 * range is handed over (one grad_convert row per weight, no weight_grads);
 * without one they wait for the end of backward (one weight_grads op,
 * test_profiled_step). */
static void test_hooked_conversions(void) {
    tb_model *m = make();
    step(m, 1);
    tb_op_prof *p = tb_op_prof_create(g_be, tb_model_op_profile_capacity(m));
    tb_model_set_op_profile(m, p);
    int calls = 0, hooks = 0, batched = 0;
    tb_op_prof_step_begin(p);
    step_hooked(m, 2, &hooks);
    double ops_ms, span_ms;
    (void)tb_op_prof_step_end(p, &ops_ms, &span_ms);
    tb_model_set_op_profile(m, NULL);
    for (int i = 0; i < p->nrows; i++) {
        calls += p->rows[i].kind == TB_OPK_GRAD_CONVERT ? (int)p->rows[i].calls : 0;
        batched += strcmp(p->rows[i].name, "weight_grads") == 0;
    }
    int weights = count_nodes(m, TB_NODE_CONV) + count_nodes(m, TB_NODE_LINEAR);
    TB_CHECK(calls == weights && batched == 0 && hooks > 0,
             "with a hook: %d conversions (want %d, one per weight), %d weight_grads rows (want 0), %d hook calls",
             calls, weights, batched, hooks);
    tb_op_prof_destroy(p);
    tb_model_destroy(m);
}

static void test_profiled_step(void) {
    tb_model *m = make(), *ref = make();
    step(m, 1); /* the first forward also refreshes the stale op weights: keep it out */
    step(ref, 1);
    tb_op_prof *p = tb_op_prof_create(g_be, tb_model_op_profile_capacity(m));
    tb_model_set_op_profile(m, p);
    int nops[2];
    double ops_ms[2], span_ms[2];
    for (int s = 0; s < 2; s++) {
        tb_op_prof_step_begin(p);
        step(m, 2 + (uint64_t)s);
        nops[s] = tb_op_prof_step_end(p, &ops_ms[s], &span_ms[s]);
        step(ref, 2 + (uint64_t)s);
    }
    tb_model_set_op_profile(m, NULL);
    /* observation only: the same weights, momentum and scalars bit for bit */
    size_t nt = m->pt.n_train;
    tb_real *a = malloc(nt * sizeof *a), *b = malloc(nt * sizeof *b);
    g_be->copy_d2h(g_be, a, m->params, nt * sizeof *a);
    g_be->copy_d2h(g_be, b, ref->params, nt * sizeof *b);
    TB_CHECK(memcmp(a, b, nt * sizeof *a) == 0, "profiled steps train exactly as unprofiled ones (params)");
    g_be->copy_d2h(g_be, a, m->momentum, nt * sizeof *a);
    g_be->copy_d2h(g_be, b, ref->momentum, nt * sizeof *b);
    TB_CHECK(memcmp(a, b, nt * sizeof *a) == 0, "... and momentum");
    free(a);
    free(b);

    TB_CHECK(p->steps == 2 && nops[0] == nops[1] && nops[0] > 0, "2 steps of %d and %d ops", nops[0], nops[1]);
    TB_CHECK(p->dropped_total == 0, "no op dropped (pool %d)", p->cap);
    int conv = count_nodes(m, TB_NODE_CONV), bn = count_nodes(m, TB_NODE_BN);
    int lin = count_nodes(m, TB_NODE_LINEAR);
    int64_t calls[TB_OPK_COUNT] = {0};
    double kind_ms[TB_OPK_COUNT] = {0}, total = 0;
    int bad_time = 0;
    for (int i = 0; i < p->nrows; i++) {
        const tb_op_row *r = &p->rows[i];
        calls[r->kind] += r->calls;
        kind_ms[r->kind] += r->total_ms;
        total += r->total_ms;
        bad_time += !(r->total_ms >= 0 && r->min_ms >= 0 && r->min_ms * r->steps_seen <= r->total_ms + 1e-9);
    }
    TB_CHECK(bad_time == 0, "%d rows with a negative time or min > mean", bad_time);
    TB_CHECK(fabs(total - p->ops_ms) <= 1e-9 * (1 + total), "rows sum %.6f ms, steps' ops %.6f ms", total,
             p->ops_ms);
    TB_CHECK(p->ops_ms <= p->span_ms * 1.0001 + 1e-6 && p->ops_ms > 0.5 * p->span_ms,
             "ops %.3f ms within their span %.3f ms (and most of it)", p->ops_ms, p->span_ms);
    /* per step, computed from the graph */
    struct {
        tb_op_kind k;
        int want;
    } expect[] = {
        {TB_OPK_CONV_FWD, conv},        {TB_OPK_CONV_WGRAD, conv},       {TB_OPK_CONV_DGRAD, conv - 1},
        {TB_OPK_BN_FWD, bn},            {TB_OPK_BN_BWD, bn},             {TB_OPK_MAXPOOL_FWD, 1},
        {TB_OPK_MAXPOOL_BWD, 1},        {TB_OPK_AVGPOOL_FWD, 1},         {TB_OPK_AVGPOOL_BWD, 1},
        {TB_OPK_LINEAR_FWD, lin},       {TB_OPK_LINEAR_BWD, lin},        {TB_OPK_LOSS, 1},
        {TB_OPK_WEIGHT_CONVERT, 1}, /* one convert_many */ {TB_OPK_GRAD_CONVERT, 1}, /* one, no hook */
        {TB_OPK_INPUT, 1},
        {TB_OPK_UPLOAD, 5}, /* labels, images, flips, grad scale, lr */
        {TB_OPK_NONFINITE_CHECK, 1},    {TB_OPK_SGD, 1},                 {TB_OPK_LOSS_SCALE, 1},
        {TB_OPK_RELU_FWD, 0},           {TB_OPK_ADD_FWD, 0}, /* fused into BN */
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        TB_CHECK(calls[expect[i].k] == 2 * expect[i].want, "%s: %lld calls in 2 steps, want %d per step",
                 tb_op_kind_name(expect[i].k), (long long)calls[expect[i].k], expect[i].want);
    /* every node once per phase it has, with its kind, called once per step */
    static const struct {
        tb_op_kind fwd, bwd;
        tb_op_phase bwd_phase;
    } node_ops[] = {
        [TB_NODE_CONV] = {TB_OPK_CONV_FWD, TB_OPK_CONV_WGRAD, TB_OPP_BACKWARD_FILTER},
        [TB_NODE_BN] = {TB_OPK_BN_FWD, TB_OPK_BN_BWD, TB_OPP_BACKWARD},
        [TB_NODE_RELU] = {TB_OPK_RELU_FWD, TB_OPK_RELU_BWD, TB_OPP_BACKWARD},
        [TB_NODE_ADD] = {TB_OPK_ADD_FWD, TB_OPK_ADD_BWD, TB_OPP_BACKWARD},
        [TB_NODE_MAXPOOL] = {TB_OPK_MAXPOOL_FWD, TB_OPK_MAXPOOL_BWD, TB_OPP_BACKWARD},
        [TB_NODE_AVGPOOL] = {TB_OPK_AVGPOOL_FWD, TB_OPK_AVGPOOL_BWD, TB_OPP_BACKWARD},
        [TB_NODE_LINEAR] = {TB_OPK_LINEAR_FWD, TB_OPK_LINEAR_BWD, TB_OPP_BACKWARD},
    };
    int missing = 0;
    for (int i = 0; i < m->g.nnodes; i++) {
        const tb_node *nd = &m->g.nodes[i];
        int fwd = 0, bwd = 0, dgrad = 0, other = 0;
        for (int r = 0; r < p->nrows; r++) {
            const tb_op_row *q = &p->rows[r];
            if (strcmp(q->name, nd->name) != 0) continue;
            if (q->calls != 2) other++;
            else if (q->phase == TB_OPP_FORWARD && q->kind == node_ops[nd->kind].fwd) fwd++;
            else if (q->phase == node_ops[nd->kind].bwd_phase && q->kind == node_ops[nd->kind].bwd) bwd++;
            else if (q->phase == TB_OPP_BACKWARD_DATA && q->kind == TB_OPK_CONV_DGRAD) dgrad++;
            else other++;
        }
        int want_dgrad = nd->kind == TB_NODE_CONV && strcmp(nd->name, "conv1") != 0; /* the stem reads the image */
        if (fwd != 1 || bwd != 1 || dgrad != want_dgrad || other) {
            missing++;
            printf("  node %s: forward %d, backward %d, backward-data %d (want 1, 1, %d), other rows %d\n", nd->name,
                   fwd, bwd, dgrad, want_dgrad, other);
        }
    }
    TB_CHECK(missing == 0, "%d of %d nodes without exactly one row per phase", missing, m->g.nnodes);
    int dup = 0;
    for (int r = 0; r < p->nrows; r++)
        for (int q = r + 1; q < p->nrows; q++)
            dup += strcmp(p->rows[r].name, p->rows[q].name) == 0 && p->rows[r].phase == p->rows[q].phase &&
                   p->rows[r].kind == p->rows[q].kind;
    TB_CHECK(dup == 0, "%d pairs of rows share a (name, phase, kind) key", dup);

    /* ops outside a step are not recorded; NULL is off */
    int before = p->nops;
    step(m, 9); /* profiler detached */
    tb_op_prof_begin(p, "x", TB_OPP_FORWARD, TB_OPK_RELU_FWD);
    tb_op_prof_end(p);
    TB_CHECK(p->nops == before && p->steps == 2, "outside a step nothing is recorded");
    tb_op_prof_begin(NULL, "x", TB_OPP_FORWARD, TB_OPK_RELU_FWD);
    tb_op_prof_end(NULL);
    tb_op_prof_destroy(p);

    /* a pool too small: the first ops are timed, the rest counted as dropped */
    p = tb_op_prof_create(g_be, 10);
    tb_model_set_op_profile(m, p);
    tb_op_prof_step_begin(p);
    step(m, 10);
    int n = tb_op_prof_step_end(p, NULL, NULL);
    tb_model_set_op_profile(m, NULL);
    TB_CHECK(n == 10 && p->dropped_total == nops[0] - 10, "pool of 10: %d timed, %lld dropped (want 10, %d)", n,
             (long long)p->dropped_total, nops[0] - 10);
    tb_op_prof_destroy(p);
    printf("# %d ops per step, %d rows; names: %s %s %s\n", nops[0], m->g.nnodes, tb_op_kind_name(TB_OPK_CONV_DGRAD),
           tb_op_phase_name(TB_OPP_BACKWARD_DATA), tb_op_phase_name(TB_OPP_BACKWARD_FILTER));
    tb_model_destroy(m);
    tb_model_destroy(ref);
}

/* ---- the asynchronous step's window ------------------------------------------------------ */

static void (*g_fast_h2d_async)(tb_backend *, void *, const void *, size_t, tb_stream *);

static void slow_h2d_async(tb_backend *be, void *dst, const void *src, size_t bytes, tb_stream *s) {
    struct timespec ts = {0, 3000000};
    nanosleep(&ts, NULL);
    g_fast_h2d_async(be, dst, src, bytes, s);
}

/* Three profiled steps of the trainer's asynchronous path (the GPU's, on
 * CPU events): each step's ops, and their span from the first op's start to
 * the last's end, lie inside the step's own record (its total less the
 * data wait, E_START to E_END), so --op-profile's "covered" cannot pass
 * 100 % for an op queued outside the step. */
static void test_async_window(void) {
    tb_resnet_config cfg;
    TB_ASSERT(tb_resnet_config_init(&cfg, "resnet18", CLASSES) == 0);
    tb_model_opts o = tb_model_default_opts();
    tb_model *m = tb_model_create(&cfg, g_be, N, S, S, &o);
    tb_model_init(m, 13);
    tb_train_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.momentum = 0.9;
    hp.bucket_bytes = (size_t)25 << 20;
    hp.overlap = 1;
    hp.transport = "mpi-host"; /* one rank: none */
    hp.device = -1;
    hp.timeout_s = 300;
    hp.async = 1;
    hp.graph_warmup = 1;
    tb_trainer *t = tb_trainer_create(m, tb_comm_world(), NULL, &hp);
    float *img = malloc((size_t)N * 3 * S * S * sizeof *img);
    int32_t y[N];
    if (!img) TB_FATAL("out of host memory");
    tb_rng r;
    tb_rng_seed(&r, 21, 1);
    for (size_t i = 0; i < (size_t)N * 3 * S * S; i++) img[i] = (float)(tb_rng_uniform(&r) * 2 - 1);
    for (int j = 0; j < N; j++) y[j] = (int32_t)tb_rng_below(&r, CLASSES);
    tb_source_batch b;
    memset(&b, 0, sizeof b);
    b.in.kind = TB_INPUT_F32;
    b.in.f32 = img;
    b.labels = y;
    b.n = N;
    b.global_n = N;
    tb_op_prof *p = tb_op_prof_create(g_be, tb_model_op_profile_capacity(m));
    g_fast_h2d_async = g_be->copy_h2d_async;
    g_be->copy_h2d_async = slow_h2d_async;
    char err[256];
    for (int k = 0; k < 3; k++) {
        tb_model_set_op_profile(m, p);
        tb_op_prof_step_begin(p);
        TB_CHECK(tb_trainer_step(t, &b, k, 0.01, err, sizeof err) == 0, "async step %d: %s", k, err);
        tb_step_record rec;
        int got = tb_trainer_collect(t, &rec, 1);
        double ops = 0, span = 0;
        int n = tb_op_prof_step_end(p, &ops, &span);
        tb_model_set_op_profile(m, NULL);
        TB_CHECK(got && rec.step == k, "async step %d: no record", k);
        double window = 1e3 * (rec.total - rec.phase[TB_PH_DATA]);
        printf("# async step %d: %d ops, %.3f ms of ops spanning %.3f ms; the step's window %.3f ms\n", k, n, ops,
               span, window);
        TB_CHECK(n > 0 && span <= window && ops <= window,
                 "async step %d: ops span %.3f ms (sum %.3f ms), more than the step's %.3f ms: an op was queued "
                 "outside E_START..E_END",
                 k, span, ops, window);
    }
    g_be->copy_h2d_async = g_fast_h2d_async;
    tb_op_prof_destroy(p);
    tb_trainer_destroy(t);
    tb_model_destroy(m);
    free(img);
}

int main(int argc, char **argv) {
    tb_backend_opts bo = {.threads = 1};
    tb_comm_info info;
    tb_comm_init(&argc, &argv, &info);
    g_be = tb_cpu_backend_create(&bo);
    test_profiled_step();
    test_hooked_conversions();
    test_async_window();
    g_be->destroy(g_be);
    tb_comm_finalize();
    return tb_test_exit("op_profile_unit");
}
