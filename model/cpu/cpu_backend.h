/* cpu_backend.h - constructor of the CPU backend (float32, NCHW), and the
 * test switch of its event emulation. */
#ifndef TB_CPU_BACKEND_H
#define TB_CPU_BACKEND_H

#include "model/backend.h"

/* Returns the CPU backend; opts->threads worker threads (0: all cores). */
tb_backend *tb_cpu_backend_create(const tb_backend_opts *opts);

/* Test switch. The CPU runs every op to completion, so its events complete
 * when recorded. With hold on, events recorded from now stay pending
 * (event_done returns 0) until tb_cpu_event_release or hold is turned off
 * (which releases them all), or until event_wait, which completes the
 * event it waits for and counts a forced wait. That lets a test prove that
 * code waits for, or checks, an event before reusing what it guards (a
 * loader slot whose upload is in flight). */
void tb_cpu_event_hold(tb_backend *be, int on);
/* Completes every pending event now. */
void tb_cpu_event_release(tb_backend *be);
/* event_wait calls so far that found their event pending. */
long tb_cpu_event_forced_waits(tb_backend *be);

#endif
