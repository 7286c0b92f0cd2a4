/* thread_start.c - a thread started, or one line saying why not
 * (thread_start.h). */
#include "core/thread_start.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "core/faults.h"
#include "core/log.h"

void tb_thread_start_why(int rc, char *buf, size_t len) {
    if (rc == EAGAIN) {
        struct rlimit rl;
        char lim[64] = "";
        if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            snprintf(lim, sizeof lim, ", now %llu", (unsigned long long)rl.rlim_cur);
        snprintf(buf, len,
                 "%s: the user's limit on processes and threads (ulimit -u%s, counting every thread of the user's "
                 "processes on this host) or the system's is reached, or there is no memory for its stack; raise "
                 "the limit, or run fewer ranks or loader threads (--loader-threads) on this host",
                 strerror(rc), lim);
    } else {
        snprintf(buf, len, "%s", strerror(rc));
    }
}

void tb_thread_start(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg, const char *what) {
    static atomic_int starts;
    int rc = tb_fault_nth("no-thread", &starts) ? EAGAIN : pthread_create(t, attr, fn, arg);
    if (rc == 0) return;
    char why[512];
    tb_thread_start_why(rc, why, sizeof why);
    tb_die("cannot start %s: %s", what, why);
}
