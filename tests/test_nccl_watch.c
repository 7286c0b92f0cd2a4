/* test_nccl_watch.c - on one GPU, what the NCCL path's reviews flagged as
 * never run: the watchdog's queries around CUDA graph captures, the
 * communicator split with a rank outside every colour, and how long
 * finalize+destroy and the (bounded) abort take on an idle communicator.
 * One process, a 1-rank non-blocking communicator (tb_nccl_create:
 * ncclGetUniqueId, ncclCommInitRankConfig with nranks 1).
 *
 * (A) A second host thread does what the watchdog's thread does: every
 *     ~50 us it calls tb_dev_watch_poll (cudaEventQuery on the watched
 *     events, ncclCommGetAsyncError on the live communicators) and also
 *     queries every test event but the last two phases' plain one itself
 *     (cudaEventQuery), counting the answers per phase:
 *       eager     an NCCL all-reduce after 27+ ms of memsets, its events
 *                 recorded eagerly and pushed: the watch must see it
 *                 pending, then done;
 *       capture   the watch cleared (as the trainer does), a capture open
 *                 on the main thread (thread-local mode, as the trainer's)
 *                 for 0.2 s with the same events recorded inside it as
 *                 external event-record nodes (tb_gpu_record_timing, the
 *                 trainer's E_END and bucket events): the capture must
 *                 still end in a graph, and no query may answer
 *                 cudaErrorCapturedEvent or any other error;
 *       captured  between the capture's end and the first launch: same;
 *       replay    the graph launched with the captured events (slot 0) and
 *                 retargeted to other events (slot 1), the slots' end
 *                 events pushed as the trainer pushes E_END: the watch
 *                 sees them pending, then done, no error; the slot-1
 *                 events were recorded by the replay (elapsed time > 0);
 *       refuse    an event recorded with a plain cudaEventRecord inside an
 *                 open capture, pushed naming the capturing stream (the
 *                 trainer never does: its pushes skip captures):
 *                 tb_dev_watch_push refuses it with a fatal message naming
 *                 the entry (trapped here); the watch stays empty, and the
 *                 capture, whose event nobody queried, ends in a graph;
 *       guard     the same record pushed naming another (idle) stream, so
 *                 past push's check: what a push inside a capture does.
 *                 The first GPU run (H100, CUDA 13.0, driver 580) showed:
 *                 the watchdog thread's first cudaEventQuery of the event
 *                 answered cudaErrorCapturedEvent, every later one
 *                 cudaErrorInvalidValue, and the capture was invalidated
 *                 (cudaStreamEndCapture: "operation failed due to a
 *                 previous error during capture"). So such a push breaks
 *                 the capture; what the test requires is that
 *                 tb_dev_watch_poll then reports an error naming the entry
 *                 (not a hang, not a silent pass). Its first and last
 *                 messages and the capture's fate are printed.
 * (B) tb_nccl_first_n(parent, 1): ncclCommSplit with colour 0, a 1-rank
 *     child that all-reduces; tb_nccl_first_n(parent, 0): every rank
 *     (the one) passes NCCL_SPLIT_NOCOLOR and gets no communicator; the
 *     parent all-reduces after both.
 * (C) times of tb_nccl_destroy (ncclCommFinalize polled, ncclCommDestroy)
 *     and of tb_nccl_abort_all (ncclCommAbort on the helper thread, waited
 *     for at most TB_NCCL_ABORT_WAIT_S) on idle communicators; the abort
 *     must return within the bound.
 * Exits 77 ("SKIP: ...") without a CUDA device or without NCCL. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/nccl.h"
#include "core/cuda_check.h"
#include "core/log.h"
#include "core/timer.h"
#include "src/device/gpu_runtime.h"
#include "tests/tb_test.h"

enum { PH_EAGER, PH_CAPTURE, PH_CAPTURED, PH_REPLAY, PH_REFUSE, PH_GUARD, PH_COUNT };
static const char *const ph_name[PH_COUNT] = {"eager", "capture", "captured", "replay", "refuse", "guard"};
/* X0 X1 X2: start, after the memsets, after the all-reduce (eager) or a
 * small memset (captured); Y0..Y2 the same for slot 1; PLAIN: the refuse
 * and guard phases' (queried by tb_dev_watch_poll only: the watcher's own
 * query would break the refuse phase's capture) */
enum { EV_X0, EV_X1, EV_X2, EV_Y0, EV_Y1, EV_Y2, EV_PLAIN, EV_COUNT };
static const char *const ev_name[EV_COUNT] = {"X0", "X1", "X2", "Y0", "Y1", "Y2", "plain"};

typedef struct {
    long success, not_ready, captured, other;
    char other_name[64];
} tally;

/* Written by the watcher thread; the main thread reads tallies after
 * joining it, and loops[] (atomic) meanwhile. */
static struct {
    cudaEvent_t ev[EV_COUNT];
    atomic_int phase; /* -1: stop */
    atomic_long loops[PH_COUNT];
    tally t[PH_COUNT][EV_COUNT];
    long watch_pending[PH_COUNT], watch_error[PH_COUNT];
    char watch_msg[300], watch_last[300]; /* the first and the latest error */
} W;

#define BIG ((size_t)512 << 20)
#define BUSY 256 /* memsets of BIG: 128 GiB written, >= 27 ms at 4.8 TB/s */

static void *watcher(void *arg) {
    (void)arg;
    TB_CUDA_CHECK(cudaSetDevice(0));
    for (;;) {
        int ph = atomic_load(&W.phase);
        if (ph < 0) break;
        for (int e = 0; e < EV_PLAIN; e++) {
            cudaError_t r = cudaEventQuery(W.ev[e]);
            tally *t = &W.t[ph][e];
            if (r == cudaSuccess) t->success++;
            else if (r == cudaErrorNotReady) t->not_ready++;
            else if (r == cudaErrorCapturedEvent) t->captured++;
            else if (t->other++ == 0) snprintf(t->other_name, sizeof t->other_name, "%s", cudaGetErrorName(r));
            if (r != cudaSuccess) (void)cudaGetLastError();
        }
        tb_dev_watch_state st;
        tb_dev_watch_poll(&st);
        W.watch_pending[ph] += st.pending;
        if (st.nccl_error) {
            if (W.watch_error[ph]++ == 0) snprintf(W.watch_msg, sizeof W.watch_msg, "%s", st.error);
            snprintf(W.watch_last, sizeof W.watch_last, "%s", st.error);
        }
        atomic_fetch_add(&W.loops[ph], 1);
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Waits until the watcher has gone round k more times in phase ph (5 s at most). */
static void wait_loops(int ph, long k) {
    long want = atomic_load(&W.loops[ph]) + k;
    double t0 = tb_now();
    while (atomic_load(&W.loops[ph]) < want) {
        if (tb_now() - t0 > 5) {
            TB_CHECK(0, "phase %s: the watcher thread went round %ld of %ld times in 5 s (blocked in a CUDA or "
                        "NCCL call?)",
                     ph_name[ph], atomic_load(&W.loops[ph]) - (want - k), k);
            return;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

static void busy(void *big, int n, cudaStream_t s) {
    for (int i = 0; i < n; i++) TB_CUDA_CHECK(cudaMemsetAsync(big, i & 0xff, BIG, s));
}

/* The refuse and guard cases' start: the watch cleared, phase ph entered,
 * a capture opened on s holding some work and e recorded with a plain
 * cudaEventRecord. 0 (the failure checked) when the capture did not begin. */
static int open_plain_capture(int ph, void *big, cudaEvent_t e, cudaStream_t s) {
    char why[256] = "";
    tb_dev_watch_clear();
    atomic_store(&W.phase, ph);
    wait_loops(ph, 10);
    if (tb_gpu_capture_begin(s, why, sizeof why) != 0) {
        TB_CHECK(0, "cudaStreamBeginCapture (%s) failed: %s", ph_name[ph], why);
        return 0;
    }
    busy(big, 8, s);
    TB_CUDA_CHECK(cudaEventRecord(e, s));
    return 1;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* 1 when the count floats at d (device) all equal v. */
static int all_equal(const float *d, size_t count, float v) {
    float *h = malloc(count * sizeof *h);
    if (!h) return 0;
    TB_CUDA_CHECK(cudaMemcpy(h, d, count * sizeof *h, cudaMemcpyDeviceToHost));
    int ok = 1;
    for (size_t i = 0; i < count; i++) ok &= h[i] == v;
    free(h);
    return ok;
}

/* Elapsed ms from a to b, or -1 (printing CUDA's answer) when CUDA cannot say. */
static float elapsed_ms(cudaEvent_t a, cudaEvent_t b, const char *what) {
    float ms = -1;
    cudaError_t r = cudaEventElapsedTime(&ms, a, b);
    if (r != cudaSuccess) {
        (void)cudaGetLastError();
        printf("# %s: cudaEventElapsedTime: %s\n", what, cudaGetErrorName(r));
        return -1;
    }
    return ms;
}

/* Each event of evs in phase ph answered only success / not ready. */
static void check_clean(int ph, const int *evs, int n) {
    for (int i = 0; i < n; i++) {
        const tally *t = &W.t[ph][evs[i]];
        TB_CHECK(t->captured == 0 && t->other == 0,
                 "phase %s, event %s: cudaEventQuery from the watcher thread answered cudaErrorCapturedEvent %ld "
                 "times and other errors %ld times (%s); it must answer cudaSuccess or cudaErrorNotReady",
                 ph_name[ph], ev_name[evs[i]], t->captured, t->other, t->other ? t->other_name : "-");
    }
    TB_CHECK(W.watch_error[ph] == 0, "phase %s: tb_dev_watch_poll reported an error %ld times: %s", ph_name[ph],
             W.watch_error[ph], W.watch_msg);
}

static void print_tallies(void) {
    for (int p = 0; p < PH_COUNT; p++) {
        printf("# watcher, phase %-8s %6ld rounds, watch pending in %ld:", ph_name[p], atomic_load(&W.loops[p]),
               W.watch_pending[p]);
        for (int e = 0; e < EV_PLAIN; e++) {
            const tally *t = &W.t[p][e];
            printf(" %s %ld/%ld/%ld/%ld%s%s", ev_name[e], t->success, t->not_ready, t->captured, t->other,
                   t->other ? ":" : "", t->other ? t->other_name : "");
        }
        printf("\n");
    }
    printf("# (per event: cudaSuccess / cudaErrorNotReady / cudaErrorCapturedEvent / other)\n");
}

static void test_watch(tb_nccl *n, float *dsum, size_t count, void *big, cudaStream_t s) {
    cudaEvent_t *ev = W.ev;
    void *X[3] = {ev[EV_X0], ev[EV_X1], ev[EV_X2]}, *Y[3] = {ev[EV_Y0], ev[EV_Y1], ev[EV_Y2]};
    pthread_t th;
    atomic_store(&W.phase, PH_EAGER);
    if (pthread_create(&th, NULL, watcher, NULL) != 0) TB_FATAL("cannot start the watcher thread");

    /* eager: memsets, then the all-reduce, events recorded and pushed as
     * grad_sync_dev pushes a bucket's */
    wait_loops(PH_EAGER, 10);
    tb_gpu_record_timing(ev[EV_X0], s);
    busy(big, BUSY, s);
    tb_gpu_record_timing(ev[EV_X1], s);
    tb_nccl_allreduce_sum(n, dsum, dsum, count, TB_DEV_F32, s);
    tb_gpu_record_timing(ev[EV_X2], s);
    tb_dev_watch_push(ev[EV_X2], s, 1, "NCCL all-reduce (eager)");
    TB_CUDA_CHECK(cudaStreamSynchronize(s));
    wait_loops(PH_EAGER, 20);
    TB_CHECK(all_equal(dsum, count, 1.0f), "the eager 1-rank all-reduce changed its input (want 1.0 everywhere)");

    /* capture: as the trainer, idle device and an empty watch first */
    tb_dev_watch_clear();
    atomic_store(&W.phase, PH_CAPTURE);
    wait_loops(PH_CAPTURE, 10);
    char why[256] = "";
    tb_gpu_graph *g = NULL;
    if (tb_gpu_capture_begin(s, why, sizeof why) != 0) {
        TB_CHECK(0, "cudaStreamBeginCapture failed: %s", why);
    } else {
        tb_gpu_record_timing(ev[EV_X0], s);
        busy(big, BUSY, s);
        tb_gpu_record_timing(ev[EV_X1], s);
        TB_CUDA_CHECK(cudaMemsetAsync(dsum, 0, count * sizeof *dsum, s));
        tb_gpu_record_timing(ev[EV_X2], s);
        long before = atomic_load(&W.loops[PH_CAPTURE]);
        sleep_s(0.2); /* the capture open while the watcher queries */
        long during = atomic_load(&W.loops[PH_CAPTURE]) - before;
        printf("# the watcher went round %ld times while the capture was open\n", during);
        TB_CHECK(during >= 100, "the watcher went round only %ld times in 0.2 s of open capture", during);
        g = tb_gpu_capture_end(s, X, 3, why, sizeof why);
        TB_CHECK(g != NULL, "the capture did not survive the watcher's queries from another thread: %s", why);
    }
    atomic_store(&W.phase, PH_CAPTURED);
    wait_loops(PH_CAPTURED, 50);

    /* replay: slot 0's events as captured, then slot 1's, each end pushed */
    atomic_store(&W.phase, PH_REPLAY);
    if (g) {
        printf("# captured graph: %d nodes\n", tb_gpu_graph_nodes(g));
        tb_gpu_graph_launch(g, s, X);
        tb_dev_watch_push(ev[EV_X2], s, 2, "CUDA graph step (slot 0)");
        tb_gpu_graph_launch(g, s, Y);
        tb_dev_watch_push(ev[EV_Y2], s, 3, "CUDA graph step (slot 1)");
        TB_CUDA_CHECK(cudaStreamSynchronize(s));
        wait_loops(PH_REPLAY, 20);
        float mx = elapsed_ms(ev[EV_X0], ev[EV_X1], "slot 0 memsets");
        float my = elapsed_ms(ev[EV_Y0], ev[EV_Y1], "slot 1 memsets");
        printf("# replayed memsets timed by the graph's event nodes: slot 0 %.3f ms, slot 1 %.3f ms\n", mx, my);
        TB_CHECK(mx > 0 && my > 0,
                 "the replayed graph's event nodes did not time the memsets (slot 0 %.3f ms, slot 1 %.3f ms)", mx,
                 my);
        TB_CHECK(all_equal(dsum, count, 0.0f), "the replayed graph's memset of the sum buffer did not run");
    }

    /* refuse: a plain record inside an open capture, pushed naming the
     * capturing stream: push ends the job (trapped) before queueing it */
    if (open_plain_capture(PH_REFUSE, big, ev[EV_PLAIN], s)) {
        static tb_fatal_trap trap; /* static: not clobbered by the longjmp */
        volatile int refused = 0;
        if (setjmp(trap.env) == 0) {
            tb_fatal_trap_set(&trap);
            tb_dev_watch_push(ev[EV_PLAIN], s, 4, "plain record inside a capture");
            tb_fatal_trap_set(NULL);
        } else {
            refused = 1;
        }
        printf("# refuse: %s\n", refused ? trap.msg : "tb_dev_watch_push took an event of a capturing stream");
        TB_CHECK(refused && strstr(trap.msg, "plain record inside a capture of step 4") &&
                     strstr(trap.msg, "capturing a CUDA graph"),
                 "refuse: tb_dev_watch_push of an event recorded inside an open capture must end the job naming "
                 "the entry and the capture");
        wait_loops(PH_REFUSE, 50);
        tb_gpu_graph *g3 = tb_gpu_capture_end(s, NULL, 0, why, sizeof why);
        TB_CHECK(g3 != NULL, "refuse: the capture did not end in a graph after the refused push: %s", why);
        tb_gpu_graph_destroy(g3);
    }

    /* guard: the same, pushed naming an idle stream (past push's check) */
    cudaStream_t other;
    TB_CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    if (open_plain_capture(PH_GUARD, big, ev[EV_PLAIN], s)) {
        tb_dev_watch_push(ev[EV_PLAIN], other, 5, "plain record inside a capture");
        wait_loops(PH_GUARD, 200); /* the watcher keeps going round: the poll does not hang */
        atomic_store(&W.phase, -1); /* the guard's counts: while the capture is open */
        pthread_join(th, NULL);
        tb_dev_watch_clear();
        tb_gpu_graph *g2 = tb_gpu_capture_end(s, NULL, 0, why, sizeof why);
        printf("# guard: the capture with a plain-recorded event queried from another thread %s%s\n",
               g2 ? "ended in a graph (CUDA no longer breaks it: update the notes in comm/nccl.h)" : "failed: ",
               g2 ? "" : why);
        tb_gpu_graph_destroy(g2);
    }
    if (atomic_load(&W.phase) >= 0) {
        atomic_store(&W.phase, -1);
        pthread_join(th, NULL);
    }
    TB_CUDA_CHECK(cudaStreamSynchronize(s));
    TB_CUDA_CHECK(cudaStreamDestroy(other));
    tb_gpu_graph_destroy(g);

    print_tallies();
    const int eager_evs[] = {EV_X0, EV_X1, EV_X2};
    check_clean(PH_EAGER, eager_evs, 3);
    TB_CHECK(W.t[PH_EAGER][EV_X2].not_ready > 0 && W.watch_pending[PH_EAGER] > 0,
             "eager: the watcher never saw the all-reduce pending (event %ld times, watch %ld times)",
             W.t[PH_EAGER][EV_X2].not_ready, W.watch_pending[PH_EAGER]);
    const int slot_evs[] = {EV_X0, EV_X1, EV_X2, EV_Y0, EV_Y1, EV_Y2};
    check_clean(PH_CAPTURE, slot_evs, 6);
    check_clean(PH_CAPTURED, slot_evs, 6);
    check_clean(PH_REPLAY, slot_evs, 6);
    TB_CHECK(W.t[PH_REPLAY][EV_Y2].not_ready > 0 && W.watch_pending[PH_REPLAY] > 0,
             "replay: the watcher never saw slot 1's end event pending (event %ld times, watch %ld times)",
             W.t[PH_REPLAY][EV_Y2].not_ready, W.watch_pending[PH_REPLAY]);
    check_clean(PH_REFUSE, slot_evs, 6);
    TB_CHECK(W.watch_pending[PH_REFUSE] == 0, "refuse: the refused push reached the watch");
    printf("# guard: tb_dev_watch_poll reported %ld errors; first: %s; latest: %s\n", W.watch_error[PH_GUARD],
           W.watch_error[PH_GUARD] ? W.watch_msg : "-", W.watch_error[PH_GUARD] ? W.watch_last : "-");
    TB_CHECK(W.watch_error[PH_GUARD] > 0 && strstr(W.watch_msg, "plain record inside a capture of step 5"),
             "guard: tb_dev_watch_poll must report an error naming the entry pushed inside the capture (reported "
             "%ld times, first: %s)",
             W.watch_error[PH_GUARD], W.watch_error[PH_GUARD] ? W.watch_msg : "-");
}

static void test_split(tb_nccl *n, float *dsum, size_t count, cudaStream_t s) {
    TB_CUDA_CHECK(cudaMemsetAsync(dsum, 0, count * sizeof *dsum, s));
    double t0 = tb_now();
    tb_nccl *child = tb_nccl_first_n(n, 1, 60);
    double t_split = tb_now() - t0;
    TB_CHECK(child && tb_nccl_size(child) == 1 && tb_nccl_rank(child) == 0,
             "split with colour 0: want a 1-rank child of rank 0, got %s", child ? "another" : "none");
    if (child) {
        tb_nccl_allreduce_sum(child, dsum, dsum, count, TB_DEV_F32, s);
        TB_CUDA_CHECK(cudaStreamSynchronize(s));
        tb_nccl_check_async(child, "the child's all-reduce");
        TB_CHECK(all_equal(dsum, count, 0.0f), "the child's 1-rank all-reduce changed its input");
        tb_nccl_destroy(child);
    }
    t0 = tb_now();
    tb_nccl *none = tb_nccl_first_n(n, 0, 60);
    double t_nocolor = tb_now() - t0;
    TB_CHECK(none == NULL, "split with NCCL_SPLIT_NOCOLOR on every rank: a communicator came back");
    tb_nccl_destroy(none);
    tb_nccl_allreduce_sum(n, dsum, dsum, count, TB_DEV_F32, s);
    TB_CUDA_CHECK(cudaStreamSynchronize(s));
    tb_nccl_check_async(n, "the parent's all-reduce after the splits");
    printf("# ncclCommSplit of the 1-rank communicator: colour 0 %.1f ms, NCCL_SPLIT_NOCOLOR %.1f ms\n",
           t_split * 1e3, t_nocolor * 1e3);
}

int main(int argc, char **argv) {
    char why[256];
    int ndev = tb_gpu_device_count(why, sizeof why);
    if (ndev <= 0) {
        printf("SKIP: test_nccl_watch needs a CUDA device: %s\n", ndev < 0 ? why : "none is visible");
        return 77;
    }
    if (!tb_nccl_built()) {
        printf("SKIP: test_nccl_watch: this build has no NCCL (set NCCL_ROOT)\n");
        return 77;
    }
    tb_comm_info info;
    tb_comm_init(&argc, &argv, &info);
    if (info.world != 1) tb_die("test_nccl_watch runs as one process (it makes 1-rank communicators)");
    int compiled = 0, loaded = 0;
    tb_nccl_versions(&compiled, &loaded);
    printf("# NCCL compiled %d, loaded %d\n", compiled, loaded);
    TB_CUDA_CHECK(cudaSetDevice(0));
    cudaStream_t s;
    TB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int e = 0; e < EV_COUNT; e++) TB_CUDA_CHECK(cudaEventCreate(&W.ev[e]));
    void *big = NULL;
    TB_CUDA_CHECK(cudaMalloc(&big, BIG));
    size_t count = (size_t)1 << 20;
    float *dsum = NULL;
    TB_CUDA_CHECK(cudaMalloc((void **)&dsum, count * sizeof *dsum));
    float *ones = malloc(count * sizeof *ones);
    if (!ones) TB_FATAL("out of host memory");
    for (size_t i = 0; i < count; i++) ones[i] = 1.0f;
    TB_CUDA_CHECK(cudaMemcpy(dsum, ones, count * sizeof *dsum, cudaMemcpyHostToDevice));
    free(ones);

    double t0 = tb_now();
    tb_nccl *n = tb_nccl_create(tb_comm_world(), 0, 60);
    printf("# 1-rank non-blocking communicator created in %.1f ms\n", (tb_now() - t0) * 1e3);

    test_watch(n, dsum, count, big, s); /* (A) */
    test_split(n, dsum, count, s);      /* (B) */

    /* (C) idle communicators: finalize + destroy, then the bounded abort */
    tb_nccl *idle = tb_nccl_create(tb_comm_world(), 0, 60);
    t0 = tb_now();
    tb_nccl_destroy(idle);
    double t_destroy = tb_now() - t0;
    char err[256];
    double bound = tb_nccl_abort_wait_s(err, sizeof err);
    t0 = tb_now();
    int late = tb_nccl_abort_all();
    double t_abort = tb_now() - t0;
    printf("# idle 1-rank communicator: ncclCommFinalize + ncclCommDestroy %.1f ms; ncclCommAbort (helper "
           "thread, bound %g s) %.1f ms\n",
           t_destroy * 1e3, bound, t_abort * 1e3);
    TB_CHECK(late == 0, "ncclCommAbort of an idle 1-rank communicator did not return within %g s", bound);
    if (late) { /* its thread is still inside NCCL: no exit handlers under it */
        printf("# nccl_watch: %d checks, %d failed\n", tb_test_checks, tb_test_failures);
        fflush(stdout);
        _exit(1);
    }
    tb_nccl_destroy(n); /* the abort took its communicator: frees the wrapper only */

    for (int e = 0; e < EV_COUNT; e++) TB_CUDA_CHECK(cudaEventDestroy(W.ev[e]));
    TB_CUDA_CHECK(cudaFree(big));
    TB_CUDA_CHECK(cudaFree(dsum));
    TB_CUDA_CHECK(cudaStreamDestroy(s));
    tb_comm_finalize();
    return tb_test_exit("nccl_watch");
}
