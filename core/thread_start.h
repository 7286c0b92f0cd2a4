/* thread_start.h - starting one of trainbench's threads (loader workers,
 * the watchdog, guards, the gradient communication thread, ...), or ending
 * the job with one line that says which, why (pthread_create's error) and
 * what limits it: the per-user limit on processes and threads (ulimit -u,
 * which counts every thread of every process of that user on the host) or
 * the memory for its stack, where a bare "cannot start the X thread" left
 * the user to guess. */
#ifndef TB_THREAD_START_H
#define TB_THREAD_START_H

#include <pthread.h>

/* pthread_create(t, attr, fn, arg), or the one line and the job's end
 * (tb_die): "cannot start WHAT: Resource temporarily unavailable; ...".
 * Test-only: TB_TEST_FAULT=no-thread:RANK:N makes this process's Nth
 * start (1: the first) fail with EAGAIN (core/faults.h). */
void tb_thread_start(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg, const char *what);

/* The line's reason and advice for pthread_create's error rc, into buf. */
void tb_thread_start_why(int rc, char *buf, size_t len);

#endif
