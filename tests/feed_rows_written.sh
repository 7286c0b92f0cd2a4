#!/bin/sh
# feed_rows_written.sh TRAINBENCH PYTHON: loader-bench --feed writes its
# results file after every row, so a row that ends the process (a GPU stage
# that fails, a decoder refused) leaves the rows before it on disk: a run of
# 4 rows (each at least 1 s) is killed with SIGKILL once it has printed 2,
# and its file must hold 1 or 2 rows with status "aborted"; the same run to
# the end holds 4 with status "complete". PYTHON needs h5py (exit 77
# without). About 12 s.
set -u
tb=$1
py=$2
"$py" -c 'import h5py' 2>/dev/null || { echo "SKIP: $py has no h5py"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$tb" mkdata --out "$d/set" --classes 4 --per-class 12 --min-side 64 --max-side 96 >/dev/null || exit 1
feed() { # OUT.h5: 4 rows of at least 1 s each (exec: a background call's pid is trainbench's)
  exec "$tb" loader-bench --feed --backend cpu --data "$d/set" --model resnet18 --image-size 32 --batch-size 8 \
    --rows 2:2:off,2:2:off,2:2:off,2:2:off --steps 1 --warmup 1 --compute-threads 1 --min-row-seconds 1 \
    --results "$1"
}
# rows printed so far: 0 also before the background run has created its
# output file (grep -c prints nothing for a missing file)
rows_printed() {
  n=$(grep -cE '^ +[0-9]+ +2 +(on|off) ' "$d/killed.txt" 2>/dev/null)
  echo "${n:-0}"
}
feed "$d/killed.h5" >"$d/killed.txt" 2>&1 &
pid=$!
i=0
while [ "$(rows_printed)" -lt 2 ] && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
printed=$(rows_printed)
(feed "$d/full.h5") >"$d/full.txt" 2>&1 || { echo "FAIL: the full run exited non-zero"; cat "$d/full.txt"; exit 1; }
"$py" - "$d/killed.h5" "$d/full.h5" "$printed" <<'PY'
import os
import sys
import h5py
killed, full, printed = sys.argv[1], sys.argv[2], int(sys.argv[3])
if not os.path.exists(killed):
    print(f"FAIL: the run killed after {printed} rows printed left no results file")
    sys.exit(1)
bad = 0
def read(path):
    with h5py.File(path, "r") as f:
        st = f.attrs["status"]
        st = st.decode() if isinstance(st, bytes) else str(st)
        return st, int(f.attrs["rows_measured"]), int(f.attrs["rows_asked"]), len(f["feed"]["img_per_s"])
st, done, asked, n = read(killed)
print(f"killed after {printed} rows printed: status {st}, {done} of {asked} rows measured, {n} in the table")
if printed != 2 or st != "aborted" or asked != 4 or n != done or not 1 <= n <= 2:
    print("FAIL: the killed run's file does not hold the rows it measured (1 or 2 of 4, status aborted)")
    bad = 1
st, done, asked, n = read(full)
print(f"full run: status {st}, {done} of {asked} rows measured, {n} in the table")
if st != "complete" or done != 4 or asked != 4 or n != 4:
    print("FAIL: the full run's file is not complete with 4 rows")
    bad = 1
sys.exit(bad)
PY
rc=$?
[ $rc -eq 0 ] && echo "ok: the rows measured before a kill are on disk; the full run is complete"
exit $rc
