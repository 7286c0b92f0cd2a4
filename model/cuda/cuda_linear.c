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
 * GEMM runs and an own kernel adds the bias or sums its gradient; the
 * epilogue is not asked for when the bias is not 16-byte aligned. Under
 * --deterministic only reduction schemes that do not race are allowed.
 * Problems (shape, type, kind, and the alignment of each pointer, which the
 * heuristics must be told: they assume 256 bytes otherwise) are described
 * and their algorithm chosen once, then reused. The mapping above is
 * cu_linear_gemm_shape (cuda_internal.h), tested on the host.
 */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/cuda_internal.h"

struct cu_gemm {
    cu_gemm_kind kind;
    int N, K, M;
    tb_dtype dtype;
    /* the pointer alignments the algorithm was chosen for (cu_ptr_align);
     * align_bias 0: no epilogue was asked for (no bias, or one that is not
     * 16-byte aligned) */
    uint32_t align_a, align_b, align_d, align_bias;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    int epilogue;                   /* 1: bias / bias gradient in the epilogue */
};

uint32_t cu_ptr_align(const void *p) {
    uintptr_t u = (uintptr_t)p;
    uint32_t a = 1;
    while (a < 256 && !(u & a)) a <<= 1;
    return a;
}

cu_gemm_shape cu_linear_gemm_shape(cu_gemm_kind kind, int N, int K, int M) {
    uint64_t n = (uint64_t)N, k = (uint64_t)K, m = (uint64_t)M;
    cu_gemm_shape s;
    switch (kind) {
    case CU_GEMM_FWD: { cu_gemm_shape t = {1, 0, k, m, k, n, m, n}; s = t; break; }
    case CU_GEMM_DX: { cu_gemm_shape t = {0, 0, k, m, m, n, k, n}; s = t; break; }
    default: { cu_gemm_shape t = {0, 1, k, n, m, n, k, m}; s = t; break; }
    }
    return s;
}

static void destroy_desc(cu_gemm *g) {
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulDescDestroy(g->op));
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatrixLayoutDestroy(g->a));
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatrixLayoutDestroy(g->b));
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatrixLayoutDestroy(g->d));
}

/* Describes the problem and asks the heuristics for an algorithm, with the
 * epilogue when want_epilogue (bias: the real bias pointer, whose alignment
 * the heuristics read); returns 0 when there is none. */
static int setup(cu_state *st, cu_gemm *g, int want_epilogue, const void *bias) {
    want_epilogue = want_epilogue && g->kind != CU_GEMM_DX;
    cublasComputeType_t ct =
        g->dtype == TB_F32 && st->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulDescCreate(&g->op, ct, CUDA_R_32F));
    cu_gemm_shape sh = cu_linear_gemm_shape(g->kind, g->N, g->K, g->M);
    cublasOperation_t ta = sh.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tbo = sh.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tbo, sizeof tbo));
    cudaDataType_t t = cu_cuda_dtype(g->dtype);
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatrixLayoutCreate(&g->a, t, sh.a_rows, sh.a_cols, (int64_t)sh.a_rows));
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatrixLayoutCreate(&g->b, t, sh.b_rows, sh.b_cols, (int64_t)sh.b_rows));
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatrixLayoutCreate(&g->d, t, sh.d_rows, sh.d_cols, (int64_t)sh.d_rows));
    if (want_epilogue) {
        cublasLtEpilogue_t ep = g->kind == CU_GEMM_FWD ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADB;
        int32_t bt = CUDA_R_32F;
        TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                                                 sizeof bt));
        TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                                 &bias, sizeof bias));
    }
    cublasLtMatmulPreference_t pref;
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = st->lt_ws_bytes;
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                   &wsb, sizeof wsb));
    /* the heuristics assume 256-byte aligned matrices unless told: op weight
     * copies start at param offset * 2 bytes (fc.weight: 128-byte aligned) */
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                                   &g->align_a, sizeof g->align_a));
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                                   &g->align_b, sizeof g->align_b));
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                                   &g->align_d, sizeof g->align_d));
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                                   &g->align_d, sizeof g->align_d));
    if (st->deterministic) {
        uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                        CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE; /* not INPLACE: it races */
        TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask));
    }
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    cublasStatus_t s = tb_cublas.cublasLtMatmulAlgoGetHeuristic(st->lt, g->op, g->a, g->b, g->d, g->d, pref, 1,
                                                                &res, &found);
    TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulPreferenceDestroy(pref));
    /* a result is usable only when its own state says so */
    if (s == CUBLAS_STATUS_SUCCESS && found > 0 && res.state == CUBLAS_STATUS_SUCCESS) {
        g->algo = res.algo;
        g->epilogue = want_epilogue;
        return 1;
    }
    /* with an epilogue any refusal (NOT_SUPPORTED, or INVALID_VALUE for a
     * float32 bias beside 16-bit D) means: try the plain GEMM */
    if (!want_epilogue && s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED)
        TB_CUBLAS_CHECK(s);
    destroy_desc(g);
    return 0;
}

static cu_gemm *gemm_for(tb_backend *be, cu_gemm_kind kind, int N, int K, int M, tb_dtype dt,
                         const void *A, const void *B, const void *D, const void *bias) {
    cu_state *st = cu_state_of(be);
    uint32_t aa = cu_ptr_align(A), ab = cu_ptr_align(B), ad = cu_ptr_align(D);
    /* the epilogue reads or writes the bias with vector accesses: 16 bytes */
    uint32_t abias = bias && cu_ptr_align(bias) >= 16 ? cu_ptr_align(bias) : 0;
    for (int i = 0; i < st->ngemms; i++) {
        cu_gemm *g = &st->gemms[i];
        if (g->kind == kind && g->N == N && g->K == K && g->M == M && g->dtype == dt &&
            g->align_a == aa && g->align_b == ab && g->align_d == ad && g->align_bias == abias)
            return g;
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
    g->align_a = aa;
    g->align_b = ab;
    g->align_d = ad;
    g->align_bias = abias;
    if (!(abias && setup(st, g, 1, bias)) && !setup(st, g, 0, NULL))
        tb_die("cuda linear: cuBLASLt has no algorithm for a %s GEMM of [%d,%d] x [%d,%d]%s",
               tb_dtype_name(dt), N, K, M, K, st->deterministic ? " under --deterministic" : "");
    st->ngemms++;
    return g;
}

/* Runs g; returns 0 when cuBLASLt refuses the epilogue at run time (then
 * the caller redoes the problem without it). */
static int run(cu_state *st, cu_gemm *g, const void *A, const void *B, void *D, float beta,
               const void *bias) {
    if (g->epilogue)
        TB_CUBLAS_CHECK(tb_cublas.cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                                 &bias, sizeof bias));
    const float one = 1.0f;
    cublasStatus_t s = tb_cublas.cublasLtMatmul(st->lt, g->op, &one, A, g->a, B, g->b, &beta, D, g->d, D,
                                                g->d, &g->algo, st->lt_ws, st->lt_ws_bytes, st->stream);
    if (g->epilogue && (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE)) return 0;
    TB_CUBLAS_CHECK(s);
    return 1;
}

/* Drops g's epilogue for good after a run-time refusal. */
static void without_epilogue(tb_backend *be, cu_gemm *g) {
    cu_state *st = cu_state_of(be);
    destroy_desc(g);
    if (!setup(st, g, 0, NULL)) tb_die("cuda linear: cuBLASLt has no algorithm for the plain GEMM either");
}

void cu_linear_free(cu_state *st) {
    for (int i = 0; i < st->ngemms; i++) destroy_desc(&st->gemms[i]);
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
    cu_gemm *g = gemm_for(be, CU_GEMM_FWD, N, K, M, x->dtype, w->data, x->data, y->data, b);
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
        cu_gemm *g = gemm_for(be, CU_GEMM_DX, N, K, M, x->dtype, w->data, dy->data, dx->data, NULL);
        run(st, g, w->data, dy->data, dx->data, accumulate_dx ? 1.0f : 0.0f, NULL);
    }
    cu_gemm *g = gemm_for(be, CU_GEMM_DW, N, K, M, x->dtype, x->data, dy->data, dw->data, db);
    if (!run(st, g, x->data, dy->data, dw->data, 0.0f, db)) {
        without_epilogue(be, g);
        run(st, g, x->data, dy->data, dw->data, 0.0f, NULL);
    }
    if (!g->epilogue) cu_bias_grad(st->stream, x->dtype, dy->data, db, N, M);
}
