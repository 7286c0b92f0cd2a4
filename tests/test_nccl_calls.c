/* test_nccl_calls.c - comm/comm_nccl.c never has two threads inside NCCL
 * calls on one communicator at once (no GPU, no NCCL library).
 *
 * Why: NCCL's calls on a communicator are not thread-safe. With two ranks
 * a non-blocking collective returns ncclInProgress and leaves a background
 * job that the next ncclCommGetAsyncError finishes and frees; the trainer's
 * thread polls its communicator that way while the watchdog's thread polls
 * every live communicator's asynchronous error, so the two could finish
 * (and free) one job twice. One rank never made such a job, which is why
 * the 1-rank GPU runs could not show it.
 *
 * How: comm_nccl.c is built here against stand-ins of the NCCL and CUDA
 * runtime functions it calls (below; no libnccl, no libcudart) and the
 * single-process comm.h (comm/comm_single.c: rank 0 of 1). Each
 * stand-in NCCL call on a communicator counts the threads inside it and
 * stays inside for ~20 us; a collective or a set-up leaves the
 * communicator "in progress" for a few polls, as a 2-rank one does. The
 * main thread creates a communicator, splits it, runs 3000 all-reduces and
 * broadcasts and destroys both, while a second thread calls
 * tb_dev_watch_poll in a loop (the watchdog's call). Checks: no call ever
 * overlapped another, the watch polled the communicators many times but
 * not while the rank said it captures a CUDA graph
 * (tb_dev_watch_capturing), and every communicator was set up, finalized
 * and destroyed once. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "comm/nccl.h"
#include "tests/tb_test.h"

/* ---- stand-ins: the CUDA runtime (what comm_nccl.c calls) ------------------------------- */

cudaError_t cudaSetDevice(int device) {
    (void)device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
    *device = 0;
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st) {
    (void)s;
    *st = cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    (void)e;
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "error"; }
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaError"; }

/* ---- stand-ins: NCCL -------------------------------------------------------------------- */

#define POLLS_IN_PROGRESS 3 /* polls a set-up or a collective stays ncclInProgress */

struct ncclComm {
    atomic_int inside; /* threads inside a call on it now */
    atomic_int pending; /* polls left before it leaves ncclInProgress */
    int created, finalized, destroyed;
};

static atomic_int g_overlaps, g_calls, g_watch_polls;
static _Thread_local int t_is_watch;
static struct ncclComm g_comms[4];
static atomic_int g_ncomms;

static void busy_us(long us) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static void in_call(ncclComm_t c) {
    atomic_fetch_add(&g_calls, 1);
    if (atomic_fetch_add(&c->inside, 1) != 0) atomic_fetch_add(&g_overlaps, 1);
    busy_us(20); /* a window as wide as NCCL's job bookkeeping, and wider */
}
static void out_call(ncclComm_t c) { atomic_fetch_sub(&c->inside, 1); }

static ncclComm_t new_comm(void) {
    int k = atomic_fetch_add(&g_ncomms, 1);
    TB_CHECK(k < 4, "at most 4 stand-in communicators");
    ncclComm_t c = &g_comms[k];
    c->created = 1;
    atomic_store(&c->pending, POLLS_IN_PROGRESS);
    return c;
}

ncclResult_t ncclGetVersion(int *version) {
    *version = 23007;
    return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "stand-in error"; }
const char *ncclGetLastError(ncclComm_t comm) {
    (void)comm;
    return "";
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 7, sizeof *id);
    return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *cfg) {
    (void)nranks, (void)id, (void)rank;
    TB_CHECK(cfg->blocking == 0, "trainbench's communicators are non-blocking");
    *comm = new_comm();
    return ncclInProgress;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *cfg) {
    (void)key, (void)cfg;
    in_call(comm);
    *newcomm = color == NCCL_SPLIT_NOCOLOR ? NULL : new_comm();
    atomic_store(&comm->pending, POLLS_IN_PROGRESS);
    out_call(comm);
    return ncclInProgress;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
    in_call(comm);
    if (t_is_watch) atomic_fetch_add(&g_watch_polls, 1);
    int left = atomic_load(&comm->pending);
    if (left > 0) atomic_store(&comm->pending, left - 1); /* the job finished by whoever polls: one thread only */
    *err = left > 0 ? ncclInProgress : ncclSuccess;
    out_call(comm);
    return ncclSuccess;
}
static ncclResult_t collective(ncclComm_t comm) {
    in_call(comm);
    TB_CHECK(atomic_load(&comm->pending) == 0, "a collective on a communicator still in progress");
    atomic_store(&comm->pending, POLLS_IN_PROGRESS);
    out_call(comm);
    return ncclInProgress;
}
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s) {
    (void)send, (void)recv, (void)count, (void)t, (void)op, (void)s;
    return collective(comm);
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t s) {
    (void)send, (void)recv, (void)count, (void)t, (void)root, (void)s;
    return collective(comm);
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    in_call(comm);
    comm->finalized++;
    atomic_store(&comm->pending, POLLS_IN_PROGRESS);
    out_call(comm);
    return ncclInProgress;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    in_call(comm);
    comm->destroyed++;
    out_call(comm);
    return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    comm->destroyed++;
    return ncclSuccess;
}

/* ---- the test ------------------------------------------------------------------------------ */

static atomic_int g_stop, g_watch_errors;

static void *watch_thread(void *arg) {
    (void)arg;
    t_is_watch = 1;
    while (!atomic_load(&g_stop)) {
        tb_dev_watch_state st;
        tb_dev_watch_poll(&st);
        if (st.nccl_error) atomic_fetch_add(&g_watch_errors, 1);
    }
    return NULL;
}

int main(void) {
    pthread_t w;
    TB_CHECK(pthread_create(&w, NULL, watch_thread, NULL) == 0, "the watch thread starts");
    tb_nccl *n = tb_nccl_create(tb_comm_world(), 0, 60);
    tb_nccl *child = tb_nccl_first_n(n, 1, 60);
    TB_CHECK(child != NULL, "the split gives rank 0 a communicator");
    float buf[4] = {0};
    int iters = 3000;
    for (int i = 0; i < iters; i++) {
        tb_nccl_allreduce_sum(i % 4 ? n : child, buf, buf, 4, TB_DEV_F32, NULL);
        if (i % 100 == 0) tb_nccl_bcast(n, buf, 4, TB_DEV_F32, 0, NULL);
        if (i % 50 == 0) tb_nccl_check_async(n, "the test's all-reduces");
    }
    int polls = atomic_load(&g_watch_polls);
    /* while the rank captures its step the watch leaves the communicators alone */
    tb_dev_watch_capturing(1); /* returns once no poll is inside a call */
    int before = atomic_load(&g_watch_polls);
    for (int i = 0; i < 500; i++) tb_nccl_allreduce_sum(n, buf, buf, 4, TB_DEV_F32, NULL);
    int during = atomic_load(&g_watch_polls) - before;
    tb_dev_watch_capturing(0);
    TB_CHECK(during == 0, "no watch poll of a communicator during a capture (%d)", during);
    tb_nccl_destroy(child);
    tb_nccl_destroy(n);
    atomic_store(&g_stop, 1);
    pthread_join(w, NULL);
    int overlaps = atomic_load(&g_overlaps), calls = atomic_load(&g_calls);
    printf("# %d NCCL calls on 2 communicators (main thread and the watch), %d by the watch's polls, %d overlapped\n",
           calls, polls, overlaps);
    TB_CHECK(overlaps == 0, "no two threads inside NCCL calls on one communicator at once: %d overlapped of %d",
             overlaps, calls);
    TB_CHECK(atomic_load(&g_watch_errors) == 0, "the watch saw no error (%d polls said one)",
             atomic_load(&g_watch_errors));
    TB_CHECK(polls > 100, "the watch polled the communicators while they were in use (%d polls)", polls);
    for (int k = 0; k < atomic_load(&g_ncomms); k++)
        TB_CHECK(g_comms[k].created && g_comms[k].finalized == 1 && g_comms[k].destroyed == 1,
                 "communicator %d set up, finalized and destroyed once (%d, %d)", k, g_comms[k].finalized,
                 g_comms[k].destroyed);
    return tb_test_exit("nccl_calls");
}
