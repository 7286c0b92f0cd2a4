/* synthetic.c - class-patterned random images (see synthetic.h). */
#include "data/synthetic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/rng.h"

/* A smooth pattern: a sum of 4 random plane waves per channel,
 * cos(fy*y + ph + fx*x) = cos(a)cos(b) - sin(a)sin(b) with a = fy*y + ph and
 * b = fx*x, so each wave costs O(h + w) trigonometry, not O(h * w). */
static void class_pattern(float *dst, int h, int w, uint64_t seed, int cls) {
    tb_rng r;
    tb_rng_seed(&r, seed, 0x5e7000000ULL + (uint64_t)cls);
    double *ca = malloc((size_t)(h + w) * 2 * sizeof *ca);
    if (!ca) TB_FATAL("out of host memory");
    double *sa = ca + h, *cb = sa + h, *sb = cb + w;
    for (int c = 0; c < 3; c++) {
        float *p = dst + (size_t)c * h * w;
        memset(p, 0, (size_t)h * w * sizeof *p);
        for (int k = 0; k < 4; k++) {
            double fy = (tb_rng_uniform(&r) * 4.0 - 2.0) * 6.283185307179586 / h;
            double fx = (tb_rng_uniform(&r) * 4.0 - 2.0) * 6.283185307179586 / w;
            double ph = tb_rng_uniform(&r) * 6.283185307179586;
            for (int y = 0; y < h; y++) {
                ca[y] = 0.5 * cos(fy * y + ph);
                sa[y] = 0.5 * sin(fy * y + ph);
            }
            for (int x = 0; x < w; x++) {
                cb[x] = cos(fx * x);
                sb[x] = sin(fx * x);
            }
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) p[y * w + x] += (float)(ca[y] * cb[x] - sa[y] * sb[x]);
        }
    }
    free(ca);
}

/* Noise of standard deviation 0.7: the sum of the four 16-bit parts of one
 * draw (Irwin-Hall, n = 4: near-Gaussian, bounded at 3.46 sigma), centred.
 * One draw and no transcendental per pixel: Box-Muller (a log, a sqrt and a
 * cos in double) made a 224 px bench row's pool in 6.1 s on one core, this
 * in 1.1 s (results/startup_pool_cpu.md). The sum is exact in float. */
static inline float pixel_noise(tb_rng *r) {
    uint64_t u = tb_rng_u64(r);
    int32_t s = (int32_t)(u & 0xffff) + (int32_t)(u >> 16 & 0xffff) + (int32_t)(u >> 32 & 0xffff) +
                (int32_t)(u >> 48);
    /* the sum's standard deviation: 65536 / sqrt(3) (4 uniforms of variance 65536^2 / 12) */
    const float scale = (float)(0.7 * 1.7320508075688772 / 65536.0);
    return (float)(s - 131070) * scale; /* the mean: 4 * 65535 / 2 */
}

/* The class of pool sample i: the first draw of its own generator. */
static int sample_class(uint64_t seed, int i, int classes, tb_rng *r) {
    tb_rng_seed(r, seed, 0x5a3000000ULL + (uint64_t)i);
    return (int)tb_rng_below(r, (uint64_t)classes);
}

/* The pool's samples order[first..last), of one class, from its pattern. */
static void fill_class(tb_synthetic *s, const int *order, int first, int last, const float *proto) {
    size_t plane = (size_t)3 * s->h * s->w;
    for (int j = first; j < last; j++) {
        int i = order[j];
        tb_rng r;
        (void)sample_class(s->seed, i, s->classes, &r); /* the draws that follow, as they were made */
        float contrast = (float)(0.5 + tb_rng_uniform(&r));
        float *dst = s->images + (size_t)i * plane;
        for (size_t k = 0; k < plane; k++)
            dst[k] = contrast * proto[k] + pixel_noise(&r);
    }
}

void tb_synthetic_init(tb_synthetic *s, int classes, int h, int w, int pool, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->classes = classes;
    s->h = h;
    s->w = w;
    s->pool = pool;
    s->seed = seed;
    size_t plane = (size_t)3 * h * w;
    s->images = malloc((size_t)pool * plane * sizeof *s->images);
    s->labels = malloc((size_t)pool * sizeof *s->labels);
    int *order = malloc((size_t)pool * sizeof *order), *at = calloc((size_t)classes + 1, sizeof *at);
    if (!s->images || !s->labels || !order || !at)
        tb_die("cannot allocate %zu MB for synthetic data; lower --batch-size or --image-size",
               (size_t)pool * plane * 4 >> 20);
    /* the samples grouped by class (a counting sort), so a class the pool
     * holds has its pattern made on the thread that fills a run of its
     * samples, and a class it does not hold has none (--classes 1000: 600 MB
     * of patterns at 224 px before, all of them made first) */
    for (int i = 0; i < pool; i++) {
        tb_rng r;
        s->labels[i] = sample_class(seed, i, classes, &r);
        at[s->labels[i] + 1]++;
    }
    for (int c = 0; c < classes; c++) at[c + 1] += at[c];
    /* the work: each class the pool holds in runs of at most FILL_RUN samples
     * (a class's pattern costs a few samples' fill: 10 classes still keep
     * every core busy), held[k] the class of run k, from[k] its start */
    enum { FILL_RUN = 32 };
    int nmax = pool + pool / FILL_RUN + 1, nheld = 0;
    int *next = malloc((size_t)classes * sizeof *next), *held = malloc((size_t)nmax * sizeof *held),
        *from = malloc((size_t)(nmax + 1) * sizeof *from);
    if (!next || !held || !from) tb_die("cannot allocate the synthetic data's class index of %d classes", classes);
    memcpy(next, at, (size_t)classes * sizeof *next);
    for (int i = 0; i < pool; i++) order[next[s->labels[i]]++] = i;
    for (int c = 0; c < classes; c++)
        for (int j = at[c]; j < at[c + 1]; j += FILL_RUN) held[nheld] = c, from[nheld++] = j;
    from[nheld] = pool;
    free(next);
    /* every class and every sample draws from its own generator, so the
     * pool is the same bits on any number of threads (a synthetic bench row
     * at 224 px makes 1 GiB of it before its first step) */
    int failed = 0;
#pragma omp parallel
    {
        float *proto = malloc(plane * sizeof *proto); /* this thread's pattern, of class cur */
        int cur = -1;
        if (!proto) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int k = 0; k < nheld; k++) {
            if (!proto) continue;
            if (held[k] != cur) class_pattern(proto, h, w, seed, cur = held[k]);
            fill_class(s, order, from[k], from[k + 1], proto); /* runs end where the next (class) begins */
        }
        free(proto);
    }
    if (failed) tb_die("cannot allocate %zu KB for a synthetic class pattern", plane * sizeof(float) >> 10);
    free(held);
    free(from);
    free(order);
    free(at);
}

/* Pool element of position p of `epoch`. */
static uint64_t pool_row(const tb_synthetic *s, uint64_t key, int64_t p) {
    return tb_hash2(key, (uint64_t)p) % (uint64_t)s->pool;
}

void tb_synthetic_samples(const tb_synthetic *s, int64_t epoch, int64_t start, int n,
                          float *images, int32_t *labels) {
    size_t plane = (size_t)3 * s->h * s->w;
    uint64_t key = tb_hash2(s->seed, (uint64_t)epoch);
    for (int i = 0; i < n; i++) {
        uint64_t k = pool_row(s, key, start + i);
        memcpy(images + (size_t)i * plane, s->images + k * plane, plane * sizeof *images);
        labels[i] = s->labels[k];
    }
}

void tb_synthetic_rows(const tb_synthetic *s, int64_t epoch, int64_t start, int n, int32_t *rows,
                       int32_t *labels) {
    uint64_t key = tb_hash2(s->seed, (uint64_t)epoch);
    for (int i = 0; i < n; i++) {
        uint64_t k = pool_row(s, key, start + i);
        rows[i] = (int32_t)k;
        labels[i] = s->labels[k];
    }
}

void tb_synthetic_free(tb_synthetic *s) {
    free(s->images);
    free(s->labels);
    memset(s, 0, sizeof *s);
}
