#!/bin/sh
# launch/local.sh - run trainbench on this machine, one rank per GPU, each
# rank bound to cores of its own.
#
#   launch/local.sh [-n N] [--dry-run] [--help] -- trainbench [ARGS...]
#
# Runs `mpirun -np N --map-by slot:PE=K --bind-to core ... -x NAME ... CMD`
# with K = cores / N, so rank r owns cores r*K .. r*K+K-1 (its compute and
# loader threads stay there), and with every variable below that is set
# exported to the ranks by name. On a machine of S sockets, when S divides
# N and N/S ranks of K cores fit a socket, the mapping is instead
# --map-by ppr:N/S:socket:PE=K (Open MPI 5: package): N/S ranks on each
# socket, 0..N/S-1 on the first (slot:PE=K would fill socket 0 first and
# could put a rank across two); otherwise slot:PE=K, with a note.
# --dry-run prints the command on one line and exits 0.
#
# -n N (or TB_NP): ranks. Default: the GPUs this job may use (the entries of
#   CUDA_VISIBLE_DEVICES when it is set, up to the first CUDA cannot read,
#   so an empty value, -1 or NoDevFiles means none; else the GPUs
#   `nvidia-smi -L` lists); without GPUs 1, since one CPU rank already uses every core
#   through its threads (give -n to measure CPU data-parallel scaling).
#
# Exported to every rank (-x NAME) when set: NCCL_*, UCX_*, OMP_*, TB_GRAD_SYNC_*,
# CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, CUDA_LAUNCH_BLOCKING,
# CUDA_MODULE_LOADING, OPENBLAS_NUM_THREADS and the names in TB_EXPORT.
# Running as root adds --allow-run-as-root.
#
# In a container (launch/container/): the images run this script inside
# (their default command is `launch/local.sh -- trainbench`):
#   docker run --rm --gpus all --ipc=host -v "$PWD":/out -w /out trainbench [local.sh -- trainbench ARGS]
#   apptainer exec --nv trainbench.sif /opt/trainbench/launch/local.sh -- trainbench ARGS
#
# Environment (knobs, with defaults):
#   TB_NP=                 ranks, as -n (default above)
#   TB_MPIRUN=mpirun       the launcher: Open MPI's mpirun (checked before a
#                          run: it must be in PATH and say "(Open MPI)",
#                          or "(OpenRTE)" as mpiexec and orterun do)
#   TB_MPIRUN_ARGS=        extra mpirun arguments, split at whitespace
#                          (e.g. "--mca btl self,vader")
#   TB_CORES=              cores to share out (default: the physical cores
#                          of the CPUs this process may use, from lscpu and
#                          its affinity: a job's cpuset; else nproc)
#   TB_SOCKETS=            sockets to share the ranks over (default: the
#                          sockets of those cores, from lscpu)
#   TB_PE=                 cores per rank (default: TB_CORES / N, at least 1)
#   TB_BIND=core           core: each rank bound to its TB_PE cores;
#                          none: no binding and no PE mapping. When N >
#                          TB_CORES the ranks cannot have cores of their own:
#                          --oversubscribe --bind-to none, with a note.
#   TB_MAP_BY=             mapping when TB_BIND=core, in place of the
#                          ppr:N/S:socket:PE=K or slot:PE=K above
#   TB_REPORT_BINDINGS=0   1: add --report-bindings (mpirun prints each
#                          rank's cores)
#   TB_EXPORT=             more variable names to export, separated by spaces
#                          or commas
#   TB_DRY_RUN=0           1: as --dry-run
set -eu

TB_SCRIPT=local.sh
# shellcheck source=launch/common.sh
. "$(CDPATH='' cd -P -- "$(dirname -- "$0")" >/dev/null && pwd)/common.sh"

np=${TB_NP:-}
while [ $# -gt 0 ]; do
    case $1 in
        -n | -np | --np)
            [ $# -ge 2 ] || tb_die "$1 needs a number of ranks"
            np=$2
            shift 2 ;;
        --dry-run) TB_DRY_RUN=1; shift ;;
        -h | --help) tb_help "$0"; exit 0 ;;
        --) shift; break ;;
        -*) tb_die "unknown option '$1' (see --help)" ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || tb_die "no command: launch/local.sh [-n N] -- trainbench ARGS..."

if [ -z "$np" ]; then
    np=0
    if tb_is_set CUDA_VISIBLE_DEVICES; then
        np=$(tb_visible_gpus)
        [ "$np" -gt 0 ] ||
            echo "$TB_SCRIPT: note: CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' hides every GPU: 1 rank (-n N for more)" >&2
    elif command -v nvidia-smi >/dev/null 2>&1; then
        np=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') || np=0
    fi
    [ "$np" -gt 0 ] || np=1
fi
tb_need_count "-n (ranks)" "$np"
np=$tb_n
cores=${TB_CORES:-$(tb_physical_cores)}
tb_need_count TB_CORES "$cores"
cores=$tb_n

tb_check_mpirun
tb_add "${TB_MPIRUN:-mpirun}" -np "$np"
if [ -n "${SLURM_JOB_ID:-}" ]; then # inside an allocation: this machine's cores, not the job's task count
    tb_add --mca ras ^slurm
fi
if [ "$(id -u)" = 0 ]; then
    tb_add --allow-run-as-root
fi
case ${TB_BIND:-core} in
    core)
        if [ "$np" -gt "$cores" ]; then
            echo "$TB_SCRIPT: note: $np ranks on $cores cores: ranks share cores (--oversubscribe, no binding)" >&2
            tb_add --oversubscribe --bind-to none
        else
            pe=${TB_PE:-$((cores / np))}
            tb_need_count TB_PE "$pe"
            pe=$tb_n
            tb_map=${TB_MAP_BY:-}
            [ -n "$tb_map" ] || tb_map_pe "$np" "$pe" "$cores" # the sockets shared evenly when they can be
            tb_add --map-by "$tb_map" --bind-to core
        fi ;;
    none) tb_add --bind-to none ;;
    *) tb_die "TB_BIND must be core or none, got '$TB_BIND'" ;;
esac
if [ "${TB_REPORT_BINDINGS:-0}" = 1 ]; then
    tb_add --report-bindings
fi
tb_add_passthrough local
tb_add_split "${TB_MPIRUN_ARGS:-}"
tb_add "$@"
tb_finish
