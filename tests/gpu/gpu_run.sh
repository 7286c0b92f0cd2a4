#!/bin/sh
# gpu_run.sh CHECKER COMMAND... - runs COMMAND only when CHECKER (tb_gpu_check)
# finds a CUDA device; otherwise prints its reason and exits 77 (ctest: skipped).
checker=$1
shift
"$checker" || exit $?
exec "$@"
