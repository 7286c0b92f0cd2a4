#!/bin/sh
# skip_reasons.sh BUILD_DIR [STATUS] - after `ctest --test-dir BUILD_DIR`:
# the reason of every test that printed a "SKIP: ..." line, one per line, so
# a skipped test says why (ctest --output-on-failure shows the output of
# failed tests only, and ctest 3.25 has no option to show skipped tests'
# output). Reads ctest's log of its last run (Testing/Temporary/LastTest.log).
# Exits STATUS (default 0), so it can follow ctest without hiding its result:
#
#   ctest --test-dir build --output-on-failure; sh tests/skip_reasons.sh build $?
set -u
[ $# -ge 1 ] || { echo "usage: skip_reasons.sh BUILD_DIR [STATUS]" >&2; exit 2; }
status=${2:-0}
log=$1/Testing/Temporary/LastTest.log
if [ ! -r "$log" ]; then
    echo "skip_reasons.sh: no ctest log at $log (run ctest --test-dir $1 first)" >&2
    exit "$status"
fi
# A test's block: "N/M Test: NAME", then its output between "Output:" and
# "<end of output>".
awk '
    /^[0-9]+\/[0-9]+ Test: / { name = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", name); inout = 0; next }
    /^Output:$/ { inout = 1; next }
    /^<end of output>$/ { inout = 0; next }
    inout && /^SKIP: / {
        reason = $0; sub(/^SKIP: /, "", reason)
        if (!(name in seen)) { order[++n] = name; seen[name] = reason }
    }
    END {
        if (n == 0) { print "# no test printed a SKIP: line"; exit }
        print "# why tests were skipped (their SKIP: lines):"
        for (i = 1; i <= n; i++) printf "#   %s: %s\n", order[i], seen[order[i]]
    }
' "$log"
exit "$status"
