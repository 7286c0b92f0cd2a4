#!/bin/sh
# startup_cache.sh TRAINBENCH [MPIEXEC] - the plan cache (--plan-cache) on
# the GPU, ctest startup_plan_cache_gpu: a bench row (ResNet-50 with 1000
# classes, 224 px, bf16 NHWC, batch 256, --fuse graph, the bench's synthetic
# data: a 1 GiB pool made on the host and uploaded) launched twice on a fresh cache
# directory: the first plans everything and writes the cache, the second
# must find every choice there ("0 made", and no rank writes the cache
# files again) and finish its first step in
# under TB_STARTUP_LIMIT_S (5) seconds after start-up began. Then the same
# with 2 ranks sharing the GPU (--share-gpu --comm mpi, half the batch
# each): in the first launch one rank plans and the other waits for the file
# (the cache's "another process is planning" line), and the second launch
# is under the limit too; `trainbench report` of either 2-rank run says
# rank 1 ran every convolution and BatchNorm as rank 0. Each launch's "# start-up:" and "# plan cache:"
# lines are printed, so the log holds both times for results/.
set -u
# Open MPI binds each of 2 ranks to one core by default: both ranks' CUDA
# spin-waits, NCCL's and the loader's threads would share it
OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
export OMPI_MCA_hwloc_base_binding_policy
TB=$1
MPI=${2:-}
LIMIT=${TB_STARTUP_LIMIT_S:-5}
D=$(mktemp -d /tmp/tb_startup.XXXXXX)
trap 'rm -rf "$D"' EXIT
fail=0
ROW="--backend cuda --model resnet50 --image-size 224 --classes 1000 --synthetic --precision bf16 --fuse graph
     --steps 2 --warmup-steps 1 --scaling-steps 0 --cuda-graph off --print-every 1"

# first_step LOG: seconds from start-up to the first step's end, or "" when absent
first_step() { sed -n 's/^# start-up: first step done \([0-9.]*\) s after.*/\1/p' "$1" | head -1; }

# launch NAME LOG CMD...: runs it, prints its start-up and cache lines
launch() {
  name=$1 log=$2
  shift 2
  t0=$(date +%s)
  "$@" >"$log" 2>&1
  rc=$?
  echo "== $name: exit $rc, $(( $(date +%s) - t0 )) s wall"
  grep -E '^# (start-up|plan cache|fuse graph)' "$log" | sed 's/^/   /'
  if [ "$rc" -ne 0 ]; then tail -5 "$log"; fail=1; fi
}

# cache_sum DIR: a checksum of the cache files (not the lock files): any rank that
# planned something again writes them (the "# plan cache:" summary is rank 0's alone)
cache_sum() { find "$1" -type f ! -name '*.lock' | sort | xargs cat 2>/dev/null | cksum; }

# under LOG WHAT SUM: the second launch's first step within the limit, every choice from the
# cache on every rank (no summary line with a choice made, the files' checksum still SUM)
under() {
  s=$(first_step "$1")
  if [ -z "$s" ]; then echo "FAIL: $2: no '# start-up:' line"; fail=1; return; fi
  if awk -v s="$s" -v l="$LIMIT" 'BEGIN{exit !(s < l)}'; then echo "ok: $2 reached its first step in $s s (< $LIMIT s)"
  else echo "FAIL: $2 took $s s to its first step (limit $LIMIT s)"; fail=1; fi
  if ! grep -qE '^# plan cache: [0-9]+ choices found, 0 made' "$1" ||
     grep -qE '^# plan cache: [0-9]+ choices found, [1-9]' "$1"; then
    echo "FAIL: $2 planned something again (the cache should hold every choice)"
    fail=1
  fi
  if [ "$(cache_sum "$4")" != "$3" ]; then
    echo "FAIL: $2 wrote the cache again (a rank planned something it should have found)"
    fail=1
  fi
}

# same_ranks H5 WHAT: `trainbench report` of a 2-rank run says rank 1 ran every
# convolution and BatchNorm as rank 0 did (one cache gave both ranks the same plans)
same_ranks() {
  out=$("$TB" report "$1" 2>&1)
  for t in conv_algorithms batchnorms; do
    if echo "$out" | grep -q "^# /$t: every rank ran the same"; then echo "ok: $2: rank 1 ran the /$t choices of rank 0"
    else
      echo "FAIL: $2: rank 1 ran other /$t choices than rank 0 (or report printed no line):"
      echo "$out" | grep "^# /$t: " | sed 's/^/   /'
      fail=1
    fi
  done
}

# shellcheck disable=SC2086
launch "1 rank, first launch (plans, writes the cache)" "$D/r1a.log" "$TB" $ROW --batch-size 256 --plan-cache "$D/c1" \
  --results "$D/r1a.h5"
sum1=$(cache_sum "$D/c1")
# shellcheck disable=SC2086
launch "1 rank, second launch" "$D/r1b.log" "$TB" $ROW --batch-size 256 --plan-cache "$D/c1" --results "$D/r1b.h5"
echo "first launch: $(first_step "$D/r1a.log") s to the first step"
under "$D/r1b.log" "the second 1-rank launch" "$sum1" "$D/c1"

if [ -n "$MPI" ] && [ -x "$MPI" ]; then
  # shellcheck disable=SC2086
  # --no-autotune: the point here is the lock and the wait, and two cold
  # autotuned launches of their own (the 1-rank pair's are above) could
  # take the test past its 600 s
  launch "2 ranks on the GPU, first launch" "$D/r2a.log" "$MPI" -n 2 "$TB" $ROW --batch-size 128 --share-gpu \
    --no-autotune --comm mpi --plan-cache "$D/c2" --results "$D/r2a.h5"
  if grep -q 'another process is planning into' "$D/r2a.log"; then echo "ok: one rank planned, the other waited for the file"
  else echo "FAIL: no rank waited for the other's plans (the lock's line is missing)"; fail=1; fi
  sum2=$(cache_sum "$D/c2")
  # shellcheck disable=SC2086
  launch "2 ranks on the GPU, second launch" "$D/r2b.log" "$MPI" -n 2 "$TB" $ROW --batch-size 128 --share-gpu \
    --no-autotune --comm mpi --plan-cache "$D/c2" --results "$D/r2b.h5"
  under "$D/r2b.log" "the second 2-rank launch" "$sum2" "$D/c2"
  same_ranks "$D/r2a.h5" "the first 2-rank launch"
  same_ranks "$D/r2b.h5" "the second 2-rank launch"
else
  echo "# no mpiexec in this build: the 2-rank part did not run"
fi
exit $fail
