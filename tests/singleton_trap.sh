#!/bin/sh
# singleton_trap.sh TRAINBENCH: emulates `srun -n 2` without an MPI plugin:
# two tasks that Slurm says belong to a 2-task step, each started alone.
# Both must refuse to train, each with the one-line message, non-zero exit.
tb=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for k in 0 1; do
  SLURM_NTASKS=2 SLURM_STEP_NUM_TASKS=2 SLURM_STEP_ID=0 SLURM_PROCID=$k \
    "$tb" train --steps 1 --image-size 32 --batch-size 2 --results "" >"$dir/out$k" 2>&1 &
done
fail=0
for k in 0 1; do :; done
wait
for k in 0 1; do
  cat "$dir/out$k"
  if ! grep -q "launch mistake: the launcher started 2 tasks" "$dir/out$k"; then
    echo "FAIL: task $k did not report the singleton trap"
    fail=1
  fi
  if grep -q "^step " "$dir/out$k"; then
    echo "FAIL: task $k trained anyway"
    fail=1
  fi
done
exit $fail
