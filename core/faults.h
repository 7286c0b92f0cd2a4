/* faults.h - test-only fault injection, so the failure paths can be tested
 * for real. One environment variable, never set in production:
 *
 *   TB_TEST_FAULT=KIND:RANK[:STEP]
 *
 *   kill          SIGKILL this rank at the start of STEP
 *   freeze        SIGSTOP this rank at the start of STEP (it stops answering)
 *   freeze-startup  SIGSTOP this rank before MPI starts, where its
 *                 start-up guard would be armed (train, preflight,
 *                 allreduce-bench; no step; RANK is the launcher's:
 *                 OMPI_COMM_WORLD_RANK ...), before any watchdog
 *   freeze-end    SIGSTOP this rank after the last collective of train,
 *                 allreduce-bench or preflight, where its end guard would
 *                 be armed (train's watchdog stopped; no step)
 *   interrupt     SIGINT to this rank at the start of STEP (a Ctrl-C that
 *                 reaches one rank; RANK -1: srun's to every rank)
 *   interrupt-startup  SIGINT to this rank in train's start-up, which then
 *                 never gets further (a Ctrl-C during a long dataset scan)
 *   slow-step     sleep 1 s at the start of STEP (a hiccup: another job,
 *                 a page-in; before the clock, a slow first step)
 *   die-end       tb_die after train's last collective, the watchdog
 *                 stopped (no step): an error in the end's teardown
 *   die-end-late-line  as die-end, and rank 0 (when not RANK), off the
 *                 CPU when the launcher's SIGTERM comes, says its line 0.4 s
 *                 late (0.1 s under Open MPI 5), inside the teardown's hold
 *   exit0         exit(0) at the start of STEP, without a word (a rank that
 *                 leaves early)
 *   exit0-late-pong  as exit0, and every other rank, in the launcher's
 *                 teardown, answers the others' pings just after their
 *                 window closed (its watchdog off the CPU on a loaded host)
 *   die           tb_die at the start of STEP: this rank's own fatal error
 *                 (a bad file, a full disk), its line the job's reason
 *   kill-bwd      SIGKILL this rank inside the backward pass of STEP, once a
 *                 gradient bucket has gone to communication (the asynchronous
 *                 step: collectives of this step queued, others still to
 *                 come)
 *   freeze-bwd    SIGSTOP there instead
 *   nccl-abort    there: this rank aborts its NCCL communicators
 *                 (ncclCommAbort) and parks, alive; the peers' collectives
 *                 then never complete, or fail with NCCL's asynchronous
 *                 error where a transport notices (sockets)
 *   nan           a NaN in this rank's gradients in STEP
 *   perturb       this rank's weights drift at the end (replica check)
 *   fatal-in-branch  a fatal error (TB_FATAL) inside the first weight-gradient
 *                 branch of a CUDA graph capture (TB_WGRAD_STREAM=on; no
 *                 step): the capture is abandoned with the second stream
 *                 forked into it, and the steps run eagerly
 *   bn-skew       this rank's BatchNorm running statistics set to 1000
 *                 before each --val evaluation (which must score with
 *                 rank 0's on every rank)
 *   kill-in-ckpt  SIGKILL while writing the checkpoint of STEP
 *   term-in-ckpt  SIGTERM half-way through writing the checkpoint of STEP,
 *                 then 1 s more of writing (a job's end arriving mid-write)
 *   slow-ckpt     sleep 0.5 s in each checkpoint write (of STEP, or of every
 *                 step when STEP is omitted): a slow file system
 *   stall-ckpt    sleep --timeout + 1 s in the checkpoint write of STEP: a
 *                 file system slower than the watchdog allows
 *   slow-row      sleep 3x the step's own time (at least 0.2 s) after each
 *                 timed step of the STEP-rank scaling row (a 1-rank row
 *                 slowed by other load: super-linear rows)
 *   wrong-sum     allreduce-bench: one element of this rank's sum of size
 *                 row STEP (0 the first) made wrong after the timing
 *   slow-time     allreduce-bench: this rank's time of size row STEP taken
 *                 as 1 s longer, before the ranks' times are combined (-a)
 *   slow-first    allreduce-bench: this rank sleeps 1 s in the first
 *                 all-reduce of size row STEP (--comm mpi), as a first
 *                 call that sets up a connection
 *   freeze-nccl   allreduce-bench --comm nccl: SIGSTOP this rank after the
 *                 barrier of size row STEP's first loop, before it queues
 *                 its all-reduces: the others' never finish
 *   freeze-size   allreduce-bench: SIGSTOP this rank before the all-reduces
 *                 of size row STEP, as their guard is armed
 *                 (freeze-startup, freeze-end, freeze-nccl, freeze-size:
 *                 the rank's own stall guard retired, and continued, it
 *                 stays stuck until killed: tb_stall_guard_freeze)
 *   host-mem      train's and step's host-memory check read STEP MiB as
 *                 what this host has available (STEP is a size here, not a
 *                 step: a host too small for the batch, without filling one)
 *   no-thread     the STEP-th thread this process starts (1: the first;
 *                 core/thread_start.h) fails as under a reached ulimit -u
 *   emfile        the loader's STEP-th file open (1: the first) fails
 *                 with EMFILE, as under a reached ulimit -n
 *   hang-rollcall, hang-checks, hang-allreduce, hang-barrier   stop
 *                 answering in preflight (the roll call; after it, before
 *                 the launch checks; before the warm-up all-reduce; after
 *                 it, before the barrier of the timed one)
 *   engine-refuses  the CUDA backend: the STEP-th trial run of a cuDNN
 *                 graph engine under --no-autotune (1: the first; every one
 *                 when STEP is omitted) returns CUDNN_STATUS_NOT_SUPPORTED,
 *                 as an engine that plans but will not run
 *
 * RANK -1 matches every rank; STEP may be omitted for the kinds without a
 * step. */
#ifndef TB_FAULTS_H
#define TB_FAULTS_H

#include <stdatomic.h>
#include <stdint.h>

/* The rank a fault's RANK is matched against: MPI's once it is up, before
 * that the launcher's (OMPI_COMM_WORLD_RANK ...), -1 where neither is known. */
int tb_fault_rank(void);

/* 1 when fault `kind` is set for this rank and step (step < 0: any). */
int tb_fault(const char *kind, int rank, int64_t step);
/* 1 when fault `kind` is set, for whichever rank (the kinds every other
 * rank answers: exit0-late-pong). */
int tb_fault_kind(const char *kind);

/* For the kinds whose STEP counts events (no-thread, emfile): counts one
 * more of them on the caller's counter and says whether `kind` is set for
 * this rank (0 before MPI names one) at that count (1: the first). Without
 * TB_TEST_FAULT it counts nothing and returns 0 at once. */
int tb_fault_nth(const char *kind, atomic_int *count);

/* 1 when fault `kind` is set for this rank, with its third field (STEP,
 * or a size for the kinds that take one) in *arg; 0 without one. */
int tb_fault_arg(const char *kind, int rank, int64_t *arg);

/* Carries out kill / freeze / exit0 if one is set for (rank, step). */
void tb_fault_process(int rank, int64_t step);

/* 1 when a fault inside backward (kill-bwd, freeze-bwd, nccl-abort) is set
 * for (rank, step); the trainer then calls tb_fault_strike_in_backward
 * (src/train/fault_strike.h) at the moment described above. */
int tb_fault_in_backward(int rank, int64_t step);

#endif
