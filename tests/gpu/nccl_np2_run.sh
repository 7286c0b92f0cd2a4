#!/bin/sh
# nccl_np2_run.sh CHECKER COMMAND... - runs COMMAND, a test of ranks sharing
# the one GPU over NCCL (issue 26), only when CHECKER (tb_gpu_check) finds
# a CUDA device and a loaded NCCL >= 2.30; otherwise prints its reason and
# exits 77 (ctest: skipped; the GPU suite counts a skip on a GPU machine as
# a failure). COMMAND runs with NCCL_MULTI_RANK_GPU_ENABLE=1 and
# NCCL_DEBUG=WARN (unless set), which mpirun's local ranks inherit.
checker=$1
shift
"$checker" --nccl-min 23000 || exit $?
NCCL_MULTI_RANK_GPU_ENABLE=1
# NCCL's warnings in the test's log (NCCL prints nothing by default): the
# multi-rank mode is experimental, and a stall should leave NCCL's words
NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# no core binding: Open MPI binds each of 2 ranks to one core by default,
# and two such tests at once put 4 ranks (their CUDA spin-waits, NCCL's
# proxy threads, the watchdog) on cores 0 and 1 of a 16-core machine
OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
export NCCL_MULTI_RANK_GPU_ENABLE NCCL_DEBUG OMPI_MCA_hwloc_base_binding_policy
exec "$@"
