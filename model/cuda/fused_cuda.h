/* fused_cuda.h - the CUDA side of --fuse graph, shared by its files:
 *
 *   fused_lower.c      a fused graph's plain C description (model/fused_desc.h)
 *                      -> cuDNN backend descriptors, one to one
 *   fused_plan.c       one fused graph on a device: the engine (plan cache,
 *                      heuristics, timing), its plan shared by every node of
 *                      the same problem, execution through variant packs
 *   fused_ops.c        the backend table's fused ops (fconv_*, bn_finalize,
 *                      bn_apply) per conv node, with the unfused composition
 *                      as the fallback for any graph a batch size lacks
 *   fused_kernels.cu   the own kernels: bn_apply, the BN finalize, the BN
 *                      input gradient, per-channel sums, 16-bit scale/bias
 *   cuda_plan_cache.c  the device's plan-cache key and the conv entries
 *
 * Host code only below the launchers (cudnn.h).
 */
#ifndef TB_FUSED_CUDA_H
#define TB_FUSED_CUDA_H

#include "model/cuda/cuda_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- fused_kernels.cu (C launchers; data is dtype, statistics float) ---------- */
typedef struct {
    tb_dtype dtype;
    tb_layout layout;
    int N, C, H, W;
} cu_fk_shape;
/* y = act(x * s + b + r), r = 0, z, or z * zs + zb (per channel);
 * relu_mask (NULL: none): the own BatchNorm kernels' ReLU mask of y
 * (cuda_bn_kernels.cu), written where the 16-byte path runs with a ReLU;
 * returns 1 when it was */
int cu_fk_apply(cudaStream_t st, const cu_fk_shape *s, const void *x, const float *scale, const float *bias,
                const void *z, const float *zscale, const float *zbias, int relu, void *y, void *relu_mask);
/* the BN finalize of backend.h, one thread per channel, in double */
void cu_fk_finalize(cudaStream_t st, int C, double count, const float *sum, const float *sqsum, const float *gamma,
                    const float *beta, float *running_mean, float *running_var, float *save_mean, float *save_invstd,
                    float *scale, float *bias, double momentum, double eps);
/* out[2][C] = (scale, bias) rounded to dtype: the prologue's 16-bit operands */
void cu_fk_to_dtype(cudaStream_t st, tb_dtype dt, int C, const float *scale, const float *bias, void *out);
/* dx (+)= gamma * invstd * (dr - (dbeta + xhat * dgamma) / count) */
void cu_fk_bn_dx(cudaStream_t st, const cu_fk_shape *s, const void *dr, const void *x, const float *mean,
                 const float *invstd, const float *gamma, const float *dgamma, const float *dbeta, void *dx, int acc);
/* sum[c], sqsum[c] of y over N, H, W (float results of double sums); scratch
 * of cu_fk_sums_scratch bytes */
size_t cu_fk_sums_scratch(const cu_fk_shape *s);
void cu_fk_sums(cudaStream_t st, const cu_fk_shape *s, const void *y, float *sum, float *sqsum, void *scratch);
/* dr = 0 where xp <= 0 (in place); dbeta = sum dr, dgamma = sum dr * (x -
 * mean) * invstd per channel; scratch of cu_fk_sums_scratch bytes */
void cu_fk_dbn(cudaStream_t st, const cu_fk_shape *s, void *dr, const void *x, const void *xp, const float *mean,
               const float *invstd, float *dgamma, float *dbeta, void *scratch);

#ifndef __CUDACC__
#include "model/cuda/cuda_engine.h"
#include "model/fused_desc.h"
#include "model/plan_cache.h"

/* ---- fused_lower.c -------------------------------------------------------------------- */
typedef struct {
    cudnnBackendDescriptor_t t[FD_MAX_TENSORS];
    cudnnBackendDescriptor_t aux[FD_MAX_OPS]; /* op i's convolution or pointwise descriptor */
    cudnnBackendDescriptor_t op[FD_MAX_OPS];
    int nt, nop;
} cu_fd_lowered;
/* Every tensor and operation of gr as finalized backend descriptors
 * (align[role]: the byte alignment of that role's buffer, NULL: 16);
 * needs no device. On failure everything made is destroyed and err says
 * which step cuDNN refused. */
cudnnStatus_t cu_fd_lower(const fd_graph *gr, const uint32_t *align, cu_fd_lowered *lw, cu_err *err);
/* The lowering's revision, in every fused plan's cache key beside
 * fd_graph_hash: raise it whenever cu_fd_lower sets an attribute otherwise
 * (compute type, a pointwise op's clips or NaN rule, a mode), so that plans
 * saved for the old lowering are planned again, not loaded. */
#define CU_FD_LOWER_REV 1
void cu_fd_lowered_free(cu_fd_lowered *lw);
cudnnDataType_t cu_fd_dtype(fd_dtype d);

/* ---- fused_plan.c ------------------------------------------------------------------------ */
typedef struct cu_fgraph cu_fgraph;
typedef struct {
    const fd_graph *desc;
    void *const *ptr; /* [FD_R_COUNT] the buffers by role: alignment, timing */
    int measure;      /* time the candidates on ptr (overwrites the outputs) */
    void *tws;        /* workspace for the timing (or trial) runs */
    size_t tws_bytes;
    int run_once; /* not measured: keep the first candidate that runs once on ptr (overwrites the outputs) */
} cu_fgraph_req;
/* The graph's plan, shared by every request of the same problem (the
 * description, the buffers' alignment, measure): from the plan cache, else
 * the fastest measured (or the heuristics' first) engine that keeps the
 * precision (engines compiled at run time allowed: their serialized plans
 * go into the cache) and fits the workspace limit. NULL when there is none,
 * with the step and cuDNN's status in err (a problem that failed once
 * fails at once afterwards). Not inside a capture. */
cu_fgraph *cu_fgraph_get(cu_state *st, const cu_fgraph_req *r, cu_err *err);
void cu_fgraph_put(cu_state *st, cu_fgraph *g);
/* A node's variant pack for a shared plan (remade when a pointer changes). */
typedef struct {
    cudnnBackendDescriptor_t pack;
    void *ptr[FD_R_COUNT + 4];
    void *ws;
} cu_fpack;
/* Runs g on the buffers by role (ptr[FD_R_COUNT]) with the shared workspace.
 * An execute error is fatal. Capturable. */
void cu_fgraph_run(cu_state *st, cu_fgraph *g, cu_fpack *pk, void *const *ptr);
/* The same, for checks that fall back: CUDNN_STATUS_SUCCESS once it ran,
 * else the status and in why the reason (alignment, workspace, cuDNN). */
cudnnStatus_t cu_fgraph_try(cu_state *st, cu_fgraph *g, cu_fpack *pk, void *const *ptr, char *why, size_t len);
void cu_fpack_free(cu_fpack *pk);
size_t cu_fgraph_ws(const cu_fgraph *g);
float cu_fgraph_ms(const cu_fgraph *g); /* measured ms, or -1 */
int cu_fgraph_describe(const cu_fgraph *g, char *buf, size_t len);
/* Every shared plan still held (tests), and the registry's teardown. */
int cu_fgraph_live(const cu_state *st);
void cu_fgraph_registry_free(cu_state *st);

/* (cu_plan_cache, cu_plan_session, cu_fused_table, cu_fused_free:
 * cuda_internal.h; the test switch tb_cuda_fused_force: cuda_backend.h) */
#endif

#ifdef __cplusplus
}
#endif

#endif
