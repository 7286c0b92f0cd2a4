/* cuda_plan_cache.c - the CUDA backend's plan cache (model/plan_cache.h):
 * the key of this device and options, the cache opened on first use and
 * committed when the graph's planning is over, and the conv entries of
 * cuda_conv.c (the measured legacy algorithm of a direction).
 *
 * The key: the GPU's name, SM count and compute capability; the CUDA
 * driver (its API version and the kernel module's version from
 * /proc/driver/nvidia/version); cuDNN's version; and the options that
 * filter choices (TF32, --deterministic, the workspace limit, the conv API,
 * measuring or not). The precision, layout and shapes are each entry's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/fused_cuda.h"

/* "580.95.05" from the kernel module's first line, or "-": the first word
 * after "Module" made of digits and dots with a dot in it, so the open
 * module's "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64
 * 580.95.05 ..." gives the version, not the 86 of x86_64. */
void cu_nvrm_version_parse(const char *line, char *out, size_t len) {
    snprintf(out, len, "-");
    const char *k = strstr(line, "Module");
    if (!k) return;
    for (const char *w = k; *w;) {
        w += strspn(w, " \t\n");
        size_t n = strcspn(w, " \t\n");
        if (!n) break;
        if (strspn(w, "0123456789.") == n && memchr(w, '.', n) && w[0] != '.') {
            snprintf(out, len, "%.*s", (int)n, w);
            return;
        }
        w += n;
    }
}

static void nvrm_version(char *out, size_t len) {
    snprintf(out, len, "-");
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    char line[256];
    if (fgets(line, sizeof line, f)) cu_nvrm_version_parse(line, out, len);
    fclose(f);
}

void cu_plan_cache_key(const cu_state *st, char *out, size_t len) {
    struct cudaDeviceProp prop;
    TB_CUDA_CHECK(cudaGetDeviceProperties(&prop, st->device));
    int drv = 0;
    TB_CUDA_CHECK(cudaDriverGetVersion(&drv));
    char nvrm[32];
    nvrm_version(nvrm, sizeof nvrm);
    snprintf(out, len,
             "gpu %s; sm %d; cc %d.%d; driver %d/%s; cudnn %zu; tf32 %d; deterministic %d; workspace %zu; conv-api %d; "
             "autotune %d",
             prop.name, prop.multiProcessorCount, prop.major, prop.minor, drv, nvrm, cudnnGetVersion(), st->tf32,
             st->deterministic, st->ws_limit, st->conv_api, st->autotune);
}

tb_plan_cache *cu_plan_cache(cu_state *st) {
    if (st->plan_cache || st->plan_cache_tried) return st->plan_cache;
    st->plan_cache_tried = 1;
    char dir[TB_OPT_STR_MAX + 64], key[768], msg[1024];
    if (!tb_pc_dir(st->plan_cache_dir, dir, sizeof dir)) return NULL; /* --plan-cache off */
    cu_plan_cache_key(st, key, sizeof key);
    st->plan_cache = tb_pc_open(dir, key, msg, sizeof msg);
    if (msg[0]) tb_info("# %s", msg);
    if (st->plan_cache)
        tb_info("# plan cache: %s (%d entries for this GPU, driver, cuDNN and options)", tb_pc_path(st->plan_cache),
                tb_pc_count(st->plan_cache));
    return st->plan_cache;
}

void cu_plan_session(tb_backend *be, const char *session) {
    cu_state *st = cu_state_of(be);
    if (!session) cu_bn_tune_say(st); /* what the BatchNorms' timing chose, cache or not */
    tb_plan_cache *c = cu_plan_cache(st);
    if (!c) return;
    char msg[1024];
    if (session) {
        st->pc_hits0 = tb_pc_hits(c), st->pc_misses0 = tb_pc_misses(c);
        st->pc_puts0 = tb_pc_puts(c);
        tb_pc_lock(c, session, msg, sizeof msg);
        if (msg[0]) tb_warn("%s", msg); /* every rank: the one that waited or gave up is rarely rank 0 */
        return;
    }
    int failed = tb_pc_commit(c, msg, sizeof msg) != 0;
    if (failed) tb_warn("%s", msg);
    int made = tb_pc_puts(c) - st->pc_puts0, missed = tb_pc_misses(c) - st->pc_misses0;
    tb_info("# plan cache: %d choices found, %d made and %s (%d entries)%s", tb_pc_hits(c) - st->pc_hits0, made,
            tb_pc_writes(c) && !failed ? "written" : "not written", tb_pc_count(c),
            missed > made ? "; the rest have no plan here and are searched at every launch" : "");
}

/* --fuse fastest's timed choices (backend.h choice_get/_put): the entry
 * key gets what the CUDA backend adds to them, the BatchNorm kernels
 * (TB_BN_KERNELS, the ReLU mask), the fused engines timed
 * (TB_FUSED_CANDIDATES) and TB_STEM_PAD (the stem BatchNorm's unfused way
 * runs the stem conv padded or not); the rest is in the cache's key line. */
static void choice_key(const cu_state *st, const char *key, char *out, size_t len) {
    const char *cand = getenv("TB_FUSED_CANDIDATES");
    snprintf(out, len, "%s bn%d mask%d cand%s pad%d", key, st->bn_cudnn, st->bn_mask,
             cand && atoi(cand) > 0 ? cand : "-", st->conv_pad);
}

int cu_choice_get(tb_backend *be, const char *key, char *out, size_t len) {
    cu_state *st = cu_state_of(be);
    tb_plan_cache *c = cu_plan_cache(st);
    char k[320];
    choice_key(st, key, k, sizeof k);
    const char *v = c ? tb_pc_get(c, k) : NULL;
    if (!v) return 0;
    snprintf(out, len, "%s", v);
    return 1;
}

void cu_choice_put(tb_backend *be, const char *key, const char *value) {
    cu_state *st = cu_state_of(be);
    tb_plan_cache *c = cu_plan_cache(st);
    char k[320];
    choice_key(st, key, k, sizeof k);
    if (c) tb_pc_put(c, k, value);
}

void cu_pc_conv_key(char *out, size_t len, const tb_conv_geom *g, tb_dtype dt, tb_layout l, int n, int h, int w,
                    int dir) {
    static const char *d[3] = {"fwd", "data", "filter"};
    snprintf(out, len, "conv %s %d->%d k%d s%d p%d %s %s n%d %dx%d", d[dir], g->cin, g->cout, g->k, g->stride, g->pad,
             tb_dtype_name(dt), tb_layout_name(l), n, h, w);
}

int cu_pc_conv_row(cu_state *st, const char *key, cu_conv_perf *row) {
    tb_plan_cache *c = cu_plan_cache(st);
    const char *v = c ? tb_pc_get(c, key) : NULL;
    int algo, math, det;
    size_t ws;
    float ms;
    if (!v || sscanf(v, "algo %d math %d ws %zu ms %f det %d", &algo, &math, &ws, &ms, &det) != 5) return 0;
    memset(row, 0, sizeof *row);
    row->algo = algo, row->math = (cudnnMathType_t)math, row->memory = ws, row->time = ms;
    row->status = CUDNN_STATUS_SUCCESS;
    row->det = det ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
    return 1;
}

void cu_pc_conv_drop(cu_state *st, const char *key) {
    if (st->plan_cache) tb_pc_drop(st->plan_cache, key);
    tb_info("# plan cache: %s: the cached algorithm does not pass here any more; measuring again", key);
}

void cu_pc_conv_keep(cu_state *st, const char *key, int algo, cudnnMathType_t math, size_t ws, float ms, int det) {
    tb_plan_cache *c = cu_plan_cache(st);
    if (!c || ms < 0) return; /* only measured choices */
    char v[128];
    snprintf(v, sizeof v, "algo %d math %d ws %zu ms %.4f det %d", algo, (int)math, ws, (double)ms, det);
    tb_pc_put(c, key, v);
}

void cu_fused_free(cu_state *st) {
    cu_fgraph_registry_free(st);
    if (st->plan_cache) tb_pc_close(st->plan_cache); /* commits what is left */
    st->plan_cache = NULL;
}
