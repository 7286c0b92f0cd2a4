#!/bin/sh
# frozen_rank_guard.sh SET TRAINBENCH MPIEXEC [PYTHON]: a rank that never gets
# to the others where no watchdog runs ends the job through the stall guard
# (--timeout) instead of holding every other rank for ever. SET train:
#   train, preflight  TB_TEST_FAULT=freeze-startup:1 (SIGSTOP before MPI
#            starts; as a rank stuck in a hung file system or driver): rank 0
#            waited in MPI_Init;
#   train end  TB_TEST_FAULT=freeze-end:1 (SIGSTOP once the watchdog has
#            stopped, after the last collective; as a rank stuck in a driver's
#            teardown): rank 0 waited in MPI_Finalize, and its results file
#            still says complete.
# SET commands (the commands without a watchdog):
#   allreduce-bench  freeze-startup:1 (MPI_Init), freeze-size:1:1 (before
#            the all-reduces of the second size: rank 0 waited --timeout in
#            its first), freeze-end:1 (MPI_Finalize; the results file says
#            complete);
#   preflight  hang-checks:1 (stops answering after the roll call, as a
#            rank stuck in a driver's query, before its own guard: rank 0
#            waited in the launch checks, and rank 1 says nothing),
#            freeze-end:1 (MPI_Finalize).
# Each: the job exits non-zero, rank 0 prints one line naming the stage, the
# phase and --timeout, the stopped rank 1 prints no guard's line, and no
# process of the job is left. Without the guard
# the job hangs: the outer `timeout` (a hang guard only, far above
# --timeout) ends it and the test fails. PYTHON (optional) needs h5py.
set -u
set_=$1
tb=$2
mpi=$3
py=${4:-}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
# run through a link in the private directory: every process of the job
# then has that path in its command line, for pgrep
ln -s "$tb" "$d/trainbench" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# frozen NAME FAULT WANT ARGS...: the job of ARGS with TB_TEST_FAULT=FAULT;
# rank 0's line must match WANT
frozen() {
  name=$1
  fault=$2
  want=$3
  shift 3
  echo "== $name ($fault)"
  # 35 s, then TERM, then KILL 5 s later (a launcher waiting on a stopped rank may not end on TERM): a
  # hang is reported with its case's name and the state of each of the job's processes (which one
  # holds the job: a rank, or the launcher), within the test's own 120 s, where a case takes 5-10 s
  TB_TEST_FAULT=$fault "$mpi" -np 2 "$d/trainbench" "$@" --timeout 4 >"$d/out" 2>"$d/err" &
  job=$!
  i=0
  while [ $i -lt 350 ] && kill -0 $job 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  hung=0
  if kill -0 $job 2>/dev/null; then
    hung=1
    echo "the job after 35 s (pid ppid state wait-channel command):"
    pids=$(pgrep -d, -f "$d/")
    [ -z "$pids" ] || ps -o pid=,ppid=,stat=,wchan:24=,args= -p "$pids" | cut -c1-200
    kill -TERM $job 2>/dev/null
    i=0
    while [ $i -lt 50 ] && kill -0 $job 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    kill -KILL $job 2>/dev/null
  fi
  wait $job
  rc=$?
  grep '^trainbench' "$d/err"
  [ $rc -ne 0 ] || fail "$name: exit 0"
  [ $hung -eq 0 ] || fail "$name: the job hung until the test's own timeout ended it (exit $rc)"
  [ "$(grep -c "^trainbench.*error: $want" "$d/err")" -eq 1 ] || fail "$name: rank 0 did not print its line once"
  [ "$(grep -c "^trainbench.*error:" "$d/err")" -le 2 ] || fail "$name: more than one error line a rank"
  # the stopped rank 1 has no guard left to fire (its own, retired, or none armed yet): the
  # launcher's SIGCONT before its SIGTERM must not let one print a second line
  if grep -q 'rank 1 ([^)]*) has waited' "$d/err"; then
    fail "$name: the frozen rank 1 printed a guard's line: $(grep 'rank 1 ([^)]*) has waited' "$d/err" | cut -c1-200)"
  fi
  # the launcher ends the frozen rank too (SIGKILL reaches a stopped process)
  i=0
  while [ $i -lt 50 ] && pgrep -f "$d/" >/dev/null; do sleep 0.1; i=$((i + 1)); done
  left=$(pgrep -f "$d/" | tr '\n' ' ')
  if [ -n "$left" ]; then
    fail "$name: processes of the job left: $left"
    # shellcheck disable=SC2086 # a list of pids
    kill -KILL $left 2>/dev/null # this test's own job: the path is its private temporary directory
  fi
  [ "$fails" -eq 0 ] && echo "ok   $name: the frozen rank ends the job (exit $rc)"
}
start='start-up: rank 0 ([^)]*) has waited 4 s (--timeout) in MPI start-up'
end_='end: rank 0 ([^)]*) has waited 4 s (--timeout) in the end of the run (MPI_Finalize'
# status FILE: the results file's status attribute (h5py), or "" without it
status() {
  if [ -n "$py" ] && "$py" -c 'import h5py' 2>/dev/null; then
    "$py" -c 'import sys, h5py; print(h5py.File(sys.argv[1], "r").attrs["status"])' "$1" 2>&1
  fi
}
case $set_ in
train)
  a="--synthetic --image-size 32 --batch-size 4 --steps 3 --scaling-steps 0"
  # shellcheck disable=SC2086
  frozen train freeze-startup:1 "$start" $a --results "$d/run.h5"
  frozen preflight freeze-startup:1 "$start" preflight --bytes 4096 --threads 1 --backend cpu --comm mpi
  # shellcheck disable=SC2086
  frozen "train end" freeze-end:1 "$end_" $a --results "$d/end.h5"
  st=$(status "$d/end.h5")
  [ -z "$st" ] || [ "$st" = complete ] || fail "train end: the results file says '$st', want complete (every step ran)"
  ;;
commands)
  a="allreduce-bench --comm mpi -b 8 -e 64 -w 0 -n 1"
  # shellcheck disable=SC2086
  frozen "allreduce-bench start" freeze-startup:1 "$start" $a
  # the second size (16 bytes): --timeout for each all-reduce, with its barrier
  # shellcheck disable=SC2086
  frozen "allreduce-bench sweep" freeze-size:1:1 \
    'allreduce-bench: rank 0 ([^)]*) has waited 4 s (--timeout) in the all-reduces of 16 bytes (size row 1' $a
  # shellcheck disable=SC2086
  frozen "allreduce-bench end" freeze-end:1 "$end_" $a --results "$d/ar.h5"
  st=$(status "$d/ar.h5")
  [ -z "$st" ] || [ "$st" = complete ] || fail "allreduce-bench end: the results file says '$st', want complete"
  p="preflight --bytes 4096 --threads 1 --backend cpu --comm mpi"
  # shellcheck disable=SC2086
  frozen "preflight checks" hang-checks:1 'preflight: rank 0 ([^)]*) has waited 4 s (--timeout) in the launch checks' $p
  # the hanging rank has no guard of its own (as a frozen rank; checked in frozen): its line,
  # as soon as rank 0's, let the launcher's kill take rank 0's line
  # shellcheck disable=SC2086
  frozen "preflight end" freeze-end:1 "$end_" $p
  ;;
*)
  echo "frozen_rank_guard.sh: unknown set '$set_' (train or commands)"
  exit 2
  ;;
esac
[ "$fails" -eq 0 ] || exit 1
echo "ok: a rank frozen where no watchdog runs ($set_) ends the job through the stall guard"
