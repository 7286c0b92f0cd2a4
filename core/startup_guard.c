/* startup_guard.c - the start-up guard (see startup_guard.h). */
#include "core/startup_guard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/faults.h"
#include "core/log.h"

static pthread_mutex_t g_guard_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_guard_cv;
static int g_guard_on = 0;            /* armed, not yet disarmed */
static const char *g_guard_phase = ""; /* a string literal */
static double g_guard_s = 0;

static void *guard(void *arg) {
    (void)arg;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)g_guard_s;
    until.tv_nsec += (long)((g_guard_s - (double)(time_t)g_guard_s) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&g_guard_mu);
    int rc = 0;
    while (g_guard_on && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g_guard_cv, &g_guard_mu, &until);
    int fire = g_guard_on;
    const char *phase = g_guard_phase;
    pthread_mutex_unlock(&g_guard_mu);
    if (!fire) return NULL;
    char host[64] = "";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    int rank = tb_log_rank() >= 0 ? tb_log_rank() : tb_log_launcher_rank();
    tb_die("start-up: rank %d (%s) has waited %g s (--timeout) in %s; a rank that never got there (frozen, "
           "or stuck in a file system or a driver) holds up every rank: find it (ps on the job's hosts), or "
           "give --timeout more time",
           rank, host, g_guard_s, phase);
}

void tb_startup_guard_arm(double timeout_s) {
    if (!(timeout_s > 0)) return;
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&g_guard_cv, &a);
    pthread_condattr_destroy(&a);
    g_guard_s = timeout_s;
    g_guard_on = 1;
    g_guard_phase = "MPI start-up (MPI_Init returns once every rank of the launch has reached it)";
    pthread_t th;
    if (pthread_create(&th, NULL, guard, NULL) != 0) TB_FATAL("cannot start the start-up guard thread");
    pthread_detach(th);
    /* test-only (faults.h): this rank never reaches MPI_Init */
    if (tb_fault("freeze-startup", tb_log_launcher_rank(), -1)) raise(SIGSTOP);
}

void tb_startup_guard_phase(const char *phase) {
    pthread_mutex_lock(&g_guard_mu);
    g_guard_phase = phase;
    pthread_mutex_unlock(&g_guard_mu);
}

void tb_startup_guard_disarm(void) {
    pthread_mutex_lock(&g_guard_mu);
    int was = g_guard_on;
    g_guard_on = 0;
    if (was) pthread_cond_broadcast(&g_guard_cv);
    pthread_mutex_unlock(&g_guard_mu);
}
