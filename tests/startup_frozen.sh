#!/bin/sh
# startup_frozen.sh TRAINBENCH MPIEXEC: a rank that never reaches MPI_Init
# (TB_TEST_FAULT=freeze-startup:1: SIGSTOP before MPI starts, so before the
# watchdog or preflight's roll call can see it; as a rank stuck in a hung
# file system or driver) ends the job through the start-up guard
# (--timeout) instead of holding every other rank in MPI_Init for ever, in
# train and in preflight: the job exits non-zero, rank 0 prints one line
# naming the phase it waited in and --timeout, and no process of the job is
# left. Without the guard the job hangs: the outer `timeout` (a hang guard
# only, far above --timeout) ends it and the test fails.
set -u
tb=$1
mpi=$2
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
# run through a link in the private directory: every process of the job
# then has that path in its command line, for pgrep
ln -s "$tb" "$d/trainbench" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# frozen NAME ARGS...: the job of ARGS with rank 1 frozen at start-up
frozen() {
  name=$1
  shift
  TB_TEST_FAULT=freeze-startup:1 timeout 60 "$mpi" -np 2 "$d/trainbench" "$@" --timeout 4 >"$d/out" 2>"$d/err"
  rc=$?
  grep '^trainbench' "$d/err"
  [ $rc -ne 0 ] || fail "$name: exit 0"
  case $rc in 124 | 137) fail "$name: the job hung until the test's own timeout killed it (exit $rc)" ;; esac
  want='error: start-up: rank 0 ([^)]*) has waited 4 s (--timeout) in MPI start-up'
  [ "$(grep -c "^trainbench: $want" "$d/err")" -eq 1 ] || fail "$name: rank 0 did not print its start-up line once"
  [ "$(grep -c "^trainbench.*error:" "$d/err")" -le 2 ] || fail "$name: more than one error line a rank"
  # the launcher ends the frozen rank too (SIGKILL reaches a stopped process)
  i=0
  while [ $i -lt 50 ] && pgrep -f "$d/" >/dev/null; do sleep 0.1; i=$((i + 1)); done
  left=$(pgrep -f "$d/" | tr '\n' ' ')
  if [ -n "$left" ]; then
    fail "$name: processes of the job left: $left"
    # shellcheck disable=SC2086 # a list of pids
    kill -KILL $left 2>/dev/null # this test's own job: the path is its private temporary directory
  fi
  [ "$fails" -eq 0 ] && echo "ok   $name: a rank frozen before MPI_Init ends the job (exit $rc)"
}
frozen train --synthetic --image-size 32 --batch-size 4 --steps 3 --scaling-steps 0 --results "$d/run.h5"
frozen preflight preflight --bytes 4096 --threads 1 --backend cpu --comm mpi
[ "$fails" -eq 0 ] || exit 1
echo "ok: a rank frozen before MPI_Init ends train and preflight through the start-up guard"
