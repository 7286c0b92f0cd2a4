/* test_cuda_host_descs.c - test_cuda_host's CUDA build checks of what the
 * host hands cuDNN and cuBLASLt: conv descriptor shapes of every ResNet-50
 * conv, the linear GEMM shapes, the conv algorithm pick, and the own
 * kernels' index math (see test_cuda_host.c). */
#include "tests/test_cuda_host.h"

#ifdef TB_HAVE_CUDA

typedef struct {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t f;
    cudnnConvolutionDescriptor_t conv;
    int bad, checked;
} cudnn_descs_ctx;

/* One conv node's legacy descriptors (NCHW f32, NHWC bf16) against the graph's shapes. */
static void check_cudnn_descs(void *vc, int sz, tb_layout lay, const tb_node *nd, const tb_act *in,
                              const tb_act *out) {
    (void)sz;
    cudnn_descs_ctx *cx = vc;
    int l = lay == TB_NHWC;
    tb_dtype dt = l ? TB_BF16 : TB_F32;
    cu_conv_set_descs(&nd->conv, dt, lay, 5, in->h, in->w, cx->x, cx->y, cx->f, cx->conv);
    int n, c, h, w;
    cudnnGetConvolution2dForwardOutputDim(cx->conv, cx->x, cx->f, &n, &c, &h, &w);
    cudnnDataType_t d;
    int yn, yc, yh, yw, ns, cs, hs, ws;
    cudnnGetTensor4dDescriptor(cx->y, &d, &yn, &yc, &yh, &yw, &ns, &cs, &hs, &ws);
    int want_cs = l ? 1 : out->h * out->w, want_ws = l ? out->c : 1;
    int want_hs = l ? out->w * out->c : out->w;
    cudnnDataType_t fd;
    cudnnTensorFormat_t ff;
    int k, fc, fh, fw;
    cudnnGetFilter4dDescriptor(cx->f, &fd, &ff, &k, &fc, &fh, &fw);
    if (n != 5 || c != out->c || h != out->h || w != out->w || yn != 5 || yc != out->c || yh != out->h ||
        yw != out->w || ns != out->c * out->h * out->w || cs != want_cs || hs != want_hs || ws != want_ws ||
        d != (l ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT) || ff != (l ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW) ||
        k != nd->conv.cout || fc != nd->conv.cin || fh != nd->conv.k || fw != nd->conv.k) {
        cx->bad++;
        printf("  %s %s: cuDNN out [%d,%d,%d,%d], graph [5,%d,%d,%d]\n", nd->name, tb_layout_name(lay), n, c, h,
               w, out->c, out->h, out->w);
    }
    cx->checked++;
}

void test_cudnn_descs(void) {
    cudnn_descs_ctx cx = {0};
    if (cudnnCreateTensorDescriptor(&cx.x) != CUDNN_STATUS_SUCCESS) {
        printf("# cuDNN descriptors unavailable on this host: shape checks skipped\n");
        return;
    }
    cudnnCreateTensorDescriptor(&cx.y);
    cudnnCreateFilterDescriptor(&cx.f);
    cudnnCreateConvolutionDescriptor(&cx.conv);
    each_resnet50_conv(check_cudnn_descs, &cx);
    TB_CHECK(cx.bad == 0 && cx.checked > 200,
             "cuDNN descriptors of %d resnet50 conv nodes (224x224, 64x48; NCHW f32 and NHWC bf16) "
             "match the graph's shapes and strides: %d differ",
             cx.checked, cx.bad);
    cudnnDestroyTensorDescriptor(cx.x);
    cudnnDestroyTensorDescriptor(cx.y);
    cudnnDestroyFilterDescriptor(cx.f);
    cudnnDestroyConvolutionDescriptor(cx.conv);
}

/* The linear layer's cuBLASLt view (cu_linear_gemm_shape), run as cuBLASLt
 * defines a GEMM (column-major, D = op(A) op(B), ld = rows) on the row-major
 * buffers the ops pass, must give the row-major results of backend.h:
 * y = x w^T, dx = dy w, dw = dy^T x; the bias runs along D's rows (FWD) and
 * BGRADB along D's columns, reducing over the GEMM's k = N (DW). */
static void colmajor_gemm(const cu_gemm_shape *s, const double *A, const double *B, double *D,
                          int *ok) {
    uint64_t m = s->trans_a ? s->a_cols : s->a_rows, ka = s->trans_a ? s->a_rows : s->a_cols;
    uint64_t kb = s->trans_b ? s->b_cols : s->b_rows, n = s->trans_b ? s->b_rows : s->b_cols;
    *ok = ka == kb && m == s->d_rows && n == s->d_cols;
    if (!*ok) return;
    for (uint64_t i = 0; i < m; i++)
        for (uint64_t j = 0; j < n; j++) {
            double acc = 0;
            for (uint64_t l = 0; l < ka; l++) {
                double a = s->trans_a ? A[l + i * s->a_rows] : A[i + l * s->a_rows];
                double b = s->trans_b ? B[j + l * s->b_rows] : B[l + j * s->b_rows];
                acc += a * b;
            }
            D[i + j * s->d_rows] = acc;
        }
}

void test_linear_gemm_shapes(void) {
    const int dims[3][3] = {{5, 7, 3}, {1, 4, 9}, {6, 1, 2}}; /* N, K, M */
    for (int t = 0; t < 3; t++) {
        int N = dims[t][0], K = dims[t][1], M = dims[t][2];
        double *x = malloc(sizeof(double) * N * K), *w = malloc(sizeof(double) * M * K);
        double *dy = malloc(sizeof(double) * N * M), *D = malloc(sizeof(double) * 64 * 64);
        for (int i = 0; i < N * K; i++) x[i] = (double)tb_rng_below(&g_rng, 7) - 3;
        for (int i = 0; i < M * K; i++) w[i] = (double)tb_rng_below(&g_rng, 7) - 3;
        for (int i = 0; i < N * M; i++) dy[i] = (double)tb_rng_below(&g_rng, 7) - 3;
        int ok, bad = 0;
        /* forward: A = w, B = x, D = y [N,M] row-major */
        cu_gemm_shape s = cu_linear_gemm_shape(CU_GEMM_FWD, N, K, M);
        colmajor_gemm(&s, w, x, D, &ok);
        for (int n = 0; ok && n < N; n++)
            for (int m = 0; m < M; m++) {
                double r = 0;
                for (int k = 0; k < K; k++) r += x[n * K + k] * w[m * K + k];
                bad += D[n * M + m] != r;
            }
        TB_CHECK(ok && !bad && s.d_rows == (uint64_t)M,
                 "cuBLASLt forward [%d,%d]x[%d,%d]^T: y row-major, bias along D's %d rows", N, K,
                 M, K, M);
        /* dx = dy w: A = w, B = dy, D = dx [N,K] */
        s = cu_linear_gemm_shape(CU_GEMM_DX, N, K, M);
        colmajor_gemm(&s, w, dy, D, &ok);
        bad = 0;
        for (int n = 0; ok && n < N; n++)
            for (int k = 0; k < K; k++) {
                double r = 0;
                for (int m = 0; m < M; m++) r += dy[n * M + m] * w[m * K + k];
                bad += D[n * K + k] != r;
            }
        TB_CHECK(ok && !bad, "cuBLASLt dx = dy w [%d,%d,%d]: row-major dx", N, K, M);
        /* dw = dy^T x: A = x, B = dy, D = dw [M,K]; BGRADB: columns of D = M, k = N */
        s = cu_linear_gemm_shape(CU_GEMM_DW, N, K, M);
        colmajor_gemm(&s, x, dy, D, &ok);
        bad = 0;
        for (int m = 0; ok && m < M; m++)
            for (int k = 0; k < K; k++) {
                double r = 0;
                for (int n = 0; n < N; n++) r += dy[n * M + m] * x[n * K + k];
                bad += D[m * K + k] != r;
            }
        uint64_t gemm_k = s.trans_a ? s.a_rows : s.a_cols;
        TB_CHECK(ok && !bad && s.d_cols == (uint64_t)M && gemm_k == (uint64_t)N,
                 "cuBLASLt dw = dy^T x [%d,%d,%d]: row-major dw; BGRADB gives %d sums over k = %d",
                 N, K, M, M, N);
        free(x), free(w), free(dy), free(D);
    }
    TB_CHECK(cu_ptr_align(NULL) == 256 && cu_ptr_align((void *)(uintptr_t)0x7f0000001000) == 256 &&
                 cu_ptr_align((void *)(uintptr_t)0x7f0000001080) == 128 &&
                 cu_ptr_align((void *)(uintptr_t)0x7f0000001010) == 16 &&
                 cu_ptr_align((void *)(uintptr_t)0x7f0000001002) == 2 &&
                 cu_ptr_align((void *)(uintptr_t)0x7f0000001001) == 1,
             "pointer alignments for cuBLASLt's MIN_ALIGNMENT preferences");
}

/* Algorithm choice from synthetic cuDNN answers (cu_conv_pick). */
void test_conv_pick(void) {
    const size_t lim = 1000;
    const cu_conv_perf all[7] = {
        {0, CUDNN_STATUS_NOT_SUPPORTED_SHAPE, 0.1f, 0, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
        {1, CUDNN_STATUS_SUCCESS, 0.2f, 5000, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
        {2, CUDNN_STATUS_SUCCESS, 0.3f, 10, CUDNN_NON_DETERMINISTIC, CUDNN_FMA_MATH},
        {3, CUDNN_STATUS_SUCCESS, 0.4f, 10, CUDNN_DETERMINISTIC, CUDNN_TENSOR_OP_MATH},
        {4, CUDNN_STATUS_SUCCESS, 0.5f, 10, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
        {5, CUDNN_STATUS_SUCCESS, 0.6f, 10, CUDNN_DETERMINISTIC, CUDNN_DEFAULT_MATH},
        {6, CUDNN_STATUS_SUCCESS, 0.7f, 10, CUDNN_DETERMINISTIC, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION},
    };
    static const struct {
        tb_dtype dt;
        int tf32, det, want;
        cudnnMathType_t math;
    } cases[] = {
        {TB_F32, 0, 0, 2, CUDNN_FMA_MATH},       {TB_F32, 0, 1, 4, CUDNN_FMA_MATH},
        {TB_F32, 1, 0, 2, CUDNN_FMA_MATH},       {TB_F32, 1, 1, 3, CUDNN_TENSOR_OP_MATH},
        {TB_BF16, 0, 0, 2, CUDNN_FMA_MATH},      {TB_BF16, 0, 1, 3, CUDNN_TENSOR_OP_MATH},
    };
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cudnnMathType_t m = CUDNN_DEFAULT_MATH;
        int relaxed = -1;
        int i = cu_conv_pick(all, 7, cases[c].dt, cases[c].tf32, cases[c].det, lim, &m, &relaxed);
        if (i != cases[c].want || m != cases[c].math || relaxed != 0) {
            bad++;
            printf("  case %zu: picked %d (want %d), math %d\n", c, i, cases[c].want, (int)m);
        }
    }
    TB_CHECK(bad == 0, "conv algorithm choice: skips refused rows (cuDNN 9 sub-codes), rows over "
                       "the workspace limit, non-deterministic rows under --deterministic, TF32 "
                       "for IEEE float32 (%d cases wrong)", bad);
    /* only a DEFAULT_MATH row for IEEE float32: taken in the relaxed pass, run as FMA */
    const cu_conv_perf few[4] = {all[0], all[1], all[5], all[6]};
    cudnnMathType_t m = CUDNN_DEFAULT_MATH;
    int relaxed = 0;
    int i = cu_conv_pick(few, 4, TB_F32, 0, 0, lim, &m, &relaxed);
    TB_CHECK(i == 2 && relaxed == 1 && m == CUDNN_FMA_MATH,
             "IEEE float32 with only a DEFAULT_MATH row: relaxed pick, FMA math set (got %d, %d, %d)",
             i, relaxed, (int)m);
    i = cu_conv_pick(few + 3, 1, TB_F32, 1, 0, lim, &m, &relaxed);
    int j = cu_conv_pick(few + 3, 1, TB_F16, 0, 0, lim, &m, &relaxed);
    int b = cu_conv_pick(few + 3, 1, TB_BF16, 0, 0, lim, &m, &relaxed);
    int none = cu_conv_pick(few, 2, TB_BF16, 0, 0, lim, &m, &relaxed);
    TB_CHECK(i == -1 && j == 0 && b == -1 && none == -1,
             "fp16 down-conversion only for fp16 data (not float32, even tf32, not bf16); no "
             "usable row: -1 (got %d, %d, %d, %d)", i, j, b, none);
    const cudnnStatus_t declined[] = {CUDNN_STATUS_NOT_SUPPORTED, CUDNN_STATUS_NOT_SUPPORTED_SHAPE,
                                      CUDNN_STATUS_NOT_SUPPORTED_LAYOUT,
                                      CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE};
    const cudnnStatus_t errors[] = {CUDNN_STATUS_SUCCESS, CUDNN_STATUS_BAD_PARAM,
                                    CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                                    CUDNN_STATUS_INTERNAL_ERROR, CUDNN_STATUS_EXECUTION_FAILED};
    bad = 0;
    for (size_t k = 0; k < 4; k++) bad += !cu_cudnn_declined(declined[k]);
    for (size_t k = 0; k < 5; k++) bad += cu_cudnn_declined(errors[k]);
    TB_CHECK(bad == 0, "cuDNN 9 NOT_SUPPORTED sub-codes count as declined, other errors do not");
}

/* A fake cudnnGet*WorkspaceSize: per algorithm, a status and bytes; the
 * math type it was asked under is kept. */
typedef struct {
    cudnnStatus_t st[8];
    size_t bytes[8];
    cudnnMathType_t asked[8];
    int calls;
} fake_ws;

static cudnnStatus_t fake_ws_query(void *ctx, int algo, cudnnMathType_t math, size_t *bytes) {
    fake_ws *f = ctx;
    f->calls++;
    f->asked[algo] = math;
    *bytes = f->bytes[algo];
    return f->st[algo];
}

/* The choice checked against cuDNN's workspace query (cu_conv_pick_checked):
 * --no-autotune's heuristic rows carry an estimate, the call checks the
 * workspace it is given against the query for the algorithm. */
void test_conv_pick_checked(void) {
    const size_t lim = 1000;
    cu_conv_perf r[4] = {
        {0, CUDNN_STATUS_SUCCESS, -1.0f, 0, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
        {1, CUDNN_STATUS_SUCCESS, -1.0f, 0, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
        {2, CUDNN_STATUS_SUCCESS, -1.0f, 100, CUDNN_DETERMINISTIC, CUDNN_DEFAULT_MATH},
        {3, CUDNN_STATUS_SUCCESS, -1.0f, 0, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH},
    };
    /* algo 0: the query refuses it (NOT_SUPPORTED_SHAPE); algo 1: its real
     * workspace passes the limit; algo 3: fits, 40 bytes beyond the row's 0 */
    fake_ws f = {{CUDNN_STATUS_NOT_SUPPORTED_SHAPE, CUDNN_STATUS_SUCCESS, CUDNN_STATUS_SUCCESS, CUDNN_STATUS_SUCCESS},
                 {0, 5000, 100, 40},
                 {CUDNN_DEFAULT_MATH},
                 0};
    cudnnMathType_t m = CUDNN_DEFAULT_MATH;
    int relaxed = -1;
    int i = cu_conv_pick_checked(r, 4, TB_F32, 0, 0, lim, &m, &relaxed, fake_ws_query, &f);
    TB_CHECK(i == 3 && r[3].memory == 40 && m == CUDNN_FMA_MATH && relaxed == 0 && f.calls == 3,
             "checked conv choice: a row the workspace query refuses, and one whose queried workspace passes "
             "the limit, are passed over; the taken row's workspace is the query's (got row %d, %zu bytes, "
             "math %d, relaxed %d, %d queries)",
             i, r[3].memory, (int)m, relaxed, f.calls);
    TB_CHECK(r[0].status == CUDNN_STATUS_NOT_SUPPORTED && r[1].status == CUDNN_STATUS_NOT_SUPPORTED &&
                 f.asked[1] == CUDNN_FMA_MATH,
             "checked conv choice: passed-over rows are marked refused; the query is asked under the math "
             "the call will run with (FMA for IEEE float32)");
    /* nothing left but the DEFAULT_MATH row: the relaxed pass, queried under FMA */
    f.st[3] = CUDNN_STATUS_BAD_PARAM;
    r[3].status = CUDNN_STATUS_SUCCESS;
    i = cu_conv_pick_checked(r, 4, TB_F32, 0, 0, lim, &m, &relaxed, fake_ws_query, &f);
    TB_CHECK(i == 2 && relaxed == 1 && m == CUDNN_FMA_MATH && f.asked[2] == CUDNN_FMA_MATH && r[2].memory == 100,
             "checked conv choice: relaxed row taken after the query refused the rest (got %d, relaxed %d)", i,
             relaxed);
    f.st[2] = CUDNN_STATUS_NOT_SUPPORTED;
    r[2].status = CUDNN_STATUS_SUCCESS;
    i = cu_conv_pick_checked(r, 4, TB_F32, 0, 0, lim, &m, &relaxed, fake_ws_query, &f);
    TB_CHECK(i == -1, "checked conv choice: every row refused by the query: -1 (got %d)", i);
    /* no query: cu_conv_pick */
    cu_conv_perf one[1] = {{5, CUDNN_STATUS_SUCCESS, 0.1f, 10, CUDNN_DETERMINISTIC, CUDNN_TENSOR_OP_MATH}};
    i = cu_conv_pick_checked(one, 1, TB_BF16, 0, 0, lim, &m, &relaxed, NULL, NULL);
    TB_CHECK(i == 0 && one[0].memory == 10 && m == CUDNN_TENSOR_OP_MATH,
             "checked conv choice without a query: the plain choice");
}

/* ---- TB_STEM_PAD (cuda_conv_pad.c) ---- */

typedef struct {
    int mode, eligible, stem, cands4, cands8;
} pad_walk;

/* Counts the ResNet-50 convs a padded plan would be tried for (bf16 and
 * fp16, no input gradient where the graph asks none: the stem's input). */
static void count_pad(void *vc, int sz, tb_layout lay, const tb_node *nd, const tb_act *in, const tb_act *out) {
    (void)sz, (void)out;
    pad_walk *pw = vc;
    for (int d = 0; d < 2; d++) {
        int cands[2] = {0, 0};
        /* the image (no producer) needs no gradient */
        int n = cu_conv_pad_candidates(pw->mode, nd->conv.cin, d ? TB_F16 : TB_BF16, lay, in->producer >= 0, cands);
        pw->eligible += n > 0;
        pw->stem += n > 0 && in->c == 3 && nd->conv.k == 7;
        for (int i = 0; i < n; i++) pw->cands4 += cands[i] == 4, pw->cands8 += cands[i] == 8;
    }
}

/* The values TB_STEM_PAD takes (anything else: one line naming it); which
 * convs may pad (in ResNet-50: the stem alone, in bf16/fp16 NHWC, to 4 and
 * 8 under auto); what runs for measured times: forced counts always, auto
 * the fastest below the plain conv and never an unmeasured one. */
void test_conv_pad_rules(void) {
    static const env_case ok[] = {{NULL, 0}, {"", 0}, {"off", 0}, {"auto", -1}, {"4", 4}, {"8", 8}};
    char msg[512];
    check_env_values("TB_STEM_PAD", cu_conv_pad_from_env, ok, sizeof ok / sizeof ok[0], "unset, '', off, auto, 4, 8",
                     "3", "off, auto, 4 or 8", msg, sizeof msg);

    const int modes[4] = {-1, 4, 8, 0};
    for (int m = 0; m < 4; m++) {
        pad_walk pw = {modes[m], 0, 0, 0, 0};
        each_resnet50_conv(count_pad, &pw);
        /* 2 sizes x 2 dtypes in NHWC; nothing in NCHW */
        int want = modes[m] ? 4 : 0;
        TB_CHECK(pw.eligible == want && pw.stem == want &&
                     pw.cands4 == (modes[m] == -1 || modes[m] == 4 ? want : 0) &&
                     pw.cands8 == (modes[m] == -1 || modes[m] == 8 ? want : 0),
                 "TB_STEM_PAD mode %d over ResNet-50: %d convs may pad (want %d, all the stem: %d), to 4: %d, to 8: %d",
                 modes[m], pw.eligible, want, pw.stem, pw.cands4, pw.cands8);
    }
    int c[2] = {0, 0};
    TB_CHECK(cu_conv_pad_candidates(-1, 3, TB_F32, TB_NHWC, 0, c) == 0 &&
                 cu_conv_pad_candidates(-1, 3, TB_BF16, TB_NCHW, 0, c) == 0 &&
                 cu_conv_pad_candidates(-1, 3, TB_BF16, TB_NHWC, 1, c) == 0 &&
                 cu_conv_pad_candidates(-1, 4, TB_BF16, TB_NHWC, 0, c) == 0 &&
                 cu_conv_pad_candidates(-1, 8, TB_F16, TB_NHWC, 0, c) == 0 &&
                 cu_conv_pad_candidates(4, 5, TB_F16, TB_NHWC, 0, c) == 0,
             "no padded plan for float32, NCHW, an input gradient, 4 or 8 channels, or 5 forced to 4");
    TB_CHECK(cu_conv_pad_candidates(-1, 5, TB_F16, TB_NHWC, 0, c) == 1 && c[0] == 8 &&
                 cu_conv_pad_candidates(-1, 1, TB_BF16, TB_NHWC, 0, c) == 2 && c[0] == 4 && c[1] == 8,
             "5 channels try 8; 1 channel tries 4 and 8");

    const int both[2] = {4, 8};
    const float fast[2] = {0.7f, 0.9f}, slow[2] = {3.0f, -1.0f}, eight[2] = {-1.0f, 2.0f}, none[2] = {-1.0f, -1.0f};
    TB_CHECK(cu_conv_pad_pick(0, 2.9f, both, fast, 2) == 0 && cu_conv_pad_pick(4, 2.9f, both, slow, 2) == 4 &&
                 cu_conv_pad_pick(8, -1.0f, both, none, 2) == 8 && cu_conv_pad_pick(8, 2.9f, both, fast, 1) == 0,
             "off never pads; 4 or 8 forced pad whatever was measured, when that count was planned");
    TB_CHECK(cu_conv_pad_pick(-1, 2.9f, both, fast, 2) == 4 && cu_conv_pad_pick(-1, 2.9f, both, slow, 2) == 0 &&
                 cu_conv_pad_pick(-1, 2.9f, both, eight, 2) == 8 && cu_conv_pad_pick(-1, 0.7f, both, fast, 2) == 0 &&
                 cu_conv_pad_pick(-1, -1.0f, both, fast, 2) == 0 && cu_conv_pad_pick(-1, 2.9f, both, none, 2) == 0,
             "auto: the fastest padded plan below the plain conv (a tie keeps it); nothing unmeasured");
    printf("# TB_STEM_PAD: off/auto/4/8 read; the stem alone may pad in ResNet-50 (bf16/fp16 NHWC)\n");
}

/* One geometry emulated thread by thread: adds to *bad every (row, channel
 * vector) not visited exactly once and every row walked past M. */
static void emulate_bn_vec(const cu_bn_vgeom *g, size_t M, int *bad) {
    unsigned char *seen = calloc(M * (size_t)g->nv, 1);
    if (!seen) TB_FATAL("out of host memory");
    for (int s = 0; s < g->S; s++)
        for (int bxi = 0; bxi < g->gx; bxi++)
            for (int ty = 0; ty < g->by; ty++)
                for (int tx = 0; tx < g->bx; tx++) {
                    size_t r, end, step;
                    int cv = cu_bn_vec_thread(g, M, bxi, s, tx, ty, &r, &end, &step);
                    if (cv < 0) ++*bad;
                    if (cv >= g->nv) continue;
                    for (; r < end; r += step) {
                        if (r >= M) {
                            ++*bad;
                            break;
                        }
                        seen[r * g->nv + cv]++;
                    }
                }
    for (size_t i = 0; i < M * (size_t)g->nv; i++) *bad += seen[i] != 1;
    free(seen);
}

/* The BatchNorm vector path's geometry (cuda_index.h), emulated: every
 * (row, channel vector) of a shape is visited by exactly one thread, each
 * thread's channel vector is the same over its rows (its registers hold
 * that vector's coefficients), blocks fit 256 threads and the partial-sum
 * kernel's shared memory, the elementwise kernels' finer split the same
 * (and never fewer slices than the sums'), and C not a multiple of V takes
 * the scalar path. The ReLU mask's size is a byte per (row, channel
 * vector) word, M * C/V, for any split of M into images, and 0 where the
 * scalar path runs (the kernels' word index, row * C/V + vector, is
 * checked on the GPU by cuda_ops and cuda_fused). */
static void test_bn_vec_geom(void) {
    static const int Cs[] = {3, 4, 8, 12, 16, 24, 64, 128, 256, 512, 520, 1024, 2048};
    /* 131073 and 802816 rows: past the 512-slice cap (130816 rows) */
    static const size_t Ms[] = {1, 2, 7, 255, 256, 257, 1000, 12544, 50176, 131073, 802816};
    int bad_cover = 0, bad_block = 0, bad_elig = 0, bad_mask = 0, shapes = 0;
    for (int es = 2; es <= 4; es += 2)
        for (size_t ci = 0; ci < sizeof Cs / sizeof Cs[0]; ci++)
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                const int C = Cs[ci];
                const size_t M = Ms[mi];
                cu_bn_vgeom g;
                int ok = cu_bn_vec_geom(C, es, M, &g);
                if (ok != (C % (16 / es) == 0)) bad_elig++;
                /* as [N, C, H, W] = [1, C, M, 1] and [M/7 whole images of 7x1 rows] */
                if (cu_bn_mask_bytes(1, C, (int)M, 1, es) != (ok ? M * (size_t)g.nv : 0)) bad_mask++;
                if (M % 7 == 0 && cu_bn_mask_bytes((int)(M / 7), C, 7, 1, es) != (ok ? M * (size_t)g.nv : 0))
                    bad_mask++;
                if (!ok || M * (size_t)g.nv > ((size_t)1 << 24)) continue; /* the largest: seconds each */
                shapes++;
                const cu_bn_vgeom ga = cu_bn_vec_apply_geom(&g, M);
                if (g.V * g.nv != C || g.bx < 1 || g.bx > 32 || g.bx * g.by > CU_BN_VEC_THREADS ||
                    g.by < 1 || g.S != cu_bn_slices(M, TB_NHWC) ||
                    cu_bn_vec_smem_doubles(&g) > (size_t)2 * CU_BN_VEC_THREADS * g.V || ga.S < g.S ||
                    ga.S > 65535 || ga.gx != g.gx || ga.bx != g.bx || ga.by != g.by)
                    bad_block++;
                emulate_bn_vec(&g, M, &bad_cover);
                emulate_bn_vec(&ga, M, &bad_cover);
            }
    printf("# BatchNorm vector path: %d shapes emulated thread by thread (sums and elementwise splits)\n", shapes);
    TB_CHECK(bad_elig == 0, "BatchNorm vector path: taken exactly where C is a multiple of 16 bytes' elements "
                            "(%d wrong)", bad_elig);
    TB_CHECK(bad_mask == 0 && cu_bn_mask_bytes(0, 64, 7, 7, 2) == 0 && cu_bn_mask_bytes(256, 64, 56, 56, 2) == 6422528,
             "BatchNorm ReLU mask: a byte per 16-byte word of the vector path, none for the scalar path (%d shapes "
             "wrong)", bad_mask);
    TB_CHECK(bad_block == 0 && bad_cover == 0,
             "BatchNorm vector path: %d shapes, every (row, channel vector) visited by exactly one thread, blocks "
             "of at most %d threads (%d shapes with a bad block, %d visits wrong)",
             shapes, CU_BN_VEC_THREADS, bad_block, bad_cover);
}

/* The own kernels' index math (cuda_index.h) against brute force. */
void test_kernel_index_math(void) {
    int bad = 0, cases = 0;
    for (int k = 1; k <= 7; k++)
        for (int st = 1; st <= 3; st++)
            for (int pad = 0; pad <= k / 2; pad++)
                for (int H = k - 2 * pad > 1 ? k - 2 * pad : 1; H <= 23; H++) {
                    if (H + 2 * pad < k) continue;
                    int out = (H + 2 * pad - k) / st + 1;
                    for (int i = 0; i < H; i++) {
                        int o0, o1, lo = -1, hi = -2;
                        cu_pool_windows(i, k, st, pad, out, &o0, &o1);
                        for (int o = 0; o < out; o++)
                            if (o * st - pad <= i && i < o * st - pad + k) {
                                if (lo < 0) lo = o;
                                hi = o;
                            }
                        if (lo < 0 ? o0 <= o1 : (o0 != lo || o1 != hi)) bad++;
                        cases++;
                    }
                }
    TB_CHECK(bad == 0, "max-pool backward: windows containing each input (%d cases, %d wrong)", cases, bad);

    const size_t counts[] = {0, 5, 0, 0, 3, 7, 0, 1, 0};
    const int ns = (int)(sizeof counts / sizeof counts[0]);
    cu_sgd_seg segs[9];
    size_t start = 0;
    for (int s = 0; s < ns; s++) {
        segs[s].offset = 1000 * (size_t)s;
        segs[s].start = start;
        segs[s].count = counts[s];
        segs[s].weight_decay = 0;
        start += counts[s];
    }
    bad = 0;
    for (size_t v = 0; v < start; v++) {
        int f = cu_sgd_find(segs, ns, v);
        if (!(segs[f].count > 0 && segs[f].start <= v && v < segs[f].start + segs[f].count)) bad++;
    }
    TB_CHECK(bad == 0, "SGD: each of %zu elements finds its segment among %d (zero-count ones "
                       "included): %d wrong", start, ns, bad);

    const size_t Ms[] = {1, 2, 255, 256, 257, 4095, 4096, 4097, 100000, 802816, 3211264, 205520896};
    bad = 0;
    for (size_t t = 0; t < sizeof Ms / sizeof Ms[0]; t++)
        for (int l = 0; l < 2; l++) {
            int S = cu_bn_slices(Ms[t], (tb_layout)l);
            int cap = l == TB_NCHW ? CU_BN_NCHW_MAX_SLICES : CU_BN_NHWC_MAX_SLICES;
            size_t prev = 0;
            int okp = S >= 1 && S <= cap;
            for (int s = 0; s < S; s++) {
                size_t j0, j1;
                cu_slice_range(Ms[t], S, s, &j0, &j1);
                okp &= j0 == prev && j1 >= j0;
                prev = j1;
            }
            okp &= prev == Ms[t];
            bad += !okp;
        }
    TB_CHECK(bad == 0, "BatchNorm partial-sum slices cover every value once, in order (%d shapes wrong)", bad);
    test_bn_vec_geom();
}

/* TB_BN_KERNELS and the BatchNorm timing's rules (cuda_bn_tune.c): the
 * values (anything else one line); the own kernels picked only when more
 * than 1 % faster and measured, never an unmeasured path; the plan cache's
 * entry per problem and its value, which parses back to what was stored,
 * and a value that is not one (a bad word, a missing or extra field, a
 * time that is not one, a pick its own times do not give) never read. */
void test_bn_tune_rules(void) {
    static const env_case ok[] = {
        {NULL, CU_BN_AUTO}, {"", CU_BN_AUTO}, {"auto", CU_BN_AUTO}, {"cudnn", CU_BN_CUDNN}, {"own", CU_BN_OWN}};
    char msg[512];
    check_env_values("TB_BN_KERNELS", cu_bn_kernels_from_env, ok, sizeof ok / sizeof ok[0],
                     "unset, '', auto, cudnn, own", "fast", "auto, cudnn or own", msg, sizeof msg);

    static const struct {
        float mc, mo;
        int own;
    } picks[] = {{1.0f, 0.5f, 1},  {1.0f, 0.995f, 0}, {1.0f, 0.98f, 1}, {0.5f, 1.0f, 0},
                 {-1.0f, 0.7f, 1}, {0.7f, -1.0f, 0},  {-1.0f, -1.0f, 0}};
    int bad = 0;
    for (size_t k = 0; k < sizeof picks / sizeof picks[0]; k++)
        bad += cu_bn_tune_pick(picks[k].mc, picks[k].mo) != picks[k].own;
    TB_CHECK(bad == 0, "the BatchNorm pick: the own kernels only when measured and more than 1 %% faster (%d wrong)",
             bad);

    char key[112], key2[112], v[64];
    tb_tensor x = {NULL, 256, 64, 56, 56, TB_F16, TB_NHWC};
    cu_bn_tune_key(key, sizeof key, &x, 1, 1, 1);
    cu_bn_tune_key(key2, sizeof key2, &x, 1, 1, 0);
    TB_CHECK(strcmp(key, "bn r2 float16 NHWC n256 c64 56x56 relu add") == 0 &&
                 strcmp(key2, "bn r2 float16 NHWC n256 c64 56x56 relu add y-read") == 0,
             "the entry names the own kernels' revision and the problem, the ReLU mask off apart: '%s', '%s'", key, key2);
    int own = -1;
    float mc = 0.0f, mo = 0.0f, sc = 0.0f, so = 0.0f;
    int stored = cu_bn_tune_store(v, sizeof v, 0.51234f, 0.40111f, &sc, &so);
    TB_CHECK(stored == 1 && cu_bn_tune_parse(v, &own, &mc, &mo) == 0 && own == 1 && mc == sc && mo == so &&
                 fabsf(mc - 0.5123f) < 1e-6f && fabsf(mo - 0.4011f) < 1e-6f,
             "a stored choice reads back: '%s'", v);
    (void)cu_bn_tune_store(v, sizeof v, -1.0f, 0.4011f, &sc, &so);
    TB_CHECK(cu_bn_tune_parse(v, &own, &mc, &mo) == 0 && own == 1 && mc == -1.0f, "cuDNN declined: '%s'", v);
    /* times whose ratio sits on the 1 % edge: the pick is made from what is
     * stored, so every entry parses back to itself */
    bad = 0;
    for (int i = 0; i < 20000; i++) {
        float c = 0.05f + 0.5f * (float)i / 20000.0f, o = c * (0.985f + 0.01f * (float)((i * 7919) % 1000) / 1000.0f);
        int pick = cu_bn_tune_store(v, sizeof v, c, o, &sc, &so);
        bad += cu_bn_tune_parse(v, &own, &mc, &mo) != 0 || own != pick || mc != sc || mo != so;
    }
    TB_CHECK(bad == 0, "choices on the 1 %% edge parse back as stored (%d of 20000 do not)", bad);
    static const char *const corrupt[] = {"own 0.5 0.6",  "cudnn 0.5 0.4", "fast 0.5 0.4", "own 0.5",
                                          "own 0.5 0.4 x", "own nan 0.4",  "own 0.5 -0.4", "own -2 0.4",
                                          "",              "own 0.5 inf"};
    bad = 0;
    for (size_t k = 0; k < sizeof corrupt / sizeof corrupt[0]; k++)
        bad += cu_bn_tune_parse(corrupt[k], &own, &mc, &mo) == 0;
    TB_CHECK(bad == 0 && cu_bn_tune_parse(NULL, &own, &mc, &mo) != 0,
             "values that are not a BatchNorm choice are refused (%d accepted)", bad);

    /* a timed round lasts about 1 ms (2 steps from 0.5 ms a step, 50 below
     * 0.02 ms), and is queued behind a hold twice the host's queueing time */
    bad = 0;
    for (float t = 0.021f; t <= 0.5f; t *= 1.01f) {
        const int r = cu_bn_tune_reps(t);
        bad += !(r * t >= 1.0f && r * t < 1.0f + t);
    }
    TB_CHECK(bad == 0 && cu_bn_tune_reps(0.6f) == 2 && cu_bn_tune_reps(0.01f) == 50 && cu_bn_tune_reps(0.0f) == 50 &&
                 cu_bn_tune_reps(-1.0f) == 50 && cu_bn_tune_reps(NAN) == 50,
             "a timed round's steps: about 1 ms between 0.02 and 0.5 ms a step (%d off), 2 above, 50 below", bad);
    TB_CHECK(fabsf(cu_bn_tune_hold_ms(0.03, 20) - 1.25f) < 1e-6f && fabsf(cu_bn_tune_hold_ms(0.0, 5) - 0.05f) < 1e-6f &&
                 cu_bn_tune_hold_ms(-1.0, 5) == cu_bn_tune_hold_ms(0.0, 5) && cu_bn_tune_hold_ms(10.0, 50) == 50.0f,
             "the hold before a round: twice the host's time to queue it, + 0.05 ms, at most 50 ms (%g, %g, %g)",
             (double)cu_bn_tune_hold_ms(0.03, 20), (double)cu_bn_tune_hold_ms(0.0, 5),
             (double)cu_bn_tune_hold_ms(10.0, 50));

    /* the line bench/summary/resnet50.py reads: tests/test_summary.py's copy of it */
    cu_state st;
    memset(&st, 0, sizeof st);
    st.bn_timed = 53, st.bn_timed_batch = 256, st.bn_timed_own = 31;
    st.bn_ms_chosen = 14.21, st.bn_ms_cudnn = 17.012, st.bn_ms_own = 15.33;
    char line[512];
    cu_bn_tune_line(line, sizeof line, &st);
    TB_CHECK(strcmp(line, "# cuda bn: 53 BatchNorms timed on cuDNN's path and on the own kernels (forward + backward "
                          "at batch 256; 0 from the plan cache): 31 run on the own kernels; a step's BatchNorms "
                          "14.210 ms as chosen, 17.012 ms all on cuDNN's, 15.330 ms all on the own") == 0,
             "the timing line is the one bench/summary reads: %s", line);
}

#endif
