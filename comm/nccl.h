/* nccl.h - NCCL communicators bootstrapped through MPI, collectives on
 * device buffers and streams, and the watch the watchdog polls.
 *
 * comm_nccl.c implements it on NCCL (CUDA builds that found NCCL);
 * comm_nccl_none.c in other builds, where tb_nccl_built() is 0 and
 * creating a communicator is an error, so src/ needs no #ifdef. comm/ sees
 * flat device buffers, counts, and cudaStream_t / cudaEvent_t as void *.
 *
 * Every communicator is non-blocking (ncclConfig_t.blocking = 0): each NCCL
 * call may return ncclInProgress, and the caller polls
 * ncclCommGetAsyncError under its own deadline (a rank that never arrives
 * is named after --timeout instead of hanging the job). Only such a
 * communicator can be aborted safely from another thread: the abort cleanup
 * (registered with core/log.h) and the watchdog call ncclCommAbort on
 * every live communicator before the job ends through MPI_Abort.
 *
 * Every NCCL call goes through TB_NCCL_CHECK (comm_nccl.c): file:line, the
 * rank and host, ncclGetErrorString and ncclGetLastError, then the job
 * ends (abort cleanups first). */
#ifndef TB_NCCL_H
#define TB_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"

typedef struct tb_nccl tb_nccl;

/* Element types of device collectives. */
typedef enum { TB_DEV_F32, TB_DEV_F64, TB_DEV_BF16, TB_DEV_I64 } tb_dev_type;
size_t tb_dev_type_size(tb_dev_type t);

/* The oldest NCCL trainbench runs with (2.18: ncclCommSplit with a config,
 * non-blocking communicators, ncclCommFinalize); CMake refuses older
 * headers, tb_nccl_create an older library loaded at run time. */
#define TB_NCCL_MIN_CODE 21800

/* The release of an NCCL version code: X*10000 + Y*100 + Z from 2.9 on
 * (22809 = 2.28.9), X*1000 + Y*100 + Z before (2804 = 2.8.4). */
static inline void tb_nccl_version_parts(int code, int *major, int *minor, int *patch) {
    int big = code >= 10000 ? 10000 : 1000;
    *major = code / big, *minor = code % big / 100, *patch = code % 100;
}

/* 1 when this build has NCCL. */
int tb_nccl_built(void);
/* NCCL version codes (22809 = 2.28.9): compiled against and loaded; 0 / 0
 * without NCCL. */
void tb_nccl_versions(int *compiled, int *loaded);

/* The file of the NCCL library loaded (dladdr) and, when it is a slim
 * build of tests/gpu/slim_nccl.sh (its nccl_slim.txt beside lib/), a line
 * naming the architectures and ONLY_FUNCS it holds (collectives left out
 * would run as no-ops); both "" without NCCL. */
void tb_nccl_library(char *path, size_t len, char *slim, size_t slen);

/* Collective over c (every rank of c calls it): rank 0 makes the unique id
 * (ncclGetUniqueId), MPI broadcasts it, every rank creates its
 * non-blocking communicator on `device` and polls it ready. A rank that has
 * not joined after timeout_s, or an NCCL error (two ranks on one GPU:
 * "Duplicate GPU detected"), ends the job with one line. */
tb_nccl *tb_nccl_create(tb_comm *c, int device, double timeout_s);
/* The first n ranks of parent, as tb_comm_first_n (ncclCommSplit);
 * collective over parent; NULL on the other ranks. */
tb_nccl *tb_nccl_first_n(tb_nccl *parent, int n, double timeout_s);
/* Finalizes (polled, bounded) and destroys; NULL is fine. */
void tb_nccl_destroy(tb_nccl *n);
int tb_nccl_rank(const tb_nccl *n);
int tb_nccl_size(const tb_nccl *n);

/* In-place or out-of-place sum on `stream` (cudaStream_t); returns once
 * NCCL has queued it (ncclInProgress polled away under the deadline). */
void tb_nccl_allreduce_sum(tb_nccl *n, const void *send, void *recv, size_t count, tb_dev_type t,
                           void *stream);
void tb_nccl_bcast(tb_nccl *n, void *buf, size_t count, tb_dev_type t, int root, void *stream);
/* Ends the job with NCCL's message when the communicator holds an
 * asynchronous error (what: "the gradient all-reduce of step 12"). */
void tb_nccl_check_async(tb_nccl *n, const char *what);

/* ncclCommAbort on every live communicator, once; safe from any thread
 * (the watchdog, an abort cleanup). The job must end after it.
 *
 * Bounded: ncclCommAbort can itself block (a hung peer, a wedged GPU:
 * NVIDIA/nccl issues 863, 992, 1777), so it runs on a helper thread
 * (tb_nccl_run_bounded) and the caller waits at most TB_NCCL_ABORT_WAIT_S
 * seconds (default 5). That thread first waits for every thread inside a
 * call on a live communicator to leave it (threads that find the job
 * ending park instead of entering), then aborts. When the wait runs out,
 * one line says so, the helper is left running, and tb_abort ends the
 * process with _exit (exit's handlers would tear the CUDA runtime down
 * under it); nothing frees a communicator the helper holds: it took them
 * out of the registry, and tb_nccl_destroy frees only its wrapper then.
 * Returns 0 when every abort returned in time (or there was none), 1 when
 * the wait ran out. */
int tb_nccl_abort_all(void);

/* ---- the bounded wait (comm/nccl_bounded.c, every build) -------------------------- */
enum { TB_RUN_DONE = 0, TB_RUN_TIMED_OUT = 1, TB_RUN_NO_THREAD = -1 };
/* Runs fn(arg) on a new detached thread and waits at most `seconds` for
 * it to return: TB_RUN_DONE when it did, TB_RUN_TIMED_OUT when not (the
 * thread runs on: whatever fn uses, arg included, must stay valid until
 * the process ends), TB_RUN_NO_THREAD when no thread could be started (fn
 * did not run). */
int tb_nccl_run_bounded(void (*fn)(void *), void *arg, double seconds);
#define TB_NCCL_ABORT_WAIT_DEFAULT_S 5.0
/* TB_NCCL_ABORT_WAIT_S from the environment (unset or empty: the default);
 * -1 with a one-line message in err for anything but seconds in 0..3600. */
double tb_nccl_abort_wait_s(char *err, size_t len);

/* ---- the device watch -----------------------------------------------------------
 * The host queues work on a GPU stream and runs on, so a hung collective
 * shows on the host only much later, if at all. The trainer registers an
 * event recorded after each collective (per bucket, or per captured step);
 * the watchdog thread polls them (cudaEventQuery) and every live
 * communicator's ncclCommGetAsyncError. */

/* event completes when the collective `what` of step `step` did; queued
 * now (the deadline counts from here). At most TB_DEV_WATCH_MAX pending:
 * the oldest completed ones are dropped first. stream: the one the event
 * was recorded on. Never push inside an open CUDA graph capture (the
 * trainer pushes a graph launch's end event after the launch, and the
 * buckets' only when not capturing): an event recorded there with a plain
 * record is "captured", and the watchdog thread's cudaEventQuery of it
 * breaks the capture (CUDA 13, driver 580: cudaErrorCapturedEvent on the
 * first query, cudaErrorInvalidValue on every later one, and the capture
 * ends with "operation failed due to a previous error during capture";
 * tests/test_nccl_watch.c). So a push whose stream is capturing ends the
 * job (TB_FATAL, a bug) before anything is queued. */
#define TB_DEV_WATCH_MAX 256
void tb_dev_watch_push(void *event, void *stream, int64_t step, const char *what);
/* Forgets every pending entry (their events are about to be destroyed). */
void tb_dev_watch_clear(void);
/* on 1 while the calling rank captures a CUDA graph of its step, 0 after:
 * the watch's poll then leaves the communicators alone (with two ranks an
 * asynchronous-error poll can finish a collective's background job, whose
 * kernels go into the capturing stream; nothing runs during a capture, so
 * there is nothing to learn from it). */
void tb_dev_watch_capturing(int on);

typedef struct {
    int pending;           /* 1: some watched collective has not completed */
    int64_t step;          /* the oldest pending one's */
    char what[48];
    double pending_s;      /* since it was queued */
    int nccl_error;        /* 1: a communicator reports an asynchronous error */
    char error[256];       /* NCCL's words for it */
} tb_dev_watch_state;
/* Polls the watch (any thread; takes no lock NCCL holds). */
void tb_dev_watch_poll(tb_dev_watch_state *st);

#endif
