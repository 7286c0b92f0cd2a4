/* cpu_features.c - the host CPU's vector units from CPUID and XGETBV (see
 * cpu_features.h). Bit positions: Intel SDM vol. 2A, CPUID leaf 1 (ECX),
 * leaf 7 sub-leaf 0 (EBX, ECX, EDX) and sub-leaf 1 (EAX); XCR0 bits 1-2
 * (xmm, ymm), 5-7 (opmask, zmm hi256, hi16 zmm), 17-18 (tile config, data). */
#include "core/cpu_features.h"

#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static void read_x86(tb_cpu_features *f) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    unsigned max_leaf = a;
    memcpy(f->vendor, &b, 4);
    memcpy(f->vendor + 4, &d, 4);
    memcpy(f->vendor + 8, &c, 4);
    f->vendor[12] = '\0';

    __cpuid(1, a, b, c, d);
    unsigned fam = (a >> 8) & 0xf, mod = (a >> 4) & 0xf;
    if (fam == 0xf) fam += (a >> 20) & 0xff;
    if (fam == 0x6 || fam >= 0xf) mod |= ((a >> 16) & 0xf) << 4;
    f->family = (int)fam;
    f->model = (int)mod;
    f->sse3 = c & (1u << 0);
    f->ssse3 = c & (1u << 9);
    f->fma = c & (1u << 12);
    f->sse41 = c & (1u << 19);
    f->sse42 = c & (1u << 20);
    bool osxsave = c & (1u << 27);
    f->avx = c & (1u << 28);
    f->f16c = c & (1u << 29);

    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    f->os_ymm = (xcr0 & 0x6) == 0x6;
    f->os_zmm = (xcr0 & 0xe6) == 0xe6;
    f->os_amx = (xcr0 & 0x60000) == 0x60000;

    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2 = b & (1u << 5);
        f->avx512f = b & (1u << 16);
        f->avx512dq = b & (1u << 17);
        f->avx512cd = b & (1u << 28);
        f->avx512bw = b & (1u << 30);
        f->avx512vl = b & (1u << 31);
        f->avx512_fp16 = d & (1u << 23);
        f->amx_bf16 = d & (1u << 22);
        f->amx_tile = d & (1u << 24);
        f->amx_int8 = d & (1u << 25);
        unsigned max_sub = a;
        if (max_sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            f->avx512_bf16 = a & (1u << 5);
        }
    }
}
#endif

const tb_cpu_features *tb_cpu_features_get(void) {
    static tb_cpu_features feats;
    static int done;
    if (!done) {
        memset(&feats, 0, sizeof feats);
#if defined(__x86_64__) || defined(__i386__)
        read_x86(&feats);
#endif
        done = 1;
    }
    return &feats;
}

static bool avx2_usable(const tb_cpu_features *f) {
    return f->avx && f->avx2 && f->fma && f->f16c && f->os_ymm;
}

static bool avx512_usable(const tb_cpu_features *f) {
    return avx2_usable(f) && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512cd &&
           f->os_zmm;
}

tb_isa_level tb_cpu_isa_best(const tb_cpu_features *f) {
    if (avx512_usable(f)) return TB_ISA_AVX512;
    if (avx2_usable(f)) return TB_ISA_AVX2;
    return TB_ISA_BASELINE;
}

static const char *const k_isa_names[TB_ISA_NLEVELS] = {"baseline", "avx2", "avx512"};

const char *tb_cpu_isa_name(tb_isa_level level) {
    return (int)level >= 0 && (int)level < TB_ISA_NLEVELS ? k_isa_names[level] : NULL;
}

int tb_cpu_isa_parse(const char *name) {
    for (int i = 0; name && i < TB_ISA_NLEVELS; i++)
        if (strcmp(name, k_isa_names[i]) == 0) return i;
    return -1;
}

static void add(char *buf, size_t len, const char *word) {
    size_t n = strlen(buf);
    if (n + 1 < len) snprintf(buf + n, len - n, "%s%s", n ? " " : "", word);
}

void tb_cpu_features_str(const tb_cpu_features *f, char *buf, size_t len) {
    if (!len) return;
    buf[0] = '\0';
    if (!f->vendor[0]) {
        add(buf, len, "not x86-64: no vector units detected");
        return;
    }
    add(buf, len, "SSE2");
    if (f->sse3) add(buf, len, "SSE3");
    if (f->sse42) add(buf, len, "SSE4.2");
    if (f->avx && f->os_ymm) add(buf, len, "AVX");
    if (f->avx2 && f->os_ymm) add(buf, len, "AVX2");
    if (f->fma && f->os_ymm) add(buf, len, "FMA");
    if (f->avx512f && f->os_zmm) {
        char sub[64];
        snprintf(sub, sizeof sub, "AVX-512 (F%s%s%s%s)", f->avx512bw ? " BW" : "", f->avx512vl ? " VL" : "",
                 f->avx512dq ? " DQ" : "", f->avx512cd ? " CD" : "");
        add(buf, len, sub);
        if (f->avx512_bf16) add(buf, len, "AVX512-BF16");
        if (f->avx512_fp16) add(buf, len, "AVX512-FP16");
    } else if (f->avx512f) {
        add(buf, len, "(AVX-512 not enabled by the OS)");
    }
    if (f->amx_tile && f->os_amx) {
        char sub[48];
        snprintf(sub, sizeof sub, "AMX (TILE%s%s)", f->amx_bf16 ? " BF16" : "", f->amx_int8 ? " INT8" : "");
        add(buf, len, sub);
    }
}

int tb_cpu_isa_flops_per_cycle(tb_isa_level level) {
    switch (level) {
    case TB_ISA_AVX512: return 64;
    case TB_ISA_AVX2: return 32;
    default: return 8;
    }
}
