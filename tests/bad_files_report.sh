#!/bin/sh
# bad_files_report.sh TRAINBENCH PYTHON EPOCHS [LAUNCHER...]: train reports
# the bad files its loaders met. Makes a 16-image set with 3 bad files (empty,
# not a JPEG, truncated), trains EPOCHS epochs on it (under LAUNCHER, e.g.
# "mpirun -np 2", when given) and passes when the end of the run says
# "3 files ... (3 x EPOCHS samples replaced" and names 3 of them, and the
# results file holds data_bad_files = 3 and data_samples_replaced = 3 x
# EPOCHS. Over 2 epochs on 2 ranks a file is met on both ranks at times:
# counted once (the ranks' lists merged), not per rank.
set -u
bin=$1
py=$2
epochs=$3
shift 3
dir=bad_files_e$epochs${1:+_mpi}
rm -rf "$dir" "$dir.h5" "$dir.txt"
"$bin" mkdata --out "$dir" --classes 2 --per-class 8 --min-side 64 --max-side 80 >/dev/null || exit 1
: >"$dir/class_000/img_000000.jpg"
echo 'not a jpeg' >"$dir/class_001/img_000001.jpg"
head -c 300 "$dir/class_000/img_000003.jpg" >"$dir/cut" && mv "$dir/cut" "$dir/class_000/img_000003.jpg"
"$@" "$bin" --data "$dir" --image-size 32 --batch-size 4 --steps 0 --epochs "$epochs" --warmup-steps 1 \
    --scaling-steps 0 --threads 1 --loader-threads 1 --timeout 120 --results "$dir.h5" >"$dir.txt" 2>&1
rc=$?
grep -E '^# bad files|^#   .*\.jpg: ' "$dir.txt"
replaced=$((3 * epochs))
fail=0
[ "$rc" -eq 0 ] || { echo "FAIL: train exited $rc"; tail -n 5 "$dir.txt"; fail=1; }
grep -q "^# bad files: 3 files of --data could not be used ($replaced samples replaced" "$dir.txt" ||
    { echo "FAIL: no '# bad files: 3 files ... ($replaced samples replaced' line"; fail=1; }
named=$(grep -c "^#   .*$dir/class_00[01]/img_00000[013]\.jpg: " "$dir.txt")
[ "$named" -eq 3 ] || { echo "FAIL: $named bad files named with their reasons, expected 3"; fail=1; }
grep -q "^#   .*img_000000\.jpg: empty file" "$dir.txt" || { echo "FAIL: the empty file is not named"; fail=1; }
"$py" -c "
import sys, h5py
a = h5py.File(sys.argv[1], 'r').attrs
got = (int(a['data_bad_files']), int(a['data_samples_replaced']), len(str(a['data_bad_files_first']).split(chr(10))))
print('results file: data_bad_files, data_samples_replaced, names:', got)
sys.exit(0 if got == (3, int(sys.argv[2]), 3) else 1)" "$dir.h5" "$replaced" || { echo "FAIL: results attributes"; fail=1; }
# loader-bench --feed names them under its row too (one launch: without LAUNCHER)
if [ $# -eq 0 ]; then
  "$bin" loader-bench --feed --backend cpu --data "$dir" --model resnet18 --image-size 32 --batch-size 4 \
    --rows 1:2:off --steps 8 --warmup 1 --compute-threads 1 --min-row-seconds 0 --results "$dir.feed.h5" \
    >"$dir.feed.txt" 2>&1 || { echo "FAIL: loader-bench --feed exited $?"; tail -n 5 "$dir.feed.txt"; fail=1; }
  named=$(grep -c "^#   skipped .*$dir/class_00[01]/img_00000[013]\.jpg: " "$dir.feed.txt")
  [ "$named" -eq 3 ] || { echo "FAIL: loader-bench --feed named $named bad files under its row, expected 3"; fail=1; }
  rm -f "$dir.feed.h5"
fi
[ "$fail" -eq 0 ] && echo "ok: 3 bad files reported, $replaced samples replaced"
exit "$fail"
