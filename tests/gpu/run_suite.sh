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
# (ctest prints no line for a test not started by then: run_tests names
# each from `ctest -N` in the summary and counts it as failed).
#
# Stages, in the order given:
#   env     the machine: nvidia-smi, driver, python/torch and the CUDA
#           libraries found under site-packages nvidia/, the bundle's ldd
#   probe   trainbench probe (versions built for vs loaded, copy and GEMM
#           ceilings) -> probe.h5
#   tests   ctest -L gpu -LE 'np2|fused' (every GPU test but the np2 and the
#           fused ones: ops vs the CPU backend, golden steps vs PyTorch, bf16
#           loss falls, fp16 loss scaling, probe_gpu, NCCL and feed tests as
#           they exist); tests:REGEX runs ctest -R REGEX
#   np2     ctest -L np2 -j TB_SUITE_NP2_JOBS (4; each test takes 2 of them):
#           two ranks over NCCL on the one GPU (issue 26; needs the bundle's
#           slim NCCL >= 2.30, else they skip and the stage fails)
#   fused   ctest -L fused: --fuse graph and --plan-cache (issue 30: the
#           fused ops, the fused step, the start-up with the cache; about 8-12
#           minutes, a call of its own)
#   bench   bench/gpu_resnet50.sh: ResNet-50 (1000 classes) img/s and peak
#           memory per precision and layout beside PyTorch on the same GPU,
#           headline rows 3 runs of at least 10 s, and both trained side by
#           side for 200 steps (bench/convergence.py)
#   nccl    bench/gpu_nccl.sh: the one-GPU NCCL checks of issue 14, and
#           issue 26's measurements of 2 ranks over NCCL on the GPU (allreduce
#           tables, the scaling table with the overlap, -np 4, the model check)
#   feed    bench/gpu_feed.sh: the data-loading table of issue 15
#   wheels  the README's GPU command's binary (make_bundle.sh with
#           TB_BUNDLE_WHEELS): its RUNPATH's directories rebuilt from this
#           machine's NVIDIA wheels (plus the carried nvJPEG), then, with no
#           CUDA library on LD_LIBRARY_PATH: ldd, probe, one ResNet-50 bf16
#           training run and the CUDA libraries it mapped
#
# The machine has nvcc, cmake and PyTorch but no MPI, HDF5, libjpeg-turbo or
# OpenBLAS: tests/gpu/make_bundle.sh builds everything on a development
# machine into gpu-bundle.tar.xz (carry it); this script unpacks it, puts
# the GPU machine's own cuDNN, cuBLAS and NCCL (python site-packages nvidia/)
# on LD_LIBRARY_PATH, and makes the build's absolute paths valid here.
#
# $OUT gets at most 8 files back: suite.log (everything), summary.txt (one
# line per stage and test), summary.tsv (every figure of the call, from its
# logs: bench/summary/make_summary.py), results.tar.gz (results files, ctest
# logs, and summary.tsv again under keep/).
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
# What the stages keep goes to $KEEP, outside $OUT, packed into
# $OUT/results.tar.gz after every stage: the device tool brings back at most
# 8 files of $OUT, so a call cut short (its timeout, or the session's device
# time running out) with keep/'s 30-40 files there would have returned 8
# arbitrary ones and no archive. Afresh each call: on 2026-12-04 each call
# came with an earlier session's keep/ of the same call number (probe.txt,
# nccl/, ctest logs), which the summary would have read as this call's.
KEEP=$ROOT/gpu-keep/keep
export TB_KEEP=$KEEP
rm -rf "$OUT/keep" "$KEEP" "$OUT/results.tar.gz"
mkdir -p "$OUT" "$KEEP"
pack() { # keep/ into $OUT/results.tar.gz as it is now (replaced whole, never half-written); the bench's plan
  # cache (serialized cuDNN plans, results/ keeps none) left out, so the archive stays under what comes back
  tar -czf "$OUT/results.tar.gz.tmp" --exclude=keep/resnet50/plans -C "$(dirname "$KEEP")" keep &&
    mv "$OUT/results.tar.gz.tmp" "$OUT/results.tar.gz"
  [ "$(stat -c %s "$OUT/results.tar.gz" 2>/dev/null || echo 0)" -le 15000000 ] ||
    echo "== warning: results.tar.gz is over 15 MB; the device tool may not bring it back"
}
LOG=$OUT/suite.log
SUM=$OUT/summary.txt
: >"$LOG"
: >"$SUM"
exec > >(tee -a "$LOG") 2>&1
T0=$(date +%s)
BUDGET=${TB_SUITE_BUDGET:-540}  # s: every stage ends by T0 + BUDGET (the device allows 600 a call)
JOBS=${TB_SUITE_JOBS:-4}        # ctest -j for the tests stage
NP2_JOBS=${TB_SUITE_NP2_JOBS:-4} # ctest -j for the np2 stage (PROCESSORS 2 each: two tests at a time)
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
# the machine's own library path, before the bundle's: the wheels stage
# keeps its driver directories (libcuda.so.1, libnvidia-ml.so.1)
MACHINE_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
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
# after the bundle's own (a slim NCCL there comes first: bundle_env.sh)
# shellcheck disable=SC1091
. tests/gpu/suite_env.sh
tb_suite_libpath "$NVLIBS"
# the tests' interpreter and launcher, as configured on the development
# machine (quoted whole arguments only: a warm machine's second call must
# not rewrite the bundle's own .../root/usr/bin/mpiexec again)
find build-gpu -name CTestTestfile.cmake -exec sed -i \
  -e "s#\"/usr/bin/python3\"#\"$PY\"#g" -e "s#\"/usr/bin/mpiexec\"#\"$TB_BUNDLE/root/usr/bin/mpiexec\"#g" {} +
TB=$ROOT/build-gpu/trainbench
# No plan cache unless a test names its own (--plan-cache DIR: the fused
# stage's startup_plan_cache_gpu): a cache shared by the whole call would
# make every later test run the plans an earlier one cached, restored
# rather than searched, and the suite's other tests should run what they
# name; TB_PLAN_CACHE set by the caller wins.
TB_PLAN_CACHE=${TB_PLAN_CACHE:-off}
export TB PY OUT ROOT TB_PLAN_CACHE
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
  if [ -f gpu-bundle/nccl/nccl_slim.txt ]; then
    echo "== the bundle's slim NCCL (tests/gpu/slim_nccl.sh), loaded ahead of PyTorch's:"
    cat gpu-bundle/nccl/nccl_slim.txt
  else
    echo "== no slim NCCL in the bundle: the nccl+np2 tests skip (NCCL < 2.30 refuses two ranks on one GPU)"
  fi
  local miss
  miss=$(ldd "$TB" | grep -c 'not found')
  "$TB" --version
  if [ "$miss" -eq 0 ] && "$TB" --help >/dev/null; then stage_result env ok "$t" "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  else stage_result env FAIL "$t" "$miss libraries not found (see suite.log)"; fi
}

run_probe() {
  local t
  t=$(date +%s)
  # its text in keep/ too: the summary reads probe.txt there (bench/summary/probe.py)
  if "$TB" probe --expect-gpu --results "$KEEP/probe.h5" 2>&1 | tee "$KEEP/probe.txt"; [ "${PIPESTATUS[0]}" -eq 0 ]
  then stage_result probe ok "$t"
  else stage_result probe FAIL "$t"; fi
}

run_tests() { # [REGEX | --np2 | --fused]: ctest -R REGEX, the np2 or fused label, or every other GPU test
  local t sel=("-L" "gpu" "-LE" "np2|fused") what="-L gpu -LE np2|fused" jobs=$JOBS name=tests
  t=$(date +%s)
  if [ "${1:-}" = --np2 ]; then sel=("-L" "np2"); what="-L np2"; jobs=$NP2_JOBS; name=np2
  elif [ "${1:-}" = --fused ]; then sel=("-L" "fused"); what="-L fused"; name=fused
  elif [ -n "${1:-}" ]; then sel=("-R" "$1"); what="-R $1"; fi
  # In parallel (16 cores, one GPU with room for several small runs; the two
  # memory-accounting tests are RUN_SERIAL), and ended by the suite's budget:
  # ctest starts nothing after --stop-time and cuts running tests' timeouts
  # to it, so the call returns its logs inside the device's 10 minutes.
  local stop=$(( t + STAGE_LEFT ))
  if [ "$STAGE_LEFT" -lt 30 ]; then stage_result "$name" FAIL "$t" "only ${STAGE_LEFT} s left for it (suite budget ${BUDGET} s): not started"; return; fi
  ctest --test-dir build-gpu "${sel[@]}" --output-on-failure --timeout 300 -j "$jobs" \
    --stop-time "$(date -d "@$stop" +%H:%M:%S)" \
    --output-junit "$KEEP/ctest-junit-$name.xml" | tee "$KEEP/ctest-$name.log"
  cp "$KEEP/ctest-$name.log" "$KEEP/ctest.log"
  # every test's whole output: the junit file and --output-on-failure cut a
  # passed test's output to 1 KiB (the first H200 run lost the `#   path:`,
  # watcher and decoder lines that way); ctest's own log keeps all of it
  # (named per call: a second tests stage in one suite keeps the first's)
  for f in build-gpu/Testing/Temporary/LastTest*.log; do
    [ -f "$f" ] && cp "$f" "$KEEP/ctest-full-$(date +%s)-$(basename "$f")"
  done
  local pass fail skip
  pass=$(grep -c ' Passed ' "$KEEP/ctest.log")
  # only the progress lines (ctest lists a failed or not-run test again at the end)
  fail=$(grep -E '^ *[0-9]+/[0-9]+ Test' "$KEEP/ctest.log" | grep -cE '\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run')
  skip=$(grep -c '\*\*\*Skipped' "$KEEP/ctest.log")
  grep -E '^ *[0-9]+/[0-9]+ Test' "$KEEP/ctest.log" | sed 's/^ */           /' >>"$SUM"
  # a test ctest never started (the stop time came first) prints no line at all: named, counted as failed
  local n never=0
  while read -r n; do
    grep -qE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: $n " "$KEEP/ctest.log" && continue
    echo "           not started before the stage's stop time: $n" >>"$SUM"
    never=$((never + 1))
  done < <(ctest --test-dir build-gpu -N "${sel[@]}" | sed -n 's/^ *Test *#[0-9]*: //p')
  fail=$((fail + never))
  # on a machine with a GPU, a test that skips hides a broken set-up (every test a
  # label or a tests:REGEX stage names here is a GPU test)
  if [ "$skip" -gt 0 ] && nvidia-smi -L >/dev/null 2>&1; then
    stage_result "$name" FAIL "$t" "ctest $what: $skip test(s) skipped on a machine with a GPU (see ctest-$name.log)"
    return
  fi
  if [ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]; then stage_result "$name" ok "$t" "ctest $what: $pass passed, $skip skipped"
  else stage_result "$name" FAIL "$t" "ctest $what: $pass passed, $fail failed, $skip skipped"; fi
}

run_script() { # name script
  local t
  t=$(date +%s)
  if [ ! -f "$2" ]; then stage_result "$1" FAIL "$t" "$2 does not exist yet"; return; fi
  if [ "$STAGE_LEFT" -lt 30 ]; then stage_result "$1" FAIL "$t" "only ${STAGE_LEFT} s left for it (suite budget ${BUDGET} s): not started"; return; fi
  # the stage script takes the smaller of its own budget and this cap
  if TB_STAGE_BUDGET=$STAGE_LEFT bash "$2"; then stage_result "$1" ok "$t"; else stage_result "$1" FAIL "$t" "$2 failed (see suite.log)"; fi
}

# the README's GPU build: CUDA libraries through its RUNPATH only
run_wheels() {
  local t w venv sub view base f pid killer lp miss d dup left bad=0
  t=$(date +%s)
  if [ "$STAGE_LEFT" -lt 60 ]; then stage_result wheels FAIL "$t" "only ${STAGE_LEFT} s left for it: not started"; return; fi
  w=$ROOT/gpu-bundle/wheels
  if [ ! -x "$w/trainbench" ]; then stage_result wheels FAIL "$t" "the bundle has no wheels/ (make_bundle.sh with TB_BUNDLE_WHEELS=DIR)"; return; fi
  venv=$(cat "$w/venv_path"); sub=$(cat "$w/nvidia_subdir"); view=$venv/$sub
  # the layout the binary was linked against, from this machine's wheels
  if [ -e "$venv" ] && [ ! -f "$venv/.tb_view" ]; then
    stage_result wheels FAIL "$t" "$venv exists here and is not a view made by this stage"; return
  fi
  rm -rf "$venv"; mkdir -p "$view/cu13/lib"; touch "$venv/.tb_view"
  base=$("$PY" -c 'import nvidia, os; print(" ".join(os.path.abspath(p) for p in nvidia.__path__))' 2>/dev/null)
  for b in $base; do
    [ -d "$b/cudnn" ] && [ ! -e "$view/cudnn" ] && ln -s "$b/cudnn" "$view/cudnn"
    [ -d "$b/nccl" ] && [ ! -e "$view/nccl" ] && ln -s "$b/nccl" "$view/nccl"
    for f in "$b"/cu13/lib/*; do [ -e "$f" ] && [ ! -e "$view/cu13/lib/$(basename "$f")" ] && ln -s "$f" "$view/cu13/lib/"; done
  done
  # the carried nvJPEG in place of any link (cp would write through a link into the machine's copy)
  rm -f "$view/cu13/lib/libnvjpeg.so.13"
  cp "$w/libnvjpeg.so.13" "$view/cu13/lib/libnvjpeg.so.13"
  # the bundle's MPI, HDF5, JPEG and BLAS libraries, but no CUDA library
  mkdir -p "$ROOT/gpu-bundle/lib-nocuda"
  for f in "$TB_BUNDLE"/lib/*; do
    case "$(basename "$f")" in libnvjpeg*|libcudnn*|libcublas*|libnccl*|libcudart*|libnvrtc*) ;; *) ln -sf "$f" "$ROOT/gpu-bundle/lib-nocuda/" ;; esac
  done
  lp=$ROOT/gpu-bundle/lib-nocuda:$TB_BUNDLE/root/usr/lib/x86_64-linux-gnu/openmpi/lib:$TB_BUNDLE/root/usr/lib/x86_64-linux-gnu/pmix2/lib
  # the driver where the machine's path has it (not in ld.so.cache on every machine)
  while IFS= read -r d; do
    if [ -n "$d" ] && { [ -e "$d/libcuda.so.1" ] || [ -e "$d/libnvidia-ml.so.1" ]; }; then lp=$lp:$d; fi
  done <<< "$(printf '%s' "$MACHINE_LD_LIBRARY_PATH" | tr ':' '\n')"
  echo "driver libraries: $(ldconfig -p 2>/dev/null | grep -oE '(libcuda|libnvidia-ml)\.so\.1 .*=> \S+' | tr '\n' ';') path: $lp"
  echo "RUNPATH: $(readelf -d "$w/trainbench" | grep -E 'RUNPATH|RPATH' | grep -oE '\[.*\]')"
  LD_LIBRARY_PATH=$lp ldd "$w/trainbench" | tee "$KEEP/wheels_ldd.txt" | grep -E 'cudnn|nccl|cublas|nvjpeg|not found'
  # cuBLAS is not linked but opened when the CUDA backend starts (core/cublas_lib.h): probe says the file
  for l in libcudnn.so.9 libnccl.so.2 libnvjpeg.so.13; do
    f=$(awk -v l="$l" '$1 == l {print $3}' "$KEEP/wheels_ldd.txt")
    case "$f" in "$view"/*) echo "ok   $l => $f" ;; *) echo "FAIL $l => ${f:-not found}"; bad=1 ;; esac
  done
  miss=$(grep -c 'not found' "$KEEP/wheels_ldd.txt")
  rc=0
  LD_LIBRARY_PATH=$lp timeout $(( STAGE_LEFT / 3 )) "$w/trainbench" probe --expect-gpu \
    --results "$KEEP/probe_wheels.h5" >"$KEEP/probe_wheels.log" 2>&1 || rc=$?
  cat "$KEEP/probe_wheels.log"
  if [ "$rc" != 0 ]; then
    stage_result wheels FAIL "$t" "probe --expect-gpu failed: no usable GPU for the wheels build (see suite.log)"; return
  fi
  f=$(sed -n 's/^# cuBLASLt library  *//p' "$KEEP/probe_wheels.log")
  case "$f" in "$view"/*) echo "ok   libcublasLt.so.13 => $f (opened at run time)" ;;
    *) echo "FAIL libcublasLt.so.13 => ${f:-not loaded}"; bad=1 ;; esac
  # one training run; while it trains, the CUDA libraries the process has
  # mapped (trainbench itself is $pid: under timeout, $! would be timeout's
  # pid and its maps hold no CUDA library; a killer of its own bounds it)
  LD_LIBRARY_PATH=$lp "$w/trainbench" --model resnet50 --batch-size 128 --image-size 224 --steps 40 --warmup-steps 5 \
    --scaling-steps 10 --results "$KEEP/train_wheels.h5" >"$KEEP/train_wheels.log" 2>&1 &
  pid=$!
  left=$(( STAGE_LEFT - ($(date +%s) - t) - 10 )); [ "$left" -lt 30 ] && left=30
  ( sleep "$left"; kill "$pid" 2>/dev/null ) &
  killer=$!
  for _ in $(seq 240); do grep -q '^step ' "$KEEP/train_wheels.log" 2>/dev/null && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  grep -oE '/[^ ]*lib(cudnn[a-z_]*|nccl|cublas|cublasLt|nvjpeg|nvrtc|cuda)\.so[.0-9]*' "/proc/$pid/maps" 2>/dev/null | sort -u | sed 's/^/mapped: /' | tee "$KEEP/wheels_maps.txt"
  wait "$pid" || bad=1
  kill "$killer" 2>/dev/null
  cat "$KEEP/train_wheels.log"
  # one file per library (by the name up to .so: libcublas.so.13 and a
  # system libcublas.so.13.1.0.3 are the same library twice), and the
  # driver's own libcuda (not a stub)
  dup=$(sed 's/^mapped: //' "$KEEP/wheels_maps.txt" | while read -r f; do b=$(basename "$f"); echo "${b%%.so*} $(readlink -f "$f")"; done |
        sort -u | awk '{n[$1]++} END {for (k in n) if (n[k] > 1) printf "%s ", k}')
  if [ -n "$dup" ]; then echo "FAIL loaded from two files each: $dup"; bad=1; fi
  if ! grep -qE '/libcuda\.so' "$KEEP/wheels_maps.txt" || grep -qE 'stubs/libcuda' "$KEEP/wheels_maps.txt"; then
    echo "FAIL libcuda: not the driver's ($(grep libcuda "$KEEP/wheels_maps.txt" || echo 'not mapped'))"; bad=1
  fi
  if [ "$bad" = 0 ] && [ "$miss" = 0 ] && grep -q '^# scaling, every row' "$KEEP/train_wheels.log"; then
    stage_result wheels ok "$t" "CUDA libraries through the RUNPATH only; probe and training ran"
  else stage_result wheels FAIL "$t" "see suite.log (ldd, probe, train_wheels.log)"; fi
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
    case "$cap" in ''|*[!0-9]*) stage_result "$s" FAIL "$(date +%s)" "bad stage '$spec': STAGE@SECONDS"; continue ;; esac
    [ "$cap" -lt "$STAGE_LEFT" ] && STAGE_LEFT=$cap
  fi
  echo "=================== $s ($(( $(date +%s) - T0 )) s into the suite, at most $STAGE_LEFT s for it)"
  case "$s" in
    env) run_env ;;
    probe) run_probe ;;
    tests) run_tests ;;
    tests:*) run_tests "${s#tests:}" ;;
    np2) run_tests --np2 ;;
    fused) run_tests --fused ;;
    bench) run_script bench bench/gpu_resnet50.sh ;;
    nccl) run_script nccl bench/gpu_nccl.sh ;;
    feed) run_script feed bench/gpu_feed.sh ;;
    wheels) run_wheels ;;
    *) stage_result "$s" FAIL "$(date +%s)" "unknown stage '$s' (env probe tests tests:REGEX np2 fused bench nccl feed wheels)" ;;
  esac
  pack
done
# one summary of the call, from its logs (bench/summary/make_summary.py: key, value, unit, source log);
# results pages quote figures from it (bench/summary/check_pages.py checks them)
if "$PY" bench/summary/make_summary.py "$KEEP"; then cp "$KEEP/summary.tsv" "$OUT/summary.tsv"
else say "summary    FAIL     bench/summary/make_summary.py failed on the logs (see suite.log)"; fi
pack
say "# suite: $(( $(date +%s) - T0 )) s"
echo
cat "$SUM"
! grep -q ' FAIL ' "$SUM"
