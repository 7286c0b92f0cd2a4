/* cuda_engine.h - the steps every graph on cuDNN's backend API shares, from
 * a finalized operation graph to a timed execution plan: counted descriptor
 * creation, engine configs from the heuristics, the engines' notes, plans,
 * variant packs, timing, knob choices (for descriptions and the plan cache)
 * and rebuilding an engine config from its global index and knobs, and
 * plan serialization (JSON, runtime-compiled engines).
 *
 * Users: cuda_conv_graph.c (one convolution direction) and fused_plan.c
 * (the fused convolution + BatchNorm graphs). Host code only (cudnn.h).
 */
#ifndef TB_CUDA_ENGINE_H
#define TB_CUDA_ENGINE_H

#include <cudnn.h>
#include <stddef.h>

#include "model/cuda/cuda_internal.h"

/* The first failure while building: the step and cuDNN's status. */
typedef struct {
    const char *why; /* NULL: fine */
    cudnnStatus_t s;
} cu_err;

/* Every backend descriptor the graph-API code makes goes through these, so
 * cu_be_live() (created minus destroyed) can be checked by tests. */
cudnnStatus_t cu_be_create(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *d);
void cu_be_destroy(cudnnBackendDescriptor_t *d);
long cu_be_live(void);

/* Sets one attribute; on failure records reason (the first only) in err. */
cudnnStatus_t cu_be_set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                        int64_t count, const void *value, const char *reason, cu_err *err);

/* A finalized tensor descriptor: dims and strides in N,C,H,W order. */
cudnnStatus_t cu_be_tensor(cudnnBackendDescriptor_t *d, const int64_t dim[4], const int64_t stride[4],
                           cudnnDataType_t dt, int64_t uid, int64_t align, int virt, int by_value, cu_err *err);
/* A finalized 2-D cross-correlation (dilation 1, float compute) with a
 * square stride and symmetric padding. */
cudnnStatus_t cu_be_conv_desc(int stride, int pad, cudnnBackendDescriptor_t *d, cu_err *err);
/* A finalized convolution operation of direction dir (0 forward, 1 backward
 * data, 2 backward filter) on conv, with beta; x, w, y by their forward
 * roles (x or dx, w or dw, y or dy). Needs no device. */
cudnnStatus_t cu_be_conv_op(int dir, float beta, cudnnBackendDescriptor_t conv, cudnnBackendDescriptor_t x,
                            cudnnBackendDescriptor_t w, cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t *op,
                            cu_err *err);

/* A finalized operation graph of nops operations on handle h. */
cudnnStatus_t cu_be_op_graph(cudnnHandle_t h, cudnnBackendDescriptor_t *ops, int nops, cudnnBackendDescriptor_t *graph,
                             cu_err *err);

/* Up to max engine configs of mode for the finalized graph, appended to
 * cfgs[*n..cap). */
void cu_be_heuristics(cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode, int max,
                      cudnnBackendDescriptor_t *cfgs, int *n, int cap, cu_err *err);

/* What the precision rules say about the engine of cfg (cu_cgraph_reject;
 * allow_rtc: an engine compiled at run time is acceptable): NULL when it
 * may run, else why not. *index: its global index. */
const char *cu_be_engine_check(cudnnBackendDescriptor_t cfg, tb_dtype dt, int tf32, int deterministic, int allow_rtc,
                               long long *index, int *rtc, cu_err *err);

/* A finalized plan of cfg on handle h and its workspace bytes. */
cudnnStatus_t cu_be_make_plan(cudnnHandle_t h, cudnnBackendDescriptor_t cfg, cudnnBackendDescriptor_t *plan,
                              size_t *ws);

/* A finalized variant pack of n (uid, pointer) pairs and the workspace. */
cudnnStatus_t cu_be_make_pack(cudnnBackendDescriptor_t *pack, int n, const int64_t *uids, void *const *ptrs, void *ws);

/* One untimed run, then reps timed ones on stream s: the mean in ms, or -1
 * when an execute failed (its status in *bad). */
float cu_be_time_plan(cudnnHandle_t h, cudaStream_t s, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack,
                      int reps, cudnnStatus_t *bad);
/* One run on stream s, waited for: SUCCESS, or cuDNN's refusal (the launch
 * error cleared; a sticky error returns at the next check). */
cudnnStatus_t cu_be_run_once(cudnnHandle_t h, cudaStream_t s, cudnnBackendDescriptor_t plan,
                             cudnnBackendDescriptor_t pack);

/* The knob choices of cfg as "k<type>=<value>,..." (what the plan cache
 * stores beside the engine's global index); "?" when cuDNN does not give
 * them all or they do not fit in len: such a config is not cached (rebuilt
 * from a cut or empty list it would be another, unmeasured config). */
void cu_be_knobs(cudnnBackendDescriptor_t cfg, char *buf, size_t len);

/* An engine config for engine `index` of the finalized graph with the knob
 * choices knobs ("k<type>=<value>,...", "" for none): how a cached choice
 * is rebuilt without asking the heuristics. */
cudnnStatus_t cu_be_cfg_from(cudnnBackendDescriptor_t graph, long long index, const char *knobs,
                             cudnnBackendDescriptor_t *cfg);

/* The plan's serialization (CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION:
 * runtime-compiled engines, compiled kernel included; malloc'ed bytes the
 * caller frees, *len of them), or NULL when cuDNN does not serialize it. */
unsigned char *cu_be_plan_blob(cudnnBackendDescriptor_t plan, size_t *len);
/* A plan deserialized from len bytes on handle h, and its workspace bytes. */
cudnnStatus_t cu_be_plan_from_blob(cudnnHandle_t h, const unsigned char *blob, size_t len,
                                   cudnnBackendDescriptor_t *plan, size_t *ws);

/* The search both graph users run: engine configs from heuristics mode A
 * then FALLBACK (heur_max each), each kept when its notes keep the
 * precision (cu_be_engine_check), its plan finalizes and its workspace
 * fits ws_limit (and tws_bytes when measured or run); measured: the first
 * `candidates` of those run once and are timed over `reps` runs on the
 * variant pack (uids, ptrs, tws) on stream s, the fastest kept; run_once
 * (not measured): the first that runs once on that pack (an engine that
 * plans but refuses to run falls to the next, as in a measured search);
 * else the first. out->plan NULL when none passes (err: why). The caller
 * owns out->plan and out->cfg. */
#define CU_BE_HEUR_MAX 32
typedef struct {
    tb_dtype dt;
    int tf32, deterministic, allow_rtc;
    size_t ws_limit;
    int heur_max, candidates, reps;
    int measure;
    int nuids;
    const int64_t *uids;
    void *const *ptrs;
    void *tws;
    size_t tws_bytes;
    int run_once;
} cu_be_search_req;
typedef struct {
    cudnnBackendDescriptor_t plan, cfg;
    size_t ws;
    float ms;
    long long engine;
    int rtc;
} cu_be_pick;
void cu_be_search(cudnnHandle_t h, cudaStream_t s, cudnnBackendDescriptor_t graph, const cu_be_search_req *q,
                  cu_be_pick *out, cu_err *err);

/* Parses "k<type>=<value>,..." into at most max pairs; returns how many,
 * or -1 for text that is not that form. Pure host logic (tests). */
int cu_be_parse_knobs(const char *knobs, int64_t *types, int64_t *values, int max);

#endif
