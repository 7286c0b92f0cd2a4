#!/bin/bash
# gpu_feed.sh: the feed measurements (issues 15 and 31) on a lent GPU machine,
# called by tests/gpu/run_suite.sh's `feed` stage ($TB, $PY, $OUT, $ROOT
# exported; runs in $ROOT; what it keeps goes to $TB_KEEP: gpu-keep/keep, or $OUT/keep run alone). Budget: about
# 3 minutes of the device's 15 (TB_FEED_BUDGET, default 200 s; run_suite's
# cap wins when smaller); each step has a time limit and the script stops
# starting steps when the budget runs out, saying which it left out.
#
#   1. data: ImageNet-shaped JPEGs, `trainbench mkdata --like imagenet`, 16
#      classes x 256 = 4096 files (long side 500 px mostly, quality 75-95,
#      mixed chroma, ~115 KB a file: ~470 MB), on local disk, read once so
#      that every row finds it in the page cache; TB_FEED_DATA=DIR uses any
#      ImageFolder tree instead
#   2. decode alone (the loader's ceiling, no training), batch 256 at 224:
#      nvJPEG with 4 and 16 CPU threads (fenced: no host sync per batch; its
#      stage timeline as a Chrome trace), then with 16 threads each
#      --nvjpeg choice against it (sync=on: the host waiting per batch, as
#      the 2026-11-27 runs did; backend=hybrid; chunk=64; roi=off and
#      alloc=nvjpeg ran on 2026-12-04 and are left out), and 4 and 6 GPU
#      stages (the hardware engines' ceiling with no training beside them,
#      for the feed table's 4- and 6-stage rows), libjpeg-turbo with 4 and
#      16 threads
#   3. memory through a long loader run: nvJPEG, 16 threads, 600 batches of
#      256 (37 epochs of the set; host RSS, the decoders' device and pinned
#      memory and the device's memory in use every 50 batches), and the CPU
#      path for 200 batches
#   4. the feed table: ResNet-50 bf16 (CUDA graph), batch 256 at 224, rows
#      of at least 1.25 s (so NVML's GPU-Util resolves them): the resident
#      row (the same step on data in device memory: the on-device rate of
#      the same call), then threads 4, 8, 16 x CPU / nvJPEG x prefetch 3 / 4
#      (pinned), the seeds' rows (main thread, 8 and 16 threads, prefetch
#      2, pageable), nvJPEG with 4 GPU stages (4 threads) and 6 (16
#      threads), 16 threads of nvJPEG with the host waiting for each batch
#      (sync=on: the 2026-11-27 code) and on the hybrid decoder, and the
#      batch split between nvJPEG and the loader threads (cpu=25 at 4
#      threads, cpu=60 at 16)
#   5. PyTorch on the same files and GPU: torchvision ImageFolder + Pillow +
#      DataLoader feeding torchvision's ResNet-50 (bf16 autocast,
#      channels_last), batch 256, workers 4 and 16 with pin_memory, rows of
#      at least 1.25 s, CPU cores of the process and its workers
#   (steps run in the order 1, 2 (default and CPU), 4, 5, 3, 2's --nvjpeg
#   choices, so that the budget leaves out the diagnostics first)
#   6. $KEEP/feed.md (bench/feed_table.py): the tables, the batch-256
#      headline against the resident row, PyTorch beside them; and
#      $KEEP/feed_summary.tsv (bench/summary/feed.py): the summary's
#      feed_* rows
#   From the first decode to the last, nvidia-smi samples
#   the engines' use (dmon: sm, mem, jpg, ... each second, $KEEP/dmon.log)
#   and the clocks, power and clock-event reasons every 0.5 s (clocks.csv):
#   in training, the hardware decode per batch took nearly twice its time
#   alone (2026-12-04c); whether the JPEG engines stay as busy as alone
#   (slower per image: memory traffic or clocks) or half as busy (the calls
#   run one at a time) reads from there, the nvJPEG rows being the only
#   stretches with jpg above 0.
#   TB_FEED_PSNR=1 adds the GPU path's decode quality (bench/loader_psnr.py
#   on real photographs and on the set), left out by default for time (it
#   ran on 2026-11-27: 96.8 dB against the CPU path).
#
# Left out to fit the budget (run them by hand with more time): 1 and 2
# loader threads, prefetch 2 with pinned slots, GPU stages other than 2, 4
# and 6 (--decode-streams), --nvjpeg choices in the feed table (one
# --nvjpeg per call), PyTorch without pin_memory or with more workers,
# several epochs from disk (the set is read from the page cache).
set -u
: "${TB:?TB (trainbench binary) not set}" "${PY:?}" "${OUT:?}" "${ROOT:?}"
KEEP=${TB_KEEP:-$OUT/keep} # run_suite.sh: outside $OUT, packed after each stage
mkdir -p "$KEEP"
WORK=$(mktemp -d /tmp/tb_feed.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
T0=$(date +%s)
BUDGET=${TB_FEED_BUDGET:-200} # seconds for the whole script
# run_suite.sh's cap for this stage (what is left of the device call)
if [ -n "${TB_STAGE_BUDGET:-}" ] && [ "$TB_STAGE_BUDGET" -lt "$BUDGET" ]; then BUDGET=$TB_STAGE_BUDGET; fi
FAILED=0
LEFT_OUT=""
PROBE=$(dirname "$TB")/tests/tb_data_probe
NCPU=$(nproc)
B=${TB_FEED_BATCH:-256} # batch per step (the headline: 256)

elapsed() { echo $(( $(date +%s) - T0 )); }
# the steps the stage's figures come from: left out or cut short, the stage fails
REQUIRED=" mkdata decode_gpu decode_cpu feed_trainbench feed_torch "
required() { case "$REQUIRED" in *" $1 "*) return 0 ;; esac; return 1; }
# step NAME LIMIT_S CMD...: runs CMD with min(LIMIT, budget left), logs to $KEEP/NAME.log; a
# diagnostic step (not REQUIRED) that the budget left out or cut short is named, not failed
step() {
  local name=$1 limit=$2 left rc cut=0
  shift 2
  left=$(( BUDGET - $(elapsed) ))
  if [ "$left" -lt 15 ]; then
    echo "== $name: left out (budget spent: $(elapsed) s of $BUDGET)"
    LEFT_OUT="$LEFT_OUT $name"
    required "$name" && FAILED=$((FAILED + 1))
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left cut=1
  echo "== $name (limit ${limit} s, $(elapsed) s into the script)"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$KEEP/$name.log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 124 ] && [ "$cut" = 1 ] && ! required "$name"; then
    echo "== $name: cut at the budget's ${limit} s (left out for time)"
    LEFT_OUT="$LEFT_OUT $name(cut)"
  elif [ "$rc" -ne 0 ]; then
    echo "== $name: FAILED (exit $rc$([ "$rc" -eq 124 ] && echo ', time limit'))"
    FAILED=$((FAILED + 1))
  fi
  return "$rc"
}
# decode NAME LIMIT ARGS...: loader-bench alone on the set, batch 256, into NAME.h5
decode() {
  local name=$1 limit=$2
  shift 2
  step "$name" "$limit" "$TB" loader-bench --data "$SET" --batch-size "$B" --image-size 224 --batches 20 --warmup 3 \
    --results "$KEEP/$name.h5" "$@"
}

echo "# gpu_feed.sh: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), $NCPU CPUs"

# ---- 1. data -----------------------------------------------------------------------------
if [ -n "${TB_FEED_DATA:-}" ]; then
  SET=$TB_FEED_DATA
  DATA_NOTE="data: $SET (TB_FEED_DATA)"
else
  SET=$WORK/set
  step mkdata 60 "$TB" mkdata --out "$SET" --classes 16 --per-class 256 --seed 1 --like imagenet --threads "$NCPU" ||
    { echo "no data set: nothing else can run"; exit 1; }
  DATA_NOTE="data: trainbench mkdata --like imagenet --classes 16 --per-class 256 --seed 1 ($(grep -o 'mean file [^;]*' "$KEEP/mkdata.log" | head -1))"
fi
du -sh "$SET" | sed 's/^/# data set: /'
# into the page cache (bounded: a TB_FEED_DATA tree may be ImageNet's 140 GB)
timeout 60 find "$SET" -type f -name '*.[jJ][pP]*' -exec cat {} + >/dev/null || echo "# page cache: pre-read incomplete (cut at 60 s, or a file it could not read)"

# ---- the engines' use and the clocks while the decode rows, the feed table and the memory runs go (stopped before
# the tables)
SAMPLERS=()
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi dmon -s puc -d 1 -o T >"$KEEP/dmon.log" 2>&1 &
  SAMPLERS+=($!)
  nvidia-smi --query-gpu=timestamp,clocks.video,clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active \
    --format=csv -lms 500 >"$KEEP/clocks.csv" 2>&1 &
  SAMPLERS+=($!)
fi
stop_samplers() { [ ${#SAMPLERS[@]} -gt 0 ] && kill "${SAMPLERS[@]}" 2>/dev/null; SAMPLERS=(); }
trap 'stop_samplers; rm -rf "$WORK"' EXIT

# ---- 2. decode alone -----------------------------------------------------------------------
decode decode_gpu 40 --decode gpu --threads 4,16 --timeline "$KEEP/decode_gpu_timeline.json"
decode decode_cpu 40 --decode fast --format u8-nhwc --threads 4,16

# ---- 4. trainbench's feed table, batch 256 -----------------------------------------------------
# THREADS:PREFETCH:PINNED[:DECODE[:STREAMS[:NVJPEG]]]; resident: the same step on data in device memory;
# the last nvJPEG rows are A/Bs of what holds the GPU path in training: the host waiting for every
# batch (sync=on, as on 2026-11-27), the hybrid decoder, and more GPU stages: on 2026-12-04 (c) a
# stage's submit took as long as its device decode (55-58 ms a batch alone, 91-112 in training), so
# 2 stages fed 3,828 img/s while the 7 hardware engines decode 7,566 alone; stream priority made no
# difference there and was dropped for the 4- and 6-stage rows (prefetch 6 and 8: a ring slot per
# stage, 2 more for the step and the next batch, docs/data.md)
# The rows that have not run on a GPU yet come last: a row that ends the process (or the step's time limit)
# leaves the rows before it in the results file, which loader-bench writes after every row (status aborted)
ROWS=resident,16:3:on,16:4:on:gpu:2,4:3:on,4:4:on:gpu:2,8:3:on,8:4:on:gpu:2,4:4:on,4:3:on:gpu:2,16:4:on
ROWS=$ROWS,0:2:off,8:2:off,16:2:off
ROWS=$ROWS,16:4:on:gpu:2:sync=on,16:4:on:gpu:2:backend=hybrid
# the batch split between the engine and the loader threads' libjpeg-turbo (--nvjpeg cpu=PCT): at 4
# threads nvJPEG left 2 of the 4 cores idle, at 16 it used 1.7
ROWS=$ROWS,4:4:on:gpu:2:cpu=25,16:4:on:gpu:2:cpu=60
# the stage threads blocking instead of spinning while they wait for the device (--nvjpeg wait=block): on
# 2026-12-04c a stage's hardware call lasted its whole decode (~100 ms a batch) and the 2-stage rows' loader
# used 1.9 cores where its other host stages add up to 0.6
ROWS=$ROWS,4:4:on:gpu:2:wait=block
# 4 and 6 GPU stages last: a stage whose decoder differs from the first one's (a fifth or sixth hardware
# handle refused) ends the process with one line naming both, and the rows before it stay in the results file
ROWS=$ROWS,4:6:on:gpu:4,16:8:on:gpu:6,16:8:on:gpu:6:wait=block
step feed_trainbench 130 "$TB" loader-bench --feed --backend cuda --data "$SET" --model resnet50 --batch-size "$B" \
  --image-size 224 --rows "$ROWS" --warmup 3 --steps 8 --results "$KEEP/feed_trainbench.h5"

# ---- 5. PyTorch on the same set and GPU --------------------------------------------------------
step feed_torch 60 "$PY" "$ROOT/bench/torch_feed.py" "$SET" --workers 4,16 --pin 1 --batch "$B" --steps 8 --warmup 3 \
  --json "$KEEP/feed_torch.jsonl"

# ---- 3. memory through a long loader run ----------------------------------------------------
step memory_gpu 40 "$TB" loader-bench --data "$SET" --decode gpu --threads 16 --batch-size "$B" --image-size 224 \
  --batches 600 --warmup 10 --memory-every 50 --results "$KEEP/memory_gpu.h5"
step memory_cpu 30 "$TB" loader-bench --data "$SET" --decode fast --format u8-nhwc --threads 16 --batch-size "$B" \
  --image-size 224 --batches 200 --warmup 5 --memory-every 20 --results "$KEEP/memory_cpu.h5"

# ---- 2b. the --nvjpeg choices, decode alone, against the default (16 threads) -----------------
for v in sync=on backend=hybrid chunk=64 wait=block; do
  decode "decode_gpu_${v%%=*}" 25 --decode gpu --threads 16 --nvjpeg "$v"
done
# the engines' ceiling with 4 and 6 GPU stages and no training (the feed table's 4- and 6-stage rows beside it)
decode decode_gpu_stages4 25 --decode gpu --threads 16 --decode-streams 4 --prefetch 6
decode decode_gpu_stages6 25 --decode gpu --threads 16 --decode-streams 6 --prefetch 8

# ---- decode quality of the GPU path (TB_FEED_PSNR=1) --------------------------------------------
PSNR=()
if [ "${TB_FEED_PSNR:-0}" = 1 ]; then
  if step photo_set 60 "$PY" "$ROOT/bench/photo_set.py" "$WORK/photos"; then
    step psnr_photos 90 "$PY" "$ROOT/bench/loader_psnr.py" --probe "$PROBE" --data "$WORK/photos" --samples 300 \
      --crops 2 --modes partial,fast --gpu --title "real photographs (bench/photo_set.py)" \
      --out "$KEEP/psnr_photos.md" && PSNR+=(--psnr "$KEEP/psnr_photos.md")
  fi
  step psnr_mkdata 60 "$PY" "$ROOT/bench/loader_psnr.py" --probe "$PROBE" --data "$SET" --samples 200 \
    --modes partial,fast --gpu --title "the feed set" --out "$KEEP/psnr_mkdata.md" &&
    PSNR+=(--psnr "$KEEP/psnr_mkdata.md")
fi

stop_samplers

# ---- 6. the tables -------------------------------------------------------------------------------
NOTES=(--note "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1); $NCPU CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'))"
       --note "trainbench $("$TB" --version 2>/dev/null | head -1); $("$PY" -c 'import torch, torchvision, PIL; print("torch", torch.__version__, "torchvision", torchvision.__version__, "Pillow", PIL.__version__)' 2>/dev/null)"
       --note "$DATA_NOTE, page cache warm"
       --note "made by bench/gpu_feed.sh in $(elapsed) s; failed steps: $FAILED; left out for time:${LEFT_OUT:- none}")
DEC=()
for f in "$KEEP"/decode_*.h5; do [ -f "$f" ] && DEC+=(--decode "$f"); done
TBR=()
[ -f "$KEEP/feed_trainbench.h5" ] && TBR=(--tb "$KEEP/feed_trainbench.h5")
TOR=()
[ -f "$KEEP/feed_torch.jsonl" ] && TOR=(--torch "$KEEP/feed_torch.jsonl")
MEM=()
[ -f "$KEEP/memory_gpu.h5" ] && MEM=(--memory "$KEEP/memory_gpu.h5")
"$PY" "$ROOT/bench/feed_table.py" "${TBR[@]}" "${TOR[@]}" "${DEC[@]}" "${MEM[@]}" "${PSNR[@]}" "${NOTES[@]}" \
  --out "$KEEP/feed.md" || FAILED=$((FAILED + 1))
[ -f "$KEEP/memory_cpu.h5" ] && "$PY" "$ROOT/bench/feed_table.py" --memory "$KEEP/memory_cpu.h5" \
  --out "$KEEP/memory_cpu.md" >/dev/null
"$PY" "$ROOT/bench/summary/feed.py" "$KEEP" | tee "$KEEP/feed_summary.tsv"
# the issue's figures must all be there (a step that ran but printed no row leaves one out)
for k in feed_batch feed_resident_img_s feed_jpeg_img_s feed_nvjpeg_4thr_img_s feed_cpu_4thr_img_s; do
  if ! grep -q "^$k	" "$KEEP/feed_summary.tsv"; then
    echo "# gpu_feed.sh: no $k in the summary"
    FAILED=$((FAILED + 1))
  fi
done
echo "# gpu_feed.sh: $(elapsed) s, $FAILED failed steps, left out:${LEFT_OUT:- none}; table: $KEEP/feed.md"
[ "$FAILED" -eq 0 ]
