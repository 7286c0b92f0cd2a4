#!/bin/sh
# bench_row_budget.sh SRC: the GPU bench stage's row budget
# (bench/gpu_resnet50.sh) on the host, with a stand-in trainbench that
# sleeps as a run would: the first run of a precision, batch and --fuse
# plans (FAKE_PLAN_S, then its plans are in the stage's plan cache), every
# run starts up and times its steps at 7700 img/s. The budget (50 s) lets
# the first row in on its own estimate (45 s); the five more rows of that
# shape must run on the estimate the first one's wall time gives (about
# 10 s), where their own 45 s would have left four of them out; the fused
# row, whose plans are not in the cache, keeps its own estimate (80 s) and
# is left out for time, named. About 20 s.
set -u
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fake=$work/trainbench
cat >"$fake" <<'EOF'
#!/bin/sh
[ "${1:-}" = --version ] && { echo "trainbench 0.0.0 (stand-in for bench_row_budget)"; exit 0; }
steps=0 batch=0 prec=x fuse=plain
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift ;;
    --batch-size) batch=$2; shift ;;
    --precision) prec=$2; shift ;;
    --fuse) fuse=$2; shift ;;
  esac
  shift
done
key=$TB_PLAN_CACHE/$prec-$batch-$fuse
plans=0.1
if [ ! -f "$key" ]; then plans=$FAKE_PLAN_S; mkdir -p "$TB_PLAN_CACHE"; : >"$key"; fi
timed=$(awk -v n="$steps" -v b="$batch" 'BEGIN { print (n - 5) * b / 7700 }')
sleep "$plans"; sleep 0.5; sleep "$timed"
echo "# start-up: first step done 1.0 s after start-up began (the model and its plans $plans s); parts: bootstrap 0.1"
echo "# training: $steps steps, loss 6.9304 -> 2.7000, 7700.00 img/s (1.0 GFLOP/s) over $((steps - 5)) timed steps"
EOF
chmod +x "$fake"
rows='fp16_nhwc_256_(graph|cudnnbn|stempad|stempad_wgrad|ownbn|wgrad|fused)'
OUT=$work/out TB=$fake PY=python3 ROOT=$src FAKE_PLAN_S=3 TB_BENCH_BUDGET=50 TB_BENCH_MIN_S=1 TB_BENCH_REPEATS=1 \
  TB_BENCH_ONLY="$rows" bash "$src/bench/gpu_resnet50.sh" >"$work/stage.log" 2>&1
rc=$?
md=$work/out/keep/resnet50/resnet50.md
tsv=$work/out/keep/resnet50/rows.tsv
grep '^== trainbench' "$work/stage.log"
fail=0
[ "$rc" -eq 0 ] || { echo "FAIL: the stage exited $rc"; tail -20 "$work/stage.log"; fail=1; }
ran=$(awk -F'\t' 'NR > 1 && $6 + 0 > 0' "$tsv" | wc -l)
echo "rows with a rate: $ran of 6 of the cached shape"
[ "$ran" -eq 6 ] || { echo "FAIL: $ran rows ran, expected the 6 fp16 NHWC 256 rows without --fuse"; fail=1; }
grep -q 'trainbench:fp16_nhwc_256_fused(run 1 of 1: est 80s' "$md" ||
  { echo "FAIL: the fused row (plans not in the cache) is not left out on its own 80 s estimate"; fail=1; }
if grep -oE 'trainbench:fp16_nhwc_256_(graph|cudnnbn|stempad|stempad_wgrad|ownbn|wgrad)\(run' "$md"; then
  echo "FAIL: a row of the cached shape was left out for time"
  fail=1
fi
[ "$fail" -eq 0 ] || { grep -A1 'Left out' "$md"; exit 1; }
echo "ok: 6 rows of the cached shape ran on the measured estimate in a 50 s stage; the fused row kept its own"
