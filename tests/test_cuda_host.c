/* test_cuda_host.c - every host-side part of the GPU work, on any machine
 * (CI has no GPU): the layout index math and 16-bit formats the kernels
 * share with the host (model/layout.h), the CPU's convert, uint8 input and
 * resident-rows input ops (the references of the GPU's), the per-step
 * scalar block and the loss scaler's bookkeeping, the CPU event emulation
 * and memory accounting, the activation / gradient arena plan, and, in a
 * CUDA build, the cuDNN descriptor shapes of every conv node (descriptor
 * calls need no device), the own kernels' index math (max-pool tiling with
 * the tiled backward emulated against the CPU backend) and device
 * discovery without a device (those CUDA build checks in
 * test_cuda_host_descs.c and test_cuda_host_kernels.c). */
#include "tests/test_cuda_host.h"
#include "core/timer.h"

tb_rng g_rng;
int tb_test_failures, tb_test_checks; /* tb_test.h, shared with the other two files */

/* ---- layout index math --------------------------------------------------------------- */

static void test_layout_math(void) {
    int bad = 0;
    for (int trial = 0; trial < 40; trial++) {
        int N = 1 + (int)tb_rng_below(&g_rng, 4), C = 1 + (int)tb_rng_below(&g_rng, 9);
        int H = 1 + (int)tb_rng_below(&g_rng, 7), W = 1 + (int)tb_rng_below(&g_rng, 7);
        size_t n = (size_t)N * C * H * W;
        char *seen = calloc(n, 1);
        for (int l = 0; l < 2; l++) {
            memset(seen, 0, n);
            for (int a = 0; a < N; a++)
                for (int c = 0; c < C; c++)
                    for (int h = 0; h < H; h++)
                        for (int w = 0; w < W; w++) {
                            size_t o = tb_layout_offset((tb_layout)l, C, H, W, a, c, h, w);
                            size_t want = l == TB_NCHW ? (((size_t)a * C + c) * H + h) * W + w
                                                       : (((size_t)a * H + h) * W + w) * C + c;
                            int a2, c2, h2, w2;
                            tb_layout_coords((tb_layout)l, C, H, W, o, &a2, &c2, &h2, &w2);
                            if (o != want || o >= n || seen[o] || a2 != a || c2 != c || h2 != h ||
                                w2 != w || tb_layout_channel((tb_layout)l, C, (size_t)H * W, o) != c)
                                bad++;
                            if (o < n) seen[o] = 1;
                        }
        }
        free(seen);
    }
    TB_CHECK(bad == 0, "layout offset / coords / channel: %d mismatches", bad);
    /* the 32-bit twins the GPU's conversion and input kernels run below 2^31 elements: every element of small
     * shapes, then random indices and both ends of shapes just under 2^31 */
    int bad32 = 0;
    for (int trial = 0; trial < 60; trial++) {
        int big = trial >= 40;
        int C = big ? 1 + (int)tb_rng_below(&g_rng, 2048) : 1 + (int)tb_rng_below(&g_rng, 9);
        int H = big ? 1 + (int)tb_rng_below(&g_rng, 230) : 1 + (int)tb_rng_below(&g_rng, 7);
        int W = big ? 1 + (int)tb_rng_below(&g_rng, 230) : 1 + (int)tb_rng_below(&g_rng, 7);
        size_t per = (size_t)C * H * W, N = big ? (((size_t)1 << 31) - 1) / per : 1 + tb_rng_below(&g_rng, 4);
        size_t n = N * per;
        for (int l = 0; l < 2; l++)
            for (size_t k = 0; k < (big ? 20000 : n); k++) {
                size_t i = !big ? k : k == 0 ? 0 : k == 1 ? n - 1 : tb_rng_below(&g_rng, n);
                int a, c, h, w;
                uint32_t a2, c2, h2, w2;
                tb_layout_coords((tb_layout)l, C, H, W, i, &a, &c, &h, &w);
                tb_layout_coords32((tb_layout)l, (uint32_t)C, (uint32_t)H, (uint32_t)W, (uint32_t)i, &a2, &c2, &h2, &w2);
                if ((int)a2 != a || (int)c2 != c || (int)h2 != h || (int)w2 != w) bad32++;
                for (int sl = 0; sl < 2; sl++)
                    if (tb_layout_offset32((tb_layout)sl, (uint32_t)C, (uint32_t)H, (uint32_t)W, a2, c2, h2, w2) !=
                        tb_layout_offset((tb_layout)sl, C, H, W, a, c, h, w))
                        bad32++;
            }
    }
    TB_CHECK(bad32 == 0, "32-bit layout coords / offset against the 64-bit ones: %d mismatches", bad32);
    /* a conv weight [Cout=2,Cin=3,3,3] OHWI: element (o1,i2,h0,w1) at ((1*3+0)*3+1)*3+2 = 32 */
    TB_CHECK(tb_layout_offset(TB_NHWC, 3, 3, 3, 1, 2, 0, 1) == 32, "OHWI offset of (1,2,0,1)");
    printf("# layout math: 40 random shapes, both layouts, every element; the 32-bit twins on 40 more and 20 of "
           "just under 2^31 elements\n");
}

/* ---- 16-bit formats ------------------------------------------------------------------------ */

static void test_half_formats(void) {
    /* fixed points: values, ties to even, range ends */
    TB_CHECK(tb_f32_to_f16(1.0f) == 0x3c00 && tb_f32_to_f16(-2.0f) == 0xc000, "f16 of 1, -2");
    TB_CHECK(tb_f32_to_f16(65504.0f) == 0x7bff, "f16 max 65504");
    TB_CHECK(tb_f32_to_f16(65519.0f) == 0x7bff && tb_f32_to_f16(65520.0f) == 0x7c00,
             "f16: 65519 rounds down, 65520 (the tie above max) to Inf");
    TB_CHECK(tb_f32_to_f16(ldexpf(1, -24)) == 0x0001 && tb_f32_to_f16(ldexpf(1, -25)) == 0x0000 &&
                 tb_f32_to_f16(ldexpf(3, -26)) == 0x0001 && tb_f32_to_f16(ldexpf(3, -25)) == 0x0002,
             "f16 subnormals: 2^-24, the tie 2^-25 to 0, 3*2^-26 up, 3*2^-25 tie to even 2");
    TB_CHECK(tb_f32_to_f16(ldexpf(1, -14)) == 0x0400, "f16 smallest normal");
    TB_CHECK(tb_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00 &&
                 tb_f32_to_f16(1.0f + ldexpf(3, -11)) == 0x3c02,
             "f16 ties to even at 1 + 2^-11 and 1 + 3*2^-11");
    TB_CHECK((tb_f32_to_f16(NAN) & 0x7fff) > 0x7c00 && tb_f32_to_f16(-INFINITY) == 0xfc00 &&
                 tb_f32_to_f16(-0.0f) == 0x8000,
             "f16 NaN, -Inf, -0");
    TB_CHECK(tb_f32_to_bf16(1.0f + ldexpf(1, -8)) == 0x3f80 &&
                 tb_f32_to_bf16(1.0f + ldexpf(3, -8)) == 0x3f82,
             "bf16 ties to even at 1 + 2^-8 and 1 + 3*2^-8");
    TB_CHECK(tb_f32_to_bf16(3.0e38f) == 0x7f62 && tb_f32_to_bf16(3.4e38f) == 0x7f80,
             "bf16 near max: 3e38 finite, 3.4e38 rounds to Inf (got %04x, %04x)",
             tb_f32_to_bf16(3.0e38f), tb_f32_to_bf16(3.4e38f));
    TB_CHECK(isnan(tb_bf16_to_f32(tb_f32_to_bf16(NAN))), "bf16 NaN stays NaN");
    /* every 16-bit pattern survives to float and back */
    int bad16 = 0, badbf = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tb_f16_to_f32((uint16_t)h), b = tb_bf16_to_f32((uint16_t)h);
        if (!isnan(f) && tb_f32_to_f16(f) != h) bad16++;
        if (!isnan(b) && tb_f32_to_bf16(b) != h) badbf++;
    }
    TB_CHECK(bad16 == 0 && badbf == 0, "16-bit round trips: %d f16, %d bf16 patterns differ", bad16,
             badbf);
#ifdef __FLT16_MAX__
    /* against the compiler's own float -> _Float16 conversion (round to nearest even) */
    int badc = 0;
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)tb_rng_u64(&g_rng);
        float f;
        memcpy(&f, &u, 4);
        if (isnan(f)) continue;
        _Float16 r = (_Float16)f;
        uint16_t rb;
        memcpy(&rb, &r, 2);
        if (tb_f32_to_f16(f) != rb) badc++;
    }
    TB_CHECK(badc == 0, "f16 of 1e6 random floats vs _Float16: %d differ", badc);
    printf("# f16 rounding checked against _Float16 on 1e6 random bit patterns\n");
#endif
}

/* ---- the CPU's convert and input ops (the GPU kernels' references) -------------------------- */

static void test_cpu_convert(tb_backend *be) {
    const int N = 2, C = 5, H = 3, W = 4;
    const size_t n = (size_t)N * C * H * W;
    float *a = be->alloc(be, n * 4), *back = be->alloc(be, n * 4);
    uint16_t *h = be->alloc(be, n * 2);
    for (size_t i = 0; i < n; i++) a[i] = (float)(tb_rng_normal(&g_rng) * 100.0);
    tb_tensor ta = {a, N, C, H, W, TB_F32, TB_NCHW}, th = {h, N, C, H, W, TB_BF16, TB_NHWC};
    tb_tensor tback = {back, N, C, H, W, TB_F32, TB_NCHW};
    be->convert(be, &ta, &th, 0);
    int bad = 0;
    for (int x = 0; x < N; x++)
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int w = 0; w < W; w++) {
                    float src = a[tb_layout_offset(TB_NCHW, C, H, W, x, c, y, w)];
                    uint16_t got = h[tb_layout_offset(TB_NHWC, C, H, W, x, c, y, w)];
                    if (got != tb_f32_to_bf16(src)) bad++;
                }
    TB_CHECK(bad == 0, "convert f32 NCHW -> bf16 NHWC: %d elements differ", bad);
    be->convert(be, &th, &tback, 0);
    bad = 0;
    for (size_t i = 0; i < n; i++)
        if (back[i] != tb_bf16_to_f32(tb_f32_to_bf16(a[i]))) bad++;
    TB_CHECK(bad == 0, "convert bf16 NHWC -> f32 NCHW: %d elements differ", bad);
    /* accumulate: float sum, one rounding to the destination */
    be->convert(be, &th, &tback, 1);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float r = tb_bf16_to_f32(tb_f32_to_bf16(a[i]));
        if (back[i] != r + r) bad++;
    }
    TB_CHECK(bad == 0, "convert accumulate: %d elements differ", bad);
    tb_tensor t16 = th;
    t16.dtype = TB_F16;
    t16.layout = TB_NCHW;
    be->convert(be, &ta, &t16, 0);
    bad = 0;
    for (size_t i = 0; i < n; i++)
        if (h[i] != tb_f32_to_f16(a[i])) bad++;
    TB_CHECK(bad == 0, "convert f32 -> f16 (same layout): %d elements differ", bad);
    be->release(be, a), be->release(be, back), be->release(be, h);
}

/* input_u8 gives exactly what the loader's float path stores (data/transform.c). */
static void test_cpu_input(tb_backend *be) {
    const int N = 3, S = 7;
    size_t px = (size_t)S * S;
    uint8_t *u8 = be->alloc(be, (size_t)N * px * 3);
    uint8_t *rgbx = malloc(px * 4), flip[3] = {0, 1, 0};
    float *want = malloc((size_t)N * 3 * px * 4);
    float *got = be->alloc(be, (size_t)N * 3 * px * 4);
    for (int j = 0; j < N; j++) {
        for (size_t i = 0; i < px; i++) /* a flipped sample's reference is rendered mirrored */
            for (int c = 0; c < 4; c++) rgbx[4 * i + c] = (uint8_t)tb_rng_below(&g_rng, 256);
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++)
                for (int c = 0; c < 3; c++) {
                    int xs = flip[j] ? S - 1 - x : x;
                    u8[(((size_t)j * S + y) * S + xs) * 3 + c] = rgbx[4 * ((size_t)y * S + x) + c];
                }
        tb_sample_store(rgbx, S, TB_OUT_F32_NCHW, want, j);
    }
    tb_input_norm norm;
    memcpy(norm.mean, tb_imagenet_mean, sizeof norm.mean);
    memcpy(norm.std, tb_imagenet_std, sizeof norm.std);
    tb_tensor t = {got, N, 3, S, S, TB_F32, TB_NCHW};
    be->input_u8(be, u8, flip, &norm, &t);
    TB_CHECK(memcmp(got, want, (size_t)N * 3 * px * 4) == 0,
             "input_u8 (normalise + flip) is bit-identical to the loader's float path");
    be->release(be, u8), be->release(be, got);
    free(rgbx), free(want);
}

/* input_rows (the resident batch in one pass) against the path it
 * replaced: each row copied into a float32 NCHW staging tensor (copy_d2d),
 * then convert. Bit-identical in every dtype and layout, rows repeated,
 * out of order, in a consecutive run; 3 channels and 4 (a padded stem). */
static void test_cpu_input_rows(tb_backend *be) {
    static const tb_dtype dts[4] = {TB_F32, TB_BF16, TB_F16, TB_F64};
    enum { P = 9, N = 6 };
    const int32_t rows[N] = {4, 4, 0, 8, 1, 2};
    const int H = 5, W = 6;
    int bad = 0, combos = 0;
    for (int C = 3; C <= 4; C++) {
        size_t per = (size_t)C * H * W, n = (size_t)N * per;
        float *pool = be->alloc(be, (size_t)P * per * 4), *stage = be->alloc(be, n * 4);
        int32_t *drows = be->alloc(be, sizeof rows);
        for (size_t i = 0; i < (size_t)P * per; i++) pool[i] = (float)(tb_rng_normal(&g_rng) * 50.0);
        be->copy_h2d(be, drows, rows, sizeof rows);
        for (int d = 0; d < 4; d++)
            for (int l = 0; l < 2; l++) {
                size_t es = tb_dtype_size(dts[d]);
                char *old = be->alloc(be, n * es), *got = be->alloc(be, n * es);
                memset(old, 0x5a, n * es), memset(got, 0xa5, n * es); /* every element written */
                for (int i = 0; i < N; i++)
                    be->copy_d2d(be, stage + (size_t)i * per, pool + (size_t)rows[i] * per, per * 4);
                tb_tensor ts = {stage, N, C, H, W, TB_F32, TB_NCHW}, to = {old, N, C, H, W, dts[d], (tb_layout)l};
                be->convert(be, &ts, &to, 0);
                tb_tensor tg = to;
                tg.data = got;
                be->input_rows(be, pool, drows, &tg);
                if (memcmp(old, got, n * es) != 0) {
                    bad++;
                    printf("# input_rows C=%d -> %s %s differs from copy + convert\n", C,
                           tb_dtype_name(dts[d]), tb_layout_name((tb_layout)l));
                }
                combos++;
                be->release(be, old), be->release(be, got);
            }
        be->release(be, pool), be->release(be, stage), be->release(be, drows);
    }
    TB_CHECK(bad == 0, "input_rows == per-row copy + convert, bit for bit: %d of %d dtype x layout x C differ",
             bad, combos);
}

/* ---- step scalars and the loss scaler ------------------------------------------------------------ */

static void test_scalars(tb_backend *be) {
    TB_CHECK(offsetof(tb_step_scalars, lr) == 0 &&
                 offsetof(tb_step_scalars, grad_scale) == sizeof(tb_real),
             "host-set scalars come first (one copy covers them)");
    TB_CHECK(sizeof(tb_step_scalars) == 4 * sizeof(tb_real) + 16, "scalar block is %zu bytes",
             sizeof(tb_step_scalars));
    tb_step_scalars *sc = be->alloc(be, sizeof *sc);
    memset(sc, 0, sizeof *sc);
    sc->loss_scale = 1024;
    /* growth interval 3: three clean steps double the scale */
    for (int i = 0; i < 3; i++) be->loss_scale_update(be, sc, 3);
    TB_CHECK(sc->loss_scale == 2048 && sc->good_steps == 0 && sc->skipped_steps == 0,
             "3 clean steps at interval 3: scale %g good %d", (double)sc->loss_scale, sc->good_steps);
    be->loss_scale_update(be, sc, 3);
    float x[4] = {1, 2, INFINITY, 3};
    be->check_nonfinite(be, x, 2, sc);
    TB_CHECK(sc->found_inf == 0, "finite values leave found_inf alone");
    be->check_nonfinite(be, x, 4, sc);
    TB_CHECK(sc->found_inf == 1, "an Inf sets found_inf");
    be->check_nonfinite(be, x, 2, sc);
    TB_CHECK(sc->found_inf == 1, "check_nonfinite never clears found_inf");
    be->loss_scale_update(be, sc, 3);
    TB_CHECK(sc->loss_scale == 1024 && sc->good_steps == 0 && sc->skipped_steps == 1 &&
                 sc->found_inf == 0,
             "overflow: scale halves (%g), skipped %d, flag cleared", (double)sc->loss_scale,
             sc->skipped_steps);
    /* a doubling that would overflow keeps the scale (GradScaler's rule), and the count restarts */
    sc->loss_scale = 3e38f;
    for (int i = 0; i < 3; i++) be->loss_scale_update(be, sc, 3);
    TB_CHECK(sc->loss_scale == 3e38f && sc->good_steps == 0, "growth past FLT_MAX: scale %g good %d",
             (double)sc->loss_scale, sc->good_steps);
    be->release(be, sc);
}

/* ---- the CPU event emulation, pinned memory, accounting ---------------------------------------- */

static void test_cpu_events(tb_backend *be) {
    tb_stream *s = be->stream_create(be);
    TB_CHECK(s != NULL, "a second stream is distinct from the compute stream (NULL)");
    TB_CHECK(be->native_stream(be, s) == NULL && be->native_stream(be, NULL) == NULL,
             "no native stream on the CPU");
    tb_event *a = be->event_create(be, 1), *b = be->event_create(be, 1);
    TB_CHECK(be->native_event(be, a) == NULL, "no native event on the CPU");
    be->event_record(be, a, NULL);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    be->event_record(be, b, s);
    TB_CHECK(be->event_done(be, a) && be->event_done(be, b), "CPU events complete when recorded");
    double ms = be->event_elapsed_ms(be, a, b);
    TB_CHECK(ms >= 19.0 && ms < 2000.0, "elapsed between events: %.2f ms (slept 20)", ms);
    be->stream_wait(be, s, a);
    double h0 = tb_now();
    be->stream_hold(be, s, 500.0); /* nothing to hold: the CPU's ops run as called */
    be->event_record(be, a, s);
    TB_CHECK(be->event_done(be, a) && tb_now() - h0 < 0.25, "a held CPU stream: event done %d after %.3f s",
             be->event_done(be, a), tb_now() - h0);

    /* the test switch: a held event stays pending until waited for or released */
    tb_cpu_event_hold(be, 1);
    be->event_record(be, a, s);
    be->event_record(be, b, NULL);
    TB_CHECK(!be->event_done(be, a) && !be->event_done(be, b), "held events are pending");
    long forced = tb_cpu_event_forced_waits(be);
    be->event_wait(be, a);
    TB_CHECK(be->event_done(be, a) && !be->event_done(be, b) &&
                 tb_cpu_event_forced_waits(be) == forced + 1,
             "event_wait completes the event it waits for, and counts it");
    be->event_wait(be, a);
    TB_CHECK(tb_cpu_event_forced_waits(be) == forced + 1, "waiting on a complete event is free");
    tb_cpu_event_release(be);
    TB_CHECK(be->event_done(be, b), "release completes the rest");
    be->event_record(be, a, NULL);
    tb_cpu_event_hold(be, 0);
    TB_CHECK(be->event_done(be, a), "hold off releases pending events");
    be->event_record(be, b, NULL);
    TB_CHECK(be->event_done(be, b), "after hold off, events complete when recorded again");

    /* pinned host memory and the asynchronous upload */
    float *pin = be->host_alloc(be, 64 * 4), *dev = be->alloc(be, 64 * 4);
    for (int i = 0; i < 64; i++) pin[i] = (float)i;
    be->copy_h2d_async(be, dev, pin, 64 * 4, s);
    be->event_record(be, a, s);
    be->event_wait(be, a);
    TB_CHECK(memcmp(dev, pin, 64 * 4) == 0, "async upload from pinned memory");
    be->host_free(be, pin);
    be->release(be, dev);
    be->event_destroy(be, a);
    be->event_destroy(be, b);
    be->stream_destroy(be, s);

    tb_mem_info m0, m1, m2;
    be->memory(be, &m0);
    void *p = be->alloc(be, 3 << 20);
    be->memory(be, &m1);
    be->release(be, p);
    be->memory(be, &m2);
    TB_CHECK(m1.in_use == m0.in_use + (3u << 20) && m1.peak >= m1.in_use && m2.in_use == m0.in_use &&
                 m2.peak == m1.peak,
             "accounting: in use %zu -> %zu -> %zu, peak %zu", m0.in_use, m1.in_use, m2.in_use,
             m2.peak);
}

/* ---- the memory plan --------------------------------------------------------------------------- */

static size_t align256(size_t x) { return (x + 255) / 256 * 256; }

static void test_plan(void) {
    tb_resnet_config cfg;
    tb_resnet_config_init(&cfg, "resnet50", 1000);
    size_t act[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        tb_param_table pt = {0};
        tb_graph g = {0};
        g.max_batch = 32;
        g.dtype = k ? TB_BF16 : TB_F32;
        g.layout = k ? TB_NHWC : TB_NCHW;
        tb_resnet_build(&cfg, 224, 224, 1, &pt, &g);
        size_t want_res = 0, nbn = 0;
        for (int i = 0; i < g.nnodes; i++)
            if (g.nodes[i].kind == TB_NODE_BN) { /* what a cuDNN plan might ask: a ReLU bitmask */
                const tb_act *x = &g.acts[g.nodes[i].in];
                g.nodes[i].reserve_bytes = g.nodes[i].relu ? (size_t)32 * x->c * x->h * x->w / 8 + 3 : 0;
                want_res += align256(g.nodes[i].reserve_bytes);
                nbn++;
            }
        tb_graph_plan_memory(&g, &pt);
        size_t es = k ? 2 : 4, want_act = 0, want_state = 0;
        for (int a = 0; a < g.nacts; a++)
            want_act += align256((size_t)g.acts[a].c * g.acts[a].h * g.acts[a].w * es * 32);
        for (int i = 0; i < g.nnodes; i++)
            if (g.nodes[i].kind == TB_NODE_BN)
                want_state += align256(2 * pt.items[g.nodes[i].param].numel * sizeof(tb_real));
        TB_CHECK(g.act_bytes == want_act && g.bn_state_bytes == want_state &&
                     g.bn_reserve_bytes == want_res &&
                     g.act_arena_bytes == want_act + want_state + want_res,
                 "%s plan: activations %zu (want %zu), BN state %zu (%zu), reserve %zu (%zu)",
                 k ? "bf16" : "fp32", g.act_bytes, want_act, g.bn_state_bytes, want_state,
                 g.bn_reserve_bytes, want_res);
        /* nothing in the activation arena overlaps */
        int overlap = 0;
        size_t prev_end = 0;
        for (int a = 0; a < g.nacts; a++) {
            if (g.acts[a].data_offset < prev_end || g.acts[a].data_offset % 256) overlap++;
            prev_end = g.acts[a].data_offset + g.acts[a].bytes_per_sample * 32;
        }
        for (int i = 0; i < g.nnodes; i++) {
            if (g.nodes[i].kind != TB_NODE_BN) continue;
            size_t st = g.nodes[i].state_offset;
            if (st < prev_end || st % 256) overlap++;
            prev_end = st + align256(2 * pt.items[g.nodes[i].param].numel * sizeof(tb_real)) +
                       g.nodes[i].reserve_bytes;
        }
        TB_CHECK(overlap == 0 && prev_end <= g.act_arena_bytes,
                 "activation arena: %d overlaps or misalignments", overlap);
        TB_CHECK(g.grad_arena_bytes * 2 < g.grad_bytes_unplanned, "gradient plan saves over half");
        printf("# resnet50 224px batch 32 %s %s: activation arena %.1f MiB (%zu BN nodes, %.1f MiB "
               "state+reserve), gradient arena %.1f MiB (one per tensor: %.1f MiB)\n",
               tb_dtype_name(g.dtype), tb_layout_name(g.layout), g.act_arena_bytes / 1048576.0,
               nbn, (g.bn_state_bytes + g.bn_reserve_bytes) / 1048576.0,
               g.grad_arena_bytes / 1048576.0, g.grad_bytes_unplanned / 1048576.0);
        act[k] = g.act_bytes;
        tb_params_free(&pt);
        free(g.nodes);
        free(g.acts);
    }
    TB_CHECK(act[1] * 2 <= act[0] + 256 * 400 && act[1] * 2 >= act[0] - 256 * 400,
             "bf16 activations are half of fp32's (%zu vs %zu)", act[1], act[0]);
}

int main(void) {
    tb_rng_seed(&g_rng, 20250101, 7);
    tb_backend_opts bo = {.threads = 2};
    tb_backend *be = tb_cpu_backend_create(&bo);
    test_layout_math();
    test_half_formats();
    test_cpu_convert(be);
    test_cpu_input(be);
    test_cpu_input_rows(be);
    test_scalars(be);
    test_cpu_events(be);
    test_plan();
#ifdef TB_HAVE_CUDA
    test_cudnn_descs();
    test_linear_gemm_shapes();
    test_conv_pick();
    test_conv_pick_checked();
    test_conv_pad_rules();
    test_cgraph_tensors();
    test_cgraph_notes();
    test_take_graph();
    test_kernel_index_math();
    test_pool_tiling();
    test_pool_tiled_backward(be);
    test_bn_descs();
    test_bn_fallback_status();
    test_cuda_discovery();
    test_branch_env();
    test_convert_many_lists();
    test_bn_tune_rules();
#else
    printf("# this build has no CUDA backend: descriptor and discovery checks not built\n");
#endif
    be->destroy(be);
    return tb_test_exit("test_cuda_host");
}
