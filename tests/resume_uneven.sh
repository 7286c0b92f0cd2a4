#!/bin/sh
# resume_uneven.sh TRAINBENCH PYTHON COMPARE_H5 RULE [LAUNCHER...]: --resume
# is exact under --last-batch RULE on a data set that the global batch does
# not divide (5 synthetic samples, batch 2 per rank): run A trains 5 steps
# straight, crossing epochs; run B stops after 3 (its checkpoint lies inside
# an epoch) and resumes to 5. Their final checkpoints must be bit-identical.
tb=$1
py=$2
cmp=$3
rule=$4
shift 4
dir=$(mktemp -d "$(pwd)/tb_resume.XXXXXX")
trap 'rm -rf "$dir"' EXIT
set -- "$@" "$tb" --image-size 64 --batch-size 2 --synthetic-size 5 --last-batch "$rule" --warmup-steps 0 \
  --scaling-steps 0 --threads 1 --timeout 60 --results ""
"$@" --steps 5 --save "$dir/a.h5" >"$dir/a.log" 2>&1 || { cat "$dir/a.log"; echo "FAIL: run A"; exit 1; }
"$@" --steps 3 --ckpt "$dir/b.ckpt" --ckpt-every 3 >"$dir/b1.log" 2>&1 || { cat "$dir/b1.log"; echo "FAIL: run B"; exit 1; }
"$@" --steps 5 --ckpt "$dir/b.ckpt" --resume --save "$dir/b.h5" >"$dir/b2.log" 2>&1 ||
  { cat "$dir/b2.log"; echo "FAIL: resumed run B"; exit 1; }
grep "resuming from" "$dir/b2.log" || { echo "FAIL: run B did not resume"; exit 1; }
grep "^# last batch" "$dir/a.log"
"$py" "$cmp" "$dir/b.h5" "$dir/a.h5" --rtol 0 --atol-scale 0 --only-failures
