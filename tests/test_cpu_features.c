/* test_cpu_features.c - core/cpu_features: what CPUID + XGETBV report
 * against the kernel's own reading (/proc/cpuinfo "flags", which Linux
 * clears for units it does not enable), the level rule, and the names. */
#include <stdio.h>
#include <string.h>

#include "core/cpu_features.h"
#include "tests/tb_test.h"

/* Is the whole word `flag` in /proc/cpuinfo's first "flags" line? -1: no such line. */
static int proc_flag(const char *flags, const char *flag) {
    if (!flags) return -1;
    size_t n = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ' || p[-1] == '\t' || p[-1] == ':') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
            return 1;
    return 0;
}

static char *read_flags(void) {
    static char line[8192];
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return NULL;
    char *got = NULL;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0) {
            got = line;
            break;
        }
    fclose(f);
    return got;
}

int main(void) {
    const tb_cpu_features *f = tb_cpu_features_get();
    char desc[256];
    tb_cpu_features_str(f, desc, sizeof desc);
    tb_isa_level best = tb_cpu_isa_best(f);
    printf("# vendor %s family %d model %d: %s; level %s\n", f->vendor, f->family, f->model, desc,
           tb_cpu_isa_name(best));

    char *flags = read_flags();
    if (flags && f->vendor[0]) {
        struct {
            const char *proc;
            bool ours;
        } k[] = {
            {"sse3", f->sse3 != 0}, /* /proc says "pni" for SSE3 */
            {"ssse3", f->ssse3}, {"sse4_1", f->sse41}, {"sse4_2", f->sse42},
            {"avx", f->avx && f->os_ymm}, {"fma", f->fma && f->os_ymm}, {"f16c", f->f16c && f->os_ymm},
            {"avx2", f->avx2 && f->os_ymm}, {"avx512f", f->avx512f && f->os_zmm},
            {"avx512bw", f->avx512bw && f->os_zmm}, {"avx512vl", f->avx512vl && f->os_zmm},
            {"avx512dq", f->avx512dq && f->os_zmm}, {"avx512cd", f->avx512cd && f->os_zmm},
            {"avx512_bf16", f->avx512_bf16 && f->os_zmm}, {"avx512_fp16", f->avx512_fp16 && f->os_zmm},
            {"amx_tile", f->amx_tile && f->os_amx}, {"amx_bf16", f->amx_bf16 && f->os_amx},
        };
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
            const char *name = strcmp(k[i].proc, "sse3") == 0 ? "pni" : k[i].proc;
            int kernel = proc_flag(flags, name);
            TB_CHECK(kernel == (int)k[i].ours, "%s: CPUID/XGETBV says %d, /proc/cpuinfo says %d", k[i].proc,
                     (int)k[i].ours, kernel);
        }
        /* the level follows the kernel's flags too */
        int k512 = proc_flag(flags, "avx512f") && proc_flag(flags, "avx512bw") && proc_flag(flags, "avx512vl") &&
                   proc_flag(flags, "avx512dq") && proc_flag(flags, "avx512cd");
        int k2 = proc_flag(flags, "avx2") && proc_flag(flags, "fma") && proc_flag(flags, "f16c");
        tb_isa_level want = k2 && k512 ? TB_ISA_AVX512 : k2 ? TB_ISA_AVX2 : TB_ISA_BASELINE;
        TB_CHECK(best == want, "level %s, the kernel's flags say %s", tb_cpu_isa_name(best), tb_cpu_isa_name(want));
        TB_CHECK((strstr(desc, "AVX2") != NULL) == (proc_flag(flags, "avx2") == 1), "'%s' and avx2", desc);
    } else {
        printf("# no /proc/cpuinfo flags or not x86-64: the comparison is not made\n");
        TB_CHECK(best == TB_ISA_BASELINE || f->vendor[0], "level off x86");
    }

    /* a level whose units are not all there is not reached */
    tb_cpu_features fake = *f;
    fake.avx512cd = false;
    TB_CHECK(tb_cpu_isa_best(&fake) <= TB_ISA_AVX2, "AVX-512 without CD is not the avx512 level");
    fake = *f;
    fake.os_zmm = false;
    TB_CHECK(tb_cpu_isa_best(&fake) <= TB_ISA_AVX2, "zmm state not saved by the OS: not avx512");
    fake.os_ymm = false;
    TB_CHECK(tb_cpu_isa_best(&fake) == TB_ISA_BASELINE, "ymm state not saved: baseline");

    for (int i = 0; i < TB_ISA_NLEVELS; i++)
        TB_CHECK(tb_cpu_isa_parse(tb_cpu_isa_name((tb_isa_level)i)) == i, "name round trip %d", i);
    TB_CHECK(tb_cpu_isa_parse("avx512f") == -1 && tb_cpu_isa_parse(NULL) == -1, "unknown names");
    TB_CHECK(tb_cpu_isa_name((tb_isa_level)7) == NULL, "out of range");
    TB_CHECK(tb_cpu_isa_flops_per_cycle(TB_ISA_AVX512) == 64 && tb_cpu_isa_flops_per_cycle(TB_ISA_AVX2) == 32 &&
                 tb_cpu_isa_flops_per_cycle(TB_ISA_BASELINE) == 8,
             "peak FLOP per cycle");
    return tb_test_exit("cpu_features");
}
