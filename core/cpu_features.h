/* cpu_features.h - what the host CPU offers, read once from CPUID and the
 * OS's saved-state mask (XGETBV): a vector unit the OS does not save is not
 * usable, whatever CPUID says. The BLAS kernel choice (model/cpu) and the
 * runtime dispatch of trainbench's own loops stand on it; probe, preflight,
 * the train header and the results file print it.
 *
 * Levels, as x86-64 psABI levels name them (what a loop may use):
 *   baseline  SSE2 (every x86-64)
 *   avx2      AVX2 + FMA + F16C, OS saves ymm          (Haswell, Zen 1)
 *   avx512    AVX-512 F, BW, VL, DQ, CD, OS saves zmm  (Skylake-SP, Zen 4)
 * On a CPU that is not x86-64 every field reads false and the level is
 * baseline. */
#ifndef TB_CPU_FEATURES_H
#define TB_CPU_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { TB_ISA_BASELINE = 0, TB_ISA_AVX2 = 1, TB_ISA_AVX512 = 2 } tb_isa_level;
#define TB_ISA_NLEVELS 3

typedef struct {
    char vendor[16];      /* "GenuineIntel", "AuthenticAMD", "" off x86 */
    int family, model;    /* CPUID display family and model */
    bool sse3, ssse3, sse41, sse42, avx, fma, f16c, avx2;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512cd, avx512_bf16, avx512_fp16;
    bool amx_tile, amx_bf16, amx_int8;
    bool os_ymm, os_zmm, os_amx; /* XCR0: the OS saves the ymm / zmm / tile state */
} tb_cpu_features;

/* The host's features (read once, then cached; thread-safe after the first
 * call from main). */
const tb_cpu_features *tb_cpu_features_get(void);

/* The best level the features allow (usable: CPUID and OS state both). */
tb_isa_level tb_cpu_isa_best(const tb_cpu_features *f);

/* "baseline", "avx2", "avx512"; NULL for an out-of-range level. */
const char *tb_cpu_isa_name(tb_isa_level level);
/* Level from its name; -1 when the name is none of them. */
int tb_cpu_isa_parse(const char *name);

/* What the CPU offers, for people: "AVX2 FMA AVX-512 (F BW VL DQ CD) AVX512-BF16
 * AMX (TILE BF16 INT8)" or "SSE2 SSE3 SSE4.2"; usable units only. */
void tb_cpu_features_str(const tb_cpu_features *f, char *buf, size_t len);

/* Peak single-precision FLOP per cycle per core at a level, assuming two
 * vector FMA ports (most server cores; Xeons with one AVX-512 unit reach
 * half at avx512): baseline 8 (SSE, 4 lanes, one mul and one add a cycle),
 * avx2 32 (8 lanes x 2 for the FMA x 2 ports), avx512 64. */
int tb_cpu_isa_flops_per_cycle(tb_isa_level level);

#endif
