/* launch_check.h - launch mistakes caught at start-up, before any work,
 * each ending the run on every rank with one line that says what is wrong
 * and what to do (the failure modes of docs/SEEDS.md section 3):
 *
 *  - the singleton trap: the launcher or scheduler started N tasks but MPI
 *    sees a world of 1 (srun without --mpi=pmix, a foreign mpirun), so every
 *    task would train alone as rank 0;
 *  - two ranks on one device: the same GPU (ranks outnumbering the devices
 *    they see, or each seeing the same one), or the same bound CPU set
 *    (comm/device_map.h decides; --share-gpu allows GPUs on purpose);
 *  - ranks running different binaries, versions, libraries or arguments
 *    (an allgather of each rank's fingerprint);
 *  - NCCL_* or UCX_* variables that differ between rank 0 and another rank
 *    (set in rank 0's shell but not exported with mpirun -x). */
#ifndef TB_LAUNCH_CHECK_H
#define TB_LAUNCH_CHECK_H

#include "comm/comm.h"
#include "comm/device_map.h"
#include "model/backend.h"

/* Call right after tb_comm_init. */
void tb_launch_check_singleton(const tb_comm_info *info);
/* The CUDA device this rank takes: local rank mod the devices it sees, for
 * --backend cuda or auto (comm/device_map.h); -1 with *devices 0 on the CPU
 * or without a device (backend creation then says why, or auto picks the
 * CPU). */
int tb_launch_pick_device(const tb_comm_info *info, const char *backend, int *devices);
/* Collective over the world; be may be NULL (no device). devices: CUDA
 * devices this rank sees (0 on the CPU backend), device: the ordinal it
 * uses; allow_shared_gpu: --share-gpu. subcommand, argc and argv are what
 * this rank was started with. */
void tb_launch_check_ranks(const tb_comm_info *info, const tb_backend *be, int devices, int device,
                           int allow_shared_gpu, const char *subcommand, int argc, char **argv);

/* Ranks sharing a GPU over NCCL (--share-gpu with --comm nccl), decided
 * alike on every rank from the loaded NCCL and NCCL_MULTI_RANK_GPU_ENABLE
 * (comm/device_map.h tb_share_gpu_nccl_verdict): a refusal ends the run on
 * every rank with one line; otherwise rank 0 prints what runs (or, before
 * NCCL 2.30, that NCCL's own refusal follows). Collective over the world. */
void tb_launch_check_share_gpu_nccl(const tb_comm_info *info, const char *subcommand);

/* The most ranks on one device of one host (device keys gathered): 2 when
 * two ranks share a GPU, 1 otherwise (and for ranks without a device).
 * Collective over the world. */
int tb_launch_ranks_per_device(const tb_comm_info *info, const tb_backend *be);

/* Every rank's host and affinity mask (comm/device_map.h tb_core_row,
 * threads 0), in rank order, for --threads' default (tb_core_default_threads)
 * and then the sharing verdict below; the caller frees. Collective over the
 * world. */
tb_core_row *tb_launch_cpu_rows(const tb_comm_info *info);

/* Ranks sharing CPUs (comm/device_map.h tb_core_sharing over rows, with
 * every rank's threads gathered into them): 1 with what naming the most
 * crowded host, 0 with what "" when every host has CPUs enough, -1 when a
 * host's masks could not be read. Collective over the world. */
int tb_launch_core_sharing(const tb_comm_info *info, tb_core_row *rows, int threads, char *what, size_t len);

/* The NCCL_/UCX_/OMPI_MCA_/CUDA_VISIBLE_DEVICES/OMP_NUM_THREADS variables
 * of this process, "NAME=value" sorted and joined by spaces. */
void tb_launch_env(char *buf, size_t len, int all_relevant);

#endif
