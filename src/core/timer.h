/* timer.h - monotonic wall clock for host-side timing. */
#ifndef TB_TIMER_H
#define TB_TIMER_H

#include <time.h>

static inline double tb_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
