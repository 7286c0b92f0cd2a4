/* fused_plan.c - one fused graph on the device: its execution plan, shared
 * by every conv node with the same problem, chosen once (see fused_cuda.h).
 *
 * A problem is the graph's description (its label names kind, shapes,
 * dtype, layout, batch and prologue variant), the alignment of each
 * buffer, the by-value scalars and whether candidates are measured; plans
 * are kept in a registry on the backend state keyed by that text, so
 * ResNet-50's 53 conv nodes need about 20 plans per graph kind, and a
 * problem that found no plan is remembered as such (no second search).
 *
 * Choosing, in order: the plan cache (model/plan_cache.h: the engine's
 * global index and knob choices, and for an engine compiled at run time
 * its serialized plan, which skips the compilation; an entry that no
 * longer builds is dropped with one line and the search runs); else engine
 * configs from heuristics mode A then FALLBACK, each kept when its notes
 * keep the precision (cu_cgraph_reject; run-time compilation allowed: the
 * fused engines are mostly compiled), its plan finalizes and its workspace
 * fits the limit; measured: the first FG_CANDIDATES (2) of those are run once
 * and timed over FG_REPS runs on the buffers given, the fastest kept; not
 * measured: the first. The choice goes into the cache.
 *
 * Execution: a variant pack per node (fused_ops.c keeps one per graph and
 * batch size), remade when a pointer or the workspace changes; by-value
 * scalars point into the plan (constant per problem).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/fused_cuda.h"

/* plans finalized and timed per problem: each engine compiled at run time
 * costs its compilation (seconds, on the first launch only: the plan cache
 * keeps the compiled plan); TB_FUSED_CANDIDATES overrides */
#define FG_CANDIDATES 2
#define FG_HEUR_MAX 16  /* engine configs taken from each heuristics mode */
#define FG_REPS 3       /* timed runs per plan, after one untimed */
#define FG_UIDS (FD_R_COUNT + 4)

struct cu_fgraph {
    char key[512];
    int refs;
    const char *why; /* no plan: the step that failed */
    cudnnStatus_t s;
    char label[128];
    cu_fd_lowered lw;
    cudnnBackendDescriptor_t graph, plan;
    cudnnBackendDescriptor_t cfg; /* the plan's engine config: kept as long as the plan (as the conv path and
                                     cudnn-frontend's ExecutionPlan keep theirs) */
    int nuids;
    int64_t uids[FG_UIDS];
    int roles[FG_UIDS];    /* the buffer's role, or -1: a by-value scalar */
    void *scalar[FG_UIDS]; /* by-value: its host value */
    float fval[FG_UIDS];
    double dval[FG_UIDS];
    int64_t ival[FG_UIDS];
    uint32_t align[FD_R_COUNT];
    size_t ws;
    float ms; /* measured, or -1 */
    long long engine;
    int rtc, cached;
    char knobs[160];
    cu_fgraph *next;
};

/* ---- the registry ------------------------------------------------------------------------------ */

static cu_fgraph *find(cu_state *st, const char *key) {
    for (cu_fgraph *g = st->fgraphs; g; g = g->next)
        if (strcmp(g->key, key) == 0) return g;
    return NULL;
}

static void free_parts(cu_fgraph *g) {
    cu_be_destroy(&g->plan);
    cu_be_destroy(&g->cfg);
    cu_be_destroy(&g->graph);
    cu_fd_lowered_free(&g->lw);
}

int cu_fgraph_live(const cu_state *st) {
    int n = 0;
    for (const cu_fgraph *g = st->fgraphs; g; g = g->next) n += g->refs > 0;
    return n;
}

void cu_fgraph_registry_free(cu_state *st) {
    while (st->fgraphs) {
        cu_fgraph *g = st->fgraphs;
        st->fgraphs = g->next;
        free_parts(g);
        free(g);
    }
}

void cu_fgraph_put(cu_state *st, cu_fgraph *g) {
    (void)st;
    if (g && g->refs > 0) g->refs--; /* kept for the backend's life: a later node may need it again */
}

/* ---- the problem ---------------------------------------------------------------------------------- */

/* Candidates timed per graph: FG_CANDIDATES, or TB_FUSED_CANDIDATES (part
 * of a measured plan's key: a cache made with fewer is not reused). */
static int candidates(void) {
    const char *env = getenv("TB_FUSED_CANDIDATES");
    return env && atoi(env) > 0 ? atoi(env) : FG_CANDIDATES;
}

static void make_key(cu_fgraph *g, const fd_graph *d, int measure) {
    size_t used = (size_t)snprintf(g->key, sizeof g->key, "%s a", d->label);
    int roles[FD_R_COUNT], n = fd_pack_roles(d, roles);
    for (int i = 0; i < n && used < sizeof g->key; i++)
        used += (size_t)snprintf(g->key + used, sizeof g->key - used, "%s%u", i ? "," : "", g->align[roles[i]]);
    for (int i = 0; i < d->nt && used < sizeof g->key; i++)
        if (d->t[i].by_value)
            used += (size_t)snprintf(g->key + used, sizeof g->key - used, " %s=%.9g", d->t[i].name, d->t[i].value);
    if (used < sizeof g->key) /* the graph itself: a saved plan runs the graph it was made for */
        snprintf(g->key + used, sizeof g->key - used, " m%d c%d g%016llx.%d", measure, measure ? candidates() : 0,
                 (unsigned long long)fd_graph_hash(d), CU_FD_LOWER_REV);
}

/* The variant pack's ids in tensor order: buffers by role, scalars by value. */
static void pack_ids(cu_fgraph *g, const fd_graph *d) {
    g->nuids = 0;
    for (int i = 0; i < d->nt; i++) {
        const fd_tensor *t = &d->t[i];
        if (t->virt) continue;
        int k = g->nuids++;
        g->uids[k] = t->uid;
        g->roles[k] = t->by_value ? -1 : t->role;
        if (t->by_value) {
            g->fval[k] = (float)t->value;
            g->dval[k] = t->value;
            g->ival[k] = (int64_t)t->value;
            g->scalar[k] = t->dt == FD_INT64    ? (void *)&g->ival[k]
                           : t->dt == FD_DOUBLE ? (void *)&g->dval[k]
                                                : (void *)&g->fval[k];
        }
    }
}

static void gather(const cu_fgraph *g, void *const *ptr, void **out) {
    for (int k = 0; k < g->nuids; k++) out[k] = g->roles[k] >= 0 ? ptr[g->roles[k]] : g->scalar[k];
}

/* ---- choosing ---------------------------------------------------------------------------------------- */

static void cache_key(const cu_fgraph *g, char *out, size_t len) { snprintf(out, len, "fused %s", g->key); }

static tb_dtype io_dtype(const fd_graph *d) {
    for (int i = 0; i < d->nt; i++)
        if (d->t[i].role == FD_R_X || d->t[i].role == FD_R_Y || d->t[i].role == FD_R_DY)
            return d->t[i].dt == FD_BF16 ? TB_BF16 : d->t[i].dt == FD_HALF ? TB_F16 : TB_F32;
    return TB_F32; /* BN finalize: float */
}

/* The cached plan g run once on r's buffers and trial workspace: SUCCESS,
 * or why not (a workspace larger than the trial's: NOT_SUPPORTED). */
static cudnnStatus_t cached_runs(cu_state *st, cu_fgraph *g, const cu_fgraph_req *r) {
    if (g->ws > r->tws_bytes) return CUDNN_STATUS_NOT_SUPPORTED;
    void *p[FG_UIDS];
    gather(g, r->ptr, p);
    cudnnBackendDescriptor_t pack = NULL;
    cudnnStatus_t s = cu_be_make_pack(&pack, g->nuids, g->uids, p, r->tws);
    if (s == CUDNN_STATUS_SUCCESS) s = cu_be_run_once(st->cudnn, st->stream, g->plan, pack);
    cu_be_destroy(&pack);
    return s;
}

/* The cached choice, rebuilt and checked (and run once where r asks for a
 * trial run); 0 when there is none or it no longer builds or runs. */
static int from_cache(cu_state *st, cu_fgraph *g, const cu_fgraph_req *r) {
    const fd_graph *d = r->desc;
    tb_plan_cache *pc = cu_plan_cache(st);
    char ck[600];
    cache_key(g, ck, sizeof ck);
    const char *v = pc ? tb_pc_get(pc, ck) : NULL;
    if (!v) return 0;
    long long engine = -1;
    size_t ws = 0;
    float ms = -1;
    int rtc = 0;
    char knobs[160] = "";
    cudnnStatus_t s = CUDNN_STATUS_BAD_PARAM;
    if (sscanf(v, "engine %lld knobs %159s ws %zu ms %f rtc %d", &engine, knobs, &ws, &ms, &rtc) == 5) {
        if (strcmp(knobs, "-") == 0) knobs[0] = '\0';
        const char *blob = strstr(v, " blob ");
        if (blob) { /* a compiled engine's plan: no compilation */
            size_t n = strlen(blob + 6) / 2;
            unsigned char *b = malloc(n + 1);
            if (!b) TB_FATAL("out of host memory");
            long got = tb_pc_unhex(blob + 6, b, n);
            s = got > 0 ? cu_be_plan_from_blob(st->cudnn, b, (size_t)got, &g->plan, &g->ws) : CUDNN_STATUS_BAD_PARAM;
            free(b);
        }
        if (s != CUDNN_STATUS_SUCCESS) {
            cudnnBackendDescriptor_t cfg = NULL;
            long long idx = -1;
            s = cu_be_cfg_from(g->graph, engine, knobs, &cfg);
            if (s == CUDNN_STATUS_SUCCESS &&
                cu_be_engine_check(cfg, io_dtype(d), st->tf32, st->deterministic, 1, &idx, NULL, NULL))
                s = CUDNN_STATUS_NOT_SUPPORTED; /* its notes no longer pass */
            if (s == CUDNN_STATUS_SUCCESS) s = cu_be_make_plan(st->cudnn, cfg, &g->plan, &g->ws);
            if (s == CUDNN_STATUS_SUCCESS) g->cfg = cfg;
            else cu_be_destroy(&cfg);
        }
    }
    const char *lost = s == CUDNN_STATUS_SUCCESS ? NULL : "builds";
    /* the search's own workspace bounds (cu_be_search): a cached engine a fresh search would refuse is planned
     * again, as the conv's (cuda_conv_graph.c) */
    if (!lost && (g->ws > st->ws_limit || ((r->measure || r->run_once) && g->ws > r->tws_bytes)))
        lost = "fits the workspace", s = CUDNN_STATUS_NOT_SUPPORTED;
    if (!lost && r->run_once && !r->measure && (s = cached_runs(st, g, r)) != CUDNN_STATUS_SUCCESS) lost = "runs";
    if (lost) {
        cu_be_destroy(&g->plan);
        cu_be_destroy(&g->cfg);
        tb_pc_drop(pc, ck);
        tb_info("# plan cache: %s: the cached engine %lld no longer %s here (%s); planning it again", d->label,
                engine, lost, cudnnGetErrorString(s));
        return 0;
    }
    g->engine = engine, g->ms = ms, g->rtc = rtc, g->cached = 1;
    snprintf(g->knobs, sizeof g->knobs, "%s", knobs);
    return 1;
}

static void to_cache(cu_state *st, cu_fgraph *g) {
    tb_plan_cache *pc = cu_plan_cache(st);
    if (!pc || strcmp(g->knobs, "?") == 0) return; /* knobs unread or too long to store (cu_be_knobs) */
    char ck[600];
    cache_key(g, ck, sizeof ck);
    size_t blen = 0;
    unsigned char *blob = g->rtc ? cu_be_plan_blob(g->plan, &blen) : NULL;
    char *v = malloc(320 + 2 * blen + 8);
    if (!v) TB_FATAL("out of host memory");
    int k = snprintf(v, 320, "engine %lld knobs %s ws %zu ms %.4f rtc %d", g->engine, g->knobs[0] ? g->knobs : "-",
                     g->ws, (double)g->ms, g->rtc);
    if (blob) {
        memcpy(v + k, " blob ", 6);
        tb_pc_hex(blob, blen, v + k + 6);
    }
    tb_pc_put(pc, ck, v);
    free(v);
    free(blob);
}

/* Heuristics, notes, plans, timing (cu_be_search): the kept plan in g, or a
 * reason in err. */
static void search(cu_state *st, cu_fgraph *g, const cu_fgraph_req *r, tb_dtype dt, cu_err *err) {
    void *p[FG_UIDS];
    if (r->measure || r->run_once) gather(g, r->ptr, p);
    int cand = candidates();
    cu_be_search_req q = {dt, st->tf32, st->deterministic, 1, st->ws_limit, FG_HEUR_MAX, cand, FG_REPS,
                          r->measure, g->nuids, g->uids, p, r->tws, r->tws_bytes, !r->measure && r->run_once};
    cu_be_pick pick;
    cu_be_search(st->cudnn, st->stream, g->graph, &q, &pick, err);
    if (!pick.plan) return;
    g->plan = pick.plan, g->ws = pick.ws, g->ms = pick.ms, g->engine = pick.engine, g->rtc = pick.rtc;
    cu_be_knobs(pick.cfg, g->knobs, sizeof g->knobs);
    g->cfg = pick.cfg;
}

cu_fgraph *cu_fgraph_get(cu_state *st, const cu_fgraph_req *r, cu_err *err) {
    cu_fgraph probe;
    memset(&probe, 0, sizeof probe);
    for (int k = 0; k < FD_R_COUNT; k++) {
        uint32_t a = r->ptr && r->ptr[k] ? cu_ptr_align(r->ptr[k]) : 16;
        probe.align[k] = a > 16 ? 16 : a;
    }
    make_key(&probe, r->desc, r->measure);
    cu_fgraph *g = find(st, probe.key);
    if (g) {
        if (!g->plan) {
            err->why = g->why, err->s = g->s;
            return NULL;
        }
        g->refs++;
        return g;
    }
    g = calloc(1, sizeof *g);
    if (!g) TB_FATAL("out of host memory");
    memcpy(g->key, probe.key, sizeof g->key);
    memcpy(g->align, probe.align, sizeof g->align);
    snprintf(g->label, sizeof g->label, "%s", r->desc->label);
    g->ms = -1.0f, g->engine = -1;
    g->next = st->fgraphs;
    st->fgraphs = g;
    pack_ids(g, r->desc);
    err->why = NULL;
    if (cu_fd_lower(r->desc, g->align, &g->lw, err) == CUDNN_STATUS_SUCCESS &&
        cu_be_op_graph(st->cudnn, g->lw.op, g->lw.nop, &g->graph, err) == CUDNN_STATUS_SUCCESS &&
        !from_cache(st, g, r)) {
        search(st, g, r, io_dtype(r->desc), err);
        if (g->plan) to_cache(st, g);
    }
    if (!g->plan) {
        g->why = err->why ? err->why : "no plan", g->s = err->s;
        free_parts(g);
        return NULL;
    }
    if (g->ws > st->ws_bytes) cu_workspace(st, g->ws);
    g->refs = 1;
    return g;
}

/* ---- running ------------------------------------------------------------------------------------------- */

/* CUDNN_STATUS_SUCCESS once g has run on ptr; else why it could not: a
 * buffer less aligned than planned or a workspace too small (*ours set, why
 * says which), or cuDNN's status from the pack or the execute. */
static cudnnStatus_t fgraph_exec(cu_state *st, cu_fgraph *g, cu_fpack *pk, void *const *ptr, char *why, size_t len,
                                 int *ours) {
    *ours = 1;
    void *p[FG_UIDS];
    gather(g, ptr, p);
    for (int k = 0; k < g->nuids; k++)
        if (g->roles[k] >= 0 && cu_ptr_align(p[k]) < g->align[g->roles[k]]) {
            snprintf(why, len, "%s: buffer %s is less aligned (%u bytes) than planned (%u)", g->label,
                     fd_role_name(g->roles[k]), cu_ptr_align(p[k]), g->align[g->roles[k]]);
            return CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER;
        }
    if (g->ws > st->ws_bytes) {
        snprintf(why, len, "the workspace (%zu bytes) is smaller than %s's plan needs (%zu)", st->ws_bytes, g->label,
                 g->ws);
        return CUDNN_STATUS_BAD_PARAM;
    }
    *ours = 0;
    snprintf(why, len, "%s", g->label);
    if (!pk->pack || memcmp(p, pk->ptr, (size_t)g->nuids * sizeof *p) != 0 || pk->ws != st->ws) {
        cu_be_destroy(&pk->pack);
        cudnnStatus_t s = cu_be_make_pack(&pk->pack, g->nuids, g->uids, p, st->ws);
        if (s != CUDNN_STATUS_SUCCESS) return s;
        memcpy(pk->ptr, p, (size_t)g->nuids * sizeof *p);
        pk->ws = st->ws;
    }
    return cudnnBackendExecute(st->cudnn, g->plan, pk->pack);
}

void cu_fgraph_run(cu_state *st, cu_fgraph *g, cu_fpack *pk, void *const *ptr) {
    char why[256];
    int ours;
    cudnnStatus_t s = fgraph_exec(st, g, pk, ptr, why, sizeof why, &ours);
    if (s != CUDNN_STATUS_SUCCESS && ours) TB_FATAL("cuda fused: %s", why);
    TB_CUDNN_CHECK(s);
}

cudnnStatus_t cu_fgraph_try(cu_state *st, cu_fgraph *g, cu_fpack *pk, void *const *ptr, char *why, size_t len) {
    int ours;
    return fgraph_exec(st, g, pk, ptr, why, len, &ours);
}

void cu_fpack_free(cu_fpack *pk) {
    cu_be_destroy(&pk->pack);
    memset(pk, 0, sizeof *pk);
}

size_t cu_fgraph_ws(const cu_fgraph *g) { return g->ws; }
float cu_fgraph_ms(const cu_fgraph *g) { return g->ms; }

int cu_fgraph_describe(const cu_fgraph *g, char *buf, size_t len) {
    return snprintf(buf, len, "engine %lld%s [%s] (%.1f MiB%s%s)", g->engine, g->rtc ? " (compiled)" : "", g->knobs,
                    (double)g->ws / 1048576.0, g->ms >= 0 ? ", measured" : ", heuristic",
                    g->cached ? ", from the plan cache" : "");
}
