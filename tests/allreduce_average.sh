#!/bin/sh
# allreduce_average.sh TRAINBENCH PYTHON MPIEXEC...: allreduce-bench -a
# combines the ranks' times as nccl-tests' -a does. TB_TEST_FAULT=
# slow-time:1:0 takes rank 1's time of the first size as 1 s longer (the
# other ranks' are microseconds): on 2 ranks -a 3 (the slowest) reports
# >= 1 s, -a 1 (the mean, the default) 0.5 s and a little, -a 2 (the
# fastest) and -a 0 (rank 0's) well under 0.1 s; with rank 0 the slow one
# instead, -a 0 reports >= 1 s and -a 2 still under 0.1 s. The header's
# first line and the results file (attribute average) say which; #wrong
# stays 0.
tb=$1
py=$2
shift 2
dir=$(mktemp -d "$(pwd)/tb_ar_avg.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
# time (us, the 6th column as nccl-tests') and #wrong (the 9th) of the one row
row() { awk '/^ +[0-9]/ { printf "%s %s", $6, $9 }' "$1"; }

for a in default 0 1 2 3; do
  flag="-a $a"
  [ "$a" = default ] && flag=""
  # shellcheck disable=SC2086 # $flag is empty or two words
  TB_TEST_FAULT=slow-time:1:0 "$@" 2 "$tb" allreduce-bench -b 4K -e 4K -n 2 -w 0 $flag --results "$dir/$a.h5" \
    >"$dir/$a.log" 2>&1 || { cat "$dir/$a.log"; fail "allreduce-bench $flag exited non-zero"; continue; }
  got=$(row "$dir/$a.log")
  us=${got% *}
  wrong=${got#* }
  case $a in
  3) want="-a 3"; ok=$(awk -v t="$us" 'BEGIN { print (t >= 1e6 && t < 1.1e6) }') ;;
  1 | default) want="-a 1"; ok=$(awk -v t="$us" 'BEGIN { print (t >= 0.5e6 && t < 0.55e6) }') ;;
  *) want="-a $a"; ok=$(awk -v t="$us" 'BEGIN { print (t > 0 && t < 1e5) }') ;;
  esac
  [ "$ok" = 1 ] || fail "allreduce-bench ${flag:-without -a}: time $us us is not what $want gives"
  [ "$wrong" = 0 ] || fail "allreduce-bench ${flag:-without -a}: #wrong '$wrong', expected 0"
  head -n 1 "$dir/$a.log" | grep -q "time: .*($want)" ||
    fail "allreduce-bench ${flag:-without -a}: the first line does not say '($want)': $(head -n 1 "$dir/$a.log")"
  echo "ok: ${flag:-no -a}: $us us, #wrong $wrong"
done
# rank 0 the slow one (slow-time:0:0): -a 0 must follow rank 0 (>= 1 s)
# where -a 2 stays the fastest, so neither passes for the other
for a in 0 2; do
  TB_TEST_FAULT=slow-time:0:0 "$@" 2 "$tb" allreduce-bench -b 4K -e 4K -n 2 -w 0 -a "$a" \
    >"$dir/r0_$a.log" 2>&1 || { cat "$dir/r0_$a.log"; fail "allreduce-bench -a $a (rank 0 slow) exited non-zero"; continue; }
  got=$(row "$dir/r0_$a.log")
  us=${got% *}
  if [ "$a" = 0 ]; then
    ok=$(awk -v t="$us" 'BEGIN { print (t >= 1e6 && t < 1.1e6) }')
  else
    ok=$(awk -v t="$us" 'BEGIN { print (t > 0 && t < 1e5) }')
  fi
  [ "$ok" = 1 ] || fail "allreduce-bench -a $a with rank 0 slow: time $us us"
  echo "ok: -a $a, rank 0 slow: $us us"
done
got=$("$py" -c "import sys, h5py; print(' '.join(str(h5py.File(sys.argv[i], 'r').attrs['average']) for i in range(1, 6)))" \
  "$dir/default.h5" "$dir/0.h5" "$dir/1.h5" "$dir/2.h5" "$dir/3.h5" 2>&1)
[ "$got" = "mean rank 0 mean min max" ] || fail "attribute average of the results files: '$got'"
[ "$fails" = 0 ] || exit 1
echo "ok: -a 0..3 report rank 0's, the mean, the fastest and the slowest rank's time"
