#!/bin/bash
# gpu_feed.sh: issue 15's measurements on a lent GPU machine, called by
# tests/gpu/run_suite.sh's `feed` stage ($TB, $PY, $OUT, $ROOT exported; runs
# in $ROOT; what it keeps goes to $OUT/keep). Budget: 9 minutes on a 16-core
# H100 machine; each step has a time limit and the script stops starting
# steps when the budget runs out, saying which it left out.
#
#   1. data: `trainbench mkdata`, 16 classes x 200 = 3200 photo-sized JPEGs
#      (300-600 px, 4:2:0, quality 90; about 175 MB), on local disk, read
#      once so that every row finds it in the page cache
#   2. decode alone (the loader's ceiling, no training): nvJPEG
#      (--decode gpu) with 4 and 16 CPU threads, libjpeg-turbo (--decode
#      fast) with 4 and 16 threads; batch 128 at 224
#   3. trainbench's data-loading table: ResNet-50 (bf16, the CUDA backend's
#      default) trained on the set, batch 128 at 224, 3 + 12 steps per row,
#      rows: main thread (0), 1, 2, 4, 8, 16 loader threads with prefetch 2
#      and pageable slots; 8 and 16 threads with prefetch 3 and pinned
#      slots; nvJPEG decode with 4 and 16 threads (prefetch 3, pinned)
#   4. PyTorch on the same set and GPU: torchvision ImageFolder + Pillow +
#      DataLoader feeding torchvision's ResNet-50 (bf16 autocast,
#      channels_last), workers 0, 8, 16 with pin_memory, and 16 without;
#      batch 128, 3 + 12 steps per row
#   5. decode quality of the GPU path: real photographs (bench/photo_set.py:
#      scikit-image's and matplotlib's sample photos as JPEGs at 3 qualities
#      x 3 chroma subsamplings x 2 sizes), PSNR of the GPU path, the CPU's
#      fast decode and the CPU's exact decode against torchvision + Pillow
#      on the same crop boxes (bench/loader_psnr.py --gpu); the same on 200
#      files of the mkdata set
#   6. $OUT/keep/feed.md (bench/feed_table.py): the tables, side by side
#      with the seeds' rows
#
# Left out to fit the budget (run them by hand with more time): the full
# product of threads x prefetch x pinned (24 rows), prefetch 2 against 4 at
# every thread count, pageable slots with nvJPEG, more than 12 timed steps
# per row, several epochs (the set is read from the page cache, not disk),
# PyTorch with prefetch_factor 3 or non-persistent workers.
set -u
: "${TB:?TB (trainbench binary) not set}" "${PY:?}" "${OUT:?}" "${ROOT:?}"
KEEP=$OUT/keep
mkdir -p "$KEEP"
WORK=$(mktemp -d /tmp/tb_feed.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
T0=$(date +%s)
BUDGET=${TB_FEED_BUDGET:-530} # seconds for the whole script
# run_suite.sh's cap for this stage (what is left of the device call)
if [ -n "${TB_STAGE_BUDGET:-}" ] && [ "$TB_STAGE_BUDGET" -lt "$BUDGET" ]; then BUDGET=$TB_STAGE_BUDGET; fi
FAILED=0
LEFT_OUT=""
PROBE=$(dirname "$TB")/tests/tb_data_probe
NCPU=$(nproc)

elapsed() { echo $(( $(date +%s) - T0 )); }
# step NAME LIMIT_S CMD...: runs CMD with min(LIMIT, budget left), logs to $KEEP/NAME.log
step() {
  local name=$1 limit=$2 left rc
  shift 2
  left=$(( BUDGET - $(elapsed) ))
  if [ "$left" -lt 20 ]; then
    echo "== $name: left out (budget spent: $(elapsed) s of $BUDGET)"
    LEFT_OUT="$LEFT_OUT $name"
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (limit ${limit} s, $(elapsed) s into the script)"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$KEEP/$name.log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "== $name: FAILED (exit $rc$([ "$rc" -eq 124 ] && echo ', time limit'))"
    FAILED=$((FAILED + 1))
  fi
  return "$rc"
}

echo "# gpu_feed.sh: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), $NCPU CPUs"

# ---- 1. data -----------------------------------------------------------------------------
step mkdata 90 "$TB" mkdata --out "$WORK/set" --classes 16 --per-class 200 --seed 1 --threads "$NCPU" ||
  { echo "no data set: nothing else can run"; exit 1; }
du -sh "$WORK/set" | sed 's/^/# data set: /'
cat "$WORK"/set/*/*.jpg >/dev/null # into the page cache

# ---- 2. decode alone -----------------------------------------------------------------------
step decode_gpu 90 "$TB" loader-bench --data "$WORK/set" --decode gpu --threads 4,16 --batch-size 128 \
  --image-size 224 --batches 20 --warmup 3 --results "$KEEP/decode_gpu.h5"
step decode_gpu_1stream 60 "$TB" loader-bench --data "$WORK/set" --decode gpu --decode-streams 1 --threads 16 \
  --batch-size 128 --image-size 224 --batches 20 --warmup 3 --results "$KEEP/decode_gpu_1stream.h5"
step decode_cpu 90 "$TB" loader-bench --data "$WORK/set" --decode fast --format u8-nhwc --threads 4,16 \
  --batch-size 128 --image-size 224 --batches 20 --warmup 3 --results "$KEEP/decode_cpu.h5"

# ---- 3. trainbench's feed table ----------------------------------------------------------------
# the nvJPEG rows with 1, 2 and 3 batches in the loader's GPU stage at once (THREADS:PREFETCH:PINNED:gpu:STREAMS;
# the 2026-11-27 run had one stage: 3544 img/s at 16:3:on); the step holds one or two slots, so N stages want
# prefetch N + 2; each row's stage_ms / stage% say whether the GPU stage limits it
ROWS=0:2:off,1:2:off,2:2:off,4:2:off,8:2:off,16:2:off,8:3:on,16:3:on,16:3:on:gpu:1,16:4:on:gpu:1,16:4:on:gpu:2
ROWS=$ROWS,16:5:on:gpu:3
step feed_trainbench 240 "$TB" loader-bench --feed --backend cuda --data "$WORK/set" --model resnet50 \
  --batch-size 128 --image-size 224 --rows "$ROWS" --warmup 3 --steps 12 --results "$KEEP/feed_trainbench.h5"

# ---- 4. PyTorch on the same set and GPU --------------------------------------------------------
step feed_torch_pinned 150 "$PY" "$ROOT/bench/torch_feed.py" "$WORK/set" --workers 0,8,16 --pin 1 --batch 128 \
  --steps 12 --warmup 3 --json "$KEEP/feed_torch.jsonl"
step feed_torch_pageable 60 "$PY" "$ROOT/bench/torch_feed.py" "$WORK/set" --workers 16 --pin 0 --batch 128 \
  --steps 12 --warmup 3 --json "$KEEP/feed_torch.jsonl"

# ---- 5. decode quality of the GPU path -----------------------------------------------------------
PSNR=()
if step photo_set 60 "$PY" "$ROOT/bench/photo_set.py" "$WORK/photos"; then
  step psnr_photos 90 "$PY" "$ROOT/bench/loader_psnr.py" --probe "$PROBE" --data "$WORK/photos" --samples 300 \
    --crops 2 --modes partial,fast --gpu --title "real photographs (bench/photo_set.py)" \
    --out "$KEEP/psnr_photos.md" && PSNR+=(--psnr "$KEEP/psnr_photos.md")
fi
step psnr_mkdata 60 "$PY" "$ROOT/bench/loader_psnr.py" --probe "$PROBE" --data "$WORK/set" --samples 200 \
  --modes partial,fast --gpu --title "mkdata set, 300-600 px" --out "$KEEP/psnr_mkdata.md" &&
  PSNR+=(--psnr "$KEEP/psnr_mkdata.md")

# ---- 6. the table ---------------------------------------------------------------------------------
NOTES=(--note "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1); $NCPU CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'))"
       --note "trainbench $("$TB" --version 2>/dev/null | head -1); $("$PY" -c 'import torch, torchvision, PIL; print("torch", torch.__version__, "torchvision", torchvision.__version__, "Pillow", PIL.__version__)' 2>/dev/null)"
       --note "data: trainbench mkdata --classes 16 --per-class 200 --seed 1 (3200 JPEGs, 300-600 px, 4:2:0, q90), page cache warm"
       --note "made by bench/gpu_feed.sh in $(elapsed) s; failed steps: $FAILED; left out for time:${LEFT_OUT:- none}")
DEC=()
for f in "$KEEP/decode_gpu.h5" "$KEEP/decode_gpu_1stream.h5" "$KEEP/decode_cpu.h5"; do [ -f "$f" ] && DEC+=(--decode "$f"); done
TBR=()
[ -f "$KEEP/feed_trainbench.h5" ] && TBR=(--tb "$KEEP/feed_trainbench.h5")
TOR=()
[ -f "$KEEP/feed_torch.jsonl" ] && TOR=(--torch "$KEEP/feed_torch.jsonl")
"$PY" "$ROOT/bench/feed_table.py" "${TBR[@]}" "${TOR[@]}" "${DEC[@]}" "${PSNR[@]}" "${NOTES[@]}" \
  --out "$KEEP/feed.md" || FAILED=$((FAILED + 1))
echo "# gpu_feed.sh: $(elapsed) s, $FAILED failed steps, left out:${LEFT_OUT:- none}; table: $KEEP/feed.md"
[ "$FAILED" -eq 0 ]
