#!/bin/sh
# no_gpu_run.sh CHECKER COMMAND... - the opposite of gpu/gpu_run.sh: runs
# COMMAND only when CHECKER (tb_gpu_check) finds no CUDA device; otherwise
# says so and exits 77 (ctest: skipped). For tests of what a machine without
# a GPU must answer.
checker=$1
shift
if "$checker" >/dev/null 2>&1; then
  echo "SKIP: a CUDA device is visible: this test is for machines without one"
  exit 77
fi
exec "$@"
