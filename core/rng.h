/* rng.h - seeded, counter-based random numbers.
 *
 * Every random draw in trainbench comes from a stream named by (seed, stream
 * id), so results do not depend on thread count or on the order in which
 * independent things are initialised. xoshiro256** seeded by splitmix64. */
#ifndef TB_RNG_H
#define TB_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct {
    uint64_t s[4];
} tb_rng;

static inline uint64_t tb_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Mixes two words into one; used to derive stream keys. */
static inline uint64_t tb_hash2(uint64_t a, uint64_t b) {
    uint64_t x = a ^ (b * 0xd1342543de82ef95ULL);
    uint64_t h = tb_splitmix64(&x);
    x ^= h;
    return tb_splitmix64(&x);
}

static inline void tb_rng_seed(tb_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = tb_hash2(seed, stream);
    for (int i = 0; i < 4; i++) r->s[i] = tb_splitmix64(&x);
}

static inline uint64_t tb_rng_u64(tb_rng *r) {
    uint64_t *s = r->s;
    uint64_t v = s[1] * 5;
    uint64_t result = ((v << 7) | (v >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double tb_rng_uniform(tb_rng *r) {
    return (double)(tb_rng_u64(r) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n), n > 0, without modulo bias. */
static inline uint64_t tb_rng_below(tb_rng *r, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = tb_rng_u64(r);
    while (x >= limit);
    return x % n;
}

/* Standard normal by Box-Muller (one of the pair is discarded: simple and
 * free of hidden state). */
static inline double tb_rng_normal(tb_rng *r) {
    double u1 = tb_rng_uniform(r), u2 = tb_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
