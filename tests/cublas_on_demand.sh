#!/bin/sh
# cublas_on_demand.sh TRAINBENCH PYTHON [--gpu]: cuBLAS and cuBLASLt are loaded when
# a GPU path needs them (core/cublas_lib.h), not when trainbench starts.
#   - --version and a CPU-backend training step load no libcublas (the
#     dynamic loader's own log, LD_DEBUG=files, names every file it opens)
#   - probe loads them: its table says the version loaded and the file, the
#     results file records it (cublas_library), and the version matches
#   - a broken libcublasLt.so.N first on LD_LIBRARY_PATH: probe still runs
#     (exit 0), cuBLAS 'absent', one warning naming the file and what to
#     do; with a GPU, --backend cuda stops with one line saying the same
#     (without one that part is skipped, and says so)
# Exit 77 (skip) for a build without CUDA, and with --gpu (ctest
# cublas_on_demand_gpu, label gpu) where no GPU is usable.
tb=$1
py=$2
dir=$(mktemp -d "$(pwd)/tb_cublas.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

if "$tb" probe --quick 2>&1 | grep -q "built without CUDA"; then
  echo "SKIP: this trainbench was built without CUDA: no cuBLAS to load"
  exit 77
fi
gpu=0
"$tb" probe --quick --expect-gpu >/dev/null 2>&1 && gpu=1
if [ "${3:-}" = --gpu ] && [ "$gpu" = 0 ]; then
  echo "SKIP: no usable GPU here (probe --expect-gpu failed)"
  exit 77
fi
# the broken library first, the path's own folders (MPI, HDF5, ... on a bundle) after it
broken_path=$dir/broken${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# 1. no start pays for cuBLAS
LD_DEBUG=files "$tb" --version >"$dir/version.log" 2>&1 || fail "--version exited $?"
if grep -qE "file=[^ ]*libcublas" "$dir/version.log"; then
  grep -E "file=[^ ]*libcublas" "$dir/version.log"
  fail "--version loaded cuBLAS"
fi
(cd "$dir" && LD_DEBUG=files "$tb" --backend cpu --model resnet18 --image-size 32 --batch-size 2 --synthetic-size 4 \
  --steps 1 --warmup-steps 0 --scaling-steps 0 --threads 1 --results "" >"$dir/cpu.log" 2>&1) ||
  { tail -5 "$dir/cpu.log"; fail "a CPU-backend step exited $?"; }
grep -q "^step " "$dir/cpu.log" || fail "the CPU-backend run printed no step"
if grep -qE "file=[^ ]*libcublas" "$dir/cpu.log"; then
  grep -E "file=[^ ]*libcublas" "$dir/cpu.log"
  fail "a CPU-backend run loaded cuBLAS"
fi

# 2. probe loads it and says which file
"$tb" probe --quick --results "$dir/probe.h5" >"$dir/probe.log" 2>&1 || { cat "$dir/probe.log"; fail "probe exited $?"; }
lt=$(sed -n 's/^# cuBLASLt library  *//p' "$dir/probe.log")
if [ -z "$lt" ] || [ ! -f "$lt" ]; then
  cat "$dir/probe.log"
  fail "probe names no cuBLASLt library file ('$lt')"
fi
grep -qE "^# cuBLAS +[0-9.]+ +[0-9.]+ +(match|differs)" "$dir/probe.log" ||
  fail "probe's cuBLAS row has no loaded version: $(grep '^# cuBLAS ' "$dir/probe.log")"
rec=$("$py" -c "import sys, h5py; print(h5py.File(sys.argv[1], 'r').attrs['cublas_library'])" "$dir/probe.h5" 2>&1)
[ "$rec" = "$lt" ] || fail "the probe file records cublas_library '$rec', the table '$lt'"

# 3. a broken library first on the path
major=$(basename "$lt" | sed 's/^libcublasLt\.so\.//')
mkdir "$dir/broken"
: >"$dir/broken/libcublasLt.so.$major"
LD_LIBRARY_PATH=$broken_path "$tb" probe --quick >"$dir/broken.log" 2>&1 || fail "probe with a broken cuBLAS exited $?"
grep -qE "^# cuBLAS +[0-9.]+ +none +absent" "$dir/broken.log" ||
  { cat "$dir/broken.log"; fail "probe with a broken cuBLAS does not say it is absent"; }
if [ "$(grep -c "warning: probe: cuBLAS: cannot load cuBLAS" "$dir/broken.log")" != 1 ] ||
  ! grep -q "warning: probe: cuBLAS: cannot load cuBLAS ($dir/broken/libcublasLt.so.$major: .*LD_LIBRARY_PATH$" \
    "$dir/broken.log"; then
  cat "$dir/broken.log"
  fail "probe with a broken cuBLAS: not one warning naming the file and what to do"
fi
if [ "$gpu" = 1 ]; then
  (cd "$dir" && LD_LIBRARY_PATH=$broken_path "$tb" --backend cuda --steps 1 --results "" >"$dir/gpu.log" 2>&1) &&
    fail "--backend cuda with a broken cuBLAS ran"
  if [ "$(grep -c "error" "$dir/gpu.log")" != 1 ] ||
     ! grep -q "error: .*the CUDA backend: cannot load cuBLAS ($dir/broken/" "$dir/gpu.log"; then
    cat "$dir/gpu.log"
    fail "--backend cuda with a broken cuBLAS: not one line saying so"
  fi
else
  echo "no usable GPU here: --backend cuda with a broken cuBLAS not run"
fi

[ "$fails" = 0 ] && echo "cuBLAS on demand: OK"
[ "$fails" = 0 ]
