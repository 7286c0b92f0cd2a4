/* timer.h - host clocks: the monotonic wall clock for timing, and the CPU
 * time of the process and of the calling thread for CPU budgets (cores used
 * = CPU seconds / wall seconds). */
#ifndef TB_TIMER_H
#define TB_TIMER_H

#include <time.h>

static inline double tb_clock_s(clockid_t id) {
    struct timespec t;
    if (clock_gettime(id, &t) != 0) return 0;
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Wall time, seconds (CLOCK_MONOTONIC). */
static inline double tb_now(void) { return tb_clock_s(CLOCK_MONOTONIC); }
/* CPU seconds of every thread of this process so far (user + system). */
static inline double tb_process_cpu_s(void) { return tb_clock_s(CLOCK_PROCESS_CPUTIME_ID); }
/* CPU seconds of the calling thread so far (user + system). */
static inline double tb_thread_cpu_s(void) { return tb_clock_s(CLOCK_THREAD_CPUTIME_ID); }

#endif
