/* test_fused_step.c - the fused training step of --fuse graph on the CPU
 * (its reference twins, each composed of the CPU's unfused ops) against the
 * unfused step (--fuse bn), and the fallback rules.
 *
 *  - The fallback rules: a CPU backend that says it cannot run some fused
 *    ops (no data gradient, no filter gradient, no prologue, no conv +
 *    statistics at all, none for 128-channel inputs); the BatchNorms move
 *    down as model/graph_fused.h says, with one line per kind of fallback,
 *    and the step is still the unfused one.
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

typedef struct {
    float loss;
    float *grads, *state, *params; /* every trainable gradient, running statistic, updated weight */
    size_t ng, ns;
    char lines[2048]; /* what planning printed */
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
    char path[] = "/tmp/tb_fused_lines_XXXXXX";
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

static void test_steps(void) {
    tb_backend_opts bo = {.threads = 2};
    tb_backend *be = tb_cpu_backend_create(&bo);
    g_inner = *be;
    be->fconv_plan = w_fconv_plan;
    be->bn_finalize = w_bn_finalize;
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
