/* cpu_blas.c - the BLAS kernels the CPU backend runs: what the library
 * picked, the re-exec that replaces a fallback, the threads rule, and one
 * timed SGEMM for probe (see cpu_blas.h for the why). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT, strcasecmp */
#include "model/cpu/cpu_blas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/procmem.h"

static tb_cpu_blas_info g_info;
static int g_info_ready;

/* ---- the rule ------------------------------------------------------------ */

const char *tb_cpu_blas_kernels_for(const tb_cpu_features *f) {
    tb_isa_level lvl = tb_cpu_isa_best(f);
    int amd = strcmp(f->vendor, "AuthenticAMD") == 0 || strcmp(f->vendor, "HygonGenuine") == 0;
    if (lvl == TB_ISA_AVX512) return "SkylakeX";
    if (lvl == TB_ISA_AVX2) return amd ? "Zen" : "Haswell";
    if (f->avx && f->os_ymm) return "Sandybridge";
    return "";
}

int tb_cpu_blas_kernels_tier(const char *corename) {
    static const char *const t3[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    static const char *const t2[] = {"Haswell", "Zen", "Excavator", NULL};
    static const char *const t1[] = {"Sandybridge", "Bulldozer", "Piledriver", "Steamroller", NULL};
    const char *const *tiers[] = {t1, t2, t3};
    for (int t = 2; corename && t >= 0; t--)
        for (int i = 0; tiers[t][i]; i++)
            if (strcasecmp(corename, tiers[t][i]) == 0) return t + 1;
    return 0;
}

/* ---- what the library says ------------------------------------------------ */

static void info_read(tb_cpu_blas_info *b) {
    memset(b, 0, sizeof *b);
#ifdef TB_HAVE_OPENBLAS_THREADS
    snprintf(b->config, sizeof b->config, "%s", openblas_get_config());
    const char *core = openblas_get_corename();
    snprintf(b->kernels, sizeof b->kernels, "%s", core ? core : "unknown");
    /* "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the first two words */
    int n = 0, words = 0;
    while (b->config[n] && words < 2) {
        if (b->config[n] == ' ') words++;
        if (words < 2) n++;
    }
    snprintf(b->library, sizeof b->library, "%.*s", n, b->config);
    b->dynamic = strstr(b->config, "DYNAMIC_ARCH") != NULL;
    /* the identity: every word of the config but the kernels' name */
    size_t at = 0;
    char cfg[192];
    snprintf(cfg, sizeof cfg, "%s", b->config);
    for (char *save = NULL, *w = strtok_r(cfg, " ", &save); w; w = strtok_r(NULL, " ", &save))
        if (strcasecmp(w, b->kernels) != 0 && at < sizeof b->identity)
            at += (size_t)snprintf(b->identity + at, sizeof b->identity - at, "%s%s", at ? " " : "", w);
#else
    snprintf(b->library, sizeof b->library, "CBLAS (not OpenBLAS)");
    snprintf(b->config, sizeof b->config, "a CBLAS other than OpenBLAS: its kernels cannot be named");
    snprintf(b->kernels, sizeof b->kernels, "unknown");
    snprintf(b->identity, sizeof b->identity, "%s", b->library);
#endif
    b->threads = 1;
    const tb_cpu_features *f = tb_cpu_features_get();
    snprintf(b->best, sizeof b->best, "%s", tb_cpu_blas_kernels_for(f));
    b->below_best = b->best[0] && strcmp(b->kernels, "unknown") != 0 &&
                    tb_cpu_blas_kernels_tier(b->kernels) < tb_cpu_blas_kernels_tier(b->best);
}

const tb_cpu_blas_info *tb_cpu_blas_info_get(void) {
    if (!g_info_ready) {
        info_read(&g_info);
        g_info.origin = getenv("OPENBLAS_CORETYPE") ? TB_BLAS_KERNELS_USER : TB_BLAS_KERNELS_DETECTED;
        g_info_ready = 1;
    }
    return &g_info;
}

void tb_cpu_blas_origin_str(const tb_cpu_blas_info *b, char *buf, size_t len) {
    switch (b->origin) {
    case TB_BLAS_KERNELS_USER: snprintf(buf, len, "OPENBLAS_CORETYPE (yours)"); break;
    case TB_BLAS_KERNELS_TRAINBENCH:
        snprintf(buf, len, "chosen by trainbench: OpenBLAS picked %s", b->fell_from);
        break;
    case TB_BLAS_KERNELS_FIXED: snprintf(buf, len, "fixed when the library was built"); break;
    default:
        snprintf(buf, len, "%s", strncmp(b->library, "OpenBLAS", 8) == 0 ? "detected by OpenBLAS" : "unknown");
    }
}

void tb_cpu_blas_summary(char *buf, size_t len) {
    const tb_cpu_blas_info *b = tb_cpu_blas_info_get();
    char origin[96];
    tb_cpu_blas_origin_str(b, origin, sizeof origin);
    snprintf(buf, len, "%s %s kernels (%s%s%s)", b->library, b->kernels, origin,
             b->below_best ? "; this CPU can run " : "", b->below_best ? b->best : "");
}

/* ---- the re-exec ------------------------------------------------------------ */

static void cpu_units(char *buf, size_t len) {
    tb_isa_level lvl = tb_cpu_isa_best(tb_cpu_features_get());
    snprintf(buf, len, "%s", lvl == TB_ISA_AVX512 ? "AVX-512" : lvl == TB_ISA_AVX2 ? "AVX2" : "AVX");
}

/* This process is the re-executed one: say what happened. */
static void after_reexec(tb_cpu_blas_info *b, const char *fell_from) {
    b->origin = TB_BLAS_KERNELS_TRAINBENCH;
    snprintf(b->fell_from, sizeof b->fell_from, "%s", fell_from);
    char units[16];
    cpu_units(units, sizeof units);
    if (strcasecmp(b->kernels, b->best) == 0)
        snprintf(b->note, sizeof b->note,
                 "%.63s picked its %.63s kernels on a CPU with %.63s; re-ran with OPENBLAS_CORETYPE=%.63s (set "
                 "OPENBLAS_CORETYPE yourself to choose)",
                 b->library, fell_from, units, b->best);
    else
        snprintf(b->note, sizeof b->note,
                 "%.63s picked its %.63s kernels on a CPU with %.63s; re-ran with OPENBLAS_CORETYPE=%.63s but it runs %.63s: "
                 "this library lacks those kernels, install a newer OpenBLAS",
                 b->library, fell_from, units, b->best, b->kernels);
    unsetenv("TB_BLAS_REEXEC");
    unsetenv("TB_TEST_BLAS_FALLBACK");
}

/* What the kernels rule decides: 1 with was set when the library fell back
 * and a re-run with OPENBLAS_CORETYPE=best is wanted; otherwise 0, with the
 * origin and (where there is something to say) the note set. */
static int kernels_reexec_wanted(tb_cpu_blas_info *b, char *was, size_t len) {
    const char *user = getenv("OPENBLAS_CORETYPE");
    const char *emu = getenv("TB_TEST_BLAS_FALLBACK");
    int emulated = user && emu && strcmp(emu, "1") == 0;
    char units[16];
    cpu_units(units, sizeof units);
    if (user && !emulated) {
        b->origin = TB_BLAS_KERNELS_USER;
        if (b->below_best)
            snprintf(b->note, sizeof b->note,
                     "OPENBLAS_CORETYPE=%.40s (yours) runs %.63s's %.63s kernels; this CPU (%.63s) can run %.63s, which are "
                     "faster: unset it to let trainbench choose",
                     user, b->library, b->kernels, units, b->best);
        return 0;
    }
    b->origin = TB_BLAS_KERNELS_DETECTED;
    if (!b->below_best) return 0;
    if (!b->dynamic) {
        b->origin = TB_BLAS_KERNELS_FIXED;
        snprintf(b->note, sizeof b->note,
                 "%.63s was built for its %.63s kernels only (no DYNAMIC_ARCH); this CPU (%.63s) can run %.63s: install a "
                 "DYNAMIC_ARCH OpenBLAS (Debian's libopenblas0) or one built for this CPU",
                 b->library, b->kernels, units, b->best);
        return 0;
    }
    snprintf(was, len, "%.31s", b->kernels);
    return 1;
}

/* OpenBLAS starts its thread pool as it loads (OPENBLAS_NUM_THREADS's
 * threads, or else one a core, less the caller), and each pool thread maps
 * its 128 MiB buffer as it starts, retrying a map that fails for ever: under
 * an address-space limit (ulimit -v) too tight for them every command,
 * `report --help` too, hung where the library joins them at exit, with no
 * line. trainbench calls the BLAS one thread per call (tb_cpu_blas_threads),
 * so the pool never works for it: where a pool started (a pthreads build
 * with more than one thread) and the limit leaves less room than its
 * buffers (none may be mapped yet) and the caller's need, re-run with
 * OPENBLAS_NUM_THREADS=1, which starts none. A user's own
 * OPENBLAS_NUM_THREADS is left as it is. */
static int pool_in_the_way(void) {
#ifdef TB_HAVE_OPENBLAS_THREADS
    if (getenv("OPENBLAS_NUM_THREADS") || openblas_get_parallel() != 1) return 0; /* OpenMP builds: no pool */
    int pool = openblas_get_num_threads() - 1;
    char why[512];
    return pool >= 1 && tb_cpu_blas_address_short(pool + 1, why, sizeof why); /* the pool's buffers and the caller's */
#else
    return 0;
#endif
}

#define POOL_MARK "TB_BLAS_POOL_OFF"
static int g_pool_exec_errno; /* the re-run without the pool was wanted but failed: its errno */

static void ensure(tb_cpu_blas_info *b, char **argv) {
    if (getenv(POOL_MARK)) { /* the re-run without the pool: the setting was ours, not the user's */
        unsetenv("OPENBLAS_NUM_THREADS");
        unsetenv(POOL_MARK);
        b->pool_off = 1;
    }
    const char *marker = getenv("TB_BLAS_REEXEC");
    if (marker) {
        after_reexec(b, marker);
        return;
    }
    char was[32] = "";
    int kernels = kernels_reexec_wanted(b, was, sizeof was), pool = !b->pool_off && pool_in_the_way();
    if (!kernels && !pool) return;
    const char *user = getenv("OPENBLAS_CORETYPE");
    char user_kept[64];
    snprintf(user_kept, sizeof user_kept, "%s", user ? user : "");
    if (kernels) {
        setenv("OPENBLAS_CORETYPE", b->best, 1);
        setenv("TB_BLAS_REEXEC", was, 1);
    }
    if (pool) {
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        setenv(POOL_MARK, "1", 1);
    }
    fflush(stdout);
    fflush(stderr);
    execv("/proc/self/exe", argv);
    int e = errno; /* still here: the exec failed; carry on as loaded */
    if (pool) {
        unsetenv("OPENBLAS_NUM_THREADS");
        unsetenv(POOL_MARK);
        g_pool_exec_errno = e;
    }
    if (!kernels) return;
    unsetenv("TB_BLAS_REEXEC");
    if (user_kept[0]) /* TB_TEST_BLAS_FALLBACK's emulated fallback */
        setenv("OPENBLAS_CORETYPE", user_kept, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
    char units[16];
    cpu_units(units, sizeof units);
    snprintf(b->note, sizeof b->note,
             "%.63s picked its %.63s kernels on a CPU with %.63s and trainbench could not re-run itself (/proc/self/exe: "
             "%.63s): set OPENBLAS_CORETYPE=%.63s yourself for the %.63s kernels",
             b->library, was, units, strerror(e), b->best, b->best);
}

/* The pool's threads (a pthreads build starts one a core, less the caller,
 * as it loads) never work for trainbench, whose BLAS runs one thread per
 * call, but they spin (sched_yield) for their first 0.1-0.3 s before they
 * sleep: CPU time every command's first moments pay on every core, which a
 * short loader-bench row counted as its own. They are stopped here with
 * the library's own shutdown (what its fork handler calls: it wakes and
 * joins them); with one thread a call, no BLAS call starts them again. A
 * user's OPENBLAS_NUM_THREADS keeps its pool. */
static void stop_pool(tb_cpu_blas_info *b) {
#ifdef TB_HAVE_OPENBLAS_THREADS
    if (getenv("OPENBLAS_NUM_THREADS") || openblas_get_parallel() != 1 || openblas_get_num_threads() <= 1) return;
    if (g_pool_exec_errno || pool_in_the_way()) return; /* its threads may be retrying their maps: no join */
    void *p = dlsym(RTLD_DEFAULT, "blas_thread_shutdown_");
    if (!p) return; /* not OpenBLAS's pthreads server: leave it */
    int (*shutdown)(void);
    memcpy(&shutdown, &p, sizeof p);
    openblas_set_num_threads(1);
    shutdown();
    b->pool_stopped = 1;
#else
    (void)b;
#endif
}

void tb_cpu_blas_kernels_ensure(char **argv) {
    tb_cpu_blas_info *b = &g_info;
    info_read(b);
    g_info_ready = 1;
    ensure(b, argv);
    stop_pool(b);
    size_t at = strlen(b->note);
    if (b->pool_off)
        snprintf(b->note + at, sizeof b->note - at,
                 "%sthe address-space limit (ulimit -v) leaves too little room for OpenBLAS's thread pool (each of "
                 "its threads maps 128 MiB as it starts): re-ran with OPENBLAS_NUM_THREADS=1, which starts none "
                 "(trainbench's calls run one thread each)",
                 at ? "; " : "");
    else if (g_pool_exec_errno)
        snprintf(b->note + at, sizeof b->note - at,
                 "%sthe address-space limit (ulimit -v) leaves too little room for OpenBLAS's thread pool and "
                 "trainbench could not re-run itself without it (/proc/self/exe: %.63s): set OPENBLAS_NUM_THREADS=1 "
                 "yourself, or raise the limit",
                 at ? "; " : "", strerror(g_pool_exec_errno));
}

/* ---- threads ------------------------------------------------------------------ */

int tb_cpu_allowed_cores(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void tb_cpu_blas_threads(int workers, int *blas_threads, char *note, size_t len) {
    const char *user = getenv("OPENBLAS_NUM_THREADS");
    int k = user && atoi(user) > 0 ? atoi(user) : 1;
#ifdef TB_HAVE_OPENBLAS_THREADS
    /* only when it changes: every openblas_set_num_threads starts the pool
     * again once it was stopped (stop_pool), whatever the count */
    if (k != openblas_get_num_threads()) openblas_set_num_threads(k);
#endif
    *blas_threads = k;
    tb_cpu_blas_info_get();
    g_info.threads = k;
    if (note && len) note[0] = '\0';
    int cores = tb_cpu_allowed_cores();
    if (user && note && (long)k * workers > cores)
        snprintf(note, len,
                 "OPENBLAS_NUM_THREADS=%s (yours) x %d OpenMP worker%s = %ld BLAS threads on %d core%s this "
                 "process may use: they will contend (trainbench calls the BLAS from each worker; unset it for 1)",
                 user, workers, workers > 1 ? "s" : "", (long)k * workers, cores, cores > 1 ? "s" : "");
}

/* ---- the address-space limit ---------------------------------------------------- */

int tb_cpu_blas_address_short(int threads, char *why, size_t len) {
#ifdef TB_HAVE_OPENBLAS_THREADS
    struct rlimit rl;
    long long used = tb_vm_bytes(), mib = 1ll << 20;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || used < 0) return 0;
    long long limit = (long long)rl.rlim_cur, need = used + (128ll * threads + 64) * mib;
    if (need <= limit) return 0;
    snprintf(why, len,
             "the address-space limit (ulimit -v) is %lld MiB with %lld MiB mapped, and OpenBLAS maps 128 MiB more "
             "for each thread that calls it (%d here; it waits for ever, not fails, when it cannot): raise the limit "
             "to %lld MiB or more (ulimit -v %lld) or lift it (ulimit -v unlimited)",
             limit / mib, used / mib, threads, (need + mib - 1) / mib, (need + 1023) / 1024);
    return 1;
#else
    (void)threads, (void)why, (void)len;
    return 0;
#endif
}

void tb_cpu_blas_address_check(int threads, const char *when) {
    char why[512];
    if (tb_cpu_blas_address_short(threads, why, sizeof why)) tb_die("%s: %s", when, why);
}

/* ---- one timed SGEMM --------------------------------------------------------- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* C = A B, n x n row-major, columns split over the workers. */
static void sgemm_split(int n, int workers, const float *a, const float *bm, float *c) {
#pragma omp parallel num_threads(workers)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int c0 = (int)((long)n * t / nt), c1 = (int)((long)n * (t + 1) / nt);
        if (c1 > c0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, c1 - c0, n, 1.0f, a, n, bm + c0, n, 0.0f,
                        c + c0, n);
    }
}

double tb_cpu_blas_time_sgemm(int n, int workers, int reps, double *gflops, char *err, size_t len) {
    size_t nn = (size_t)n * n;
    float *a = malloc(nn * sizeof *a), *bm = malloc(nn * sizeof *bm), *c = malloc(nn * sizeof *c);
    double *t = malloc((size_t)(reps > 0 ? reps : 1) * sizeof *t);
    double med = -1;
    if (!a || !bm || !c || !t) {
        snprintf(err, len, "out of host memory for a %d x %d SGEMM", n, n);
        goto out;
    }
    unsigned s = 12345;
    for (size_t i = 0; i < nn; i++) {
        s = s * 1664525u + 1013904223u;
        a[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
        s = s * 1664525u + 1013904223u;
        bm[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    sgemm_split(n, workers, a, bm, c); /* untimed: pages, caches, thread start */
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        sgemm_split(n, workers, a, bm, c);
        t[r] = now_ms() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    *gflops = 2.0 * n * (double)n * n / (med * 1e6);
    /* 64 sampled elements against float64: |err| <= 1e-4 * sum |a||b| */
    for (int k = 0; k < 64; k++) {
        int i = (k * 7919) % n, j = (k * 104729 + 13) % n;
        double ref = 0, mag = 0;
        for (int p = 0; p < n; p++) {
            ref += (double)a[(size_t)i * n + p] * bm[(size_t)p * n + j];
            mag += fabs((double)a[(size_t)i * n + p] * bm[(size_t)p * n + j]);
        }
        if (fabs(c[(size_t)i * n + j] - ref) > 1e-4 * mag) {
            snprintf(err, len, "SGEMM element (%d, %d) is %.7g, float64 says %.7g: the BLAS computes wrong", i, j,
                     c[(size_t)i * n + j], ref);
            med = -1;
            break;
        }
    }
out:
    free(a);
    free(bm);
    free(c);
    free(t);
    return med;
}
