#!/bin/sh
# host_memory_check.sh TRAINBENCH MPIEXEC [PYTHON]: a batch whose first step
# cannot fit in the host's memory is refused at start-up with one line,
# where the kernel's OOM killer used to end the process in the first step
# without a word (src/device/host_memory.h). The host's available memory is
# made small with TB_TEST_FAULT=host-mem:RANK:MIB (no real host is filled).
# The runs are on the CPU backend (--backend cpu): its arenas are host
# memory, and the training ring is not pinned.
#
#   1 rank   the line names the host, the model, the batch and what is
#            available, and a batch that fits; exit 1; the earlier results
#            file is left as it was and no temporary is left; the batch it
#            names then passes the check and trains
#   2 ranks  only rank 1's host short: both ranks end with rank 1's line,
#            which counts the 2 ranks on that host
#   step     (with PYTHON, for its batch file) the same check, its own line,
#            no output file
#   loader   loader-bench: the loader's batch slots (written later by its
#            threads) checked the same way, its own line
#   2 ranks reading files: the loader's ring (malloc'd, filled once the
#            epoch starts) counted with the arenas: a ring and arenas that
#            each fit, but not together on 2 ranks, end both ranks with the
#            line, which names --prefetch; a lower --prefetch trains
#   --val    its loader's ring (made at each evaluation, beside the
#            training ring) counted too: refused with --val, trains without
# shellcheck disable=SC2086  # $ROW, $ROWFIT and $DR are lists of flags
tb=$1
mpiexec=$2
py=${3:-}
dir=$(mktemp -d "${TMPDIR:-/tmp}/tb_hostmem.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
no() { echo "FAIL: $*"; fail=1; }
ROW="--model resnet18 --image-size 32 --batch-size 16 --steps 2 --synthetic --scaling-steps 0 --threads 1 --backend cpu"

# an earlier run's results file, which a refused run must not touch
"$tb" $ROW --results "$dir/r.h5" >"$dir/first.log" 2>&1 || no "the plain run failed: $(tail -n 2 "$dir/first.log")"
cp "$dir/r.h5" "$dir/r_before.h5"

# ---- 1 rank, 5 MiB available --------------------------------------------------
TB_TEST_FAULT=host-mem:-1:5 "$tb" $ROW --results "$dir/r.h5" >"$dir/a.log" 2>&1
rc=$?
grep -E "error" "$dir/a.log" | head -n 3
[ "$rc" -eq 1 ] || no "1 rank: exit $rc, expected 1"
re="^trainbench: error: train: host [^ ]+: batch 16 per rank of resnet18 at 32 px needs [0-9.]+ MiB more host memory for its first step but 5.0 MiB is available \(TB_TEST_FAULT host-mem\); use --batch-size [0-9]+ or less$"
grep -Eq "$re" "$dir/a.log" || no "1 rank: no line matching /$re/"
[ "$(grep -c "error" "$dir/a.log")" -eq 1 ] || no "1 rank: more than one error line"
grep -q "^step " "$dir/a.log" && no "1 rank: a step ran before the refusal"
cmp -s "$dir/r.h5" "$dir/r_before.h5" || no "1 rank: the earlier results file changed"
[ -n "$(find "$dir" -name '*tmp*')" ] && no "1 rank: a temporary was left: $(ls "$dir")"
fit=$(sed -n 's/.*use --batch-size \([0-9]*\) or less$/\1/p' "$dir/a.log")
if [ -n "$fit" ] && [ "$fit" -ge 1 ] && [ "$fit" -lt 16 ]; then
  ROWFIT=$(printf '%s\n' "$ROW" | sed "s/--batch-size 16/--batch-size $fit/")
  TB_TEST_FAULT=host-mem:-1:5 "$tb" $ROWFIT --results "" >"$dir/b.log" 2>&1 ||
    no "1 rank: the batch the line names ($fit) did not train: $(grep error "$dir/b.log")"
else
  no "1 rank: the batch that fits ('$fit') is not between 1 and 15"
fi

# ---- 2 ranks, rank 1's host short --------------------------------------------
sh "$(dirname "$0")/expect_all_ranks.sh" 2 \
  "host [^ ]+: batch 16 per rank of resnet18 at 32 px needs [0-9.]+ MiB more host memory for its first step each, [0-9.]+ MiB for the 2 ranks on this host, but 5.0 MiB is available \(TB_TEST_FAULT host-mem\); use --batch-size [0-9]+ or less, or fewer ranks on that host$" \
  env TB_TEST_FAULT=host-mem:1:5 "$mpiexec" -n 2 "$tb" $ROW --results "$dir/r2.h5" || no "2 ranks"
[ -e "$dir/r2.h5" ] && no "2 ranks: a results file was written"

# ---- step ----------------------------------------------------------------------
if [ -n "$py" ]; then
  "$tb" --model resnet18 --image-size 32 --classes 10 --batch-size 4 --steps 1 --synthetic --scaling-steps 0 \
    --threads 1 --ckpt "$dir/c.h5" --results "" >"$dir/c.log" 2>&1 || no "the checkpoint run failed"
  "$py" -c "import h5py, numpy as np, sys
with h5py.File(sys.argv[1], 'w') as f:
    f['images'] = np.zeros((4, 3, 32, 32), np.float32)
    f['labels'] = np.arange(4, dtype=np.int64)" "$dir/b.h5" || no "the batch file could not be made"
  "$tb" step --ckpt "$dir/c.h5" --batch "$dir/b.h5" --out "$dir/o.h5" >"$dir/s0.log" 2>&1 ||
    no "step: the plain step failed: $(grep error "$dir/s0.log")"
  rm -f "$dir/o.h5"
  TB_TEST_FAULT=host-mem:-1:1 "$tb" step --ckpt "$dir/c.h5" --batch "$dir/b.h5" --out "$dir/o.h5" >"$dir/s.log" 2>&1
  rc=$?
  grep error "$dir/s.log"
  [ "$rc" -ne 0 ] || no "step: exit 0 with 1 MiB available"
  grep -Eq "^trainbench: error: batch file '.*b.h5': the step on a batch of 4 at 32x32 needs [0-9.]+ MiB more host memory for its first step but 1.0 MiB is available \(TB_TEST_FAULT host-mem\); use a smaller batch$" "$dir/s.log" ||
    no "step: no line naming the batch file and the memory"
  [ -e "$dir/o.h5" ] && no "step: an output file was written"
else
  echo "SKIP (step case): no python3 with h5py given"
fi

# ---- the loader's batch slots --------------------------------------------------
"$tb" mkdata --out "$dir/ds" --classes 2 --per-class 8 --seed 4 --min-side 40 --max-side 48 >/dev/null ||
  no "mkdata failed"
LB="loader-bench --data $dir/ds --image-size 64 --threads 1"
TB_TEST_FAULT=host-mem:-1:1 "$tb" $LB --batch-size 64 >"$dir/l.log" 2>&1
rc=$?
grep error "$dir/l.log"
[ "$rc" -eq 1 ] || no "loader: exit $rc, expected 1"
grep -Eq "^trainbench: error: loader-bench: loader: a ring of [0-9]+ batch slots of 64 samples at 64x64 needs [0-9.]+ MiB more host memory but 1.0 MiB is available \(TB_TEST_FAULT host-mem\); lower --prefetch or --batch-size$" "$dir/l.log" ||
  no "loader: no line naming the slots and the memory"
"$tb" $LB --batch-size 64 >"$dir/l0.log" 2>&1 || no "loader: the same row failed without the fault: $(grep error "$dir/l0.log")"

# ---- 2 ranks reading files: the loader's ring counted with the arenas -------
# ring 12 MiB (64 slots of 16 samples at 32x32), arenas ~9 MiB: each fits in
# 30 MiB alone, and the loader's own check (its process, its ring) passes,
# but 2 ranks x both do not: the ring filled by the loader's threads once
# the epoch started, past the check, where the OOM killer was next
DR="--model resnet18 --image-size 32 --batch-size 16 --steps 2 --data $dir/ds --prefetch 64 --scaling-steps 0 \
--threads 1 --loader-threads 1 --last-batch pad --backend cpu"
sh "$(dirname "$0")/expect_all_ranks.sh" 2 \
  "host [^ ]+: batch 16 per rank of resnet18 at 32 px needs [0-9.]+ MiB more host memory for its first step each, [0-9.]+ MiB for the 2 ranks on this host, but 30.0 MiB is available \(TB_TEST_FAULT host-mem\); use --batch-size [0-9]+ or less, or a lower --prefetch \(the loader's ring of batches is a quarter or more of it\), or fewer ranks on that host$" \
  env TB_TEST_FAULT=host-mem:-1:30 "$mpiexec" -n 2 "$tb" $DR --results "$dir/r3.h5" || no "2 ranks, loader"
[ -e "$dir/r3.h5" ] && no "2 ranks, loader: a results file was written"
TB_TEST_FAULT=host-mem:-1:30 "$mpiexec" -n 2 "$tb" $DR --prefetch 8 --results "" >"$dir/d.log" 2>&1 ||
  no "2 ranks, loader: --prefetch 8 did not train: $(grep error "$dir/d.log")"

# ---- --val's ring counted too ---------------------------------------------
# --val's loader makes its own ring (float32 on the host) at each evaluation,
# while the training ring and the arenas stand: at --prefetch 22 (4.1 MiB a
# ring) 2 ranks need ~26 MiB without --val, which trains, and ~34 with it,
# which is refused (it passed the check and met each loader's own, per
# process, at the first evaluation)
sh "$(dirname "$0")/expect_all_ranks.sh" 2 \
  "host [^ ]+: batch 16 per rank of resnet18 at 32 px needs [0-9.]+ MiB more host memory for its first step and --val's evaluation each, [0-9.]+ MiB for the 2 ranks on this host, but 30.0 MiB is available \(TB_TEST_FAULT host-mem\); use --batch-size [0-9]+ or less, or a lower --prefetch \(the loaders' rings of batches, training's and --val's, are a quarter or more of it\), or fewer ranks on that host$" \
  env TB_TEST_FAULT=host-mem:-1:30 "$mpiexec" -n 2 "$tb" $DR --prefetch 22 --val "$dir/ds" --results "$dir/r4.h5" ||
  no "2 ranks, --val"
[ -e "$dir/r4.h5" ] && no "2 ranks, --val: a results file was written"
TB_TEST_FAULT=host-mem:-1:30 "$mpiexec" -n 2 "$tb" $DR --prefetch 22 --results "" >"$dir/e.log" 2>&1 ||
  no "2 ranks, without --val: --prefetch 22 did not train: $(grep error "$dir/e.log")"

[ "$fail" -eq 0 ] && echo "ok: refused with one line on 1 and 2 ranks, in step and in the loader, --val's ring counted; the named batch trains"
exit "$fail"
