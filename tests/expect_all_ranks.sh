#!/bin/sh
# expect_all_ranks.sh NP PATTERN CMD...: passes when CMD (an mpirun of NP
# ranks) exits non-zero and every rank 0..NP-1 printed its own error line
# "trainbench[rank R host]: error: ...PATTERN...". For launch mistakes, which
# every rank must report.
np=$1
pattern=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out" | grep -E "error|FAIL" | head -n 20
if [ "$rc" -eq 0 ]; then
  echo "FAIL: exit status 0, expected failure"
  exit 1
fi
r=0
while [ "$r" -lt "$np" ]; do
  if ! printf '%s\n' "$out" | grep -Eq "trainbench\[rank $r [^]]*\]: error: .*$pattern"; then
    echo "FAIL: rank $r printed no error line matching /$pattern/"
    exit 1
  fi
  r=$((r + 1))
done
echo "ok: exit $rc, all $np ranks reported /$pattern/"
