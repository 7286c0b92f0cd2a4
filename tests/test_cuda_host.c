/* test_cuda_host.c - every host-side part of the GPU work, on any machine
 * (CI has no GPU): the layout index math and 16-bit formats the kernels
 * share with the host (model/layout.h), the CPU's convert, uint8 input and
 * resident-rows input ops (the references of the GPU's), the per-step
 * scalar block and the loss scaler's bookkeeping, the CPU event emulation
 * and memory accounting, the activation / gradient arena plan, and, in a
 * CUDA build, the cuDNN descriptor shapes of every conv node (descriptor
 * calls need no device), the own kernels' index math (max-pool tiling with
 * the tiled backward emulated against the CPU backend) and device
 * discovery without a device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/loader.h"
#include "data/transform.h"
#include "model/cpu/cpu_backend.h"
#include "model/layout.h"
#include "model/model.h"
#include "core/rng.h"
#include "tests/tb_test.h"
#ifdef TB_HAVE_CUDA
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_index.h"
#include "model/cuda/cuda_internal.h"
#endif

static tb_rng g_rng;

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
    /* a conv weight [Cout=2,Cin=3,3,3] OHWI: element (o1,i2,h0,w1) at ((1*3+0)*3+1)*3+2 = 32 */
    TB_CHECK(tb_layout_offset(TB_NHWC, 3, 3, 3, 1, 2, 0, 1) == 32, "OHWI offset of (1,2,0,1)");
    printf("# layout math: 40 random shapes, both layouts, every element\n");
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

/* ---- CUDA host parts: descriptor shapes, discovery ------------------------------------------------ */

#ifdef TB_HAVE_CUDA
/* Calls visit for every conv node of resnet50 built at 224x224 (sz 0) and
 * 64x48 (sz 1), in NCHW then NHWC, with its input and output activations. */
typedef void (*conv_visit)(void *ctx, int sz, tb_layout l, const tb_node *nd, const tb_act *in, const tb_act *out);
static void each_resnet50_conv(conv_visit visit, void *ctx) {
    const int sizes[2][2] = {{224, 224}, {64, 48}};
    for (int sz = 0; sz < 2; sz++) {
        tb_resnet_config cfg;
        tb_resnet_config_init(&cfg, "resnet50", 10);
        tb_param_table pt = {0};
        tb_graph g = {0};
        tb_resnet_build(&cfg, sizes[sz][0], sizes[sz][1], 1, &pt, &g);
        for (int i = 0; i < g.nnodes; i++) {
            const tb_node *nd = &g.nodes[i];
            if (nd->kind != TB_NODE_CONV) continue;
            for (int l = 0; l < 2; l++) visit(ctx, sz, (tb_layout)l, nd, &g.acts[nd->in], &g.acts[nd->out]);
        }
        tb_params_free(&pt);
        free(g.nodes);
        free(g.acts);
    }
}

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

static void test_cudnn_descs(void) {
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

static void test_linear_gemm_shapes(void) {
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
static void test_conv_pick(void) {
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
static void test_conv_pick_checked(void) {
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

/* The own kernels' index math (cuda_index.h) against brute force. */
static void test_kernel_index_math(void) {
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
}

/* Max pooling's tiling (cuda_index.h): for every geometry the tiles cut
 * each axis into consecutive owned ranges, each tile's window range is
 * exactly the windows touching its inputs and fits the slots, the slots of
 * a tile are distinct, block indices decompose one to one (32 and 64 bits),
 * and the shared memory fits without opt-in. */
static void test_pool_tiling(void) {
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

static void test_pool_tiled_backward(tb_backend *be) {
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
static void test_bn_descs(void) {
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
static void test_bn_fallback_status(void) {
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

static void test_cgraph_tensors(void) {
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
static void test_cgraph_notes(void) {
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
static void test_take_graph(void) {
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

static void test_cuda_discovery(void) {
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
#endif

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
    test_cgraph_tensors();
    test_cgraph_notes();
    test_take_graph();
    test_kernel_index_math();
    test_pool_tiling();
    test_pool_tiled_backward(be);
    test_bn_descs();
    test_bn_fallback_status();
    test_cuda_discovery();
#else
    printf("# this build has no CUDA backend: descriptor and discovery checks not built\n");
#endif
    be->destroy(be);
    return tb_test_exit("test_cuda_host");
}
