/* stall_guard.h - ends a rank that waits too long for the others where no
 * watchdog runs: at start-up, at the end, and in the commands that have no
 * watchdog of their own.
 *
 * From before MPI starts until a command's own watch takes over (train's
 * watchdog, preflight's roll call), and after train's watchdog stops until
 * MPI_Finalize returns, nothing sees a rank that never arrives: frozen, or
 * stuck in a file system or a driver, it holds every other rank in
 * MPI_Init, the first collectives or MPI_Finalize for ever. So too in
 * allreduce-bench's sweep and preflight's launch checks, which run
 * collectives without a watchdog. Armed for timeout_s seconds (0 or less:
 * off, as --timeout 0), a thread ends this rank with one line naming the
 * stage ("start-up", "end", or the command's: "allreduce-bench",
 * "preflight") and the phase it waits in (set by _phase; copied, up to 255
 * bytes) unless disarmed, armed again or extended first; the launcher then
 * ends the rest. The line names the launcher's rank before MPI has set the
 * identity. One guard (one thread) at a time: arming again replaces it.
 * Disarm does not return while another thread is ending the process (a
 * guard that fired as it was disarmed): that thread ends it.
 *
 * A start-up guard is not armed when the launcher started one rank, or
 * none (a singleton run): there are no others to wait for. */
#ifndef TB_STALL_GUARD_H
#define TB_STALL_GUARD_H

/* The phase of a guard armed before MPI_Init. */
#define TB_GUARD_MPI_INIT "MPI start-up (MPI_Init returns once every rank of the launch has reached it)"

void tb_stall_guard_arm(double timeout_s, const char *stage, const char *phase);
void tb_stall_guard_phase(const char *phase);
/* A new deadline for the armed guard, n x timeout_s from now (n calls that
 * may take timeout_s each: the line then says so); no new thread, so it
 * can be called before every collective. Nothing when none is armed. */
void tb_stall_guard_extend(double timeout_s, int n);
void tb_stall_guard_disarm(void);
/* Test only (TB_TEST_FAULT's freeze-startup, freeze-end, freeze-size,
 * freeze-nccl): this rank stops (SIGSTOP) with no guard of its own left to
 * fire, as a rank stuck in a hung driver answers nothing; continued (the
 * launcher's SIGCONT before its SIGTERM), it stays stuck until a signal
 * ends it. */
_Noreturn void tb_stall_guard_freeze(void);

#endif
