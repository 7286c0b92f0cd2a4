#!/bin/sh
# report_project_odd_inputs.sh TRAINBENCH PYTHON RUN.h5 - `report` and
# `project` on input that is not what they expect: each case ends in one
# error line naming the thing (exit 1), or a result with a note, and never
# prints nan, inf or a figure of 20 digits. RUN.h5: a training run's results
# file with a 1-rank /scaling row (report.cmake's report_np2.h5 or
# report_b2.h5). Copies are edited with h5py (PYTHON); nothing is written
# beside RUN.h5. The cases, each a defect once:
#   fabric    a fabric file with intra_bw_GBps = 1e-30, 1e308 or
#             ranks_per_node = 0.5 / 1e30 was taken: 300-digit step times
#             (or "all ranks in one node" for 0.5, an int overflow for 1e30)
#   profile   the same for --profile: batch_size = 1e300 gave 300-digit img/s,
#             backward_ms = 1e300 a 300-digit step, step_ms = 1e-9 phases
#             longer than the step
#   ranks     --ranks 1,1000000000: "wants ... rank counts >= 1"; more
#             ranks than a fabric without a network carries: refused before
#             any output (it printed the header and the profile first)
#   batch     --set batch=inf printed a step of "inf" ms and exited 0
#   kind      an allreduce-bench file given to project: "has no batch_size
#             attribute"; a checkpoint: "report reads what --results writes";
#             a 1-rank allreduce-bench file as fit:FILE: "needs 2 timings, got 0"
#   aborted   an aborted run's 1-rank row was projected without a word
#   noeff     /scaling without efficiency: "scaling efficiency nan %" in the
#             report, "measured nan % efficiency" in the projection
#   nobatch   no batch_size attribute: "batch nan per rank" in the report
#   workload  two runs of different batch sizes compared: B/A ratios with
#             no word that they time two workloads
#   untimed   a run whose steps all fell within --warmup-steps: the report
#             printed the per-rank table's header alone and no word why
#   nostepms  /steps without step_ms: "all 6 steps fell within --warmup-steps
#             2", which the run's steps did not
#   inf       /scaling with efficiency = inf: "inf" in the tables and the
#             efficiency note (only nan was taken for a missing value)
#   md        --format md: a note right after a table had no blank line
#             between, so GitHub markdown read it as one more row
set -u
tb=$1
py=$2
run=$3
"$py" -c 'import h5py' 2>/dev/null || { echo "SKIP: $py has no h5py"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# shellcheck source=tests/h5_edit.sh
. "$(dirname "$0")/h5_edit.sh" # edit SRC DST PYTHON
# bad_figures FILE: a line with nan, inf or a run of 20 digits
bad_figures() { grep -n -i -E '(^|[^a-z_])(nan|-?inf)([^a-z_]|$)|[0-9]{20}' "$1"; }
# refused NAME WANT_TEXT CMD...: exit 1, one stderr line holding WANT_TEXT
refused() {
  name=$1 want=$2 before=$fails
  shift 2
  "$@" >"$d/out" 2>"$d/err"
  rc=$?
  [ "$rc" -eq 1 ] || fail "$name: exit $rc, want 1"
  [ "$(wc -l <"$d/err")" -eq 1 ] || { fail "$name: not one stderr line:"; cat "$d/err"; }
  grep -q -e "$want" "$d/err" || fail "$name: the line lacks '$want': $(cat "$d/err")"
  bad_figures "$d/out" && fail "$name: a figure is nan, inf or 20 digits long (above)"
  [ "$fails" -eq "$before" ] && echo "ok   $name: $(cut -c1-160 "$d/err")"
}

# fabric: nonsense values in a key = value file
for v in "intra_bw_GBps = 1e-30" "intra_bw_GBps = 1e308" "intra_bw_GBps = 100
ranks_per_node = 0.5" "intra_bw_GBps = 100
ranks_per_node = 1e30"; do
  printf '%s\n' "$v" >"$d/fabric.txt"
  refused "fabric '$(printf '%s' "$v" | tr '\n' ';')'" "out of range" \
    "$tb" project "$run" --fabric "$d/fabric.txt" --ranks 1,2 --what-if ""
done

# profile: a published profile (--profile) of nonsense values
for v in "batch_size = 1e300" "backward_ms = 1e300" "classes = 1e30"; do
  printf 'model = resnet50\nbatch_size = 128\nstep_ms = 465.9\nforward_ms = 142.9\nbackward_ms = 285.7\n%s\n' "$v" \
    >"$d/profile.txt"
  refused "profile '$v'" "out of range" "$tb" project --profile "$d/profile.txt" --fabric nvlink4-h800 --what-if ""
done
printf 'model = resnet50\nbatch_size = 128\nstep_ms = 1e-9\nforward_ms = 142.9\nbackward_ms = 285.7\n' >"$d/profile.txt"
refused "profile 'step_ms = 1e-9'" "exceed step_ms" "$tb" project --profile "$d/profile.txt" --fabric nvlink4-h800

# ranks: a rank count beyond the limit was told "rank counts >= 1"
refused "--ranks 1000000000" "from 1 to 1000000.*got '1,1000000000'" \
  "$tb" project "$run" --fabric nvlink4-h100 --ranks 1,1000000000

# batch: a what-if or --set outside what a run could be
refused "--ranks 16 on one node" "describes one node of 8 ranks and no network, so it cannot carry 16 ranks" \
  "$tb" project "$run" --fabric pcie4 --ranks 1,16
[ -s "$d/out" ] && fail "--ranks 16 on one node: output before the refusal: $(head -c 200 "$d/out")"
refused "--set batch=inf" "batch=X (1/1024 to 1024)" "$tb" project "$run" --fabric nvlink4-h100 --set batch=inf
refused "--what-if bucket=1e-9" "1 byte or more" "$tb" project "$run" --fabric nvlink4-h100 --what-if bucket=1e-9

# kind: files of other commands
edit "$run" "$d/ar.h5" "
for k in list(f.keys()): del f[k]
f.attrs['kind'] = 'allreduce-bench'
g = f.create_group('allreduce')
g['bytes'] = [1024, 2048]; g['time_us'] = [10.0, 12.0]; g['busbw_GBps'] = [0.1, 0.17]" || fail "kind: h5py"
refused "allreduce-bench file to project" "allreduce-bench file, not a training run's.*fit:" \
  "$tb" project "$d/ar.h5"
edit "$run" "$d/ckpt.h5" "
for k in list(f.keys()): del f[k]
for k in list(f.attrs.keys()):
    if k != 'model': del f.attrs[k]
f.create_group('params')['w'] = [0.0]" || fail "kind: h5py"
edit "$d/ar.h5" "$d/ar1.h5" "f.attrs['world_size'] = 1; f.attrs['status'] = 'complete'" || fail "kind: h5py"
refused "a 1-rank allreduce-bench file to --fabric fit:" "ar1.h5' was measured on 1 rank" \
  "$tb" project "$run" --fabric "fit:$d/ar1.h5"
refused "checkpoint to project" "checkpoint.*the run's --results wrote" "$tb" project "$d/ckpt.h5"

# aborted: the projection goes on from the 1-rank row, with a note
edit "$run" "$d/aborted.h5" "f.attrs['status'] = 'aborted'; f.attrs['abort_reason'] = 'train: stopped by SIGINT'" ||
  fail "aborted: h5py"
"$tb" project "$d/aborted.h5" --fabric nvlink4-h100 --what-if "" >"$d/out" 2>"$d/err" || fail "aborted: exit $?"
grep -q "^# note: .*aborted.h5: the run's status is 'aborted'" "$d/out" ||
  { fail "aborted: no note that the run was aborted:"; tail -n 3 "$d/out"; }

# noeff: /scaling without its efficiency column
edit "$run" "$d/noeff.h5" "del f['scaling/efficiency']" || fail "noeff: h5py"
"$tb" report "$d/noeff.h5" >"$d/out" 2>"$d/err"
[ $? -eq 1 ] || fail "noeff: report exit is not 1"
grep -q "lacks column 'efficiency'" "$d/err" || fail "noeff: report names no missing column"
bad_figures "$d/out" && fail "noeff: report prints nan (above)"
"$tb" project "$d/noeff.h5" --fabric nvlink4-h100 --what-if "" >"$d/out" 2>"$d/err" || fail "noeff: project exit $?"
bad_figures "$d/out" && fail "noeff: project prints nan (above)"
grep -q "^# note: .*lacks column 'efficiency'" "$d/out" || fail "noeff: project has no note"

# nobatch: the run line without a batch size
edit "$run" "$d/nobatch.h5" "del f.attrs['batch_size']" || fail "nobatch: h5py"
"$tb" report "$d/nobatch.h5" >"$d/out" 2>"$d/err"
sed -n 2p "$d/out" | grep -q "batch ? per rank" || fail "nobatch: run line: $(sed -n 2p "$d/out")"
bad_figures "$d/out" && fail "nobatch: report prints nan (above)"

# workload: two runs of different batch sizes side by side
edit "$run" "$d/batch.h5" "f.attrs['batch_size'] = 2 * int(f.attrs['batch_size'])" || fail "workload: h5py"
"$tb" report "$run" "$d/batch.h5" >"$d/out" 2>"$d/err" || fail "workload: report exit $?"
grep -q "^# note: A and B train different workloads (batch_size " "$d/out" || fail "workload: no note"
"$tb" report "$run" "$run" >"$d/out" 2>"$d/err" || fail "workload: report of one file twice: exit $?"
grep -q "different workloads" "$d/out" && fail "workload: a note for one workload"

# untimed: every step within --warmup-steps
"$tb" --synthetic --image-size 32 --batch-size 2 --steps 2 --warmup-steps 5 --scaling-steps 0 --threads 1 \
  --results "$d/untimed.h5" >/dev/null 2>&1 || fail "untimed: the run failed"
"$tb" report "$d/untimed.h5" >"$d/out" 2>"$d/err" || fail "untimed: report exit $?"
grep -q "^# no timed step: all 2 steps fell within --warmup-steps 5" "$d/out" || fail "untimed: no note"
grep -q "ms per step by rank" "$d/out" && fail "untimed: a per-rank table without rows"
bad_figures "$d/out" && fail "untimed: report prints nan (above)"

# nostepms: a column missing is said as such, not as the warm-up's doing
edit "$run" "$d/nostepms.h5" "del f['steps/step_ms']" || fail "nostepms: h5py"
"$tb" report "$d/nostepms.h5" >"$d/out" 2>"$d/err"
grep -q "^# no timed step: /steps has no step_ms column" "$d/out" || fail "nostepms: no note: $(grep 'timed step' "$d/out")"
grep -q "fell within --warmup-steps" "$d/out" && fail "nostepms: a note about --warmup-steps"

# inf: a value the tables cannot show, as '-' like a missing one
edit "$run" "$d/eff_inf.h5" "f['scaling/efficiency'][1] = float('inf')" || fail "inf: h5py"
for fmt in md csv text; do
  "$tb" report "$d/eff_inf.h5" --format $fmt >"$d/out" 2>"$d/err" || fail "inf: report --format $fmt exit $?"
  bad_figures "$d/out" && fail "inf: report --format $fmt prints inf (above)"
done
grep -q "scaling efficiency -: " "$d/out" || fail "inf: the efficiency note does not say '-'"
"$tb" report "$d/eff_inf.h5" "$run" >"$d/out" 2>"$d/err" || fail "inf: report A B exit $?"
bad_figures "$d/out" && fail "inf: report A B prints inf (above)"

# md: every markdown table ends in a blank line, so a note after it is not one more row
md_table_ends() { # FILE: a table row followed by a line that is neither a row nor blank
  awk 'prev ~ /^\|/ && $0 !~ /^\|/ && $0 != "" { print FILENAME ": " NR ": " $0; bad = 1 } { prev = $0 }
       END { exit !bad }' "$1"
}
for args in "$run" "$d/untimed.h5" "$run $run" "$run $d/batch.h5"; do
  # shellcheck disable=SC2086
  "$tb" report $args --format md >"$d/out" 2>"$d/err"
  md_table_ends "$d/out" && fail "md: 'report $args': a line right after a table (above)"
done

[ "$fails" -eq 0 ] && echo "ok: every odd input refused in one line or noted"
exit "$fails"
