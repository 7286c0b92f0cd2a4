/* test_model.c - the model without PyTorch in the loop: parameter tables
 * against torchvision's counts and names, graph shapes and FLOPs, the
 * initialisation's statistics, the gradient-arena plan, fused vs unfused
 * execution, an exact checkpoint round trip, and the GPU's model plumbing
 * run on the CPU: op weight copies (refresh, gradient conversion, the ready
 * hook after it), the uint8 batch path, the resident-rows batch path, the
 * per-step scalars, and a step skipped on an overflow under loss scaling. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/rng.h"
#include "model/cpu/cpu_backend.h"
#include "model/model.h"
#include "src/results/checkpoint.h"
#include "tests/tb_test.h"

static tb_backend *g_be;

static tb_model *make(const char *name, int classes, int n, int h, int w, int fuse) {
    tb_resnet_config cfg;
    TB_ASSERT(tb_resnet_config_init(&cfg, name, classes) == 0);
    tb_model_opts o = tb_model_default_opts();
    o.fuse = fuse;
    return tb_model_create(&cfg, g_be, n, h, w, &o);
}

/* Counts from torchvision 0.14 (num_classes=1000): state_dict keys,
 * trainable elements, running-statistic elements, forward MACs at 224. */
static void test_tables(void) {
    static const struct {
        const char *name;
        int keys;
        size_t train, state;
        double macs;
        const char *last_bn;
    } ref[] = {
        {"resnet18", 122, 11689512, 9600, 1814073344.0, "layer4.1.bn2.num_batches_tracked"},
        {"resnet34", 218, 21797672, 17024, 3663761408.0, "layer4.2.bn2.num_batches_tracked"},
        {"resnet50", 320, 25557032, 53120, 4089184256.0, "layer4.2.bn3.num_batches_tracked"},
        {"resnet101", 626, 44549160, 105344, 7801405440.0, "layer4.2.bn3.num_batches_tracked"},
        {"resnet152", 932, 60192808, 151424, 11513626624.0, "layer4.2.bn3.num_batches_tracked"},
    };
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
        tb_resnet_config cfg;
        tb_resnet_config_init(&cfg, ref[i].name, 1000);
        tb_param_table pt = {0};
        tb_graph g = {0};
        tb_resnet_build(&cfg, 224, 224, 1, &pt, &g);
        TB_CHECK(pt.count == ref[i].keys, "%s: %d keys, torchvision has %d", ref[i].name, pt.count,
                 ref[i].keys);
        TB_CHECK(pt.n_train == ref[i].train, "%s: %zu trainable, torchvision %zu", ref[i].name,
                 pt.n_train, ref[i].train);
        TB_CHECK(pt.n_state == ref[i].state, "%s: %zu running stats, torchvision %zu", ref[i].name,
                 pt.n_state, ref[i].state);
        TB_CHECK(tb_resnet_forward_macs(&g, &pt) == ref[i].macs, "%s: %.0f MACs, torchvision %.0f",
                 ref[i].name, tb_resnet_forward_macs(&g, &pt), ref[i].macs);
        TB_CHECK(strcmp(pt.items[0].name, "conv1.weight") == 0, "%s first key %s", ref[i].name,
                 pt.items[0].name);
        TB_CHECK(strcmp(pt.items[pt.count - 1].name, "fc.bias") == 0 &&
                     strcmp(pt.items[pt.count - 3].name, ref[i].last_bn) == 0,
                 "%s: last keys %s, %s", ref[i].name, pt.items[pt.count - 3].name,
                 pt.items[pt.count - 1].name);
        const tb_act *pooled = &g.acts[g.nodes[g.nnodes - 1].in];
        const tb_act *l4 = &g.acts[g.nodes[g.nnodes - 2].in];
        TB_CHECK(l4->h == 7 && l4->w == 7 && pooled->c == (cfg.bottleneck ? 2048 : 512),
                 "%s: layer4 output %dx%dx%d", ref[i].name, l4->c, l4->h, l4->w);
        tb_params_free(&pt);
        free(g.nodes);
        free(g.acts);
    }
    /* torchvision's ordering inside a Bottleneck: bn3 before downsample */
    tb_resnet_config cfg;
    tb_resnet_config_init(&cfg, "resnet50", 10);
    tb_param_table pt = {0};
    tb_graph g = {0};
    tb_resnet_build(&cfg, 64, 64, 1, &pt, &g);
    int bn3 = tb_params_find(&pt, "layer2.0.bn3.num_batches_tracked");
    int ds = tb_params_find(&pt, "layer2.0.downsample.0.weight");
    TB_CHECK(bn3 >= 0 && ds == bn3 + 1, "layer2.0.downsample.0.weight follows bn3 (%d, %d)", bn3, ds);
    int dsb = tb_params_find(&pt, "layer3.0.downsample.1.running_var");
    TB_CHECK(dsb >= 0 && pt.items[dsb].role == TB_ROLE_BN_RUNNING_VAR, "downsample BN present");
    tb_params_free(&pt);
    free(g.nodes);
    free(g.acts);
}

/* Init: conv std sqrt(2/fan_out), fc within 1/sqrt(fan_in), BN 1/0,
 * zero_init_residual, reproducible per seed. */
static void test_init(void) {
    tb_resnet_config cfg;
    tb_resnet_config_init(&cfg, "resnet50", 100);
    cfg.zero_init_residual = 1;
    tb_param_table pt = {0};
    tb_graph g = {0};
    tb_resnet_build(&cfg, 224, 224, 1, &pt, &g);
    tb_real *p = malloc(pt.n_train * sizeof *p), *p2 = malloc(pt.n_train * sizeof *p2);
    tb_real *s = malloc(pt.n_state * sizeof *s);
    int64_t *c = malloc((size_t)pt.n_counters * sizeof *c);
    tb_resnet_init(&cfg, &pt, 7, p, s, c);
    int checked = 0;
    for (int i = 0; i < pt.count; i++) {
        const tb_param *q = &pt.items[i];
        const tb_real *v = q->role == TB_ROLE_BN_RUNNING_MEAN || q->role == TB_ROLE_BN_RUNNING_VAR
                             ? s + q->offset
                             : p + q->offset;
        if (q->role == TB_ROLE_CONV_WEIGHT && q->numel >= 20000) {
            double sum = 0, sq = 0;
            for (size_t j = 0; j < q->numel; j++) {
                sum += v[j];
                sq += (double)v[j] * v[j];
            }
            double mean = sum / q->numel, sd = sqrt(sq / q->numel - mean * mean);
            double want = sqrt(2.0 / (double)(q->shape[0] * q->shape[2] * q->shape[3]));
            TB_CHECK(fabs(sd / want - 1) < 0.05 && fabs(mean) < 0.05 * want,
                     "%s: std %.5g mean %.3g, want std %.5g", q->name, sd, mean, want);
            checked++;
        }
        if (q->role == TB_ROLE_FC_WEIGHT || q->role == TB_ROLE_FC_BIAS) {
            double bound = 1.0 / sqrt((double)pt.items[q->role == TB_ROLE_FC_WEIGHT ? i : i - 1].shape[1]);
            tb_real lo = 1, hi = -1;
            for (size_t j = 0; j < q->numel; j++) {
                lo = v[j] < lo ? v[j] : lo;
                hi = v[j] > hi ? v[j] : hi;
            }
            TB_CHECK(lo >= -bound && hi <= bound && hi - lo > 1.8 * bound * (q->numel > 50 ? 1 : 0.5),
                     "%s: range [%g, %g], bound %g", q->name, lo, hi, bound);
        }
        if (q->role == TB_ROLE_BN_WEIGHT) {
            int last = strstr(q->name, ".bn3.") != NULL;
            TB_CHECK(v[0] == (last ? 0.f : 1.f) && v[q->numel - 1] == v[0], "%s = %g", q->name, v[0]);
        }
        if (q->role == TB_ROLE_BN_BIAS || q->role == TB_ROLE_BN_RUNNING_MEAN)
            TB_CHECK(v[0] == 0.f, "%s = %g", q->name, v[0]);
        if (q->role == TB_ROLE_BN_RUNNING_VAR) TB_CHECK(v[0] == 1.f, "%s = %g", q->name, v[0]);
    }
    TB_CHECK(checked >= 20, "checked %d conv tensors", checked);
    tb_resnet_init(&cfg, &pt, 7, p2, s, c);
    TB_CHECK(memcmp(p, p2, pt.n_train * sizeof *p) == 0, "same seed, same weights");
    tb_resnet_init(&cfg, &pt, 8, p2, s, c);
    TB_CHECK(memcmp(p, p2, 1000 * sizeof *p) != 0, "another seed, other weights");
    free(p);
    free(p2);
    free(s);
    free(c);
    tb_params_free(&pt);
    free(g.nodes);
    free(g.acts);
}

/* The planned gradient arena: buffers alive at the same backward step never
 * share bytes, and the plan saves memory. */
static void test_grad_plan(void) {
    tb_model *m = make("resnet50", 10, 2, 64, 64, 1);
    const tb_graph *g = &m->g;
    int last = g->nnodes - 1, bad = 0;
    int *first = malloc((size_t)g->nacts * sizeof *first), *lastr = malloc((size_t)g->nacts * sizeof *lastr);
    for (int a = 0; a < g->nacts; a++) {
        first[a] = a == g->output ? -1 : g->nnodes;
        lastr[a] = last - g->acts[a].producer;
        for (int i = 0; i < g->nnodes; i++)
            if ((g->nodes[i].in == a || g->nodes[i].in2 == a) && last - i < first[a]) first[a] = last - i;
    }
    for (int a = 0; a < g->nacts; a++) {
        if (!g->acts[a].need_grad) continue;
        size_t a0 = g->acts[a].grad_offset, a1 = a0 + g->acts[a].bytes_per_sample * 2;
        for (int b = a + 1; b < g->nacts; b++) {
            if (!g->acts[b].need_grad) continue;
            if (lastr[a] < first[b] || lastr[b] < first[a]) continue;
            size_t b0 = g->acts[b].grad_offset, b1 = b0 + g->acts[b].bytes_per_sample * 2;
            if (a0 < b1 && b0 < a1) bad++;
        }
    }
    TB_CHECK(bad == 0, "%d pairs of live gradient buffers overlap", bad);
    TB_CHECK(g->grad_arena_bytes * 2 < g->grad_bytes_unplanned,
             "gradient arena %zu bytes vs %zu unplanned: plan should save over half",
             g->grad_arena_bytes, g->grad_bytes_unplanned);
    printf("# resnet50 gradient arena: %.1f MB planned, %.1f MB one-per-tensor\n",
           g->grad_arena_bytes / 1048576.0, g->grad_bytes_unplanned / 1048576.0);
    free(first);
    free(lastr);
    tb_model_destroy(m);
}

static void random_batch(int n, int h, int w, int classes, uint64_t seed, float *x, int32_t *y) {
    tb_rng r;
    tb_rng_seed(&r, seed, 99);
    for (size_t i = 0; i < (size_t)n * 3 * h * w; i++) x[i] = (float)tb_rng_normal(&r);
    for (int i = 0; i < n; i++) y[i] = (int32_t)tb_rng_below(&r, (uint64_t)classes);
}

/* Fused BN+add+ReLU nodes and separate ADD/RELU nodes give the same step. */
static void test_fused_matches_unfused(void) {
    int n = 3, h = 40, w = 36, classes = 5;
    tb_model *a = make("resnet18", classes, n, h, w, 1);
    tb_model *b = make("resnet18", classes, n, h, w, 0);
    TB_CHECK(b->g.nnodes > a->g.nnodes, "unfused graph has more nodes (%d vs %d)", b->g.nnodes,
             a->g.nnodes);
    tb_model_init(a, 3);
    tb_model_init(b, 3);
    float *x = malloc((size_t)n * 3 * h * w * sizeof *x);
    int32_t y[3];
    random_batch(n, h, w, classes, 5, x, y);
    tb_model *ms[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        tb_model_set_batch(ms[k], x, y, n);
        tb_model_forward(ms[k], 1);
        tb_model_loss(ms[k], 0.1, 1.0);
        tb_model_backward(ms[k], NULL, NULL);
    }
    TB_CHECK_CLOSE(tb_model_read_loss(b), tb_model_read_loss(a), 1e-6, 1e-5, "loss fused vs unfused");
    size_t nt = a->pt.n_train;
    tb_real *ga = malloc(nt * sizeof *ga), *gb = malloc(nt * sizeof *gb);
    a->be->copy_d2h(a->be, ga, a->grads, nt * sizeof *ga);
    b->be->copy_d2h(b->be, gb, b->grads, nt * sizeof *gb);
    double maxref = 0, maxerr = 0;
    for (size_t i = 0; i < nt; i++) {
        maxref = fmax(maxref, fabs(ga[i]));
        maxerr = fmax(maxerr, fabs(ga[i] - gb[i]));
    }
    TB_CHECK(maxerr <= 1e-5 * maxref, "grads fused vs unfused: max err %g of max %g", maxerr, maxref);
    free(ga);
    free(gb);
    free(x);
    tb_model_destroy(a);
    tb_model_destroy(b);
}

/* One training step; *nready counts the ready hook's calls and checks that
 * every range it reports is already final in the flat gradient buffer. */
typedef struct {
    tb_model *m;
    int calls, bad;
    tb_real *expect; /* NULL: only count */
} ready_ctx;

static void on_ready(void *ctx, size_t off, size_t count) {
    ready_ctx *r = ctx;
    r->calls++;
    if (!r->expect) return;
    tb_real *now = malloc(count * sizeof *now);
    r->m->be->copy_d2h(r->m->be, now, r->m->grads + off, count * sizeof *now);
    if (memcmp(now, r->expect + off, count * sizeof *now) != 0) r->bad++;
    free(now);
}

static void step(tb_model *m, const float *x, const int32_t *y, int n, double lr, ready_ctx *r) {
    tb_model_set_batch(m, x, y, n);
    tb_model_forward(m, 1);
    tb_model_loss(m, 0.1, 1.0);
    tb_model_backward(m, r ? on_ready : NULL, r);
    tb_sgd_args a = {lr, 0.9, 0, 1.0};
    tb_model_sgd_step(m, &a, 1e-4, 0);
}

static int same_buffer(tb_model *a, tb_model *b, tb_real *pa, tb_real *pb, size_t n) {
    tb_real *ha = malloc(n * sizeof *ha), *hb = malloc(n * sizeof *hb);
    a->be->copy_d2h(a->be, ha, pa, n * sizeof *ha);
    b->be->copy_d2h(b->be, hb, pb, n * sizeof *hb);
    int same = memcmp(ha, hb, n * sizeof *ha) == 0;
    free(ha);
    free(hb);
    return same;
}

/* params, momentum and gradients of a and b bit for bit equal */
static int same_training(tb_model *a, tb_model *b) {
    size_t n = a->pt.n_train;
    return same_buffer(a, b, a->params, b->params, n) && same_buffer(a, b, a->momentum, b->momentum, n) &&
           same_buffer(a, b, a->grads, b->grads, n);
}

/* The mixed-precision plumbing (op weight copies refreshed after each
 * update, weight gradients converted into the flat buffer before the ready
 * hook, or all at the end of a backward without one) gives bit-identical
 * training when the copies are float32 NCHW. */
static void test_op_copies(void) {
    int n = 3, h = 32, w = 40, classes = 5;
    tb_model *a = make("resnet18", classes, n, h, w, 1);
    tb_resnet_config cfg;
    tb_resnet_config_init(&cfg, "resnet18", classes);
    tb_model_opts o = tb_model_default_opts();
    o.op_copies = 1;
    tb_model *b = tb_model_create(&cfg, g_be, n, h, w, &o), *c = tb_model_create(&cfg, g_be, n, h, w, &o);
    TB_CHECK(b->op_params && b->op_grads && !a->op_params, "op copies exist only when asked");
    tb_model_init(a, 5);
    tb_model_init(b, 5);
    tb_model_init(c, 5);
    float *x = malloc((size_t)n * 3 * h * w * sizeof *x);
    int32_t y[3];
    for (int k = 0; k < 3; k++) {
        random_batch(n, h, w, classes, 40 + (uint64_t)k, x, y);
        step(a, x, y, n, 0.05, NULL);
        ready_ctx r = {b, 0, 0, NULL};
        step(b, x, y, n, 0.05, &r);
        step(c, x, y, n, 0.05, NULL); /* no hook: the conversions at the end of backward */
        TB_CHECK(r.calls > 20, "ready hook called %d times", r.calls);
        TB_CHECK(tb_model_read_loss(a) == tb_model_read_loss(b), "step %d loss: direct %.9g, op copies %.9g",
                 k + 1, tb_model_read_loss(a), tb_model_read_loss(b));
    }
    TB_CHECK(same_training(a, b),
             "3 steps with op weight copies: params, momentum and grads bit-identical");
    TB_CHECK(same_training(a, c),
             "the same with the weight gradients converted at the end of each backward (no hook)");
    tb_model_destroy(c);
    { /* and under --fuse graph (the fused convs' filter gradients) */
        tb_model *fa = make("resnet18", classes, n, h, w, TB_FUSE_GRAPH);
        o.fuse = TB_FUSE_GRAPH;
        tb_model *fc = tb_model_create(&cfg, g_be, n, h, w, &o);
        tb_model_init(fa, 5);
        tb_model_init(fc, 5);
        for (int k = 0; k < 3; k++) {
            random_batch(n, h, w, classes, 40 + (uint64_t)k, x, y);
            step(fa, x, y, n, 0.05, NULL);
            step(fc, x, y, n, 0.05, NULL);
        }
        TB_CHECK(same_training(fa, fc),
                 "--fuse graph, op copies, the conversions at the end of each backward: bit-identical");
        tb_model_destroy(fa);
        tb_model_destroy(fc);
    }
    /* every range the hook reports is final when reported: a backward pass
     * gives the final gradients, and a second, identical one (the loss
     * rewritten first: the gradient arena reuses its slot) is checked
     * against them at every hook call */
    size_t nt = b->pt.n_train;
    tb_real *final = malloc(nt * sizeof *final);
    tb_model_forward(b, 1);
    tb_model_loss(b, 0.1, 1.0);
    tb_model_backward(b, NULL, NULL);
    b->be->copy_d2h(b->be, final, b->grads, nt * sizeof *final);
    tb_model_loss(b, 0.1, 1.0);
    b->be->zero(b->be, b->grads, nt * sizeof(tb_real));
    ready_ctx r = {b, 0, 0, final};
    tb_model_backward(b, on_ready, &r);
    TB_CHECK(r.bad == 0 && r.calls > 20, "ready hook: %d of %d ranges not final when reported", r.bad,
             r.calls);
    free(final);
    free(x);
    tb_model_destroy(a);
    tb_model_destroy(b);
}

/* The uint8 batch (normalised and flipped by the input op) equals the
 * loader's float batch of the same pixels. */
static void test_u8_batch(void) {
    int n = 2, S = 32, classes = 4;
    tb_model *a = make("resnet18", classes, n, S, S, 1), *b = make("resnet18", classes, n, S, S, 1);
    tb_model_init(a, 1);
    tb_model_init(b, 1);
    size_t px = (size_t)S * S;
    uint8_t *u8 = malloc((size_t)n * px * 3), flip[2] = {0, 1};
    float *f = malloc((size_t)n * 3 * px * sizeof *f);
    tb_input_norm norm = {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
    tb_rng r;
    tb_rng_seed(&r, 3, 4);
    for (size_t i = 0; i < (size_t)n * px * 3; i++) u8[i] = (uint8_t)tb_rng_below(&r, 256);
    for (int j = 0; j < n; j++)
        for (int c = 0; c < 3; c++)
            for (int yy = 0; yy < S; yy++)
                for (int xx = 0; xx < S; xx++) {
                    int xs = flip[j] ? S - 1 - xx : xx;
                    float v = (float)u8[(((size_t)j * S + yy) * S + xs) * 3 + c] / 255.0f;
                    f[(((size_t)j * 3 + c) * S + yy) * S + xx] = (v - norm.mean[c]) / norm.std[c];
                }
    int32_t y[2] = {1, 3};
    tb_model_set_batch(a, f, y, n);
    tb_model_set_batch_u8(b, u8, flip, y, n, &norm);
    tb_model_forward(a, 1);
    tb_model_forward(b, 1);
    float la[8], lb[8];
    tb_model_read_logits(a, la);
    tb_model_read_logits(b, lb);
    TB_CHECK(memcmp(la, lb, sizeof la) == 0, "uint8 batch + input op == float batch (logits bit-identical)");
    free(u8);
    free(f);
    tb_model_destroy(a);
    tb_model_destroy(b);
}

/* Resident data: a batch named by rows of a pool in device memory
 * (tb_model_set_batch_rows: labels and rows in one upload, the backend's
 * input_rows op) trains exactly as the host batch of those rows
 * (tb_model_set_batch), with and without the op weight copies (whose
 * float32 staging the old gather went through). Rows repeat, run out of
 * order and differ from their labels (labels read as rows, or rows as
 * labels, change the step); the batch shrinks on some steps (the rows sit
 * after the labels of this batch, not of the largest one) and fills the
 * model on the others; without op copies the steps go once round the
 * pinned label ring and on, so its last slot holds a full 2*max_batch (an
 * undersized slot is a heap overflow there: the sanitizer build catches
 * it); with them, 4 steps. */
static void test_resident_rows(void) {
    enum { MAXN = 4, P = 7, STEPS = TB_MODEL_RING + 2 };
    const int S = 32, classes = 5;
    int ns[STEPS];
    int32_t rows[STEPS][MAXN];
    tb_rng r;
    tb_rng_seed(&r, 17, 2);
    for (int k = 0; k < STEPS; k++) {
        ns[k] = k % 4 == 1 ? 2 : k % 4 == 2 ? 3 : MAXN; /* full on the ring's last slot (k = 7) */
        for (int i = 0; i < MAXN; i++) rows[k][i] = (int32_t)tb_rng_below(&r, P);
    }
    rows[0][0] = rows[0][1] = 5, rows[0][2] = 0, rows[0][3] = 6; /* a repeat, out of order */
    const size_t per = (size_t)3 * S * S;
    float *host = malloc((size_t)P * per * sizeof *host), *x = malloc((size_t)MAXN * per * sizeof *x);
    int32_t plabels[P] = {4, 0, 3, 1, 2, 3, 0}; /* pool row r's label; r != plabels[r] for most r */
    for (size_t i = 0; i < (size_t)P * per; i++) host[i] = (float)tb_rng_normal(&r);
    float *pool = g_be->alloc(g_be, (size_t)P * per * sizeof *pool);
    g_be->copy_h2d(g_be, pool, host, (size_t)P * per * sizeof *pool);
    for (int copies = 0; copies <= 1; copies++) {
        tb_resnet_config cfg;
        tb_resnet_config_init(&cfg, "resnet18", classes);
        tb_model_opts o = tb_model_default_opts();
        o.op_copies = copies;
        tb_model *a = tb_model_create(&cfg, g_be, MAXN, S, S, &o), *b = tb_model_create(&cfg, g_be, MAXN, S, S, &o);
        tb_model_init(a, 8);
        tb_model_init(b, 8);
        int same_logits = 1, same_loss = 1, steps = copies ? 4 : STEPS;
        for (int k = 0; k < steps; k++) {
            int n = ns[k];
            int32_t y[MAXN];
            for (int i = 0; i < n; i++) {
                memcpy(x + (size_t)i * per, host + (size_t)rows[k][i] * per, per * sizeof *x);
                y[i] = plabels[rows[k][i]];
            }
            tb_model_set_batch(a, x, y, n);
            tb_model_set_batch_rows(b, pool, P, rows[k], y, n);
            tb_model *ms[2] = {a, b};
            float lg[2][MAXN * 5];
            for (int j = 0; j < 2; j++) {
                tb_model_forward(ms[j], 1);
                tb_model_loss(ms[j], 0.1, 1.0);
                tb_model_read_logits(ms[j], lg[j]);
                tb_model_backward(ms[j], NULL, NULL);
                tb_sgd_args sa = {0.05, 0.9, 0, 1.0};
                tb_model_sgd_step(ms[j], &sa, 1e-4, 0);
            }
            if (memcmp(lg[0], lg[1], (size_t)n * classes * sizeof(float)) != 0) same_logits = 0;
            if (tb_model_read_loss(a) != tb_model_read_loss(b)) same_loss = 0;
        }
        TB_CHECK(same_logits && same_loss, "resident rows == host batch (op copies %d): logits %s, loss %s over %d steps",
                 copies, same_logits ? "equal" : "DIFFER", same_loss ? "equal" : "DIFFER", steps);
        TB_CHECK(same_buffer(a, b, a->params, b->params, a->pt.n_train) &&
                     same_buffer(a, b, a->momentum, b->momentum, a->pt.n_train),
                 "resident rows == host batch (op copies %d): params and momentum bit-identical after %d steps",
                 copies, steps);
        tb_model_destroy(a);
        tb_model_destroy(b);
    }
    g_be->release(g_be, pool);
    free(host);
    free(x);
}

/* Loss scaling on the device's terms, run on the CPU: the loss gradient is
 * scaled, SGD unscales, an overflowed step changes nothing but the scaler
 * (scale halved, one skipped step), and the next step trains again. */
static void test_loss_scaling_skip(void) {
    int n = 2, S = 32, classes = 3;
    tb_resnet_config cfg;
    tb_resnet_config_init(&cfg, "resnet18", classes);
    tb_model_opts o = tb_model_default_opts();
    o.loss_scaling.init_scale = 1024;
    o.loss_scaling.growth_interval = 2;
    tb_model *m = tb_model_create(&cfg, g_be, n, S, S, &o);
    tb_model *ref = make("resnet18", classes, n, S, S, 1);
    tb_model_init(m, 9);
    tb_model_init(ref, 9);
    float *x = malloc((size_t)n * 3 * S * S * sizeof *x);
    int32_t y[2];
    random_batch(n, S, S, classes, 77, x, y);
    step(m, x, y, n, 0.01, NULL);
    step(ref, x, y, n, 0.01, NULL);
    size_t nt = m->pt.n_train;
    tb_real *pm = malloc(nt * sizeof *pm), *pr = malloc(nt * sizeof *pr);
    m->be->copy_d2h(m->be, pm, m->params, nt * sizeof *pm);
    ref->be->copy_d2h(ref->be, pr, ref->params, nt * sizeof *pr);
    double maxd = 0, maxp = 0;
    for (size_t i = 0; i < nt; i++) {
        maxd = fmax(maxd, fabs(pm[i] - pr[i]));
        maxp = fmax(maxp, fabs(pr[i]));
    }
    TB_CHECK(maxd <= 1e-6 * maxp, "scaled step (x1024, then / 1024) == unscaled step: max diff %g", maxd);
    tb_step_scalars sc;
    tb_model_read_scalars(m, &sc);
    TB_CHECK(sc.loss_scale == 1024 && sc.good_steps == 1 && sc.skipped_steps == 0,
             "after a clean step: scale %g, good %d", (double)sc.loss_scale, sc.good_steps);
    /* the overflow: an Inf in a gradient after backward (a test-only fault) */
    tb_model_set_batch(m, x, y, n);
    tb_model_forward(m, 1);
    tb_model_loss(m, 0.0, 1.0);
    tb_model_backward(m, NULL, NULL);
    tb_real inf = (tb_real)INFINITY;
    m->be->copy_h2d(m->be, m->grads + nt / 2, &inf, sizeof inf);
    tb_real *mom0 = malloc(nt * sizeof *mom0);
    m->be->copy_d2h(m->be, pm, m->params, nt * sizeof *pm);
    m->be->copy_d2h(m->be, mom0, m->momentum, nt * sizeof *mom0);
    tb_sgd_args a = {0.01, 0.9, 0, 1.0};
    tb_model_sgd_step(m, &a, 1e-4, 0);
    TB_CHECK(same_buffer(m, m, m->params, m->params, nt), "(self-check)");
    tb_real *p1 = malloc(nt * sizeof *p1);
    m->be->copy_d2h(m->be, p1, m->params, nt * sizeof *p1);
    TB_CHECK(memcmp(p1, pm, nt * sizeof *p1) == 0, "the overflowed step left the weights untouched");
    m->be->copy_d2h(m->be, p1, m->momentum, nt * sizeof *p1);
    TB_CHECK(memcmp(p1, mom0, nt * sizeof *p1) == 0, "... and the momentum buffers");
    tb_model_read_scalars(m, &sc);
    TB_CHECK(sc.loss_scale == 512 && sc.skipped_steps == 1 && sc.good_steps == 0 && sc.found_inf == 0,
             "after the overflow: scale %g (512), skipped %d (1), flag %d", (double)sc.loss_scale,
             sc.skipped_steps, sc.found_inf);
    step(m, x, y, n, 0.01, NULL);
    m->be->copy_d2h(m->be, p1, m->params, nt * sizeof *p1);
    TB_CHECK(memcmp(p1, pm, nt * sizeof *p1) != 0, "the next step trains again");
    step(m, x, y, n, 0.01, NULL);
    tb_model_read_scalars(m, &sc);
    TB_CHECK(sc.loss_scale == 1024 && sc.skipped_steps == 1,
             "two clean steps at growth interval 2: scale back to %g", (double)sc.loss_scale);
    free(x), free(pm), free(pr), free(p1), free(mom0);
    tb_model_destroy(m);
    tb_model_destroy(ref);
}

/* Save -> load -> save gives bit-identical tensors, counters and momentum. */
static void test_checkpoint_roundtrip(void) {
    tb_model *a = make("resnet18", 7, 1, 32, 32, 1);
    tb_model *b = make("resnet18", 7, 1, 32, 32, 1);
    tb_model_init(a, 11);
    size_t nt = a->pt.n_train, ns = a->pt.n_state;
    tb_real *h = malloc((nt > ns ? nt : ns) * sizeof *h);
    tb_rng r;
    tb_rng_seed(&r, 1, 2);
    for (size_t i = 0; i < nt; i++) h[i] = (tb_real)tb_rng_normal(&r);
    a->be->copy_h2d(a->be, a->momentum, h, nt * sizeof *h);
    for (size_t i = 0; i < ns; i++) h[i] = (tb_real)tb_rng_uniform(&r) + 0.5f;
    a->be->copy_h2d(a->be, a->state, h, ns * sizeof *h);
    for (int i = 0; i < a->pt.n_counters; i++) a->counters[i] = 1000 + i;

    char path[512];
    tb_test_tmp(path, sizeof path, "tb_test_ckpt_XXXXXX");
    int fd = mkstemp(path);
    close(fd);
    tb_ckpt_meta meta;
    tb_ckpt_meta_for(&meta, a, 32, 123, 4, 11);
    tb_ckpt_save(path, a, &meta);
    tb_ckpt_meta back;
    tb_ckpt_read_meta(path, &back);
    TB_CHECK(strcmp(back.model, "resnet18") == 0 && back.classes == 7 && back.step == 123 &&
                 back.epoch == 4 && back.seed == 11 && back.image_size == 32,
             "meta round trip: %s %lld %lld", back.model, (long long)back.classes, (long long)back.step);
    tb_ckpt_load(path, b);
    tb_real *h2 = malloc((nt > ns ? nt : ns) * sizeof *h2);
    a->be->copy_d2h(a->be, h, a->params, nt * sizeof *h);
    b->be->copy_d2h(b->be, h2, b->params, nt * sizeof *h2);
    TB_CHECK(memcmp(h, h2, nt * sizeof *h) == 0, "params bit-identical after round trip");
    a->be->copy_d2h(a->be, h, a->momentum, nt * sizeof *h);
    b->be->copy_d2h(b->be, h2, b->momentum, nt * sizeof *h2);
    TB_CHECK(memcmp(h, h2, nt * sizeof *h) == 0, "momentum bit-identical after round trip");
    a->be->copy_d2h(a->be, h, a->state, ns * sizeof *h);
    b->be->copy_d2h(b->be, h2, b->state, ns * sizeof *h2);
    TB_CHECK(memcmp(h, h2, ns * sizeof *h) == 0, "running stats bit-identical after round trip");
    TB_CHECK(memcmp(a->counters, b->counters, (size_t)a->pt.n_counters * sizeof(int64_t)) == 0,
             "num_batches_tracked identical after round trip");
    unlink(path);
    free(h);
    free(h2);
    tb_model_destroy(a);
    tb_model_destroy(b);
}

/* A batch that leaves one value per channel in a BatchNorm is refused. */
static void test_degenerate_bn(void) {
    tb_model *m = make("resnet18", 3, 1, 32, 32, 1);
    const char *bad = tb_model_degenerate_bn(m, 1);
    TB_CHECK(bad && strncmp(bad, "layer4", 6) == 0, "batch 1 at 32x32: %s", bad ? bad : "(none)");
    TB_CHECK(tb_model_degenerate_bn(m, 2) == NULL, "batch 2 at 32x32 is fine");
    tb_model_destroy(m);
}

int main(void) {
    tb_backend_opts bo = {.threads = 0};
    g_be = tb_cpu_backend_create(&bo);
    test_tables();
    test_init();
    test_grad_plan();
    test_fused_matches_unfused();
    test_checkpoint_roundtrip();
    test_degenerate_bn();
    test_op_copies();
    test_u8_batch();
    test_resident_rows();
    test_loss_scaling_skip();
    g_be->destroy(g_be);
    return tb_test_exit("test_model");
}
