#!/bin/sh
# expect_fail.sh PATTERN CMD...: passes when CMD exits non-zero AND its output
# (stdout + stderr) contains PATTERN (grep -E). For tests of failure paths.
pattern=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out" | tail -n 20
if [ "$rc" -eq 0 ]; then
  echo "FAIL: exit status 0, expected failure"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
  echo "FAIL: output lacks /$pattern/"
  exit 1
fi
echo "ok: exit $rc with /$pattern/"
