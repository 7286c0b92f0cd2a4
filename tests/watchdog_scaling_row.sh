#!/bin/sh
# watchdog_scaling_row.sh TRAINBENCH MPIEXEC [PYTHON]: the steps of a scaling
# row count from 0 again, so a watchdog line must say which row a step
# belongs to. Rank 1 stops answering (TB_TEST_FAULT=freeze:1:4) in the
# 2-rank scaling row, after 2 training steps (which never reach step 4):
# rank 0's line and the results file's abort reason name "step N of
# scaling row 2 of 2 (2 ranks)", and the job exits non-zero. PYTHON
# (optional) needs h5py.
set -u
tb=$1
mpi=$2
py=${3:-}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
TB_TEST_FAULT=freeze:1:4 timeout 90 "$mpi" -np 2 "$tb" --synthetic --image-size 32 --batch-size 4 --threads 1 \
  --steps 2 --scaling-warmup 1 --scaling-steps 6 --timeout 3 --results "$d/run.h5" >"$d/out" 2>"$d/err"
rc=$?
grep '^trainbench' "$d/err" || { echo "no trainbench line; the job's last lines:"; tail -n 15 "$d/err" "$d/out"; }
[ $rc -ne 0 ] || fail "exit 0"
case $rc in 124 | 137) fail "the job hung until the test's own timeout killed it (exit $rc)" ;; esac
row='step [0-9][0-9]* of scaling row 2 of 2 (2 ranks)'
grep -q "^trainbench\[rank 0 [^]]*\]: error: watchdog: rank 1 ([^)]*) .*$row" "$d/err" ||
  fail "rank 0's watchdog line does not name rank 1 and '$row'"
if [ -n "$py" ] && "$py" -c 'import h5py' 2>/dev/null; then
  why=$("$py" -c 'import sys, h5py; f = h5py.File(sys.argv[1], "r"); print(f.attrs["status"], f.attrs.get("abort_reason", ""))' \
    "$d/run.h5" 2>&1)
  echo "results: $why"
  printf '%s\n' "$why" | grep -q "^aborted .*$row" || fail "the results file's reason does not name the row"
fi
[ "$fails" -eq 0 ] || exit 1
echo "ok: the watchdog names the scaling row of the step"
