#!/bin/sh
# output_guard.sh TRAINBENCH PYTHON: an output flag never destroys a file it
# was not meant to replace. Each case is refused before any work with one
# line naming the flag and the file, exit 1, and the file is left byte for
# byte as it was (each had been replaced without a word):
#   results-on-ckpt   --results naming a checkpoint
#   save-on-results   --save naming a results file
#   trace-on-ckpt     --trace naming a checkpoint
#   ckpt-on-results   --ckpt naming a results file: "holds a trainbench
#                     results file" (it said "already holds a checkpoint
#                     (step -1); add --resume", and --resume then failed)
#   fifo              --results naming a FIFO (the write's rename would put a
#                     file in its place; a device such as /dev/null alike)
#   step-out-ckpt     step --out naming its --ckpt input (the checkpoint was
#                     replaced by the step's, and a --resume went on from it)
#   step-out-batch    step --out naming its --batch input
#   loader-bench-on-list, project-on-profile, train-on-list  loader-bench
#                     --results naming its --data list file, project --out
#                     its --profile (its RUN.h5 it may: the projection is
#                     added to the run's file), train --trace its --data list
#   save-on-batch, trace-on-batch, results-on-text  --save and --trace
#                     naming a batch file, --results a text file: any file
#                     that is not of the output's own kind
#   timeline-*        loader-bench --timeline naming a results file, its
#                     --data list, its own --results, a missing directory,
#                     and --feed's per-row files: refused before the rows
#                     run (the timeline was written after them, over
#                     whatever was there, or failed and lost the rows)
# And what is replaced by design still is: --results over another run's
# results file, step --out over an earlier step's output, --trace over an
# earlier trace, --results over an empty file.
# PYTHON needs h5py and numpy (exit 77 without).
# shellcheck disable=SC2086  # $R is a list of flags
set -u
tb=$1
py=$2
"$py" -c 'import h5py, numpy' 2>/dev/null || { echo "SKIP: $py has no h5py or numpy"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
# shellcheck disable=SC1091 # fail and refused: tests/one_line_checks.sh
. "$(dirname "$0")/one_line_checks.sh"
R="--model resnet18 --image-size 32 --classes 10 --batch-size 4 --scaling-steps 0 --threads 1 --backend cpu"
"$tb" $R --steps 2 --ckpt "$d/ck.h5" --results "$d/res.h5" >"$d/first.log" 2>&1 ||
  { echo "FAIL: the first run: $(tail -n 2 "$d/first.log")"; exit 1; }
"$py" -c "import h5py, numpy as np, sys
with h5py.File(sys.argv[1], 'w') as f:
    f['images'] = np.zeros((4, 3, 32, 32), np.float32)
    f['labels'] = np.arange(4, dtype=np.int64)" "$d/b.h5" || { echo "FAIL: the batch file"; exit 1; }
mkfifo "$d/ff.h5"
echo "notes, not HDF5" >"$d/t.h5"
for f in ck res b t; do cp "$d/$f.h5" "$d/$f.keep"; done

# after a refusal (refused, tests/one_line_checks.sh): every input as it was
# shellcheck disable=SC2317 # called by refused
after_refused() {
  for f in ck res b t; do cmp -s "$d/$f.h5" "$d/$f.keep" || fail "$1: $f.h5 was changed"; done
  [ -p "$d/ff.h5" ] || fail "$1: the FIFO was replaced"
}
refused results-on-ckpt "--results '$d/ck.h5' holds a trainbench checkpoint (step 2)" -- \
  "$tb" $R --steps 1 --results "$d/ck.h5"
refused save-on-results "--save '$d/res.h5' holds a trainbench results file" -- \
  "$tb" $R --steps 1 --save "$d/res.h5" --results ""
refused trace-on-ckpt "--trace '$d/ck.h5' holds a trainbench checkpoint" -- \
  "$tb" $R --steps 1 --trace "$d/ck.h5" --results ""
refused ckpt-on-results "--ckpt '$d/res.h5' holds a trainbench results file" -- \
  "$tb" $R --steps 1 --ckpt "$d/res.h5" --results ""
refused fifo "--results '$d/ff.h5' is not a regular file (a FIFO)" -- \
  "$tb" $R --steps 1 --results "$d/ff.h5"
refused save-on-batch "--save '$d/b.h5' holds a trainbench batch file, not a trainbench checkpoint" -- \
  "$tb" $R --steps 1 --save "$d/b.h5" --results ""
refused trace-on-batch "--trace '$d/b.h5' holds a trainbench batch file" -- \
  "$tb" $R --steps 1 --trace "$d/b.h5" --results ""
refused results-on-text "--results '$d/t.h5' holds another file (not HDF5, not a trainbench trace)" -- \
  "$tb" $R --steps 1 --results "$d/t.h5"
refused step-out-ckpt "--out '$d/ck.h5' is the --ckpt input" -- \
  "$tb" step --ckpt "$d/ck.h5" --batch "$d/b.h5" --out "$d/ck.h5"
refused step-out-batch "--out '$d/./b.h5' is the --batch input" -- \
  "$tb" step --ckpt "$d/ck.h5" --batch "$d/b.h5" --out "$d/./b.h5"

# loader-bench's --data list file, project's RUN.h5 and --profile
"$tb" mkdata --out "$d/set" --classes 1 --per-class 2 --min-side 40 --max-side 48 >/dev/null || fail "mkdata"
for f in "$d"/set/class_000/*.jpg; do echo "$f 0"; done >"$d/list.txt"
cp "$d/list.txt" "$d/list.keep"
"$tb" loader-bench --data "$d/list.txt" --threads 1 --batch-size 2 --batches 1 --image-size 32 \
  --results "$d/list.txt" >"$d/out" 2>"$d/err"
rc=$?
if [ $rc -eq 1 ] && grep -qF -- "--results '$d/list.txt' is the --data input" "$d/err" &&
  cmp -s "$d/list.txt" "$d/list.keep"; then
  echo "ok   loader-bench-on-list: $(cut -c1-120 <"$d/err")"
else
  fail "loader-bench --results on its --data list: exit $rc: $(head -c 200 "$d/err")"
  cmp -s "$d/list.txt" "$d/list.keep" || fail "loader-bench-on-list: the list file was replaced"
fi
cp "$(dirname "$0")/../results/projection_reference/seeds_h800_nvlink.txt" "$d/prof.txt"
cp "$d/prof.txt" "$d/prof.keep"
refused project-on-profile "--out '$d/prof.txt' is the --profile input" -- \
  "$tb" project --profile "$d/prof.txt" --fabric nvlink4-h800 --out "$d/prof.txt"
cmp -s "$d/prof.txt" "$d/prof.keep" || fail "project-on-profile: the profile was replaced"
refused train-on-list "--trace '$d/list.txt' is the --data input" -- \
  "$tb" $R --steps 1 --data "$d/list.txt" --trace "$d/list.txt" --results ""
cmp -s "$d/list.txt" "$d/list.keep" || fail "train-on-list: the list file was replaced"

# loader-bench --timeline: refused before any row runs
LB="loader-bench --data $d/list.txt --threads 1 --batch-size 2 --batches 1 --image-size 32"
refused timeline-on-results "--timeline '$d/res.h5' holds a trainbench results file" -- \
  "$tb" $LB --timeline "$d/res.h5"
refused timeline-on-list "--timeline '$d/list.txt' is the --data input" -- "$tb" $LB --timeline "$d/list.txt"
cmp -s "$d/list.txt" "$d/list.keep" || fail "timeline-on-list: the list file was replaced"
refused timeline-same-as-results "--results '$d/lb.h5' and --timeline '$d/lb.h5' are the same file" -- \
  "$tb" $LB --results "$d/lb.h5" --timeline "$d/lb.h5"
refused timeline-missing-dir "cannot write stage timeline '$d/no/t.json'" -- \
  "$tb" $LB --results "$d/lb.h5" --timeline "$d/no/t.json"
[ -e "$d/lb.h5" ] && fail "timeline-missing-dir: the rows ran (lb.h5 written) before the refusal"
cp "$d/b.h5" "$d/f.row1.json"
cp "$d/f.row1.json" "$d/f.keep"
refused timeline-feed-row "--timeline '$d/f.row1.json' holds a trainbench batch file" -- \
  "$tb" loader-bench --feed --data "$d/list.txt" --rows 1:2:off,1:2:off --batch-size 2 --image-size 32 \
  --model resnet18 --timeline "$d/f.json"
cmp -s "$d/f.row1.json" "$d/f.keep" || fail "timeline-feed-row: the file was replaced"

# replaced by design
"$tb" $R --steps 1 --results "$d/res.h5" >"$d/out" 2>&1 || fail "results over results: $(grep error "$d/out")"
: >"$d/empty.h5"
"$tb" $R --steps 1 --results "$d/empty.h5" >"$d/out" 2>&1 || fail "results over an empty file: $(grep error "$d/out")"
for i in 1 2; do
  "$tb" $R --steps 1 --results "" --trace "$d/tr.json" >"$d/out" 2>&1 ||
    fail "--trace over its earlier trace ($i): $(grep error "$d/out")"
done
for i in 1 2; do
  "$tb" $LB --timeline "$d/tl.json" >"$d/out" 2>&1 || fail "--timeline over its earlier timeline ($i): $(grep error "$d/out")"
done
for i in 1 2; do
  "$tb" step --ckpt "$d/ck.h5" --batch "$d/b.h5" --out "$d/o.h5" >"$d/out" 2>&1 ||
    fail "step --out over its earlier output ($i): $(grep error "$d/out")"
done
[ "$fails" -eq 0 ] && echo "ok: every output that would have destroyed another file refused; replacements by design kept"
exit "$fails"
