#!/bin/sh
# expect_pass.sh PATTERN [PATTERN...] -- CMD...: passes when CMD exits 0 AND
# its output (stdout + stderr) has a line matching each PATTERN (grep -E).
# ctest's PASS_REGULAR_EXPRESSION alone ignores the exit status, so a run
# that printed the line and then failed would pass; this checks both.
pats=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  pats="$pats$1
"
  shift
done
if [ "$#" -lt 2 ] || [ -z "$pats" ]; then
  echo "usage: expect_pass.sh PATTERN [PATTERN...] -- CMD..."
  exit 2
fi
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out" | tail -n 30
if [ "$rc" -ne 0 ]; then
  echo "FAIL: exit status $rc, expected 0"
  exit 1
fi
missing=$(printf '%s' "$pats" | while IFS= read -r pat; do
  printf '%s\n' "$out" | grep -Eq -- "$pat" || printf '/%s/ ' "$pat"
done)
if [ -n "$missing" ]; then
  echo "FAIL: output lacks $missing"
  exit 1
fi
echo "ok: exit 0 with every pattern"
