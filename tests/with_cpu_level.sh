#!/bin/sh
# with_cpu_level.sh [--skip-if-auto TEST] LEVEL TRAINBENCH CMD...: runs CMD
# with TB_CPU_LEVEL=LEVEL (core/cpu_dispatch.h). When this CPU (or
# build) lacks the level, trainbench's one-line refusal is printed as the
# SKIP reason and the exit status is 77 (ctest: skipped). With
# --skip-if-auto, a LEVEL that is the one trainbench picks by itself here
# is skipped too: TEST (run at the automatic level) covers it. Any other
# failure of the check fails.
covered=""
if [ "$1" = "--skip-if-auto" ]; then
  covered=$2
  shift 2
fi
lv=$1
tb=$2
shift 2
if ! out=$(TB_CPU_LEVEL=$lv "$tb" probe --help 2>&1 >/dev/null); then
  case "$out" in
  *"this CPU lacks $lv"* | *"this build has no $lv code"*)
    echo "SKIP: $out"
    exit 77
    ;;
  esac
  echo "$out"
  echo "FAIL: TB_CPU_LEVEL=$lv: the level check failed for another reason"
  exit 1
fi
if [ -n "$covered" ]; then
  auto=$(env -u TB_CPU_LEVEL "$tb" probe 2>/dev/null | sed -n 's/^# CPU vector loops *\([a-z0-9]*\) .*/\1/p')
  if [ -z "$auto" ]; then
    echo "FAIL: trainbench probe printed no 'CPU vector loops' line"
    exit 1
  fi
  if [ "$auto" = "$lv" ]; then
    echo "SKIP: $lv is the level trainbench picks by itself on this CPU: $covered runs it"
    exit 77
  fi
fi
TB_CPU_LEVEL=$lv
export TB_CPU_LEVEL
exec "$@"
