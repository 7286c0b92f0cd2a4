#!/bin/bash
# run_suite.sh [STAGE...]: trainbench's GPU suite, one command on the lent
# GPU machine (device tool), everything logged under $OUT (or ./gpu-out).
#
#   device run, carry ["gpu-bundle.tar.xz"]:
#     bash tests/gpu/run_suite.sh                 # env probe tests (default)
#     bash tests/gpu/run_suite.sh bench           # the ResNet-50 benchmark
#     bash tests/gpu/run_suite.sh env tests:golden  # a ctest -R subset
#     bash tests/gpu/run_suite.sh nccl@200 feed     # several stages in one call
#
# The suite ends within TB_SUITE_BUDGET seconds (default 540; a device call
# may last 600): each stage gets what is left of it, or less with STAGE@S.
# The tests stage runs ctest -j TB_SUITE_JOBS (4) and stops at its deadline
# (tests not started by then are `Not Run` and count as failures).
#
# Stages, in the order given:
#   env     the machine: nvidia-smi, driver, python/torch and the CUDA
#           libraries found under site-packages nvidia/, the bundle's ldd
#   probe   trainbench probe (versions built for vs loaded, copy and GEMM
#           ceilings) -> probe.h5
#   tests   ctest -L gpu (every GPU test: ops vs the CPU backend, golden
#           steps vs PyTorch, bf16 loss falls, fp16 loss scaling, probe_gpu,
#           NCCL and feed tests as they exist) but the fused stage's;
#           tests:REGEX runs ctest -R REGEX
#   fused   ctest -L fused: --fuse graph and --plan-cache (issue 30: the
#           fused ops, the fused step, the start-up with the cache; about 8-12
#           minutes, a call of its own)
#   bench   bench/gpu_resnet50.sh: ResNet-50 img/s and peak memory per
#           precision and layout beside PyTorch on the same GPU
#   nccl    bench/gpu_nccl.sh: the one-GPU NCCL checks of issue 14
#   feed    bench/gpu_feed.sh: the data-loading table of issue 15
#
# The machine has nvcc, cmake and PyTorch but no MPI, HDF5, libjpeg-turbo or
# OpenBLAS: tests/gpu/make_bundle.sh builds everything on a development
# machine into gpu-bundle.tar.xz (carry it); this script unpacks it, puts
# the GPU machine's own cuDNN, cuBLAS and NCCL (python site-packages nvidia/)
# on LD_LIBRARY_PATH, and makes the build's absolute paths valid here.
#
# $OUT gets at most 8 files back: suite.log (everything), summary.txt (one
# line per stage and test), results.tar.gz (results files, ctest logs).
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT" "$OUT/keep"
LOG=$OUT/suite.log
SUM=$OUT/summary.txt
: >"$SUM"
exec > >(tee -a "$LOG") 2>&1
T0=$(date +%s)
BUDGET=${TB_SUITE_BUDGET:-540}  # s: every stage ends by T0 + BUDGET (the device allows 600 a call)
JOBS=${TB_SUITE_JOBS:-4}        # ctest -j for the tests stage
say() { printf '%s\n' "$*" | tee -a "$SUM"; }
stage_result() { say "$(printf '%-10s %-8s %5ss  %s' "$1" "$2" "$(( $(date +%s) - $3 ))" "${4:-}")"; }

# ---- unpack the bundle and make its paths valid --------------------------------------
# A warm device machine keeps ignored files between calls (gpu-bundle/,
# build-gpu/ of the last call): with the archive carried, unpack it afresh
# (a rebuilt bundle replaces the old one); without it, reuse what is there.
if [ -f gpu-bundle.tar.xz ]; then
  rm -rf gpu-bundle "$ROOT/build-gpu"
elif [ ! -d gpu-bundle ]; then
  say "setup      FAIL     no gpu-bundle.tar.xz: run tests/gpu/make_bundle.sh on the development machine and carry it"
  exit 1
fi
if [ ! -d gpu-bundle ]; then
  if command -v xz >/dev/null; then unxz() { xz -dc gpu-bundle.tar.xz; }
  else unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open("gpu-bundle.tar.xz"), sys.stdout.buffer)'; }
  fi
  unxz | tar -xf - || { say "setup      FAIL     cannot unpack gpu-bundle.tar.xz"; exit 1; }
fi
export TB_BUNDLE=$ROOT/gpu-bundle
build_here=$(cat gpu-bundle/build_dir_here)
source_here=$(cat gpu-bundle/source_dir_here)
# The build recorded absolute paths (source_here, build_here). Make them
# true here: a link from the source path to this checkout, and the build
# directory where it was (source_here/build-gpu).
if [ "$source_here" != "$ROOT" ]; then
  if [ -e "$source_here" ] && [ "$(cd "$source_here" && pwd -P)" != "$(pwd -P)" ]; then
    say "setup      FAIL     $source_here exists here and is not this checkout"
    exit 1
  fi
  mkdir -p "$(dirname "$source_here")"
  ln -sfn "$ROOT" "$source_here"
fi
if [ ! -L gpu-bundle/build ]; then # freshly unpacked: the build goes where it was built
  rm -rf "$ROOT/build-gpu"
  mv gpu-bundle/build "$ROOT/build-gpu"
  ln -sfn "$ROOT/build-gpu" gpu-bundle/build
elif [ ! -x "$ROOT/build-gpu/trainbench" ]; then
  say "setup      FAIL     gpu-bundle/ was unpacked by an earlier call but build-gpu/ is gone: carry gpu-bundle.tar.xz"
  exit 1
fi
[ "$build_here" = "$source_here/build-gpu" ] || say "setup      WARN     bundle built in $build_here, not $source_here/build-gpu"
# shellcheck disable=SC1091
. gpu-bundle/env.sh

PY=$(command -v python3 || echo python3-not-found)
NVLIBS=$("$PY" - <<'EOF' 2>/dev/null
import glob, os
try:
    import nvidia
    dirs = []
    for base in nvidia.__path__:
        dirs += sorted(glob.glob(os.path.join(base, "*", "lib")))
    print(":".join(dirs))
except Exception:
    pass
EOF
)
[ -n "$NVLIBS" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$NVLIBS
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
# the tests' interpreter and launcher, as configured on the development machine
find build-gpu -name CTestTestfile.cmake -exec sed -i \
  -e "s#/usr/bin/python3#$PY#g" -e "s#/usr/bin/mpiexec#$TB_BUNDLE/root/usr/bin/mpiexec#g" {} +
TB=$ROOT/build-gpu/trainbench
export TB PY OUT ROOT
say "# trainbench GPU suite, bundle $(cat gpu-bundle/git_revision), checkout $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')"

# ---- stages ------------------------------------------------------------------------------
run_env() {
  local t
  t=$(date +%s)
  nvidia-smi || true
  nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total,clocks.max.sm,pcie.link.gen.current,pcie.link.width.current --format=csv || true
  "$PY" -c 'import torch, torchvision; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "nccl", torch.cuda.nccl.version(), "torchvision", torchvision.__version__)' || true
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd "$TB" | grep -E 'not found|cudnn|cublas|nccl|hdf5|mpi|jpeg|blas' || true
  local miss
  miss=$(ldd "$TB" | grep -c 'not found')
  "$TB" --version
  if [ "$miss" -eq 0 ] && "$TB" --help >/dev/null; then stage_result env ok "$t" "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  else stage_result env FAIL "$t" "$miss libraries not found (see suite.log)"; fi
}

run_probe() {
  local t
  t=$(date +%s)
  if "$TB" probe --expect-gpu --results "$OUT/keep/probe.h5"; then stage_result probe ok "$t"
  else stage_result probe FAIL "$t"; fi
}

run_tests() { # [REGEX] [LABEL]: ctest -R REGEX, or -L LABEL, or every GPU test but the fused stage's
  local t sel=("-L" "gpu" "-LE" "fused") what="-L gpu"
  t=$(date +%s)
  if [ -n "${1:-}" ]; then sel=("-R" "$1"); what="-R $1"; fi
  if [ -n "${2:-}" ]; then sel=("-L" "$2"); what="-L $2"; fi
  # In parallel (16 cores, one GPU with room for several small runs; the two
  # memory-accounting tests are RUN_SERIAL), and ended by the suite's budget:
  # ctest starts nothing after --stop-time and cuts running tests' timeouts
  # to it, so the call returns its logs inside the device's 10 minutes.
  local stop=$(( t + STAGE_LEFT ))
  if [ "$STAGE_LEFT" -lt 30 ]; then stage_result tests FAIL "$t" "only ${STAGE_LEFT} s left for it (suite budget ${BUDGET} s): not started"; return; fi
  ctest --test-dir build-gpu "${sel[@]}" --output-on-failure --timeout 300 -j "$JOBS" \
    --stop-time "$(date -d "@$stop" +%H:%M:%S)" \
    --output-junit "$OUT/keep/ctest-junit.xml" | tee "$OUT/keep/ctest.log"
  # every test's whole output: the junit file and --output-on-failure cut a
  # passed test's output to 1 KiB (the first H200 run lost the `#   path:`,
  # watcher and decoder lines that way); ctest's own log keeps all of it
  # (named per call: a second tests stage in one suite keeps the first's)
  for f in build-gpu/Testing/Temporary/LastTest*.log; do
    [ -f "$f" ] && cp "$f" "$OUT/keep/ctest-full-$(date +%s)-$(basename "$f")"
  done
  local pass fail skip
  pass=$(grep -c ' Passed ' "$OUT/keep/ctest.log")
  # only the progress lines (ctest lists a failed or not-run test again at the end)
  fail=$(grep -E '^ *[0-9]+/[0-9]+ Test' "$OUT/keep/ctest.log" | grep -cE '\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run')
  skip=$(grep -c '\*\*\*Skipped' "$OUT/keep/ctest.log")
  grep -E '^ *[0-9]+/[0-9]+ Test' "$OUT/keep/ctest.log" | sed 's/^ */           /' >>"$SUM"
  # on a machine with a GPU, a GPU test that skips hides a broken set-up
  if [ "$what" = "-L gpu" ] && [ "$skip" -gt 0 ] && nvidia-smi -L >/dev/null 2>&1; then
    stage_result tests FAIL "$t" "ctest $what: $skip GPU test(s) skipped on a machine with a GPU (see ctest.log)"
    return
  fi
  if [ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]; then stage_result tests ok "$t" "ctest $what: $pass passed, $skip skipped"
  else stage_result tests FAIL "$t" "ctest $what: $pass passed, $fail failed, $skip skipped"; fi
}

run_script() { # name script
  local t
  t=$(date +%s)
  if [ ! -f "$2" ]; then stage_result "$1" FAIL "$t" "$2 does not exist yet"; return; fi
  if [ "$STAGE_LEFT" -lt 30 ]; then stage_result "$1" FAIL "$t" "only ${STAGE_LEFT} s left for it (suite budget ${BUDGET} s): not started"; return; fi
  # the stage script takes the smaller of its own budget and this cap
  if TB_STAGE_BUDGET=$STAGE_LEFT bash "$2"; then stage_result "$1" ok "$t"; else stage_result "$1" FAIL "$t" "$2 failed (see suite.log)"; fi
}

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(env probe tests)
for spec in "${stages[@]}"; do
  # STAGE[@SECONDS]: the stage gets at most SECONDS, and never more than what
  # is left of the suite's BUDGET (so several stages fit one device call)
  s=${spec%@*}
  STAGE_LEFT=$(( T0 + BUDGET - $(date +%s) ))
  if [ "$s" != "$spec" ]; then
    cap=${spec##*@}
    case "$cap" in ''|*[!0-9]*) say "bad stage '$spec': STAGE@SECONDS"; continue ;; esac
    [ "$cap" -lt "$STAGE_LEFT" ] && STAGE_LEFT=$cap
  fi
  echo "=================== $s ($(( $(date +%s) - T0 )) s into the suite, at most $STAGE_LEFT s for it)"
  case "$s" in
    env) run_env ;;
    probe) run_probe ;;
    tests) run_tests ;;
    tests:*) run_tests "${s#tests:}" ;;
    fused) run_tests "" fused ;;
    bench) run_script bench bench/gpu_resnet50.sh ;;
    nccl) run_script nccl bench/gpu_nccl.sh ;;
    feed) run_script feed bench/gpu_feed.sh ;;
    *) say "unknown stage '$s' (env probe tests tests:REGEX fused bench nccl feed)" ;;
  esac
done
tar -czf "$OUT/results.tar.gz" -C "$OUT" keep && rm -rf "$OUT/keep"
say "# suite: $(( $(date +%s) - T0 )) s"
echo
cat "$SUM"
! grep -q ' FAIL ' "$SUM"
