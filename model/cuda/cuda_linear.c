/* cuda_linear.c - the fully connected layer on cuBLASLt (the counterpart of
 * cpu/cpu_linear.c).
 *
 *   x [N,K] (the input viewed as rows), w [M,K], b [M] float, y [N,M]
 *   forward   y  = x w^T + b           epilogue BIAS
 *   backward  dx (+)= dy w             (beta 0 or 1)
 *             dw = dy^T x, db = sum_n dy   epilogue BGRADB
 * cuBLASLt is column-major: a row-major [R,C] matrix is a column-major
 * [C,R] one. So, with D column-major:
 *   forward   D = y^T [M,N]  = op_T(A = w as [K,M]) * (B = x as [K,N])
 *   dx        D = dx^T [K,N] = (A = w as [K,M])   * (B = dy as [M,N])
 *   dw        D = dw^T [K,M] = (A = x as [K,N])   * op_T(B = dy as [M,N])
 * BIAS adds a vector over D's rows (M); BGRADB reduces op(B) over the
 * GEMM's k (N), one value per column of D (M): db. The bias is float32
 * (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) whatever the activation type.
 * Compute: float32 (CUBLAS_COMPUTE_32F, IEEE), or TF32 tensor cores with
 * --precision tf32 (CUBLAS_COMPUTE_32F_FAST_TF32); 16-bit inputs accumulate
 * in float32. When cuBLASLt offers no algorithm for an epilogue, the plain
 * GEMM runs and an own kernel adds the bias or sums its gradient. Under
 * --deterministic only reduction schemes that do not race are allowed.
 * Problems (shape, type, kind) are described and their algorithm chosen
 * once, then reused.
 */
#include <stdlib.h>
#include <string.h>

#include "model/cuda/cuda_internal.h"
#include "src/core/log.h"

typedef enum { GEMM_FWD, GEMM_DX, GEMM_DW } gemm_kind;

struct cu_gemm {
    gemm_kind kind;
    int N, K, M;
    tb_dtype dtype;
    int beta_one;                   /* dx accumulates */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    int epilogue;                   /* 1: bias / bias gradient in the epilogue */
};

static void make_layouts(cu_gemm *g, cudaDataType_t t, uint64_t ar, uint64_t ac, uint64_t br,
                         uint64_t bc, uint64_t dr, uint64_t dc) {
    TB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->a, t, ar, ac, (int64_t)ar));
    TB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->b, t, br, bc, (int64_t)br));
    TB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->d, t, dr, dc, (int64_t)dr));
}

/* Describes the problem and asks the heuristics for an algorithm, with the
 * epilogue when want_epilogue; returns 0 when there is none. */
static int setup(cu_state *st, cu_gemm *g, int want_epilogue) {
    cublasComputeType_t ct =
        g->dtype == TB_F32 && st->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    TB_CUBLAS_CHECK(cublasLtMatmulDescCreate(&g->op, ct, CUDA_R_32F));
    cublasOperation_t ta = g->kind == GEMM_FWD ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tbo = g->kind == GEMM_DW ? CUBLAS_OP_T : CUBLAS_OP_N;
    TB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    TB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tbo, sizeof tbo));
    cudaDataType_t t = cu_cuda_dtype(g->dtype);
    uint64_t N = (uint64_t)g->N, K = (uint64_t)g->K, M = (uint64_t)g->M;
    switch (g->kind) {
    case GEMM_FWD: make_layouts(g, t, K, M, K, N, M, N); break;
    case GEMM_DX: make_layouts(g, t, K, M, M, N, K, N); break;
    case GEMM_DW: make_layouts(g, t, K, N, M, N, K, M); break;
    }
    if (want_epilogue && g->kind != GEMM_DX) {
        cublasLtEpilogue_t ep = g->kind == GEMM_FWD ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADB;
        cudaDataType_t bt = CUDA_R_32F;
        TB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        TB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        /* alignment the heuristics assume: cudaMalloc'd float arrays */
        const void *aligned = st->lt_ws;
        TB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &aligned, sizeof aligned));
    }
    cublasLtMatmulPreference_t pref;
    TB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = st->lt_ws_bytes;
    TB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &wsb, sizeof wsb));
    if (st->deterministic) {
        uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                        CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE; /* not INPLACE: it races */
        TB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask));
    }
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(st->lt, g->op, g->a, g->b, g->d, g->d, pref, 1,
                                                      &res, &found);
    TB_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (s == CUBLAS_STATUS_SUCCESS && found > 0) {
        g->algo = res.algo;
        g->epilogue = want_epilogue && g->kind != GEMM_DX;
        return 1;
    }
    if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED) TB_CUBLAS_CHECK(s);
    TB_CUBLAS_CHECK(cublasLtMatmulDescDestroy(g->op));
    TB_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->a));
    TB_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->b));
    TB_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->d));
    return 0;
}

static cu_gemm *gemm_for(tb_backend *be, gemm_kind kind, int N, int K, int M, tb_dtype dt) {
    cu_state *st = cu_state_of(be);
    for (int i = 0; i < st->ngemms; i++) {
        cu_gemm *g = &st->gemms[i];
        if (g->kind == kind && g->N == N && g->K == K && g->M == M && g->dtype == dt) return g;
    }
    cu_not_capturing(be, "describing a new GEMM");
    if (st->ngemms == st->gemms_cap) {
        st->gemms_cap = st->gemms_cap ? 2 * st->gemms_cap : 8;
        st->gemms = realloc(st->gemms, (size_t)st->gemms_cap * sizeof *st->gemms);
        if (!st->gemms) TB_FATAL("out of host memory");
    }
    cu_gemm *g = &st->gemms[st->ngemms];
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->N = N;
    g->K = K;
    g->M = M;
    g->dtype = dt;
    if (!setup(st, g, 1) && !setup(st, g, 0))
        tb_die("cuda linear: cuBLASLt has no algorithm for a %s GEMM of [%d,%d] x [%d,%d]%s",
               tb_dtype_name(dt), N, K, M, K, st->deterministic ? " under --deterministic" : "");
    st->ngemms++;
    return g;
}

/* Runs g; returns 0 when cuBLASLt refuses it at run time (then the caller
 * redoes the problem without the epilogue). */
static int run(cu_state *st, cu_gemm *g, const void *A, const void *B, void *D, float beta,
               const void *bias) {
    if (g->epilogue)
        TB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias, sizeof bias));
    const float one = 1.0f;
    cublasStatus_t s = cublasLtMatmul(st->lt, g->op, &one, A, g->a, B, g->b, &beta, D, g->d, D,
                                      g->d, &g->algo, st->lt_ws, st->lt_ws_bytes, st->stream);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED && g->epilogue) return 0;
    TB_CUBLAS_CHECK(s);
    return 1;
}

/* Drops g's epilogue for good after a run-time refusal. */
static void without_epilogue(tb_backend *be, cu_gemm *g) {
    cu_state *st = cu_state_of(be);
    TB_CUBLAS_CHECK(cublasLtMatmulDescDestroy(g->op));
    TB_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->a));
    TB_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->b));
    TB_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->d));
    if (!setup(st, g, 0)) tb_die("cuda linear: cuBLASLt has no algorithm for the plain GEMM either");
}

void cu_linear_free(cu_state *st) {
    for (int i = 0; i < st->ngemms; i++) {
        cu_gemm *g = &st->gemms[i];
        TB_CUBLAS_CHECK(cublasLtMatmulDescDestroy(g->op));
        TB_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->a));
        TB_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->b));
        TB_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->d));
    }
    free(st->gemms);
    st->gemms = NULL;
    st->ngemms = st->gemms_cap = 0;
}

/* Rows N, inner size K and outputs M, checked. */
static void linear_dims(const char *op, const tb_tensor *x, const tb_tensor *w, const tb_tensor *y,
                        int *N, int *K, int *M) {
    cu_check(x, op, "x");
    cu_check(w, op, "w");
    cu_check(y, op, "y");
    *N = x->n;
    *K = x->c * x->h * x->w;
    *M = w->n;
    if (*N < 1 || *K < 1 || *M < 1 || w->c * w->h * w->w != *K || y->n != *N ||
        y->c * y->h * y->w != *M || w->dtype != x->dtype || y->dtype != x->dtype)
        TB_FATAL("cuda %s: x [%d,%d,%d,%d], w [%d,%d,%d,%d], y [%d,%d,%d,%d] do not fit "
                 "y[N,M] = x[N,K] w[M,K]^T",
                 op, x->n, x->c, x->h, x->w, w->n, w->c, w->h, w->w, y->n, y->c, y->h, y->w);
    /* [N,C,1,1] is the same bytes in both layouts; anything with pixels is not a matrix row */
    if ((x->h * x->w != 1 && x->layout != TB_NCHW) || w->h * w->w != 1)
        TB_FATAL("cuda %s: x must be [N,K,1,1] (pool first) in NHWC, and w [M,K]", op);
}

void cu_linear_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *w, const tb_real *b,
                       const tb_tensor *y) {
    int N, K, M;
    linear_dims("linear_forward", x, w, y, &N, &K, &M);
    if (!b) TB_FATAL("cuda linear_forward: bias is NULL");
    cu_state *st = cu_state_of(be);
    cu_gemm *g = gemm_for(be, GEMM_FWD, N, K, M, x->dtype);
    if (!run(st, g, w->data, x->data, y->data, 0.0f, b)) {
        without_epilogue(be, g);
        run(st, g, w->data, x->data, y->data, 0.0f, NULL);
    }
    if (!g->epilogue) cu_bias_add(st->stream, x->dtype, y->data, b, N, M);
}

void cu_linear_backward(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                        const tb_tensor *dy, const tb_tensor *dx, int accumulate_dx,
                        const tb_tensor *dw, tb_real *db) {
    const char *op = "linear_backward";
    int N, K, M;
    linear_dims(op, x, w, dy, &N, &K, &M);
    cu_check(dw, op, "dw");
    cu_check_same(w, dw, op, "w", "dw");
    if (dx) {
        cu_check(dx, op, "dx");
        cu_check_same(x, dx, op, "x", "dx");
    }
    if (!db) TB_FATAL("cuda %s: db is NULL", op);
    cu_state *st = cu_state_of(be);
    if (dx) {
        cu_gemm *g = gemm_for(be, GEMM_DX, N, K, M, x->dtype);
        run(st, g, w->data, dy->data, dx->data, accumulate_dx ? 1.0f : 0.0f, NULL);
    }
    cu_gemm *g = gemm_for(be, GEMM_DW, N, K, M, x->dtype);
    if (!run(st, g, x->data, dy->data, dw->data, 0.0f, db)) {
        without_epilogue(be, g);
        run(st, g, x->data, dy->data, dw->data, 0.0f, NULL);
    }
    if (!g->epilogue) cu_bias_grad(st->stream, x->dtype, dy->data, db, N, M);
}
