/* mkdata.c - synthetic ImageFolder JPEG set with learnable classes (see
 * mkdata.h). Pixels from the class and image parameters, encoded with
 * TurboJPEG (4:2:0), written by several threads under OUT.tmp. */
#include "data/mkdata.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/rng.h"
#include "core/thread_start.h"
#include "data/jpeg.h"

#define TWO_PI 6.283185307179586
#define NOISE_IMAGENET (1.0f / 3.0f) /* --like imagenet's pixel noise: about 0.6 bytes per pixel at its mix */

typedef struct {
    float a[3], b[3];   /* stripe colours */
    double theta;       /* stripe orientation, radians */
    double period;      /* stripe period as a fraction of the shorter side */
    float shape[3];     /* shape colour */
    int kind;           /* 0 disc, 1 square, 2 triangle, 3 ring, 4 cross */
} class_look;

static class_look look_of(uint64_t seed, int cls) {
    tb_rng r;
    tb_rng_seed(&r, seed, 0xc1a55000ULL + (uint64_t)cls);
    class_look L;
    for (int c = 0; c < 3; c++) {
        L.a[c] = (float)(30 + 195 * tb_rng_uniform(&r));
        L.b[c] = (float)(30 + 195 * tb_rng_uniform(&r));
        L.shape[c] = (float)(20 + 215 * tb_rng_uniform(&r));
    }
    L.theta = tb_rng_uniform(&r) * 3.141592653589793;
    L.period = 0.04 + 0.11 * tb_rng_uniform(&r);
    L.kind = cls % 5;
    return L;
}

static int inside(int kind, double dx, double dy, double r) {
    switch (kind) {
    case 0: return dx * dx + dy * dy <= r * r;
    case 1: return fabs(dx) <= 0.8 * r && fabs(dy) <= 0.8 * r;
    case 2: {
        double yr = dy + r; /* apex at dy = -r, base at dy = r/2 */
        return yr >= 0 && yr <= 1.5 * r && fabs(dx) <= yr / 1.7320508075688772;
    }
    case 3: {
        double d2 = dx * dx + dy * dy;
        return d2 <= r * r && d2 >= 0.36 * r * r;
    }
    default: return (fabs(dx) <= 0.25 * r && fabs(dy) <= r) || (fabs(dy) <= 0.25 * r && fabs(dx) <= r);
    }
}

/* --like imagenet: the image's size, from a stream of its own (mkdata.h). */
static void imagenet_size(const tb_mkdata_opts *o, int cls, int index, int *w, int *h) {
    tb_rng r;
    tb_rng_seed(&r, o->seed, tb_hash2(0x51e5000ULL + (uint64_t)cls, (uint64_t)index));
    int longer = tb_rng_uniform(&r) < 0.75 ? 500 : 200 + (int)tb_rng_below(&r, 601);
    static const double aspect[5] = {4.0 / 3.0, 1.5, 1.0, 16.0 / 9.0, 1.25};
    static const double share[5] = {0.55, 0.15, 0.10, 0.10, 0.10};
    double u = tb_rng_uniform(&r), acc = 0, a = aspect[0];
    for (int k = 0; k < 5; k++)
        if (u < (acc += share[k])) {
            a = aspect[k];
            break;
        }
    int shorter = (int)(longer / a + 0.5);
    if (tb_rng_uniform(&r) < 0.25) *w = shorter, *h = longer;
    else *w = longer, *h = shorter;
}

tb_mkdata_coding tb_mkdata_coding_of(const tb_mkdata_opts *o, int cls, int index) {
    tb_mkdata_coding c = {o->quality, TJSAMP_420, 0};
    if (o->like != TB_MKDATA_IMAGENET) return c;
    tb_rng r;
    tb_rng_seed(&r, o->seed, tb_hash2(0xc0d1000ULL + (uint64_t)cls, (uint64_t)index));
    static const int qualities[4] = {75, 85, 90, 95};
    c.quality = qualities[tb_rng_below(&r, 4)];
    double u = tb_rng_uniform(&r);
    c.subsamp = u < 0.90 ? TJSAMP_420 : u < 0.96 ? TJSAMP_444 : u < 0.98 ? TJSAMP_422 : TJSAMP_GRAY;
    c.progressive = tb_rng_uniform(&r) < 0.01;
    return c;
}

static inline uint8_t clamp8(float v) { return (uint8_t)(v < 0.f ? 0 : v > 255.f ? 255 : (int)(v + 0.5f)); }

void tb_mkdata_image(const tb_mkdata_opts *o, int cls, int index, uint8_t **rgb_out, int *w_out, int *h_out) {
    class_look L = look_of(o->seed, cls);
    tb_rng r;
    tb_rng_seed(&r, o->seed, tb_hash2(0x1ea6e000ULL + (uint64_t)cls, (uint64_t)index));
    int W, H;
    if (o->like == TB_MKDATA_IMAGENET) {
        imagenet_size(o, cls, index, &W, &H);
    } else {
        int span = o->max_side - o->min_side + 1;
        W = o->min_side + (int)tb_rng_below(&r, (uint64_t)span);
        H = o->min_side + (int)tb_rng_below(&r, (uint64_t)span);
    }
    int shorter = W < H ? W : H;
    double theta = L.theta + (tb_rng_uniform(&r) - 0.5) * 0.3;
    double period = L.period * (0.85 + 0.3 * tb_rng_uniform(&r)) * shorter;
    double phase = tb_rng_uniform(&r) * TWO_PI;
    float gain = (float)(0.8 + 0.4 * tb_rng_uniform(&r)), shift[3];
    for (int c = 0; c < 3; c++) shift[c] = (float)(30 * tb_rng_uniform(&r) - 15);
    double light = tb_rng_uniform(&r) * TWO_PI, diag = sqrt((double)W * W + (double)H * H);
    double kx = cos(theta) * TWO_PI / period, ky = sin(theta) * TWO_PI / period;
    double lx = cos(light) * 0.3 / diag, ly = sin(light) * 0.3 / diag;

    /* --like imagenet: more fine detail (pixel noise), so that the files
     * hold about as many bytes per pixel as photographs do (mkdata.h) */
    const float noise_gain = o->like == TB_MKDATA_IMAGENET ? NOISE_IMAGENET : 1.0f / 16.0f;
    uint8_t *px = malloc((size_t)W * H * 3);
    if (!px) TB_FATAL("out of host memory");
    for (int y = 0; y < H; y++) {
        uint8_t *row = px + (size_t)y * W * 3;
        for (int x = 0; x < W; x++) {
            float t = (float)(0.5 + 0.5 * sin(kx * x + ky * y + phase));
            float lit = gain * (float)(0.85 + lx * (x - W / 2) + ly * (y - H / 2));
            uint64_t bits = tb_rng_u64(&r);
            for (int c = 0; c < 3; c++) {
                float v = (L.a[c] + (L.b[c] - L.a[c]) * t) * lit + shift[c];
                float noise = (float)((int)(bits & 0xff) + (int)((bits >> 8) & 0xff) - 255) * noise_gain;
                bits >>= 16;
                row[3 * x + c] = clamp8(v + noise);
            }
        }
    }
    int nshapes = 1 + (int)tb_rng_below(&r, 3);
    for (int s = 0; s < nshapes; s++) {
        double rad = (0.12 + 0.18 * tb_rng_uniform(&r)) * shorter;
        double cx = tb_rng_uniform(&r) * W, cy = tb_rng_uniform(&r) * H;
        int x0 = (int)fmax(0, cx - rad), x1 = (int)fmin(W - 1, cx + rad);
        int y0 = (int)fmax(0, cy - rad), y1 = (int)fmin(H - 1, cy + rad);
        for (int y = y0; y <= y1; y++)
            for (int x = x0; x <= x1; x++)
                if (inside(L.kind, x - cx, y - cy, rad)) {
                    uint8_t *p = px + ((size_t)y * W + x) * 3;
                    for (int c = 0; c < 3; c++) p[c] = clamp8(L.shape[c] * gain + shift[c] + (float)(p[c] & 7) - 3.5f);
                }
    }
    *rgb_out = px;
    *w_out = W;
    *h_out = H;
}

static int digits(int n) {
    int d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

void tb_mkdata_class_name(const tb_mkdata_opts *o, int cls, char *buf, size_t len) {
    int d = digits(o->classes - 1); /* 1..10 */
    snprintf(buf, len, "class_%0*d", d < 3 ? 3 : d > 10 ? 10 : d, cls);
}

void tb_mkdata_file_name(const tb_mkdata_opts *o, int index, char *buf, size_t len) {
    int d = digits(o->per_class - 1); /* 1..10 */
    snprintf(buf, len, "img_%0*d.jpg", d < 6 ? 6 : d > 10 ? 10 : d, index);
}

/* ---- writing -------------------------------------------------------------------- */

typedef struct {
    const tb_mkdata_opts *o;
    const char *tmpdir;
    pthread_mutex_t mu;
    int64_t next, total, bytes, pixels;
    char err[512]; /* first write error */
} write_job;

static void *write_worker(void *arg) {
    write_job *job = arg;
    const tb_mkdata_opts *o = job->o;
    /* two handles: TurboJPEG 2.1 keeps a progressive encode's settings in
     * its handle (optimized Huffman tables), and a baseline file encoded
     * after it with the same handle got those tables over data coded with
     * the standard ones: a header that parses over a corrupt bitstream */
    tjhandle tj = tjInitCompress(), tj_prog = tjInitCompress();
    if (!tj || !tj_prog) TB_FATAL("TurboJPEG: tjInitCompress: %s", tjGetErrorStr2(NULL));
    /* one output buffer big enough for the largest image, never reallocated */
    int side = o->like == TB_MKDATA_IMAGENET ? 800 : o->max_side;
    unsigned long cap = tjBufSize(side, side, TJSAMP_444);
    unsigned char *jpg = tjAlloc((int)cap);
    if (cap == (unsigned long)-1 || !jpg) TB_FATAL("TurboJPEG: cannot allocate a %lu-byte JPEG buffer", cap);
    int64_t bytes = 0, pixels = 0;
    for (;;) {
        pthread_mutex_lock(&job->mu);
        int64_t k = job->err[0] ? job->total : job->next++;
        pthread_mutex_unlock(&job->mu);
        if (k >= job->total) break;
        int cls = (int)(k / o->per_class), idx = (int)(k % o->per_class);
        uint8_t *rgb;
        int w, h;
        tb_mkdata_image(o, cls, idx, &rgb, &w, &h);
        unsigned long size = cap;
        tb_mkdata_coding cd = tb_mkdata_coding_of(o, cls, idx);
        tjhandle th = cd.progressive ? tj_prog : tj;
        TJ_CHECK(th, tjCompress2(th, rgb, w, 0, h, TJPF_RGB, &jpg, &size, cd.subsamp, cd.quality,
                                 TJFLAG_NOREALLOC | (cd.progressive ? TJFLAG_PROGRESSIVE : 0)));
        free(rgb);
        char cname[64], fname[64], path[4200];
        tb_mkdata_class_name(o, cls, cname, sizeof cname);
        tb_mkdata_file_name(o, idx, fname, sizeof fname);
        snprintf(path, sizeof path, "%s/%s/%s", job->tmpdir, cname, fname);
        FILE *f = fopen(path, "wb");
        int ok = f && fwrite(jpg, 1, size, f) == size;
        if (f && fclose(f) != 0) ok = 0;
        if (!ok) {
            pthread_mutex_lock(&job->mu);
            if (!job->err[0]) snprintf(job->err, sizeof job->err, "cannot write %.400s: %.80s", path, strerror(errno));
            pthread_mutex_unlock(&job->mu);
            break;
        }
        bytes += (int64_t)size;
        pixels += (int64_t)w * h;
    }
    tjFree(jpg);
    tjDestroy(tj);
    tjDestroy(tj_prog);
    pthread_mutex_lock(&job->mu);
    job->bytes += bytes;
    job->pixels += pixels;
    pthread_mutex_unlock(&job->mu);
    return NULL;
}

int tb_mkdata_write(const tb_mkdata_opts *o, int64_t *bytes_written, int64_t *pixels, char *err, size_t errlen) {
    struct stat st;
    char tmp[4200], out[4096];
    snprintf(out, sizeof out, "%s", o->out);
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/') out[--len] = '\0'; /* DIR/ is DIR (its temporary is DIR.tmp) */
    if (stat(out, &st) == 0) {
        snprintf(err, errlen, "%s already exists; remove it or choose another --out", out);
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    if (stat(tmp, &st) == 0) {
        snprintf(err, errlen, "%s exists (left by an interrupted mkdata?); remove it first", tmp);
        return -1;
    }
    if (mkdir(tmp, 0777) != 0) {
        int e = errno;
        snprintf(err, errlen, "cannot create %s (the set is written there, then renamed to %s): %s; %s", tmp, out,
                 strerror(e), e == ENOENT ? "create its parent directory first, or choose another --out"
                              : "choose another --out, in a directory you can write");
        return -1;
    }
    for (int c = 0; c < o->classes; c++) {
        char cname[64], dir[4300];
        tb_mkdata_class_name(o, c, cname, sizeof cname);
        snprintf(dir, sizeof dir, "%s/%s", tmp, cname);
        if (mkdir(dir, 0777) != 0) {
            snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
            return -1;
        }
    }
    write_job job;
    memset(&job, 0, sizeof job);
    job.o = o;
    job.tmpdir = tmp;
    job.total = (int64_t)o->classes * o->per_class;
    pthread_mutex_init(&job.mu, NULL);
    int threads = o->threads;
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c < 1 ? 1 : (int)c;
    }
    pthread_t *tid = malloc((size_t)threads * sizeof *tid);
    if (!tid) TB_FATAL("out of host memory");
    for (int t = 0; t < threads; t++) {
        tb_thread_start(&tid[t], NULL, write_worker, &job, "an mkdata writer thread");
    }
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    free(tid);
    pthread_mutex_destroy(&job.mu);
    if (job.err[0]) {
        snprintf(err, errlen, "%s (the partial set is left in %s)", job.err, tmp);
        return -1;
    }
    if (rename(tmp, out) != 0) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, out, strerror(errno));
        return -1;
    }
    if (bytes_written) *bytes_written = job.bytes;
    if (pixels) *pixels = job.pixels;
    return 0;
}
