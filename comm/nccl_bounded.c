/* nccl_bounded.c - the abort path's bounded wait (see nccl.h): a call that
 * may block for ever (ncclCommAbort on a hung peer or a wedged GPU) runs on
 * a helper thread, and the caller waits for it at most so long. No NCCL
 * here: every build has it, and its test runs on any host. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/nccl.h"

/* Shared by the caller and the helper; the last of the two to leave frees
 * it, so a helper that outlives a timed-out wait never touches freed
 * memory. */
typedef struct {
    void (*fn)(void *);
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int refs;
} bounded_run;

/* Drops one reference under the lock; frees on the last. */
static void release(bounded_run *r) {
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left > 0) return;
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static void *helper(void *p) {
    bounded_run *r = p;
    r->fn(r->arg);
    pthread_mutex_lock(&r->mu);
    r->done = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    release(r);
    return NULL;
}

int tb_nccl_run_bounded(void (*fn)(void *), void *arg, double seconds) {
    if (!(seconds >= 0)) seconds = 0;
    if (seconds > 86400) seconds = 86400;
    bounded_run *r = calloc(1, sizeof *r);
    if (!r) return TB_RUN_NO_THREAD;
    r->fn = fn;
    r->arg = arg;
    r->refs = 2;
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0;
    ok = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&r->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok || pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r); /* a half-made cv or mutex holds no resource on Linux */
        return TB_RUN_NO_THREAD;
    }
    pthread_attr_t ta;
    pthread_t th;
    ok = pthread_attr_init(&ta) == 0;
    ok = ok && pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED) == 0 &&
         pthread_create(&th, &ta, helper, r) == 0;
    pthread_attr_destroy(&ta);
    if (!ok) {
        r->refs = 1;
        release(r);
        return TB_RUN_NO_THREAD;
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    time_t whole = (time_t)seconds;
    long ns = until.tv_nsec + (long)((seconds - (double)whole) * 1e9);
    until.tv_sec += whole + ns / 1000000000L;
    until.tv_nsec = ns % 1000000000L;
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    while (!r->done && rc == 0) rc = pthread_cond_timedwait(&r->cv, &r->mu, &until);
    int done = r->done;
    pthread_mutex_unlock(&r->mu);
    release(r);
    return done ? TB_RUN_DONE : TB_RUN_TIMED_OUT;
}

double tb_nccl_abort_wait_s(char *err, size_t len) {
    const char *v = getenv("TB_NCCL_ABORT_WAIT_S");
    if (!v || !v[0]) return TB_NCCL_ABORT_WAIT_DEFAULT_S;
    char *end = NULL;
    errno = 0;
    double s = strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !(s >= 0 && s <= 3600)) {
        snprintf(err, len,
                 "TB_NCCL_ABORT_WAIT_S=%.40s: not a number of seconds from 0 to 3600 (how long the abort path "
                 "waits for ncclCommAbort); set it to e.g. %g, or unset it",
                 v, TB_NCCL_ABORT_WAIT_DEFAULT_S);
        return -1;
    }
    return s;
}
