/* test_cpu_blas.c - model/cpu/cpu_blas: the kernel rule (which OpenBLAS
 * kernels each CPU's vector units call for, and the tiers that decide a
 * fallback), this process's reading of the library, the threads rule, and
 * the timed SGEMM's own check. The re-exec itself is tested end to end by
 * test_blas_kernels.py. */
#include <cblas.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "model/cpu/cpu_blas.h"
#include "tests/tb_test.h"

static tb_cpu_features cpu(const char *vendor, tb_isa_level lvl, int avx) {
    tb_cpu_features f;
    memset(&f, 0, sizeof f);
    snprintf(f.vendor, sizeof f.vendor, "%s", vendor);
    f.sse3 = f.ssse3 = f.sse41 = f.sse42 = true;
    if (avx || lvl >= TB_ISA_AVX2) f.avx = f.os_ymm = true;
    if (lvl >= TB_ISA_AVX2) f.avx2 = f.fma = f.f16c = true;
    if (lvl >= TB_ISA_AVX512)
        f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512cd = f.os_zmm = true;
    return f;
}

static void rule(void) {
    struct {
        tb_cpu_features f;
        const char *want;
    } k[] = {
        {cpu("GenuineIntel", TB_ISA_AVX512, 1), "SkylakeX"},
        {cpu("AuthenticAMD", TB_ISA_AVX512, 1), "SkylakeX"}, /* Zen 4 */
        {cpu("GenuineIntel", TB_ISA_AVX2, 1), "Haswell"},
        {cpu("AuthenticAMD", TB_ISA_AVX2, 1), "Zen"},
        {cpu("HygonGenuine", TB_ISA_AVX2, 1), "Zen"},
        {cpu("GenuineIntel", TB_ISA_BASELINE, 1), "Sandybridge"},
        {cpu("GenuineIntel", TB_ISA_BASELINE, 0), ""},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const char *got = tb_cpu_blas_kernels_for(&k[i].f);
        TB_CHECK(strcmp(got, k[i].want) == 0, "case %zu: %s, want %s", i, got, k[i].want);
    }
    /* AVX-512 the OS does not save: AVX2 kernels, never SkylakeX (SIGILL) */
    tb_cpu_features f = cpu("GenuineIntel", TB_ISA_AVX512, 1);
    f.os_zmm = false;
    TB_CHECK(strcmp(tb_cpu_blas_kernels_for(&f), "Haswell") == 0, "no zmm state: %s", tb_cpu_blas_kernels_for(&f));

    struct {
        const char *name;
        int tier;
    } t[] = {{"Prescott", 0}, {"Nehalem", 0}, {"Core2", 0}, {"Katmai", 0},     {"Sandybridge", 1},
             {"Bulldozer", 1}, {"Haswell", 2}, {"Zen", 2},  {"SkylakeX", 3},  {"skylakex", 3},
             {"Cooperlake", 3}, {"SapphireRapids", 3}, {"unknown", 0}, {NULL, 0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        TB_CHECK(tb_cpu_blas_kernels_tier(t[i].name) == t[i].tier, "tier of %s: %d, want %d",
                 t[i].name ? t[i].name : "NULL", tb_cpu_blas_kernels_tier(t[i].name), t[i].tier);
}

static void this_process(void) {
    const tb_cpu_blas_info *b = tb_cpu_blas_info_get();
    printf("# %s: kernels %s, best %s, origin %d, below %d\n", b->library, b->kernels, b->best, (int)b->origin,
           b->below_best);
#ifdef TB_HAVE_OPENBLAS_THREADS
    TB_CHECK(strcmp(b->kernels, openblas_get_corename()) == 0, "kernels %s, the library says %s", b->kernels,
             openblas_get_corename());
    TB_CHECK(strncmp(b->library, "OpenBLAS ", 9) == 0 && strchr(b->library + 9, ' ') == NULL,
             "library '%s' is not 'OpenBLAS VERSION'", b->library);
#endif
    TB_CHECK(strcmp(b->best, tb_cpu_blas_kernels_for(tb_cpu_features_get())) == 0, "best %s", b->best);
    TB_CHECK(b->below_best == (b->best[0] && tb_cpu_blas_kernels_tier(b->kernels) < tb_cpu_blas_kernels_tier(b->best)),
             "below_best %d for %s vs %s", b->below_best, b->kernels, b->best);
    char s[320];
    tb_cpu_blas_summary(s, sizeof s);
    TB_CHECK(strstr(s, b->kernels) && strstr(s, "kernels ("), "summary '%s'", s);
}

static void threads(void) {
    int k = 0, cores = tb_cpu_allowed_cores();
    char note[512];
    unsetenv("OPENBLAS_NUM_THREADS");
    tb_cpu_blas_threads(2, &k, note, sizeof note);
    TB_CHECK(k == 1 && note[0] == '\0', "default: %d BLAS threads, note '%s'", k, note);
#ifdef TB_HAVE_OPENBLAS_THREADS
    TB_CHECK(openblas_get_num_threads() == 1, "the library runs %d threads, not 1", openblas_get_num_threads());
#endif
    setenv("OPENBLAS_NUM_THREADS", "3", 1);
    tb_cpu_blas_threads(cores, &k, note, sizeof note);
    TB_CHECK(k == 3, "the user's 3 became %d", k);
    TB_CHECK(note[0] && strstr(note, "OPENBLAS_NUM_THREADS=3 (yours)"), "3 x %d workers on %d cores: note '%s'",
             cores, cores, note);
    tb_cpu_blas_threads(1, &k, note, sizeof note);
    TB_CHECK((note[0] != '\0') == (3 > cores), "3 x 1 worker on %d cores: note '%s'", cores, note);
    unsetenv("OPENBLAS_NUM_THREADS");
    tb_cpu_blas_threads(1, &k, note, sizeof note);
}

static void sgemm(void) {
    double gf = 0;
    char err[256] = "";
    double ms = tb_cpu_blas_time_sgemm(256, 2, 3, &gf, err, sizeof err);
    TB_CHECK(ms > 0 && gf > 0 && err[0] == '\0', "sgemm 256: %.3f ms, %.1f GFLOP/s, '%s'", ms, gf, err);
    TB_CHECK(fabs(gf - 2.0 * 256 * 256 * 256 / (ms * 1e6)) < 1e-6 * gf, "GFLOP/s from the median time");
}

static int threads_now(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* OpenBLAS's own pool, started as it loaded, is stopped first thing (it
 * never works for trainbench and spins as it starts); the BLAS still
 * computes, one thread a call. */
static void pool(char **argv) {
    int before = threads_now();
    tb_cpu_blas_kernels_ensure(argv);
    const tb_cpu_blas_info *b = tb_cpu_blas_info_get();
    if (!b->pool_stopped) {
#ifdef TB_HAVE_OPENBLAS_THREADS
        printf("# no OpenBLAS pool stopped here (%d threads; OPENBLAS_NUM_THREADS %s, parallel %d)\n", before,
               getenv("OPENBLAS_NUM_THREADS") ? "set" : "unset", openblas_get_parallel());
        TB_CHECK(getenv("OPENBLAS_NUM_THREADS") || openblas_get_parallel() != 1 || before == 1,
                 "a pthreads OpenBLAS's pool of %d threads was left running", before - 1);
#else
        printf("# not OpenBLAS: no pool to stop (%d threads)\n", before);
#endif
        return;
    }
    TB_CHECK(before > 1 && threads_now() == 1, "the pool's threads are gone (%d threads before, %d after)", before,
             threads_now());
    float a[4] = {1, 2, 3, 4}, c[4] = {0};
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2);
    TB_CHECK(c[0] == 7 && c[1] == 10 && c[2] == 15 && c[3] == 22 && threads_now() == 1,
             "and the BLAS still computes, on the caller's thread (%g %g %g %g)", c[0], c[1], c[2], c[3]);
    int bt = 0;
    tb_cpu_blas_threads(2, &bt, NULL, 0); /* what the CPU backend and probe call as they start */
    TB_CHECK(bt == 1 && threads_now() == 1, "the backend's thread rule does not start the pool again (%d threads)",
             threads_now());
}

int main(int argc, char **argv) {
    (void)argc;
    pool(argv);
    rule();
    this_process();
    threads();
    sgemm();
    return tb_test_exit("cpu_blas");
}
