#!/bin/sh
# ckpt_time_left_out.sh TRAINBENCH PYTHON [sync|async]: checkpoint writes
# stay out of the training img/s and out of the steps' own times. Trains 12
# steps (5 untimed) writing a checkpoint every 2, each write made 0.5 s
# slower (TB_TEST_FAULT=slow-ckpt: a slow file system), and passes when the
# end of the run says "# checkpoints: 6 written ... in S s" with S >= 3 and
# the results file's img/s is 0.7 to 1.3 x what its own mean step time
# gives (batch / step_ms): measured in the same run, so a loaded host moves
# both alike. With the 4 timed writes counted in img/s (2 s against 7 steps
# of 30-200 ms) the ratio would be 0.4 or less; counted in the steps (the
# asynchronous step's data phase is the device's idle time since the step
# before: a write's 0.5 s in the next step's) 2.5 or more. async: the same
# with --step-mode async (the CUDA default; on the CPU it tests that path).
set -u
bin=$1
py=$2
mode=${3:-sync}
out=ckpt_time_left_out_$mode
rm -f "$out.h5" "$out.ckpt.h5" "$out.txt"
TB_TEST_FAULT=slow-ckpt:0 "$bin" --image-size 32 --batch-size 8 --steps 12 --warmup-steps 5 --scaling-steps 0 \
    --threads 1 --step-mode "$mode" --ckpt "$out.ckpt.h5" --ckpt-every 2 --results "$out.h5" >"$out.txt" 2>&1
rc=$?
grep -E '^# training:|^# checkpoints:' "$out.txt"
fail=0
[ "$rc" -eq 0 ] || { echo "FAIL: train exited $rc"; tail -n 5 "$out.txt"; fail=1; }
secs=$(sed -n "s/^# checkpoints: 6 written to $out\\.ckpt\\.h5 in \\([0-9.]*\\) s .*left out of the training img\\/s$/\\1/p" "$out.txt")
if [ -z "$secs" ]; then
    echo "FAIL: no '# checkpoints: 6 written to $out.ckpt.h5 in S s ... left out of the training img/s' line"
    fail=1
elif ! awk -v s="$secs" 'BEGIN { exit !(s >= 3.0) }'; then
    echo "FAIL: the 6 checkpoints took $secs s, but each sleeps 0.5 s"
    fail=1
fi
"$py" -c "
import sys, h5py
f = h5py.File(sys.argv[1], 'r')
r = f['ranks']
ips, step_ms, n = float(r['img_per_s'][0]), float(r['step_ms'][0]), float(r['samples'][0]) / float(r['steps'][0])
by_steps = n / (step_ms / 1e3)
print('img/s %.2f; from the mean step (%.2f ms, %g images) %.2f; ratio %.2f (0.7 to 1.3 wanted); checkpoint_s %.2f'
      % (ips, step_ms, n, by_steps, ips / by_steps, float(f.attrs['checkpoint_s'])))
sys.exit(0 if 0.7 * by_steps <= ips <= 1.3 * by_steps and int(f.attrs['checkpoints_written']) == 6 else 1)" "$out.h5" ||
    { echo "FAIL: img/s or the mean step counts the checkpoint writes (or the attributes are missing)"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok: checkpoint writes timed apart, left out of img/s"
exit "$fail"
