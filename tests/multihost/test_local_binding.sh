#!/bin/sh
# test_local_binding.sh - launch/local.sh gives each rank cores of its own:
# `local.sh -n 2 -- trainbench preflight` must show ranks 0 and 1 bound to
# two different CPU sets in preflight's "bus id / cpus" column (cpus:...).
#
#   test_local_binding.sh TRAINBENCH
#
# Exit 0 pass, 1 fail, 77 skipped on a machine with one core (two ranks
# cannot have a core each there).
set -eu
[ $# -ge 1 ] || { echo "usage: test_local_binding.sh TRAINBENCH" >&2; exit 2; }
tb=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
cores=$(lscpu -p=CORE,SOCKET 2>/dev/null | grep -v '^#' | sort -u | wc -l) || cores=0
[ "$cores" -gt 0 ] || cores=$(nproc)
if [ "$cores" -lt 2 ]; then
    echo "SKIP: $cores core, no core per rank"
    exit 77
fi
if ! out=$(sh "$root/launch/local.sh" -n 2 -- "$tb" preflight --bytes 64K --timeout 60 2>&1); then
    echo "$out"
    echo "FAIL: local.sh -n 2 -- trainbench preflight failed"
    exit 1
fi
echo "$out"
echo "$out" | awk '
    $1 ~ /^[01]$/ { for (i = 2; i <= NF; i++) if ($i ~ /^cpus:/) c[$1] = $i }
    END {
        if (c[0] == "" || c[1] == "" || c[0] == c[1]) {
            print "FAIL: ranks 0 and 1 are not bound to different cores: [" c[0] "] [" c[1] "]"
            exit 1
        }
        print "ok: rank 0 " c[0] ", rank 1 " c[1]
    }'
