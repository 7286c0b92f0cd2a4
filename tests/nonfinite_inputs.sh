#!/bin/sh
# nonfinite_inputs.sh TRAINBENCH PYTHON: NaN and Inf never go in or out
# through a checkpoint or a batch file. Each case is refused with one line
# naming the file and the tensor, exit 1, and writes nothing:
#   step-nan-batch     step on a batch file whose /images hold NaN (it wrote
#                      a checkpoint of NaN weights and exited 0)
#   train-inf-batch    train --batch-file on /images holding Inf
#   step-overflow      step on finite images of 3e38: the step's weights
#                      overflow, and --out is not written (it was, exit 0)
#   resume-nan-param   train --resume from a checkpoint with one NaN weight
#                      (it stopped at the first step, advising a lower --lr
#                      and calling that file the last good checkpoint)
#   init-nan-param     train --init from it
#   step-nan-momentum  step --ckpt on a checkpoint with an Inf momentum
# PYTHON needs h5py and numpy (exit 77 without).
# shellcheck disable=SC2086  # $R is a list of flags
set -u
tb=$1
py=$2
"$py" -c 'import h5py, numpy' 2>/dev/null || { echo "SKIP: $py has no h5py or numpy"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
# shellcheck disable=SC1091 # fail and refused: tests/one_line_checks.sh
. "$(dirname "$0")/one_line_checks.sh"
R="--model resnet18 --image-size 32 --classes 10 --batch-size 4 --scaling-steps 0 --threads 1 --backend cpu"
"$tb" $R --steps 2 --ckpt "$d/ck.h5" --results "" >"$d/first.log" 2>&1 ||
  { echo "FAIL: the first run: $(tail -n 2 "$d/first.log")"; exit 1; }
"$py" -c "import h5py, numpy as np, sys
d = sys.argv[1]
for name, v in (('nan', np.nan), ('inf', np.inf), ('big', 3e38)):
    with h5py.File(d + '/b_' + name + '.h5', 'w') as f:
        x = np.zeros((4, 3, 32, 32), np.float32)
        x[1, 2, 5, 7] = v
        if name == 'big': x[:] = v
        f['images'] = x
        f['labels'] = np.arange(4, dtype=np.int64)
import shutil
for name, grp, v in (('nanp', 'params', np.nan), ('infm', 'momentum', np.inf)):
    shutil.copy(d + '/ck.h5', d + '/' + name + '.h5')
    with h5py.File(d + '/' + name + '.h5', 'r+') as f:
        w = f[grp + '/layer2.0.conv1.weight']
        a = w[()]
        a.flat[17] = v
        w[...] = a" "$d" || { echo "FAIL: making the inputs"; exit 1; }

# after a refusal (refused, tests/one_line_checks.sh): no out.h5, no temporary
# shellcheck disable=SC2317 # called by refused
after_refused() {
  [ -e "$d/out.h5" ] && fail "$1: out.h5 was written"
  [ -n "$(find "$d" -name "*.tmp.*")" ] && fail "$1: a temporary file was left: $(ls "$d")"
  rm -f "$d/out.h5"
}
refused step-nan-batch "batch file '$d/b_nan.h5': /images holds NaN at element 5287 (sample 1)" -- \
  "$tb" step --ckpt "$d/ck.h5" --batch "$d/b_nan.h5" --out "$d/out.h5"
refused train-inf-batch "batch file '$d/b_inf.h5': /images holds Inf at element 5287 (sample 1)" -- \
  "$tb" $R --steps 1 --batch-file "$d/b_inf.h5" --results "$d/out.h5"
refused step-overflow "step: after the step " -- \
  "$tb" step --ckpt "$d/ck.h5" --batch "$d/b_big.h5" --out "$d/out.h5"
grep -qF "holds NaN/Inf (loss " "$d/err" || fail "step-overflow: the line does not say NaN/Inf and the loss"
refused resume-nan-param "checkpoint '$d/nanp.h5': /params/layer2.0.conv1.weight holds NaN (element 17)" -- \
  "$tb" $R --steps 4 --ckpt "$d/nanp.h5" --resume --results "$d/out.h5"
refused init-nan-param "checkpoint '$d/nanp.h5': /params/layer2.0.conv1.weight holds NaN (element 17)" -- \
  "$tb" $R --steps 1 --init "$d/nanp.h5" --results "$d/out.h5"
refused step-nan-momentum "checkpoint '$d/infm.h5': /momentum/layer2.0.conv1.weight holds Inf (element 17)" -- \
  "$tb" step --ckpt "$d/infm.h5" --batch "$d/b_big.h5" --out "$d/out.h5"
# the good inputs still work
"$tb" step --ckpt "$d/ck.h5" --batch "$d/b_nan.h5" --out "$d/out.h5" >/dev/null 2>&1 && fail "control: NaN step ran"
"$py" -c "import h5py, sys
with h5py.File(sys.argv[1], 'r+') as f: f['images'][1, 2, 5, 7] = 0.5" "$d/b_nan.h5"
"$tb" step --ckpt "$d/ck.h5" --batch "$d/b_nan.h5" --out "$d/out.h5" >"$d/ok.log" 2>&1 ||
  fail "a finite batch (the NaN replaced): $(tail -n 1 "$d/ok.log")"
[ -s "$d/out.h5" ] || fail "a finite batch: no --out"
[ "$fails" -eq 0 ] || { echo "FAIL: $fails check(s)"; exit 1; }
echo "PASS: 6 non-finite inputs refused, each in one line, nothing written"
