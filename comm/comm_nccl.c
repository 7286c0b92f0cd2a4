/* comm_nccl.c - NCCL communicators bootstrapped through MPI (see nccl.h).
 *
 * Non-blocking communicators only: ncclCommInitRankConfig, ncclCommSplit,
 * the collectives and ncclCommFinalize may return ncclInProgress, and
 * wait_ready() polls ncclCommGetAsyncError until the communicator is out of
 * it, under the caller's deadline (NCCL issue 1472: after ncclCommSplit the
 * parent is polled first, then the child). A live-communicator registry
 * lets the abort cleanup and the watchdog call ncclCommAbort on every one
 * of them from any thread before MPI_Abort: on a helper thread, waited for
 * at most TB_NCCL_ABORT_WAIT_S seconds (tb_nccl_run_bounded), after the
 * threads inside NCCL calls on them have left.
 *
 * NCCL's calls on one communicator are not thread-safe: with two ranks a
 * non-blocking collective leaves a background job that the next
 * ncclCommGetAsyncError finishes and frees, so two threads polling at once
 * could free it twice. Every call on a registered communicator holds its
 * slot's call lock for the call alone (not across wait_ready's pauses);
 * the watchdog only tries the lock and skips a communicator in use (its
 * caller is polling it then). */
#define _GNU_SOURCE /* dladdr */
#include "comm/nccl.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <limits.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cuda_check.h"
#include "core/log.h"
#include "core/timer.h"

struct tb_nccl {
    ncclComm_t comm;
    int rank, size, device;
    double timeout;
    int slot;                  /* in the registry */
};

/* ---- the registry of live communicators ------------------------------------------ */

#define MAX_COMMS 64
static _Atomic(ncclComm_t) g_live[MAX_COMMS];
static atomic_int g_aborted = 0;
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_call_mu[MAX_COMMS]; /* one per slot: see the top */
static pthread_once_t g_call_once = PTHREAD_ONCE_INIT;

static void call_locks_init(void) {
    for (int i = 0; i < MAX_COMMS; i++) pthread_mutex_init(&g_call_mu[i], NULL);
}

/* slot < 0: a communicator no other thread can reach (unregistered) */
static void call_lock(int slot) {
    if (slot >= 0) pthread_mutex_lock(&g_call_mu[slot]);
}

static void call_unlock(int slot) {
    if (slot >= 0) pthread_mutex_unlock(&g_call_mu[slot]);
}

/* r = call, under slot's call lock */
#define LOCKED_CALL(slot, r, call)                                                                                    \
    do {                                                                                                                \
        call_lock(slot);                                                                                                \
        (r) = (call);                                                                                                   \
        call_unlock(slot);                                                                                              \
    } while (0)
static int g_cleanup_id = -1;
/* TB_NCCL_ABORT_WAIT_S, read by the first tb_nccl_create (before any
 * communicator is registered, so before any abort can read it) */
static double g_abort_wait_s = TB_NCCL_ABORT_WAIT_DEFAULT_S;

/* Threads inside a call on a registered communicator (enter .. leave; per
 * thread nested calls count once). The abort waits for them to leave
 * before it frees the communicators, and a thread that finds the job
 * ending parks instead of entering: with both atomics sequentially
 * consistent, either the entering thread sees g_aborted or the abort sees
 * it counted. */
static atomic_int g_users = 0;
static _Thread_local int t_depth = 0;

static void leave_all(void) {
    if (t_depth == 0) return;
    t_depth = 0;
    atomic_fetch_sub(&g_users, 1);
}

/* A thread that finds the job ending waits for the end instead of touching
 * an aborted communicator (uncounted, so the abort does not wait for it). */
static void park_if_aborted(void) {
    if (!atomic_load(&g_aborted)) return;
    leave_all();
    for (;;) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

static void enter(void) {
    if (t_depth++ > 0) return;
    atomic_fetch_add(&g_users, 1);
    park_if_aborted();
}

static void leave(void) {
    if (t_depth > 0 && --t_depth == 0) atomic_fetch_sub(&g_users, 1);
}

static void abort_cleanup(void *ctx) {
    (void)ctx;
    tb_nccl_abort_all();
}

static int register_comm(ncclComm_t c) {
    pthread_once(&g_call_once, call_locks_init);
    pthread_mutex_lock(&g_reg_mu);
    if (g_cleanup_id < 0) g_cleanup_id = tb_add_abort_cleanup(abort_cleanup, NULL);
    int slot = -1;
    for (int i = 0; i < MAX_COMMS && slot < 0; i++)
        if (atomic_load(&g_live[i]) == NULL) slot = i;
    if (slot >= 0) atomic_store(&g_live[slot], c);
    pthread_mutex_unlock(&g_reg_mu);
    if (slot < 0) TB_FATAL("more than %d live NCCL communicators", MAX_COMMS);
    return slot;
}

/* Returns 1 when the communicator was still registered (not aborted). */
static int unregister_comm(int slot, ncclComm_t c) {
    pthread_mutex_lock(&g_reg_mu);
    ncclComm_t expected = c;
    int was = atomic_compare_exchange_strong(&g_live[slot], &expected, NULL);
    pthread_mutex_unlock(&g_reg_mu);
    return was;
}

/* The helper thread of tb_nccl_abort_all. Everything it uses is its own:
 * the communicators it takes out of the registry (no one else can reach
 * them then: tb_nccl_destroy finds its slot empty and frees only its
 * wrapper; the watch's poll reads the registry under the same lock), and
 * the static lock and counter. So it may run on after the caller gave up
 * waiting and the job is ending. */
static void abort_registered(void *arg) {
    (void)arg;
    ncclComm_t mine[MAX_COMMS];
    int n = 0;
    pthread_mutex_lock(&g_reg_mu); /* unbounded here: the caller's wait bounds it */
    for (int i = 0; i < MAX_COMMS; i++) {
        ncclComm_t c = atomic_exchange(&g_live[i], NULL);
        if (c) mine[n++] = c;
    }
    pthread_mutex_unlock(&g_reg_mu);
    while (atomic_load(&g_users) > 0) { /* a thread still inside a call on one of them */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < n; i++) (void)ncclCommAbort(mine[i]); /* the job is ending: the result changes nothing */
}

int tb_nccl_abort_all(void) {
    atomic_store(&g_aborted, 1);
    leave_all(); /* this thread is on the abort path: it makes no further NCCL call */
    int live = 0;
    for (int i = 0; i < MAX_COMMS; i++) live += atomic_load(&g_live[i]) != NULL;
    if (!live) return 0;
    double wait_s = g_abort_wait_s;
    int r = tb_nccl_run_bounded(abort_registered, NULL, wait_s);
    if (r == TB_RUN_DONE) return 0;
    /* the helper (if any) may still be inside ncclCommAbort: the job ends
     * through MPI_Abort or _exit (tb_abort), which tear nothing down under it */
    if (r == TB_RUN_NO_THREAD)
        tb_warn("NCCL: no thread could be started for ncclCommAbort; the job ends without it");
    else
        tb_warn("NCCL: the abort of the live communicators (ncclCommAbort) did not return within %g s "
                "(TB_NCCL_ABORT_WAIT_S); the job ends without waiting for it",
                wait_s);
    return 1;
}

/* ---- checks ------------------------------------------------------------------------ */

/* NCCL's own words for the last error: ncclGetLastError, with a hint for the
 * failures a launch causes. */
static void last_error(ncclComm_t c, char *buf, size_t len) {
    const char *last = ncclGetLastError(c);
    if (!last || !last[0]) {
        snprintf(buf, len, "(no message)");
        return;
    }
    int v = 0;
    (void)ncclGetVersion(&v);
    if (strstr(last, "Duplicate GPU"))
        snprintf(buf, len,
                 "%.300s: two ranks on one GPU, which NCCL %d.%d refuses; run one rank per GPU, or share one "
                 "on purpose with --comm mpi --share-gpu (or NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1)",
                 last, v / 10000, v % 10000 / 100);
    else if (strstr(last, "MULTI_RANK_GPU_ENABLE"))
        snprintf(buf, len,
                 "%.300s: ranks share one GPU; NCCL %d.%d allows it with NCCL_MULTI_RANK_GPU_ENABLE=1 exported "
                 "to every rank (and trainbench's --share-gpu), else run one rank per GPU",
                 last, v / 10000, v % 10000 / 100);
    else
        snprintf(buf, len, "%.400s", last);
}

#define TB_NCCL_CHECK(comm, call) nccl_check((call), (comm), #call, __FILE__, __LINE__)
/* ncclSuccess and ncclInProgress pass (the caller polls the latter); any
 * other result ends the job: file:line, rank and host (tb_fatal_at), the
 * call, ncclGetErrorString and ncclGetLastError. */
static ncclResult_t nccl_check(ncclResult_t r, ncclComm_t comm, const char *expr, const char *file, int line) {
    if (r == ncclSuccess || r == ncclInProgress) return r;
    park_if_aborted();
    char last[600];
    last_error(comm, last, sizeof last);
    leave_all(); /* ending the job (or leaving through a fatal trap): no longer inside NCCL */
    tb_fatal_at(file, line, "NCCL: %s failed: %s (ncclResult_t %d); NCCL says: %s", expr, ncclGetErrorString(r),
                (int)r, last);
}

static ncclDataType_t nccl_type(tb_dev_type t) {
    switch (t) {
    case TB_DEV_F32: return ncclFloat32;
    case TB_DEV_F64: return ncclFloat64;
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 24, 0) && !defined(__CUDA_BF16_TYPES_EXIST__)
    /* headers before 2.24 declare ncclBfloat16 only where cuda_bf16.h defines its
     * types (C++): the value every library since 2.10 takes for it */
    case TB_DEV_BF16: return (ncclDataType_t)9;
#else
    case TB_DEV_BF16: return ncclBfloat16;
#endif
    default: return ncclInt64;
    }
}

size_t tb_dev_type_size(tb_dev_type t) { return t == TB_DEV_BF16 ? 2 : t == TB_DEV_F32 ? 4 : 8; }

static void pause_us(long us) {
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

/* Polls c (registered in slot, or -1) out of ncclInProgress. An
 * asynchronous error, or t0 + timeout passing, ends the job with one line
 * saying what was being done. */
static void wait_ready(ncclComm_t c, int slot, const char *what, double t0, double timeout) {
    for (int spins = 0;; spins++) {
        park_if_aborted();
        ncclResult_t st = ncclInProgress, r;
        LOCKED_CALL(slot, r, ncclCommGetAsyncError(c, &st));
        TB_NCCL_CHECK(c, r);
        if (st == ncclSuccess) return;
        if (st != ncclInProgress) {
            char last[600];
            last_error(c, last, sizeof last);
            leave_all();
            tb_die("NCCL: %s failed: %s; NCCL says: %s", what, ncclGetErrorString(st), last);
        }
        if (timeout > 0 && tb_now() - t0 > timeout) {
            leave_all();
            tb_die("NCCL: %s did not complete within %g s (--timeout): a rank has not joined it, or the "
                   "interconnect is stuck; run trainbench preflight with the same launcher to find which",
                   what, timeout);
        }
        if (spins > 200) pause_us(50);
    }
}

int tb_nccl_built(void) { return 1; }

void tb_nccl_library(char *path, size_t len, char *slim, size_t slen) {
    path[0] = slim[0] = '\0';
    Dl_info di;
    if (!dladdr((void *)ncclGetVersion, &di) || !di.dli_fname) {
        snprintf(path, len, "(unknown: dladdr found no file for ncclGetVersion)");
        return;
    }
    char real[PATH_MAX];
    snprintf(path, len, "%s", realpath(di.dli_fname, real) ? real : di.dli_fname);
    /* tests/gpu/slim_nccl.sh's layout: OUT/lib/libnccl.so.2 and OUT/nccl_slim.txt */
    char rec[PATH_MAX + 32];
    snprintf(rec, sizeof rec, "%s", path);
    char *cut = strrchr(rec, '/');
    if (!cut) return;
    *cut = '\0';
    cut = strrchr(rec, '/');
    if (!cut) return;
    snprintf(cut, sizeof rec - (size_t)(cut - rec), "/nccl_slim.txt");
    FILE *f = fopen(rec, "r");
    if (!f) return;
    char line[1024], funcs[600] = "", archs[64] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "only_funcs = ", 13) == 0) snprintf(funcs, sizeof funcs, "%.590s", line + 13);
        if (strncmp(line, "archs = ", 8) == 0) snprintf(archs, sizeof archs, "%.60s", line + 8);
    }
    fclose(f);
    snprintf(slim, slen, "slim build (tests/gpu/slim_nccl.sh): sm %s, ONLY_FUNCS \"%s\"", archs[0] ? archs : "?",
             funcs[0] ? funcs : "?");
}

void tb_nccl_versions(int *compiled, int *loaded) {
    *compiled = NCCL_VERSION_CODE;
    *loaded = 0;
    if (ncclGetVersion(loaded) != ncclSuccess) *loaded = 0;
}

/* ---- communicators ------------------------------------------------------------------ */

static ncclConfig_t nonblocking_config(void) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0) /* ncclConfig_t has no commName before 2.27 */
    cfg.commName = "trainbench";
#endif
    return cfg;
}

static tb_nccl *wrap(ncclComm_t c, int rank, int size, int device, double timeout) {
    tb_nccl *n = calloc(1, sizeof *n);
    if (!n) TB_FATAL("out of host memory");
    n->comm = c;
    n->rank = rank;
    n->size = size;
    n->device = device;
    n->timeout = timeout;
    n->slot = register_comm(c);
    return n;
}

tb_nccl *tb_nccl_create(tb_comm *c, int device, double timeout_s) {
    static int wait_read = 0; /* the first create, before any communicator is registered */
    if (!wait_read) {
        char err[256];
        double w = tb_nccl_abort_wait_s(err, sizeof err);
        if (w < 0) tb_die("%s", err);
        g_abort_wait_s = w;
        wait_read = 1;
    }
    int compiled = 0, loaded = 0;
    tb_nccl_versions(&compiled, &loaded);
    if (loaded < TB_NCCL_MIN_CODE) { /* the library found at run time */
        char lib[1024], slim[8];
        tb_nccl_library(lib, sizeof lib, slim, sizeof slim);
        int major, minor, patch;
        tb_nccl_version_parts(loaded, &major, &minor, &patch);
        tb_die("NCCL %d.%d.%d is loaded (%s); trainbench needs 2.18 or newer (non-blocking communicators, "
               "ncclCommSplit with a config): put a newer libnccl.so.2 first on LD_LIBRARY_PATH",
               major, minor, patch, lib);
    }
    int rank = tb_comm_rank(c), size = tb_comm_size(c);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0) TB_NCCL_CHECK(NULL, ncclGetUniqueId(&id));
    tb_comm_bcast(c, &id, sizeof id, TB_BYTES, 0);
    TB_CUDA_CHECK(cudaSetDevice(device));
    ncclConfig_t cfg = nonblocking_config();
    ncclComm_t comm = NULL;
    double t0 = tb_now();
    TB_NCCL_CHECK(comm, ncclCommInitRankConfig(&comm, size, id, rank, &cfg));
    if (!comm) TB_FATAL("ncclCommInitRankConfig returned no communicator");
    enter(); /* from here it is registered: the abort may take it */
    tb_nccl *n = wrap(comm, rank, size, device, timeout_s);
    char what[96];
    snprintf(what, sizeof what, "creating the NCCL communicator of %d rank%s", size, size > 1 ? "s" : "");
    wait_ready(comm, n->slot, what, t0, timeout_s);
    leave();
    return n;
}

tb_nccl *tb_nccl_first_n(tb_nccl *parent, int n, double timeout_s) {
    enter();
    int member = parent->rank < n;
    TB_CUDA_CHECK(cudaSetDevice(parent->device));
    ncclConfig_t cfg = nonblocking_config();
    ncclComm_t child = NULL;
    double t0 = tb_now();
    char what[96];
    snprintf(what, sizeof what, "splitting the NCCL communicator of the first %d rank%s", n, n > 1 ? "s" : "");
    ncclResult_t r;
    LOCKED_CALL(parent->slot, r,
                ncclCommSplit(parent->comm, member ? 0 : NCCL_SPLIT_NOCOLOR, parent->rank, &child, &cfg));
    TB_NCCL_CHECK(parent->comm, r);
    /* the split is an operation of the parent: it is done (and the child
     * pointer valid) when the parent leaves ncclInProgress */
    wait_ready(parent->comm, parent->slot, what, t0, timeout_s);
    if (!member) {
        if (child) TB_FATAL("ncclCommSplit gave a communicator to a rank without a color");
        leave();
        return NULL;
    }
    if (!child) TB_FATAL("ncclCommSplit gave no communicator to rank %d of the first %d", parent->rank, n);
    tb_nccl *s = wrap(child, parent->rank, n, parent->device, timeout_s);
    wait_ready(child, s->slot, what, t0, timeout_s);
    leave();
    return s;
}

void tb_nccl_destroy(tb_nccl *n) {
    if (!n) return;
    if (unregister_comm(n->slot, n->comm)) {
        TB_CUDA_CHECK(cudaSetDevice(n->device));
        double t0 = tb_now();
        TB_NCCL_CHECK(n->comm, ncclCommFinalize(n->comm));
        wait_ready(n->comm, -1, "finalizing the NCCL communicator", t0, n->timeout); /* unregistered: ours */
        TB_NCCL_CHECK(n->comm, ncclCommDestroy(n->comm));
    }
    free(n);
}

int tb_nccl_rank(const tb_nccl *n) { return n->rank; }
int tb_nccl_size(const tb_nccl *n) { return n->size; }

void tb_nccl_allreduce_sum(tb_nccl *n, const void *send, void *recv, size_t count, tb_dev_type t,
                           void *stream) {
    enter();
    double t0 = tb_now();
    ncclResult_t r;
    LOCKED_CALL(n->slot, r, ncclAllReduce(send, recv, count, nccl_type(t), ncclSum, n->comm, (cudaStream_t)stream));
    if (TB_NCCL_CHECK(n->comm, r) == ncclInProgress)
        wait_ready(n->comm, n->slot, "queueing an NCCL all-reduce", t0, n->timeout);
    leave();
}

void tb_nccl_bcast(tb_nccl *n, void *buf, size_t count, tb_dev_type t, int root, void *stream) {
    enter();
    double t0 = tb_now();
    ncclResult_t r;
    LOCKED_CALL(n->slot, r, ncclBroadcast(buf, buf, count, nccl_type(t), root, n->comm, (cudaStream_t)stream));
    if (TB_NCCL_CHECK(n->comm, r) == ncclInProgress)
        wait_ready(n->comm, n->slot, "queueing an NCCL broadcast", t0, n->timeout);
    leave();
}

void tb_nccl_check_async(tb_nccl *n, const char *what) {
    enter();
    ncclResult_t st = ncclSuccess, r;
    LOCKED_CALL(n->slot, r, ncclCommGetAsyncError(n->comm, &st));
    TB_NCCL_CHECK(n->comm, r);
    if (st == ncclSuccess || st == ncclInProgress) {
        leave();
        return;
    }
    char last[600];
    last_error(n->comm, last, sizeof last);
    leave_all();
    tb_die("NCCL: %s failed: %s; NCCL says: %s", what, ncclGetErrorString(st), last);
}

/* ---- the device watch ---------------------------------------------------------------- */

typedef struct {
    cudaEvent_t ev;
    int64_t step;
    double queued;
    char what[48];
} watch_entry;

static pthread_mutex_t g_watch_mu = PTHREAD_MUTEX_INITIALIZER;
static watch_entry g_watch[TB_DEV_WATCH_MAX];
static int g_watch_head = 0, g_watch_n = 0;   /* a ring: oldest at head */
static int g_watch_device = -1;

void tb_dev_watch_push(void *event, void *stream, int64_t step, const char *what) {
    /* before the lock: a trapped TB_FATAL (a capture's fatal trap) leaves it free */
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    TB_CUDA_CHECK(cudaStreamIsCapturing((cudaStream_t)stream, &cs));
    if (cs != cudaStreamCaptureStatusNone)
        TB_FATAL("tb_dev_watch_push: the %s of step %lld was recorded on a stream that is capturing a CUDA "
                 "graph; the watchdog's cudaEventQuery of it from another thread would break the capture "
                 "(a bug: watch the graph launch's event, pushed after the capture)",
                 what, (long long)step);
    int dev = -1;
    TB_CUDA_CHECK(cudaGetDevice(&dev));
    pthread_mutex_lock(&g_watch_mu);
    g_watch_device = dev;
    /* The callers' events come from rings (a trainer slot's end event, a
     * bucket's end event per slot) and are recorded again a few steps
     * later. cudaEventQuery answers for the latest record only, so an
     * entry of an earlier record would read "pending" while the step it
     * stands for is long done: the head of the watch would stay stuck on
     * it, naming an old step as hung for ever longer. The earlier record
     * is superseded: the new one is on the same stream, after it, so it
     * cannot complete first, and the new entry watches for both. */
    for (int i = 0; i < g_watch_n; i++) {
        watch_entry *o = &g_watch[(g_watch_head + i) % TB_DEV_WATCH_MAX];
        if (o->ev == (cudaEvent_t)event) o->ev = NULL;
    }
    /* full: drop the oldest (the watch then sees the newer ones, which
     * cannot finish first) */
    while (g_watch_n == TB_DEV_WATCH_MAX) {
        g_watch_head = (g_watch_head + 1) % TB_DEV_WATCH_MAX;
        g_watch_n--;
    }
    watch_entry *e = &g_watch[(g_watch_head + g_watch_n) % TB_DEV_WATCH_MAX];
    e->ev = (cudaEvent_t)event;
    e->step = step;
    e->queued = tb_now();
    snprintf(e->what, sizeof e->what, "%s", what);
    g_watch_n++;
    pthread_mutex_unlock(&g_watch_mu);
}

void tb_dev_watch_clear(void) {
    pthread_mutex_lock(&g_watch_mu);
    g_watch_head = g_watch_n = 0;
    pthread_mutex_unlock(&g_watch_mu);
}

static atomic_int g_watch_capturing = 0;

void tb_dev_watch_capturing(int on) {
    atomic_store(&g_watch_capturing, on);
    if (!on) return;
    /* a poll that read the flag clear may be inside a call: each slot's
     * lock taken once lets it finish before the capture begins (a later
     * poll sees the flag after its trylock and leaves the slot alone) */
    pthread_once(&g_call_once, call_locks_init);
    for (int i = 0; i < MAX_COMMS; i++) {
        pthread_mutex_lock(&g_call_mu[i]);
        pthread_mutex_unlock(&g_call_mu[i]);
    }
}

void tb_dev_watch_poll(tb_dev_watch_state *st) {
    memset(st, 0, sizeof *st);
    if (atomic_load(&g_aborted)) return;
    static _Thread_local int t_device = -1;
    pthread_mutex_lock(&g_watch_mu);
    if (g_watch_device >= 0 && t_device != g_watch_device) {
        if (cudaSetDevice(g_watch_device) == cudaSuccess) t_device = g_watch_device;
        else (void)cudaGetLastError();
    }
    /* completed entries leave from the head; the first pending one is the oldest */
    while (g_watch_n > 0) {
        watch_entry *e = &g_watch[g_watch_head];
        cudaError_t r = e->ev ? cudaEventQuery(e->ev) : cudaSuccess; /* NULL: superseded (see push) */
        /* Any other answer is an error naming the entry, cudaErrorCapturedEvent
         * included: the event was last recorded with a plain record inside an
         * open capture (a push naming another stream than the capturing one
         * gets past push's check). CUDA 13 answered the first such query
         * cudaErrorCapturedEvent, every later one cudaErrorInvalidValue, and
         * the query invalidated the capture: no answer here that could pass
         * the entry as done (tests/test_nccl_watch.c, guard). */
        if (r == cudaErrorNotReady) {
            (void)cudaGetLastError();
            st->pending = 1;
            st->step = e->step;
            st->pending_s = tb_now() - e->queued;
            snprintf(st->what, sizeof st->what, "%s", e->what);
            break;
        }
        if (r != cudaSuccess) {
            (void)cudaGetLastError();
            st->nccl_error = 1;
            snprintf(st->error, sizeof st->error, "CUDA reports %s (%s) for the %s of step %lld",
                     cudaGetErrorString(r), cudaGetErrorName(r), e->what, (long long)e->step);
            break;
        }
        g_watch_head = (g_watch_head + 1) % TB_DEV_WATCH_MAX;
        g_watch_n--;
    }
    pthread_mutex_unlock(&g_watch_mu);
    if (st->nccl_error || atomic_load(&g_watch_capturing)) return;
    /* every live communicator's asynchronous error (under the registry lock,
     * so none is destroyed meanwhile; one in use by another thread is
     * skipped: that thread is polling it) */
    pthread_mutex_lock(&g_reg_mu);
    for (int i = 0; i < MAX_COMMS && !st->nccl_error; i++) {
        ncclComm_t c = atomic_load(&g_live[i]);
        if (!c || pthread_mutex_trylock(&g_call_mu[i]) != 0) continue;
        if (atomic_load(&g_watch_capturing)) { /* a capture began meanwhile */
            pthread_mutex_unlock(&g_call_mu[i]);
            break;
        }
        ncclResult_t as = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(c, &as);
        pthread_mutex_unlock(&g_call_mu[i]);
        if (r != ncclSuccess || as == ncclSuccess || as == ncclInProgress) continue;
        char last[600];
        last_error(c, last, sizeof last);
        st->nccl_error = 1;
        snprintf(st->error, sizeof st->error, "NCCL reports %s: %.200s", ncclGetErrorString(as), last);
    }
    pthread_mutex_unlock(&g_reg_mu);
}
