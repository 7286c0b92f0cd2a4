#!/bin/sh
# eval_ties.sh TRAINBENCH PYTHON: top-1/top-5 break ties as torch.topk does.
# A model whose logits are all equal (fc.weight and fc.bias zeroed in a
# checkpoint, then --init with --lr 0) must score only the images of class
# 0 as top-1 hits (3 of the 9 here: 33.33 %), not every image (100 %), as
# counting "no class strictly above the label" did.
set -u
bin=$1
py=$2
dir=eval_ties
rm -rf "$dir"
mkdir "$dir" || exit 1
"$bin" mkdata --out "$dir/train" --classes 3 --per-class 4 --min-side 40 --max-side 56 >/dev/null || exit 1
"$bin" mkdata --out "$dir/val" --classes 3 --per-class 3 --seed 2 --min-side 40 --max-side 56 >/dev/null || exit 1
common="--data $dir/train --image-size 32 --batch-size 4 --steps 1 --warmup-steps 0 --scaling-steps 0 --threads 1
        --loader-threads 1 --results="
# shellcheck disable=SC2086 # $common is a list of flags
"$bin" $common --save "$dir/ck.h5" >"$dir/save.txt" 2>&1 || { echo "FAIL: the first run"; tail -n 5 "$dir/save.txt"; exit 1; }
"$py" -c "
import sys, h5py
with h5py.File(sys.argv[1], 'a') as f:
    for k in ('fc.weight', 'fc.bias'):
        f['params'][k][...] = 0
" "$dir/ck.h5" || { echo "FAIL: cannot zero fc in the checkpoint"; exit 1; }
# shellcheck disable=SC2086
"$bin" $common --init "$dir/ck.h5" --lr 0 --val "$dir/val" >"$dir/out.txt" 2>&1
rc=$?
grep '^eval' "$dir/out.txt"
[ "$rc" -eq 0 ] || { echo "FAIL: train exited $rc"; tail -n 5 "$dir/out.txt"; exit 1; }
grep -q '^eval .* top-1 33\.33 %  top-5 100\.00 %  (9 images)$' "$dir/out.txt" ||
    { echo "FAIL: equal logits must be top-1 hits for class 0 only (3 of 9)"; exit 1; }
echo "ok: equal logits rank class 0 first, as torch.topk"
