/* test_cuda_host_kernels.c - test_cuda_host's CUDA build checks of the
 * max-pool tiling (the tiled backward emulated against the CPU backend),
 * BatchNorm descriptors and fallback, cuDNN graph tensors, notes and plans,
 * and device discovery without a device (see test_cuda_host.c). */
#include "tests/test_cuda_host.h"

#ifdef TB_HAVE_CUDA

void test_pool_tiling(void) {
    static const int Cs[] = {1, 2, 3, 12, 64, 100, 256};
    static const int Hs[] = {1, 2, 5, 16, 17, 33, 112};
    int bad_cfg = 0, bad_span = 0, bad_slot = 0, bad_blk = 0, cases = 0;
    for (int k = 1; k <= CU_POOL_MAX_K; k++)
        for (int st = 1; st <= 4; st++)
            for (int pad = 0; pad <= k / 2; pad++)
                for (size_t hi = 0; hi < sizeof Hs / sizeof Hs[0]; hi++)
                    for (int l = 0; l < 2; l++)
                        for (int es = 2; es <= 4; es += 2)
                            for (size_t ci = 0; ci < sizeof Cs / sizeof Cs[0]; ci++) {
                                const int H = Hs[hi], W = Hs[(hi + 3) % (sizeof Hs / sizeof Hs[0])];
                                const int C = Cs[ci];
                                if (H + 2 * pad < k || W + 2 * pad < k) continue;
                                const int Ho = (H + 2 * pad - k) / st + 1, Wo = (W + 2 * pad - k) / st + 1;
                                const int vector = l == TB_NHWC && C % (16 / es) == 0;
                                cu_pool_tiling t;
                                cases++;
                                if (!cu_pool_tiling_for((tb_layout)l, C, H, W, Ho, Wo, k, st, es, vector, &t)) {
                                    bad_cfg++;
                                    continue;
                                }
                                const int cap = l == TB_NCHW ? 4 : t.vec > 1 ? 8 : 32;
                                bad_cfg += !(t.vec == (vector ? 16 / es : 1) && t.cvecs * t.vec == C &&
                                             t.cv == 1 << t.cv_log2 && t.cv <= cap &&
                                             (t.cv >= t.cvecs || t.cv == cap) &&
                                             (t.cv == 1 || t.cv / 2 < t.cvecs) &&
                                             t.groups * t.cv >= t.cvecs && (t.groups - 1) * t.cv < t.cvecs &&
                                             t.tile == 1 << t.tile_log2 && t.tile <= CU_POOL_TILE_MAX &&
                                             t.smem <= CU_POOL_SMEM_MAX &&
                                             t.smem == (unsigned)(t.nwh * t.nww * t.cv * t.vec * (es + 1)) &&
                                             t.tiles_h == (H + t.tile - 1) / t.tile &&
                                             t.tiles_w == (W + t.tile - 1) / t.tile);
                                /* spans along both axes against brute force */
                                for (int ax = 0; ax < 2; ax++) {
                                    const int in = ax ? W : H, out = ax ? Wo : Ho, nt = ax ? t.tiles_w : t.tiles_h;
                                    const int most = ax ? t.nww : t.nwh;
                                    int next = 0;
                                    for (int tt = 0; tt < nt; tt++) {
                                        int i0, i1, o0, o1, lo = -1, hi2 = -2;
                                        cu_pool_tile_span(tt, t.tile, in, k, st, pad, out, &i0, &i1, &o0, &o1);
                                        if (i0 != next || i1 <= i0 || i1 > in) bad_span++;
                                        next = i1;
                                        for (int o = 0; o < out; o++)
                                            for (int i = i0; i < i1; i++)
                                                if (o * st - pad <= i && i < o * st - pad + k) {
                                                    if (lo < 0) lo = o;
                                                    hi2 = o;
                                                }
                                        if (lo < 0 ? o0 <= o1 : (o0 != lo || o1 != hi2 || o1 - o0 + 1 > most))
                                            bad_span++;
                                    }
                                    if (next != in) bad_span++;
                                }
                                /* slots of the largest tile: distinct, inside the shared memory */
                                {
                                    const int nwin = t.nwh * t.nww, n = nwin * t.cv;
                                    unsigned char *seen = calloc((size_t)n, 1);
                                    for (int w = 0; w < nwin; w++)
                                        for (int cv = 0; cv < t.cv; cv++) {
                                            int sl = cu_pool_slot((tb_layout)l, w, cv, t.cv, nwin);
                                            if (sl < 0 || sl >= n || seen[sl]++) bad_slot++;
                                        }
                                    free(seen);
                                }
                                /* block indices of 3 images */
                                {
                                    const size_t nb = cu_pool_tile_blocks(&t, 3);
                                    size_t want = 0;
                                    for (int n = 0; n < 3; n++)
                                        for (int g = 0; g < t.groups; g++)
                                            for (int th = 0; th < t.tiles_h; th++)
                                                for (int tw = 0; tw < t.tiles_w; tw++, want++) {
                                                    int a[4], b[4];
                                                    cu_pool_tile_block32(&t, (unsigned)want, &a[0], &a[1], &a[2], &a[3]);
                                                    cu_pool_tile_block64(&t, want, &b[0], &b[1], &b[2], &b[3]);
                                                    if (a[0] != n || a[1] != g || a[2] != th || a[3] != tw ||
                                                        memcmp(a, b, sizeof a))
                                                        bad_blk++;
                                                }
                                    if (want != nb) bad_blk++;
                                }
                            }
    TB_CHECK(bad_cfg == 0, "max-pool tiling: width, channel groups, tile and shared memory (%d of %d wrong)",
             bad_cfg, cases);
    TB_CHECK(bad_span == 0, "max-pool tiles: owned inputs partition each axis, window range exact and "
                            "within the slots (%d wrong)", bad_span);
    TB_CHECK(bad_slot == 0, "max-pool tile slots distinct and in range (%d wrong)", bad_slot);
    TB_CHECK(bad_blk == 0, "max-pool blocks decompose one to one, 32- and 64-bit (%d wrong)", bad_blk);

    /* the 64-bit decomposition past 2^32 blocks */
    cu_pool_tiling t;
    cu_pool_tiling_for(TB_NHWC, 2048, 112, 112, 56, 56, 3, 2, 2, 1, &t);
    bad_blk = 0;
    for (int r = 0; r < 1000; r++) {
        int n = (int)tb_rng_below(&g_rng, 1u << 20), g = (int)tb_rng_below(&g_rng, (uint64_t)t.groups);
        int th = (int)tb_rng_below(&g_rng, (uint64_t)t.tiles_h), tw = (int)tb_rng_below(&g_rng, (uint64_t)t.tiles_w);
        unsigned long long b = (((unsigned long long)n * t.groups + g) * t.tiles_h + th) * t.tiles_w + tw;
        int a[4];
        cu_pool_tile_block64(&t, b, &a[0], &a[1], &a[2], &a[3]);
        bad_blk += a[0] != n || a[1] != g || a[2] != th || a[3] != tw;
    }
    TB_CHECK(bad_blk == 0, "max-pool blocks past 2^32 decompose (64-bit): %d of 1000 wrong", bad_blk);

    /* the ResNet stem, bf16 NHWC: 16x16 tiles, 64 channels a block, 9x9 windows */
    cu_pool_tiling_for(TB_NHWC, 64, 112, 112, 56, 56, 3, 2, 2, 1, &t);
    TB_CHECK(t.vec == 8 && t.cv == 8 && t.groups == 1 && t.tile == 16 && t.nwh == 9 && t.nww == 9 &&
                 t.smem == 81 * 64 * 3 && cu_pool_tile_blocks(&t, 256) == 256 * 7 * 7,
             "max-pool stem tiling bf16 NHWC: vec %d cv %d groups %d tile %d windows %dx%d smem %u",
             t.vec, t.cv, t.groups, t.tile, t.nwh, t.nww, t.smem);
    TB_CHECK(!cu_pool_tiling_for(TB_NHWC, 64, 40, 40, 40, 40, 17, 1, 2, 1, &t),
             "max-pool k 17: no tiling (offsets past uint8), the recomputing kernel");
    printf("# max-pool tiling: %d geometries\n", cases);
}

/* The tiled max-pool backward as cuda_pool.cu runs it (blocks, the two
 * stages, the index maps of cuda_index.h), in float on the host, against
 * the CPU backend bit for bit: ties, NaN, -inf windows, acc 0 and 1. A
 * slot read that stage 1 of the same block did not fill, an input owned by
 * no block or by two, or a window outside the tile's range counts as an
 * error. x, dy, dx: float32 NCHW. */
static int pool_tiled_emulate(tb_layout l, int vector, int N, int C, int H, int W, const tb_pool_geom *pg,
                              const float *x, const float *dy, float *dx, int acc) {
    const int k = pg->k, st = pg->stride, pad = pg->pad;
    const int Ho = (H + 2 * pad - k) / st + 1, Wo = (W + 2 * pad - k) / st + 1;
    cu_pool_tiling t;
    if (!cu_pool_tiling_for(l, C, H, W, Ho, Wo, k, st, 4, vector, &t)) return 1;
    const size_t slots = (size_t)t.nwh * t.nww * t.cv * t.vec;
    float *sdy = malloc(slots * sizeof *sdy);
    unsigned char *sarg = malloc(slots);
    int *owned = calloc((size_t)N * C * H * W, sizeof *owned);
    int errors = 0;
    const size_t blocks = cu_pool_tile_blocks(&t, N);
    for (size_t b = 0; b < blocks; b++) {
        int n, g, th, tw, ih0, ih1, oh0, oh1, iw0, iw1, ow0, ow1;
        cu_pool_tile_block32(&t, (unsigned)b, &n, &g, &th, &tw);
        cu_pool_tile_span(th, t.tile, H, k, st, pad, Ho, &ih0, &ih1, &oh0, &oh1);
        cu_pool_tile_span(tw, t.tile, W, k, st, pad, Wo, &iw0, &iw1, &ow0, &ow1);
        const int nwh = oh1 >= oh0 ? oh1 - oh0 + 1 : 0, nww = ow1 >= ow0 ? ow1 - ow0 + 1 : 0;
        const int nwin = nwh * nww, c0 = g * t.cv;
        const int ncv = t.cvecs - c0 < t.cv ? t.cvecs - c0 : t.cv;
        memset(sarg, 0xff, slots); /* unfilled */
        for (int it = 0; it < nwin * t.cv; it++) {
            int w = l == TB_NHWC ? it >> t.cv_log2 : it % nwin;
            int cv = l == TB_NHWC ? it & (t.cv - 1) : it / nwin;
            if (cv >= ncv) continue;
            const int oh = oh0 + w / nww, ow = ow0 + w % nww, h0 = oh * st - pad, w0 = ow * st - pad;
            const int slot = cu_pool_slot(l, w, cv, t.cv, nwin);
            for (int j = 0; j < t.vec; j++) {
                const int c = (c0 + cv) * t.vec + j;
                const int kh0 = h0 < 0 ? -h0 : 0, kh1 = H - h0 < k ? H - h0 : k;
                const int kw0 = w0 < 0 ? -w0 : 0, kw1 = W - w0 < k ? W - w0 : k;
                float m = -INFINITY;
                int a = kh0 * k + kw0;
                for (int kh = kh0; kh < kh1; kh++)
                    for (int kw = kw0; kw < kw1; kw++) {
                        float v = x[tb_layout_offset(TB_NCHW, C, H, W, n, c, h0 + kh, w0 + kw)];
                        if (v > m || v != v) {
                            m = v;
                            a = kh * k + kw;
                        }
                    }
                sarg[(size_t)slot * t.vec + j] = (unsigned char)a;
                sdy[(size_t)slot * t.vec + j] = dy[tb_layout_offset(TB_NCHW, C, Ho, Wo, n, c, oh, ow)];
            }
        }
        for (int it = 0; it < t.cv << (2 * t.tile_log2); it++) {
            int pos = l == TB_NHWC ? it >> t.cv_log2 : it & ((1 << 2 * t.tile_log2) - 1);
            int cv = l == TB_NHWC ? it & (t.cv - 1) : it >> (2 * t.tile_log2);
            const int ih = ih0 + (pos >> t.tile_log2), iw = iw0 + (pos & (t.tile - 1));
            if (cv >= ncv || ih >= ih1 || iw >= iw1) continue;
            int ha, hb, wa, wb;
            cu_pool_windows(ih, k, st, pad, Ho, &ha, &hb);
            cu_pool_windows(iw, k, st, pad, Wo, &wa, &wb);
            for (int j = 0; j < t.vec; j++) {
                const int c = (c0 + cv) * t.vec + j;
                const size_t o = tb_layout_offset(TB_NCHW, C, H, W, n, c, ih, iw);
                owned[o]++;
                float gs = acc ? dx[o] : 0.0f;
                int any = 0;
                for (int oh = ha; oh <= hb; oh++)
                    for (int ow = wa; ow <= wb; ow++) {
                        if (oh < oh0 || oh > oh1 || ow < ow0 || ow > ow1) {
                            errors++;
                            continue;
                        }
                        const int me = (ih - (oh * st - pad)) * k + iw - (ow * st - pad);
                        const int slot = cu_pool_slot(l, (oh - oh0) * nww + (ow - ow0), cv, t.cv, nwin);
                        const unsigned char a = sarg[(size_t)slot * t.vec + j];
                        if (a == 0xff) errors++;
                        if (a == me) {
                            gs += sdy[(size_t)slot * t.vec + j];
                            any = 1;
                        }
                    }
                if (!acc || any) dx[o] = gs;
            }
        }
    }
    for (size_t i = 0; i < (size_t)N * C * H * W; i++) errors += owned[i] != 1;
    free(sdy);
    free(sarg);
    free(owned);
    return errors;
}

void test_pool_tiled_backward(tb_backend *be) {
    static const struct {
        int n, c, h, w, k, s, p;
    } cs[] = {{2, 64, 112, 112, 3, 2, 1}, {2, 12, 13, 11, 3, 2, 1}, {3, 3, 7, 5, 3, 2, 1},
              {2, 8, 20, 19, 3, 1, 1},    {2, 4, 6, 7, 2, 2, 0},     {1, 4, 23, 21, 5, 3, 2},
              {1, 4, 9, 9, 1, 3, 0},      {1, 8, 30, 29, 15, 1, 7},  {1, 36, 40, 33, 7, 2, 3}};
    int bad = 0, runs = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const int N = cs[i].n, C = cs[i].c, H = cs[i].h, W = cs[i].w;
        tb_pool_geom pg = {cs[i].k, cs[i].s, cs[i].p};
        const int Ho = (H + 2 * pg.pad - pg.k) / pg.stride + 1, Wo = (W + 2 * pg.pad - pg.k) / pg.stride + 1;
        const size_t nx = (size_t)N * C * H * W, ny = (size_t)N * C * Ho * Wo;
        tb_tensor tx = {be->alloc(be, nx * 4), N, C, H, W, TB_F32, TB_NCHW};
        tb_tensor ty = {be->alloc(be, ny * 4), N, C, Ho, Wo, TB_F32, TB_NCHW};
        tb_tensor tdy = {be->alloc(be, ny * 4), N, C, Ho, Wo, TB_F32, TB_NCHW};
        tb_tensor tdx = {be->alloc(be, nx * 4), N, C, H, W, TB_F32, TB_NCHW};
        float *x = tx.data, *dy = tdy.data, *dx = tdx.data, *mine = malloc(nx * 4), *dx0 = malloc(nx * 4);
        /* small integers (ties), with NaN and -inf sprinkled */
        for (size_t j = 0; j < nx; j++) {
            uint64_t r = tb_rng_below(&g_rng, 200);
            x[j] = r == 0 ? NAN : r == 1 ? -INFINITY : (float)((int)tb_rng_below(&g_rng, 5) - 2);
            dx0[j] = (float)(tb_rng_uniform(&g_rng) * 2 - 1);
        }
        for (size_t j = 0; j < ny; j++) dy[j] = (float)(tb_rng_uniform(&g_rng) * 2 - 1);
        be->maxpool_forward(be, &pg, &tx, &ty);
        for (int acc = 0; acc <= 1; acc++) {
            memcpy(dx, dx0, nx * 4);
            be->maxpool_backward(be, &pg, &tx, &ty, &tdy, &tdx, acc);
            for (int l = 0; l < 2; l++)
                for (int vector = 0; vector <= (l == TB_NHWC && C % 4 == 0); vector++) {
                    memcpy(mine, dx0, nx * 4);
                    int err = pool_tiled_emulate((tb_layout)l, vector, N, C, H, W, &pg, x, dy, mine, acc);
                    if (err || memcmp(mine, dx, nx * 4)) {
                        bad++;
                        printf("# max-pool tiled emulation [%d,%d,%d,%d] k%d s%d p%d %s%s acc%d: %d index "
                               "errors, %s\n", N, C, H, W, pg.k, pg.stride, pg.pad, l ? "NHWC" : "NCHW",
                               vector ? " vec4" : "", acc, err, memcmp(mine, dx, nx * 4) ? "dx differs" : "dx same");
                    }
                    runs++;
                }
        }
        be->release(be, tx.data), be->release(be, ty.data), be->release(be, tdy.data), be->release(be, tdx.data);
        free(mine), free(dx0);
    }
    TB_CHECK(bad == 0, "max-pool tiled backward emulated on the host == CPU backend bit for bit (%d of %d runs "
                       "wrong)", bad, runs);
    printf("# max-pool tiled backward emulation: %d runs (9 shapes, acc 0/1, NCHW, NHWC scalar and vec4) "
           "bit-exact vs the CPU backend\n", runs - bad);
}

/* The BN parameter descriptor cuDNN derives from an NHWC 16-bit activation. */
void test_bn_descs(void) {
    cudnnTensorDescriptor_t xd, pd;
    if (cudnnCreateTensorDescriptor(&xd) != CUDNN_STATUS_SUCCESS) {
        printf("# cuDNN descriptors unavailable on this host: BN descriptor check skipped\n");
        return;
    }
    cudnnCreateTensorDescriptor(&pd);
    cudnnStatus_t s1 = cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, 32,
                                                  256, 56, 56);
    cudnnStatus_t s2 = cudnnDeriveBNTensorDescriptor(pd, xd, CUDNN_BATCHNORM_SPATIAL_PERSISTENT);
    cudnnDataType_t d;
    int n = 0, c = 0, h = 0, w = 0, ns, cs, hs, ws;
    cudnnGetTensor4dDescriptor(pd, &d, &n, &c, &h, &w, &ns, &cs, &hs, &ws);
    TB_CHECK(s1 == CUDNN_STATUS_SUCCESS && s2 == CUDNN_STATUS_SUCCESS && d == CUDNN_DATA_FLOAT &&
                 n == 1 && c == 256 && h == 1 && w == 1,
             "BN scale/bias/mean/var descriptor of a bf16 NHWC [32,256,56,56]: float [1,256,1,1] "
             "(got %d: [%d,%d,%d,%d])", (int)d, n, c, h, w);
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroyTensorDescriptor(pd);
}

/* Which answers of cuDNN's fused BatchNorm move a node to the own kernels
 * (cu_bn_falls_back): refusals of the configuration, NOT_SUPPORTED and
 * BAD_PARAM with any cuDNN 9 sub-code (bf16 and tiny shapes are outside the
 * documented fp16 NHWC support); never success or a failure of the run. */
void test_bn_fallback_status(void) {
    const cudnnStatus_t refused[] = {CUDNN_STATUS_NOT_SUPPORTED, CUDNN_STATUS_NOT_SUPPORTED_SHAPE,
                                     CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, CUDNN_STATUS_BAD_PARAM,
                                     CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND};
    const cudnnStatus_t fatal[] = {CUDNN_STATUS_SUCCESS, CUDNN_STATUS_INTERNAL_ERROR,
                                   CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
                                   CUDNN_STATUS_EXECUTION_FAILED, CUDNN_STATUS_EXECUTION_FAILED_CUDART,
                                   CUDNN_STATUS_NOT_INITIALIZED};
    int bad = 0;
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) bad += !cu_bn_falls_back(refused[k]);
    for (size_t k = 0; k < sizeof fatal / sizeof fatal[0]; k++) bad += cu_bn_falls_back(fatal[k]);
    TB_CHECK(bad == 0, "fused BatchNorm: NOT_SUPPORTED and BAD_PARAM (any sub-code) fall back to the own "
                       "kernels; success, internal and execution errors do not (%d statuses wrong)", bad);
}

/* The graph API's tensors (cu_cgraph_tensors) for every resnet50 conv node:
 * dims N,C,H,W of the graph's activations (filters K,C,R,S), and strides
 * that address every sampled element where the layout's offset function
 * puts it (filters: NHWC = KRSC). Then each node's operation descriptors
 * for every direction and beta finalize on this host (attribute types and
 * counts, shape consistency), and every descriptor made is destroyed. */
static int64_t cg_offset(const cu_cg_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return a * t->stride[0] + b * t->stride[1] + c * t->stride[2] + d * t->stride[3];
}

static int cg_tensor_bad(const cu_cg_tensor *t, tb_layout l, int N, int C, int H, int W) {
    if (t->dim[0] != N || t->dim[1] != C || t->dim[2] != H || t->dim[3] != W) return 1;
    int bad = 0;
    for (int k = 0; k < 24; k++) { /* the 16 corners, then random elements */
        int a = k < 16 ? (k & 1) * (N - 1) : (int)tb_rng_below(&g_rng, (uint64_t)N);
        int c = k < 16 ? (k >> 1 & 1) * (C - 1) : (int)tb_rng_below(&g_rng, (uint64_t)C);
        int h = k < 16 ? (k >> 2 & 1) * (H - 1) : (int)tb_rng_below(&g_rng, (uint64_t)H);
        int w = k < 16 ? (k >> 3 & 1) * (W - 1) : (int)tb_rng_below(&g_rng, (uint64_t)W);
        bad += (size_t)cg_offset(t, a, c, h, w) != tb_layout_offset(l, C, H, W, a, c, h, w);
    }
    return bad != 0;
}

typedef struct {
    int have_backend, bad, checked, ops, op_bad;
    char why[160];
} cgraph_tensors_ctx;

/* One conv node's graph-API tensors (dims, strides addressing elements as
 * the layout does) and, at 224x224 where descriptors can be made here, its
 * operation descriptors for every direction, beta and 16/32-bit dtype. */
static void check_cgraph_tensors(void *vc, int sz, tb_layout lay, const tb_node *nd, const tb_act *in,
                                 const tb_act *out) {
    static const char align_buf[64] __attribute__((aligned(16))) = {0};
    cgraph_tensors_ctx *cx = vc;
    int l = lay == TB_NHWC;
    cu_cg_tensor t[3];
    cu_cgraph_tensors(&nd->conv, lay, 5, in->h, in->w, t);
    int b = cg_tensor_bad(&t[0], lay, 5, in->c, in->h, in->w) +
            cg_tensor_bad(&t[1], lay, nd->conv.cout, nd->conv.cin, nd->conv.k, nd->conv.k) +
            cg_tensor_bad(&t[2], lay, 5, out->c, out->h, out->w);
    if (b) {
        cx->bad++;
        printf("  %s %s: graph-API tensors wrong\n", nd->name, tb_layout_name(lay));
    }
    cx->checked++;
    if (!cx->have_backend || sz) return;
    static const tb_dtype dts[2][2] = {{TB_F32, TB_F32}, {TB_BF16, TB_F16}};
    for (int di = 0; di < 2; di++)
        for (int d = 0; d < 3; d++)
            for (int beta = 0; beta < (d ? 2 : 1); beta++) {
                cu_cgraph_req r = {(cu_conv_dir)d, (float)beta, &nd->conv, dts[l][di], lay,
                                   5, in->h, in->w, 0, 0, align_buf, align_buf, align_buf, 0, NULL, 0};
                if (!cu_cgraph_check_op(&r, cx->why, sizeof cx->why)) {
                    if (!cx->op_bad) printf("  %s dir %d: %s\n", nd->name, d, cx->why);
                    cx->op_bad++;
                }
                cx->ops++;
            }
}

void test_cgraph_tensors(void) {
    cudnnBackendDescriptor_t probe = NULL;
    cgraph_tensors_ctx cx = {0};
    cx.have_backend = cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &probe) == CUDNN_STATUS_SUCCESS;
    if (cx.have_backend) cudnnBackendDestroyDescriptor(probe);
    else printf("# cuDNN backend descriptors unavailable on this host: operation checks skipped\n");
    long live0 = cu_cgraph_live();
    each_resnet50_conv(check_cgraph_tensors, &cx);
    int bad = cx.bad, checked = cx.checked, ops = cx.ops, op_bad = cx.op_bad;
    TB_CHECK(bad == 0 && checked == 4 * 53,
             "graph-API tensors of %d resnet50 conv nodes x layouts (224x224, 64x48): dims N,C,H,W / K,C,R,S "
             "and strides that address elements as the layout does: %d wrong", checked, bad);
    printf("# graph-API tensors: %d node x layout shapes; %d operation descriptors built on this host\n", checked,
           ops);
    if (cx.have_backend)
        TB_CHECK(op_bad == 0 && ops == 53 * 2 * 2 * 5,
                 "graph-API operation descriptors (fwd, data and filter with beta 0 and 1; f32 NCHW, bf16 and "
                 "f16 NHWC) finalize for every resnet50 conv: %d of %d refused", op_bad, ops);
    TB_CHECK(cu_cgraph_live() == live0, "graph-API descriptors: every one created is destroyed (%ld left)",
             cu_cgraph_live() - live0);
}

/* The engine-note filter (cu_cgraph_reject) per precision and
 * --deterministic, on synthetic note lists. */
void test_cgraph_notes(void) {
    enum { F32, TF32, BF16, F16, NP };
    static const tb_dtype dt[NP] = {TB_F32, TB_F32, TB_BF16, TB_F16};
    static const int tf[NP] = {0, 1, 0, 0};
    const int TC = CUDNN_NUMERICAL_NOTE_TENSOR_CORE, DC = CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS,
              ND = CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC, RP = CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION,
              FFT = CUDNN_NUMERICAL_NOTE_FFT, WI = CUDNN_NUMERICAL_NOTE_WINOGRAD;
    const int RTC = CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION,
              R8 = CUDNN_BEHAVIOR_NOTE_REQUIRES_FILTER_INT8x32_REORDER,
              G = CUDNN_BEHAVIOR_NOTE_SUPPORTS_CUDA_GRAPH_NATIVE_API;
    struct {
        int num[3], nnum, beh[2], nbeh, det;
        int ok[NP]; /* accepted for F32, TF32, BF16, F16 */
    } cases[] = {
        {{0}, 0, {0}, 0, 0, {1, 1, 1, 1}},
        {{0}, 0, {0}, 0, 1, {1, 1, 1, 1}},
        {{TC}, 1, {0}, 0, 0, {0, 1, 1, 1}},        /* tensor cores on float32 = TF32 */
        {{FFT, TC}, 2, {0}, 0, 0, {0, 1, 1, 1}},   /* not only the first note */
        {{DC}, 1, {0}, 0, 0, {0, 0, 0, 1}},        /* down-conversion: fp16 data only */
        {{TC, DC}, 2, {0}, 0, 0, {0, 0, 0, 1}},
        {{ND}, 1, {0}, 0, 0, {1, 1, 1, 1}},
        {{ND}, 1, {0}, 0, 1, {0, 0, 0, 0}},        /* --deterministic */
        {{TC, WI, ND}, 3, {0}, 0, 1, {0, 0, 0, 0}},
        {{RP}, 1, {0}, 0, 0, {0, 0, 0, 0}},        /* the compute type is float */
        {{FFT, WI}, 2, {0}, 0, 1, {1, 1, 1, 1}},   /* FMA algorithms, as the legacy FFT / Winograd */
        {{0}, 0, {RTC, G}, 2, 0, {0, 0, 0, 0}},     /* NVRTC at start-up: seconds per shape */
        {{0}, 0, {G}, 1, 0, {1, 1, 1, 1}},
        {{0}, 0, {G, R8}, 2, 0, {0, 0, 0, 0}},     /* an int8x32 reorder trainbench does not do */
    };
    int bad = 0, n = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int pi = 0; pi < NP; pi++) {
            const char *why = cu_cgraph_reject(cases[c].num, cases[c].nnum, cases[c].beh, cases[c].nbeh, dt[pi],
                                               tf[pi], cases[c].det);
            if ((why == NULL) != cases[c].ok[pi]) {
                bad++;
                printf("  note case %zu precision %d: %s\n", c, pi, why ? why : "accepted");
            }
            n++;
        }
    TB_CHECK(bad == 0, "graph-API engine notes: TF32 tensor cores refused for IEEE float32 only, input "
                       "down-conversion for all but fp16, non-deterministic under --deterministic, reduced-"
                       "precision reduction, int8x32 reorders and runtime compilation always; FFT, Winograd "
                       "allowed: %d of %d answers wrong", bad, n);
}

/* Graph plan or legacy algorithm (cu_conv_take_graph). */
void test_take_graph(void) {
    struct {
        int api, have;
        float g, l;
        int want;
    } cases[] = {
        {TB_CUDA_CONV_AUTO, 1, 0.30f, 0.40f, 1},    /* faster */
        {TB_CUDA_CONV_AUTO, 1, 0.50f, 0.40f, 0},    /* slower: never worse than legacy */
        {TB_CUDA_CONV_AUTO, 1, 0.40f, 0.40f, 0},    /* a tie keeps the legacy algorithm */
        {TB_CUDA_CONV_AUTO, 0, 0.10f, 0.40f, 0},    /* no graph plan */
        {TB_CUDA_CONV_AUTO, 1, -1.0f, -1.0f, 1},    /* --no-autotune: the graph API's heuristics */
        {TB_CUDA_CONV_GRAPH, 1, 0.90f, 0.40f, 1},   /* forced, even slower */
        {TB_CUDA_CONV_GRAPH, 0, -1.0f, 0.40f, 0},   /* forced, but none */
        {TB_CUDA_CONV_LEGACY, 1, 0.10f, 0.40f, 0},  /* forced legacy */
        {TB_CUDA_CONV_LEGACY, 1, -1.0f, -1.0f, 0},
    };
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        if (cu_conv_take_graph(cases[c].api, cases[c].have, cases[c].g, cases[c].l) != cases[c].want) {
            bad++;
            printf("  take-graph case %zu wrong\n", c);
        }
    TB_CHECK(bad == 0, "graph plan vs legacy: auto takes the graph only when measured faster (or unmeasured), "
                       "graph whenever it has a plan, legacy never: %d of %zu wrong", bad,
             sizeof cases / sizeof cases[0]);
}

void test_cuda_discovery(void) {
    char why[160] = "";
    int n = tb_cuda_device_count(why, sizeof why);
    printf("# CUDA devices visible: %d%s%s\n", n, n <= 0 ? ": " : "", n <= 0 ? why : "");
    if (n > 0) return; /* a GPU machine: nothing to check about its absence */
    TB_CHECK(why[0] != '\0', "no device: the reason is given");
    /* the machine a user without a GPU has: no NVIDIA kernel module */
    FILE *drv = fopen("/proc/driver/nvidia/version", "r");
    if (drv) fclose(drv);
    else
        TB_CHECK(strstr(why, "no GPU found: no NVIDIA driver is loaded") != NULL,
                 "no driver: the reason says so in those words: %s", why);
    char err[256] = "";
    tb_backend_opts bo = {.threads = 1};
    tb_backend *be = tb_backend_create("cuda", &bo, err, sizeof err);
    TB_CHECK(be == NULL && strstr(err, "--backend cuda") && !strchr(err, '\n'),
             "--backend cuda without a device: one line: %s", err);
    be = tb_backend_create("auto", &bo, err, sizeof err);
    TB_CHECK(be && strcmp(be->name, "cpu") == 0 && strstr(be->choice, "auto: cpu (") &&
                 strstr(be->choice, why) && !strchr(be->choice, '\n'),
             "--backend auto without a device picks the CPU and says why in one line: %s",
             be ? be->choice : "");
    if (be) be->destroy(be);
}

/* An on/off switch read by fn (cu_env_on_off): unset and empty give dflt,
 * on 1, off 0; `bad` is one line naming the variable and the two values,
 * never a silent default. */
static void check_on_off_env(const char *name, int (*fn)(void), int dflt, const char *bad_value) {
    const env_case ok[] = {{NULL, dflt}, {"", dflt}, {"off", 0}, {"on", 1}};
    char msg[512];
    check_env_values(name, fn, ok, sizeof ok / sizeof ok[0], "unset, '', off, on", bad_value, "on or off", msg,
                     sizeof msg);
    printf("# %s: unset/'' -> %s, off -> 0, on -> 1; %s -> '%.60s...'\n", name, dflt ? "on" : "off", bad_value, msg);
}

/* TB_WGRAD_STREAM (cuda_branch.c, off by default: one stream),
 * TB_CONVERT_MANY (cuda_convert_many.c) and TB_BN_RELU_MASK (cuda_bn.c),
 * both on by default. */
void test_branch_env(void) {
    check_on_off_env("TB_WGRAD_STREAM", cu_branch_from_env, 0, "yes");
    check_on_off_env("TB_CONVERT_MANY", cu_convert_many_from_env, 1, "0");
    check_on_off_env("TB_BN_RELU_MASK", cu_bn_mask_from_env, 1, "no");
}

/* convert_many's launches, as cuda_convert_many.c makes them: each
 * launch's items start at 0 and follow one another, none empty, under 2^31
 * elements in all; with check_elems, every element maps (cu_cvt_item_of,
 * cu_cvt_src_of: the kernel's own index math) to its item and to the
 * source element model/layout.h's 64-bit math gives. */
typedef struct {
    int launches, items, bad, check_elems;
    char why[200];
} cvt_seen;

static void cvt_bad(cvt_seen *s, const char *what, int q, unsigned i) {
    if (!s->bad++) snprintf(s->why, sizeof s->why, "launch %d: %s (item %d, element %u)", s->launches, what, q, i);
}

static void cvt_check(void *ctx, const cu_cvt_list *l) {
    cvt_seen *s = ctx;
    unsigned start = 0;
    if (l->k < 1 || l->k > CU_CVT_ITEMS) cvt_bad(s, "item count out of range", l->k, 0);
    for (int q = 0; q < l->k; q++) {
        if (l->it[q].start != start || !l->it[q].n) cvt_bad(s, "items not back to back, or empty", q, start);
        start += l->it[q].n;
    }
    if (start != l->total || (size_t)l->total >= ((size_t)1 << 31)) cvt_bad(s, "total wrong or past 2^31", l->k, 0);
    for (unsigned i = 0; s->check_elems && i < l->total; i++) {
        const int q = cu_cvt_item_of(l->it, l->k, i);
        const cu_cvt_item *t = &l->it[q];
        if (!(t->start <= i && i - t->start < t->n)) {
            cvt_bad(s, "element found in the wrong item", q, i);
            continue;
        }
        const unsigned j = i - t->start;
        int n, c, h, w;
        tb_layout_coords(t->dl, (int)t->C, (int)t->H, (int)t->W, j, &n, &c, &h, &w);
        size_t want = t->flat ? j : tb_layout_offset(t->sl, (int)t->C, (int)t->H, (int)t->W, n, c, h, w);
        if (cu_cvt_src_of(t, j) != want) cvt_bad(s, "source element differs from the 64-bit layout math", q, i);
    }
    s->launches++;
    s->items += l->k;
}

/* 70 small pairs in four kinds (a layout change, 1x1, the other way, no
 * change) with 6 empty ones among them: 2 launches (64 + 6 items), every
 * element mapped; three pairs of 2^30 - 1 elements: 2 launches (2 + 1: a
 * third would pass 2^31). A planted wrong start must fail the check. */
void test_convert_many_lists(void) {
    tb_tensor src[76], dst[76];
    static const int shapes[4][4] = {{8, 3, 3, 3}, {16, 8, 1, 1}, {4, 5, 6, 7}, {10, 10, 1, 1}};
    static const tb_layout from[4] = {TB_NCHW, TB_NCHW, TB_NHWC, TB_NHWC}, to[4] = {TB_NHWC, TB_NHWC, TB_NCHW, TB_NHWC};
    for (int p = 0; p < 76; p++) {
        const int k = p % 4, empty = p % 13 == 5;
        tb_tensor t = {(void *)(uintptr_t)(0x10000 + 0x100 * p), empty ? 0 : shapes[k][0], shapes[k][1], shapes[k][2],
                       shapes[k][3], TB_F32, from[k]};
        src[p] = t;
        dst[p] = t, dst[p].dtype = TB_BF16, dst[p].layout = to[k];
    }
    cvt_seen s = {0, 0, 0, 1, ""};
    int made = cu_convert_many_lists(src, dst, 76, cvt_check, &s);
    TB_CHECK(made == 2 && s.launches == 2 && s.items == 70 && !s.bad,
             "convert_many, 70 small pairs and 6 empty: %d launches of %d items (want 2 of 70), %d faults: %s", made,
             s.items, s.bad, s.why);
    for (int p = 0; p < 3; p++) {
        tb_tensor t = {(void *)(uintptr_t)(0x10000 + 0x100 * p), 1, 1, 1, (1 << 30) - 1, TB_F32, TB_NHWC};
        src[p] = dst[p] = t;
    }
    cvt_seen big = {0, 0, 0, 0, ""};
    made = cu_convert_many_lists(src, dst, 3, cvt_check, &big);
    TB_CHECK(made == 2 && big.items == 3 && !big.bad,
             "convert_many, three pairs of 2^30 - 1 elements: %d launches of %d items (want 2 of 3): %s", made,
             big.items, big.why);
    cu_cvt_list l;
    memset(&l, 0, sizeof l);
    l.k = 2, l.total = 10, l.it[0].n = 4, l.it[1].start = 5, l.it[1].n = 6; /* planted: a gap at element 4 */
    cvt_seen plant = {0, 0, 0, 0, ""};
    cvt_check(&plant, &l);
    TB_CHECK(plant.bad > 0, "a launch with a gap between its items is caught");
    printf("# convert_many: 70 pairs in 2 launches, every element mapped as the 64-bit layout math maps it; "
           "3 x (2^30 - 1) elements in 2 launches; a planted gap caught (%s)\n",
           plant.why);
}
#endif
