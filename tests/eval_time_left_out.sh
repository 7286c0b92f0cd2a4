#!/bin/sh
# eval_time_left_out.sh TRAINBENCH PYTHON: --val's evaluations stay out of
# the training img/s, as checkpoint writes do. Trains 6 epochs of a 21-image
# set (5 steps each, batch 4, 32 px) evaluating a 150-image --val after each,
# and passes when the run says "# evaluation: 6 runs of --val in S s ... left
# out of the training img/s" and the results file's img/s is at least 0.7 x
# what its own mean step time gives (batch / step_ms), both measured in the
# same run, so a loaded host moves them alike. With the evaluations counted
# (each scores 150 images, 30 steps train 120) it would be about 0.5 or less.
set -u
bin=$1
py=$2
dir=eval_time_left_out
rm -rf "$dir"
mkdir "$dir" || exit 1
"$bin" mkdata --out "$dir/train" --classes 3 --per-class 7 --min-side 40 --max-side 56 >/dev/null || exit 1
"$bin" mkdata --out "$dir/val" --classes 3 --per-class 50 --seed 2 --min-side 40 --max-side 56 >/dev/null || exit 1
"$bin" --data "$dir/train" --val "$dir/val" --image-size 32 --batch-size 4 --epochs 6 --warmup-steps 2 \
    --scaling-steps 0 --threads 1 --loader-threads 1 --results "$dir/run.h5" >"$dir/out.txt" 2>&1
rc=$?
grep -E '^# training:|^# evaluation:' "$dir/out.txt"
fail=0
[ "$rc" -eq 0 ] || { echo "FAIL: train exited $rc"; tail -n 5 "$dir/out.txt"; fail=1; }
grep -q '^# evaluation: 6 runs of --val in [0-9.]* s, left out of the training img/s$' "$dir/out.txt" ||
    { echo "FAIL: no '# evaluation: 6 runs of --val in S s, left out of the training img/s' line"; fail=1; }
"$py" -c "
import sys, h5py
f = h5py.File(sys.argv[1], 'r')
r = f['ranks']
ips, step_ms, n = float(r['img_per_s'][0]), float(r['step_ms'][0]), float(r['samples'][0]) / float(r['steps'][0])
by_steps = n / (step_ms / 1e3)
print('img/s %.2f; from the mean step (%.2f ms, %g images) %.2f; ratio %.2f (>= 0.7 wanted); evaluation_s %.2f'
      % (ips, step_ms, n, by_steps, ips / by_steps, float(f.attrs['evaluation_s'])))
sys.exit(0 if ips >= 0.7 * by_steps and int(f.attrs['evaluations']) == 6 else 1)" "$dir/run.h5" ||
    { echo "FAIL: img/s counts the evaluations (or the attributes are missing)"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok: evaluations timed apart, left out of img/s"
exit "$fail"
