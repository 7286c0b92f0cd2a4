/* cpu_dispatch.c - the level of trainbench's own vector loops: the best the
 * CPU offers or the one TB_CPU_LEVEL forces (see cpu_dispatch.h). */
#include "core/cpu_dispatch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

static atomic_int g_level = -1; /* -1: not chosen yet */
static int g_forced;            /* chosen from TB_CPU_LEVEL (or by a test) */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

int tb_cpu_level_built(tb_isa_level level) {
#if defined(TB_CPU_DISPATCH_X86)
    return (int)level >= 0 && (int)level < TB_ISA_NLEVELS;
#else
    return level == TB_ISA_BASELINE;
#endif
}

int tb_cpu_level_choose(const char *value, const tb_cpu_features *f, tb_isa_level *out, char *err, size_t len) {
    tb_isa_level best = tb_cpu_isa_best(f);
    if (!tb_cpu_level_built(best)) best = TB_ISA_BASELINE;
    if (!value || !value[0] || strcmp(value, "auto") == 0) {
        *out = best;
        return 0;
    }
    int lv = tb_cpu_isa_parse(value);
    if (lv < 0) {
        snprintf(err, len, "%s=%s is not a level: use baseline, avx2, avx512 or auto (the best this CPU offers, %s)",
                 TB_CPU_LEVEL_ENV, value, tb_cpu_isa_name(best));
        return -1;
    }
    if (!tb_cpu_level_built((tb_isa_level)lv)) {
        snprintf(err, len, "%s=%s: this build has no %s code (not x86-64); unset it or use baseline",
                 TB_CPU_LEVEL_ENV, value, value);
        return -1;
    }
    if (lv > (int)best) {
        char units[256];
        tb_cpu_features_str(f, units, sizeof units);
        snprintf(err, len, "%s=%s: this CPU lacks %s (it offers %s: level %s); unset %s or choose %s or lower",
                 TB_CPU_LEVEL_ENV, value, value, units, tb_cpu_isa_name(best), TB_CPU_LEVEL_ENV,
                 tb_cpu_isa_name(best));
        return -1;
    }
    *out = (tb_isa_level)lv;
    return 0;
}

static void init_once(void) {
    const char *value = getenv(TB_CPU_LEVEL_ENV);
    tb_isa_level lv;
    char err[512];
    if (tb_cpu_level_choose(value, tb_cpu_features_get(), &lv, err, sizeof err) != 0) tb_die("%s", err);
    g_forced = value && value[0] && strcmp(value, "auto") != 0;
    atomic_store(&g_level, (int)lv);
}

void tb_cpu_dispatch_init(void) { pthread_once(&g_once, init_once); }

tb_isa_level tb_cpu_level(void) {
    int lv = atomic_load_explicit(&g_level, memory_order_relaxed);
    if (lv >= 0) return (tb_isa_level)lv;
    tb_cpu_dispatch_init();
    return (tb_isa_level)atomic_load(&g_level);
}

int tb_cpu_level_set(tb_isa_level level, char *err, size_t len) {
    tb_cpu_dispatch_init();
    tb_isa_level lv;
    if (tb_cpu_level_choose(tb_cpu_isa_name(level), tb_cpu_features_get(), &lv, err, len) != 0) return -1;
    g_forced = 1;
    atomic_store(&g_level, (int)lv);
    return 0;
}

void tb_cpu_dispatch_describe(char *buf, size_t len) {
    tb_isa_level lv = tb_cpu_level();
    tb_isa_level best = tb_cpu_isa_best(tb_cpu_features_get());
    if (!tb_cpu_level_built(best)) best = TB_ISA_BASELINE;
    int n;
    if (g_forced)
        n = snprintf(buf, len, "%s (forced by %s; the CPU offers %s)", tb_cpu_isa_name(lv), TB_CPU_LEVEL_ENV,
                     tb_cpu_isa_name(best));
    else
        n = snprintf(buf, len, "%s (auto: the best this CPU offers)", tb_cpu_isa_name(lv));
#if defined(TB_NATIVE_BUILD)
    if (n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "; TB_NATIVE build: all code compiled for the build machine");
#else
    (void)n;
#endif
}
