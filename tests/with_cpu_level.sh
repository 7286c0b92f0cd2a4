#!/bin/sh
# with_cpu_level.sh LEVEL TRAINBENCH CMD...: runs CMD with TB_CPU_LEVEL=LEVEL
# (src/core/cpu_dispatch.h); when this CPU (or build) lacks the level,
# trainbench's one-line refusal is printed as the SKIP reason and the exit
# status is 77 (ctest: skipped). Any other failure of the check fails.
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
TB_CPU_LEVEL=$lv
export TB_CPU_LEVEL
exec "$@"
