/* cpu_blas.h - which BLAS kernels the CPU backend runs, and the rule that
 * keeps them right for the CPU.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels once, when
 * the library loads, from the CPU's family and model. A release that does
 * not know a CPU falls back to its generic "Prescott" (SSE3) kernels: on a
 * CPU with AVX-512 that is a quarter of the speed (OpenMathLib/OpenBLAS#4267:
 * Debian 12's 0.3.21 on Sapphire Rapids VMs). The choice can only be
 * changed by OPENBLAS_CORETYPE before the library loads, so
 * tb_cpu_blas_kernels_ensure, first thing in main, re-executes the program
 * once with OPENBLAS_CORETYPE set to the kernels this CPU's vector units can
 * run (SkylakeX for AVX-512, Haswell or Zen for AVX2, Sandybridge for AVX)
 * whenever the library picked a lower set. Why a re-exec: the library's own
 * constructor has picked before any constructor of ours can run, a
 * preloaded shim would have to be installed and found, and building against
 * a newer OpenBLAS than the distribution's leaves users with a library to
 * build; one exec costs milliseconds and only on machines that need it.
 * A user's own OPENBLAS_CORETYPE is respected (a line says when it is below
 * what the CPU can run). Test and benchmark switch: TB_TEST_BLAS_FALLBACK=1
 * with OPENBLAS_CORETYPE=NAME stands for a library that fell back to NAME on
 * its own (trainbench then treats the setting as not the user's).
 *
 * Threads: every BLAS call is made from inside the CPU backend's OpenMP
 * workers on its own slice (cpu_internal.h), so the BLAS runs one thread per
 * call; OPENBLAS_NUM_THREADS set by the user is respected, with a line when
 * it times the workers exceeds the cores the process may use. Without it,
 * the thread pool OpenBLAS starts as it loads is stopped at once
 * (tb_cpu_blas_kernels_ensure): it would never work, and its threads spin
 * for their first fraction of a second. */
#ifndef TB_CPU_BLAS_H
#define TB_CPU_BLAS_H

#include <stddef.h>

#include "core/cpu_features.h"

typedef enum {
    TB_BLAS_KERNELS_DETECTED = 0, /* the library's own choice, right for the CPU */
    TB_BLAS_KERNELS_USER,         /* OPENBLAS_CORETYPE set by the user */
    TB_BLAS_KERNELS_TRAINBENCH,   /* set by trainbench: the library had fallen back */
    TB_BLAS_KERNELS_FIXED,        /* a library without run-time kernel choice */
} tb_blas_kernels_origin;

typedef struct {
    char library[64];   /* "OpenBLAS 0.3.21", or "CBLAS (not OpenBLAS)" */
    char config[192];   /* openblas_get_config(): names the kernels too */
    char identity[192]; /* the config without the kernels' name: what must match across ranks */
    char kernels[32];   /* openblas_get_corename(): "SkylakeX"; "unknown" for other BLAS */
    char best[32];      /* the kernels this CPU's vector units can run ("" when any will do) */
    char fell_from[32]; /* what the library had picked before trainbench chose ("" if nothing) */
    tb_blas_kernels_origin origin;
    int dynamic;        /* DYNAMIC_ARCH: the kernels can be chosen at run time */
    int below_best;     /* the kernels running are below what the CPU can run */
    int threads;        /* BLAS threads per call (tb_cpu_blas_threads; 1 until it runs) */
    int pool_off;       /* re-ran with OPENBLAS_NUM_THREADS=1 under an address-space limit: no pool */
    int pool_stopped;   /* the pool OpenBLAS started as it loaded was stopped (cpu_blas.c, stop_pool) */
    char note[768];     /* the one line about the choice ("" when there is nothing to say): the commands
                           that run the BLAS print it as "# BLAS choice" (train's header, probe,
                           preflight); nothing goes to stderr, so a command's one-line error stays
                           one line on a machine whose library fell back */
} tb_cpu_blas_info;

/* First thing in main: may re-execute the program (never returns then) with
 * OPENBLAS_CORETYPE set, and under an address-space limit with
 * OPENBLAS_NUM_THREADS=1 (cpu_blas.c, pool_in_the_way, says why). Prints
 * nothing: what it did is in note. */
void tb_cpu_blas_kernels_ensure(char **argv);

/* The library and kernels of this process (valid at any time). */
const tb_cpu_blas_info *tb_cpu_blas_info_get(void);

/* "origin" in words: "detected by OpenBLAS", "OPENBLAS_CORETYPE (yours)",
 * "chosen by trainbench: OpenBLAS picked Prescott", "fixed at build". */
void tb_cpu_blas_origin_str(const tb_cpu_blas_info *b, char *buf, size_t len);

/* One line for headers and tables: "OpenBLAS 0.3.21 SkylakeX kernels
 * (detected by OpenBLAS)". */
void tb_cpu_blas_summary(char *buf, size_t len);

/* OpenBLAS maps a 128 MiB buffer for each thread that calls it, at its
 * first call, and retries a map that fails for ever: under an address-space
 * limit (ulimit -v) too tight for it the process hung at 100% of a core, in
 * start-up (MPI_Init's fork waits for the library's own threads) or at the
 * first step, with no line. Ends the process with one line (tb_die, "WHEN:
 * ...") when the limit leaves less than 128 MiB for each of threads callers
 * beyond what is mapped now (and 64 MiB besides: their malloc arenas); no
 * limit, another BLAS or an unreadable /proc: nothing. */
void tb_cpu_blas_address_check(int threads, const char *when);
/* The same test without ending: 1 with why set when the limit is short. */
int tb_cpu_blas_address_short(int threads, char *why, size_t len);

/* ---- the rule, pure functions (tested without re-executing) ---- */
/* OpenBLAS's kernel set for these vector units and vendor; "" for a CPU
 * without AVX (nothing better than the generic kernels). */
const char *tb_cpu_blas_kernels_for(const tb_cpu_features *f);
/* 3 AVX-512 kernels, 2 AVX2, 1 AVX, 0 anything else (SSE-era and unknown). */
int tb_cpu_blas_kernels_tier(const char *corename);

/* The BLAS threads rule: *blas_threads per call (1 unless the user set
 * OPENBLAS_NUM_THREADS), a line in note when blas_threads x workers exceeds
 * the cores this process may use. Sets the library's thread count. */
void tb_cpu_blas_threads(int workers, int *blas_threads, char *note, size_t len);

/* Cores this process may run on (its affinity mask). */
int tb_cpu_allowed_cores(void);

/* One n x n x n SGEMM split over `workers` OpenMP threads by columns, as the
 * backend's convolutions split theirs (one single-threaded BLAS call each):
 * the median of `reps` timed runs after one untimed, in ms; GFLOP/s in
 * *gflops. Checks a sample of the product against a float64 dot product
 * (returns -1 and says so in err when one is off). */
double tb_cpu_blas_time_sgemm(int n, int workers, int reps, double *gflops, char *err, size_t len);

#endif
