/* cpu_backend.c - the CPU backend's table: memory, ordering, threads.
 *
 * float32 NCHW only. Memory is ordinary host memory, 64-byte aligned; every
 * op runs to completion before it returns, so sync is a no-op, streams are
 * tokens, and an event completes when it is recorded (holding a host
 * timestamp, so elapsed times work; tb_cpu_event_hold keeps them pending for
 * tests). The ops live in one file per family (cpu_conv.c, cpu_bn.c, ...),
 * declared in cpu_internal.h.
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

#include "core/log.h"
#include "core/timer.h"
#include "model/cpu/cpu_blas.h"
#include "model/cpu/cpu_internal.h"

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
        tb_die("cpu backend: out of host memory allocating %zu bytes (%.1f MiB) for %s; a smaller --batch-size or "
               "--image-size needs less",
               bytes, (double)bytes / (1 << 20), what);
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

/* be->alloc blocks carry their size in a 64-byte header, for the accounting. */
#define CPU_ALLOC_HEADER 64

static void *cpu_alloc(tb_backend *be, size_t bytes) {
    cpu_state *st = cpu_state_of(be);
    if (bytes > (size_t)-1 - CPU_ALLOC_HEADER)
        tb_die("cpu backend: cannot allocate %zu bytes for a tensor", bytes);
    char *p = cpu_aligned_alloc(bytes + CPU_ALLOC_HEADER, "a tensor");
    memcpy(p, &bytes, sizeof bytes);
    pthread_mutex_lock(&st->lock);
    st->mem_in_use += bytes;
    if (st->mem_in_use > st->mem_peak) st->mem_peak = st->mem_in_use;
    pthread_mutex_unlock(&st->lock);
    return p + CPU_ALLOC_HEADER;
}

static void cpu_release(tb_backend *be, void *p) {
    if (!p) return;
    cpu_state *st = cpu_state_of(be);
    char *base = (char *)p - CPU_ALLOC_HEADER;
    size_t bytes;
    memcpy(&bytes, base, sizeof bytes);
    pthread_mutex_lock(&st->lock);
    st->mem_in_use -= bytes;
    pthread_mutex_unlock(&st->lock);
    free(base);
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

static void cpu_memory(tb_backend *be, tb_mem_info *out) {
    cpu_state *st = cpu_state_of(be);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&st->lock);
    out->in_use = st->mem_in_use;
    out->peak = st->mem_peak;
    pthread_mutex_unlock(&st->lock);
}

/* "Pinned" memory is plain host memory here; the copy is done on return. */
static void *cpu_host_alloc(tb_backend *be, size_t bytes) {
    (void)be;
    return cpu_aligned_alloc(bytes, "host staging memory");
}

static void cpu_host_free(tb_backend *be, void *p) {
    (void)be;
    free(p);
}

static void cpu_copy_h2d_async(tb_backend *be, void *dst, const void *src, size_t bytes,
                               tb_stream *s) {
    (void)s;
    cpu_copy(be, dst, src, bytes);
}

/* ---- streams and events (an emulation) --------------------------------------- */

struct tb_event {
    double t;                 /* host time it completed (tb_now) */
    int done;                 /* 1: complete */
    struct tb_event *prev, *next; /* cpu_state.events */
};

/* A stream is a token: distinct from NULL (the compute stream), nothing else. */
static tb_stream *cpu_stream_create(tb_backend *be) {
    (void)be;
    return cpu_aligned_alloc(64, "a stream token");
}

static void cpu_stream_destroy(tb_backend *be, tb_stream *s) {
    (void)be;
    free(s);
}

static tb_event *cpu_event_create(tb_backend *be, int timing) {
    (void)timing;
    cpu_state *st = cpu_state_of(be);
    tb_event *e = cpu_aligned_alloc(sizeof *e, "an event");
    memset(e, 0, sizeof *e);
    e->done = 1; /* like a fresh cudaEvent: querying it says complete */
    e->t = tb_now();
    pthread_mutex_lock(&st->lock);
    e->next = st->events;
    if (st->events) st->events->prev = e;
    st->events = e;
    pthread_mutex_unlock(&st->lock);
    return e;
}

static void cpu_event_destroy(tb_backend *be, tb_event *e) {
    if (!e) return;
    cpu_state *st = cpu_state_of(be);
    pthread_mutex_lock(&st->lock);
    if (e->prev) e->prev->next = e->next;
    else st->events = e->next;
    if (e->next) e->next->prev = e->prev;
    pthread_mutex_unlock(&st->lock);
    free(e);
}

static void cpu_event_record(tb_backend *be, tb_event *e, tb_stream *s) {
    (void)s;
    cpu_state *st = cpu_state_of(be);
    pthread_mutex_lock(&st->lock);
    e->done = !st->ev_hold;
    e->t = tb_now();
    pthread_mutex_unlock(&st->lock);
}

static void cpu_stream_wait(tb_backend *be, tb_stream *s, tb_event *e) {
    (void)be, (void)s, (void)e; /* the work e stands for has already run */
}

static void cpu_event_wait(tb_backend *be, tb_event *e) {
    cpu_state *st = cpu_state_of(be);
    pthread_mutex_lock(&st->lock);
    if (!e->done) { /* held by the test switch: the wait is what completes it */
        e->done = 1;
        e->t = tb_now();
        st->ev_forced_waits++;
    }
    pthread_mutex_unlock(&st->lock);
}

static int cpu_event_done(tb_backend *be, tb_event *e) {
    cpu_state *st = cpu_state_of(be);
    pthread_mutex_lock(&st->lock);
    int d = e->done;
    pthread_mutex_unlock(&st->lock);
    return d;
}

static double cpu_event_elapsed_ms(tb_backend *be, tb_event *a, tb_event *b) {
    if (!cpu_event_done(be, a) || !cpu_event_done(be, b))
        TB_FATAL("cpu event_elapsed_ms: an event is still pending");
    return (b->t - a->t) * 1e3;
}

static void cpu_stream_hold(tb_backend *be, tb_stream *s, double ms) { (void)be, (void)s, (void)ms; }

static void *cpu_native(tb_backend *be, void *obj) {
    (void)be, (void)obj;
    return NULL;
}
static void *cpu_native_stream(tb_backend *be, tb_stream *s) { return cpu_native(be, s); }
static void *cpu_native_event(tb_backend *be, tb_event *e) { return cpu_native(be, e); }

/* One queue: every op runs to completion in the order it is called, so the
 * weight gradient never goes beside the data gradient (backend.h). */
static int cpu_branch_begin(tb_backend *be) {
    (void)be;
    return 0;
}
static void cpu_branch_end(tb_backend *be) {
    (void)be;
    TB_FATAL("cpu branch_end: no branch began (branch_begin gave 0)");
}
static void cpu_branch_join(tb_backend *be) {
    (void)be;
    TB_FATAL("cpu branch_join: no branch began (branch_begin gave 0)");
}

static void cpu_capture_unwind(tb_backend *be) { (void)be; /* no branches, no captures */ }

static void release_locked(cpu_state *st) {
    double now = tb_now();
    for (tb_event *e = st->events; e; e = e->next)
        if (!e->done) {
            e->done = 1;
            e->t = now;
        }
}

void tb_cpu_event_hold(tb_backend *be, int on) {
    cpu_state *st = cpu_state_of(be);
    pthread_mutex_lock(&st->lock);
    st->ev_hold = on;
    if (!on) release_locked(st);
    pthread_mutex_unlock(&st->lock);
}

void tb_cpu_event_release(tb_backend *be) {
    cpu_state *st = cpu_state_of(be);
    pthread_mutex_lock(&st->lock);
    release_locked(st);
    pthread_mutex_unlock(&st->lock);
}

long tb_cpu_event_forced_waits(tb_backend *be) {
    cpu_state *st = cpu_state_of(be);
    pthread_mutex_lock(&st->lock);
    long n = st->ev_forced_waits;
    pthread_mutex_unlock(&st->lock);
    return n;
}

static void cpu_destroy(tb_backend *be) {
    if (!be) return;
    cpu_state *st = cpu_state_of(be);
    if (st) {
        free(st->ws);
        pthread_mutex_destroy(&st->lock);
    }
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
        tb_warn("%d compute threads asked for (--threads, or its default: the job's CPUs on the host / its ranks "
                "there), but this rank may run on only %d CPU%s (%s): running %d; to give each rank %d CPUs launch "
                "with `mpirun --map-by slot:PE=%d --bind-to core` or `mpirun --bind-to none` (Slurm: "
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
    if (!(opts && opts->threads_over_cpus)) threads = cpu_threads_for(threads, opts ? opts->local_rank : 0, cpus);
    /* One thread pool: each OpenMP thread makes its own single-threaded BLAS
     * call on its share of a GEMM (see cpu_internal.h); a user's
     * OPENBLAS_NUM_THREADS stands, with a line when it oversubscribes. */
    int blas_threads = 1;
    char blas_note[512];
    tb_cpu_blas_threads(threads, &blas_threads, blas_note, sizeof blas_note);
    if (blas_note[0] && tb_log_rank() <= 0) tb_warn("%s", blas_note);

    cpu_state *st = cpu_aligned_alloc(sizeof *st, "the CPU backend state");
    memset(st, 0, sizeof *st);
    st->threads = threads;
    st->ws_cap_bytes = CPU_WS_CAP_BYTES;
    st->conv_min_cols = CPU_CONV_MIN_COLS;
    pthread_mutex_init(&st->lock, NULL);

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
    const tb_cpu_blas_info *blas = tb_cpu_blas_info_get();
    /* the library's identity only: the kernels (and the threads) may differ
     * between ranks on different CPUs; they are reported beside it */
    snprintf(be->versions, sizeof be->versions, "%.200s; OpenMP %d", blas->identity, _OPENMP);

    be->alloc = cpu_alloc;
    be->release = cpu_release;
    be->zero = cpu_zero;
    be->copy_h2d = cpu_copy;
    be->copy_d2h = cpu_copy;
    be->copy_d2d = cpu_copy;
    be->sync = cpu_sync;
    be->memory = cpu_memory;
    be->host_alloc = cpu_host_alloc;
    be->host_free = cpu_host_free;
    be->copy_h2d_async = cpu_copy_h2d_async;
    be->stream_create = cpu_stream_create;
    be->stream_destroy = cpu_stream_destroy;
    be->event_create = cpu_event_create;
    be->event_destroy = cpu_event_destroy;
    be->event_record = cpu_event_record;
    be->stream_wait = cpu_stream_wait;
    be->event_wait = cpu_event_wait;
    be->event_done = cpu_event_done;
    be->event_elapsed_ms = cpu_event_elapsed_ms;
    be->stream_hold = cpu_stream_hold;
    be->native_stream = cpu_native_stream;
    be->native_event = cpu_native_event;

    be->conv_plan = cpu_conv_plan;
    be->conv_plan_free = cpu_conv_plan_free;
    be->conv_plan_describe = cpu_conv_plan_describe;
    be->conv_forward = cpu_conv_forward;
    be->conv_backward_data = cpu_conv_backward_data;
    be->conv_backward_filter = cpu_conv_backward_filter;
    be->branch_begin = cpu_branch_begin;
    be->branch_end = cpu_branch_end;
    be->branch_join = cpu_branch_join;
    be->capture_unwind = cpu_capture_unwind;

    be->bn_plan = cpu_bn_plan;
    be->bn_plan_free = cpu_bn_plan_free;
    be->bn_plan_describe = cpu_bn_plan_describe;
    be->bn_forward_train = cpu_bn_forward_train;
    be->bn_forward_infer = cpu_bn_forward_infer;
    be->bn_backward = cpu_bn_backward;
    be->bn_tune = cpu_bn_tune;

    be->fconv_plan = cpu_fconv_plan;
    be->fconv_plan_free = cpu_fconv_plan_free;
    be->fconv_plan_describe = cpu_fconv_plan_describe;
    be->fconv_forward = cpu_fconv_forward;
    be->bn_finalize = cpu_bn_finalize;
    be->bn_apply = cpu_bn_apply;
    be->fconv_backward_filter = cpu_fconv_backward_filter;
    be->fconv_backward_data = cpu_fconv_backward_data;
    be->bn_input_grad = cpu_bn_input_grad;
    be->plan_session = cpu_plan_session;
    be->choice_get = cpu_choice_get;
    be->choice_put = cpu_choice_put;

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
    be->loss_scale_update = cpu_loss_scale_update;
    be->convert = cpu_convert;
    be->convert_many = cpu_convert_many;
    be->input_u8 = cpu_input_u8;
    be->input_rows = cpu_input_rows;
    be->count_nonfinite = cpu_count_nonfinite;
    be->check_nonfinite = cpu_check_nonfinite;

    be->destroy = cpu_destroy;
    return be;
}
