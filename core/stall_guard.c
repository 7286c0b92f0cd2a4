/* stall_guard.c - the start-up and end guard (see stall_guard.h). */
#include "core/stall_guard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/faults.h"
#include "core/log.h"
#include "core/thread_start.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv;         /* on CLOCK_MONOTONIC */
static int g_on = 0;                /* armed, not yet disarmed */
static unsigned g_gen = 0;          /* arms so far: a guard fires only for its own */
static const char *g_stage = "";    /* a string literal */
static char g_phase[256] = "";      /* a copy: a phase may name a size or a row */
static struct timespec g_until;     /* the deadline (CLOCK_MONOTONIC) */
static double g_each = 0;           /* seconds allowed per call, */
static int g_calls = 1;             /* for this many calls since the deadline was set */

static void init_cv(void) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &a);
    pthread_condattr_destroy(&a);
}

/* g_until = now + n x s (g_mu held) */
static void set_deadline(double s, int n) {
    double total = s * (n > 0 ? n : 1);
    clock_gettime(CLOCK_MONOTONIC, &g_until);
    g_until.tv_sec += (time_t)total;
    g_until.tv_nsec += (long)((total - (double)(time_t)total) * 1e9);
    if (g_until.tv_nsec >= 1000000000L) {
        g_until.tv_sec++;
        g_until.tv_nsec -= 1000000000L;
    }
    g_each = s;
    g_calls = n > 0 ? n : 1;
}

static int passed(const struct timespec *t) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static void *guard(void *arg) {
    unsigned mine = (unsigned)(size_t)arg;
    pthread_mutex_lock(&g_mu);
    /* woken by disarm, a new arm (another generation) or an extension (a
     * later deadline): each time the deadline is read again */
    while (g_on && g_gen == mine && !passed(&g_until)) pthread_cond_timedwait(&g_cv, &g_mu, &g_until);
    /* the end is claimed under the lock: once disarm has returned, either
     * this guard is ending the process (tb_log_ending) or it never will; a
     * guard that fired as MPI_Finalize returned let main return 0 after the
     * guard's line. Another thread already ending the process ends it. */
    int fire = g_on && g_gen == mine && tb_log_claim_end();
    const char *stage = g_stage;
    char phase[sizeof g_phase], allowed[96];
    memcpy(phase, g_phase, sizeof phase);
    double waited = g_each * g_calls;
    if (g_calls > 1)
        snprintf(allowed, sizeof allowed, "--timeout %g s for each of %d calls", g_each, g_calls);
    else
        snprintf(allowed, sizeof allowed, "--timeout");
    pthread_mutex_unlock(&g_mu);
    if (!fire) return NULL;
    char host[64] = "";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    int rank = tb_fault_rank();
    tb_die("%s: rank %d (%s) has waited %g s (%s) in %s; a rank that never got there (frozen, or stuck "
           "in a file system or a driver) holds up every rank: find it (ps on the job's hosts), or give --timeout "
           "more time",
           stage, rank, host, waited, allowed, phase);
}

void tb_stall_guard_arm(double timeout_s, const char *stage, const char *phase) {
    if (!(timeout_s > 0)) return;
    /* one rank, or none started by a launcher: nobody to wait for */
    if (strcmp(stage, "start-up") == 0 && (tb_log_launcher_rank() < 0 || tb_log_launcher_size() == 1)) return;
    /* test-only (faults.h): this rank never gets to the others */
    const char *fault = strcmp(stage, "end") == 0        ? "freeze-end"
                        : strcmp(stage, "start-up") == 0 ? "freeze-startup"
                                                         : NULL;
    if (fault && tb_fault(fault, tb_fault_rank(), -1)) tb_stall_guard_freeze();
    pthread_once(&g_once, init_cv);
    pthread_mutex_lock(&g_mu);
    set_deadline(timeout_s, 1);
    g_stage = stage;
    snprintf(g_phase, sizeof g_phase, "%s", phase);
    g_on = 1;
    unsigned gen = ++g_gen;
    pthread_cond_broadcast(&g_cv); /* the guard this one replaces ends now, not at its deadline */
    pthread_mutex_unlock(&g_mu);
    pthread_t th;
    char what[64];
    snprintf(what, sizeof what, "the %s guard thread", stage);
    tb_thread_start(&th, NULL, guard, (void *)(size_t)gen, what);
    pthread_detach(th);
}

void tb_stall_guard_phase(const char *phase) {
    pthread_mutex_lock(&g_mu);
    snprintf(g_phase, sizeof g_phase, "%s", phase);
    pthread_mutex_unlock(&g_mu);
}

void tb_stall_guard_extend(double timeout_s, int n) {
    if (!(timeout_s > 0)) return;
    pthread_once(&g_once, init_cv);
    pthread_mutex_lock(&g_mu);
    if (g_on) {
        set_deadline(timeout_s, n);
        pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
}

void tb_stall_guard_disarm(void) {
    pthread_mutex_lock(&g_mu);
    int was = g_on;
    g_on = 0;
    if (was) pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    /* a guard that fired (or another thread's error) is ending the
     * process: the caller must not go on (train returning 0 from main) */
    tb_log_park_if_ending();
}

/* A frozen rank's guard, still armed, fired on the launcher's SIGCONT (its
 * deadline long past: a second line, in about one run in two), and the
 * rank went on into MPI_Init or its collectives while the launcher tore the
 * job down, which hung Open MPI 4.1's mpirun in one CI run. So the guard
 * is retired first (a new generation: the waiting thread never fires), and
 * once continued the rank stays where it stopped. */
_Noreturn void tb_stall_guard_freeze(void) {
    pthread_once(&g_once, init_cv);
    pthread_mutex_lock(&g_mu);
    g_on = 0;
    g_gen++;
    pthread_mutex_unlock(&g_mu);
    raise(SIGSTOP);
    tb_log_park();
}
