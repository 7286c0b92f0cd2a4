/* test_synthetic.c - the synthetic pool (data/synthetic.c): the same bits
 * on 1 and 3 OpenMP threads, and the same bits as every earlier version
 * made (hashes pinned from the build before the pool was grouped by class,
 * so --synthetic runs stay comparable across versions); labels in range;
 * a sample is its class's pattern plus noise (two samples of one class far
 * more alike than two of different classes); many more classes than samples
 * (only the classes the pool holds get a pattern: 2^20 classes at 16 px
 * made 48 GiB of them before). */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "data/synthetic.h"
#include "tests/tb_test.h"

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ULL;
    return h;
}

static uint64_t pool_hash(int classes, int size, int pool, uint64_t seed, int threads) {
    omp_set_num_threads(threads);
    tb_synthetic s;
    tb_synthetic_init(&s, classes, size, size, pool, seed);
    uint64_t h = fnv(s.images, (size_t)pool * 3 * size * size * sizeof(float), 1469598103934665603ULL);
    h = fnv(s.labels, (size_t)pool * sizeof(int32_t), h);
    for (int i = 0; i < pool; i++)
        TB_CHECK(s.labels[i] >= 0 && s.labels[i] < classes, "label %d of sample %d out of [0,%d)", s.labels[i], i,
                 classes);
    tb_synthetic_free(&s);
    return h;
}

/* Pearson correlation of two samples' pixels. */
static double corr(const float *a, const float *b, size_t n) {
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; i++) ma += a[i], mb += b[i];
    ma /= (double)n, mb /= (double)n;
    for (size_t i = 0; i < n; i++)
        sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma), sbb += (b[i] - mb) * (b[i] - mb);
    return sab / sqrt(saa * sbb);
}

int main(void) {
    static const struct {
        int classes, size, pool;
        uint64_t seed, hash;
    } pin[] = {{10, 32, 300, 1, 0x4fd295bf61397624ULL},
               {1000, 64, 1782, 7, 0xcd00430623bb256eULL},
               {3, 17, 5, 2, 0x3c6660c5e9ce0efeULL},
               {50000, 16, 400, 3, 0x7ff138b3613bb6afULL}};
    for (size_t k = 0; k < sizeof pin / sizeof pin[0]; k++)
        for (int t = 1; t <= 3; t += 2) {
            uint64_t h = pool_hash(pin[k].classes, pin[k].size, pin[k].pool, pin[k].seed, t);
            TB_CHECK(h == pin[k].hash,
                     "%d classes, %d px, pool %d, seed %llu on %d thread(s): hash %016llx, want %016llx",
                     pin[k].classes, pin[k].size, pin[k].pool, (unsigned long long)pin[k].seed, t,
                     (unsigned long long)h, (unsigned long long)pin[k].hash);
        }

    /* class structure: mean correlation within a class >> across classes */
    omp_set_num_threads(2);
    tb_synthetic s;
    tb_synthetic_init(&s, 4, 32, 32, 64, 11);
    size_t plane = (size_t)3 * 32 * 32;
    double same = 0, other = 0;
    int nsame = 0, nother = 0;
    for (int i = 0; i < 64; i++)
        for (int j = i + 1; j < 64; j++) {
            double c = corr(s.images + i * plane, s.images + j * plane, plane);
            if (s.labels[i] == s.labels[j]) same += c, nsame++;
            else other += c, nother++;
        }
    same /= nsame, other /= nother;
    TB_CHECK(nsame > 0 && nother > 0 && same > 0.3 && same > other + 0.2,
             "class structure: mean correlation %.3f within a class, %.3f across", same, other);
    tb_synthetic_free(&s);

    /* 2^20 classes, 64 samples of 16 px: only their classes get patterns */
    tb_synthetic_init(&s, 1 << 20, 16, 16, 64, 5);
    int distinct = 0;
    for (int i = 0; i < 64; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= s.labels[j] == s.labels[i];
        distinct += !seen;
        TB_CHECK(s.labels[i] >= 0 && s.labels[i] < (1 << 20), "label %d out of range", s.labels[i]);
    }
    TB_CHECK(distinct > 60, "2^20 classes: %d distinct labels in 64 samples", distinct);
    tb_synthetic_free(&s);
    return tb_test_exit("synthetic");
}
