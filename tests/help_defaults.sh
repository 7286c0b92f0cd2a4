#!/bin/sh
# help_defaults.sh TRAINBENCH: every subcommand's --help states each flag's
# default once. A flag whose help says its default in words ("(default: 1.25
# on CUDA ...)") must not also get the generated "(default -1)" of the
# internal not-set value after it. Exits 1 naming each line that does.
set -u
tb=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for cmd in train step mkdata loader-bench allreduce-bench preflight probe report project; do
  "$tb" "$cmd" --help >>"$out" 2>&1 || { echo "FAIL: trainbench $cmd --help exited non-zero"; exit 1; }
done
"$tb" loader-bench --feed --help >>"$out" 2>&1 || { echo "FAIL: trainbench loader-bench --feed --help exited non-zero"; exit 1; }
lines=$(grep -c '^  -' "$out")
[ "$lines" -gt 100 ] || { echo "FAIL: only $lines flag lines in the help texts"; exit 1; }
bad=$(grep -E '\(default.*\(default' "$out")
if [ -n "$bad" ]; then
  echo "FAIL: a flag's help states two defaults:"
  echo "$bad"
  exit 1
fi
echo "ok: $lines flag lines, each with at most one default"
