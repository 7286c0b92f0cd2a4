#!/bin/sh
# bench_sizes.sh TRAINBENCH: the sizes allreduce-bench and preflight measure
# are the bytes they report. allreduce-bench rounds each size down to whole
# elements (at least one), measures each distinct size once and refuses an
# -e below one element; preflight's --bytes is rounded down to whole float32
# values, so the bytes printed (the numerator of its bandwidth) are what
# the all-reduce moved. One rank, no launcher needed.
bin=$1
fail=0
say() { printf '%s\n' "$*"; }
bad() { say "FAIL: $*"; fail=1; }

# sizes column of a table (rows start with blanks and a number)
sizes() { printf '%s\n' "$1" | awk '/^ +[0-9]/ { printf "%s ", $1 }'; }

out=$("$bin" allreduce-bench -b 1 -e 16 -d double -n 1 -w 0 2>&1) || bad "allreduce-bench -b 1 -e 16 -d double exited non-zero"
got=$(sizes "$out")
if [ "$got" = "8 16 " ]; then say "ok: -b 1 -e 16 -d double measures 8 16"
else bad "-b 1 -e 16 -d double measured sizes '$got', expected '8 16 ' (one row per distinct size)"; fi

out=$("$bin" allreduce-bench -b 6 -e 100 -f 3 -n 1 -w 0 2>&1) || bad "allreduce-bench -b 6 -e 100 -f 3 exited non-zero"
got=$(sizes "$out")
if [ "$got" = "4 16 52 " ]; then say "ok: -b 6 -e 100 -f 3 measures 4 16 52"
else bad "-b 6 -e 100 -f 3 measured sizes '$got', expected '4 16 52 ' (6, 18, 54 in whole floats)"; fi

out=$("$bin" allreduce-bench -b 1 -e 2 2>&1) && bad "allreduce-bench -e 2 (below one float) exited 0"
if printf '%s\n' "$out" | grep -q -- '-e 2 is less than one float element (4 bytes): give -e 4 or more'; then
    say "ok: -e 2 refused with one line"
else bad "-e 2: expected a line naming -e and one element, got: $out"; fi

out=$("$bin" preflight --bytes 7 --timeout 30 2>&1) || bad "preflight --bytes 7 exited non-zero: $out"
line=$(printf '%s\n' "$out" | grep '^# all-reduce (')
case $line in
    *": 4 bytes float32 sum over 1 ranks"*) say "ok: preflight --bytes 7 reports the 4 bytes it moved" ;;
    *) bad "preflight --bytes 7: expected '4 bytes float32', got: $line" ;;
esac
[ "$fail" = 0 ] || exit 1
say "ok: every size is the one measured"
