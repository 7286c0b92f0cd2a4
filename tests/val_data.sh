#!/bin/sh
# val_data.sh TRAINBENCH [LAUNCHER...]: what train does with --val.
#   - a bad validation file (here empty) is left out of the accuracy and
#     named, not replaced by another image that would then be scored with
#     that image's label: 11 of the 12 images scored, "1 bad file left out";
#   - a run that stops inside an epoch (--steps 3; an epoch is 4 steps on
#     one rank, 2 on two) is still evaluated at its end ("eval   step 3
#     (epoch E, K of its N steps) ...");
#   - a --val folder whose class folders are not --data's (one renamed:
#     its label would then mean another class) is refused with one line.
#   - what --val holds is described as --data is (its .png not a sample).
# Under LAUNCHER (e.g. "mpirun -np 2") when given.
set -u
bin=$1
shift
dir=val_data${1:+_mpi}
rm -rf "$dir"
mkdir "$dir" || exit 1
"$bin" mkdata --out "$dir/train" --classes 3 --per-class 6 --min-side 40 --max-side 56 >/dev/null || exit 1
"$bin" mkdata --out "$dir/val" --classes 3 --per-class 4 --seed 2 --min-side 40 --max-side 56 >/dev/null || exit 1
: >"$dir/val/class_001/img_000002.jpg"
echo 'not a sample' >"$dir/val/class_002/notes.png"
"$@" "$bin" --data "$dir/train" --val "$dir/val" --image-size 32 --batch-size 4 --steps 3 --warmup-steps 0 \
    --scaling-steps 0 --threads 1 --loader-threads 1 --timeout 120 --results= >"$dir/out.txt" 2>&1
rc=$?
grep -E '^eval|--val' "$dir/out.txt"
fail=0
[ "$rc" -eq 0 ] || { echo "FAIL: train exited $rc"; tail -n 5 "$dir/out.txt"; fail=1; }
grep -q '^eval   step 3 (epoch [01], [13] of its [24] steps) .*(11 images)$' "$dir/out.txt" ||
    { echo "FAIL: no evaluation of 11 images at the end of the run (step 3, inside an epoch)"; fail=1; }
grep -q '^#      --val: 1 bad file left out of the accuracy .*class_001/img_000002\.jpg: empty file' "$dir/out.txt" ||
    { echo "FAIL: the bad --val file is not named as left out"; fail=1; }
grep -q "^# dataset $dir/val (directory): 12 samples in 3 classes" "$dir/out.txt" ||
    { echo "FAIL: what --val holds (12 samples) is not described"; fail=1; }
grep -q '^#   class_002/notes.png: not a .jpg/.jpeg name' "$dir/out.txt" ||
    { echo "FAIL: --val's notes.png is not named as skipped"; fail=1; }
cp -r "$dir/val" "$dir/renamed" && mv "$dir/renamed/class_002" "$dir/renamed/class_two" || exit 1
"$@" "$bin" --data "$dir/train" --val "$dir/renamed" --image-size 32 --batch-size 4 --steps 1 --warmup-steps 0 \
    --scaling-steps 0 --threads 1 --loader-threads 1 --timeout 120 --results= >"$dir/renamed.txt" 2>&1
rc=$?
grep -E 'error' "$dir/renamed.txt"
[ "$rc" -ne 0 ] || { echo "FAIL: a --val folder with another class folder was accepted"; fail=1; }
grep -q "error: train: --val's class 2 is 'class_two' but --data's is 'class_002'" "$dir/renamed.txt" ||
    { echo "FAIL: no line naming the class folder that differs"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok: --val evaluated at the end of the run, its bad file left out and named; other classes refused"
exit "$fail"
