#!/bin/sh
# gap.sh MPICC MPIRUN [RUNS]: builds sigkill_gap.c with MPICC, runs it RUNS times (default 3) on 4
# ranks with MPIRUN, and prints each surviving rank's SIGTERM time and the gap to its last line
set -eu
here=$(cd "$(dirname "$0")" && pwd)
"$1" "$here/sigkill_gap.c" -o /tmp/sigkill_gap
i=0
while [ "$i" -lt "${3:-3}" ]; do
  i=$((i + 1))
  "$2" --oversubscribe -n 4 /tmp/sigkill_gap >/dev/null 2>&1 || true
  for r in 0 2 3; do
    awk -v run="$i" -v r="$r" '/^sig 15 at/ { t = $4 } /^alive/ { last = $2 }
      END { printf "run %s rank %s SIGTERM at %.3f s, last line %.3f s, gap %.3f s\n", run, r, t, last, last - t }' \
      "/tmp/term$r.log"
  done
done
