/* hash.h - FNV-1a over bytes: content identities compared across ranks
 * (the data set's index, the replicas' weights, the op profile's op list).
 * Not for seeding: random streams take tb_hash2 (rng.h). */
#ifndef TB_HASH_H
#define TB_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TB_FNV1A_INIT 0xcbf29ce484222325ULL /* the offset basis: h of no bytes */

/* FNV-1a over n bytes at p, continuing from h. */
static inline uint64_t tb_fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

#endif
