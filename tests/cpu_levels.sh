#!/bin/sh
# cpu_levels.sh TRAINBENCH TB_RUN_COMPARE: the same training run at every
# vector level this CPU has (TB_CPU_LEVEL=baseline, avx2, avx512), bit for
# bit: ResNet-18 at 32 px on a small JPEG set (the loader's resize and normalise,
# then the CPU backend's forward, backward and SGD), 2 steps, 2 threads.
# Each level's checkpoint and per-step losses must equal baseline's
# (tb_run_compare --tolerance 0), and its results file must say the level
# (root attribute cpu_dispatch_level). A level the CPU lacks must be
# refused in one line naming it; then it is reported and left out.
set -u
tb=$1
cmp=$2
dir=$(mktemp -d "$(pwd)/tb_levels.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$tb" mkdata --out "$dir/data" --classes 3 --per-class 4 --min-side 48 --max-side 160 >"$dir/mkdata.log" 2>&1 ||
  { cat "$dir/mkdata.log"; echo "FAIL: mkdata"; exit 1; }
run() { # level
  TB_CPU_LEVEL=$1 "$tb" --backend cpu --data "$dir/data" --model resnet18 --classes 3 --image-size 32 \
    --batch-size 4 --steps 2 --warmup-steps 0 --scaling-steps 0 --threads 2 --timeout 120 \
    --save "$dir/$1.ckpt.h5" --results "$dir/$1.h5" >"$dir/$1.log" 2>&1
}
run baseline || { cat "$dir/baseline.log"; echo "FAIL: the baseline run"; exit 1; }
ran=baseline
for lv in avx2 avx512; do
  if ! run $lv; then
    if grep -q "TB_CPU_LEVEL=$lv: this CPU lacks $lv" "$dir/$lv.log" && [ "$(wc -l <"$dir/$lv.log")" -eq 1 ]; then
      echo "# $lv: this CPU lacks it, refused in one line: $(cat "$dir/$lv.log")"
      continue
    fi
    cat "$dir/$lv.log"
    echo "FAIL: the $lv run"
    exit 1
  fi
  "$cmp" "$dir/baseline.ckpt.h5" "$dir/$lv.ckpt.h5" "$dir/baseline.h5" "$dir/$lv.h5" --tolerance 0 \
    --attr cpu_dispatch_level=$lv || { echo "FAIL: level $lv differs from baseline"; exit 1; }
  ran="$ran $lv"
done
echo "# levels run, all bit for bit the same: $ran"
