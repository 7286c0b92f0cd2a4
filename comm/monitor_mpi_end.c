/* monitor_mpi_end.c - how the MPI watchdog ends a job (see monitor_mpi.c):
 * a failed watch call, a verdict or a peer's abort (mon_abort_all: the reason
 * to every rank, the results file marked, MPI_Abort), the launcher's
 * teardown (mon_on_teardown: ping every rank, name the ones gone, exit), and
 * a rank's own fatal error, whose line rank 0 makes the job's reason
 * (mon_on_rank_fatal, mon_take_failures). */
#include "comm/monitor_mpi_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/nccl.h"
#include "core/faults.h"
#include "core/log.h"
#include "core/timer.h"

int mon_check(tb_monitor *m, int rc, const char *expr, const char *file, int line) {
    if (rc == MPI_SUCCESS || m->ending) return rc;
    char msg[MPI_MAX_ERROR_STRING] = "", why[WHY_MAX];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    snprintf(why, sizeof why, "the watchdog's MPI call failed: %s (%s:%d): %s", expr, file, line, msg);
    mon_abort_all(m, why);
}

/* Sends msg (static storage, never rewritten) to every other rank as the
 * job's reason (TAG_ABORT), runs then() (NULL: nothing) while it goes, and
 * waits until it has gone and, on rank 0, until each rank has said it
 * printed its line (TAG_ABORT_SEEN), at most 2 s after the sends. Rank 0
 * (the only rank the others take a reason from) waits for each: on a
 * loaded machine a fixed pause was too short for a descheduled monitor
 * thread. A rank that is gone or frozen does not answer; the wait ends at
 * its deadline, well before the others end themselves (ABORT_SELF_EXIT_S
 * after the reason reached them), so MPI_Abort still ends the job. */
static void tell_all(tb_monitor *m, const char *msg, void (*then)(tb_monitor *m, const char *msg)) {
    double t0 = tb_now();
    MPI_Request *rq = calloc((size_t)m->size, sizeof *rq);
    int n = 0;
    if (rq)
        for (int r = 0; r < m->size; r++)
            if (r != m->rank && MON_CHECK(m, MPI_Isend(msg, WHY_MAX, MPI_CHAR, r, TAG_ABORT, m->comm, &rq[n])) ==
                                    MPI_SUCCESS)
                n++;
    if (then) then(m, msg);
    int others = m->size - 1;
    char *in = m->rank == 0 ? calloc((size_t)m->size, 2) : NULL; /* [size] ack byte, then [size] seen */
    MPI_Request *rs = in ? calloc((size_t)m->size, sizeof *rs) : NULL;
    int acks = in && rs;
    char *seen = acks ? in + m->size : NULL;
    for (int r = 1; acks && r < m->size; r++)
        if (MON_CHECK(m, MPI_Irecv(&in[r], 1, MPI_CHAR, r, TAG_ABORT_SEEN, m->comm, &rs[r])) != MPI_SUCCESS)
            seen[r] = 1, others--;
    double deadline = t0 + (acks ? 2.0 : 0.5);
    for (int sent = 0; tb_now() < deadline;) {
        if (!sent && MON_CHECK(m, MPI_Testall(n, rq, &sent, MPI_STATUSES_IGNORE)) != MPI_SUCCESS) sent = 1;
        for (int r = 1; acks && r < m->size; r++) {
            int got = 0;
            if (!seen[r] && (MON_CHECK(m, MPI_Test(&rs[r], &got, MPI_STATUS_IGNORE)) != MPI_SUCCESS || got))
                seen[r] = 1, others--;
        }
        if (sent && (!acks || others == 0)) break;
        sleep_s(0.01);
    }
    sleep_s(acks ? 0.05 : 0.2);
}

static void mark_results(tb_monitor *m, const char *msg) {
    m->fn(msg, 1, m->ctx); /* rank 0: the results file too (up to ~1 s waiting for locks) */
}

/* Ends the job after telling the others why (rank 0, or anyone when rank 0
 * is silent). Does not return. */
_Noreturn void mon_abort_all(tb_monitor *m, const char *why) { mon_abort_code(m, why, 1); }

_Noreturn void mon_abort_code(tb_monitor *m, const char *why, int code) {
    /* this line is the rank's one: another thread's error from here on
     * prints none; one already ending the process (its own error, its
     * line printed, its MPI_Abort to come) is left to end it */
    if (!tb_log_claim_end()) tb_log_park();
    /* written once, then only read: every send goes out from it */
    static char msg[WHY_MAX];
    snprintf(msg, sizeof msg, "%s", why);
    m->ending = 1;
    tell_all(m, msg, mark_results); /* the others print their line before MPI_Abort kills them */
    tb_run_abort_last();            /* a checkpoint or results file being written: its temporary */
    tb_nccl_abort_all();
    MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
}

void mon_step_words(char *buf, size_t len, int64_t step, const char *phase) {
    snprintf(buf, len, "step %lld%s%s", (long long)step, phase[0] ? " of " : "", phase);
}

void mon_describe(char *buf, size_t len, const progress_msg *p) {
    char st[96];
    mon_step_words(st, sizeof st, p->step, p->phase);
    snprintf(buf, len, "%s, %s%s", st, p->collective ? "in the " : "in ", p->what);
}

typedef struct {
    tb_monitor *m;
    char why[WHY_MAX];
} early_mark;

static void *early_mark_main(void *p) {
    early_mark *e = p;
    e->m->fn(e->why, 0, e->m->ctx);
    free(e);
    return NULL;
}

/* How long the ranks are pinged once the launcher's SIGTERM came: its
 * SIGKILL follows 1 s later under Open MPI 4 (odls_base_sigkill_timeout),
 * 0.24 s later under Open MPI 5's PRRTE (5.0.11: 0.243-0.244 s, 3 runs of 3
 * ranks, results/open_mpi5/sigkill_gap.log), and this rank's line must be
 * out before it. */
#if defined(OPEN_MPI) && defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
#define TEARDOWN_PING_S 0.1
#else
#define TEARDOWN_PING_S 0.3
#endif

/* How long after its teardown began a rank that said its line stays
 * (answering pings) before it exits: Open MPI 4.1's mpirun SIGKILLs every
 * other rank as soon as one of them exits (3 ranks, one gone, one exiting
 * 0.1 s after the SIGTERM: the third was dead 0.101-0.104 s after the
 * SIGTERM, 5 of 5 runs; results/open_mpi4_kill), so a survivor that
 * exited once its line was out took the line of
 * one a few ms behind it (rank 0's, in about one run in 30 of two such jobs
 * side by side on 2 cores). Each stays until shortly before the launcher's
 * own SIGKILL. */
#if defined(OPEN_MPI) && defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
#define TEARDOWN_HOLD_S 0.2
#else
#define TEARDOWN_HOLD_S 0.8
#endif

/* The hold, or the user's longer odls_base_sigkill_timeout (mpirun --mca,
 * which reaches the ranks as OMPI_MCA_): 0.2 s short of it, for rank 0's
 * results file on a loaded machine. */
double mon_teardown_hold(void) {
    const char *v = getenv("OMPI_MCA_odls_base_sigkill_timeout");
    double t = v ? strtod(v, NULL) : 0;
    return t - 0.2 > TEARDOWN_HOLD_S && t < 3600 ? t - 0.2 : TEARDOWN_HOLD_S;
}

_Noreturn void mon_hold_exit(tb_monitor *m, double began) {
    m->ending = 1; /* peers are dying: a failed call in the pings is "gone", not a verdict */
    double hold = mon_teardown_hold();
    while (tb_now() < began + hold) { /* the others' lines first */
        mon_answer_pings(m);
        sleep_s(0.005);
    }
    _exit(1);
}

/* The launcher is tearing the job down (a rank died or left): name the
 * ranks that no longer answer a ping. */
_Noreturn void mon_on_teardown(tb_monitor *m) {
    double began = tb_now();
    m->ending = 1; /* peers are dying: failed calls below mean "gone" */
    /* this rank's one line: a collective failing meanwhile prints none. Lost
     * to another thread's error since the monitor looked (its line printed,
     * rank 0's results file being marked with it): as there, no second line
     * and no teardown reason over that mark; that thread ends the process */
    if (!tb_log_claim_end()) {
        if (m->rank != 0) mon_hold_exit(m, began);
        tb_log_park();
    }
    if (m->rank == 0) {
        /* The launcher's SIGKILL follows soon (TEARDOWN_PING_S): mark the
         * results file now, on a thread of its own, so that the HDF5 write
         * (up to 0.5 s waiting for the main thread's lock, slower under a
         * sanitizer) does not hold up the pings and the line this rank
         * prints. */
        progress_msg me = mon_own_progress(m);
        char where[160];
        mon_describe(where, sizeof where, &me);
        double now = tb_now();
        int q = -1;
        for (int r = 1; r < m->size; r++)
            if (q < 0 || m->heard[r] < m->heard[q]) q = r;
        early_mark *e = malloc(sizeof *e);
        if (e) {
            e->m = m;
            snprintf(e->why, sizeof e->why,
                     "the launcher is ending the job (SIGTERM: a rank died or left) while rank 0 was at %s; "
                     "rank %d (%s) had been silent longest (%.1f s); written before the ranks were pinged",
                     where, q, host(m, q), now - m->heard[q]);
            pthread_t t;
            if (pthread_create(&t, NULL, early_mark_main, e) == 0)
                pthread_detach(t);
            else
                early_mark_main(e);
        }
    }
    int *pong = calloc((size_t)m->size, sizeof *pong);
    int *dead = calloc((size_t)m->size, sizeof *dead); /* a call to it failed */
    char *in = calloc((size_t)m->size, 1);
    MPI_Request *rq = calloc((size_t)m->size, sizeof *rq);
    if (!pong || !dead || !in || !rq) _exit(1);
    for (int r = 0; r < m->size; r++) {
        rq[r] = MPI_REQUEST_NULL;
        if (r == m->rank) {
            pong[r] = 1;
            continue;
        }
        MPI_Request s;
        /* from the constant mon_ping: freed before completion safely */
        if (MON_CHECK(m, MPI_Isend(&mon_ping, 1, MPI_CHAR, r, TAG_PING, m->comm, &s)) != MPI_SUCCESS ||
            MON_CHECK(m, MPI_Request_free(&s)) != MPI_SUCCESS ||
            MON_CHECK(m, MPI_Irecv(&in[r], 1, MPI_CHAR, r, TAG_PONG, m->comm, &rq[r])) != MPI_SUCCESS)
            dead[r] = 1;
    }
    /* A rank whose own teardown pinged this one is alive too, though its
     * pong may be late: a survivor whose pong came after the window (its
     * watchdog off the CPU; the test fault exit0-late-pong) was named gone
     * with the one that left ("ranks 0 (vm), 1 (vm) are gone"). After the
     * deadline, one last look: what came while this thread itself was off
     * the CPU counts. */
    double deadline = tb_now() + TEARDOWN_PING_S;
    if (tb_fault_kind("exit0-late-pong")) sleep_s(TEARDOWN_PING_S + 0.05); /* test only (faults.h): late pongs */
    for (int last = 0; !last;) {
        last = tb_now() >= deadline;
        mon_answer_pings(m);
        int all = 1;
        for (int r = 0; r < m->size; r++) {
            if (m->pinged_by[r]) pong[r] = 1;
            if (pong[r] || dead[r]) continue;
            int done = 0;
            if (MON_CHECK(m, MPI_Test(&rq[r], &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS) {
                dead[r] = 1;
                continue;
            }
            pong[r] = done;
            all &= done;
        }
        if (all) break;
        if (!last) sleep_s(0.005);
    }
    progress_msg me = mon_own_progress(m);
    char where[160], why[WHY_MAX], gone[256] = "";
    mon_describe(where, sizeof where, &me);
    size_t used = 0;
    int ngone = 0;
    for (int r = 0; r < m->size && used < sizeof gone; r++)
        if (!pong[r]) {
            used += (size_t)snprintf(gone + used, sizeof gone - used, "%s%d (%s)", ngone ? ", " : "", r,
                                     host(m, r));
            ngone++;
        }
    if (ngone)
        snprintf(why, sizeof why,
                 "rank%s %s %s gone: the launcher is ending the job (this rank was at %s)",
                 ngone > 1 ? "s" : "", gone, ngone > 1 ? "are" : "is", where);
    else
        snprintf(why, sizeof why,
                 "the launcher is ending the job (SIGTERM) at %s; every other rank still answers", where);
    m->fn(why, 1, m->ctx);
    tb_run_abort_last(); /* a checkpoint or results file being written: its temporary */
    fflush(stdout);
    fflush(stderr);
    tb_nccl_abort_all();
    mon_hold_exit(m, began);
}

void mon_take_failures(tb_monitor *m) {
    int flag = 0;
    MPI_Status st;
    if (MON_CHECK(m, MPI_Iprobe(MPI_ANY_SOURCE, TAG_FAIL, m->comm, &flag, &st)) != MPI_SUCCESS || !flag) return;
    fail_msg in;
    if (MON_CHECK(m, MPI_Recv(&in, sizeof in, MPI_BYTE, st.MPI_SOURCE, TAG_FAIL, m->comm, MPI_STATUS_IGNORE)) !=
        MPI_SUCCESS) {
        in.code = 1;
        snprintf(in.why, sizeof in.why, "rank %d (%s) failed; its error line could not be received",
                 st.MPI_SOURCE, host(m, st.MPI_SOURCE));
    }
    in.why[WHY_MAX - 1] = 0;
    if (in.code < 1 || in.code > 255) in.code = 1;
    /* rank 0 ending on an error of its own (from tb_abort's first step):
     * its line is the reason, and the failing rank ends by itself */
    if (atomic_load(&m->failing) || tb_log_ending(0)) return;
    /* the job ends with the rank's exit status (130 for its SIGINT), not 1 */
    mon_abort_code(m, in.why, in.code);
}

/* How long a failing rank waits for rank 0 to take its line and answer
 * with the job's reason; rank 0's watchdog looks every 10 ms. */
#define FAIL_ANSWER_S 2.0

static int g_fail_sent = 0; /* the notice went out (the failing thread only) */
static char g_fail_where[256]; /* tb_monitor_fail_where: written once, by the failing thread's notice */

const char *tb_monitor_fail_where(void) { return g_fail_where; }

void mon_fatal_notice(void *unused) {
    (void)unused;
    tb_monitor *m = atomic_load(&mon_running);
    if (!m) return;
    atomic_store(&m->failing, 1);
    if (m->ending) return;
    /* the step and what the rank was doing: the lock is held for
     * microseconds at a time, so it is tried for up to 20 ms; never waited
     * for (the failing thread may be the one holding it) */
    char where[160] = "", st[96];
    for (int k = 0; k < 20; k++) {
        if (pthread_mutex_trylock(&m->mu) == 0) {
            mon_step_words(st, sizeof st, m->step, m->phase);
            snprintf(where, sizeof where, " at %s, %s%s", st, m->collective ? "in the " : "in ", m->what);
            pthread_mutex_unlock(&m->mu);
            break;
        }
        sleep_s(0.001);
    }
    snprintf(g_fail_where, sizeof g_fail_where, "rank %d (%s) failed%s", m->rank, host(m, m->rank), where);
    /* written once, then only read while the send is in flight */
    static fail_msg out;
    out.code = tb_log_exit_code();
    snprintf(out.why, sizeof out.why, "%s: %s", g_fail_where, tb_log_last_error());
    if (m->rank == 0) {
        /* rank 0's own error is the job's reason: the others print it (not
         * "rank 0 is gone") before this rank's cleanups and MPI_Abort; its
         * abort mark puts g_fail_where before its line in the results file */
        m->ending = 1;
        tell_all(m, out.why, NULL);
        return;
    }
    MPI_Request rq;
    if (MPI_Isend(&out, sizeof out, MPI_BYTE, 0, TAG_FAIL, m->comm, &rq) != MPI_SUCCESS) return;
    MPI_Request_free(&rq); /* from static storage: safe before completion */
    g_fail_sent = 1;
}

void mon_on_rank_fatal(void *unused) {
    (void)unused;
    tb_monitor *m = atomic_load(&mon_running);
    /* the monitor thread itself failing could not see the answer */
    if (!m || !g_fail_sent || pthread_equal(pthread_self(), m->thread)) return;
    double t0 = tb_now();
    while (!atomic_load(&m->told) && tb_now() - t0 < FAIL_ANSWER_S) sleep_s(0.005);
    /* told: rank 0 marks its results file with our line and ends the job
     * (MPI_Abort) within its 2 s wait for every rank's line; if it cannot,
     * our own MPI_Abort (the abort hook, after this) does. Not told: rank 0
     * is gone or ending on its own error, so the job ends now. */
    if (atomic_load(&m->told)) sleep_s(ABORT_SELF_EXIT_S);
}
