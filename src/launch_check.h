/* launch_check.h - launch mistakes caught at start-up, before any work,
 * each ending the run on every rank with one line that says what is wrong
 * and what to do (the failure modes of docs/SEEDS.md section 3):
 *
 *  - the singleton trap: the launcher or scheduler started N tasks but MPI
 *    sees a world of 1 (srun without --mpi=pmix, a foreign mpirun), so every
 *    task would train alone as rank 0;
 *  - two ranks on one device: the same GPU, or the same bound CPU set;
 *  - ranks running different binaries, versions, libraries or arguments
 *    (an allgather of each rank's fingerprint);
 *  - NCCL_* or UCX_* variables that differ between rank 0 and another rank
 *    (set in rank 0's shell but not exported with mpirun -x). */
#ifndef TB_LAUNCH_CHECK_H
#define TB_LAUNCH_CHECK_H

#include "comm/comm.h"
#include "model/backend.h"

/* Call right after tb_comm_init. */
void tb_launch_check_singleton(const tb_comm_info *info);
/* Collective over the world; be may be NULL (no device). subcommand, argc
 * and argv are what this rank was started with. */
void tb_launch_check_ranks(const tb_comm_info *info, const tb_backend *be, const char *subcommand,
                           int argc, char **argv);

/* The NCCL_/UCX_/OMPI_MCA_/CUDA_VISIBLE_DEVICES/OMP_NUM_THREADS variables
 * of this process, "NAME=value" sorted and joined by spaces. */
void tb_launch_env(char *buf, size_t len, int all_relevant);

#endif
