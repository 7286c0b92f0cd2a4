#!/bin/sh
# frozen_hang.sh TRAINBENCH MPIRUN [RUNS]: RUNS (default 10) 2-rank preflight launches whose
# rank 1 stops (SIGSTOP: TB_TEST_FAULT=freeze-startup:1) before MPI_Init, with one busy core
# beside them; each: its exit and seconds (--timeout 4; a hang is cut at 30 s, exit 137), and
# whether rank 0 printed its stall-guard line
set -u
tb=$1
mpirun=$2
sh -c 'while :; do :; done' &
busy=$!
trap 'kill $busy 2>/dev/null' EXIT
i=0
while [ "$i" -lt "${3:-10}" ]; do
  i=$((i + 1))
  t0=$(date +%s)
  TB_TEST_FAULT=freeze-startup:1 timeout -k 2 30 "$mpirun" --oversubscribe -np 2 "$tb" preflight --bytes 4096 \
    --threads 1 --backend cpu --comm mpi --timeout 4 >/dev/null 2>/tmp/frozen_hang.err
  rc=$?
  line=$(grep -c 'rank 0 ([^)]*) has waited 4 s (--timeout) in MPI start-up' /tmp/frozen_hang.err)
  echo "run $i: exit $rc after $(($(date +%s) - t0)) s; rank 0's line: $line"
done
