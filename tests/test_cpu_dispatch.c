/* test_cpu_dispatch.c - runtime CPU dispatch (core/cpu_dispatch.h):
 * the level rule (best, forced, refused in one line), and every level this
 * CPU has against the others and against plain scalar references:
 *   - the loader's resize passes (Pillow's 22-bit weights, exact) on many
 *     geometries, windows and flips; the output stores (normalise, pack);
 *   - whole loader epochs (train and eval, f32 NCHW / NHWC, u8), bit for bit;
 *   - the CPU backend's own loops (model/cpu/cpu_kern.h), bit for bit.
 * A level the CPU lacks is reported and not run (the rule is still tested
 * with made-up CPUs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cpu_dispatch.h"
#include "core/rng.h"
#include "data/loader.h"
#include "data/pixel_kern.h"
#include "data/resample.h"
#include "data/transform.h"
#include "tests/tb_test.h"
#include "tests/tb_test_jpeg.h"

int test_model_levels(const int *levels, int nlevels); /* test_cpu_dispatch_model.c */

static int g_levels[TB_ISA_NLEVELS], g_nlevels; /* the levels this CPU and binary run */

static void set_level(int lv) {
    char err[512];
    if (tb_cpu_level_set((tb_isa_level)lv, err, sizeof err) != 0) {
        printf("FAIL: cannot set level %s: %s\n", tb_cpu_isa_name((tb_isa_level)lv), err);
        exit(1);
    }
}

/* ---- the rule ----------------------------------------------------------------------- */

static void test_rule(void) {
    tb_cpu_features f;
    memset(&f, 0, sizeof f);
    strcpy(f.vendor, "GenuineIntel");
    f.avx = f.avx2 = f.fma = f.f16c = f.os_ymm = true; /* an AVX2 machine without AVX-512 */
    tb_isa_level lv = (tb_isa_level)-1;
    char err[512];
    int x86 = tb_cpu_level_built(TB_ISA_AVX2);
    TB_CHECK(tb_cpu_level_choose(NULL, &f, &lv, err, sizeof err) == 0 && lv == (x86 ? TB_ISA_AVX2 : TB_ISA_BASELINE),
             "unset: best level, got %d", (int)lv);
    TB_CHECK(tb_cpu_level_choose("auto", &f, &lv, err, sizeof err) == 0 && lv == (x86 ? TB_ISA_AVX2 : TB_ISA_BASELINE),
             "auto: best level");
    TB_CHECK(tb_cpu_level_choose("baseline", &f, &lv, err, sizeof err) == 0 && lv == TB_ISA_BASELINE, "baseline");
    if (x86)
        TB_CHECK(tb_cpu_level_choose("avx2", &f, &lv, err, sizeof err) == 0 && lv == TB_ISA_AVX2, "avx2 on avx2");
    int rc = tb_cpu_level_choose("avx512", &f, &lv, err, sizeof err);
    printf("# refused: %s\n", err);
    TB_CHECK(rc == -1 && strstr(err, "TB_CPU_LEVEL=avx512") && !strchr(err, '\n') &&
                 (!x86 || (strstr(err, "lacks avx512") && strstr(err, "level avx2"))),
             "avx512 on an AVX2 CPU: not refused in one line naming both: '%s'", err);
    rc = tb_cpu_level_choose("avx9", &f, &lv, err, sizeof err);
    TB_CHECK(rc == -1 && strstr(err, "avx9") && strstr(err, "baseline, avx2, avx512 or auto"),
             "unknown name: '%s'", err);
    f.os_ymm = false; /* the OS does not save ymm: no avx2 */
    rc = tb_cpu_level_choose("avx2", &f, &lv, err, sizeof err);
    TB_CHECK(rc == -1 && strstr(err, "level baseline"), "avx2 without OS ymm state: '%s'", err);

    /* this machine: every level up to the best runs, the next one is refused */
    tb_isa_level best = tb_cpu_isa_best(tb_cpu_features_get());
    for (int i = 0; i < TB_ISA_NLEVELS; i++)
        if (tb_cpu_level_built((tb_isa_level)i) && i <= (int)best) g_levels[g_nlevels++] = i;
    if ((int)best + 1 < TB_ISA_NLEVELS)
        TB_CHECK(tb_cpu_level_set((tb_isa_level)(best + 1), err, sizeof err) == -1, "level above the best accepted");
    char desc[256];
    set_level(g_levels[0]);
    tb_cpu_dispatch_describe(desc, sizeof desc);
    TB_CHECK(tb_cpu_level() == TB_ISA_BASELINE && strstr(desc, "baseline (forced"), "forced baseline: '%s'", desc);
    printf("# levels run here:");
    for (int i = 0; i < g_nlevels; i++) printf(" %s", tb_cpu_isa_name((tb_isa_level)g_levels[i]));
    printf(" (best %s)\n", tb_cpu_isa_name(best));
}

/* ---- the resize against a scalar reference --------------------------------------------- */

static uint8_t clip22(int64_t s) {
    s >>= TB_RESAMPLE_BITS;
    return (uint8_t)(s < 0 ? 0 : s > 255 ? 255 : s);
}

/* Pillow's two passes straight from the plan's weights (coef, first, taps). */
static void ref_resample(const uint8_t *src, int W, const tb_axis *ax, const tb_axis *ay, int flip, uint8_t *dst) {
    int rows = ay->in_hi - ay->in_lo;
    uint8_t *h = malloc((size_t)rows * ax->nout * 4);
    for (int r = 0; r < rows; r++)
        for (int x = 0; x < ax->nout; x++)
            for (int c = 0; c < 4; c++) {
                int64_t s = 1 << (TB_RESAMPLE_BITS - 1);
                for (int t = 0; t < ax->taps[x]; t++)
                    s += (int64_t)src[((size_t)(ay->in_lo + r) * W + ax->first[x] + t) * 4 + c] *
                         ax->coef[(size_t)x * ax->ksize + t];
                h[((size_t)r * ax->nout + x) * 4 + c] = ax->identity ? src[((size_t)(ay->in_lo + r) * W + ax->in_lo + x) * 4 + c] : clip22(s);
            }
    for (int y = 0; y < ay->nout; y++)
        for (int x = 0; x < ax->nout; x++)
            for (int c = 0; c < 4; c++) {
                int64_t s = 1 << (TB_RESAMPLE_BITS - 1);
                for (int t = 0; t < ay->taps[y]; t++)
                    s += (int64_t)h[((size_t)(ay->first[y] + t - ay->in_lo) * ax->nout + x) * 4 + c] *
                         ay->coef[(size_t)y * ay->ksize + t];
                int d = flip ? ax->nout - 1 - x : x;
                dst[((size_t)y * ax->nout + d) * 4 + c] =
                    ay->identity ? h[((size_t)(ay->in_lo + y - ay->in_lo) * ax->nout + x) * 4 + c] : clip22(s);
            }
    free(h);
}

static void test_resample_levels(void) {
    /* (input, box, output, window) per axis: down 1.0-7x, up, odd sizes,
     * windows, same size (identity), one output */
    const struct {
        int in;
        double b0, b1;
        int out, o0, n;
    } g[] = {
        {97, 0, 97, 40, 0, 40},     {61, 0, 61, 29, 0, 29},    {300, 12.5, 281.0, 224, 0, 224},
        {224, 0, 224, 224, 0, 224}, {250, 0, 250, 256, 16, 224}, {31, 0, 31, 67, 0, 67},
        {500, 3.25, 480.5, 56, 0, 56}, {129, 0, 129, 128, 5, 99}, {45, 1.5, 40.0, 1, 0, 1},
        {800, 0, 800, 113, 0, 113}, {17, 0, 17, 17, 3, 11},     {230, 0, 230, 225, 0, 225},
    };
    const int ng = (int)(sizeof g / sizeof g[0]);
    const int W = 800, H = 800;
    uint8_t *src = malloc((size_t)W * H * 4);
    tb_rng r;
    tb_rng_seed(&r, 31, 7);
    for (size_t i = 0; i < (size_t)W * H * 4; i++) src[i] = (uint8_t)tb_rng_below(&r, 256);
    /* a few saturated stretches, so clamping is exercised */
    for (size_t i = 0; i < (size_t)W * 40 * 4; i++) src[i] = (i / 4) % 3 ? 255 : 0;
    uint8_t *ref = malloc((size_t)1024 * 1024 * 4), *got = malloc((size_t)1024 * 1024 * 4), *tmp = NULL;
    size_t cap = 0;
    int cases = 0, bad = 0;
    for (int i = 0; i < ng; i++)
        for (int j = 0; j < ng; j++) {
            if ((i * 5 + j) % 3 && i != j) continue; /* a spread of pairs, not all 144 */
            tb_axis ax = {0}, ay = {0};
            tb_axis_plan(&ax, g[i].in, g[i].b0, g[i].b1, g[i].out, g[i].o0, g[i].n);
            tb_axis_plan(&ay, g[j].in, g[j].b0, g[j].b1, g[j].out, g[j].o0, g[j].n);
            for (int flip = 0; flip < 2; flip++) {
                ref_resample(src, W, &ax, &ay, flip, ref);
                for (int l = 0; l < g_nlevels; l++) {
                    set_level(g_levels[l]);
                    memset(got, 0xA5, (size_t)ax.nout * ay.nout * 4);
                    tb_resample_rgbx(src, W * 4, 0, 0, &ax, &ay, flip, got, ax.nout * 4, &tmp, &cap);
                    size_t n = (size_t)ax.nout * ay.nout * 4, d = 0;
                    for (size_t k = 0; k < n; k++) d += got[k] != ref[k];
                    if (d) {
                        bad++;
                        printf("  level %s: %d->%d (kpad %d) x %d->%d (taps <= %d) flip %d: %zu of %zu bytes differ\n",
                               tb_cpu_isa_name((tb_isa_level)g_levels[l]), g[i].in, ax.nout, ax.kpad, g[j].in,
                               ay.nout, ay.ksize, flip, d, n);
                    }
                    cases++;
                }
            }
            tb_axis_free(&ax);
            tb_axis_free(&ay);
        }
    printf("# resize: %d geometry x flip x level cases\n", cases);
    TB_CHECK(bad == 0 && cases > 40, "resize: %d of %d cases differ from Pillow's arithmetic", bad, cases);
    free(src);
    free(ref);
    free(got);
    free(tmp);
}

/* ---- the output stores -------------------------------------------------------------------- */

static void test_stores(void) {
    const size_t npx = 1031; /* every byte value in each channel, odd length for the tails */
    uint8_t *rgbx = malloc(npx * 4);
    for (size_t i = 0; i < npx * 4; i++) rgbx[i] = (uint8_t)((i * 37 + i / 4) % 256);
    float *want_p = malloc(npx * 3 * sizeof(float)), *want_h = malloc(npx * 3 * sizeof(float));
    uint8_t *want_u = malloc(npx * 3);
    for (size_t i = 0; i < npx; i++)
        for (int c = 0; c < 3; c++) {
            float x = (float)rgbx[4 * i + c] / 255.0f;
            want_p[c * npx + i] = want_h[3 * i + c] = (x - tb_imagenet_mean[c]) / tb_imagenet_std[c];
            want_u[3 * i + c] = rgbx[4 * i + c];
        }
    float *p = malloc((npx * 3 + 8) * sizeof(float)), *h = malloc((npx * 3 + 8) * sizeof(float));
    uint8_t *u = malloc(npx * 3 + 16);
    for (int l = 0; l < g_nlevels; l++) {
        const tb_pixel_kern *k = tb_pixel_kern_of(g_levels[l]);
        for (size_t n = npx - 3; n <= npx; n++) { /* lengths around the vector tails */
            memset(u, 0x5A, npx * 3 + 16);
            k->store_f32_planar(rgbx, n, tb_imagenet_mean, tb_imagenet_std, p, p + n, p + 2 * n);
            k->store_f32_packed(rgbx, n, tb_imagenet_mean, tb_imagenet_std, h);
            k->store_u8_packed(rgbx, n, u);
            int bp = 0, bh = 0, bu = 0;
            for (size_t i = 0; i < n; i++)
                for (int c = 0; c < 3; c++) {
                    bp += memcmp(&p[c * n + i], &want_p[c * npx + i], sizeof(float)) != 0;
                    bh += memcmp(&h[3 * i + c], &want_h[3 * i + c], sizeof(float)) != 0;
                    bu += u[3 * i + c] != want_u[3 * i + c];
                }
            int spill = 0;
            for (size_t i = 3 * n; i < npx * 3 + 16; i++) spill += u[i] != 0x5A;
            TB_CHECK(bp == 0 && bh == 0 && bu == 0 && spill == 0,
                     "level %s, %zu pixels: %d planar, %d packed floats, %d bytes differ; %d bytes written past the end",
                     tb_cpu_isa_name((tb_isa_level)g_levels[l]), n, bp, bh, bu, spill);
        }
    }
    free(rgbx);
    free(want_p);
    free(want_h);
    free(want_u);
    free(p);
    free(h);
    free(u);
}

/* ---- whole loader epochs ------------------------------------------------------------------ */

static uint8_t *epoch(tb_dataset *ds, int train, tb_out_format fmt, int S, size_t *len) {
    tb_loader_opts o;
    memset(&o, 0, sizeof o);
    o.ds = ds;
    o.batch = 5;
    o.image_size = S;
    o.train = train;
    o.threads = 2;
    o.prefetch = 2;
    o.world = 1;
    o.seed = 7;
    o.format = fmt;
    char err[256];
    tb_loader *ld = tb_loader_create(&o, err, sizeof err);
    if (!ld) {
        printf("FAIL: tb_loader_create: %s\n", err);
        exit(1);
    }
    size_t per = tb_sample_bytes(fmt, S), cap = per * (size_t)(ds->n + 5), n = 0;
    uint8_t *out = malloc(cap);
    tb_loader_start_epoch(ld, 1, 0);
    const tb_batch *b;
    while ((b = tb_loader_next(ld)) != NULL) {
        memcpy(out + n, b->images, per * (size_t)b->n);
        n += per * (size_t)b->n;
        tb_loader_release(ld, b);
    }
    tb_loader_destroy(ld);
    *len = n;
    return out;
}

static void test_loader_levels(void) {
    /* photos 90..420 px: DCT-scaled and full-scale crops, down and up scales */
    mkdir(tbj_path("lv"), 0777);
    FILE *f = fopen(tbj_path("lv.txt"), "w");
    const int ss[3] = {TJSAMP_420, TJSAMP_444, TJSAMP_422};
    for (int i = 0; i < 12; i++) {
        char name[64];
        snprintf(name, sizeof name, "lv/p%02d.jpg", i);
        tbj_write(tbj_path(name), 90 + (i * 67) % 331, 80 + (i * 53) % 300, ss[i % 3], 0, (uint64_t)i + 100);
        fprintf(f, "%s %d\n", name, i);
    }
    fclose(f);
    tb_dataset ds;
    tbj_open_list("lv.txt", &ds);
    const struct {
        int train;
        tb_out_format fmt;
        int S;
    } c[] = {{1, TB_OUT_F32_NCHW, 56}, {0, TB_OUT_F32_NCHW, 61}, {1, TB_OUT_F32_NHWC, 33}, {1, TB_OUT_U8_NHWC, 72}};
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        size_t n0 = 0;
        set_level(g_levels[0]);
        uint8_t *base = epoch(&ds, c[k].train, c[k].fmt, c[k].S, &n0);
        for (int l = 1; l < g_nlevels; l++) {
            set_level(g_levels[l]);
            size_t n = 0;
            uint8_t *got = epoch(&ds, c[k].train, c[k].fmt, c[k].S, &n);
            TB_CHECK(n == n0 && n0 > 0 && memcmp(got, base, n) == 0,
                     "loader %s S=%d format %d: level %s batches differ from baseline's (%zu vs %zu bytes)",
                     c[k].train ? "train" : "eval", c[k].S, (int)c[k].fmt, tb_cpu_isa_name((tb_isa_level)g_levels[l]),
                     n, n0);
            free(got);
        }
        free(base);
    }
    tb_dataset_close(&ds);
}

int main(void) {
    tbj_init();
    (void)tbj_make_list; /* this test makes its own, larger pictures */
    test_rule();
    test_resample_levels();
    test_stores();
    test_loader_levels();
    tb_test_failures += test_model_levels(g_levels, g_nlevels);
    tbj_cleanup();
    return tb_test_exit("cpu_dispatch");
}
