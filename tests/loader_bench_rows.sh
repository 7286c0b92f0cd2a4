#!/bin/sh
# loader_bench_rows.sh TRAINBENCH: what a loader-bench row counts, and what
# it refuses before its table.
#  - skipped: the bad files met in the row's timed batches only, as every
#    other column (a bad file in 6 samples, batch 3: the warm-up epoch and
#    the timed epoch each meet it once; 1, not 2).
#  - a shard with no sample (--world above the sample count) is refused in
#    one line, not timed as a row of empty batches at 0 img/s, exit 0.
#  - --decode gpu where it cannot run is refused before the table's header.
set -u
bin=$1
dir=loader_bench_rows
rm -rf "$dir"
"$bin" mkdata --out "$dir" --classes 1 --per-class 5 --min-side 40 --max-side 48 >/dev/null || exit 1
printf 'not a jpeg' >"$dir/class_000/zz_bad.jpg"
run="$bin loader-bench --data $dir --threads 1 --batch-size 3 --image-size 32 --prefetch 2"
# shellcheck disable=SC2086 # $run is a command and its flags
out=$($run --warmup 2 --batches 2 2>&1) || { printf '%s\n' "$out"; echo "FAIL: loader-bench exited non-zero"; exit 1; }
printf '%s\n' "$out" | grep -A1 '^# threads'
skipped=$(printf '%s\n' "$out" | awk '/^# threads/ { getline; print $9; exit }')
[ "$skipped" = 1 ] || { echo "FAIL: skipped column '$skipped', want 1 (the timed epoch's one bad file)"; exit 1; }
# the same in loader-bench --feed (CPU backend): column 17
out=$("$bin" loader-bench --feed --backend cpu --data "$dir" --model resnet18 --image-size 32 --batch-size 3 \
  --rows 1:2:off --steps 2 --warmup 2 --compute-threads 1 2>&1) ||
  { printf '%s\n' "$out"; echo "FAIL: loader-bench --feed exited non-zero"; exit 1; }
skipped=$(printf '%s\n' "$out" | awk '/^# threads/ { getline; print $17; exit }')
[ "$skipped" = 1 ] || { echo "FAIL: --feed skipped column '$skipped', want 1"; exit 1; }
# shellcheck disable=SC2086
out=$($run --warmup 0 --batches 2 --world 7 --rank 6 2>&1)
rc=$?
printf '%s\n' "$out" | tail -n 1
[ "$rc" -ne 0 ] || { echo "FAIL: an empty shard exited 0"; exit 1; }
printf '%s\n' "$out" | grep -q 'shard 6 of 7 holds no sample (.* has 6): use a --world of at most 6' ||
  { echo "FAIL: no line naming the empty shard"; exit 1; }
# shellcheck disable=SC2086
out=$($run --warmup 0 --batches 1 --decode gpu 2>&1)
rc=$?
if [ "$rc" -eq 0 ]; then
  echo "ok (--decode gpu runs here: its refusal is not tested)"
  exit 0
fi
printf '%s\n' "$out" | tail -n 1
printf '%s\n' "$out" | grep -q '^# threads' && { echo "FAIL: the table's header came before the refusal"; exit 1; }
echo ok
