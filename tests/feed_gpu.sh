#!/bin/sh
# feed_gpu.sh WHAT TRAINBENCH - the GPU feed tests (label gpu), run in the
# build's tests directory where the mkdata_gpu fixture lies:
#   table  loader-bench --feed on the CUDA backend (4 rows: threads 0,2 x
#          pinned on,off) into feed_gpu.h5, then, when the build has nvJPEG,
#          loader-bench --decode gpu (the decode rate) and one --feed row
#          with --decode gpu
#   train  train with --decode gpu, 12 steps on one GPU; the results file
#          records decode = gpu (skipped without nvJPEG)
set -u
what=$1
tb=$2
has_nvjpeg() {
  out=$("$tb" loader-bench --data mkdata_gpu --decode gpu --threads 1 --batch-size 4 --batches 1 --image-size 64 2>&1)
  rc=$?
  printf '%s\n' "$out"
  if printf '%s\n' "$out" | grep -q 'this build has no nvJPEG'; then return 1; fi
  [ "$rc" -eq 0 ] || { echo "FAIL: loader-bench --decode gpu failed"; exit 1; }
}
case "$what" in
  table)
    rm -f feed_gpu.h5
    "$tb" loader-bench --feed --backend cuda --data mkdata_gpu --model resnet18 --image-size 64 --batch-size 16 \
      --threads 0,2 --prefetch 2 --pinned on,off --steps 4 --warmup 2 --results feed_gpu.h5 || exit 1
    if has_nvjpeg; then
      # each row reports the GPU stage's wall ms per batch (stage_ms: field 10 of
      # loader-bench's row, 13 of --feed's), a number > 0 on --decode gpu rows
      out=$("$tb" loader-bench --data mkdata_gpu --decode gpu --threads 2 --batch-size 16 --batches 4 \
        --image-size 64) || { printf '%s\n' "$out"; exit 1; }
      printf '%s\n' "$out"
      printf '%s\n' "$out" | awk '$1 == "2" && $10 + 0 > 0 { ok = 1 } END { exit !ok }' ||
        { echo "FAIL: loader-bench --decode gpu reports no GPU stage time (stage_ms)"; exit 1; }
      out=$("$tb" loader-bench --feed --backend cuda --decode gpu --data mkdata_gpu --model resnet18 --image-size 64 \
        --batch-size 16 --threads 2 --prefetch 3 --pinned on --steps 4 --warmup 2) || { printf '%s\n' "$out"; exit 1; }
      printf '%s\n' "$out"
      printf '%s\n' "$out" | awk '$1 == "2" && $4 == "gpu" && $13 + 0 > 0 { ok = 1 } END { exit !ok }' ||
        { echo "FAIL: the --decode gpu feed row reports no GPU stage time (stage_ms)"; exit 1; }
    else
      echo "# no nvJPEG in this build: the --decode gpu rows are not run"
    fi
    ;;
  train)
    if ! has_nvjpeg; then echo "SKIP: this build has no nvJPEG"; exit 77; fi
    rm -f feed_gpu_train.h5
    "$tb" --backend cuda --decode gpu --data mkdata_gpu --image-size 64 --batch-size 16 --steps 12 \
      --warmup-steps 2 --scaling-steps 0 --loader-threads 2 --results feed_gpu_train.h5 || exit 1
    "$tb" report feed_gpu_train.h5 | grep -qE '^ *decode +gpu *$' ||
      { echo "FAIL: the results file does not record decode = gpu"; exit 1; }
    ;;
  *) echo "feed_gpu.sh table|train TRAINBENCH"; exit 2 ;;
esac
