#!/bin/sh
# report_pairs.sh TRAINBENCH PYTHON RUN.h5 SOURCE_DIR - `report A B` on pairs
# of files of each kind: the tables both have compared row by row, a note
# where no row matched, the rows only one file has named, the workload note
# where the runs differ. RUN.h5: a training run's results file with /scaling
# rows (report.cmake's report_np2.h5 or report_b2.h5); SOURCE_DIR: the
# repository, for the stored files under results/. Copies are edited with
# h5py (PYTHON). The cases, each a defect once:
#   feed       two loader-feed files (results/gpu_h100_*, gpu_h200_*) took the
#              training branch: 'no scaling row in both' and a table of
#              dashes, /feed never compared
#   projection two --profile projection files: the same, and a run line of
#              '?, ?, batch ? per rank, ? px'
#   allreduce  two sweeps of disjoint sizes: a table header alone, no word;
#              of -a max against -a mean (or a file from before -a): B/A
#              ratios of two statistics, with no note
#   loader     two loader-bench files of other --threads: the same; and of
#              other batch sizes: no workload note
#   scaling    rows of one file only (ranks 2 in A, 3 in B) dropped silently
#   same       one file twice: an empty differences table with no word
#   zero       a phase of 0.001 ms (printed 0.00) against 3.5: 'B/A 3500.000'
#   ranks      two runs of other rank counts: no workload note
set -u
tb=$1
py=$2
run=$3
src=$4
"$py" -c 'import h5py' 2>/dev/null || { echo "SKIP: $py has no h5py"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# shellcheck source=tests/h5_edit.sh
. "$(dirname "$0")/h5_edit.sh" # edit SRC DST PYTHON
# has NAME PATTERN: the report in $d/out has a line matching PATTERN (grep -E)
has() { grep -q -E -e "$2" "$d/out" || { fail "$1: no line matching '$2'"; sed 's/^/    /' "$d/out" | cut -c1-200; }; }
hasnt() { ! grep -E -e "$2" "$d/out" || fail "$1: a line matching '$2' (above)"; }
report() { # NAME ARGS...: report to $d/out, exit 0 wanted
  name=$1
  shift
  "$tb" report "$@" >"$d/out" 2>"$d/err" || fail "$name: report exit $?: $(cat "$d/err")"
}

# feed: the stored loader-feed tables of the H100 and H200 machines
report feed "$src/results/gpu_h100_2026-11-27/feed_trainbench.h5" "$src/results/gpu_h200_2026-11-27/feed_trainbench.h5"
has feed '^# loader-feed rows measured in both \(same loader configuration\)'
has feed '^ +0 +2 +0 +0 +514\.5 +659\.5 +1\.282 '
has feed '^# rows \(threads:prefetch:pinned:gpu_decode\) only in A: 4:3:1:1; only in B: 16:4:1:1, 16:4:1:1, 16:5:1:1$'
has feed '^# /feed rows matched on threads:prefetch:pinned:gpu_decode: only B has the column gpu_stages$'
hasnt feed 'scaling row|^# training run'

# projection: two published profiles projected (no model, no host)
report projection "$src/results/projection_reference/dle_a100_amp.proj.h5" \
  "$src/results/projection_reference/dle_a100_tf32.proj.h5"
has projection '^# A = .*dle_a100_amp\.proj\.h5: trainbench projection$'
has projection '^# projection rows in both \(same rank count\)'
has projection '^ +8 +19732\.1 +7499\.4 +0\.380 +99\.8 +99\.9 '
hasnt projection '\?|scaling row|^# training run'

# allreduce: sizes 8..64 against 1024..4096
"$tb" allreduce-bench -b 8 -e 64 -n 2 -w 1 --results "$d/ar_a.h5" >/dev/null 2>&1 || fail "allreduce: run a"
"$tb" allreduce-bench -b 1024 -e 4096 -n 2 -w 1 --results "$d/ar_b.h5" >/dev/null 2>&1 || fail "allreduce: run b"
report allreduce "$d/ar_a.h5" "$d/ar_b.h5"
has allreduce '^# no all-reduce size in both: A has 4 /allreduce rows, B 3$'
has allreduce '^# rows \(bytes\) only in A: 8, 16, 32, 64; only in B: 1024, 2048, 4096$'
hasnt allreduce 'measured differently|different workloads'
# allreduce-average: -a max against the default mean, and a file from
# before -a (no average attribute: the slowest rank's time) against a mean
"$tb" allreduce-bench -b 8 -e 64 -n 2 -w 1 -a 3 --results "$d/ar_max.h5" >/dev/null 2>&1 || fail "allreduce: run -a 3"
report allreduce-average "$d/ar_a.h5" "$d/ar_max.h5"
has allreduce-average '^# note: A and B measured differently \(average mean vs max\): the time and busbw ratios'
edit "$d/ar_max.h5" "$d/ar_old.h5" "del f.attrs['average']" || fail "allreduce-average: h5py"
report allreduce-old "$d/ar_old.h5" "$d/ar_a.h5"
has allreduce-old '^# note: A and B measured differently \(average max vs mean\)'
report allreduce-old-max "$d/ar_old.h5" "$d/ar_max.h5"
hasnt allreduce-old-max 'measured differently'

# loader: --threads 1 against 2, then batch 4 against 8
"$tb" mkdata --out "$d/data" --classes 2 --per-class 6 --min-side 48 --max-side 64 >/dev/null || fail "loader: mkdata"
for t in 1 2; do
  "$tb" loader-bench --data "$d/data" --threads $t --batch-size 4 --batches 2 --warmup 1 --image-size 32 \
    --results "$d/lb$t.h5" >/dev/null 2>&1 || fail "loader: loader-bench --threads $t"
done
report loader "$d/lb1.h5" "$d/lb2.h5"
has loader '^# no thread count in both: A has 1 /loader row, B 1$'
has loader '^# rows \(threads\) only in A: 1; only in B: 2$'
edit "$d/lb1.h5" "$d/lb1b8.h5" "f.attrs['batch_size'] = 8" || fail "loader: h5py"
report loader-batch "$d/lb1.h5" "$d/lb1b8.h5"
has loader-batch '^# note: A and B load different workloads \(batch_size 4 vs 8\)'

# scaling: the last row's rank count one more in B
edit "$run" "$d/more.h5" "r = f['scaling/ranks']; n = int(r[-1]); r[-1] = n + 1" || fail "scaling: h5py"
n=$("$py" -c "import h5py, sys; print(int(h5py.File(sys.argv[1], 'r')['scaling/ranks'][-1]))" "$run")
report scaling "$run" "$d/more.h5"
has scaling "^# rows \(ranks\) only in A: $n; only in B: $((n + 1))$"

# same: one file twice
report same "$run" "$run"
has same '^# no root attribute differs: A and B hold the same [0-9]+ attributes$'
hasnt same 'different workloads'

# zero: a phase printed as 0.00 gets no ratio
edit "$run" "$d/zero.h5" "f['ranks/optimizer_ms'][:] = 0.001" || fail "zero: h5py"
report zero "$d/zero.h5" "$run"
has zero '^ +optimizer ms +0\.00 +[0-9.]+ +-$'

# ranks: world_size and global_batch differ
edit "$run" "$d/world.h5" "f.attrs['world_size'] = 64; f.attrs['global_batch'] = 256" || fail "ranks: h5py"
report ranks "$run" "$d/world.h5"
has ranks '^# note: A and B train different workloads \(global_batch [0-9]+ vs 256, world_size [0-9]+ vs 64\)'

[ "$fails" -eq 0 ] && echo "ok: every pair compared, its odd rows named"
exit "$fails"
