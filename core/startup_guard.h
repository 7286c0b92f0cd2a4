/* startup_guard.h - ends a rank that waits too long at start-up, before
 * any watchdog runs.
 *
 * From before MPI starts until a command's own watch takes over (train's
 * watchdog, preflight's roll call), nothing sees a rank that never arrives:
 * frozen, or stuck in a file system or a driver before MPI_Init, it holds
 * every other rank in MPI_Init or the first collectives for ever. Armed
 * for timeout_s seconds (0 or less: off, as --timeout 0), a thread ends
 * this rank with one line naming the phase it waits in (set by _phase,
 * a string literal) unless disarmed first; the launcher then ends the
 * rest. The line names the launcher's rank before MPI has set the
 * identity. */
#ifndef TB_STARTUP_GUARD_H
#define TB_STARTUP_GUARD_H

void tb_startup_guard_arm(double timeout_s);
void tb_startup_guard_phase(const char *phase);
void tb_startup_guard_disarm(void);

#endif
