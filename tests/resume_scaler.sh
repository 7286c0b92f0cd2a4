#!/bin/sh
# resume_scaler.sh TRAINBENCH PYTHON COMPARE_H5 [LAUNCHER...]: --resume goes
# on with the dynamic loss scaler of the run that wrote the checkpoint, as
# GradScaler's state_dict does. fp32 with --loss-scale 1e38 and
# --loss-scale-growth 2 overflows every few steps here (the scale halves on
# an overflow, the update is skipped, it doubles after 2 clean steps): run A
# trains 8 steps straight; run B stops after 5 (its checkpoint records the
# scale, the steps since its last change and the updates skipped) and
# resumes to 8. Both final checkpoints must be bit-identical, scaler
# included. Then the same resume from a copy of B's checkpoint without its
# scaler attributes (a checkpoint of a run that did not scale): it starts
# again at 1e38, says so in one line, and ends with another scaler than A's
# (the check can fail; its weights may still match A's, as a power-of-two
# scale that does not overflow leaves fp32 gradients exact). A checkpoint
# whose loss scale no device can hold (1e300) is refused with one line; a
# resume with another --loss-scale-growth says so in one line.
tb=$1
py=$2
cmp=$3
shift 3
dir=$(mktemp -d "$(pwd)/tb_scaler.XXXXXX")
trap 'rm -rf "$dir"' EXIT
set -- "$@" "$tb" --image-size 64 --batch-size 2 --synthetic-size 5 --warmup-steps 0 --scaling-steps 0 \
  --threads 1 --timeout 60 --results "" --loss-scale 1e38 --loss-scale-growth 2
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
scaler() {
  "$py" -c "import sys, h5py; a = h5py.File(sys.argv[1], 'r').attrs
print(float(a['loss_scale']), int(a['loss_scale_good_steps']), int(a['skipped_steps']))" "$1"
}

"$@" --steps 8 --save "$dir/a.h5" >"$dir/a.log" 2>&1 || { cat "$dir/a.log"; echo "FAIL: run A"; exit 1; }
"$@" --steps 5 --ckpt "$dir/b.ckpt" >"$dir/b1.log" 2>&1 || { cat "$dir/b1.log"; echo "FAIL: run B"; exit 1; }
cp "$dir/b.ckpt" "$dir/c.ckpt"
cp "$dir/b.ckpt" "$dir/g.ckpt"
"$@" --steps 8 --ckpt "$dir/b.ckpt" --resume --save "$dir/b.h5" >"$dir/b2.log" 2>&1 ||
  { cat "$dir/b2.log"; echo "FAIL: resumed run B"; exit 1; }
grep "^# --resume: loss scale" "$dir/b2.log" || fail "the resumed run does not say which loss scale it goes on with"
sa=$(scaler "$dir/a.h5")
sb=$(scaler "$dir/b.h5")
echo "scaler (scale, steps since its change, skipped): straight $sa, resumed $sb"
case $sa in *" 0") fail "run A skipped no update: the test's scale does not overflow" ;; esac
[ "$sa" = "$sb" ] || fail "the resumed run's scaler differs from the straight run's"
"$py" "$cmp" "$dir/b.h5" "$dir/a.h5" --rtol 0 --atol-scale 0 --only-failures || fail "the resumed weights differ"

# planted: the checkpoint without its scaler
"$py" -c "import sys, h5py
a = h5py.File(sys.argv[1], 'r+').attrs
for k in ('loss_scale', 'loss_scale_good_steps', 'skipped_steps'): del a[k]" "$dir/c.ckpt"
"$@" --steps 8 --ckpt "$dir/c.ckpt" --resume --save "$dir/c.h5" >"$dir/c.log" 2>&1 ||
  { cat "$dir/c.log"; echo "FAIL: resume from the checkpoint without a scaler"; exit 1; }
grep "^# --resume: the checkpoint records no loss scale (its run did not scale its loss, or came before checkpoints kept one): the scale starts again at 1e+38$" \
  "$dir/c.log" || fail "no line says the scale starts again"
sc=$(scaler "$dir/c.h5")
# another growth interval (the checkpoint records its own): one line says it is not the same run
"$@" --steps 6 --ckpt "$dir/g.ckpt" --resume --loss-scale-growth 3 >"$dir/g.log" 2>&1 ||
  { cat "$dir/g.log"; fail "resume with another --loss-scale-growth"; }
grep -q "^# --resume: the checkpoint's loss scale doubled after 2 clean steps; this run's after 3 (--loss-scale-growth): it goes on, but not as the interrupted run would have$" \
  "$dir/g.log" || { cat "$dir/g.log"; fail "a resume with another growth interval does not say so"; }
grep -q "loss scale doubled after" "$dir/b2.log" && fail "a resume with the same growth interval says it differs"
# a damaged scaler (a loss scale no device can hold) is refused with one line
cp "$dir/b.ckpt" "$dir/d.ckpt"
"$py" -c "import sys, h5py; h5py.File(sys.argv[1], 'r+').attrs['loss_scale'] = 1e300" "$dir/d.ckpt"
"$@" --steps 9 --ckpt "$dir/d.ckpt" --resume >"$dir/d.log" 2>&1 && fail "a resume from a loss scale of 1e300 ran"
grep -q "error: train: '$dir/d.ckpt' records a loss scaler of 1e+300 (0 steps since its last change, 2 skipped): not one trainbench wrote" \
  "$dir/d.log" || { cat "$dir/d.log"; fail "a resume from a loss scale of 1e300: no line saying so"; }
echo "planted: scaler after the scale started again $sc"
[ "$sc" != "$sa" ] || fail "the run that started its scale again ends with the straight run's scaler: the check cannot fail"
"$py" "$cmp" "$dir/c.h5" "$dir/a.h5" 2>&1 | tail -n 1
[ "$fails" = 0 ] || exit 1
echo "PASS"
