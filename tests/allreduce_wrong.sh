#!/bin/sh
# allreduce_wrong.sh TRAINBENCH PYTHON MPIEXEC...: allreduce-bench's check
# catches a wrong sum. TB_TEST_FAULT=wrong-sum:1:1 spoils one element of
# rank 1's result in the second size's row: that row's #wrong is 1 and the
# others' 0, the run exits 1 with 'Out of bounds values : 1 FAILED', and the
# results file is status "aborted" with the count as abort_reason and the
# /allreduce/wrong column as printed. The same sweep without the fault is
# complete, exit 0.
tb=$1
py=$2
shift 2
dir=$(mktemp -d "$(pwd)/tb_ar_wrong.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
# wrong column of the table's rows: the 9th, as nccl-tests' (after its root column)
wrong_col() { awk '/^ +[0-9]/ { printf "%s ", $9 }' "$1"; }

TB_TEST_FAULT=wrong-sum:1:1 "$@" 2 "$tb" allreduce-bench -b 4 -e 64 -f 4 -n 2 -w 1 --results "$dir/w.h5" \
  >"$dir/w.log" 2>&1
rc=$?
cat "$dir/w.log"
[ "$rc" -ne 0 ] || fail "a sweep with a wrong sum exited 0"
[ "$(wrong_col "$dir/w.log")" = "0 1 0 " ] || fail "#wrong column '$(wrong_col "$dir/w.log")', expected '0 1 0 '"
grep -q "Out of bounds values : 1 FAILED" "$dir/w.log" || fail "no 'Out of bounds values : 1 FAILED' line"
got=$("$py" -c "import sys, h5py; f = h5py.File(sys.argv[1], 'r'); print(f.attrs['status'], '|', f.attrs['abort_reason'], '|', list(f['allreduce/wrong'][()]))" "$dir/w.h5" 2>&1)
case $got in
"aborted | 1 wrong elements in the all-reduce sums"*"| [0, 1, 0]") ;;
*) fail "results file: '$got'" ;;
esac

"$@" 2 "$tb" allreduce-bench -b 4 -e 64 -f 4 -n 2 -w 1 --results "$dir/ok.h5" >"$dir/ok.log" 2>&1 ||
  { cat "$dir/ok.log"; fail "the sweep without the fault exited non-zero"; }
got=$("$py" -c "import sys, h5py; f = h5py.File(sys.argv[1], 'r'); print(f.attrs['status'], 'abort_reason' in f.attrs)" "$dir/ok.h5" 2>&1)
[ "$got" = "complete False" ] || fail "results file without the fault: '$got'"
[ "$fails" = 0 ] || exit 1
echo "ok: the check catches one wrong element and the file says aborted"
