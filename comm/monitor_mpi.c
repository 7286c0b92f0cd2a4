/* monitor_mpi.c - the watchdog over MPI point-to-point messages on a
 * duplicate communicator (see monitor.h). Needs MPI_THREAD_MULTIPLE: the
 * monitor thread talks while the main and gradient threads are inside
 * collectives.
 *
 * Every MPI return code is checked (MON_CHECK): on the watch path a failed
 * call ends the job through abort_all with the call, file:line and MPI's own
 * error string, so rank 0 still marks its results file; on the paths that
 * are already ending the job (abort_all, teardown) a failure is expected (a
 * peer is gone) and the path goes on without it.
 *
 * Send buffers: a buffer handed to MPI_Isend is not written again until that
 * send has completed. Ticks have one buffer per destination rank; a rank's
 * status has one buffer, rewritten only after its send completed; pings,
 * pongs, the abort reason and its acknowledgements are sent from constant
 * (or, once written, never rewritten) storage, so any number of them may be
 * in flight. At stop the pending sends are waited for (bounded); buffers of
 * a send that never completes are left allocated rather than freed under
 * MPI.
 *
 * GPU collectives: the host queues NCCL work and runs on, so a hung
 * all-reduce shows on the GPU, not in the host's progress. Each rank's
 * report therefore includes the device watch (comm/nccl.h): when a watched
 * collective has been pending longer than the host's own state (say the
 * NCCL all-reduce of bucket 3 of step 812), that is what the rank reports,
 * so rank 0's verdict names the rank that has not joined it exactly as on
 * the MPI path; an asynchronous NCCL error (a peer gone, a network error)
 * ends the job at once with NCCL's words. Every path that ends the job
 * aborts the live NCCL communicators first (ncclCommAbort), so no rank is
 * left inside a kernel waiting for a peer; tb_nccl_abort_all waits for
 * that at most TB_NCCL_ABORT_WAIT_S seconds (ncclCommAbort can hang too),
 * then MPI_Abort follows regardless. */
#include "comm/monitor_mpi_internal.h"

#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm_mpi.h"
#include "comm/nccl.h"
#include "core/faults.h"
#include "core/log.h"
#include "core/thread_start.h"
#include "core/timer.h"

const char mon_ping = 1;

static atomic_int g_sigterm; /* set by the handler, read by the watchdog thread: lock-free, signal-safe */
static void on_sigterm(int s) {
    (void)s;
    atomic_store(&g_sigterm, 1);
}

/* The test fault die-end-late-line's delay: well inside the hold (0.8 s;
 * 0.2 s under Open MPI 5, whose launcher SIGKILLs 0.24 s after its SIGTERM),
 * and fixed, so that a hold lost fails the test. */
#if defined(OPEN_MPI) && defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
#define END_LINE_LATE_S 0.1
#else
#define END_LINE_LATE_S 0.4
#endif

/* After the watchdog stopped (every rank passed the last collective), a
 * SIGTERM is the launcher ending the job because another rank ended in the
 * teardown (or a scheduler's): one line, written from the handler, then the
 * exit status a SIGTERM gives, after the teardown's hold (mon_teardown_hold:
 * Open MPI 4.1's mpirun SIGKILLs the others as soon as one exits, and a
 * rank that exited once its line was out took rank 0's, one run in 30 of
 * end_teardown_all_ranks_say_np3 on a loaded 2-core host). The line, the
 * hold and the test fault's delay are made when the watchdog stops: only
 * async-signal-safe calls here (an atomic, clock_gettime, nanosleep, write). */
static char g_end_line[600];
static size_t g_end_len;
static double g_end_hold, g_end_delay;
static atomic_flag g_end_said = ATOMIC_FLAG_INIT;
static void on_sigterm_at_end(int s) {
    (void)s;
    double began = tb_now();
    if (atomic_flag_test_and_set(&g_end_said)) return; /* a second SIGTERM: the first is being answered */
    /* a thread of this rank is ending it with its own line (the end guard,
     * a tb_die): that thread, perhaps the one this handler interrupted,
     * ends it; tb_log_claim_end alone would grant the end again to it */
    if (tb_log_ending(0) || !tb_log_claim_end()) return;
    if (g_end_delay > 0) sleep_s(g_end_delay); /* test only: die-end-late-line (faults.h) */
    ssize_t w = write(2, g_end_line, g_end_len);
    (void)w;
    for (double left; (left = began + g_end_hold - tb_now()) > 0;) sleep_s(left);
    _exit(128 + SIGTERM);
}

progress_msg mon_own_progress(tb_monitor *m) {
    progress_msg p;
    pthread_mutex_lock(&m->mu);
    p.step = m->step;
    p.in_for = tb_now() - m->since;
    p.collective = m->collective;
    memcpy(p.what, m->what, WHAT_MAX);
    memcpy(p.phase, m->phase, PHASE_MAX);
    pthread_mutex_unlock(&m->mu);
    if (m->ending) return p;
    /* what the GPU is stuck in, when that is older than what the host does */
    tb_dev_watch_state st;
    tb_dev_watch_poll(&st);
    if (st.nccl_error) {
        char why[WHY_MAX], at[96];
        mon_step_words(at, sizeof at, p.step, p.phase);
        snprintf(why, sizeof why, "rank %d (%s): %s, at %s, %s%s", m->rank, host(m, m->rank), st.error, at,
                 p.collective ? "in the " : "in ", p.what);
        mon_abort_all(m, why);
    }
    if (st.pending && st.pending_s > 2 * m->period && (!p.collective || st.pending_s > p.in_for)) {
        p.step = st.step;
        p.in_for = st.pending_s;
        p.collective = 1;
        snprintf(p.what, WHAT_MAX, "%s", st.what);
    }
    return p;
}

void mon_answer_pings(tb_monitor *m) {
    int flag = 1;
    while (flag) {
        MPI_Status st;
        if (MON_CHECK(m, MPI_Iprobe(MPI_ANY_SOURCE, TAG_PING, m->comm, &flag, &st)) != MPI_SUCCESS) return;
        if (!flag) break;
        char b;
        if (MON_CHECK(m, MPI_Recv(&b, 1, MPI_CHAR, st.MPI_SOURCE, TAG_PING, m->comm, MPI_STATUS_IGNORE)) !=
            MPI_SUCCESS)
            return;
        m->pinged_by[st.MPI_SOURCE] = 1; /* alive: only a rank in its teardown pings */
        MPI_Request rq;
        /* from the constant mon_ping, so freeing the request before it completes is safe */
        if (MON_CHECK(m, MPI_Isend(&mon_ping, 1, MPI_CHAR, st.MPI_SOURCE, TAG_PONG, m->comm, &rq)) ==
            MPI_SUCCESS)
            MON_CHECK(m, MPI_Request_free(&rq));
    }
}

/* Rank 0: is anyone silent, or is a collective overdue? Fills why. A rank
 * whose last report is older than a few periods is judged only by silence:
 * its stale picture must not make someone else look late. */
static int verdict(tb_monitor *m, char *why, size_t len) {
    double now = tb_now(), fresh = 3 * m->period;
    for (int r = 1; r < m->size; r++)
        if (now - m->heard[r] > m->timeout) {
            char where[160];
            mon_describe(where, sizeof where, &m->last[r]);
            snprintf(why, len,
                     "rank %d (%s) stopped answering: nothing heard from it for %.1f s (--timeout "
                     "%g); it was last at %s",
                     r, host(m, r), now - m->heard[r], m->timeout, where);
            return 1;
        }
    m->last[0] = mon_own_progress(m);
    m->heard[0] = now;
    for (int r = 0; r < m->size; r++)
        if (now - m->heard[r] > fresh) return 0; /* wait: silence decides */
    for (int r = 0; r < m->size; r++) {
        const progress_msg *p = &m->last[r];
        double in_for = p->in_for + (now - m->heard[r]);
        if (!p->collective || in_for <= m->timeout) continue;
        char at[96];
        mon_step_words(at, sizeof at, p->step, p->phase);
        for (int q = 0; q < m->size; q++) {
            const progress_msg *o = &m->last[q];
            if (o->collective && o->step == p->step && strcmp(o->what, p->what) == 0 &&
                strcmp(o->phase, p->phase) == 0)
                continue;
            char where[160];
            mon_describe(where, sizeof where, o);
            /* a rank busy with work of its own (not waiting in a collective): perhaps only slow */
            snprintf(why, len, "rank %d (%s) has not joined the %s of %s after %.1f s (--timeout %g): it is at %s%s", q,
                     host(m, q), p->what, at, in_for, m->timeout, where,
                     o->collective ? "" : "; if that is only slow (a file system, a data loader), raise --timeout");
            return 1;
        }
        snprintf(why, len,
                 "the %s of %s has not completed on any rank after %.1f s (--timeout %g): the "
                 "interconnect or the MPI library is stuck (trainbench preflight tests it)",
                 p->what, at, in_for, m->timeout);
        return 1;
    }
    return 0;
}

static void root_poll(tb_monitor *m) {
    for (;;) {
        int done = 0;
        MPI_Status st;
        MON_CHECK(m, MPI_Test(&m->status_rq, &done, &st));
        if (!done) break;
        m->heard[st.MPI_SOURCE] = tb_now();
        m->last[st.MPI_SOURCE] = m->status_in;
        MON_CHECK(m, MPI_Irecv(&m->status_in, sizeof m->status_in, MPI_BYTE, MPI_ANY_SOURCE, TAG_STATUS,
                               m->comm, &m->status_rq));
    }
}

static void root_tick(tb_monitor *m) {
    double now = tb_now();
    tick_msg t;
    memset(&t, 0, sizeof t);
    t.root = mon_own_progress(m);
    t.quiet_rank = -1;
    for (int r = 1; r < m->size; r++)
        if (t.quiet_rank < 0 || now - m->heard[r] > t.quiet_for) {
            t.quiet_rank = r;
            t.quiet_for = now - m->heard[r];
            t.quiet = m->last[r];
        }
    for (int r = 1; r < m->size; r++) {
        int done = 1;
        if (m->tick_rq[r] != MPI_REQUEST_NULL)
            MON_CHECK(m, MPI_Test(&m->tick_rq[r], &done, MPI_STATUS_IGNORE));
        if (!done) continue; /* that rank is not draining: the verdict will say */
        m->tick_out[r] = t;  /* its previous send from this buffer has completed */
        MON_CHECK(m, MPI_Isend(&m->tick_out[r], sizeof m->tick_out[r], MPI_BYTE, r, TAG_TICK, m->comm,
                               &m->tick_rq[r]));
    }
}

static void other_poll(tb_monitor *m) {
    int flag = 1;
    while (flag) {
        MON_CHECK(m, MPI_Iprobe(0, TAG_TICK, m->comm, &flag, MPI_STATUS_IGNORE));
        if (!flag) break;
        MON_CHECK(m, MPI_Recv(&m->tick, sizeof m->tick, MPI_BYTE, 0, TAG_TICK, m->comm, MPI_STATUS_IGNORE));
        m->tick_heard = tb_now();
    }
    MON_CHECK(m, MPI_Iprobe(0, TAG_ABORT, m->comm, &flag, MPI_STATUS_IGNORE));
    if (flag) {
        char why[WHY_MAX];
        m->ending = 1;
        if (MON_CHECK(m, MPI_Recv(why, WHY_MAX, MPI_CHAR, 0, TAG_ABORT, m->comm, MPI_STATUS_IGNORE)) !=
            MPI_SUCCESS)
            snprintf(why, sizeof why, "rank 0 (%s) ended the job; its reason could not be received",
                     host(m, 0));
        /* this rank is ending on its own error: it printed its line already;
         * else this line is its one: an error of its own from here on (the
         * main thread meeting the same fault a moment later) prints none */
        int failing = atomic_load(&m->failing) || !tb_log_claim_end();
        if (!failing) m->fn(why, 1, m->ctx);
        fflush(stdout);
        fflush(stderr);
        MPI_Request ack; /* printed: rank 0 may end the job (from the constant mon_ping) */
        if (MON_CHECK(m, MPI_Isend(&mon_ping, 1, MPI_CHAR, 0, TAG_ABORT_SEEN, m->comm, &ack)) == MPI_SUCCESS)
            MON_CHECK(m, MPI_Request_free(&ack));
        if (failing) { /* the failing thread ends the process (mon_on_rank_fatal) */
            atomic_store(&m->told, 1);
            tb_log_park();
        }
        tb_nccl_abort_all(); /* no kernel of ours waits for a peer that is gone */
        sleep_s(ABORT_SELF_EXIT_S); /* rank 0's MPI_Abort ends us; if it cannot, we end ourselves */
        _exit(1);
    }
}

/* Sends this rank's progress to rank 0 (if the last send has gone). */
static void other_status(tb_monitor *m) {
    int done = 1;
    if (m->status_out_rq != MPI_REQUEST_NULL)
        MON_CHECK(m, MPI_Test(&m->status_out_rq, &done, MPI_STATUS_IGNORE));
    if (!done) return;
    m->status_out = mon_own_progress(m); /* the previous send from it has completed */
    m->sent_step = m->status_out.step;
    MON_CHECK(m, MPI_Isend(&m->status_out, sizeof m->status_out, MPI_BYTE, 0, TAG_STATUS, m->comm,
                           &m->status_out_rq));
}

static void *monitor_thread(void *arg) {
    tb_monitor *m = arg;
    double next = 0;
    for (;;) {
        pthread_mutex_lock(&m->mu);
        int stop = m->stop;
        pthread_mutex_unlock(&m->mu);
        if (stop) break;
        if (atomic_load(&g_sigterm)) {
            /* past the last collective (tb_monitor_stop has begun): its
             * line, after the join, is the end's ("after its last
             * collective"), not a teardown naming ranks whose watchdogs
             * have stopped as gone */
            if (atomic_load(&m->stopping)) break;
            /* a rank ending on its own error has printed its line: no second */
            if (m->rank != 0 && (atomic_load(&m->failing) || tb_log_ending(0))) mon_hold_exit(m, tb_now());
            /* rank 0 ending on its own error is marking its results file with
             * that line: the teardown's "rank N is gone" must not replace it;
             * the failing thread ends the process (or the launcher's SIGKILL) */
            if (m->rank == 0 && (atomic_load(&m->failing) || tb_log_ending(1))) tb_log_park();
            mon_on_teardown(m);
        }
        mon_answer_pings(m);
        char why[WHY_MAX];
        if (m->rank == 0) {
            root_poll(m);
            mon_take_failures(m);
            if (tb_now() >= next) {
                root_tick(m);
                next = tb_now() + m->period;
            }
            if (verdict(m, why, sizeof why)) mon_abort_all(m, why);
        } else {
            other_poll(m);
            pthread_mutex_lock(&m->mu);
            int moved = m->step != m->sent_step;
            pthread_mutex_unlock(&m->mu);
            if (tb_now() >= next || moved) { /* periodically, and at every new step */
                other_status(m);
                next = tb_now() + m->period;
            }
            if (tb_now() - m->tick_heard > m->timeout) {
                char where[160];
                mon_describe(where, sizeof where, &m->tick.root);
                snprintf(why, sizeof why,
                         "rank 0 (%s) stopped answering: nothing heard from it for %.1f s (--timeout "
                         "%g); it was last at %s",
                         host(m, 0), tb_now() - m->tick_heard, m->timeout, where);
                mon_abort_all(m, why);
            }
        }
        sleep_s(m->period / 8 < 0.01 ? m->period / 8 : 0.01);
    }
    return NULL;
}

static tb_monitor *g_running = NULL; /* the watchdog started and not stopped (main thread only) */
tb_monitor *_Atomic mon_running; /* the same, for the abort cleanup (any thread); static: NULL */
static int g_fatal_cleanup = -1;         /* mon_on_rank_fatal's, registered once per process */

void tb_monitor_stop_running(void) { tb_monitor_stop(g_running); }

tb_monitor *tb_monitor_start(tb_comm *world, const char *hosts, double timeout_s,
                             tb_monitor_abort_fn fn, void *ctx) {
    int size = tb_comm_size(world);
    int level = 0;
    MPI_CHECK(MPI_Query_thread(&level));
    if (size < 2) return NULL;
    if (level < MPI_THREAD_MULTIPLE) {
        tb_warn("the MPI library lacks MPI_THREAD_MULTIPLE: the watchdog is off, a dead rank may "
                "hang the job");
        return NULL;
    }
    tb_monitor *m = calloc(1, sizeof *m);
    if (!m) TB_FATAL("out of host memory");
    MPI_CHECK(MPI_Comm_dup(tb_mpi_comm(world), &m->comm));
    m->rank = tb_comm_rank(world);
    m->size = size;
    m->hosts = malloc((size_t)size * 64);
    if (!m->hosts) TB_FATAL("out of host memory");
    memcpy(m->hosts, hosts, (size_t)size * 64);
    m->pinged_by = calloc((size_t)size, 1);
    if (!m->pinged_by) TB_FATAL("out of host memory");
    m->timeout = timeout_s;
    m->period = timeout_s / 10 < 0.5 ? timeout_s / 10 : 0.5;
    m->fn = fn;
    m->ctx = ctx;
    pthread_mutex_init(&m->mu, NULL);
    snprintf(m->what, sizeof m->what, "start-up");
    m->since = tb_now();
    double now = tb_now();
    m->tick_heard = now;
    m->status_out_rq = MPI_REQUEST_NULL;
    if (m->rank == 0) {
        m->heard = calloc((size_t)size, sizeof *m->heard);
        m->last = calloc((size_t)size, sizeof *m->last);
        m->tick_rq = calloc((size_t)size, sizeof *m->tick_rq);
        m->tick_out = calloc((size_t)size, sizeof *m->tick_out);
        if (!m->heard || !m->last || !m->tick_rq || !m->tick_out) TB_FATAL("out of host memory");
        for (int r = 0; r < size; r++) {
            m->heard[r] = now;
            m->tick_rq[r] = MPI_REQUEST_NULL;
            snprintf(m->last[r].what, WHAT_MAX, "start-up");
        }
        MPI_CHECK(MPI_Irecv(&m->status_in, sizeof m->status_in, MPI_BYTE, MPI_ANY_SOURCE, TAG_STATUS,
                            m->comm, &m->status_rq));
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    tb_thread_start(&m->thread, NULL, monitor_thread, m, "the watchdog thread");
    g_running = m;
    atomic_store(&mon_running, m);
    if (g_fatal_cleanup < 0) g_fatal_cleanup = tb_add_abort_cleanup(mon_on_rank_fatal, NULL);
    tb_set_abort_notice(mon_fatal_notice, NULL);
    return m;
}

void tb_monitor_phase(tb_monitor *m, const char *phase) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    snprintf(m->phase, sizeof m->phase, "%s", phase);
    pthread_mutex_unlock(&m->mu);
}

void tb_monitor_progress(tb_monitor *m, int64_t step, const char *what, int in_collective) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    if (m->step != step || m->collective != in_collective || strcmp(m->what, what) != 0) {
        m->step = step;
        m->collective = in_collective;
        snprintf(m->what, sizeof m->what, "%s", what);
        m->since = tb_now();
    }
    pthread_mutex_unlock(&m->mu);
}

/* Waits (at most a few seconds) for this rank's sends still in flight: 1
 * when every one completed, so that their buffers may be freed. */
static int drain_sends(tb_monitor *m) {
    MPI_Request *rq = m->rank == 0 ? m->tick_rq + 1 : &m->status_out_rq;
    int n = m->rank == 0 ? m->size - 1 : 1;
    double deadline = tb_now() + 5.0;
    for (;;) {
        int done = 0;
        MPI_CHECK(MPI_Testall(n, rq, &done, MPI_STATUSES_IGNORE));
        if (done) return 1;
        if (tb_now() > deadline) return 0;
        sleep_s(0.001);
    }
}

void tb_monitor_stop(tb_monitor *m) {
    if (!m) return;
    /* another thread is ending the process (a loader's --strict-data error)
     * and may be using the watchdog's communicator: it ends us too, and its
     * notice still finds the watchdog to tell rank 0 why (checked before the
     * handle is cleared). Then the abort path's handle is cleared and the
     * check made again: a thread that claims the end after that check finds
     * no watchdog (seq_cst, both sides), one that claimed it in between is
     * seen by it, so m is never freed under it. */
    tb_log_park_if_ending();
    tb_monitor *expected = m;
    atomic_compare_exchange_strong(&mon_running, &expected, NULL);
    tb_log_park_if_ending();
    atomic_store(&m->stopping, 1);
    /* from here a SIGTERM is the end's (a collective precedes stop): its line, made now, at once; one that came
     * before, which the watchdog thread may have left unsaid as it stopped, after the join */
    int n = snprintf(g_end_line, sizeof g_end_line,
                     "trainbench[rank %d %s]: error: the job was ended (SIGTERM) after its last collective, in the "
                     "end's teardown: another rank ended first there (the launcher then ends every rank), or the "
                     "scheduler ended the job\n",
                     tb_log_rank(), tb_log_host());
    g_end_len = n < 0 ? 0 : (size_t)n < sizeof g_end_line ? (size_t)n : sizeof g_end_line - 1;
    g_end_hold = mon_teardown_hold();
    /* test only (faults.h): rank 0, off the CPU when the SIGTERM comes, says its line late */
    int late = m->rank == 0 && tb_fault_kind("die-end-late-line") && !tb_fault("die-end-late-line", 0, -1);
    g_end_delay = late ? END_LINE_LATE_S : 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm_at_end;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    if (g_running == m) g_running = NULL;
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
    if (atomic_load(&g_sigterm)) on_sigterm_at_end(SIGTERM);
    if (m->rank == 0) {
        MPI_CHECK(MPI_Cancel(&m->status_rq));
        MPI_CHECK(MPI_Wait(&m->status_rq, MPI_STATUS_IGNORE));
    }
    /* every rank is here (a collective precedes stop), so every small send
     * completes; one that does not means its buffer must outlive us */
    int drained = drain_sends(m);
    if (!drained) {
        tb_warn("the watchdog's last messages were not delivered within 5 s; their buffers are left "
                "allocated");
        return;
    }
    /* m->comm is left to MPI_Finalize: freeing it would let its context id
     * be reused while a last tick may still be in flight to a peer */
    free(m->heard);
    free(m->last);
    free(m->pinged_by);
    free(m->tick_rq);
    free(m->tick_out);
    free(m->hosts);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
