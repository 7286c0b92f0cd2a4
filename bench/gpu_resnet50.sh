#!/bin/bash
# gpu_resnet50.sh - run_suite.sh's `bench` stage: trainbench's ResNet-50 at
# 224 px on the lent GPU, img/s and peak device memory per precision,
# layout, batch and CUDA graph on/off, beside PyTorch (bench/torch_resnet50.py:
# eager channels-last bf16 autocast, and torch.compile when it runs) on the
# same GPU in the same run, and both trained side by side for a few hundred
# steps (bench/convergence.py). Writes $KEEP/resnet50.md ($TB_KEEP/resnet50, or $OUT/keep/resnet50 run alone) (the
# table, the command of every run, what was left out and why), rows.tsv
# (one line per row, with a header: bench/summary/resnet50.py reads it),
# each run's log and results file, and converge_*/ (both loss curves,
# curves.png, summary.txt).
#
# What is trained: ImageNet's model, 1000 classes (25,557,032 parameters, as
# torchvision's), on trainbench's learnable synthetic data resident on the
# device (--resident, the CUDA default: the pool uploaded once, each batch
# gathered there; its h2d column is that gather), PyTorch on a fixed random
# batch on the device; both under the schedule a user of this batch would
# run (SCHED below: lr 0.1 per 256 images, linear warm-up over LR_WARMUP
# steps, cosine to 0, label smoothing 0.1, each block's last BatchNorm gamma
# at 0 as Goyal et al.), and each row prints its loss at the first and the
# last step. Why the warm-up and the zero gamma: docs/loss_spike.md (with 10
# warm-up steps to lr 0.1 and the default init every configuration's loss
# climbed to 10-30 at steps 5-15 on the 2026-11-27 runs, fp32 NCHW
# included; PyTorch does the same under that schedule).
#
# Timing: every run times at least TB_BENCH_MIN_S seconds (default 10) after
# 5 warm-up steps (trainbench: 3 eager, the capture, one replay); its step
# count comes from the configuration's expected img/s (EST_IPS), and a
# row's later runs from its first run's measured img/s. Headline rows run
# TB_BENCH_REPEATS times (default 3), each a separate process (start-up,
# algorithm search and all); the table gives the median img/s, the range and
# the spread ((max - min) / median); the other rows run once.
#
# Called by tests/gpu/run_suite.sh with $TB (trainbench), $PY (python3 with
# torch), $OUT and $ROOT exported. TB_BENCH_BUDGET (s, default 500) bounds
# the stage with cuDNN's algorithm search included (every trainbench run
# measures each conv's algorithms at start-up): rows run in priority order
# and a row (or a repeat) whose estimate no longer fits is left out and
# named. TB_BENCH_ONLY selects rows by name (below).
#
# Where the time goes: after the headline rows, one more trainbench row
# (bf16 NHWC 256, graph on) with --op-profile 5 (5 eager steps after its
# timed ones, an event pair around every op), and a PyTorch row with
# --profile 5 (5 steps under torch.profiler after its timed ones); the
# markdown gets both side by side by op category (bench/op_profile_compare.py,
# categories in bench/op_kinds.py) and trainbench's own profile tables.
set -u
: "${TB:?set by run_suite.sh}" "${PY:?}" "${OUT:?}" "${ROOT:?}"
KEEP=${TB_KEEP:-$OUT/keep}/resnet50 # run_suite.sh: outside $OUT, packed after each stage
mkdir -p "$KEEP"
# one plan cache for the stage's rows (the suite turns the default one off):
# a row's repeats and the later rows of a shape start from the plans the
# first one searched, so the budget goes to timed steps
export TB_PLAN_CACHE=$KEEP/plans
BUDGET=${TB_BENCH_BUDGET:-500}
# run_suite.sh's cap for this stage (what is left of the device call)
if [ -n "${TB_STAGE_BUDGET:-}" ] && [ "$TB_STAGE_BUDGET" -lt "$BUDGET" ]; then BUDGET=$TB_STAGE_BUDGET; fi
MIN_S=${TB_BENCH_MIN_S:-10}
REPEATS=${TB_BENCH_REPEATS:-3}
WARM=5
LR_WARMUP=${TB_BENCH_LR_WARMUP:-100}
SCHED=(--classes 1000 --lr 0.1 --lr-base-batch 256 --lr-warmup-steps "$LR_WARMUP" --label-smoothing 0.1
       --zero-init-residual)
TORCH_SCHED=(--lr 0.1 --lr-warmup-steps "$LR_WARMUP" --label-smoothing 0.1 --zero-init-residual)
T0=$(date +%s)
MD=$KEEP/resnet50.md
ROWS=$KEEP/rows.tsv
printf 'framework\tprecision\tlayout\tbatch\tgraph\timg_per_s\timg_per_s_min\timg_per_s_max\tspread_pct\trepeats\ttimed_s\tms_per_step\th2d_ms\tpeak_mib\twall_s\tloss_start\tloss_end\tclasses\tcommand\n' >"$ROWS"
LEFT=""
elapsed() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( BUDGET - $(elapsed) )); }

# TB_BENCH_ONLY (an extended regular expression that must match a whole row
# name below, as tf32_nhwc_128_graph or eager_bf16_nhwc_256, which does not
# select eager_bf16_nhwc_128): run only those rows, e.g. the rows an earlier
# call left out for time; the others are named as not selected. Unset: every
# row, in priority order.
ONLY=${TB_BENCH_ONLY:-}
UNSELECTED=""
# selected NAME KIND: whether the row is wanted (and note it when not)
selected() {
  if [ -z "$ONLY" ] || printf '%s\n' "$1" | grep -Eqx -- "$ONLY"; then return 0; fi
  UNSELECTED="$UNSELECTED $2:$1"
  return 1
}

# stats VALUES...: "median min max spread%" of img/s figures (spread = (max - min) / median;
# "-" for min, max and spread when there is one value: no spread to speak of)
stats() {
  printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    if (NR < 2) { printf "%.2f - - -\n", m; exit }
    printf "%.2f %.2f %.2f %.2f\n", m, v[1], v[NR], (m > 0 ? 100 * (v[NR] - v[1]) / m : 0) }'
}
# rerun_est WALL_S [LOG]: a repeat's estimate from the first run's wall time
# less the planning its log reports ("# start-up: ... (the model and its
# plans M s)": a repeat's plans come from the stage's plan cache), with a
# margin
rerun_est() {
  local plan=0
  [ -n "${2:-}" ] && plan=$(sed -n 's/^# start-up: .*(the model and its plans \([0-9]*\)[0-9.]* s).*/\1/p' "$2" | head -1)
  local w=$(( $1 - ${plan:-0} ))
  [ "$w" -lt 1 ] && w=1
  echo $(( w * 12 / 10 + 5 ))
}
# WARM_EST[PRECISION/LAYOUT/BATCH/FUSE]: a row's first-run estimate once a run
# of that precision, layout, batch and --fuse has finished in this stage: its
# plans are in the stage's plan cache, so its wall time less its plans
# (rerun_est) says what the next row of that shape takes, where the row's
# own estimate (EST_S, searches and the old start-up included) would leave
# out a row that fits
declare -A WARM_EST=()
# loss_fell START END: whether a row's loss fell (both numbers, END < START)
loss_fell() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 < a + 0) }'; }
LOSS_BAD=""
# steps_for IMG_PER_S BATCH: timed steps that last MIN_S at that rate (+15 %), at least 20
steps_for() { awk -v r="$1" -v b="$2" -v s="$MIN_S" 'BEGIN { n = int(1.15 * s * r / b) + 1; print (n < 20 ? 20 : n) }'; }

# tb NAME EST_S RUNS EST_IPS PRECISION LAYOUT BATCH GRAPH(on|off) [more flags]
#   EST_S: one run's wall time with its start-up; EST_IPS: the img/s expected
#   (the H200's, 2026-11-27), which sizes the first run
tb() {
  local name=$1 est=$2 runs=$3 est_ips=$4 prec=$5 layout=$6 batch=$7 graph=$8 envs=()
  shift 8
  # leading TB_NAME=value arguments: the row's environment (TB_BN_KERNELS=own, TB_WGRAD_STREAM=on, TB_STEM_PAD=auto),
  # in its command
  while [ $# -gt 0 ] && [[ "$1" == TB_*=* ]]; do envs+=("$1"); shift; done
  selected "$name" trainbench || return
  local note="" r ips_all=() loss0="" loss1="" classes="" step="" h2d="" peak="" replays="" cmd1="" t_row timed="" steps
  case " $* " in *" --op-profile "*) note=", op profile" ;; esac
  case " $* " in *" --fuse graph "*) note="$note, fuse graph" ;; *" --fuse fastest "*) note="$note, fuse fastest" ;; esac
  [ ${#envs[@]} -gt 0 ] && note="$note, ${envs[*]}"
  local key="$prec/$layout/$batch/plain"
  case " $* " in *" --fuse graph "* | *" --fuse fastest "*) key="$prec/$layout/$batch/fused" ;; esac
  if [ -n "${WARM_EST[$key]:-}" ] && [ "${WARM_EST[$key]}" -lt "$est" ]; then est=${WARM_EST[$key]}; fi
  t_row=$(date +%s)
  steps=$(steps_for "$est_ips" "$batch")
  for r in $(seq 1 "$runs"); do
    if [ "$(left)" -lt "$est" ]; then
      LEFT="$LEFT trainbench:$name(run $r of $runs: est ${est}s, $(left)s left)"
      break
    fi
    local log=$KEEP/tb_${name}_r$r.log t rc line ips
    t=$(date +%s)
    local cmd=()
    [ ${#envs[@]} -gt 0 ] && cmd=(env "${envs[@]}")
    cmd+=("$TB" --backend cuda --model resnet50 --image-size 224 --synthetic --precision "$prec"
               --layout "$layout" --batch-size "$batch" --cuda-graph "$graph" --steps $((WARM + steps))
               --warmup-steps "$WARM" --scaling-steps 0 --print-every 1000 "${SCHED[@]}"
               --results "$KEEP/tb_${name}_r$r.h5" "$@")
    echo "== trainbench $name run $r/$runs: ${cmd[*]}"
    timeout --kill-after=10 "$(left)" "${cmd[@]}" >"$log" 2>&1
    rc=$?
    line=$(grep '^# training: ' "$log" | tail -1)
    ips=$(printf '%s\n' "$line" | sed -n 's/.*, \([0-9.]*\) img\/s .*/\1/p')
    if [ "$rc" -eq 124 ]; then # the stage's deadline came first (a start-up longer than its estimate)
      LEFT="$LEFT trainbench:$name(run $r cut at the stage's deadline after $(( $(date +%s) - t ))s)"
      break
    fi
    if [ "$rc" -ne 0 ] || [ -z "$ips" ]; then
      tail -5 "$log"
      printf 'trainbench\t%s\t%s\t%s\t%s\t-\t-\t-\t-\t%s\t-\t-\t-\t-\t%s\t-\t-\t-\tFAILED (run %s exit %s, see tb_%s_r%s.log)\n' \
        "$prec" "$layout" "$batch" "$graph$note" "$r" "$(( $(date +%s) - t_row ))" "$r" "$rc" "$name" "$r" >>"$ROWS"
      return
    fi
    ips_all+=("$ips")
    if [ "$r" -eq 1 ]; then # the first run's details and command; later runs sized from its rate
      cmd1="${cmd[*]}"
      loss0=$(printf '%s\n' "$line" | sed -n 's/.*, loss \([0-9.a-z]*\) -> .*/\1/p')
      loss1=$(printf '%s\n' "$line" | sed -n 's/.* -> \([0-9.a-z]*\), .*/\1/p')
      loss_fell "$loss0" "$loss1" || LOSS_BAD="$LOSS_BAD trainbench:$name($loss0 -> $loss1)"
      classes=$(sed -n 's/^# trainbench train: [a-z0-9]*, \([0-9]*\) classes.*/\1/p' "$log" | head -1)
      peak=$(sed -n 's/^# rank 0: device .* peak \([0-9.]*\) MiB allocated.*/\1/p' "$log" | tail -1)
      # rank 0's row of "training run, ms per step by rank": rank step data h2d ...
      step=$(awk '/# training run, ms per step by rank/{f=1; next} f && $1=="0"{print $2; exit}' "$log")
      h2d=$(awk '/# training run, ms per step by rank/{f=1; next} f && $1=="0"{print $4; exit}' "$log")
      replays=$(sed -n 's/^# cuda graph: .*; \([0-9]*\) training steps replayed.*/\1/p' "$log" | tail -1)
    fi
    # the shortest run's timed seconds (each should be at least MIN_S)
    timed=$(awk -v n="$steps" -v b="$batch" -v r="$ips" -v t="$timed" 'BEGIN { x = n * b / r; if (t != "" && t < x) x = t; printf "%.1f", x }')
    if [ "$r" -eq 1 ]; then steps=$(steps_for "$ips" "$batch"); est=$(rerun_est $(( $(date +%s) - t )) "$log"); fi
    WARM_EST[$key]=$(rerun_est $(( $(date +%s) - t )) "$log")
    echo "   $ips img/s, $line, $(( $(date +%s) - t )) s"
  done
  [ ${#ips_all[@]} -eq 0 ] && return
  local med lo hi spread
  read -r med lo hi spread <<<"$(stats "${ips_all[@]}")"
  printf 'trainbench\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$prec" "$layout" "$batch" \
    "$graph${replays:+ ($replays replays)}$note" "$med" "$lo" "$hi" "$spread" "${#ips_all[@]}" "$timed" "${step:--}" \
    "${h2d:--}" "${peak:--}" "$(( $(date +%s) - t_row ))" "${loss0:--}" "${loss1:--}" "${classes:--}" "$cmd1" >>"$ROWS"
  echo "   $name: median $med img/s over ${#ips_all[@]} run(s) (range $lo-$hi, spread $spread %)"
}

# torch NAME EST_S RUNS PRECISION LAYOUT BATCH MODE [more flags]
torch() {
  local name=$1 est=$2 runs=$3 prec=$4 layout=$5 batch=$6 mode=$7
  shift 7
  selected "$name" pytorch || return
  local r t_row ips_all=() first="" cmd1=""
  t_row=$(date +%s)
  for r in $(seq 1 "$runs"); do
    if [ "$(left)" -lt "$est" ]; then
      LEFT="$LEFT pytorch:$name(run $r of $runs: est ${est}s, $(left)s left)"
      break
    fi
    local log=$KEEP/torch_${name}_r$r.log json=$KEEP/torch_${name}_r$r.jsonl t rc line
    t=$(date +%s)
    rm -f "$json"
    local cmd=("$PY" "$ROOT/bench/torch_resnet50.py" --batch "$batch" --precision "$prec" --layout "$layout"
               --mode "$mode" --steps 20 --warmup "$WARM" --min-seconds "$MIN_S" "${TORCH_SCHED[@]}" --json "$json" "$@")
    echo "== pytorch $name run $r/$runs: ${cmd[*]}"
    timeout --kill-after=10 "$(left)" "${cmd[@]}" >"$log" 2>&1
    rc=$?
    line=$("$PY" - "$json" <<'EOF' 2>/dev/null
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
if "error" in r:
    print("ERR\t" + r["error"][:80])
else:
    print(f"{r['img_per_s']:.1f}\t{r['ms_per_step']:.2f}\t{r['peak_alloc_gib'] * 1024:.0f}\t{r['timed_s']:.1f}\t"
          f"{r['loss_start']:.4f}\t{r['final_loss']:.4f}\t{r['classes']}\t{r['torch']}")
EOF
)
    if [ "$rc" -eq 124 ]; then
      LEFT="$LEFT pytorch:$name(run $r cut at the stage's deadline after $(( $(date +%s) - t ))s)"
      break
    fi
    if [ "$rc" -ne 0 ] || [ -z "$line" ] || [ "${line%%$'\t'*}" = ERR ]; then
      tail -3 "$log"
      printf 'pytorch %s\t%s\t%s\t%s\t-\t-\t-\t-\t-\t%s\t-\t-\t-\t-\t%s\t-\t-\t-\tFAILED (run %s exit %s%s)\n' "$mode" "$prec" \
        "$layout" "$batch" "$r" "$(( $(date +%s) - t_row ))" "$r" "$rc" "${line:+: ${line#*$'\t'}}" >>"$ROWS"
      return
    fi
    ips_all+=("${line%%$'\t'*}")
    if [ "$r" -eq 1 ]; then
      first=$line
      cmd1="${cmd[*]}"
      est=$(rerun_est $(( $(date +%s) - t )))
      IFS=$'\t' read -r _ _ _ _ l0 l1 _ <<<"$line"
      loss_fell "$l0" "$l1" || LOSS_BAD="$LOSS_BAD pytorch:$name($l0 -> $l1)"
    fi
    echo "   ${line%%$'\t'*} img/s, $(( $(date +%s) - t )) s"
  done
  [ ${#ips_all[@]} -eq 0 ] && return
  local med lo hi spread ips ms peak timed l0 l1 classes ver
  read -r med lo hi spread <<<"$(stats "${ips_all[@]}")"
  IFS=$'\t' read -r ips ms peak timed l0 l1 classes ver <<<"$first"
  printf 'pytorch %s\t%s\t%s\t%s\t-\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t-\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$prec" "$layout" \
    "$batch" "$med" "$lo" "$hi" "$spread" "${#ips_all[@]}" "$timed" "$ms" "$peak" "$(( $(date +%s) - t_row ))" \
    "$l0" "$l1" "$classes" "torch $ver: $cmd1" >>"$ROWS"
  echo "   $name: median $med img/s over ${#ips_all[@]} run(s) (range $lo-$hi, spread $spread %; first run $ips)"
}

# converge NAME EST_S PRECISION STEPS: trainbench and PyTorch side by side on
# the same learnable data and weights under the same schedule
# (bench/convergence.py: 2048 samples of 100 classes, batch 256)
CONVERGED=""
converge() {
  local name=$1 est=$2 prec=$3 steps=$4
  selected "$name" convergence || return
  if [ "$(left)" -lt "$est" ]; then LEFT="$LEFT convergence:$name(est ${est}s, $(left)s left)"; return; fi
  local dir=$KEEP/$name rc t
  t=$(date +%s)
  echo "== convergence $name"
  timeout --kill-after=10 "$(left)" "$PY" "$ROOT/bench/convergence.py" --trainbench "$TB" --backend cuda --device cuda \
    --model resnet50 --image-size 224 --classes 100 --batch 256 --pool 2048 --steps "$steps" --precision "$prec" \
    --lr 0.1 --lr-base-batch 256 --warmup-steps "$LR_WARMUP" --label-smoothing 0.1 --zero-init-residual \
    --window 20 --out "$dir" >"$KEEP/$name.log" 2>&1
  rc=$?
  tail -4 "$KEEP/$name.log"
  CONVERGED="$CONVERGED $name:exit $rc after $(( $(date +%s) - t ))s"
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null \
  | head -1 >"$KEEP/gpu.txt"
"$TB" --version >>"$KEEP/gpu.txt" 2>&1

# Priority order (the estimates are one run's wall time with start-up and
# the algorithm search, from the H200 runs of 2026-11-27 and a timed part of
# MIN_S): the headline rows, TB_BENCH_REPEATS runs each, then both
# frameworks trained side by side, where the time goes, and the rest of the
# 4 precisions x 2 layouts x 2 batches once each. The stage needs about 450 s
# for the headline rows and the side-by-side training (tests/gpu/README.md).
PROF=$KEEP/torch_profile.jsonl
rm -f "$PROF"
torch    eager_bf16_nhwc_256    40 "$REPEATS" bf16 nhwc 256 eager
tb       bf16_nhwc_256_graph    45 "$REPEATS" 7200 bf16 nhwc 256 on
tb       fp16_nhwc_256_graph    45 "$REPEATS" 7700 fp16 nhwc 256 on
# the same with cuDNN's BatchNorm untimed (TB_BN_KERNELS=cudnn), as before
# each BatchNorm was timed against the own kernels at start-up (the rows
# above: their '# cuda bn: ...' line gives a step's BatchNorms each way)
tb       fp16_nhwc_256_cudnnbn  45 "$REPEATS" 7700 fp16 nhwc 256 on TB_BN_KERNELS=cudnn
# the stem's 3 input channels padded to 4 or 8 where that measured faster
# (TB_STEM_PAD=auto; MLPerf feeds it 4): its log's '# cuda conv: ...' line
# gives the stem's forward + filter gradient time on 3 channels and padded
tb       fp16_nhwc_256_stempad  45 "$REPEATS" 7700 fp16 nhwc 256 on TB_STEM_PAD=auto
# every unfused candidate at once (the BatchNorms as timed, the stem padded
# where faster, the weight gradients on a second stream): the rows below
# take them one by one
tb       fp16_nhwc_256_stempad_wgrad 45 "$REPEATS" 7700 fp16 nhwc 256 on TB_STEM_PAD=auto TB_WGRAD_STREAM=on
converge converge_bf16_resnet50 90 bf16 200
# where the time goes on both sides
tb       bf16_nhwc_256_profile  50 1 7200 bf16 nhwc 256 on --op-profile 5
torch    profile_bf16_nhwc_256  40 1 bf16 nhwc 256 eager --profile 5 --profile-json "$PROF"
# --fuse graph (issue 30): conv + BatchNorm statistics, BN + ReLU in the next
# conv's prologue (the first run of each precision plans and fills the plan
# cache: later runs of the same shapes start in seconds); batch 400 is
# MLPerf's per-GPU batch. The estimates: the bf16 fused row with its op
# profile took 51 s on a fresh cache (2026-12-04)
tb       bf16_nhwc_256_fused    80 "$REPEATS" 7200 bf16 nhwc 256 on --fuse graph
tb       fp16_nhwc_256_fused    80 "$REPEATS" 7700 fp16 nhwc 256 on --fuse graph
# --fuse fastest: each BatchNorm on its conv's statistics only where that
# timed faster at start-up than its unfused ops (its '# fuse fastest:' line:
# which, and a step's time of those ops each way); after the fused rows,
# whose plans it reuses
tb       bf16_nhwc_256_fastest  80 "$REPEATS" 7200 bf16 nhwc 256 on --fuse fastest
tb       fp16_nhwc_256_fastest  80 "$REPEATS" 7700 fp16 nhwc 256 on --fuse fastest
tb       bf16_nhwc_256_fused_profile 70 1 7200 bf16 nhwc 256 on --fuse graph --op-profile 5
tb       fp16_nhwc_256_fused_profile 70 1 7700 fp16 nhwc 256 on --fuse graph --op-profile 5
# every BatchNorm on trainbench's own kernels (their NHWC vector path) against cuDNN's fused BN kernels
tb       fp16_nhwc_256_ownbn    45 "$REPEATS" 7700 fp16 nhwc 256 on TB_BN_KERNELS=own
tb       bf16_nhwc_256_ownbn_profile 50 1 7200 bf16 nhwc 256 on TB_BN_KERNELS=own --op-profile 5
# each conv's weight gradient on a second stream beside its data gradient
# (TB_WGRAD_STREAM=on, as MLPerf's MXNet ResNet-50 does), unfused and fused
tb       fp16_nhwc_256_wgrad    45 "$REPEATS" 7700 fp16 nhwc 256 on TB_WGRAD_STREAM=on
tb       fp16_nhwc_256_fused_wgrad 60 "$REPEATS" 7700 fp16 nhwc 256 on TB_WGRAD_STREAM=on --fuse graph
# what issue 29 and 30 compare against in the same call: torch.compile (after
# the rows above: its compilation alone can take minutes)
torch    compile_bf16_nhwc_256 200 1 bf16 nhwc 256 compile
tb       bf16_nhwc_400_fused   100 1 7200 bf16 nhwc 400 on --fuse graph
tb       fp16_nhwc_400_fused   100 1 7700 fp16 nhwc 400 on --fuse graph
tb       bf16_nhwc_400_graph    70 1 7200 bf16 nhwc 400 on
tb       fp16_nhwc_400_graph    70 1 7700 fp16 nhwc 400 on
torch    eager_bf16_nhwc_400    60 1 bf16 nhwc 400 eager
tb       bf16_nhwc_256_eager    45 1 7100 bf16 nhwc 256 off
tb       bf16_nhwc_128_graph    40 1 6600 bf16 nhwc 128 on
tb       bf16_nhwc_128_eager    40 1 6500 bf16 nhwc 128 off
torch    eager_bf16_nhwc_128    35 1 bf16 nhwc 128 eager
tb       fp16_nhwc_128_graph    40 1 7100 fp16 nhwc 128 on
tb       tf32_nchw_256_graph    55 1 2400 tf32 nchw 256 on
tb       tf32_nhwc_256_graph    55 1 3100 tf32 nhwc 256 on
tb       fp32_nchw_256_graph    95 1 1150 fp32 nchw 256 on
tb       bf16_nchw_256_graph    45 1 2900 bf16 nchw 256 on
tb       fp16_nchw_256_graph    45 1 2900 fp16 nchw 256 on
tb       tf32_nchw_128_graph    45 1 2300 tf32 nchw 128 on
tb       tf32_nhwc_128_graph    45 1 2900 tf32 nhwc 128 on
tb       fp32_nchw_128_graph    65 1 1100 fp32 nchw 128 on
tb       bf16_nchw_128_graph    40 1 2700 bf16 nchw 128 on
tb       fp16_nchw_128_graph    40 1 2800 fp16 nchw 128 on
# fp32 NHWC: the algorithm search alone took about 110 s at 128 on the H200
# (cuDNN's fp32 NHWC candidates are slow to time), and over 121 s at 256
tb       fp32_nhwc_128_graph   135 1 1000 fp32 nhwc 128 on
tb       fp32_nhwc_256_graph   230 1 1000 fp32 nhwc 256 on

# the table
base=$(awk -F'\t' 'NR > 1 && $1 == "pytorch eager" && $2 == "bf16" && $3 == "nhwc" && $4 == "256" && $6 + 0 > 0 {print $6; exit}' "$ROWS")
{
  echo "# ResNet-50, 224 px, training step img/s on $(head -1 "$KEEP/gpu.txt")"
  echo
  echo "$("$TB" --version 2>&1 | head -1); stage budget ${BUDGET} s. What is trained: ResNet-50 with 1000 classes"
  echo "(ImageNet's model), under the schedule \`${SCHED[*]}\` (PyTorch: the same, bench/torch_resnet50.py);"
  echo "${WARM} warm-up steps, then at least ${MIN_S} s timed per run; headline rows ${REPEATS} runs, each its own process:"
  echo "img/s is their median, range and spread ((max - min) / median) beside it; timed s is the shortest run's."
  echo "trainbench's synthetic pool is resident"
  echo "on the device (--resident; h2d = the on-device gather of the batch), as PyTorch keeps its batch on the device;"
  echo "trainbench's peak MiB includes that pool (up to 1 GiB at 224 px). x eager = img/s over PyTorch eager"
  echo "channels-last bf16 at batch 256 (medians). Loss: the first run's, at its first and last step."
  echo
  echo "| framework | precision | layout | batch | CUDA graph | img/s | range | spread % | runs x timed s | x eager | ms/step | h2d ms | peak MiB | loss first -> last | classes | wall s |"
  echo "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  tail -n +2 "$ROWS" | while IFS=$'\t' read -r fw prec layout batch graph ips lo hi spread runs timed step h2d peak wall l0 l1 classes cmd; do
    ratio=-
    if [ -n "$base" ] && [ "$ips" != - ]; then ratio=$(awk -v a="$ips" -v b="$base" 'BEGIN{printf "%.2f", a/b}'); fi
    range="$lo-$hi"
    [ "$lo" = - ] && range=-
    echo "| $fw | $prec | $layout | $batch | $graph | $ips | $range | $spread | $runs x $timed | $ratio | $step | $h2d | $peak | $l0 -> $l1 | $classes | $wall |"
  done
  echo
  echo "Commands (each row's first run; its other runs the same with their own step count and file names):"
  echo
  tail -n +2 "$ROWS" | while IFS=$'\t' read -r fw prec layout batch graph _rest; do
    echo "- $fw $prec $layout $batch $graph: \`$(printf '%s\n' "$_rest" | awk -F'\t' '{print $NF}')\`"
  done
  echo
  echo "Loss that did not fall from the first step to the last (the stage fails):${LOSS_BAD:- none}."
  echo
  echo "Left out by design: PyTorch fp32/tf32/fp16 and torch.compile at 128; repeats of the rows after the"
  echo "headline ones. Left out for time in this run:${LEFT:- none}.${ONLY:+ Rows selected by TB_BENCH_ONLY=\"$ONLY\"; not selected:${UNSELECTED}.}"
  echo
  echo "## Trained side by side (bench/convergence.py)${CONVERGED:+:$CONVERGED}"
  echo
  for d in "$KEEP"/converge_*/; do
    [ -f "$d/summary.txt" ] || continue
    echo "$(basename "$d"): both loss curves in curves.tsv and curves.png, the trainbench run in trainbench.log"
    echo
    echo '```'
    cat "$d/summary.txt"
    echo '```'
    echo
  done
  # where the time goes, both sides (either may be missing: the script says so)
  "$PY" "$ROOT/bench/op_profile_compare.py" --tb-log "$KEEP/tb_bf16_nhwc_256_profile_r1.log" --torch-json "$PROF" \
    || true
  echo
  echo "trainbench's op profile (tb_bf16_nhwc_256_profile_r1.log):"
  echo
  echo '```'
  awk '/^# op profile: /{f=1} f{print} f && /^#   \(step:/{exit}' "$KEEP/tb_bf16_nhwc_256_profile_r1.log" 2>/dev/null
  echo '```'
  # issue 30: the other profiled steps beside PyTorch's (--fuse graph, the own BatchNorm kernels)
  for prow in bf16_nhwc_256_fused_profile fp16_nhwc_256_fused_profile bf16_nhwc_256_ownbn_profile; do
    [ -f "$KEEP/tb_${prow}_r1.log" ] || continue
    echo
    echo "Row ${prow} (tb_${prow}_r1.log; its command in rows.tsv):"
    echo
    "$PY" "$ROOT/bench/op_profile_compare.py" --tb-log "$KEEP/tb_${prow}_r1.log" --torch-json "$PROF" || true
    grep -E '^# (fuse graph|cuda fused|cuda bn|plan cache|start-up)' "$KEEP/tb_${prow}_r1.log" 2>/dev/null
  done
  # --fuse fastest: what the timing chose, per precision
  for prow in bf16_nhwc_256_fastest fp16_nhwc_256_fastest; do
    [ -f "$KEEP/tb_${prow}_r1.log" ] || continue
    echo
    echo "Row ${prow} (tb_${prow}_r1.log):"
    echo
    grep -E '^# (fuse fastest|fuse graph)' "$KEEP/tb_${prow}_r1.log" 2>/dev/null
  done
  echo
  echo "Stage time: $(elapsed) s."
} >"$MD"
cat "$MD"
# the stage fails when trainbench's headline row did not run, or the side
# by side training disagreed; with a selection, when a selected row failed
# or none ran (a row cut at the deadline is left out for time, named above,
# not failed)
# any exit but 0 (agreed) and 124 (cut at the deadline: left out for time,
# named in the section's title) fails: 1 a disagreement, others a crash
if [ -n "$LOSS_BAD" ]; then
  echo "loss did not fall in:$LOSS_BAD (see the table)"
  exit 1
fi
if printf '%s\n' "$CONVERGED" | awk '{for (i = 1; i < NF; i++) if ($i ~ /:exit$/ && $(i + 1) != 0 && $(i + 1) != 124) bad = 1}
                                    END {exit !bad}'; then
  echo "the side-by-side training failed or differs from PyTorch's:$CONVERGED (see above)"
  exit 1
fi
if [ -z "$ONLY" ]; then
  awk -F'\t' 'NR > 1 && $1 == "trainbench" && $2 == "bf16" && $3 == "nhwc" && $4 == "256" && $5 ~ /^on/ &&
              $19 !~ /^FAILED/ {ok = 1} END {exit !ok}' "$ROWS"
else
  awk -F'\t' 'NR > 1 {if ($19 ~ /^FAILED/) bad = 1; else ok = 1} END {exit !((ok || c) && !bad)}' c="${CONVERGED:+1}" "$ROWS"
fi
