#!/bin/sh
# ckpt_fsync_fails.sh TRAINBENCH LIBFAILFSYNC: a checkpoint whose data does
# not reach the disk (fsync fails with EIO, as a write-back error shows on
# NFS or Lustre; tests/fail_fsync.c preloaded) must not replace the last
# good one. Checkpoints every 2 steps, the second one's fsync fails: the run
# stops with one line naming the file and the fsync, exit 1, the step-2
# checkpoint stays (its step attribute, read with h5dump), no temporary is
# left, and the results file is marked aborted. Planted error: without the
# check the step-4 file replaced it and the run went on (exit 0).
tb=$1
lib=$2
command -v h5dump >/dev/null || { echo "SKIP: no h5dump (hdf5-tools)"; exit 77; }
dir=$(mktemp -d "$(pwd)/tb_fsync.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
attr() { h5dump -a "$2" "$1" 2>/dev/null | sed -n 's/^ *(0): *//p' | tr -d '"' | head -n 1; }
# an AddressSanitizer build must let the library come first
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" LD_PRELOAD="$lib" \
  TB_FAIL_FSYNC_MATCH=run.ckpt.tmp. TB_FAIL_FSYNC_FROM=2 \
  "$tb" train --steps 8 --image-size 32 --batch-size 4 --threads 1 --scaling-steps 0 --ckpt "$dir/run.ckpt" \
  --ckpt-every 2 --results "$dir/run.h5" >"$dir/out.txt" 2>&1
rc=$?
grep -v '^step' "$dir/out.txt" | tail -n 5
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
want="error: cannot write checkpoint '$dir/run.ckpt': its data did not reach the disk (fsync: Input/output error)"
n=$(grep -cF "$want; the earlier file is kept" "$dir/out.txt")
[ "$n" -eq 1 ] || fail "$n lines name the checkpoint and the fsync, expected 1"
[ "$(attr "$dir/run.ckpt" step)" = 2 ] || fail "the checkpoint is not the step-2 one: step $(attr "$dir/run.ckpt" step)"
left=$(find "$dir" -name '*.tmp.*')
[ -z "$left" ] || fail "a temporary file was left: $left"
st=$(attr "$dir/run.h5" status)
[ "$st" = aborted ] || fail "the results file is not marked aborted: $st"
echo "ok: the step-2 checkpoint kept, one line, exit 1"
