#!/bin/sh
# progress_rate.sh TRAINBENCH: the progress lines' img/s is the timed steps'
# rate once the clock runs, as `# training:` reports it at the end, not an
# average back to the start that the warm-up drags down. 12 steps, 5 of them
# warm-up, the second made 1 s slower (TB_TEST_FAULT=slow-step: a slow
# first step, as cuDNN's autotuning or a page-in makes it); --no-autotune,
# so that no other warm-up step is slow. Passes when the last progress
# line's img/s is 0.85 to 1.15 x the `# training:` img/s of the same run.
# Counting the warm-up (96 images over 1 s + 12 steps of 10-50 ms against
# 56 over 7 steps) it would be 0.5 or less.
set -u
bin=$1
out=progress_rate
rm -f "$out.h5" "$out.txt"
TB_TEST_FAULT=slow-step:0:1 "$bin" --model resnet18 --image-size 32 --batch-size 8 --steps 12 --warmup-steps 5 \
    --scaling-steps 0 --threads 1 --no-autotune --print-every 1 --results "$out.h5" >"$out.txt" 2>&1
rc=$?
grep -E '^step|^# training:' "$out.txt"
[ "$rc" -eq 0 ] || { echo "FAIL: train exited $rc"; tail -n 5 "$out.txt"; exit 1; }
last=$(sed -n 's/^step  *12\/12 .* img\/s  *\([0-9.]*\) .*/\1/p' "$out.txt")
total=$(sed -n 's/^# training: 12 steps, .*, \([0-9.]*\) img\/s .*/\1/p' "$out.txt")
if [ -z "$last" ] || [ -z "$total" ]; then
    echo "FAIL: no 'step 12/12 ... img/s' or '# training: ... img/s' line"
    exit 1
fi
if awk -v a="$last" -v b="$total" 'BEGIN { r = a / b
        printf "last progress line %s img/s, # training: %s: ratio %.2f (0.85 to 1.15 wanted)\n", a, b, r
        exit !(r >= 0.85 && r <= 1.15) }'; then
    echo "ok: the progress line's img/s is the timed steps' rate"
else
    echo "FAIL: the progress line's img/s is not the timed steps' rate"
    exit 1
fi
