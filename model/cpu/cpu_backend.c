/* cpu_backend.c - the CPU backend's table: memory, ordering, threads.
 *
 * float32 NCHW only. Memory is ordinary host memory, 64-byte aligned; every
 * op runs to completion before it returns, so sync is a no-op. The ops live
 * in one file per family (cpu_conv.c, cpu_bn.c, ...), declared in
 * cpu_internal.h.
 */
/* sched_getaffinity and the CPU_* macros */
#define _GNU_SOURCE
#include "model/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/cpu/cpu_internal.h"
#include "src/core/log.h"

/* Scratch for im2col and friends, all threads together (a target: convs
 * are split finer until their pieces fit). */
#define CPU_WS_CAP_BYTES ((size_t)256 << 20)
/* Convs with small images batch several images into one GEMM until it has
 * about this many columns (OpenBLAS is near peak from a few hundred). */
#define CPU_CONV_MIN_COLS 1024

/* ---- helpers shared by the op files ---------------------------------------- */

void cpu_check(const tb_tensor *t, const char *op, const char *name) {
    if (!t) TB_FATAL("cpu %s: tensor %s is NULL", op, name);
    if (t->dtype != TB_REAL_DTYPE || t->layout != TB_NCHW)
        tb_die("cpu backend: %s: tensor %s is %s %s, but the CPU backend supports %s "
               "NCHW only (use --precision fp32 with the CPU backend)",
               op, name, tb_dtype_name(t->dtype), tb_layout_name(t->layout),
               tb_dtype_name(TB_REAL_DTYPE));
    if (t->n < 0 || t->c < 0 || t->h < 0 || t->w < 0)
        TB_FATAL("cpu %s: tensor %s has a negative dimension [%d,%d,%d,%d]", op, name, t->n,
                 t->c, t->h, t->w);
    if (!t->data && tb_tensor_numel(t) > 0) TB_FATAL("cpu %s: tensor %s has no data", op, name);
}

void cpu_check_same_shape(const tb_tensor *a, const tb_tensor *b, const char *op,
                          const char *na, const char *nb) {
    if (a->n != b->n || a->c != b->c || a->h != b->h || a->w != b->w)
        TB_FATAL("cpu %s: %s is [%d,%d,%d,%d] but %s is [%d,%d,%d,%d]", op, na, a->n, a->c,
                 a->h, a->w, nb, b->n, b->c, b->h, b->w);
}

void *cpu_aligned_alloc(size_t bytes, const char *what) {
    size_t rounded = (bytes + 63) / 64 * 64; /* aligned_alloc wants a multiple */
    if (rounded == 0) rounded = 64;
    if (rounded < bytes) tb_die("cpu backend: cannot allocate %zu bytes for %s", bytes, what);
    void *p = aligned_alloc(64, rounded);
    if (!p)
        tb_die("cpu backend: out of host memory allocating %zu bytes (%.1f MiB) for %s", bytes,
               (double)bytes / (1 << 20), what);
    return p;
}

tb_real *cpu_workspace(cpu_state *st, size_t floats_per_thread) {
    if (floats_per_thread > st->ws_stride) {
        size_t stride = (floats_per_thread + 15) / 16 * 16;
        free(st->ws);
        st->ws = cpu_aligned_alloc(stride * (size_t)st->threads * sizeof(tb_real),
                                   "the convolution workspace");
        st->ws_stride = stride;
    }
    return st->ws;
}

/* ---- memory and ordering --------------------------------------------------- */

static void *cpu_alloc(tb_backend *be, size_t bytes) {
    (void)be;
    return cpu_aligned_alloc(bytes, "a tensor");
}

static void cpu_release(tb_backend *be, void *p) {
    (void)be;
    free(p);
}

static void cpu_zero(tb_backend *be, void *p, size_t bytes) {
    (void)be;
    if (bytes) memset(p, 0, bytes);
}

static void cpu_copy(tb_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes) memmove(dst, src, bytes);
}

static void cpu_sync(tb_backend *be) { (void)be; /* every op has finished on return */ }

static void cpu_destroy(tb_backend *be) {
    if (!be) return;
    cpu_state *st = cpu_state_of(be);
    if (st) free(st->ws);
    free(st);
    free(be);
}

/* ---- constructor ------------------------------------------------------------- */

/* "cpus:0-3,8" when this process may run on only some of the online CPUs
 * (bound by the launcher or taskset), "" when it may use them all. */
static void cpu_binding_key(char *buf, size_t len) {
    buf[0] = '\0';
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (CPU_COUNT(&set) >= online) return;
    size_t used = (size_t)snprintf(buf, len, "cpus:");
    for (int c = 0; c < CPU_SETSIZE && used < len; c++) {
        if (!CPU_ISSET(c, &set)) continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set)) e++;
        used += (size_t)snprintf(buf + used, len - used, used > 5 ? ",%d" : "%d", c);
        if (e > c && used < len) used += (size_t)snprintf(buf + used, len - used, "-%d", e);
        c = e;
    }
}

/* CPUs this process may run on (its affinity mask: the launcher's binding,
 * taskset, a cgroup cpuset), 0 when unknown. */
static int cpu_usable_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return CPU_COUNT(&set);
}

/* More threads than CPUs would share them (mpirun binds each rank to one
 * core by default for 1-2 ranks: --threads 2 then runs at half speed): run
 * as many as there are CPUs, and say in one line how to launch for more. */
static int cpu_threads_for(int asked, int local_rank, const char *cpus) {
    int usable = cpu_usable_count();
    if (usable < 1 || asked <= usable) return asked;
    if (local_rank > 0) return usable; /* one line per host is enough */
    if (cpus[0])
        tb_warn("%d compute threads asked for (--threads, or online CPUs / ranks per host), but this rank "
                "may run on only %d CPU%s (%s): running %d; to give each rank %d CPUs launch with "
                "`mpirun --map-by slot:PE=%d --bind-to core` or `mpirun --bind-to none` (Slurm: "
                "--cpus-per-task=%d; launch/local.sh does this)",
                asked, usable, usable > 1 ? "s" : "", cpus, usable, asked, asked, asked);
    else
        tb_warn("%d compute threads asked for (--threads) on a machine with %d CPU%s: running %d", asked,
                usable, usable > 1 ? "s" : "", usable);
    return usable;
}

/* "AMD EPYC 7B13" from /proc/cpuinfo, or "unknown CPU". */
static void cpu_model_name(char *buf, size_t len) {
    snprintf(buf, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *v = strchr(line, ':');
            if (v) {
                v += 1 + strspn(v + 1, " \t");
                v[strcspn(v, "\n")] = '\0';
                snprintf(buf, len, "%s", v);
            }
            break;
        }
    }
    fclose(f);
}

tb_backend *tb_cpu_backend_create(const tb_backend_opts *opts) {
    int threads = opts && opts->threads > 0 ? opts->threads : omp_get_num_procs();
    if (threads < 1) threads = 1;
    char cpus[64];
    cpu_binding_key(cpus, sizeof cpus);
    threads = cpu_threads_for(threads, opts ? opts->device : 0, cpus);
#ifdef TB_HAVE_OPENBLAS_THREADS
    /* One thread pool: each OpenMP thread makes its own single-threaded BLAS
     * call on its share of a GEMM (see cpu_internal.h). */
    openblas_set_num_threads(1);
#endif

    cpu_state *st = cpu_aligned_alloc(sizeof *st, "the CPU backend state");
    memset(st, 0, sizeof *st);
    st->threads = threads;
    st->ws_cap_bytes = CPU_WS_CAP_BYTES;
    st->conv_min_cols = CPU_CONV_MIN_COLS;

    tb_backend *be = cpu_aligned_alloc(sizeof *be, "the CPU backend");
    memset(be, 0, sizeof *be);
    be->name = "cpu";
    be->caps = TB_CAP_NCHW | TB_CAP_REAL;
    be->priv = st;
    be->compute_stream = NULL;
    char model[96];
    cpu_model_name(model, sizeof model);
    snprintf(be->device, sizeof be->device, "%s, %d thread%s", model, threads, threads > 1 ? "s" : "");
    be->threads = threads;
    snprintf(be->device_key, sizeof be->device_key, "%s", cpus);
#ifdef TB_HAVE_OPENBLAS_THREADS
    snprintf(be->versions, sizeof be->versions, "%s; OpenMP %d", openblas_get_config(), _OPENMP);
#else
    snprintf(be->versions, sizeof be->versions, "CBLAS (not OpenBLAS); OpenMP %d", _OPENMP);
#endif

    be->alloc = cpu_alloc;
    be->release = cpu_release;
    be->zero = cpu_zero;
    be->copy_h2d = cpu_copy;
    be->copy_d2h = cpu_copy;
    be->copy_d2d = cpu_copy;
    be->sync = cpu_sync;

    be->conv_plan = cpu_conv_plan;
    be->conv_plan_free = cpu_conv_plan_free;
    be->conv_forward = cpu_conv_forward;
    be->conv_backward_data = cpu_conv_backward_data;
    be->conv_backward_filter = cpu_conv_backward_filter;

    be->bn_forward_train = cpu_bn_forward_train;
    be->bn_forward_infer = cpu_bn_forward_infer;
    be->bn_backward = cpu_bn_backward;

    be->relu_forward = cpu_relu_forward;
    be->relu_backward = cpu_relu_backward;
    be->add_forward = cpu_add_forward;
    be->add_backward = cpu_add_backward;

    be->maxpool_forward = cpu_maxpool_forward;
    be->maxpool_backward = cpu_maxpool_backward;
    be->avgpool_forward = cpu_avgpool_forward;
    be->avgpool_backward = cpu_avgpool_backward;

    be->linear_forward = cpu_linear_forward;
    be->linear_backward = cpu_linear_backward;

    be->softmax_xent = cpu_softmax_xent;
    be->sgd_update = cpu_sgd_update;
    be->count_nonfinite = cpu_count_nonfinite;

    be->destroy = cpu_destroy;
    return be;
}
