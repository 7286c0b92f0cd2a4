#!/bin/sh
# broadcast_buffers.sh TRAINBENCH PYTHON MPIEXEC LIBCOUNTBCAST: --broadcast-
# buffers off drops the BatchNorm statistics broadcast before every forward
# and changes nothing else. Two 2-rank runs of 5 steps, on and off, with
# count_bcast.c preloaded (it counts each rank's MPI_Bcast bytes):
#   - the bytes broadcast differ by exactly 5 x the BN statistics' bytes
#     (running_mean + running_var of the checkpoint, float32), on each rank;
#   - the two checkpoints are bitwise equal (training never reads the
#     statistics, and rank 0's own are the same either way);
#   - the results files record broadcast_buffers 1 and 0, the start-up line
#     says so, and `trainbench project` of the off run says "not broadcast".
# Planted errors: the step's broadcast left in with off gives a difference
# of 0 bytes; skipped with on as well, the same.
tb=$1
py=$2
mpiexec=$3
lib=$4
"$py" -c 'import h5py, numpy' 2>/dev/null || { echo "SKIP: $py has no h5py"; exit 77; }
dir=$(mktemp -d "$(pwd)/tb_bcastbuf.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
steps=5
for m in on off; do
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    "$mpiexec" -n 2 -x ASAN_OPTIONS -x LD_PRELOAD="$lib" "$tb" train --model resnet18 --image-size 32 \
    --batch-size 4 --classes 10 --synthetic --threads 1 --steps $steps --scaling-steps 0 --broadcast-buffers $m \
    --results "$dir/r_$m.h5" --ckpt "$dir/ck_$m.h5" >"$dir/out_$m.txt" 2>&1 ||
    { tail -n 5 "$dir/out_$m.txt"; fail "the run with --broadcast-buffers $m failed"; }
done
grep -q 'overlap on, BN statistics not broadcast per step;' "$dir/out_off.txt" || fail "no start-up line says off"
if grep -q 'not broadcast per step' "$dir/out_on.txt"; then fail "the run with on says off"; fi
"$py" - "$dir" "$steps" <<'PY' || exit 1
import re, sys
import h5py, numpy as np
d, steps = sys.argv[1], int(sys.argv[2])
def counts(m):
    got = {}
    for line in open(f"{d}/out_{m}.txt"):
        x = re.match(r"count_bcast: rank (\d+) calls (\d+) bytes (\d+)", line)
        if x:
            got[int(x.group(1))] = int(x.group(3))
    if sorted(got) != [0, 1]:
        sys.exit(f"FAIL: count_bcast lines for ranks {sorted(got)} with {m}, expected 0 and 1")
    return got
on, off = counts("on"), counts("off")
with h5py.File(f"{d}/ck_on.h5", "r") as a, h5py.File(f"{d}/ck_off.h5", "r") as b:
    names = []
    a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
    other = []
    b.visit(lambda n: other.append(n) if isinstance(b[n], h5py.Dataset) else None)
    if sorted(names) != sorted(other):
        sys.exit("FAIL: the checkpoints hold different datasets")
    differ = [n for n in names if not np.array_equal(a[n][()], b[n][()])]
    if differ:
        sys.exit(f"FAIL: the checkpoints differ in {len(differ)} datasets, first {differ[0]}")
    state = sum(a[n].size * 4 for n in names if n.endswith("running_mean") or n.endswith("running_var"))
if state == 0:
    sys.exit("FAIL: no BatchNorm statistics in the checkpoint")
for r in (0, 1):
    if on[r] - off[r] != steps * state:
        sys.exit(f"FAIL: rank {r} broadcast {on[r] - off[r]} bytes more with on, expected {steps} x {state}")
for m, want in (("on", 1), ("off", 0)):
    with h5py.File(f"{d}/r_{m}.h5", "r") as f:
        if int(f.attrs["broadcast_buffers"]) != want:
            sys.exit(f"FAIL: the {m} run records broadcast_buffers {f.attrs['broadcast_buffers']}")
print(f"ok: {steps} x {state} bytes fewer broadcast with off on each rank; {len(names)} checkpoint datasets equal")
PY
# project reads the setting from a results file (a 1-rank run: the projection starts from one rank's step)
for m in on off; do
  "$tb" train --model resnet18 --image-size 32 --batch-size 4 --classes 10 --synthetic --threads 1 \
    --steps 4 --warmup-steps 1 \
    --scaling-steps 0 --broadcast-buffers $m --results "$dir/one_$m.h5" >"$dir/one_$m.txt" 2>&1 ||
    { tail -n 5 "$dir/one_$m.txt"; fail "the 1-rank run with --broadcast-buffers $m failed"; }
  "$tb" project "$dir/one_$m.h5" --fabric nvlink4-h100 --ranks 1,8 >"$dir/proj_$m.txt" 2>&1 ||
    { tail -n 5 "$dir/proj_$m.txt"; fail "project of the $m run failed"; }
done
grep -q 'not broadcast (--broadcast-buffers off)' "$dir/proj_off.txt" ||
  { sed -n 5p "$dir/proj_off.txt"; fail "project does not read --broadcast-buffers off from the results file"; }
grep -q 'kB broadcast per step' "$dir/proj_on.txt" || { sed -n 5p "$dir/proj_on.txt"; fail "project of the on run"; }
echo "ok: the start-up line, the results attribute and project say off"
