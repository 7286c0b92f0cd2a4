/* cuda_conv_pad.c - a convolution with few input channels (ResNet's stem:
 * 3) on copies of its input and filter padded with zeros to 4 or 8
 * channels, when that is faster (TB_STEM_PAD).
 *
 * cuDNN's 16-bit NHWC kernels read a pixel's channels in 8- or 16-byte
 * vectors; 3 channels (6 bytes) fit neither. On an H200 at batch 256 in
 * bf16 the stem (7x7/2, 3 -> 64 at 224 px, 60 GFLOP) took 1.77 ms forward
 * and 1.13 ms for its filter gradient: 34 TFLOP/s, 8 % of the step.
 * MLPerf's ResNet-50 feeds it 4 channels (DALI pads its output). Here the
 * conv's plan (cuda_conv.c) gets a second plan for the same geometry on
 * 4 or 8 channels, over buffers of its own, chosen by the same rules:
 *
 *   forward          xpad = pad(x), wpad = pad(w); y = conv(xpad, wpad)
 *   backward filter  dwpad = corr(xpad, dy); dw (+)= dwpad's first cin
 *                    channels
 *
 * The added channels hold zeros: they add nothing to y, and their filter
 * gradient is dropped; the same convolution, summed in another order. The
 * forward pads both (x changes every step, w every update); the filter
 * gradient pads x again rather than trust the forward's copy: under --fuse
 * graph the stem's training forward is a fused graph that never passes
 * here while an evaluation's forward does, so the copy could hold the
 * evaluation's images (a pad is ~0.05 ms at batch 256). There is no input
 * gradient (the plan must be made without dx: the stem's input needs none).
 * An accumulating filter gradient (the model never asks for one) rounds
 * twice: the padded result, then the sum.
 *
 * TB_STEM_PAD: off (unset or empty; the default until a GPU has measured
 * it), auto (each padded plan measured beside the plain one, its conv
 * times plus the pad kernels'; the fastest runs, one line says which), 4
 * or 8 (that count whenever it plans). Eligible: bf16 and fp16 NHWC convs
 * with fewer than 8 input channels, other than 4, and no input gradient.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/cuda_internal.h"

struct cu_conv_pad {
    int cin, cp;        /* the conv's input channels, and padded to */
    tb_conv_geom g, g4; /* the conv's geometry, and the padded one */
    tb_dtype dt;
    int h, w, max_n;
    void *inner;                /* cuda_conv.c's plan of g4 */
    void *xpad, *wpad, *dwpad;  /* [max_n,h,w,cp], [cout,k,k,cp], [cout,k,k,cp] */
    float ms_plain, ms_conv, ms_pad; /* -1: not measured */
};

int cu_conv_pad_from_env(void) {
    const char *v = getenv("TB_STEM_PAD");
    if (!v || !*v || strcmp(v, "off") == 0) return 0;
    if (strcmp(v, "auto") == 0) return -1;
    if (strcmp(v, "4") == 0) return 4;
    if (strcmp(v, "8") == 0) return 8;
    tb_die("TB_STEM_PAD=%s: expected off, auto, 4 or 8 (whether a conv with 3 input channels runs on copies "
           "padded to 4 or 8)",
           v);
}

int cu_conv_pad_candidates(int mode, int cin, tb_dtype dt, tb_layout l, int has_dx, int cands[2]) {
    if (mode == 0 || has_dx || l != TB_NHWC || (dt != TB_BF16 && dt != TB_F16)) return 0;
    if (cin < 1 || cin == 4 || cin >= 8) return 0;
    int n = 0;
    if ((mode == -1 || mode == 4) && cin < 4) cands[n++] = 4;
    if (mode == -1 || mode == 8) cands[n++] = 8;
    return n;
}

int cu_conv_pad_pick(int mode, float ms_plain, const int *cands, const float *ms, int n) {
    if (mode == 4 || mode == 8) {
        for (int i = 0; i < n; i++)
            if (cands[i] == mode) return mode;
        return 0;
    }
    if (mode != -1 || ms_plain < 0) return 0; /* unmeasured: no reason to pad */
    int best = 0;
    float best_ms = ms_plain;
    for (int i = 0; i < n; i++)
        if (ms[i] >= 0 && ms[i] < best_ms) best = cands[i], best_ms = ms[i];
    return best;
}

/* t's shape with cp channels over data (NHWC activations, KRSC filters) */
static tb_tensor padded(const tb_tensor *t, void *data, int cp) {
    tb_tensor r = *t;
    r.data = data;
    r.c = cp;
    return r;
}

static size_t x_pixels(const cu_conv_pad *p, int n) { return (size_t)n * p->h * p->w; }
static size_t w_pixels(const cu_conv_pad *p) { return (size_t)p->g.cout * p->g.k * p->g.k; }

static void pad_x(tb_backend *be, cu_conv_pad *p, const tb_tensor *x) {
    cu_pad_channels(cu_stream(be), p->dt, x_pixels(p, x->n), p->cin, p->cp, x->data, p->xpad,
                    cu_state_of(be)->conv_pad_fill);
}

static void pad_w(tb_backend *be, cu_conv_pad *p, const tb_tensor *w) {
    cu_pad_channels(cu_stream(be), p->dt, w_pixels(p), p->cin, p->cp, w->data, p->wpad,
                    cu_state_of(be)->conv_pad_fill);
}

/* ms of one run of run(ctx) on s: 3 runs after one, queued behind a hold
 * of the stream so that the events time the device, as cuDNN's times are
 * (a run: a few launches, well under the hold's millisecond to queue). */
static float time_runs(cudaStream_t s, void (*run)(void *ctx), void *ctx) {
    cudaEvent_t a, b;
    TB_CUDA_CHECK(cudaEventCreate(&a));
    TB_CUDA_CHECK(cudaEventCreate(&b));
    float ms = 0.0f;
    cu_hold_stream(s, 1.0f);
    for (int rep = 0; rep < 4; rep++) {
        if (rep == 1) TB_CUDA_CHECK(cudaEventRecord(a, s));
        run(ctx);
    }
    TB_CUDA_CHECK(cudaEventRecord(b, s));
    TB_CUDA_CHECK(cudaEventSynchronize(b));
    TB_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    TB_CUDA_CHECK(cudaEventDestroy(a));
    TB_CUDA_CHECK(cudaEventDestroy(b));
    return ms / 3.0f;
}

typedef struct {
    tb_backend *be;
    cu_conv_pad *p;
    const tb_tensor *x, *w, *dw;
} pads_run;

/* What padding adds to a step: x padded twice (forward and filter
 * gradient), w padded, dw cut back (the plan's buffers). */
static void run_pads(void *ctx) {
    const pads_run *r = ctx;
    pad_x(r->be, r->p, r->x);
    pad_w(r->be, r->p, r->w);
    pad_x(r->be, r->p, r->x);
    cu_unpad_channels(cu_stream(r->be), r->p->dt, w_pixels(r->p), r->p->cp, r->p->cin, r->p->dwpad, r->dw->data, 0);
}

/* ... at the planned batch */
static float time_pads(tb_backend *be, cu_conv_pad *p, const tb_tensor *x, const tb_tensor *w, const tb_tensor *dw) {
    pads_run r = {be, p, x, w, dw};
    return time_runs(cu_stream(be), run_pads, &r);
}

typedef struct {
    cudaStream_t s;
    tb_dtype dt;
    size_t x_px, w_px;
    int cin, cp;
    const void *x, *w;
    void *xpad, *wpad;
} xw_run;

static void run_xw(void *ctx) {
    const xw_run *r = ctx;
    cu_pad_channels(r->s, r->dt, r->x_px, r->cin, r->cp, r->x, r->xpad, 0.0f);
    cu_pad_channels(r->s, r->dt, r->w_px, r->cin, r->cp, r->w, r->wpad, 0.0f);
}

float cu_pad_xw_ms(cudaStream_t s, tb_dtype dt, size_t x_px, size_t w_px, int cin, int cp, const void *x, void *xpad,
                   const void *w, void *wpad) {
    xw_run r = {s, dt, x_px, w_px, cin, cp, x, w, xpad, wpad};
    return time_runs(s, run_xw, &r);
}

/* The padded plan on cp channels: its buffers, x and w padded into them
 * (what the measuring reads), the inner plan, the pads timed. */
static cu_conv_pad *make(tb_backend *be, const tb_conv_geom *g, const tb_tensor *x, const tb_tensor *w,
                         const tb_tensor *y, const tb_tensor *dw, const tb_tensor *dy, int cp) {
    cu_state *st = cu_state_of(be);
    cu_conv_pad *p = calloc(1, sizeof *p);
    if (!p) TB_FATAL("out of host memory");
    p->cin = g->cin, p->cp = cp, p->g = *g, p->g4 = *g;
    p->g4.cin = cp;
    p->dt = x->dtype, p->h = x->h, p->w = x->w, p->max_n = x->n;
    p->ms_plain = p->ms_conv = p->ms_pad = -1.0f;
    size_t es = tb_dtype_size(p->dt), xb = x_pixels(p, p->max_n) * cp * es, wb = w_pixels(p) * cp * es;
    p->xpad = cu_malloc(st, xb, "a conv's input padded to more channels");
    p->wpad = cu_malloc(st, wb, "a conv's filter padded to more channels");
    p->dwpad = cu_malloc(st, wb, "a padded conv's filter gradient");
    TB_CUDA_CHECK(cudaMemsetAsync(p->dwpad, 0, wb, cu_stream(be)));
    pad_x(be, p, x);
    pad_w(be, p, w);
    tb_tensor x4 = padded(x, p->xpad, cp), w4 = padded(w, p->wpad, cp), dw4 = padded(dw, p->dwpad, cp);
    p->inner = cu_conv_plan(be, &p->g4, &x4, &w4, y, NULL, &dw4, dy);
    p->ms_conv = cu_conv_plan_ms(p->inner);
    if (st->autotune) p->ms_pad = time_pads(be, p, x, w, dw);
    return p;
}

void cu_conv_pad_free(tb_backend *be, cu_conv_pad *p) {
    if (!p) return;
    cu_state *st = cu_state_of(be);
    cu_conv_plan_free(be, p->inner);
    cu_free(st, p->xpad);
    cu_free(st, p->wpad);
    cu_free(st, p->dwpad);
    free(p);
}

static float total_ms(const cu_conv_pad *p) {
    return p->ms_conv >= 0 && p->ms_pad >= 0 ? p->ms_conv + p->ms_pad : -1.0f;
}

/* One line, the first time a conv is planned under TB_STEM_PAD: what runs
 * and, under auto, every measured time (conv + pads) it was chosen from. */
static void say(const tb_conv_geom *g, int mode, int pick, float ms_plain, const int *cands, const float *ms, int n) {
    static int said;
    if (said++) return;
    char why[160];
    if (mode == -1 && ms_plain < 0) {
        snprintf(why, sizeof why,
                 "TB_STEM_PAD=auto: the plain conv has no measured time to compare with, as under --no-autotune");
    } else if (mode == -1) {
        int k = snprintf(why, sizeof why, "measured, pads included: %d: %.3f ms", g->cin, (double)ms_plain);
        for (int i = 0; i < n && k > 0 && (size_t)k < sizeof why; i++)
            k += ms[i] >= 0 ? snprintf(why + k, sizeof why - (size_t)k, ", %d: %.3f ms", cands[i], (double)ms[i])
                            : snprintf(why + k, sizeof why - (size_t)k, ", %d: not measured", cands[i]);
    } else {
        snprintf(why, sizeof why, "TB_STEM_PAD=%d", mode);
    }
    if (pick)
        tb_info("# cuda conv: the %dx%d/%d conv with %d input channels reads them padded to %d (%s)", g->k, g->k,
                g->stride, g->cin, pick, why);
    else
        tb_info("# cuda conv: the %dx%d/%d conv with %d input channels stays on %d (%s)", g->k, g->k, g->stride,
                g->cin, g->cin, why);
}

cu_conv_pad *cu_conv_pad_plan(tb_backend *be, const tb_conv_geom *g, const tb_tensor *x, const tb_tensor *w,
                              const tb_tensor *y, const tb_tensor *dw, const tb_tensor *dy, float ms_plain) {
    cu_state *st = cu_state_of(be);
    int cands[2];
    int n = cu_conv_pad_candidates(st->conv_pad, g->cin, x->dtype, x->layout, 0, cands);
    if (n == 0) return NULL;
    if (st->conv_pad == -1 && ms_plain < 0) { /* auto without a measurement: nothing to choose from, said */
        say(g, st->conv_pad, 0, ms_plain, cands, NULL, 0);
        return NULL;
    }
    /* cuDNN's legacy API indexes with int: a count whose padded input passes it is not tried */
    for (int i = 0; i < n; i++)
        if ((double)x->n * x->h * x->w * cands[i] > (double)INT_MAX) cands[i--] = cands[--n];
    if (n == 0) return NULL;
    cu_conv_pad *made[2] = {NULL, NULL};
    float ms[2];
    for (int i = 0; i < n; i++) {
        made[i] = make(be, g, x, w, y, dw, dy, cands[i]);
        ms[i] = total_ms(made[i]);
    }
    int pick = cu_conv_pad_pick(st->conv_pad, ms_plain, cands, ms, n);
    cu_conv_pad *keep = NULL;
    for (int i = 0; i < n; i++) {
        if (made[i]->cp == pick) keep = made[i];
        else cu_conv_pad_free(be, made[i]);
    }
    if (keep) keep->ms_plain = ms_plain;
    say(g, st->conv_pad, pick, ms_plain, cands, ms, n);
    return keep;
}

/* Dies unless x (and w or dw, wt) are this conv's, before anything is
 * padded into the plan's buffers: cin channels, its size, a batch no larger
 * than planned, its dtype, NHWC, the geometry it was planned for. The
 * padded plan checks y and dy. */
static void check(const cu_conv_pad *p, const char *op, const tb_conv_geom *g, const tb_tensor *x,
                  const tb_tensor *wt) {
    cu_check(x, op, "x");
    cu_check(wt, op, "w");
    if (memcmp(g, &p->g, sizeof *g) != 0 || x->c != p->cin || x->h != p->h || x->w != p->w || x->n > p->max_n ||
        wt->n != p->g.cout || wt->c != p->cin || wt->h != p->g.k || wt->w != p->g.k || x->dtype != p->dt ||
        wt->dtype != p->dt || x->layout != TB_NHWC || wt->layout != TB_NHWC)
        TB_FATAL("cuda %s: x [%d,%d,%d,%d] %s, w [%d,%d,%d,%d] do not fit the plan (conv %d->%d k=%d stride=%d "
                 "at %dx%d, batch <= %d, %s NHWC, padded to %d channels)",
                 op, x->n, x->c, x->h, x->w, tb_dtype_name(x->dtype), wt->n, wt->c, wt->h, wt->w, p->g.cin,
                 p->g.cout, p->g.k, p->g.stride, p->h, p->w, p->max_n, tb_dtype_name(p->dt), p->cp);
}

void cu_conv_pad_forward(tb_backend *be, cu_conv_pad *p, const tb_conv_geom *g, const tb_tensor *x,
                         const tb_tensor *w, const tb_tensor *y) {
    check(p, "conv_forward", g, x, w);
    pad_x(be, p, x);
    pad_w(be, p, w);
    tb_tensor x4 = padded(x, p->xpad, p->cp), w4 = padded(w, p->wpad, p->cp);
    cu_conv_forward(be, p->inner, &p->g4, &x4, &w4, y);
}

void cu_conv_pad_backward_filter(tb_backend *be, cu_conv_pad *p, const tb_conv_geom *g, const tb_tensor *x,
                                 const tb_tensor *dy, const tb_tensor *dw, int accumulate) {
    check(p, "conv_backward_filter", g, x, dw);
    pad_x(be, p, x);
    tb_tensor x4 = padded(x, p->xpad, p->cp), dw4 = padded(dw, p->dwpad, p->cp);
    cu_conv_backward_filter(be, p->inner, &p->g4, &x4, dy, &dw4, 0);
    cu_unpad_channels(cu_stream(be), p->dt, w_pixels(p), p->cp, p->cin, p->dwpad, dw->data, accumulate);
}

void cu_conv_pad_describe(tb_backend *be, const cu_conv_pad *p, char *buf, size_t len) {
    int k;
    if (total_ms(p) >= 0 && p->ms_plain >= 0)
        k = snprintf(buf, len, "input padded %d -> %d channels (%.3f ms with pads %.3f ms, against %.3f ms on %d): ",
                     p->cin, p->cp, (double)total_ms(p), (double)p->ms_pad, (double)p->ms_plain, p->cin);
    else
        k = snprintf(buf, len, "input padded %d -> %d channels: ", p->cin, p->cp);
    size_t used = k < 0 ? 0 : (size_t)k < len ? (size_t)k : len - 1;
    if (used + 1 < len) cu_conv_plan_describe(be, p->inner, buf + used, len - used);
}

void *cu_conv_pad_inner(const cu_conv_pad *p) { return p->inner; }
int cu_conv_pad_channels(const cu_conv_pad *p) { return p ? p->cp : 0; }
