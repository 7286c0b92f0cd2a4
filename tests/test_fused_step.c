/* test_fused_step.c - the fused training step of --fuse graph on the CPU
 * (its reference twins, each composed of the CPU's unfused ops) against the
 * unfused step (--fuse bn), and the fallback rules.
 *
 *  - The fallback rules: a CPU backend that says it cannot run some fused
 *    ops (no data gradient, no filter gradient, no prologue, no conv +
 *    statistics at all, none for 128-channel inputs); the BatchNorms move
 *    down as model/graph_fused.h says, with one line per kind of fallback,
 *    and the step is still the unfused one.
 *  - --fuse fastest (model/graph_fused_time.c): with the fused or the
 *    unfused ops slowed down on purpose, the timed BatchNorms go where the
 *    times say (block ends first, their shortcut's BN then applied), the
 *    step stays the unfused one, and the choices kept in the backend's store
 *    are used instead of timing (one that does not parse is timed again).
 *  - The step: loss, every gradient, the running statistics and the weights
 *    after SGD, ResNet-50 (every block kind: a BN folded into a conv whose
 *    own BN folds into the next, the shortcut's BN folded into the block
 *    end) and ResNet-18 under a mixed fallback. A planted error (the
 *    finalize's momentum doubled) must fail the same comparison.
 *
 * Built twice. In float32 (test_fused_step) the two computations differ by
 * rounding (statistics from sum and sum of squares against shifted two-pass
 * sums; x * scale + bias against (x - mean) * invstd * gamma + beta), and a
 * rounding that moves a ReLU input across zero moves a whole element of the
 * gradient (the golden tests' "ReLU flip"): there only the loss (1e-4) and
 * the schedule are compared. In float64 (test_fused_step_fp64, the model
 * and CPU sources with TB_REAL_DOUBLE as trainbench_fp64) no flip happens
 * and everything is compared at 1e-9 of each buffer's largest value.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/cpu/cpu_backend.h"
#include "model/graph_fused.h"
#include "model/model.h"
#include "tests/tb_test.h"

/* ---- 4 and 5. fallbacks and the fused step on the CPU --------------------------------------- */

static tb_backend g_inner;    /* the CPU backend's own table */
static unsigned g_refuse;     /* TB_FCONV_* bits the wrapped backend says it cannot run */
static int g_refuse_pro_only; /* ... only for convs with a BN folded into them */
static int g_refuse_cin;      /* ... only for convs with this many input channels (0: all) */
static int g_plant;           /* the finalize's momentum doubled */
/* --fuse fastest, timed on a virtual clock: while g_virtual, the events'
 * elapsed times are g_vclock's, which only the slowed calls advance (by
 * the ms given: the fused conv forward or, g_slow_dgrad, the fused data
 * gradient, of convs with g_slow_cin input channels (0: all); every
 * bn_forward_train). Every way costs 0 otherwise: a tie, which keeps the
 * fusion. Real times never decide, so the choices are the same on a busy
 * machine. */
static int g_virtual, g_slow_fused_ms, g_slow_dgrad, g_slow_cin, g_slow_unfused_ms;
static double g_vclock;
static struct {
    tb_event *e;
    double t;
} g_vev[16];
/* the backend's store of timed choices (choice_get/_put), in memory */
static int g_store_on, g_store_n, g_store_gets, g_store_puts;
static char g_store_key[64][200], g_store_val[64][64];

/* The ready hook as an in-place all-reduce over two identical replicas
 * does it: each range it reports is doubled at once, so an op that still
 * reads or writes a range after reporting it changes the gradients by more
 * than the factor 2. g_seen counts the reports of each gradient element. */
static int g_ready_double;
static tb_model *g_ready_model;
static unsigned char *g_seen;

static void double_ready(void *ctx, size_t off, size_t count) {
    (void)ctx;
    tb_model *m = g_ready_model;
    tb_real *h = malloc(count * sizeof *h);
    m->be->copy_d2h(m->be, h, m->grads + off, count * sizeof *h);
    for (size_t i = 0; i < count; i++) h[i] *= 2;
    m->be->copy_h2d(m->be, m->grads + off, h, count * sizeof *h);
    m->be->sync(m->be);
    for (size_t i = 0; i < count; i++) g_seen[off + i]++;
    free(h);
}

static void *w_fconv_plan(tb_backend *be, const tb_fconv_args *a, unsigned want, unsigned *got) {
    void *p = g_inner.fconv_plan(be, a, want, got);
    if ((!g_refuse_pro_only || a->pro) && (!g_refuse_cin || a->g->cin == g_refuse_cin)) *got &= ~g_refuse;
    return p;
}

static void w_bn_finalize(tb_backend *be, void *plan, const tb_bn_finalize_args *a) {
    tb_bn_finalize_args b = *a;
    if (g_plant) b.momentum *= 2;
    g_inner.bn_finalize(be, plan, &b);
}

static void w_fconv_forward(tb_backend *be, void *plan, const tb_fconv_args *a) {
    if (!g_slow_dgrad && (!g_slow_cin || a->g->cin == g_slow_cin)) g_vclock += g_slow_fused_ms;
    g_inner.fconv_forward(be, plan, a);
}

static void w_fconv_backward_data(tb_backend *be, void *plan, const tb_fconv_args *a) {
    if (g_slow_dgrad && (!g_slow_cin || a->g->cin == g_slow_cin)) g_vclock += g_slow_fused_ms;
    g_inner.fconv_backward_data(be, plan, a);
}

static void w_bn_forward_train(tb_backend *be, const tb_bn_args *a) {
    g_vclock += g_slow_unfused_ms;
    g_inner.bn_forward_train(be, a);
}

static void w_event_record(tb_backend *be, tb_event *e, tb_stream *s) {
    g_inner.event_record(be, e, s);
    int i = 0, free_slot = -1;
    for (; i < 16 && g_vev[i].e != e; i++)
        if (!g_vev[i].e && free_slot < 0) free_slot = i;
    if (i == 16) i = free_slot;
    if (i >= 0) g_vev[i].e = e, g_vev[i].t = g_vclock;
}

static double w_event_elapsed_ms(tb_backend *be, tb_event *a, tb_event *b) {
    double ta = -1, tb = -1;
    for (int i = 0; i < 16; i++) {
        if (g_vev[i].e == a) ta = g_vev[i].t;
        if (g_vev[i].e == b) tb = g_vev[i].t;
    }
    if (!g_virtual || ta < 0 || tb < 0) return g_inner.event_elapsed_ms(be, a, b);
    return tb - ta;
}

static void w_event_destroy(tb_backend *be, tb_event *e) {
    for (int i = 0; i < 16; i++)
        if (g_vev[i].e == e) g_vev[i].e = NULL;
    g_inner.event_destroy(be, e);
}

static int w_choice_get(tb_backend *be, const char *key, char *out, size_t len) {
    (void)be;
    if (!g_store_on) return 0;
    g_store_gets++;
    for (int i = 0; i < g_store_n; i++)
        if (strcmp(g_store_key[i], key) == 0) {
            snprintf(out, len, "%s", g_store_val[i]);
            return 1;
        }
    return 0;
}

static void w_choice_put(tb_backend *be, const char *key, const char *value) {
    (void)be;
    if (!g_store_on) return;
    g_store_puts++;
    int i = 0;
    while (i < g_store_n && strcmp(g_store_key[i], key) != 0) i++;
    if (i == 64) return;
    if (i == g_store_n) g_store_n++;
    snprintf(g_store_key[i], sizeof g_store_key[i], "%s", key);
    snprintf(g_store_val[i], sizeof g_store_val[i], "%s", value);
}

typedef struct {
    float loss;
    float *grads, *state, *params; /* every trainable gradient, running statistic, updated weight */
    size_t ng, ns;
    char lines[4096]; /* what planning printed */
    int counts[4];
} step_out;

/* model at n x 3 x hw x hw from fixed weights and data; planning's stdout
 * captured into o->lines; then work 0: nothing more, 1: forward and loss,
 * 2: the whole training step (backward, gradients, statistics, SGD). */
static void run_step(tb_backend *be, const char *model, int fuse, int n, int hw, int work, step_out *o) {
    tb_resnet_config cfg;
    tb_resnet_config_init(&cfg, model, 10);
    tb_model_opts mo = tb_model_default_opts();
    mo.fuse = fuse;
    char path[512];
    tb_test_tmp(path, sizeof path, "tb_fused_lines_XXXXXX");
    int fd = mkstemp(path), saved = dup(1);
    fflush(stdout);
    dup2(fd, 1);
    tb_model *m = tb_model_create(&cfg, be, n, hw, hw, &mo);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(fd);
    char *text = tb_test_read_text(path);
    snprintf(o->lines, sizeof o->lines, "%s", text);
    free(text);
    unlink(path);
    tb_fused_count(&m->g, 1, o->counts);
    o->grads = o->params = o->state = NULL;
    if (work == 0) {
        tb_model_destroy(m);
        return;
    }
    tb_model_init(m, 7);
    /* every activation and gradient NaN until an op writes it: a read of a
     * buffer the schedule never wrote (say, a folded BN's output) shows as
     * NaN, not as what an earlier model left in reused memory */
    for (size_t i = 0; i < m->g.act_arena_bytes / sizeof(tb_real); i++) ((tb_real *)m->g.act_arena)[i] = NAN;
    for (size_t i = 0; i < m->g.grad_arena_bytes / sizeof(tb_real); i++) ((tb_real *)m->g.grad_arena)[i] = NAN;
    size_t px = (size_t)n * 3 * hw * hw;
    float *x = malloc(px * sizeof *x);
    int32_t *y = malloc((size_t)n * sizeof *y);
    uint64_t r = 12345;
    for (size_t i = 0; i < px; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((r >> 40) % 2000) / 1000.0f - 1.0f;
    }
    for (int i = 0; i < n; i++) y[i] = (i * 7) % 10;
    tb_model_set_batch(m, x, y, n);
    tb_model_forward(m, 1);
    tb_model_loss(m, 0.1, 1.0);
    o->loss = tb_model_read_loss(m);
    if (work == 1) {
        tb_model_destroy(m);
        free(x);
        free(y);
        return;
    }
    if (g_ready_double) {
        g_ready_model = m;
        g_seen = calloc(m->pt.n_train, 1);
        tb_model_backward(m, double_ready, NULL);
    } else {
        tb_model_backward(m, NULL, NULL);
    }
    const tb_param_table *pt = &m->pt;
    o->ng = pt->n_train;
    o->ns = pt->n_state;
    o->grads = malloc(o->ng * sizeof(float));
    o->params = malloc(o->ng * sizeof(float));
    o->state = malloc((o->ns + 1) * sizeof(float));
    for (int i = 0; i < pt->count; i++) {
        const tb_param *p = &pt->items[i];
        tb_param_store st = tb_param_store_of(p->role);
        if (st == TB_STORE_TRAIN) tb_model_get_grad(m, i, o->grads + p->offset);
        if (st == TB_STORE_STATE) tb_model_get_tensor(m, i, o->state + p->offset);
    }
    tb_sgd_args sa = {0.1, 0.9, 0, 1.0};
    tb_model_sgd_step(m, &sa, 1e-4, 0);
    for (int i = 0; i < pt->count; i++)
        if (tb_param_store_of(pt->items[i].role) == TB_STORE_TRAIN)
            tb_model_get_tensor(m, i, o->params + pt->items[i].offset);
    tb_model_destroy(m);
    free(x);
    free(y);
}

static void free_out(step_out *o) {
    free(o->grads);
    free(o->state);
    free(o->params);
}

/* max |a - b| over n against tol * max |b| (+ tol |b_i|) */
static int close_all(const float *a, const float *b, size_t n, double tol, double *err) {
    double mx = 0, e = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i]));
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= tol * mx + tol * fabs(b[i]))) ok = 0;
        if (d > e) e = d;
    }
    *err = mx > 0 ? e / mx : e;
    return ok;
}

#define FP64 (TB_REAL_DTYPE == TB_F64)

/* Fused vs unfused. float64 arithmetic: loss, gradients, running statistics
 * and weights after SGD within 1e-6 of each buffer's largest value (the
 * host reads float32: a few of its ulps). float32: the loss within 1e-3
 * (at 32 px a batch of 4 leaves 4 values per channel in layer4, where the
 * statistics' E[x^2] - E[x]^2 in float cancels to a few 1e-4). */
static int same_step(const step_out *f, const step_out *u, char *why, size_t len) {
    double eg, es, ep;
    int ok_l = fabs(f->loss - u->loss) <= (FP64 ? 1e-6 : 1e-3) * fabs(u->loss);
    if (!FP64) {
        snprintf(why, len, "loss %.7g vs %.7g (float32: the loss only)", f->loss, u->loss);
        return ok_l;
    }
    int ok_g = close_all(f->grads, u->grads, u->ng, 1e-6, &eg);
    int ok_s = close_all(f->state, u->state, u->ns, 1e-6, &es);
    int ok_p = close_all(f->params, u->params, u->ng, 1e-6, &ep);
    snprintf(why, len, "loss %.9g vs %.9g, gradients %.1e, running stats %.1e, weights %.1e of max", f->loss, u->loss,
             eg, es, ep);
    return ok_l && ok_g && ok_s && ok_p;
}

/* The ready hook's contract, which overlapping the all-reduce with backward
 * rests on: every gradient element is reported exactly once, and only when
 * no later op of the backward pass reads or writes it. Checked with a hook
 * that doubles each range it is given (what a sum over two identical
 * replicas makes of it): the gradients must come out exactly twice those of
 * a backward pass without the hook. Fused and unfused, ResNet-18. */
static void test_ready_order(tb_backend *be) {
    static const struct {
        int fuse;
        const char *name;
    } modes[] = {{TB_FUSE_BN, "unfused"}, {TB_FUSE_GRAPH, "fused"}};
    for (int k = 0; k < 2; k++) {
        step_out ref, dbl;
        run_step(be, "resnet18", modes[k].fuse, 2, 32, 2, &ref);
        g_ready_double = 1;
        run_step(be, "resnet18", modes[k].fuse, 2, 32, 2, &dbl);
        g_ready_double = 0;
        size_t wrong = 0, unseen = 0, twice = 0, first = (size_t)-1;
        for (size_t i = 0; i < ref.ng; i++) {
            if (!(dbl.grads[i] == 2 * ref.grads[i])) {
                wrong++;
                if (first == (size_t)-1) first = i;
            }
            unseen += g_seen[i] == 0;
            twice += g_seen[i] > 1;
        }
        TB_CHECK(wrong == 0 && unseen == 0 && twice == 0,
                 "%s backward, ready hook doubling its ranges: %zu of %zu gradients not exactly 2x (first at %zu: "
                 "%.9g vs 2 x %.9g), %zu never reported, %zu reported twice",
                 modes[k].name, wrong, ref.ng, first, first == (size_t)-1 ? 0.0 : dbl.grads[first],
                 first == (size_t)-1 ? 0.0 : ref.grads[first], unseen, twice);
        printf("# %s backward: every gradient reported once, none read after its report (%zu gradients)\n",
               modes[k].name, ref.ng);
        free(g_seen);
        g_seen = NULL;
        free_out(&ref);
        free_out(&dbl);
    }
}

/* The stored choice whose key holds what, set to value (the test's store). */
static int store_set(const char *what, const char *value) {
    for (int i = 0; i < g_store_n; i++)
        if (strstr(g_store_key[i], what)) {
            snprintf(g_store_val[i], sizeof g_store_val[i], "%s", value);
            return 1;
        }
    return 0;
}

static void check_fastest(const step_out *fu, const char *what, const int want[4], const char *line) {
    TB_CHECK(memcmp(fu->counts, want, sizeof fu->counts) == 0 && strstr(fu->lines, line),
             "--fuse fastest, %s: %d unfused, %d applied, %d folded, %d into the block end (want %d %d %d %d); line "
             "\"%s\" in:\n%s",
             what, fu->counts[0], fu->counts[1], fu->counts[2], fu->counts[3], want[0], want[1], want[2], want[3],
             line, fu->lines);
}

/* --fuse fastest on ResNet-18 (timed on the virtual clock), with the folds
 * refused (no fused data gradient behind a prologue), so 20 BatchNorms are
 * timed: the 8 block ends first, then the blocks' first BNs, the 3
 * shortcuts and the stem; then with the folds: 8 folds timed first.
 * un: the unfused step (float64), to which each mix must be equal. */
static void test_fastest(tb_backend *be, const step_out *un) {
    char why[256], line[96];
    step_out fu;
    const int w = FP64 ? 2 : 0;
    g_virtual = 1;
    g_refuse = TB_FCONV_DGRAD, g_refuse_pro_only = 1;
    /* the fused conv forward slower everywhere: every timed BN unfused */
    g_slow_fused_ms = 10;
    run_step(be, "resnet18", TB_FUSE_FASTEST, 2, 32, w, &fu);
    check_fastest(&fu, "the fused ops slower", (const int[4]){20, 0, 0, 0}, "# fuse fastest: 20 BatchNorms timed");
    TB_CHECK(strstr(fu.lines, ": 20 unfused (layer1.0.bn2, layer1.1.bn2, "), "the block ends first: %s", fu.lines);
    if (w) TB_CHECK(same_step(&fu, un, why, sizeof why), "--fuse fastest, all unfused: the step: %s", why);
    free_out(&fu);

    /* slower fused ops only on the convs with 128 input channels; the
     * unfused BN forward slower everywhere. Unfused: layer2.0.bn2 and
     * layer2.1.bn2 (block ends: layer2.0's shortcut BN applied now, and
     * fused), layer2.1.bn1, layer3.0.bn1 and layer3.0.downsample.1 */
    g_slow_fused_ms = 12, g_slow_cin = 128, g_slow_unfused_ms = 3;
    g_store_on = 1, g_store_n = g_store_puts = 0;
    run_step(be, "resnet18", TB_FUSE_FASTEST, 2, 32, w, &fu);
    check_fastest(&fu, "mixed", (const int[4]){5, 14, 0, 1}, ": 5 unfused (layer2.0.bn2, layer2.1.bn2, ");
    snprintf(line, sizeof line, "%d problems, 0 of them from the plan cache", g_store_n);
    TB_CHECK(strstr(fu.lines, line) && g_store_puts == g_store_n && g_store_n >= 8,
             "each problem timed once and stored (%d stored, %d puts): \"%s\" in %s", g_store_n, g_store_puts, line,
             fu.lines);
    if (w) TB_CHECK(same_step(&fu, un, why, sizeof why), "--fuse fastest, mixed: the step: %s", why);
    if (w) printf("# --fuse fastest, 5 of 20 timed BatchNorms unfused: %s\n", why);
    free_out(&fu);

    /* slowed the other way: the stored choices hold, nothing is timed */
    g_slow_cin = 0, g_slow_unfused_ms = 0;
    const int stored = g_store_n;
    run_step(be, "resnet18", TB_FUSE_FASTEST, 2, 32, 0, &fu);
    snprintf(line, sizeof line, "%d problems, %d of them from the plan cache", stored, stored);
    check_fastest(&fu, "from the store", (const int[4]){5, 14, 0, 1}, line);
    TB_CHECK(g_store_puts == stored, "nothing timed again: %d puts", g_store_puts - stored);
    free_out(&fu);

    /* the stem's choice no longer parses ("unfused" where its times say
     * fused): timed again, unfused now; one line says so */
    TB_CHECK(store_set("conv 3->64 k7", "unfused 1.0000 0.9950"), "the stem's choice is in the store");
    run_step(be, "resnet18", TB_FUSE_FASTEST, 2, 32, 0, &fu);
    check_fastest(&fu, "a stored choice that does not parse", (const int[4]){6, 13, 0, 1},
                  "\"unfused 1.0000 0.9950\" is not a timed choice; timing again");
    TB_CHECK(g_store_puts == stored + 1, "the stem timed and stored again: %d puts", g_store_puts - stored);
    free_out(&fu);
    g_store_on = 0;
    g_refuse = 0, g_refuse_pro_only = 0;

    /* the folds: the fused data gradient slower behind the convs with 128
     * input channels (layer2.0.conv2, layer2.1.conv2): their BNs applied
     * instead, the other 6 folds kept; the rest ties (fused kept) */
    g_slow_fused_ms = 10, g_slow_dgrad = 1, g_slow_cin = 128;
    run_step(be, "resnet18", TB_FUSE_FASTEST, 2, 32, w, &fu);
    check_fastest(&fu, "folds", (const int[4]){0, 11, 6, 3},
                  "# fuse fastest: 8 folds timed, the BN in the next conv's prologue against applied");
    TB_CHECK(strstr(fu.lines, ": 2 applied instead (layer2.0.bn1, layer2.1.bn1)") &&
                 strstr(fu.lines, "# fuse fastest: 8 BatchNorms timed on their conv's statistics"),
             "two folds applied, then 8 timed against unfused (the stem, 3 shortcuts, the 2 applied BNs and the 2 "
             "block ends whose conv lost its prologue): %s",
             fu.lines);
    if (w) TB_CHECK(same_step(&fu, un, why, sizeof why), "--fuse fastest, 2 of 8 folds applied: the step: %s", why);
    if (w) printf("# --fuse fastest, 2 of 8 folds applied: %s\n", why);
    free_out(&fu);
    g_slow_fused_ms = 0, g_slow_dgrad = 0, g_slow_cin = 0, g_virtual = 0;

    /* the rule and the stored value */
    double mf, mu;
    int u;
    char v[64];
    tb_fused_time_value(1.0, 0.979996, v, sizeof v); /* unfused by the raw times, fused as written (0.98) */
    TB_CHECK(tb_fused_time_parse(v, &u, &mf, &mu) == 0 && !u && strcmp(v, "fused 1.0000 0.9800") == 0,
             "a value's word comes from its times as written: \"%s\"", v);
    TB_CHECK(!tb_fused_time_pick(1.0, 0.99) && tb_fused_time_pick(1.0, 0.97) && !tb_fused_time_pick(0.5, 1.0),
             "fused keeps a tie within 2 %%");
    TB_CHECK(tb_fused_time_parse("unfused 1.0000 0.5000", &u, &mf, &mu) == 0 && u && mf == 1.0 && mu == 0.5 &&
                 tb_fused_time_parse("fused 1.0 0.99", &u, &mf, &mu) == 0 && !u,
             "stored values parse");
    static const char *bad[] = {"unfused 1.0 0.99", "fused 1.0 0.5", "fast 1 2", "fused 1 2 x",
                                "fused nan 1",      "fused -1 2",    "fused 1",  ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TB_CHECK(tb_fused_time_parse(bad[i], &u, &mf, &mu) == -1, "\"%s\" is refused", bad[i]);
}

static void test_steps(void) {
    tb_backend_opts bo = {.threads = 2};
    tb_backend *be = tb_cpu_backend_create(&bo);
    g_inner = *be;
    be->fconv_plan = w_fconv_plan;
    be->bn_finalize = w_bn_finalize;
    be->fconv_forward = w_fconv_forward;
    be->fconv_backward_data = w_fconv_backward_data;
    be->bn_forward_train = w_bn_forward_train;
    be->event_record = w_event_record;
    be->event_elapsed_ms = w_event_elapsed_ms;
    be->event_destroy = w_event_destroy;
    be->choice_get = w_choice_get;
    be->choice_put = w_choice_put;
    char why[256];
    step_out un, fu;
    /* ResNet-50 at 32 px, batch 4: every block kind (downsample, stride on the 3x3) */
    int work = FP64 ? 2 : 1; /* float32: forward and loss only */
    run_step(be, "resnet50", TB_FUSE_BN, 4, 32, work, &un);
    run_step(be, "resnet50", TB_FUSE_GRAPH, 4, 32, work, &fu);
    TB_CHECK(same_step(&fu, &un, why, sizeof why), "resnet50 fused step (CPU twins) = unfused step: %s", why);
    printf("# resnet50 fused vs unfused: %s\n", why);
    TB_CHECK(fu.counts[TB_BNF_FOLD] == 32 && fu.counts[TB_BNF_ZFOLD] == 4 && fu.counts[TB_BNF_APPLY] == 17 &&
                 strstr(fu.lines, "# fuse graph: 53 of 53 BatchNorms on conv statistics: 32 folded"),
             "resnet50: everything fused, one summary line (%s)", fu.lines);
    free_out(&fu);
    free_out(&un);

    /* ResNet-18 under each fallback: the modes move as graph_fused.h says; in
     * float64 the mix of refusals also runs the step, which stays the
     * unfused one */
    static const struct {
        const char *what;
        unsigned refuse;
        int pro_only, cin, step;
        int counts[4];
        const char *line;
    } fb[5] = {
        {"no fused data gradient", TB_FCONV_DGRAD, 1, 0, 0, {0, 17, 0, 3}, "8 BatchNorms applied instead of folded"},
        {"no fused filter gradient", TB_FCONV_WGRAD, 1, 0, 0, {0, 17, 0, 3}, "no filter gradient with the BN"},
        {"no prologue in the forward", TB_FCONV_FWD, 1, 0, 0, {0, 17, 0, 3}, "no conv + statistics with the BN"},
        {"no conv + statistics at all", TB_FCONV_FWD, 0, 0, 0, {20, 0, 0, 0}, "20 BatchNorms unfused"},
        {"no conv + statistics for 128-channel inputs",
         TB_FCONV_FWD,
         0,
         128,
         1,
         {5, 9, 5, 1},
         "1 shortcut BatchNorm applied instead of folded into the block end"},
    };
    if (FP64) run_step(be, "resnet18", TB_FUSE_BN, 2, 32, 2, &un);
    for (int k = 0; k < 5; k++) {
        g_refuse = fb[k].refuse, g_refuse_pro_only = fb[k].pro_only, g_refuse_cin = fb[k].cin;
        int w = FP64 && fb[k].step ? 2 : 0;
        run_step(be, "resnet18", TB_FUSE_GRAPH, 2, 32, w, &fu);
        TB_CHECK(memcmp(fu.counts, fb[k].counts, sizeof fu.counts) == 0 && strstr(fu.lines, fb[k].line),
                 "fallback, %s: %d unfused, %d applied, %d folded, %d into the block end (want %d %d %d %d); line "
                 "\"%s\" in:\n%s",
                 fb[k].what, fu.counts[0], fu.counts[1], fu.counts[2], fu.counts[3], fb[k].counts[0], fb[k].counts[1],
                 fb[k].counts[2], fb[k].counts[3], fb[k].line, fu.lines);
        if (w) {
            TB_CHECK(same_step(&fu, &un, why, sizeof why), "fallback, %s: the step equals the unfused one: %s",
                     fb[k].what, why);
            printf("# fallback, %s: %s\n", fb[k].what, why);
        }
        free_out(&fu);
    }
    g_refuse = 0, g_refuse_pro_only = 0, g_refuse_cin = 0;
    test_fastest(be, &un);
    test_ready_order(be);
    if (FP64) { /* the planted error: the finalize's momentum doubled must fail the comparison */
        g_plant = 1;
        run_step(be, "resnet18", TB_FUSE_GRAPH, 2, 32, 2, &fu);
        TB_CHECK(!same_step(&fu, &un, why, sizeof why),
                 "planted error (finalize's momentum doubled) fails the comparison: %s", why);
        printf("# planted error (finalize's momentum doubled): %s\n", why);
        g_plant = 0;
        free_out(&fu);
        free_out(&un);
    }
    be->destroy(be);
}

int main(void) {
    test_steps();
    return tb_test_exit(TB_REAL_DTYPE == TB_F64 ? "fused_step_fp64" : "fused_step");
}
