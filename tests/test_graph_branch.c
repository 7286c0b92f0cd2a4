/* test_graph_branch.c - the conv's weight gradient on the backend's second
 * queue (backend.h: branch_begin, branch_end, branch_join; model/graph.c:
 * conv_backward), on the host.
 *
 * The CPU backend runs every op at once, in order, and never branches.
 * Wrapped here, its branch_begin says yes, and the ops queued inside the
 * branch (the filter gradient; its conversion, where there is one) are
 * held and run at one of the moments a GPU's two streams allow:
 *   early  at branch_end, before the main queue's ops queued after it;
 *   late   at branch_join, after them.
 * Each must train exactly as the unwrapped backend does (weights, momentum
 * and BatchNorm statistics bit for bit after two SGD steps), and each
 * gradient range must be final when the ready hook receives it: its bytes
 * then are its bytes after backward (the hook is where the all-reduce of a
 * bucket is ordered after the compute stream).
 *
 * Planted: the branch's ops run only after backward (a join that does not
 * wait). The ready hook then sees ranges that are not final and the weights
 * differ: both checks must say so, or the test fails.
 *
 * The model keeps op copies of its weights (as 16-bit training does), so a
 * backward has weight-gradient conversions: with the ready hook, each is
 * queued in its conv's branch; without one (one rank, model/graph.c) they
 * all run at the end of backward in one convert_many, which must come after
 * every branch has joined and run: trained without the hook, late trains
 * as the plain run does and no convert_many is called with a
 * branch open, ended or holding ops; the planted late branch is caught by
 * the weights and by that count.
 *
 * Also counted: every conv with an input gradient branches (all but the
 * stem; under --fuse graph the convs with a folded BN too, whose filter
 * gradient is the backend's fconv_backward_filter); none while the op
 * profile times a step (each op alone); none on the plain CPU backend.
 * ResNet-18 and ResNet-50, fused and unfused. Exit 0 when every check
 * passes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/rng.h"
#include "model/cpu/cpu_backend.h"
#include "model/model.h"
#include "tests/tb_test.h"

typedef enum { PLAIN, EARLY, LATE, PLANT_AFTER } mode;
static const char *mode_name[] = {"plain", "early", "late", "planted: after backward"};

/* ---- the wrapper: a second queue whose ops run early, late or too late ---------- */

typedef struct {
    int kind;                     /* 0: conv_backward_filter, 1: convert, 2: fconv_backward_filter */
    void *plan;
    const tb_conv_geom *g;
    tb_tensor a, b, c;            /* filter: x, dy, dw; convert: src, dst */
    int acc;
    /* fused: the args with every tensor and the fold copied here (the
     * caller's live on its stack) */
    tb_fconv_args fa;
    tb_tensor ft[8];
    tb_bn_fold fold;
} held_op;

#define MAX_HELD 256
static tb_backend g_real;
static mode g_mode;
static int g_open, g_pending, g_begun, g_outside;
static held_op g_held[MAX_HELD];
static int g_nheld; /* held ops not yet run */

/* Runs every held op, in the order queued, and empties the queue. */
static void run_held(tb_backend *be) {
    for (int i = 0; i < g_nheld; i++) {
        held_op *h = &g_held[i];
        if (h->kind == 1) g_real.convert(be, &h->a, &h->b, h->acc);
        else if (h->kind == 2) g_real.fconv_backward_filter(be, h->plan, &h->fa);
        else g_real.conv_backward_filter(be, h->plan, h->g, &h->a, &h->b, &h->c, h->acc);
    }
    g_nheld = 0;
}

static held_op *hold(const held_op *h) {
    if (g_nheld == MAX_HELD) TB_FATAL("test_graph_branch: more than %d held ops", MAX_HELD);
    g_held[g_nheld] = *h;
    return &g_held[g_nheld++];
}

/* A tensor argument copied into the held op (NULL stays NULL). */
static const tb_tensor *keep_t(held_op *h, int i, const tb_tensor *t) {
    if (!t) return NULL;
    h->ft[i] = *t;
    return &h->ft[i];
}

static int w_branch_begin(tb_backend *be) {
    (void)be;
    if (g_open || g_pending) TB_FATAL("test_graph_branch: branch_begin before the last branch was joined");
    g_open = 1;
    g_begun++;
    return 1;
}

static void w_branch_end(tb_backend *be) {
    if (!g_open) TB_FATAL("test_graph_branch: branch_end with no branch open");
    g_open = 0;
    g_pending = 1;
    if (g_mode == EARLY) run_held(be);
}

static void w_branch_join(tb_backend *be) {
    if (!g_pending) TB_FATAL("test_graph_branch: branch_join with no branch ended");
    g_pending = 0;
    if (g_mode == LATE) run_held(be);
}

static void w_conv_backward_filter(tb_backend *be, void *plan, const tb_conv_geom *g, const tb_tensor *x,
                                   const tb_tensor *dy, const tb_tensor *dw, int accumulate) {
    if (!g_open) {
        g_outside++;
        g_real.conv_backward_filter(be, plan, g, x, dy, dw, accumulate);
        return;
    }
    held_op h = {.kind = 0, .plan = plan, .g = g, .a = *x, .b = *dy, .c = *dw, .acc = accumulate};
    hold(&h);
}

static void w_convert(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int accumulate) {
    if (!g_open) {
        g_real.convert(be, src, dst, accumulate);
        return;
    }
    held_op h = {.kind = 1, .a = *src, .b = *dst, .acc = accumulate};
    hold(&h);
}

static void w_fconv_backward_filter(tb_backend *be, void *plan, const tb_fconv_args *a) {
    if (!g_open) {
        g_outside++;
        g_real.fconv_backward_filter(be, plan, a);
        return;
    }
    held_op tmp = {.kind = 2, .plan = plan};
    held_op *h = hold(&tmp);
    h->fa = *a;
    h->fa.x = keep_t(h, 0, a->x), h->fa.w = keep_t(h, 1, a->w), h->fa.y = keep_t(h, 2, a->y);
    h->fa.dy = keep_t(h, 3, a->dy), h->fa.dw = keep_t(h, 4, a->dw), h->fa.dx = keep_t(h, 5, a->dx);
    h->fa.dr = keep_t(h, 6, a->dr), h->fa.xp = keep_t(h, 7, a->xp);
    if (a->pro) h->fold = *a->pro, h->fa.pro = &h->fold;
    h->fa.fin = NULL; /* planning only */
}

/* The data gradients are the main queue's ops of a branch's window: never inside it. */
static int g_data_inside;
static void w_conv_backward_data(tb_backend *be, void *plan, const tb_conv_geom *g, const tb_tensor *dy,
                                 const tb_tensor *w, const tb_tensor *dx, int accumulate) {
    if (g_open) g_data_inside++;
    g_real.conv_backward_data(be, plan, g, dy, w, dx, accumulate);
}
static void w_fconv_backward_data(tb_backend *be, void *plan, const tb_fconv_args *a) {
    if (g_open) g_data_inside++;
    g_real.fconv_backward_data(be, plan, a);
}
static void w_bn_input_grad(tb_backend *be, const tb_fconv_args *a) {
    if (g_open) g_data_inside++;
    g_real.bn_input_grad(be, a);
}

/* convert_many (the deferred weight-gradient conversions): calls, and calls
 * made while a branch was open, ended but not joined, or holding ops */
static int g_cm_calls, g_cm_bad;
static void w_convert_many(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int n, int accumulate) {
    g_cm_calls++;
    if (g_open || g_pending || g_nheld) g_cm_bad++;
    g_real.convert_many(be, src, dst, n, accumulate);
}

static void wrap(tb_backend *be) {
    g_real = *be;
    be->branch_begin = w_branch_begin;
    be->branch_end = w_branch_end;
    be->branch_join = w_branch_join;
    be->conv_backward_filter = w_conv_backward_filter;
    be->conv_backward_data = w_conv_backward_data;
    be->convert = w_convert;
    be->convert_many = w_convert_many;
    be->fconv_backward_filter = w_fconv_backward_filter;
    be->fconv_backward_data = w_fconv_backward_data;
    be->bn_input_grad = w_bn_input_grad;
}

/* ---- the ready hook: is each range final when it is handed over? ---------------- */

#define MAX_RANGES 512
typedef struct {
    const tb_real *grads;
    int n;
    size_t off[MAX_RANGES], count[MAX_RANGES];
    uint64_t hash[MAX_RANGES];
} ready_log;

static uint64_t hash_range(const tb_real *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n * sizeof *p; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static void on_ready(void *ctx, size_t offset, size_t count) {
    ready_log *r = ctx;
    if (r->n == MAX_RANGES) TB_FATAL("test_graph_branch: more than %d gradient ranges", MAX_RANGES);
    r->off[r->n] = offset, r->count[r->n] = count;
    r->hash[r->n++] = hash_range(r->grads + offset, count);
}

/* Ranges whose bytes changed after the hook got them. */
static int ranges_not_final(const ready_log *r) {
    int bad = 0;
    for (int i = 0; i < r->n; i++) bad += hash_range(r->grads + r->off[i], r->count[i]) != r->hash[i];
    return bad;
}

/* ---- one training run ----------------------------------------------------------- */

typedef struct {
    const char *model;
    int fuse, n, h, w, classes;
} shape;

typedef struct {
    float *params, *momentum, *state;
    size_t nt, ns;
    int ranges, not_final, branched, begun, outside, data_inside;
    int cm_calls, cm_bad; /* convert_many calls, and those made with a branch not yet run */
    int sticky; /* the graph's wgrad_branches at the end */
} outcome;

static float *copy_out(const tb_real *p, size_t n) {
    float *c = malloc((n ? n : 1) * sizeof *c);
    TB_ASSERT(c);
    for (size_t i = 0; i < n; i++) c[i] = (float)p[i];
    return c;
}

/* Convs with an input gradient (the ones that branch; a fused conv's is
 * its folded BN's input gradient): all but the stem. */
static int convs_with_dx(const tb_graph *g) {
    int k = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const tb_node *nd = &g->nodes[i];
        k += nd->kind == TB_NODE_CONV && g->acts[nd->in].need_grad;
    }
    return k;
}

/* hook: backward with the ready hook (0: none, the conversions deferred) */
static outcome train(const shape *s, mode md, int profile, int hook, int *expect) {
    tb_backend_opts bo = {.threads = 2};
    tb_backend *be = tb_cpu_backend_create(&bo);
    g_mode = md;
    if (md != PLAIN) wrap(be);
    g_open = g_pending = g_begun = g_outside = g_nheld = g_data_inside = g_cm_calls = g_cm_bad = 0;
    tb_resnet_config cfg;
    TB_ASSERT(tb_resnet_config_init(&cfg, s->model, s->classes) == 0);
    tb_model_opts o = tb_model_default_opts();
    o.fuse = s->fuse;
    o.op_copies = 1;
    tb_model *m = tb_model_create(&cfg, be, s->n, s->h, s->w, &o);
    tb_model_init(m, 11);
    *expect = convs_with_dx(&m->g);
    tb_op_prof *prof = NULL;
    if (profile) {
        prof = tb_op_prof_create(be, tb_model_op_profile_capacity(m));
        tb_model_set_op_profile(m, prof);
    }
    tb_rng rng;
    tb_rng_seed(&rng, 5, 0);
    size_t ni = (size_t)s->n * 3 * s->h * s->w;
    float *img = malloc(ni * sizeof *img);
    int32_t *lab = malloc((size_t)s->n * sizeof *lab);
    TB_ASSERT(img && lab);
    outcome r = {0};
    ready_log *log = calloc(1, sizeof *log);
    TB_ASSERT(log);
    for (int step = 0; step < 2; step++) {
        for (size_t i = 0; i < ni; i++) img[i] = (float)tb_rng_normal(&rng);
        for (int i = 0; i < s->n; i++) lab[i] = (int32_t)tb_rng_below(&rng, (uint64_t)s->classes);
        tb_model_set_batch(m, img, lab, s->n);
        if (prof) tb_op_prof_step_begin(prof);
        tb_model_forward(m, 1);
        tb_model_loss(m, 0.1, 1.0);
        log->grads = m->grads, log->n = 0;
        tb_model_backward(m, hook ? on_ready : NULL, log);
        if (md == PLANT_AFTER) { /* the planted fault: the branches run only now */
            run_held(be);
        }
        if (prof) tb_op_prof_step_end(prof, NULL, NULL);
        r.not_final += ranges_not_final(log);
        r.ranges += log->n;
        r.branched += m->g.wgrad_branching;
        tb_sgd_args sgd = {0.05, 0.9, 1, 1.0};
        tb_model_sgd_step(m, &sgd, 1e-4, 0);
    }
    r.begun = g_begun, r.outside = g_outside, r.data_inside = g_data_inside;
    r.cm_calls = g_cm_calls, r.cm_bad = g_cm_bad;
    r.sticky = m->g.wgrad_branches;
    r.nt = m->pt.n_train, r.ns = m->pt.n_state;
    r.params = copy_out(m->params, r.nt);
    r.momentum = copy_out(m->momentum, r.nt);
    r.state = copy_out(m->state, r.ns);
    free(img), free(lab), free(log);
    tb_model_set_op_profile(m, NULL);
    if (prof) tb_op_prof_destroy(prof);
    tb_model_destroy(m);
    be->destroy(be);
    return r;
}

static void free_outcome(outcome *o) { free(o->params), free(o->momentum), free(o->state); }

static int same_floats(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* weights, momentum and BatchNorm statistics bit for bit those of ref */
static int same_state(const outcome *o, const outcome *ref) {
    return same_floats(o->params, ref->params, ref->nt) && same_floats(o->momentum, ref->momentum, ref->nt) &&
           same_floats(o->state, ref->state, ref->ns);
}

static void run_shape(const shape *s) {
    char label[96];
    snprintf(label, sizeof label, "%s %dx3x%dx%d%s", s->model, s->n, s->h, s->w,
             s->fuse == TB_FUSE_GRAPH ? " --fuse graph" : "");
    int expect = 0;
    outcome ref = train(s, PLAIN, 0, 1, &expect);
    TB_CHECK(ref.branched == 0 && ref.not_final == 0, "[%s] plain CPU backend: %d branches, %d ranges not final",
             label, ref.branched, ref.not_final);
    TB_CHECK(expect > 0, "[%s] %d convs with an input gradient", label, expect);
    for (mode md = EARLY; md <= PLANT_AFTER; md++) {
        int e = 0;
        outcome o = train(s, md, 0, 1, &e);
        int same = same_state(&o, &ref);
        printf("[%s] %-24s %3d convs branched a step (want %d), %d filter gradients in order, %3d ranges handed "
               "over, %d not final; weights, momentum, statistics %s the plain run's\n",
               label, mode_name[md], o.branched / 2, e, o.outside / 2, o.ranges / 2, o.not_final,
               same ? "equal" : "DIFFER from");
        TB_CHECK(o.branched == 2 * e && o.begun == 2 * e, "[%s] %s: %d branches in 2 steps (begun %d), want %d", label,
                 mode_name[md], o.branched, o.begun, 2 * e);
        TB_CHECK(o.sticky == e, "[%s] %s: the model's count says %d, want %d", label, mode_name[md], o.sticky, e);
        TB_CHECK(o.data_inside == 0, "[%s] %s: %d data gradients queued inside a branch", label, mode_name[md],
                 o.data_inside);
        TB_CHECK(o.ranges == ref.ranges, "[%s] %s: %d ranges handed over, the plain run %d", label, mode_name[md],
                 o.ranges, ref.ranges);
        if (md == PLANT_AFTER) {
            TB_CHECK(o.not_final > 0 && !same, "[%s] the planted late branch went unseen: %d ranges not final, "
                     "weights %s", label, o.not_final, same ? "equal" : "differ");
        } else {
            TB_CHECK(o.not_final == 0, "[%s] %s: %d gradient ranges changed after the ready hook got them", label,
                     mode_name[md], o.not_final);
            TB_CHECK(same, "[%s] %s: the trained state differs from the plain run's", label, mode_name[md]);
        }
        free_outcome(&o);
    }
    for (mode md = LATE; md <= PLANT_AFTER; md++) { /* late: the branch runs last, at its join */
        int e = 0;
        outcome o = train(s, md, 0, 0, &e);
        int same = same_state(&o, &ref);
        printf("[%s] %-24s no hook: %3d convs branched a step, %d convert_many calls, %d with a branch not yet "
               "run; weights, momentum, statistics %s the plain run's\n",
               label, mode_name[md], o.branched / 2, o.cm_calls, o.cm_bad, same ? "equal" : "DIFFER from");
        TB_CHECK(o.branched == 2 * e && o.cm_calls >= 2, "[%s] %s, no hook: %d branches (want %d), %d convert_many "
                 "calls (the deferred conversions: at least one a step)", label, mode_name[md], o.branched, 2 * e,
                 o.cm_calls);
        if (md == PLANT_AFTER) {
            TB_CHECK(o.cm_bad > 0 && !same, "[%s] no hook: the planted late branch went unseen: %d convert_many calls "
                     "before it ran, weights %s", label, o.cm_bad, same ? "equal" : "differ");
        } else {
            TB_CHECK(o.cm_bad == 0 && same, "[%s] %s, no hook: %d convert_many calls with a branch not yet run, "
                     "trained state %s the plain run's", label, mode_name[md], o.cm_bad, same ? "equal to" : "differs from");
        }
        free_outcome(&o);
    }
    int e = 0;
    outcome p = train(s, LATE, 1, 1, &e);
    printf("[%s] late, op profile on: %d convs branched\n", label, p.branched);
    TB_CHECK(p.branched == 0 && p.begun == 0 && p.sticky == 0, "[%s] %d branches while the op profile timed the "
             "steps (%d in the model's count)", label, p.branched, p.sticky);
    TB_CHECK(same_floats(p.params, ref.params, ref.nt), "[%s] op profile on: weights differ", label);
    free_outcome(&p);
    free_outcome(&ref);
}

int main(void) {
    static const shape shapes[] = {
        {"resnet18", TB_FUSE_BN, 2, 32, 32, 5},
        {"resnet18", TB_FUSE_GRAPH, 2, 32, 32, 5},
        {"resnet50", TB_FUSE_BN, 2, 64, 48, 7},
        {"resnet50", TB_FUSE_GRAPH, 2, 64, 48, 7},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run_shape(&shapes[i]);
    return tb_test_exit("test_graph_branch");
}
