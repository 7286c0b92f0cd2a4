#!/bin/sh
# feed_nonfinite.sh TRAINBENCH: a step whose gradients hold NaN/Inf ends
# loader-bench --feed with one line in both step modes. The synchronous
# step (the CPU's default) refuses the update itself; the asynchronous one
# (CUDA's, run here with --step-mode async) only sets the device flag and
# skips the update, so the feed must read it from the step's record: it
# reported every row on frozen weights before. TB_TEST_FAULT=nan:0:2 puts
# a NaN in step 2's gradients. About 5 s.
set -u
tb=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
"$tb" mkdata --out "$d/set" --classes 4 --per-class 12 --min-side 64 --max-side 96 >/dev/null || exit 1
for mode in sync async; do
  TB_TEST_FAULT=nan:0:2 "$tb" loader-bench --feed --backend cpu --data "$d/set" --model resnet18 --image-size 32 \
    --batch-size 8 --rows 2:2:off,2:2:off --steps 3 --warmup 1 --compute-threads 1 --min-row-seconds 0 \
    --step-mode "$mode" --results "$d/$mode.h5" >"$d/out" 2>"$d/err"
  rc=$?
  [ $rc -ne 0 ] || fail "$mode: exit 0 after NaN gradients"
  [ "$(wc -l <"$d/err")" -eq 1 ] || { fail "$mode: want one stderr line:"; cat "$d/err"; }
  grep -q "^trainbench: error: loader-bench --feed: step 2: .*NaN/Inf" "$d/err" ||
    { fail "$mode: the line does not name step 2's NaN/Inf:"; cat "$d/err"; }
  grep -qE '^ +2 +2 +off ' "$d/out" && fail "$mode: a row was reported after the NaN step"
  [ $fails -eq 0 ] && echo "ok   $mode: $(cat "$d/err")"
done
# CUDA steps are asynchronous: sync is refused there before any work (the
# CPU backend takes both)
"$tb" loader-bench --feed --backend cpu --data "$d/set" --step-mode bogus >/dev/null 2>"$d/err" &&
  fail "--step-mode bogus: exit 0"
grep -q "step-mode" "$d/err" || fail "--step-mode bogus: the line does not name the flag"
[ $fails -eq 0 ] || exit 1
echo "feed_nonfinite: ok"
