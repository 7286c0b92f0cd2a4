/* device_map.h - which GPU a rank uses, and the launch mistakes of that
 * choice, as pure functions of every rank's facts (tested with simulated
 * device counts and bus ids: tests/test_device_map.c).
 *
 * Rule: device = local rank modulo the devices this rank sees. With one
 * device per task (Slurm --gpus-per-task=1, or CUDA_VISIBLE_DEVICES set per
 * rank) every rank sees one device and takes ordinal 0; with all devices
 * visible, local rank r takes device r.
 *
 * Mistakes, decided alike on every rank from the same allgathered rows:
 *  - ranks outnumber devices: 3 ranks on a host that shows them 2 GPUs put
 *    local ranks 0 and 2 on one GPU;
 *  - two ranks on one GPU by another route: each sees its own single device
 *    (CUDA_VISIBLE_DEVICES=0 exported to every rank, a scheduler binding two
 *    tasks to one GPU): the PCI bus ids of the host's ranks must differ;
 *  - two ranks bound to the same CPU set (CPU backend), as before.
 * allow_shared_gpu (--share-gpu: with --comm mpi, or with --comm nccl on
 * NCCL >= 2.30 and NCCL_MULTI_RANK_GPU_ENABLE=1; older NCCL refuses two
 * ranks on one GPU) lets ranks share a GPU on purpose: a test of the
 * multi-rank code paths on a machine with one GPU. */
#ifndef TB_DEVICE_MAP_H
#define TB_DEVICE_MAP_H

#include <stddef.h>

typedef struct {
    char host[64];
    int local_rank;
    int devices;      /* CUDA devices this rank sees (0: CPU backend) */
    int device;       /* the ordinal it uses (-1: none) */
    char key[64];     /* "gpu:0000:3B:00.0", "cpus:0-11", or "" (not bound) */
} tb_devmap_row;

/* local_rank mod devices; -1 when devices < 1. */
int tb_device_for_local_rank(int local_rank, int devices);

/* 0 when the placement is fine; -1 with one line in why (the first mistake
 * found, naming the ranks, the host, the device and what to do). rows[r] is
 * rank r's. */
int tb_device_map_check(const tb_devmap_row *rows, int n, int allow_shared_gpu, char *why, size_t len);

/* NCCL runs several ranks on one GPU from 2.30 on, and only with
 * NCCL_MULTI_RANK_GPU_ENABLE=1 (experimental; src/init.cc of NCCL). */
#define TB_NCCL_MULTI_RANK_GPU_CODE 23000

/* --share-gpu over NCCL, from the loaded NCCL's version code and the
 * variable's value (NULL: unset), alike on every rank:
 *   1   allowed (>= 2.30, variable 1): why says what runs;
 *   0   NCCL older than 2.30: it refuses ("Duplicate GPU detected"), and
 *       the run shows its words (why: the warning to print first);
 *  -1   >= 2.30 without NCCL_MULTI_RANK_GPU_ENABLE=1: why is the refusal. */
int tb_share_gpu_nccl_verdict(int loaded, const char *multi_rank_env, char *why, size_t len);

/* One rank's CPU placement: its host, the compute threads it runs, the
 * (logical) CPUs it may run on (its affinity mask: bit c is CPU c; all
 * zero where it could not be read). */
typedef struct {
    char host[64];
    int threads;
    unsigned char mask[128]; /* cpu_set_t's 1024 CPUs */
} tb_core_row;

/* --threads' default for rank me, from every rank's host and mask (threads
 * unused) and host_cpus, the CPUs the job may use on the host
 * (core/host_cpus.h: a container's or job's CPU set, else the online CPUs):
 *  - ranks of its host that may run on some of its CPUs too (unbound ranks,
 *    as mpirun leaves them past the CPUs' count or under --bind-to none;
 *    overlapping sets): its CPUs / those ranks. A container's set of 8
 *    with 4 unbound ranks: 2 each, where online / ranks gave each 16,
 *    capped at 8: 32 threads on 8 CPUs;
 *  - a set of its own at least the host's share (host_cpus / its ranks):
 *    that set (Slurm's --cpus-per-task, one rank per container);
 *  - a smaller set of its own (mpirun binds each of one or two ranks to a
 *    core) or no mask: the host's share; the CPU backend then runs what the
 *    binding allows and says how to launch for the share.
 * At least 1. */
int tb_core_default_threads(const tb_core_row *rows, int n, int me, int host_cpus);

/* Ranks sharing CPUs, which the check above lets through: unbound ranks
 * (mpirun leaves them so when they outnumber the CPUs: --oversubscribe),
 * or ranks bound to overlapping sets. 1 when, on some host, the ranks'
 * threads outnumber the CPUs their masks cover together; what then names
 * the host with the most threads per CPU: "host vm: 4 ranks with 4 threads
 * in all on 2 CPUs". Otherwise -1 when some host's masks could not be read
 * (what names it), 0 (what empty) when every host has CPUs enough. */
int tb_core_sharing(const tb_core_row *rows, int n, char *what, size_t len);

#endif
