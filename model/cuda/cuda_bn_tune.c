/* cuda_bn_tune.c - which kernels run a BatchNorm, by measurement
 * (TB_BN_KERNELS=auto, the default, with autotune on).
 *
 * cuDNN's fused BatchNorm (persistent NHWC) and the own kernels with their
 * ReLU mask (cuda_bn_kernels.cu) both take every 16-bit NHWC node of a
 * ResNet; which is faster depends on the shape and the GPU. bn_tune, given
 * a node's buffers and a training step's args at the largest batch (the
 * graph calls it once per node after allocating), runs forward + backward
 * on each path (one round each to warm up, one to size the rounds, then
 * two timed rounds each of enough steps to last about 1 ms, alternating,
 * the best round kept) and leaves the node on the faster. Each timed round
 * is queued behind a hold of the stream (cu_hold_stream) longer than the
 * host took to queue the round before, so its events time the device's
 * work back to back, as a training step replays it from a CUDA graph, and
 * not the host's calls (cuDNN's API costs and the own kernels' 6 launches
 * a step). The running statistics and dgamma, dbeta the args point at are
 * not touched (the measuring writes scratch copies); y, dx, dz, the saved
 * statistics and the reserve are, as a step would.
 *
 * The choice is kept per problem (dtype, layout, shape, ReLU, residual,
 * the own kernels' ReLU mask on or off): within the process, so nodes of
 * one shape are timed once, and in the plan cache (entry "bn r<revision of
 * the own kernels> <problem>",
 * value "own|cudnn MS_CUDNN MS_OWN", the pick made from the times as
 * stored), so the next launch times nothing. An entry that does not
 * parse, or whose pick does not follow from its times, is measured again
 * with one line. One line at the end of planning (cu_bn_tune_say) sums the timed
 * nodes: what one step's BatchNorms take as chosen, all on cuDNN's path
 * and all on the own kernels.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/timer.h"
#include "model/cuda/fused_cuda.h"

struct cu_bn_choice {
    char key[112];
    int own, from_cache;
    float ms_cudnn, ms_own;
};

int cu_bn_tune_pick(float ms_cudnn, float ms_own) {
    if (!(ms_own >= 0.0f)) return 0;
    return !(ms_cudnn >= 0.0f) || ms_own < 0.99f * ms_cudnn;
}

/* The own kernels' revision in each entry's key: raised when they change
 * in a way that moves their time, so a stored choice does not outlive
 * them (2: the per-channel step on one warp a channel, NHWC slices of 64
 * rows). */
#define CU_BN_OWN_REVISION 2

void cu_bn_tune_key(char *out, size_t len, const tb_tensor *x, int relu, int has_z, int mask) {
    snprintf(out, len, "bn r%d %s %s n%d c%d %dx%d%s%s%s", CU_BN_OWN_REVISION, tb_dtype_name(x->dtype),
             tb_layout_name(x->layout), x->n, x->c, x->h, x->w, relu ? " relu" : "", has_z ? " add" : "",
             relu && !mask ? " y-read" : "");
}

int cu_bn_tune_store(char *out, size_t len, float ms_cudnn, float ms_own, float *mc, float *mo) {
    char t[48];
    snprintf(t, sizeof t, "%.4f %.4f", (double)ms_cudnn, (double)ms_own);
    if (sscanf(t, "%f %f", mc, mo) != 2) *mc = ms_cudnn, *mo = ms_own;
    const int own = cu_bn_tune_pick(*mc, *mo); /* from the times as stored: the entry parses as it was made */
    snprintf(out, len, "%s %s", own ? "own" : "cudnn", t);
    return own;
}

int cu_bn_tune_parse(const char *v, int *own, float *ms_cudnn, float *ms_own) {
    char pick[8], rest;
    float mc, mo;
    if (!v || sscanf(v, "%7s %f %f %c", pick, &mc, &mo, &rest) != 3) return -1;
    int o = strcmp(pick, "own") == 0 ? 1 : strcmp(pick, "cudnn") == 0 ? 0 : -1;
    if (o < 0 || !isfinite(mc) || !isfinite(mo) || (mc < 0.0f && mc != -1.0f) || mo < 0.0f) return -1;
    if (o != cu_bn_tune_pick(mc, mo)) return -1; /* a pick its own times do not give */
    *own = o, *ms_cudnn = mc, *ms_own = mo;
    return 0;
}

int cu_bn_tune_reps(float ms_per_step) {
    return !(ms_per_step > 0.02f) ? 50 : ms_per_step > 0.5f ? 2 : (int)(1.0f / ms_per_step) + 1;
}

float cu_bn_tune_hold_ms(double host_ms_per_step, int reps) {
    const double h = 2.0 * (host_ms_per_step > 0.0 ? host_ms_per_step : 0.0) * (reps > 0 ? reps : 1) + 0.05;
    return (float)(h < 50.0 ? h : 50.0);
}

/* reps steps of forward + backward on the path the plan is set to, queued
 * behind a hold of hold_ms: ms per step, and *host_ms the host's ms per
 * step to queue them */
static float time_round(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g, cudaEvent_t e0, cudaEvent_t e1,
                        int reps, float hold_ms, double *host_ms) {
    cudaStream_t s = cu_stream(be);
    cu_hold_stream(s, hold_ms);
    const double t0 = tb_now();
    TB_CUDA_CHECK(cudaEventRecord(e0, s));
    for (int r = 0; r < reps; r++) {
        cu_bn_forward_train(be, a);
        cu_bn_backward(be, a, g);
    }
    TB_CUDA_CHECK(cudaEventRecord(e1, s));
    *host_ms = (tb_now() - t0) * 1e3 / reps;
    TB_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    TB_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms / (float)reps;
}

/* ms[0] on cuDNN's path (-1: cuDNN declined the node at run time), ms[1]
 * on the own kernels; a and g point at scratch statistics and gradients.
 * Rounds: 0 warms up (plans, clocks, modules loaded at their first launch,
 * the mask's first write), 1 sizes the timed rounds, 2 and 3 are timed. */
static void measure(tb_backend *be, void *plan, const tb_bn_args *a, const tb_bn_grads *g, float ms[2]) {
    cudaEvent_t e0, e1;
    TB_CUDA_CHECK(cudaEventCreate(&e0));
    TB_CUDA_CHECK(cudaEventCreate(&e1));
    ms[0] = ms[1] = -1.0f;
    int cudnn_ok = 1, reps[2] = {1, 1};
    double host[2] = {0.0, 0.0};
    for (int round = 0; round < 4; round++) {
        for (int path = 0; path < 2; path++) {
            if (path == 0 && !cudnn_ok) continue;
            cu_bn_plan_use(plan, path == 0, 1);
            const float hold = round == 0 ? 0.0f : cu_bn_tune_hold_ms(host[path], reps[path]);
            const float t = time_round(be, a, g, e0, e1, reps[path], hold, &host[path]);
            if (round == 0 && path == 0) cudnn_ok = tb_cuda_bn_plan_on_cudnn(plan);
            if (round == 1) reps[path] = cu_bn_tune_reps(t);
            if (round < 2) continue;
            if (ms[path] < 0.0f || t < ms[path]) ms[path] = t;
        }
    }
    TB_CUDA_CHECK(cudaEventDestroy(e0));
    TB_CUDA_CHECK(cudaEventDestroy(e1));
}

static struct cu_bn_choice *remembered(cu_state *st, const char *key) {
    for (int i = 0; i < st->bn_nchoices; i++)
        if (strcmp(st->bn_choices[i].key, key) == 0) return &st->bn_choices[i];
    return NULL;
}

static struct cu_bn_choice *remember(cu_state *st, const char *key, int own, float mc, float mo, int from_cache) {
    if (st->bn_nchoices == st->bn_choices_cap) {
        int cap = st->bn_choices_cap ? 2 * st->bn_choices_cap : 32;
        struct cu_bn_choice *c = realloc(st->bn_choices, (size_t)cap * sizeof *c);
        if (!c) TB_FATAL("out of host memory");
        st->bn_choices = c, st->bn_choices_cap = cap;
    }
    struct cu_bn_choice *c = &st->bn_choices[st->bn_nchoices++];
    snprintf(c->key, sizeof c->key, "%s", key);
    c->own = own, c->ms_cudnn = mc, c->ms_own = mo, c->from_cache = from_cache;
    return c;
}

/* The problem's choice from the plan cache (NULL: none there, or one that
 * does not parse: then one line, and it is measured again). */
static struct cu_bn_choice *cached(cu_state *st, const char *key) {
    tb_plan_cache *pc = cu_plan_cache(st);
    const char *v = pc ? tb_pc_get(pc, key) : NULL;
    if (!v) return NULL;
    int own;
    float mc, mo;
    if (cu_bn_tune_parse(v, &own, &mc, &mo) != 0) {
        tb_info("# plan cache: %s: \"%.60s\" is not a BatchNorm choice; measuring again", key, v);
        tb_pc_drop(pc, key);
        return NULL;
    }
    return remember(st, key, own, mc, mo, 1);
}

void cu_bn_tune(tb_backend *be, const tb_bn_args *a0, const tb_bn_grads *g0) {
    if (!tb_cuda_bn_plan_to_measure(a0->plan)) return;
    cu_state *st = cu_state_of(be);
    char key[112];
    cu_bn_tune_key(key, sizeof key, a0->x, a0->relu, a0->z != NULL, st->bn_mask);
    struct cu_bn_choice *c = remembered(st, key);
    if (!c) c = cached(st, key);
    if (!c) {
        const int C = a0->x->c;
        float *s = cu_malloc(st, 4 * (size_t)C * sizeof(float), "a BatchNorm's statistics while it is timed");
        TB_CUDA_CHECK(cudaMemsetAsync(s, 0, 4 * (size_t)C * sizeof(float), cu_stream(be)));
        tb_bn_args a = *a0;
        tb_bn_grads g = *g0;
        a.running_mean = s, a.running_var = s + C, g.dgamma = s + 2 * C, g.dbeta = s + 3 * C;
        float ms[2];
        measure(be, a0->plan, &a, &g, ms);
        cu_free(st, s);
        char v[64];
        float mc, mo;
        int own = cu_bn_tune_store(v, sizeof v, ms[0], ms[1], &mc, &mo);
        c = remember(st, key, own, mc, mo, 0);
        tb_plan_cache *pc = cu_plan_cache(st);
        if (pc) tb_pc_put(pc, key, v);
    }
    cu_bn_plan_use(a0->plan, !c->own, 0);
    cu_bn_plan_timed(a0->plan, c->ms_cudnn, c->ms_own);
    st->bn_timed++;
    st->bn_timed_own += c->own;
    st->bn_timed_cached += c->from_cache;
    st->bn_timed_batch = a0->x->n;
    st->bn_ms_own += c->ms_own;
    st->bn_ms_cudnn += c->ms_cudnn >= 0.0f ? c->ms_cudnn : c->ms_own; /* declined: cuDNN's path is the own */
    st->bn_ms_chosen += c->own || c->ms_cudnn < 0.0f ? c->ms_own : c->ms_cudnn;
}

void cu_bn_tune_line(char *out, size_t len, const cu_state *st) {
    snprintf(out, len,
             "# cuda bn: %d BatchNorm%s timed on cuDNN's path and on the own kernels (forward + backward at batch "
             "%d; %d from the plan cache): %d run on the own kernels; a step's BatchNorms %.3f ms as chosen, %.3f "
             "ms all on cuDNN's, %.3f ms all on the own",
             st->bn_timed, st->bn_timed == 1 ? "" : "s", st->bn_timed_batch, st->bn_timed_cached, st->bn_timed_own,
             st->bn_ms_chosen, st->bn_ms_cudnn, st->bn_ms_own);
}

void cu_bn_tune_say(cu_state *st) {
    if (st->bn_timed) {
        char line[512];
        cu_bn_tune_line(line, sizeof line, st);
        tb_info("%s", line);
    }
    st->bn_timed = st->bn_timed_own = st->bn_timed_cached = st->bn_timed_batch = 0;
    st->bn_ms_own = st->bn_ms_cudnn = st->bn_ms_chosen = 0.0;
}

void cu_bn_tune_free(cu_state *st) {
    free(st->bn_choices);
    st->bn_choices = NULL;
    st->bn_nchoices = st->bn_choices_cap = 0;
}
