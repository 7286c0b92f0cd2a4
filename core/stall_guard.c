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

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv;         /* on CLOCK_MONOTONIC */
static int g_on = 0;                /* armed, not yet disarmed */
static unsigned g_gen = 0;          /* arms so far: a guard fires only for its own */
static const char *g_stage = "";    /* a string literal */
static char g_phase[256] = "";      /* a copy: a phase may name a size or a row */
static double g_s = 0;

static void init_cv(void) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &a);
    pthread_condattr_destroy(&a);
}

static void *guard(void *arg) {
    unsigned mine = (unsigned)(size_t)arg;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    pthread_mutex_lock(&g_mu);
    double s = g_s;
    until.tv_sec += (time_t)s;
    until.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    while (g_on && g_gen == mine && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g_cv, &g_mu, &until);
    /* the end is claimed under the lock: once disarm has returned, either
     * this guard is ending the process (tb_log_ending) or it never will; a
     * guard that fired as MPI_Finalize returned let main return 0 after the
     * guard's line. Another thread already ending the process ends it. */
    int fire = g_on && g_gen == mine && tb_log_claim_end();
    const char *stage = g_stage;
    char phase[sizeof g_phase];
    memcpy(phase, g_phase, sizeof phase);
    pthread_mutex_unlock(&g_mu);
    if (!fire) return NULL;
    char host[64] = "";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    int rank = tb_log_rank() >= 0 ? tb_log_rank() : tb_log_launcher_rank();
    tb_die("%s: rank %d (%s) has waited %g s (--timeout) in %s; a rank that never got there (frozen, or stuck "
           "in a file system or a driver) holds up every rank: find it (ps on the job's hosts), or give --timeout "
           "more time",
           stage, rank, host, s, phase);
}

void tb_stall_guard_arm(double timeout_s, const char *stage, const char *phase) {
    if (!(timeout_s > 0)) return;
    pthread_once(&g_once, init_cv);
    pthread_mutex_lock(&g_mu);
    g_s = timeout_s;
    g_stage = stage;
    snprintf(g_phase, sizeof g_phase, "%s", phase);
    g_on = 1;
    unsigned gen = ++g_gen;
    pthread_mutex_unlock(&g_mu);
    pthread_t th;
    if (pthread_create(&th, NULL, guard, (void *)(size_t)gen) != 0)
        TB_FATAL("cannot start the %s guard thread", stage);
    pthread_detach(th);
    /* test-only (faults.h): this rank never gets to the others */
    int rank = tb_log_rank() >= 0 ? tb_log_rank() : tb_log_launcher_rank();
    const char *fault = strcmp(stage, "end") == 0        ? "freeze-end"
                        : strcmp(stage, "start-up") == 0 ? "freeze-startup"
                                                         : NULL;
    if (fault && tb_fault(fault, rank, -1)) raise(SIGSTOP);
}

void tb_stall_guard_phase(const char *phase) {
    pthread_mutex_lock(&g_mu);
    snprintf(g_phase, sizeof g_phase, "%s", phase);
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
