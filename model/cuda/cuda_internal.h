/* cuda_internal.h - state, check macros and kernel entry points shared by the
 * CUDA backend's files (the counterpart of model/cpu/cpu_internal.h).
 *
 * The backend keeps one cu_state in be->priv: the device, the compute
 * stream, the cuDNN and cuBLASLt handles, the options, the shared workspace
 * (cuDNN convolutions and BatchNorm, sized at plan time for the largest
 * choice under the limit) and a small scratch for the own kernels' partial
 * sums, plus the allocation table behind the memory accounting.
 *
 * The .c files (cuDNN, cuBLASLt, the runtime) are C11 compiled by the host
 * compiler; the .cu files hold the own kernels, compiled by nvcc, and export
 * plain C launchers declared at the bottom of this file. Every launcher
 * queues its kernel on the stream it is given and checks the launch.
 *
 * cuDNN's legacy API (cudnnConvolution*, cudnnFind*AlgorithmEx,
 * cudnnBatchNormalization*Ex) is deprecated in cuDNN 9 but shipped and the
 * dependable path. cudnn_graph.h marks it deprecated only when
 * CUDNN_WARN_DEPRECATED is defined: it must stay undefined here, because CI
 * builds with -Werror.
 */
#ifndef TB_CUDA_INTERNAL_H
#define TB_CUDA_INTERNAL_H

#ifdef TB_REAL_DOUBLE
#error "the CUDA backend computes with float32 master weights (tb_real = float)"
#endif
#ifdef CUDNN_WARN_DEPRECATED
#error "CUDNN_WARN_DEPRECATED turns cuDNN's legacy API into -Werror failures; leave it undefined"
#endif

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/* nvcc reads the C headers of core/ and model/ as C++: C linkage, and
 * C11's _Noreturn spelled the C++ way. */
#if defined(__cplusplus) && !defined(_Noreturn)
#define _Noreturn [[noreturn]]
#endif

#ifdef __cplusplus
extern "C" {
#endif

#include "core/cli.h"
#include "core/cuda_check.h"
#include "model/backend.h"
#include "model/layout.h"
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_convert.h"

/* ---- the parts only the host-compiled files see ------------------------------- */
#ifndef __CUDACC__
#include <cublasLt.h>
#include <cudnn.h>
#include <pthread.h>

#include "core/cublas_check.h"

#define TB_CUDNN_CHECK(call)                                                                 \
    do {                                                                                     \
        cudnnStatus_t tb_cudnn_st_ = (call);                                                 \
        if (tb_cudnn_st_ != CUDNN_STATUS_SUCCESS)                                            \
            tb_fatal_at(__FILE__, __LINE__, "cuDNN: %s failed: %s (%d)", #call,              \
                        cudnnGetErrorString(tb_cudnn_st_), (int)tb_cudnn_st_);               \
    } while (0)

/* cuDNN 9 statuses are category + detail (CUDNN_STATUS_NOT_SUPPORTED_SHAPE =
 * 3002, ...): "declined" is the whole NOT_SUPPORTED category, not only 3000. */
static inline int cu_cudnn_declined(cudnnStatus_t s) {
    return CUDNN_STATUS_CATEGORY((int)s) == (int)CUDNN_STATUS_NOT_SUPPORTED;
}
/* cuDNN's fused BatchNorm (cudnnBatchNormalization*Ex) answered s at run
 * time: 1 when the node moves to the own kernels, 0 for an error that ends
 * the job. Its documented support is fp16 NHWC; for other inputs (bf16,
 * tiny shapes) cuDNN may refuse with NOT_SUPPORTED or with BAD_PARAM (any
 * sub-code), both before anything runs. Execution, internal and memory
 * errors are not refusals. Pure host logic (tests/test_cuda_host.c). */
static inline int cu_bn_falls_back(cudnnStatus_t s) {
    return cu_cudnn_declined(s) || CUDNN_STATUS_CATEGORY((int)s) == (int)CUDNN_STATUS_BAD_PARAM;
}

/* One cuBLASLt problem the linear layer has seen (cuda_linear.c). */
typedef struct cu_gemm cu_gemm;

typedef struct {
    void *p;
    size_t bytes;
} cu_alloc_slot;

typedef struct {
    int device;
    cudaStream_t stream;        /* the compute stream */
    cudnnHandle_t cudnn;
    cublasLtHandle_t lt;
    /* options */
    int tf32, deterministic, autotune;
    size_t ws_limit;            /* most workspace one conv algorithm may take */
    /* the shared workspace: convolutions, cuDNN BatchNorm */
    void *ws;
    size_t ws_bytes;
    /* cudnnFind*Ex's workspace while planning (freed by the first op) */
    void *find_ws;
    size_t find_ws_bytes;
    /* cuBLASLt's own workspace */
    void *lt_ws;
    size_t lt_ws_bytes;
    /* own kernels' partial sums (BatchNorm statistics, count_nonfinite) */
    void *scratch;
    size_t scratch_bytes;
    /* the loss's per-row values and its last-block counter (zeroed once) */
    void *loss_scratch;
    size_t loss_rows;
    /* sgd_update's segment table on the device, and the host copy it holds */
    tb_sgd_segment *seg_host;
    int seg_n, seg_cap;
    void *seg_dev;
    /* cuBLASLt problems seen so far */
    cu_gemm *gemms;
    int ngemms, gemms_cap;
    /* memory accounting: an open-addressing table of live allocations */
    pthread_mutex_t lock;
    cu_alloc_slot *slots;
    size_t nslots, used_slots;
    size_t in_use, peak;
    size_t free_start, total;
    /* TB_BN_KERNELS (CU_BN_*; test switch tb_cuda_bn_use_cudnn) */
    int bn_cudnn;
    /* cuda_bn_tune.c: the problems timed in this process (key, own?, ms on
     * each), and the current planning's tallies for its line */
    struct cu_bn_choice *bn_choices;
    int bn_nchoices, bn_choices_cap;
    int bn_timed, bn_timed_own, bn_timed_cached, bn_timed_batch;
    double bn_ms_cudnn, bn_ms_own, bn_ms_chosen;
    /* the own BatchNorm kernels' ReLU mask (TB_BN_RELU_MASK; test switch tb_cuda_bn_relu_mask) */
    int bn_mask;
    /* convert_many: one launch per 64 pairs (1; TB_CONVERT_MANY) or a convert each;
     * its launches so far (test query tb_cuda_convert_many_launches) */
    int convert_many;
    long cvt_launches;
    /* test switch (tb_cuda_pool_force): max-pool kernels forced */
    int pool_force;
    int sm_count;
    /* which convolution API (TB_CUDA_CONV_*: TB_CONV_API, tb_cuda_conv_api) */
    int conv_api;
    /* --fuse graph (fused_*.c): the shared fused-graph plans, and the test
     * switch forcing the unfused composition for some graph kinds */
    struct cu_fgraph *fgraphs;
    unsigned fused_force;
    /* --plan-cache (cuda_plan_cache.c): the directory ("" default, "off"),
     * the cache once opened, whether opening was tried */
    char plan_cache_dir[TB_OPT_STR_MAX];
    struct tb_plan_cache *plan_cache;
    int plan_cache_tried;
    int pc_hits0, pc_misses0, pc_puts0; /* the cache's counts when the current planning began */
    /* TB_WGRAD_STREAM=on (cuda_branch.c): the weight gradients' second
     * stream, its fork and join events, its own conv workspace (swapped
     * with ws while a branch is open), the branch's state */
    int branch_on, in_branch, join_pending;
    cudaStream_t side;
    cudaEvent_t fork_ev, join_ev;
    void *side_ws;
    size_t side_ws_bytes;
    /* the fused composition's pro(x) inside a branch (fused_ops.c), as
     * large as the largest folded BN's output */
    void *side_xp;
    size_t side_xp_bytes;
    /* TB_STEM_PAD (cuda_conv_pad.c; tb_cuda_conv_pad): 0 off, -1 auto, 4
     * or 8; the added channels' value (0; else the planted-error switch
     * tb_cuda_conv_pad_fill) */
    int conv_pad;
    float conv_pad_fill;
} cu_state;

static inline cu_state *cu_state_of(tb_backend *be) { return (cu_state *)be->priv; }

/* ---- host-only helpers (cuda_backend.c) ---------------------------------------- */

/* Device memory outside be->alloc (workspaces), counted in the same totals. */
void *cu_malloc(cu_state *st, size_t bytes, const char *what);
void cu_free(cu_state *st, void *p);
/* The shared workspace holds at least `bytes` (grown outside a capture). */
void *cu_workspace(cu_state *st, size_t bytes);
/* A workspace for cudnnFind*Ex: the limit, or what the device has free. */
void *cu_find_workspace(cu_state *st, size_t *bytes);
/* Planning is over: frees the Find workspace (called by the conv ops). */
void cu_end_planning(cu_state *st);
cudnnDataType_t cu_cudnn_dtype(tb_dtype d);
cudaDataType_t cu_cuda_dtype(tb_dtype d);

/* cuda_backend.c: the switch `name` (on: 1, off: 0; unset or empty:
 * dflt); anything else is one line naming it and `what` it decides, and
 * the job ends. */
int cu_env_on_off(const char *name, int dflt, const char *what);

/* cuda_branch.c: the weight gradient on a second stream beside the data
 * gradient (TB_WGRAD_STREAM: 0 off, 1 on; init makes the stream and events
 * when on; free waits for it and frees them). */
int cu_branch_from_env(void);
void cu_branch_init(cu_state *st, int on);
void cu_branch_free(cu_state *st);
int cu_branch_begin(tb_backend *be);
void cu_branch_end(tb_backend *be);
void cu_branch_join(tb_backend *be);
void cu_branch_unwind(tb_backend *be);
/* A branch left open (a capture abandoned inside it): closed, both streams
 * waited for, one line; nothing when none is (cuda_sync calls it). */
void cu_branch_close(tb_backend *be);
/* The second stream's buffer for the fused composition's pro(x) holds at
 * least `bytes` (made at plan time, when the branch is on). */
void cu_branch_xp_reserve(cu_state *st, size_t bytes);

/* cuda_conv.c */
void *cu_conv_plan(tb_backend *be, const tb_conv_geom *g, const tb_tensor *x,
                   const tb_tensor *w, const tb_tensor *y, const tb_tensor *dx,
                   const tb_tensor *dw, const tb_tensor *dy);
void cu_conv_plan_free(tb_backend *be, void *plan);
void cu_conv_plan_describe(tb_backend *be, void *plan, char *buf, size_t len);
void cu_conv_forward(tb_backend *be, void *plan, const tb_conv_geom *g, const tb_tensor *x,
                     const tb_tensor *w, const tb_tensor *y);
void cu_conv_backward_data(tb_backend *be, void *plan, const tb_conv_geom *g,
                           const tb_tensor *dy, const tb_tensor *w, const tb_tensor *dx,
                           int accumulate);
void cu_conv_backward_filter(tb_backend *be, void *plan, const tb_conv_geom *g,
                             const tb_tensor *x, const tb_tensor *dy, const tb_tensor *dw,
                             int accumulate);
/* The first entry's (the planned batch's) chosen times summed over its
 * directions; -1 when any was not measured (heuristic choices). */
float cu_conv_plan_ms(const void *plan);

/* cuda_conv_pad.c: a conv with few input channels (ResNet's 3-channel
 * stem) on copies of its input and filter padded with zeros to 4 or 8
 * channels (TB_STEM_PAD: off, auto, 4 or 8; cu_state.conv_pad 0, -1, 4, 8). */
typedef struct cu_conv_pad cu_conv_pad;
int cu_conv_pad_from_env(void);
/* The padded channel counts worth planning for a conv under mode (into
 * cands[2]); 0 when none: mode off, not bf16/fp16 NHWC, an input gradient
 * wanted, or cin 4 or >= 8. */
int cu_conv_pad_candidates(int mode, int cin, tb_dtype dt, tb_layout l, int has_dx, int cands[2]);
/* What runs: 0 (the plain conv) or a padded count. Forced (4, 8): that
 * count when it was planned (ms >= 0 or not). auto: the candidate with the
 * smallest measured time (its conv + pad kernels) below ms_plain; nothing
 * unmeasured is ever chosen. */
int cu_conv_pad_pick(int mode, float ms_plain, const int *cands, const float *ms, int n);
/* The padded plan for a conv whose plain plan measured ms_plain, or NULL
 * when the plain conv runs (one line the first time a padded one runs). */
cu_conv_pad *cu_conv_pad_plan(tb_backend *be, const tb_conv_geom *g, const tb_tensor *x, const tb_tensor *w,
                              const tb_tensor *y, const tb_tensor *dw, const tb_tensor *dy, float ms_plain);
void cu_conv_pad_free(tb_backend *be, cu_conv_pad *p);
void cu_conv_pad_forward(tb_backend *be, cu_conv_pad *p, const tb_conv_geom *g, const tb_tensor *x,
                         const tb_tensor *w, const tb_tensor *y);
void cu_conv_pad_backward_filter(tb_backend *be, cu_conv_pad *p, const tb_conv_geom *g, const tb_tensor *x,
                                 const tb_tensor *dy, const tb_tensor *dw, int accumulate);
void cu_conv_pad_describe(tb_backend *be, const cu_conv_pad *p, char *buf, size_t len);
void *cu_conv_pad_inner(const cu_conv_pad *p);
int cu_conv_pad_channels(const cu_conv_pad *p);
/* ms of padding x (x_px pixels) and w (w_px) from cin to cp channels once,
 * on s, timed on the device (the fused stem's choice, fused_ops.c) */
float cu_pad_xw_ms(cudaStream_t s, tb_dtype dt, size_t x_px, size_t w_px, int cin, int cp, const void *x, void *xpad,
                   const void *w, void *wpad);

/* The cuDNN descriptor shapes of a conv node: x [n,cin,h,w] and y in the
 * activation layout, the filter [cout,cin,k,k] in the matching format
 * (NCHW = KCRS, NHWC = KRSC), the conv descriptor (pad, stride, float
 * compute). Only sets descriptors: needs no device (tests/test_cuda_host.c). */
void cu_conv_set_descs(const tb_conv_geom *g, tb_dtype dt, tb_layout l, int n, int h, int w,
                       cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y,
                       cudnnFilterDescriptor_t f, cudnnConvolutionDescriptor_t conv);

/* One row of a cudnnFind*AlgorithmEx / cudnnGet*Algorithm_v7 answer, any direction. */
typedef struct {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
} cu_conv_perf;
/* The first usable row of r[n] (rows come best first): status SUCCESS, at
 * most ws_limit bytes, deterministic when asked, and keeping the precision
 * (TENSOR_OP_MATH_ALLOW_CONVERSION, a down-conversion to fp16, only for
 * fp16 data; IEEE float32 without
 * tf32 only FMA rows, then in a second, *relaxed = 1 pass DEFAULT ones).
 * *math: what to set on the conv descriptor (FMA for IEEE float32). -1: none.
 * Pure host logic (tests/test_cuda_host.c). */
int cu_conv_pick(const cu_conv_perf *r, int n, tb_dtype dt, int tf32, int deterministic,
                 size_t ws_limit, cudnnMathType_t *math, int *relaxed);

/* cu_conv_pick, then the chosen row's workspace asked of ws (cuDNN's
 * cudnnGet*WorkspaceSize for that algorithm under *math): a row whose query
 * fails or whose answer passes ws_limit is marked NOT_SUPPORTED in r and
 * the next acceptable one is tried; the row taken gets the larger of its
 * memory and the answer. ws NULL: cu_conv_pick. Host logic with the query
 * as a callback (tests/test_cuda_host.c). */
typedef cudnnStatus_t (*cu_conv_ws_fn)(void *ctx, int algo, cudnnMathType_t math, size_t *bytes);
int cu_conv_pick_checked(cu_conv_perf *r, int n, tb_dtype dt, int tf32, int deterministic, size_t ws_limit,
                         cudnnMathType_t *math, int *relaxed, cu_conv_ws_fn ws, void *ctx);

/* cuda_plan_cache.c: the measured legacy algorithm of a conv direction in
 * the plan cache (model/plan_cache.h). key: the direction's problem; a row
 * read back is checked as a fresh one is (cu_conv_pick_checked) before use;
 * only measured choices are kept. */
void cu_pc_conv_key(char *out, size_t len, const tb_conv_geom *g, tb_dtype dt, tb_layout l, int n, int h, int w,
                    int dir);
int cu_pc_conv_row(cu_state *st, const char *key, cu_conv_perf *row);
void cu_pc_conv_drop(cu_state *st, const char *key);
void cu_pc_conv_keep(cu_state *st, const char *key, int algo, cudnnMathType_t math, size_t ws, float ms, int det);
void cu_plan_cache_key(const cu_state *st, char *out, size_t len);
/* The kernel module's version in a /proc/driver/nvidia/version line ("-": none). */
void cu_nvrm_version_parse(const char *line, char *out, size_t len);
/* The plan cache of this backend's device and options, opened on first use
 * (NULL: --plan-cache off, or it could not be opened: one line), and the
 * table's plan_session (lock and re-read at a graph's start, commit at its
 * end; plans made outside a session are written when the backend goes). */
struct tb_plan_cache *cu_plan_cache(cu_state *st);
void cu_plan_session(tb_backend *be, const char *session);
int cu_choice_get(tb_backend *be, const char *key, char *out, size_t len);
void cu_choice_put(tb_backend *be, const char *key, const char *value);
/* fused_ops.c: the fused entries of the table (and the plan cache's
 * directory from opts); fused_plan.c + cuda_plan_cache.c: their teardown. */
void cu_fused_table(tb_backend *be, const tb_backend_opts *opts);
void cu_fused_free(cu_state *st);

/* cuda_conv_graph.c: one conv direction on cuDNN's graph (backend) API
 * (design in the file). Directions: */
typedef enum { CU_CONV_FWD = 0, CU_CONV_DATA = 1, CU_CONV_FILTER = 2 } cu_conv_dir;
typedef struct cu_cgraph cu_cgraph;
typedef struct {
    cu_conv_dir dir;
    float beta;                 /* 0 overwrite, 1 accumulate (data, filter) */
    const tb_conv_geom *g;
    tb_dtype dtype;
    tb_layout layout;
    int n, h, w;                /* x is [n, cin, h, w] */
    int tf32, deterministic;
    /* the buffers by role: X (x, or dx for DATA), W (w, or dw for FILTER),
     * Y (y, or dy for DATA and FILTER); their alignment is planned for */
    const void *bx, *bw, *by;
    int measure;                /* time the candidates on these buffers */
    void *tws;                  /* workspace for the timing runs */
    size_t tws_bytes;
} cu_cgraph_req;
/* The plan for r: the fastest measured (or, without measure, the
 * heuristics' first) engine that keeps the precision and fits the limit;
 * NULL (after one "# cuda conv:" line per reason) when there is none or
 * the API refused anything. Not inside a capture. */
cu_cgraph *cu_cgraph_plan(cu_state *st, const cu_cgraph_req *r);
/* Runs c on x, w, y (the roles above) with the shared workspace: 1, or 0
 * when a pointer is less aligned than planned (run the legacy algorithm).
 * An execute error is fatal. Capturable. */
int cu_cgraph_run(cu_state *st, cu_cgraph *c, const void *x, const void *w, const void *y);
void cu_cgraph_free(cu_cgraph *c);
float cu_cgraph_ms(const cu_cgraph *c); /* -1: not measured */
size_t cu_cgraph_ws(const cu_cgraph *c);
long long cu_cgraph_engine(const cu_cgraph *c);
int cu_cgraph_describe(const cu_cgraph *c, char *buf, size_t len);
/* Test hooks (no device needed): the backend descriptors alive (created
 * minus destroyed); 1 when r's tensors, convolution and operation
 * descriptors finalize (else why gets the step and status). */
long cu_cgraph_live(void);
int cu_cgraph_check_op(const cu_cgraph_req *r, char *why, size_t len);
/* Pure host logic (tests/test_cuda_host.c). The tensors X, W, Y of a conv
 * at batch n, input h x w: dims in N,C,H,W order (filters K,C,R,S),
 * strides of the layout (NHWC: filters KRSC). */
typedef struct {
    int64_t dim[4], stride[4];
} cu_cg_tensor;
void cu_cgraph_tensors(const tb_conv_geom *g, tb_layout l, int n, int h, int w, cu_cg_tensor t[3]);
/* Why an engine with these numerical / behaviour notes may not run a conv
 * of dtype dt (NULL: it may): non-deterministic under deterministic,
 * input down-conversion except for fp16 data, tensor cores on float32
 * without tf32 (that is TF32), reduced-precision reduction, int8x32
 * reorders. The legacy chooser's rules (cu_conv_pick). */
const char *cu_cgraph_reject(const int *num, int nnum, const int *beh, int nbeh, tb_dtype dt, int tf32,
                             int deterministic);
/* 1 when the graph plan (have_graph) runs instead of the legacy algorithm:
 * api LEGACY never, GRAPH always, AUTO when it measured faster, or when
 * either was not measured (--no-autotune: the graph API's heuristics). */
int cu_conv_take_graph(int api, int have_graph, float graph_ms, float legacy_ms);

/* cuda_bn.c (and x, y, z of a BN op: one shape, dtype and layout, z optional) */
void cu_check_xyz(const char *op, const tb_tensor *x, const tb_tensor *y, const tb_tensor *z);
void *cu_bn_plan(tb_backend *be, const tb_bn_args *a, size_t *reserve_bytes);
void cu_bn_plan_free(tb_backend *be, void *plan);
void cu_bn_plan_describe(tb_backend *be, void *plan, char *buf, size_t len);
void cu_bn_forward_train(tb_backend *be, const tb_bn_args *a);
void cu_bn_forward_infer(tb_backend *be, const tb_bn_args *a);
void cu_bn_backward(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g);
/* --fuse graph's bn_apply of a BatchNorm node (its plan and reserve): where
 * its ReLU mask goes (NULL: none; fused_ops.c), then whether the kernel
 * wrote it at batch n (the node's own backward reads it then). */
void *cu_bn_apply_mask(tb_backend *be, void *plan, void *reserve, size_t reserve_bytes, const tb_tensor *x,
                       int relu);
void cu_bn_apply_masked(void *plan, int n, int wrote);
/* TB_BN_RELU_MASK: on (unset, empty: 1) or off (0: the own backward reads
 * y, as before the mask: an A/B, and a fallback without a rebuild);
 * anything else is one line, and the job ends. */
int cu_bn_mask_from_env(void);
/* TB_BN_KERNELS (cuda_backend.c; anything else is one line, and the job
 * ends), in cu_state.bn_cudnn: */
int cu_bn_kernels_from_env(void);
#define CU_BN_OWN 0   /* own: every node on the own kernels */
#define CU_BN_CUDNN 1 /* cudnn: cuDNN's fused path where it takes the node (test switch tb_cuda_bn_use_cudnn) */
#define CU_BN_AUTO 2  /* auto (unset, empty): the same, and with autotune the faster of the two per node */
/* cu_bn_plan_use sets the path a node's calls take (cuDNN's or the own
 * kernels) and whether it is still to be timed (tb_cuda_bn_plan_to_measure:
 * a node cuDNN takes, under auto with autotune, until bn_tune ran). */
void cu_bn_plan_use(void *plan, int cudnn, int measure);
/* what bn_tune measured for the node's plan (cu_bn_plan_describe says it) */
void cu_bn_plan_timed(void *plan, float ms_cudnn, float ms_own);

/* cuda_bn_tune.c: under TB_BN_KERNELS=auto with autotune, bn_tune times a
 * node's training forward + backward on cuDNN's path and on the own
 * kernels, on its buffers, and keeps the faster (in the plan cache too);
 * cu_bn_tune_say is the line at the end of planning (nothing when no node
 * was timed). The helpers: the pick (the own kernels only when more than
 * 1 % faster; a path not measured, ms < 0, is not picked), the plan
 * cache's entry for a problem (mask: the own kernels keep the ReLU's
 * mask) and its value ("own|cudnn MS_CUDNN MS_OWN", made by store from
 * measured times, returning the pick and the times as stored; -1 on the
 * parse of anything else). */
void cu_bn_tune(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g);
void cu_bn_tune_say(cu_state *st);
void cu_bn_tune_line(char *out, size_t len, const cu_state *st); /* its text (bench/summary/resnet50.py reads it) */
void cu_bn_tune_free(cu_state *st);
int cu_bn_tune_pick(float ms_cudnn, float ms_own);
void cu_bn_tune_key(char *out, size_t len, const tb_tensor *x, int relu, int has_z, int mask);
int cu_bn_tune_store(char *out, size_t len, float ms_cudnn, float ms_own, float *mc, float *mo);
int cu_bn_tune_parse(const char *v, int *own, float *ms_cudnn, float *ms_own);
/* The timed rounds: steps a round, from the sizing round's ms per step
 * (about 1 ms a round); the stream's hold before a round of reps steps,
 * from the host's ms per step queueing the round before it. */
int cu_bn_tune_reps(float ms_per_step);
float cu_bn_tune_hold_ms(double host_ms_per_step, int reps);

/* cuda_linear.c */
void cu_linear_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *w, const tb_real *b,
                       const tb_tensor *y);
void cu_linear_backward(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                        const tb_tensor *dy, const tb_tensor *dx, int accumulate_dx,
                        const tb_tensor *dw, tb_real *db);
void cu_linear_free(cu_state *st);
/* The linear layer's GEMMs as cuBLASLt (column-major) sees them; host-only
 * arithmetic, tested in tests/test_cuda_host.c against row-major GEMMs.
 * A row-major [R,C] matrix is a column-major [C,R] one with ld = C:
 *   CU_GEMM_FWD  y^T [M,N]  = op_T(w as [K,M]) * (x as [K,N])     + bias over D's rows (M)
 *   CU_GEMM_DX   dx^T [K,N] = (w as [K,M]) * (dy as [M,N])
 *   CU_GEMM_DW   dw^T [K,M] = (x as [K,N]) * op_T(dy as [M,N])     BGRADB: one value per
 *                                                                  column of D (M), summed over N
 * Every leading dimension is the matrix's row count. */
typedef enum { CU_GEMM_FWD, CU_GEMM_DX, CU_GEMM_DW } cu_gemm_kind;
typedef struct {
    int trans_a, trans_b; /* 1: CUBLAS_OP_T */
    uint64_t a_rows, a_cols, b_rows, b_cols, d_rows, d_cols;
} cu_gemm_shape;
cu_gemm_shape cu_linear_gemm_shape(cu_gemm_kind kind, int N, int K, int M);
/* The largest power of two <= 256 that divides p's address (256 for NULL):
 * what cuBLASLt's CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES must be told,
 * since its heuristics otherwise assume 256-byte aligned matrices. */
uint32_t cu_ptr_align(const void *p);

#endif /* !__CUDACC__ */

/* ---- shared by the .c and .cu files (cuda_backend.c) ---------------------------- */

static inline cudaStream_t cu_stream(tb_backend *be) { return (cudaStream_t)be->compute_stream; }
/* Dies unless t is a float32/bfloat16/float16 tensor in NCHW or NHWC with
 * data; op/name go in the message. */
void cu_check(const tb_tensor *t, const char *op, const char *name);
/* Dies unless a and b have the same shape, dtype and layout. */
void cu_check_same(const tb_tensor *a, const tb_tensor *b, const char *op, const char *na,
                   const char *nb);
/* The scratch for own kernels' partial sums holds at least `bytes`. */
void *cu_scratch(tb_backend *be, size_t bytes);
/* The loss's scratch for N rows: per-row values and a counter that is zero
 * between calls. */
void *cu_loss_scratch(tb_backend *be, int N);
/* The max-pool kernels' test switch (tb_cuda_pool_force). */
int cu_pool_force_flags(tb_backend *be);
/* Dies when the compute stream is being captured (a call that must
 * allocate or measure cannot be recorded into a CUDA graph). */
void cu_not_capturing(tb_backend *be, const char *what);

/* The table's kernel ops, one .cu file per family, in the order of backend.h. */

/* cuda_eltwise.cu */
void cu_relu_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y);
void cu_relu_backward(tb_backend *be, const tb_tensor *y, const tb_tensor *dy,
                      const tb_tensor *dx, int accumulate);
void cu_add_forward(tb_backend *be, const tb_tensor *a, const tb_tensor *b, const tb_tensor *y);
void cu_add_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *da, int accumulate_a,
                     const tb_tensor *db, int accumulate_b);
size_t cu_count_nonfinite(tb_backend *be, const tb_real *x, size_t n);
void cu_check_nonfinite(tb_backend *be, const tb_real *x, size_t n, tb_step_scalars *sc);
/* cuda_linear.c's fallbacks when cuBLASLt has no epilogue for a problem:
 * y[N,M] += b[M];  db[m] = sum_n dy[n,m] */
void cu_bias_add(cudaStream_t st, tb_dtype dt, void *y, const float *b, int N, int M);
void cu_bias_grad(cudaStream_t st, tb_dtype dt, const void *dy, float *db, int N, int M);

/* cuda_pool.cu */
void cu_maxpool_forward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                        const tb_tensor *y);
void cu_maxpool_backward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                         const tb_tensor *y, const tb_tensor *dy, const tb_tensor *dx,
                         int accumulate);
void cu_avgpool_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y);
void cu_avgpool_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *dx,
                         int accumulate);

/* cuda_loss.cu */
void cu_softmax_xent(tb_backend *be, const tb_tensor *logits, const int32_t *labels,
                     double smoothing, tb_step_scalars *sc, const tb_tensor *dlogits);

/* cuda_sgd.cu */
void cu_sgd_update(tb_backend *be, const tb_sgd_op *a, const tb_sgd_segment *segs, int nseg,
                   tb_real *params, const tb_real *grads, tb_real *momentum);
void cu_loss_scale_update(tb_backend *be, tb_step_scalars *sc, int growth_interval);
/* The segment table as the kernel reads it: segment s covers flat elements
 * [offset, offset + count), which are elements [start, start + count) of
 * the concatenation the kernel walks. */
typedef struct {
    size_t offset, start, count;
    float weight_decay;
} cu_sgd_seg;

/* cuda_memory.c: the device copy of a segment list (re-uploaded only when
 * it changes); *total = the segments' summed count. */
const cu_sgd_seg *cu_sgd_segments(tb_backend *be, const tb_sgd_segment *segs, int nseg,
                                  size_t *total);

/* cuda_convert.cu */
void cu_convert(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int accumulate);
/* one launch: src of dtype sdt, dst of ddt */
void cu_convert_many_launch(cudaStream_t st, tb_dtype sdt, tb_dtype ddt, const cu_cvt_list *list, int acc);
/* cuda_convert.cu (the conversions: cuda_convert.h) */
void cu_input_u8(tb_backend *be, const uint8_t *src, const uint8_t *flip,
                 const tb_input_norm *norm, const tb_tensor *dst);
void cu_input_rows(tb_backend *be, const float *pool, const int32_t *rows, const tb_tensor *dst);

/* cuda_hold.cu: a one-thread kernel on st that ends ms after it starts
 * (nothing for ms <= 0): work queued behind it starts once the host has
 * queued it all. */
void cu_hold_stream(cudaStream_t st, float ms);
void cu_hold_load(void); /* its kernel loaded now (lazy loading), at the backend's creation */

/* cuda_bn_kernels.cu: BatchNorm (+ add + ReLU) on own kernels, for what
 * cuDNN's fused path does not take. Partial sums: S slices per channel,
 * {sum, sum of squares} in double of values shifted by the channel's first
 * value, combined by one warp per channel in a fixed order (deterministic,
 * like the CPU's shifted double sums). */
typedef struct {
    tb_dtype dtype;
    tb_layout layout;
    int N, C, H, W;
} cu_bn_shape;
/* Scratch bytes the kernels need for a shape (cu_scratch). */
size_t cu_bn_scratch_bytes(const cu_bn_shape *s);
/* relu_mask (NULL: none): cu_bn_mask_bytes (cuda_index.h) at s's batch,
 * written when the vector path runs with a ReLU; returns 1 when it was. */
int cu_bn_train_kernels(cudaStream_t st, const cu_bn_shape *s, const void *x, const void *z,
                        void *y, int relu, const float *gamma, const float *beta,
                        float *running_mean, float *running_var, float *save_mean,
                        float *save_invstd, double momentum, double eps, void *scratch,
                        void *relu_mask);
void cu_bn_infer_kernels(cudaStream_t st, const cu_bn_shape *s, const void *x, const void *z,
                         void *y, int relu, const float *gamma, const float *beta,
                         const float *running_mean, const float *running_var, double eps,
                         void *scratch);
/* relu_mask: what cu_bn_train_kernels (or cu_fk_apply) wrote for this y,
 * or NULL (y is read); read only where the vector path runs */
void cu_bn_backward_kernels(cudaStream_t st, const cu_bn_shape *s, const void *x,
                            const void *y, const void *dy, void *dx, void *dz, int relu,
                            int acc_dx, int acc_dz, const float *gamma, const float *save_mean,
                            const float *save_invstd, float *dgamma, float *dbeta,
                            void *scratch, const void *relu_mask);

#ifdef __cplusplus
}
#endif

#endif
