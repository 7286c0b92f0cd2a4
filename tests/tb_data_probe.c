/* tb_data_probe.c - exposes trainbench's data path to the Python reference
 * tests (tests/data_ref.py) and bench/loader_psnr.py, one line per request:
 *
 *   tb_data_probe boxes
 *       stdin:  H W N u1 .. uN          (uniform draws in [0,1))
 *       stdout: top left height width flip   (tb_geometry_train on those draws)
 *   tb_data_probe render S
 *       stdin:  FILE MODE GEOM FMT OUT  with MODE fast|fast-all|partial|full, GEOM
 *               "eval" or "TOP,LEFT,H,W,FLIP", FMT u8 (HWC bytes) or f32
 *               (NCHW float32, normalised); MODE gpu: the --decode gpu path
 *               (nvJPEG on CUDA device 0, the crop and resize kernels; what
 *               it does not take rendered as the loader does, by the CPU
 *               path with decode partial), gpu-emulated: the same on the host
 *               emulation of the GPU decoder
 *       stdout: "ok SCALE_NUM DEC_W DEC_H" (OUT written) or "bad REASON"; for
 *               the gpu modes "ok 8 W H gpu" or "ok 8 W H cpu REASON"
 *   tb_data_probe index PATH
 *       stdout: LABEL<TAB>RELPATH per sample, then "# classes<TAB>NAME..." and
 *               "# skipped EXT LOOSE OTHER"
 *   tb_data_probe loader PATH S train|eval THREADS BATCH WORLD RANK SEED EPOCHS MODE [strict]
 *       stdout: "batch EPOCH STEP N LABEL.. CRC" per batch, then
 *               "stats IMAGES SKIPPED" and "bad PATH: REASON" lines */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "data/dataset.h"
#include "data/gpu_decode.h"
#include "data/loader.h"
#include "data/transform.h"

typedef struct {
    const double *u;
    int n, k;
} draws;

static double next_draw(void *ctx) {
    draws *d = ctx;
    if (d->k >= d->n) TB_FATAL("tb_data_probe: more draws needed than the %d given", d->n);
    return d->u[d->k++];
}

static int cmd_boxes(void) {
    int H, W, N;
    while (scanf("%d %d %d", &H, &W, &N) == 3) {
        double *u = malloc((size_t)N * sizeof *u);
        for (int i = 0; i < N; i++)
            if (scanf("%lf", &u[i]) != 1) TB_FATAL("tb_data_probe boxes: short line");
        draws d = {u, N, 0};
        tb_geometry g = tb_geometry_train(H, W, 224, next_draw, &d);
        printf("%d %d %d %d %d\n", g.clip.top, g.clip.left, g.clip.height, g.clip.width, g.flip);
        free(u);
    }
    return 0;
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* The --decode gpu path for one sample: "gpu" when the GPU decoded it
 * (rgbx filled, flip applied here as the device's input op would), else
 * "cpu" and the reason, and the caller renders it on the CPU. */
static tb_gpu_decoder *g_gpu;
static uint8_t *g_dev;

static const char *render_gpu(tb_sampler *sp, int emulate, const uint8_t *buf, size_t len, int train, int S,
                              const tb_geometry *gp, uint8_t *rgbx, char *why, size_t whylen) {
    if (!g_gpu) {
        char err[512];
        tb_gpu_decoder_opts o = tb_gpu_decoder_defaults(-1, 1, S);
        o.emulate = emulate;
        g_gpu = tb_gpu_decoder_create(&o, err, sizeof err);
        if (!g_gpu) TB_FATAL("tb_data_probe: %s", err);
        g_dev = tb_gpu_decoder_alloc(g_gpu, (size_t)3 * S * S);
        if (!g_dev) TB_FATAL("tb_data_probe: out of device memory");
        fprintf(stderr, "# tb_data_probe: %s\n", tb_gpu_decoder_describe(g_gpu));
    }
    tb_sample_plan_info pi;
    char err[512];
    if (tb_sample_plan(sp, buf, len, train, S, NULL, NULL, gp, &pi, err, sizeof err) != 0) {
        snprintf(why, whylen, "plan: %.200s", err);
        return "cpu";
    }
    if (!tb_gpu_decodable(&pi.fmt, why, whylen)) return "cpu";
    tb_gpu_job job;
    memset(&job, 0, sizeof job);
    job.jpeg = buf;
    job.len = len;
    job.width = pi.width;
    job.height = pi.height;
    job.g = pi.g;
    job.g.flip = 0;
    tb_gpu_decode_batch(g_gpu, &job, 1, g_dev, NULL, NULL, 0, 0, NULL);
    if (job.status != 0) {
        snprintf(why, whylen, "%s", job.why);
        return "cpu";
    }
    uint8_t *rgb = malloc((size_t)3 * S * S);
    tb_gpu_decoder_download(g_gpu, rgb, g_dev, (size_t)3 * S * S);
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++) {
            int xs = pi.g.flip ? S - 1 - x : x;
            memcpy(rgbx + ((size_t)y * S + x) * 4, rgb + ((size_t)y * S + xs) * 3, 3);
            rgbx[((size_t)y * S + x) * 4 + 3] = 0;
        }
    free(rgb);
    return "gpu";
}

static int cmd_render(int S) {
    char file[4096], mode[32], geom[128], fmt[16], out[4096];
    tb_sampler *sp = tb_sampler_create();
    uint8_t *rgbx = malloc((size_t)4 * S * S), *rgb = malloc((size_t)3 * S * S);
    float *f32 = malloc((size_t)3 * S * S * sizeof *f32);
    while (scanf("%4095s %31s %127s %15s %4095s", file, mode, geom, fmt, out) == 5) {
        int gpu = strcmp(mode, "gpu") == 0 || strcmp(mode, "gpu-emulated") == 0;
        tb_decode_mode m = strcmp(mode, "full") == 0       ? TB_DECODE_FULL
                           : strcmp(mode, "partial") == 0  ? TB_DECODE_PARTIAL
                           : strcmp(mode, "fast-all") == 0 ? TB_DECODE_FAST_ALL
                                                           : TB_DECODE_FAST;
        tb_geometry g, *gp = NULL;
        int train = 0;
        if (strcmp(geom, "eval") != 0) {
            tb_box b;
            int flip;
            if (sscanf(geom, "%d,%d,%d,%d,%d", &b.top, &b.left, &b.height, &b.width, &flip) != 5)
                TB_FATAL("tb_data_probe render: bad geometry '%s'", geom);
            g = tb_geometry_from_box(b, S, flip);
            gp = &g;
            train = 1;
        }
        size_t len = 0;
        uint8_t *buf = slurp(file, &len);
        char err[512] = "cannot read file", why[256] = "";
        tb_render_info info;
        memset(&info, 0, sizeof info);
        const char *path = NULL;
        int rc = -1;
        if (buf && gpu) {
            path = render_gpu(sp, strcmp(mode, "gpu-emulated") == 0, buf, len, train, S, gp, rgbx, why, sizeof why);
            if (strcmp(path, "gpu") == 0) {
                rc = 0;
                info.scale_num = 8;
            } else { /* as the loader: the CPU path, decode partial */
                m = TB_DECODE_PARTIAL;
            }
        }
        if (buf && rc != 0)
            rc = tb_sample_render(sp, buf, len, m, train, S, NULL, NULL, gp, rgbx, &info, err, sizeof err);
        free(buf);
        if (rc != 0) {
            printf("bad %s\n", err);
            fflush(stdout);
            continue;
        }
        FILE *f = fopen(out, "wb");
        if (!f) TB_FATAL("tb_data_probe: cannot write %s", out);
        if (strcmp(fmt, "f32") == 0) {
            tb_sample_store(rgbx, S, TB_OUT_F32_NCHW, f32, 0);
            fwrite(f32, sizeof *f32, (size_t)3 * S * S, f);
        } else {
            tb_sample_store(rgbx, S, TB_OUT_U8_NHWC, rgb, 0);
            fwrite(rgb, 1, (size_t)3 * S * S, f);
        }
        fclose(f);
        if (path)
            printf("ok %d %d %d %s%s%s\n", info.scale_num, info.dec_w, info.dec_h, path, why[0] ? " " : "", why);
        else
            printf("ok %d %d %d\n", info.scale_num, info.dec_w, info.dec_h);
        fflush(stdout);
    }
    free(rgbx);
    free(rgb);
    free(f32);
    tb_sampler_destroy(sp);
    if (g_gpu) {
        tb_gpu_decoder_free(g_gpu, g_dev);
        tb_gpu_decoder_destroy(g_gpu);
    }
    return 0;
}

static int cmd_index(const char *path) {
    tb_dataset ds;
    char err[1024];
    if (tb_dataset_open(path, &ds, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    for (int64_t i = 0; i < ds.n; i++) printf("%d\t%s\n", ds.labels[i], tb_dataset_relpath(&ds, i));
    printf("# classes");
    for (int c = 0; c < ds.classes; c++) printf("\t%s", ds.class_names[c]);
    printf("\n# skipped %lld %lld %lld\n", (long long)ds.skipped_ext, (long long)ds.skipped_loose,
           (long long)ds.skipped_other);
    tb_dataset_close(&ds);
    return 0;
}

static uint32_t crc32_bytes(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static int cmd_loader(int argc, char **argv) {
    if (argc < 10) TB_FATAL("tb_data_probe loader: expected PATH S train|eval THREADS BATCH WORLD RANK SEED EPOCHS MODE");
    tb_dataset ds;
    char err[1024];
    if (tb_dataset_open(argv[0], &ds, err, sizeof err) != 0) tb_die("%s", err);
    tb_loader_opts o;
    memset(&o, 0, sizeof o);
    o.ds = &ds;
    o.image_size = atoi(argv[1]);
    o.train = strcmp(argv[2], "train") == 0;
    o.threads = atoi(argv[3]);
    o.batch = atoi(argv[4]);
    o.world = atoi(argv[5]);
    o.rank = atoi(argv[6]);
    o.seed = (uint64_t)atoll(argv[7]);
    int epochs = atoi(argv[8]);
    o.decode = strcmp(argv[9], "full") == 0 ? TB_DECODE_FULL : strcmp(argv[9], "partial") == 0 ? TB_DECODE_PARTIAL
                                                                                               : TB_DECODE_FAST;
    o.strict = argc > 10 && strcmp(argv[10], "strict") == 0;
    o.prefetch = 3;
    o.format = TB_OUT_U8_NHWC;
    tb_loader *ld = tb_loader_create(&o, err, sizeof err);
    if (!ld) tb_die("%s", err);
    size_t per = tb_sample_bytes(o.format, o.image_size);
    for (int e = 0; e < epochs; e++) {
        tb_loader_start_epoch(ld, e, 0);
        const tb_batch *b;
        while ((b = tb_loader_next(ld)) != NULL) {
            printf("batch %d %lld %d", e, (long long)b->step, b->n);
            for (int i = 0; i < b->n; i++) printf(" %d", b->labels[i]);
            printf(" %08x\n", crc32_bytes(b->images, per * (size_t)b->n));
            tb_loader_release(ld, b);
        }
    }
    tb_loader_stats st;
    tb_loader_get_stats(ld, &st);
    printf("stats %lld %lld\n", (long long)st.images, (long long)st.skipped);
    for (int k = 0; k < 3 && st.first_bad[k][0]; k++) printf("bad %s\n", st.first_bad[k]);
    tb_loader_destroy(ld);
    tb_dataset_close(&ds);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "boxes") == 0) return cmd_boxes();
    if (argc >= 3 && strcmp(argv[1], "render") == 0) return cmd_render(atoi(argv[2]));
    if (argc >= 3 && strcmp(argv[1], "index") == 0) return cmd_index(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "loader") == 0) return cmd_loader(argc - 2, argv + 2);
    fprintf(stderr, "usage: tb_data_probe boxes | render S | index PATH | loader ...\n");
    return 2;
}
