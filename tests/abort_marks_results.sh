#!/bin/sh
# abort_marks_results.sh TRAINBENCH PYTHON [MPIEXEC]: a run that ends on an
# error or a signal ends with one stderr line, leaves no temporary file, and
# its results file says "aborted" with the reason (never "running"):
#   strict   --strict-data meets a truncated JPEG, three times over (the
#            loader thread's error once raced the main thread's BLAS call at
#            exit: a segfault after the line);
#   fsize    the checkpoint cannot be written (a private 2 MiB tmpfs: a full
#            disk, ENOSPC): "cannot write checkpoint", the checkpoint's
#            temporary removed, the results file still marked (run as root
#            only: skipped, and said so, where mounting is not allowed);
#   ftrace   the same full disk under --trace: the system's reason in the
#            line, no t.json.tmp.PID left there;
#   sigint   Ctrl-C on one rank: exit 130, "stopped by SIGINT"; and in
#            start-up: the line says the results file was not written, an
#            earlier run's file at the path unchanged;
#   earlier  a run that fails at its first batch (every JPEG of its --data
#            bad) leaves an earlier run's results file at the path as it was
#            and says so in a '#' line; one that fails after its first steps
#            (TB_TEST_FAULT=die at step 3) replaces it, marked aborted;
#   sigkill  SIGKILL on one rank: the snapshot left on disk says "aborted"
#            (a snapshot's reason) with an end_time, never "running";
#   mistake  (MPIEXEC given) two ranks started with different arguments:
#            each says so and the job exits 1, no segfault;
#   peer     (MPIEXEC given) rank 1 ends on its own error: rank 0's line and
#            the results file give rank 1's line, with its step, as the
#            reason; each rank prints one line; and when both ranks fail at
#            once, each prints its own (or rank 1 rank 0's, when that comes
#            first) and rank 0's is the reason;
#   root     (MPIEXEC given) rank 0 ends on its own error: rank 1's line
#            gives rank 0's, with its step (not "rank 0 is gone");
#   int      (MPIEXEC given) Ctrl-C (SIGINT) on rank 0 of two, the watchdog
#            on: the same, and the results file says aborted by SIGINT; on
#            rank 1: exit 130; on rank 1 in start-up: the earlier run's file
#            at the path unchanged;
#   usr1     (MPIEXEC given) SIGUSR1 to mpirun (forwarded to every rank):
#            each rank's line, the results file aborted by SIGUSR1.
# PYTHON needs h5py (exit 77 without). About 30 s.
set -u
tb=$1
py=$2
mpi=${3:-}
"$py" -c 'import h5py' 2>/dev/null || { echo "SKIP: $py has no h5py"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
# shellcheck disable=SC1091 # fail, status and check: tests/one_line_checks.sh
. "$(dirname "$0")/one_line_checks.sh"
run() { "$tb" --image-size 32 --batch-size 8 --scaling-steps 0 "$@"; }

"$tb" mkdata --out "$d/set" --classes 2 --per-class 8 --min-side 48 --max-side 64 >/dev/null || exit 1
f=$(find "$d/set" -name '*.jpg' | sort | sed -n 3p)
head -c 300 "$f" >"$d/cut" && mv "$d/cut" "$f"
for i in 1 2 3; do
  rm -f "$d/strict.h5"
  run --data "$d/set" --steps 12 --strict-data --results "$d/strict.h5" >"$d/out" 2>"$d/err"
  check "strict $i" $? 1 "$d/err" "bad sample" "$d/strict.h5"
done

# a full disk: a private 2 MiB tmpfs (unshare -m; skipped where mounting is
# not allowed) holds the results file but not ResNet-18's checkpoint (45 MB);
# what it holds is copied out before the namespace, and the mount, go
mkdir "$d/small"
# shellcheck disable=SC2016 # the inner shell expands its own arguments
if unshare -m sh -c 'mount -t tmpfs -o size=2m tmpfs "$1"' sh "$d/small" 2>/dev/null; then
  # shellcheck disable=SC2016
  unshare -m sh -c 'mount -t tmpfs -o size=2m tmpfs "$1" || exit 99
    "$2" --image-size 32 --batch-size 8 --scaling-steps 0 --synthetic --steps 4 --ckpt "$1/c.h5" --ckpt-every 2 \
      --results "$1/fsize.h5" >"$3/out" 2>"$3/err"
    rc=$?
    cp "$1/fsize.h5" "$3/fsize.h5" 2>/dev/null
    ls "$1" >"$3/small.ls"
    exit $rc' sh "$d/small" "$tb" "$d"
  rc=$?
  grep -q '\.tmp\.' "$d/small.ls" && fail "fsize: a temporary file left on the full disk: $(cat "$d/small.ls")"
  check "fsize" $rc 1 "$d/err" "cannot write checkpoint" "$d/fsize.h5"
  # --trace on a full disk (the tmpfs filled up first; the results file
  # elsewhere): the line gives the system's reason, and no half-written
  # t.json.tmp.PID stays on the full disk (one did, and the line said only
  # "failed; check the disk")
  # shellcheck disable=SC2016
  unshare -m sh -c 'mount -t tmpfs -o size=2m tmpfs "$1" || exit 99
    head -c 3000000 /dev/zero >"$1/fill" 2>/dev/null
    "$2" --image-size 32 --batch-size 8 --scaling-steps 0 --synthetic --steps 2 --trace "$1/t.json" \
      --results "$3/ftrace.h5" >"$3/out" 2>"$3/err"
    rc=$?
    ls "$1" >"$3/small.ls"
    exit $rc' sh "$d/small" "$tb" "$d"
  rc=$?
  grep -q '\.tmp\.' "$d/small.ls" && fail "ftrace: a temporary file left on the full disk: $(cat "$d/small.ls")"
  check "ftrace" $rc 1 "$d/err" "t.json': No space left on device" "$d/ftrace.h5"
else
  echo "skip fsize: mounting a tmpfs is not allowed here (unshare -m)"
fi

(exec "$tb" --image-size 32 --batch-size 8 --scaling-steps 0 --synthetic --steps 100000 --print-every 1 \
  --results "$d/sig.h5") >"$d/out" 2>"$d/err" & # exec: $! is trainbench's pid
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q '^step ' "$d/out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
[ $i -lt 600 ] || fail "sigint: no step line within 60 s (the run was still starting when interrupted)"
sleep 2.5 # a snapshot of the running file first
kill -INT $pid
i=0
while [ $i -lt 200 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -0 $pid 2>/dev/null && { fail "sigint: still running 20 s after SIGINT"; kill -KILL $pid; }
wait $pid
check "sigint" $? 130 "$d/err" "stopped by SIGINT" "$d/sig.h5"

# Ctrl-C in start-up (TB_TEST_FAULT=interrupt-startup: start-up then never
# gets further, as in a long dataset scan): the line says the results file
# was not written, and an earlier run's file at the path stays as it was
# (the line once said the file kept the steps, marked aborted)
cp "$d/sig.h5" "$d/early.h5"
TB_TEST_FAULT=interrupt-startup:0 run --synthetic --steps 2 --results "$d/early.h5" >"$d/out" 2>"$d/err"
rc=$?
[ $rc -eq 130 ] || fail "sigint-startup: exit $rc, want 130"
[ "$(wc -l <"$d/err")" -eq 1 ] || { fail "sigint-startup: not one stderr line:"; cat "$d/err"; }
grep -q "stopped by SIGINT (Ctrl-C) in start-up, before the first step; the results file '$d/early.h5' was not written" \
  "$d/err" || fail "sigint-startup: the line does not say the results file was not written: $(cat "$d/err")"
cmp -s "$d/sig.h5" "$d/early.h5" || fail "sigint-startup: the earlier run's results file changed"
[ "$fails" -eq 0 ] && echo "ok   sigint-startup: exit $rc, one line: $(cut -c1-150 <"$d/err")"

# an earlier run's results file and a run that records no step: it stays
mkdir -p "$d/bad/class_000" "$d/bad/class_001"
for c in 0 1; do for i in 1 2 3 4 5 6; do head -c 200 "$f" >"$d/bad/class_00$c/img_$i.jpg"; done; done
cp "$d/sig.h5" "$d/earlier.h5"
run --data "$d/bad" --steps 2 --results "$d/earlier.h5" >"$d/out" 2>"$d/err"
rc=$?
[ $rc -eq 1 ] || fail "earlier: exit $rc, want 1"
if [ "$(wc -l <"$d/err")" -ne 1 ] || ! grep -q "no sample of $d/bad decodes" "$d/err"; then
  fail "earlier: want one line 'no sample of ... decodes': $(cat "$d/err")"
fi
cmp -s "$d/sig.h5" "$d/earlier.h5" || fail "earlier: the earlier run's results file was replaced by one without a step"
grep -q "^# results file '$d/earlier.h5' left as it was (an earlier run's results)" "$d/out" ||
  fail "earlier: no '# results file ... left as it was' line"
TB_TEST_FAULT=die:0:3 run --synthetic --steps 8 --print-every 1 --results "$d/earlier.h5" >"$d/out" 2>"$d/err"
check "earlier-replaced" $? 1 "$d/err" "TB_TEST_FAULT die" "$d/earlier.h5"
[ "$fails" -eq 0 ] && echo "ok   earlier: kept by a run without a step, replaced by one with steps"

# SIGKILL: nothing can mark the file, so the snapshot on disk is what stays,
# and its status is one the contract allows (aborted, as a snapshot; never
# "running"), with an end_time
(exec "$tb" --image-size 32 --batch-size 8 --scaling-steps 0 --synthetic --steps 100000 --print-every 1 \
  --results "$d/kill.h5") >"$d/out" 2>"$d/err" &
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q '^step ' "$d/out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
i=0
while [ $i -lt 100 ] && [ ! -f "$d/kill.h5" ]; do sleep 0.1; i=$((i + 1)); done
kill -KILL $pid
wait $pid
if [ -f "$d/kill.h5" ]; then
  st=$(status "$d/kill.h5")
  end=$("$py" -c 'import sys, h5py; print(h5py.File(sys.argv[1], "r").attrs.get("end_time", ""))' "$d/kill.h5")
  case $st in
    "aborted|snapshot of "*)
      if [ -n "$end" ]; then echo "ok   sigkill: the snapshot left says $(echo "$st" | cut -c1-110)"
      else fail "sigkill: the snapshot has no end_time"; fi ;;
    *) fail "sigkill: the results file left says '$st', want aborted with a snapshot's reason" ;;
  esac
else
  fail "sigkill: no snapshot of the results file within 10 s of the first step"
fi
rm -f "$d"/kill.h5.tmp.*

if [ -n "$mpi" ]; then
  a="--image-size 32 --batch-size 8 --scaling-steps 0 --synthetic"
  # shellcheck disable=SC2086
  "$mpi" -np 1 "$tb" --steps 3 $a : -np 1 "$tb" --steps 4 $a >"$d/out" 2>"$d/err"
  rc=$?
  [ $rc -eq 1 ] || fail "mistake: exit $rc, want 1"
  [ "$(grep -c 'launch mistake' "$d/err")" -eq 2 ] || fail "mistake: not one launch-mistake line per rank"
  ! grep -qi 'segmentation\|signal 11' "$d/err" "$d/out" || fail "mistake: a rank crashed after its line"
  [ "$fails" -eq 0 ] && echo "ok   mistake: exit 1, each rank's line, no crash"

  # rank 1's own fatal error (TB_TEST_FAULT=die, a line without a step):
  # rank 0 takes it, with the step rank 1 was at, as the job's reason, in its
  # one line and in the results file, instead of finding rank 1 gone; rank 1
  # prints its line once
  # shellcheck disable=SC2086
  TB_TEST_FAULT=die:1:3 "$mpi" -np 2 "$tb" --steps 8 $a --results "$d/peer.h5" >"$d/out" 2>"$d/err"
  rc=$?
  [ $rc -ne 0 ] || fail "peer: exit 0"
  want="TB_TEST_FAULT die: this rank's own fatal error"
  [ "$(grep -c "^trainbench\[rank 1 .*error: $want\$" "$d/err")" -eq 1 ] || fail "peer: rank 1 did not print its line once"
  grep -q "^trainbench\[rank 0 .*error: .*rank 1 ([^)]*) failed at step 3, in [^:]*: $want\$" "$d/err" ||
    fail "peer: rank 0's line does not carry rank 1's with its step"
  [ "$(grep -c '^trainbench\[' "$d/err")" -eq 2 ] || { fail "peer: want one line per rank:"; cat "$d/err"; }
  st=$(status "$d/peer.h5")
  case $st in "aborted|rank 1 ("*") failed at step 3, in "*": $want") ;; *) fail "peer: results file says '$st'" ;; esac
  [ "$fails" -eq 0 ] && echo "ok   peer: rank 1's error is the job's reason ($st)"

  # every rank ends on its own error at once: one line each, and rank 0's own
  # line is the reason (rank 1's, arriving meanwhile, does not replace it),
  # naming rank 0 and its step as a peer's reason does
  # shellcheck disable=SC2086
  TB_TEST_FAULT=die:-1:3 "$mpi" -np 2 "$tb" --steps 8 $a --results "$d/both.h5" >"$d/out" 2>"$d/err" &&
    fail "both: exit 0"
  # (rank 1, when rank 0's reason reaches it before its own error, prints
  # that instead: one line either way)
  own=$(grep -c "^trainbench\[rank 0 .*error: $want\$" "$d/err")
  one=$(grep -c "^trainbench\[rank 1 .*error: \(.*rank 0 ([^)]*) failed at step 3, in [^:]*: \)\{0,1\}$want\$" "$d/err")
  all=$(grep -c '^trainbench\[' "$d/err")
  if [ "$own" -ne 1 ] || [ "$one" -ne 1 ] || [ "$all" -ne 2 ]; then fail "both: want each rank's own line once:"; cat "$d/err"; fi
  st=$(status "$d/both.h5")
  case $st in "aborted|rank 0 ("*") failed at step 3, in "*": $want") ;;
    *) fail "both: results file says '$st', want rank 0's own line with its step" ;; esac
  [ "$fails" -eq 0 ] && echo "ok   both: each rank's own line, rank 0's the reason, with its step"

  # rank 0's own fatal error: it is the job's reason on every rank, so rank
  # 1's one line carries it with rank 0's step (it said only "rank 0 (host)
  # is gone: the launcher is ending the job")
  # shellcheck disable=SC2086
  TB_TEST_FAULT=die:0:3 "$mpi" -np 2 "$tb" --steps 8 $a --results "$d/root.h5" >"$d/out" 2>"$d/err" &&
    fail "root: exit 0"
  [ "$(grep -c "^trainbench\[rank 0 .*error: $want\$" "$d/err")" -eq 1 ] || fail "root: rank 0 did not print its line once"
  grep -q "^trainbench\[rank 1 .*error: .*rank 0 ([^)]*) failed at step 3, in [^:]*: $want\$" "$d/err" ||
    fail "root: rank 1's line does not carry rank 0's with its step"
  [ "$(grep -c '^trainbench\[' "$d/err")" -eq 2 ] || { fail "root: want one line per rank:"; cat "$d/err"; }
  st=$(status "$d/root.h5")
  case $st in "aborted|rank 0 ("*") failed at step 3, in "*": $want") ;;
    *) fail "root: results file says '$st', want rank 0's own line with its step" ;; esac
  [ "$fails" -eq 0 ] && echo "ok   root: rank 0's error reaches rank 1's line"

  # Ctrl-C reaching rank 0 of a 2-rank run, the watchdog on (it takes
  # SIGTERM; SIGINT was nobody's: rank 0 died of it without a line and its
  # results file stayed "running"): rank 0's line is the job's reason
  # shellcheck disable=SC2086
  TB_TEST_FAULT=interrupt:0:3 "$mpi" -np 2 "$tb" --steps 8 $a --results "$d/int.h5" >"$d/out" 2>"$d/err" &&
    fail "int: exit 0"
  sig="train: stopped by SIGINT (Ctrl-C)"
  grep -q "^trainbench\[rank 0 .*error: $sig" "$d/err" || fail "int: rank 0 did not say it was stopped by SIGINT"
  grep -q "^trainbench\[rank 1 .*error: .*rank 0 ([^)]*) failed at step 3, in [^:]*: $sig" "$d/err" ||
    fail "int: rank 1's line does not carry rank 0's"
  [ "$(grep -c '^trainbench\[' "$d/err")" -eq 2 ] || { fail "int: want one line per rank:"; cat "$d/err"; }
  st=$(status "$d/int.h5")
  case $st in "aborted|"*"$sig"*) ;; *) fail "int: results file says '$st', want aborted by SIGINT" ;; esac
  [ "$fails" -eq 0 ] && echo "ok   int: Ctrl-C on rank 0 of two ends the job with its line"

  # Ctrl-C reaching rank 1 only: rank 0 makes its line the job's reason and
  # ends the job with its exit status, 130 as on one rank (it was 1: rank
  # 0's MPI_Abort for a peer's error always said 1)
  # shellcheck disable=SC2086
  TB_TEST_FAULT=interrupt:1:3 "$mpi" -np 2 "$tb" --steps 8 $a --results "$d/int1.h5" >"$d/out" 2>"$d/err"
  rc=$?
  [ $rc -eq 130 ] || fail "int1: exit $rc, want 130 (rank 1's SIGINT)"
  grep -q "^trainbench\[rank 0 .*error: .*rank 1 ([^)]*) failed at step 3, in [^:]*: $sig" "$d/err" ||
    fail "int1: rank 0's line does not carry rank 1's"
  [ "$(grep -c '^trainbench\[' "$d/err")" -eq 2 ] || { fail "int1: want one line per rank:"; cat "$d/err"; }
  [ "$fails" -eq 0 ] && echo "ok   int1: Ctrl-C on rank 1 of two ends the job with exit 130"

  # the same in start-up (interrupt-startup:1): rank 0's watchdog wrote an
  # "aborted" file without the run's settings over the earlier run's file;
  # nothing is written before the run has begun, on any rank's end
  cp "$d/sig.h5" "$d/int1s.h5"
  # shellcheck disable=SC2086
  TB_TEST_FAULT=interrupt-startup:1 "$mpi" -np 2 "$tb" --steps 8 $a --results "$d/int1s.h5" >"$d/out" 2>"$d/err"
  rc=$?
  [ $rc -eq 130 ] || fail "int1-startup: exit $rc, want 130 (rank 1's SIGINT)"
  grep -q "^trainbench\[rank 0 .*error: .*rank 1 ([^)]*) failed at step 0, in start-up: $sig" "$d/err" ||
    fail "int1-startup: rank 0's line does not carry rank 1's"
  cmp -s "$d/sig.h5" "$d/int1s.h5" || fail "int1-startup: the earlier run's results file changed"
  [ "$fails" -eq 0 ] && echo "ok   int1-startup: Ctrl-C on rank 1 in start-up leaves the earlier results file"

  # SIGUSR1 to mpirun (Slurm's --signal=USR1@T warning before the time
  # limit), which forwards it to every rank: each had died of it without a
  # line, the results file left "running"
  rm -f "$d/out" "$d/err" # no earlier case's step lines to wait for
  # shellcheck disable=SC2086
  (exec "$mpi" -np 2 "$tb" --steps 100000 --print-every 1 $a --results "$d/usr1.h5") >"$d/out" 2>"$d/err" &
  pid=$!
  i=0
  while [ $i -lt 600 ] && ! grep -q '^step ' "$d/out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  kill -USR1 $pid
  i=0
  while [ $i -lt 200 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  kill -0 $pid 2>/dev/null && { fail "usr1: still running 20 s after SIGUSR1"; kill -KILL $pid; }
  wait $pid
  rc=$?
  [ $rc -eq 138 ] || fail "usr1: exit $rc, want 138 (128 + SIGUSR1), whichever rank's line rank 0 took"
  # each rank's own line, or rank 0's carrying rank 1's (taken first)
  sig="train: stopped by SIGUSR1"
  [ "$(grep -c "^trainbench\[rank [01] .*error: .*$sig" "$d/err")" -eq 2 ] || { fail "usr1: want each rank's line:"; cat "$d/err"; }
  st=$(status "$d/usr1.h5")
  case $st in "aborted|"*"$sig"*) ;; *) fail "usr1: results file says '$st', want aborted by SIGUSR1" ;; esac
  [ "$fails" -eq 0 ] && echo "ok   usr1: SIGUSR1 through mpirun ends every rank with its line"
fi
[ "$fails" -eq 0 ] || exit 1
echo "ok: every end on an error or a signal leaves one line and an aborted results file"
