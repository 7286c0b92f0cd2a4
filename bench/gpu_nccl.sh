#!/bin/bash
# gpu_nccl.sh - run_suite.sh's `nccl` stage: issue 14's checks on the one
# lent GPU, and the measurements they allow there. Everything lands in
# $KEEP ($TB_KEEP/nccl: gpu-keep/keep/nccl, or $OUT/keep/nccl run alone) and the summary (nccl.md) is printed:
#
#  1. only with TB_NCCL_CTEST=1 (the suite's tests stage runs them already,
#     in parallel with the rest): the GPU tests of the gradient paths
#     (ctest -R, label gpu): a 1-rank
#     NCCL run equal to the run without NCCL, the MPI staging on one rank,
#     the captured step equal to the eager one (with NCCL inside), the bf16
#     hook's cost, allreduce-bench and preflight on NCCL, 2 ranks sharing
#     the GPU over MPI against the per-shard reference, and the duplicate-GPU
#     refusal (ours, then NCCL's own when forced past it);
#  2. allreduce-bench: NCCL on device buffers (float, bf16) on one rank,
#     MPI on host buffers over 2 ranks: the tables;
#  3. what --allreduce-dtype bf16 buys: ResNet-50 on 2 ranks sharing the
#     GPU over MPI staged through pinned memory, float32 vs bfloat16 on the
#     wire (step and exposed all-reduce ms; the accuracy cost is the test
#     bf16_allreduce_error in CI and bf16_allreduce_cost_gpu here);
#  4. the scaling table of that 2-rank shared-GPU run (results file, the
#     printed tables, `trainbench report --format md`);
#  5. issue 26, two ranks over NCCL on the one GPU (the bundle's slim NCCL
#     >= 2.30, NCCL_MULTI_RANK_GPU_ENABLE=1; left out, saying so, without
#     it): allreduce-bench on 2 ranks (float32, bf16, 8 B to 256 MiB, the
#     bandwidth labelled as shared); the 1-rank ResNet-50 bf16 batch-256
#     timeline from CUDA events (timeline_1rank.h5, the input of
#     bench/project_h200.sh, whose projection runs here too); the 2-rank
#     NCCL scaling table with its bucket overlap ("2 ranks share one GPU");
#     the model check (`trainbench project` of that run's 1-rank row with the
#     fabric fitted to the 2-rank allreduce-bench, beside its measured
#     2-rank row); and -np 4, recording what NCCL says.
# Multi-GPU and multi-node NCCL cannot run on one lent GPU: nothing here
# claims them; the 2-rank figures are two processes time-slicing one GPU.
#
# Environment from run_suite.sh: $TB, $PY, $OUT, $ROOT (the bundle's mpirun on
# PATH). TB_NCCL_BUDGET (s, default 300; capped by run_suite's
# TB_STAGE_BUDGET) bounds the stage: parts that no longer fit are left out
# and named. TB_NCCL_ONLY=issue26 runs part 5 alone (parts 2-4 ran on the
# H200 on 2026-11-27: results/gpu_h200_2026-11-27*); TB_NCCL_STEPS, a
# regular expression on part 5's step names (scaling_nccl_np2,
# allreduce_nccl_np2_float, timeline_1rank, allreduce_nccl_np2_bf16,
# np4_allreduce), runs only those, for a call that finishes what an
# earlier one left out.
set -u
: "${TB:?set by run_suite.sh}" "${PY:?}" "${OUT:?}" "${ROOT:?}"
KEEP=${TB_KEEP:-$OUT/keep}/nccl # run_suite.sh: outside $OUT, packed after each stage
mkdir -p "$KEEP"
BUDGET=${TB_NCCL_BUDGET:-300}
# run_suite.sh's cap for this stage (what is left of the device call)
if [ -n "${TB_STAGE_BUDGET:-}" ] && [ "$TB_STAGE_BUDGET" -lt "$BUDGET" ]; then BUDGET=$TB_STAGE_BUDGET; fi
T0=$(date +%s)
MD=$KEEP/nccl.md
LEFT=""
FAILED=""
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
fits() { [ "$(left)" -ge "$1" ] || { LEFT="$LEFT $2(est ${1}s, $(left)s left)"; return 1; }; }
MPI=(mpirun -np 2 --bind-to none)

{
  echo "# Issue 14 on one lent GPU: NCCL and the GPU gradient paths"
  echo
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader 2>/dev/null | head -1 | sed 's/^/GPU: /'
  echo
  "$TB" --version 2>&1 | head -1
} >"$MD"

# 1. the checks (already in the tests stage unless asked for again)
if [ "${TB_NCCL_CTEST:-0}" != 1 ]; then
  printf '\n## GPU checks\n\nIn the suite'"'"'s tests stage (ctest.log there), not repeated here (TB_NCCL_CTEST=1 repeats them).\n' >>"$MD"
elif fits 240 "ctest(issue 14)"; then
  ctest --test-dir "$ROOT/build-gpu" --output-on-failure --timeout 300 \
    -R '^(nccl_train_equals_plain|staged_train_equals_plain|graph_equals_eager|graph_equals_eager_nccl|bf16_allreduce_cost_gpu|allreduce_bench_nccl|allreduce_bench_nccl_bf16|preflight_gpu|dp_exact_gpu_shared_mpi_np2|dp_exact_gpu_shared_mpi_np2_keep|duplicate_gpu_refused|duplicate_gpu_nccl_forced|nccl_watch_gpu)$' \
    >"$KEEP/ctest.log" 2>&1
  rc=$?
  {
    echo
    echo "## GPU checks (ctest, exit $rc)"
    echo
    echo '```'
    grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|tests failed' "$KEEP/ctest.log"
    echo '```'
  } >>"$MD"
  [ "$rc" -eq 0 ] || FAILED="$FAILED ctest"
fi

# 2. allreduce-bench tables
ONLY26=0
[ "${TB_NCCL_ONLY:-}" = issue26 ] && ONLY26=1
bench() { # NAME EST CMD...
  local name=$1 est=$2
  shift 2
  [ "$ONLY26" = 1 ] && return
  fits "$est" "$name" || return
  echo "== $name: $*"
  timeout "$(left)" "$@" >"$KEEP/$name.txt" 2>&1
  local rc=$?
  {
    echo
    echo "## $name (exit $rc): \`$*\`"
    echo
    echo '```'
    cat "$KEEP/$name.txt"
    echo '```'
  } >>"$MD"
  [ "$rc" -eq 0 ] || FAILED="$FAILED $name"
}
bench allreduce_nccl_float 40 "$TB" allreduce-bench --comm nccl -b 8 -e 256M -f 4 -n 20 -w 5 \
  --results "$KEEP/allreduce_nccl_float.h5"
bench allreduce_nccl_bf16 40 "$TB" allreduce-bench --comm nccl --dtype bf16 -b 8 -e 256M -f 4 -n 20 -w 5
bench allreduce_mpi_host_np2 60 "${MPI[@]}" "$TB" allreduce-bench --comm mpi -b 8 -e 64M -f 4 -n 10 -w 3 \
  --results "$KEEP/allreduce_mpi_np2.h5"

# 3. bf16 on the wire: 2 ranks sharing the GPU over MPI (ResNet-50, bf16 compute)
TRAIN=(--backend cuda --comm mpi --share-gpu --model resnet50 --image-size 224 --batch-size 64 --synthetic
       --precision bf16 --print-every 10)
wire() { # DTYPE
  local d=$1
  [ "$ONLY26" = 1 ] && return
  fits 120 "wire_$d" || return
  echo "== 2 ranks sharing the GPU, --allreduce-dtype $d"
  timeout "$(left)" "${MPI[@]}" "$TB" "${TRAIN[@]}" --allreduce-dtype "$d" --steps 25 --warmup-steps 5 \
    --scaling-steps 0 --results "$KEEP/wire_$d.h5" >"$KEEP/wire_$d.log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || FAILED="$FAILED wire_$d"
  {
    echo
    echo "### --allreduce-dtype $d (exit $rc)"
    echo
    echo '```'
    grep -E '^# training:|training run, ms per step|^ +[0-9]+ +[0-9.]+ ' "$KEEP/wire_$d.log" | head -6
    echo '```'
  } >>"$MD"
}
[ "$ONLY26" = 1 ] || {
  echo
  echo "## What bf16 on the wire buys: 2 ranks sharing the GPU over MPI, staged through pinned memory"
  echo
  echo "\`mpirun -np 2 trainbench ${TRAIN[*]} --allreduce-dtype fp32|bf16 --steps 25 --warmup-steps 5\`"
  echo "(allreduce = exposed all-reduce per step; its cost in accuracy: bf16_allreduce_error in CI, bf16_allreduce_cost_gpu above)"
} >>"$MD"
wire fp32
wire bf16

# 4. the scaling table of the 2-rank shared-GPU run. 10 timed steps per row,
# then more until the row lasts 1.25 s (--scaling-min-seconds' CUDA default:
# NVML's GPU-Util needs 1 s; the first H200 run's 1-rank row lasted 0.11 s
# and read 0 %): the printed `over N timed steps` shows the extension.
if [ "$ONLY26" = 0 ] && fits 100 "scaling_shared_gpu"; then
  cmd=("${MPI[@]}" "$TB" "${TRAIN[@]}" --steps 30 --warmup-steps 10 --scaling-steps 10 --scaling-warmup 3
       --results "$KEEP/scaling_shared_gpu_mpi.h5")
  echo "== scaling: ${cmd[*]}"
  timeout "$(left)" "${cmd[@]}" >"$KEEP/scaling_shared_gpu_mpi.txt" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || FAILED="$FAILED scaling_shared_gpu"
  "$TB" report "$KEEP/scaling_shared_gpu_mpi.h5" --format md >"$KEEP/scaling_shared_gpu_mpi.md" 2>&1
  {
    echo
    echo "## Scaling table: 2 ranks sharing one GPU over MPI (exit $rc)"
    echo
    echo "\`${cmd[*]}\`"
    echo
    echo "Both ranks share one GPU, so the 2-rank row measures contention and the staged MPI path, not"
    echo "NCCL scaling: multi-GPU NCCL cannot run on one lent GPU."
    echo
    echo '```'
    sed -n '/^# scaling (weak/,/^# results written/p' "$KEEP/scaling_shared_gpu_mpi.txt"
    echo '```'
    echo
    cat "$KEEP/scaling_shared_gpu_mpi.md"
  } >>"$MD"
fi

# 5. issue 26: two ranks over NCCL on the one GPU
want() { [ -z "${TB_NCCL_STEPS:-}" ] || echo "$1" | grep -Eq "$TB_NCCL_STEPS"; }
np2() { # NAME EST CMD...: one step of part 5, its output kept and quoted
  local name=$1 est=$2
  shift 2
  fits "$est" "$name" || return 1
  echo "== $name: $*"
  # NCCL's warnings in the log (NCCL prints nothing by default): the
  # multi-rank mode is experimental, a stall should leave NCCL's words
  timeout "$(left)" env NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_DEBUG="${NCCL_DEBUG:-WARN}" "$@" >"$KEEP/$name.txt" 2>&1
  local rc=$?
  { echo; echo "### $name (exit $rc)"; echo; echo "\`$*\`"; echo; echo '```'; tail -n 60 "$KEEP/$name.txt"; echo '```'; } >>"$MD"
  return $rc
}
CHECK=$ROOT/build-gpu/tests/tb_gpu_check
{
  echo
  echo "## Two ranks over NCCL on the one GPU (issue 26)"
  echo
  "$CHECK" --nccl-min 23000 2>&1 | sed 's/^/    /'
} >>"$MD"
if "$CHECK" --nccl-min 23000 >/dev/null 2>&1; then
  R50=(--backend cuda --model resnet50 --image-size 224 --precision bf16 --layout nhwc --synthetic --batch-size 256
       --cuda-graph on --timeout 300)
  # the order puts what the issue asks first: the 2-rank training over NCCL,
  # then the all-reduce it is modelled with, the model check, the 1-rank
  # timeline for the projection, the bf16 wire
  # 5a. the 2-rank NCCL scaling table with the bucket overlap (--no-autotune:
  # two ranks timing conv algorithms at once on one GPU would time each
  # other; start-up stays short)
  if ! want scaling_nccl_np2; then
    :
  elif np2 scaling_nccl_np2 200 "${MPI[@]}" "$TB" "${R50[@]}" --comm nccl --share-gpu --no-autotune --steps 30 \
       --warmup-steps 10 --scaling-steps 20 --scaling-warmup 5 --results "$KEEP/scaling_nccl_np2.h5"; then
    "$TB" report "$KEEP/scaling_nccl_np2.h5" --format md >"$KEEP/scaling_nccl_np2.md" 2>&1
    {
      echo
      echo "### Scaling table over NCCL: 2 ranks share one GPU"
      echo
      echo "Two processes time-slice one GPU: the 2-rank row measures the NCCL path and the overlap on"
      echo "one device, not a second GPU or a fabric."
      echo
      sed -n '/gradient all-reduce overlap/,$p' "$KEEP/scaling_nccl_np2.md"
    } >>"$MD"
  else
    FAILED="$FAILED scaling_nccl_np2"
  fi
  # 5b. the all-reduce over 2 ranks (sizes x4 apart: 13 sizes, 8 B to 128 MiB)
  want allreduce_nccl_np2_float && { np2 allreduce_nccl_np2_float 60 "${MPI[@]}" "$TB" allreduce-bench --comm nccl --share-gpu -b 8 -e 256M -f 4 -n 10 -w 3 \
    --timeout 120 --results "$KEEP/allreduce_nccl_np2_float.h5" || FAILED="$FAILED allreduce_nccl_np2_float"; }
  # 5c. the model check: the 2-rank step predicted from the 2-rank run's own
  # 1-rank row (its timeline) and the measured 2-rank all-reduce, beside the
  # measured 2-rank row: as two GPUs, with each rank's compute doubled, and
  # as two ranks time-slicing the GPU (share=2: judged, within 5 % of the
  # measured step, by tests/project_shared_gpu.sh as CI judges the stored run)
  if [ -f "$KEEP/scaling_nccl_np2.h5" ] && [ -f "$KEEP/allreduce_nccl_np2_float.h5" ]; then
    for set in "" "batch=2" "share=2"; do
      case $set in batch=2) tag=_compute_x2 ;; share=2) tag=_shared ;; *) tag= ;; esac
      "$TB" project "$KEEP/scaling_nccl_np2.h5" --fabric "fit:$KEEP/allreduce_nccl_np2_float.h5" --ranks 1,2 \
        ${set:+--set "$set"} --format md >"$KEEP/model_check$tag.md" 2>&1 || FAILED="$FAILED model_check$tag"
      {
        echo
        case $set in
          batch=2) echo "### Model check with the compute of each rank x2 (--set $set)" ;;
          share=2) echo "### Model check for two ranks time-slicing one GPU (--set $set: each step holds both ranks' compute, the all-reduces not overlapped)" ;;
          *) echo "### Model check" ;;
        esac
        echo
        echo "\`trainbench project scaling_nccl_np2.h5 --fabric fit:allreduce_nccl_np2_float.h5 --ranks 1,2${set:+ --set $set}\`"
        echo
        cat "$KEEP/model_check$tag.md"
      } >>"$MD"
    done
    sh "$ROOT/tests/project_shared_gpu.sh" "$TB" "$KEEP" >"$KEEP/model_check_shared.txt" 2>&1
    rc=$?
    { echo; echo '```'; cat "$KEEP/model_check_shared.txt"; echo '```'; } >>"$MD"
    [ "$rc" -eq 0 ] || FAILED="$FAILED model_check_shared"
  fi
  # 5d. the 1-rank timeline (CUDA events) of the headline configuration: the projection's input
  if ! want timeline_1rank; then
    :
  elif np2 timeline_1rank 120 "$TB" "${R50[@]}" --steps 25 --warmup-steps 5 --scaling-steps 20 --scaling-warmup 5 \
       --results "$KEEP/timeline_1rank.h5"; then
    "$TB" report "$KEEP/timeline_1rank.h5" --format md >"$KEEP/timeline_1rank.md" 2>&1
    if TB=$TB PY=$PY sh "$ROOT/bench/project_h200.sh" "$KEEP/timeline_1rank.h5" "$KEEP/projection_h200" \
         >"$KEEP/projection_h200.log" 2>&1; then
      { echo; echo "Projection of that timeline: keep/nccl/projection_h200.md (bench/project_h200.sh)"; } >>"$MD"
    else
      FAILED="$FAILED projection_h200"
    fi
  else
    FAILED="$FAILED timeline_1rank"
  fi
  # 5e. the bf16 wire
  want allreduce_nccl_np2_bf16 && { np2 allreduce_nccl_np2_bf16 60 "${MPI[@]}" "$TB" allreduce-bench --comm nccl --share-gpu --dtype bf16 -b 8 -e 256M -f 4 \
    -n 10 -w 3 --timeout 120 --results "$KEEP/allreduce_nccl_np2_bf16.h5" || FAILED="$FAILED allreduce_nccl_np2_bf16"; }
  # -np 4 (two ranks per GPU is what NCCL 2.30 documents): what NCCL says, not a pass/fail
  if want np4_allreduce; then
    np2 np4_allreduce 90 mpirun -np 4 --bind-to none --oversubscribe "$TB" allreduce-bench --comm nccl --share-gpu \
      -b 8 -e 64M -f 8 -n 5 -w 2 --timeout 60 || true
  fi
elif "$CHECK" >/dev/null 2>&1; then
  echo "(not run: a GPU but no NCCL >= 2.30 loaded; carry a slim build, TB_BUNDLE_NCCL)" >>"$MD"
  FAILED="$FAILED issue26(no NCCL >= 2.30 with a GPU)"
else
  echo "(left out: no GPU)" >>"$MD"
  LEFT="$LEFT issue26(no GPU)"
fi

{
  echo
  echo "Left out for time:${LEFT:- none}. Failed:${FAILED:- none}. Stage time: $(( $(date +%s) - T0 )) s."
} >>"$MD"
cat "$MD"
[ -z "$FAILED" ]
