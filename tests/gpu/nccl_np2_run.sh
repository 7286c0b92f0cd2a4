#!/bin/sh
# nccl_np2_run.sh CHECKER COMMAND... - runs COMMAND, a test of ranks sharing
# the one GPU over NCCL (issue 26), only when CHECKER (tb_gpu_check) finds
# a CUDA device and a loaded NCCL >= 2.30; otherwise prints its reason and
# exits 77 (ctest: skipped; the GPU suite counts a skip on a GPU machine as
# a failure). COMMAND runs with NCCL_MULTI_RANK_GPU_ENABLE=1, which mpirun's
# local ranks inherit.
checker=$1
shift
"$checker" --nccl-min 23000 || exit $?
NCCL_MULTI_RANK_GPU_ENABLE=1
export NCCL_MULTI_RANK_GPU_ENABLE
exec "$@"
