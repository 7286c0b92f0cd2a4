#!/bin/sh
# singleton_trap.sh TRAINBENCH: emulates `srun -n 2` without an MPI plugin:
# two tasks that Slurm says belong to a 2-task step, each started alone.
# Both must refuse to train: each exits non-zero, prints the launch-mistake
# message on one error line, and prints no training step.
tb=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for k in 0 1; do
  (SLURM_NTASKS=2 SLURM_STEP_NUM_TASKS=2 SLURM_STEP_ID=0 SLURM_PROCID=$k \
     "$tb" train --steps 1 --image-size 32 --batch-size 2 --results "" >"$dir/out$k" 2>&1
   echo $? >"$dir/rc$k") &
done
wait
fail=0
for k in 0 1; do
  cat "$dir/out$k"
  rc=$(cat "$dir/rc$k" 2>/dev/null)
  if [ -z "$rc" ] || [ "$rc" -eq 0 ]; then
    echo "FAIL: task $k exited with status '${rc:-none}', expected non-zero"
    fail=1
  fi
  lines=$(grep -c "error: launch mistake: the launcher started 2 tasks (SLURM_STEP_NUM_TASKS=2) but MPI sees a world of 1" "$dir/out$k")
  if [ "$lines" -ne 1 ]; then
    echo "FAIL: task $k printed the singleton-trap error line $lines times, expected once"
    fail=1
  fi
  if grep -q "^step " "$dir/out$k"; then
    echo "FAIL: task $k trained anyway"
    fail=1
  fi
done
[ "$fail" -eq 0 ] && echo "ok: both tasks refused with exit status $(cat "$dir/rc0") and $(cat "$dir/rc1")"
exit $fail
