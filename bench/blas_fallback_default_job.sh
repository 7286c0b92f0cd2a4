#!/bin/sh
# blas_fallback_default_job.sh [TRAINBENCH] [ROUNDS] > results/blas_kernels/default_job.md
# The default job (`trainbench` with no flags: ResNet-18, 64 px, batch 32,
# 100 steps) on a machine whose OpenBLAS fell back to its generic Prescott
# kernels, before and after trainbench chose the CPU's own kernels, in
# alternating rounds. The fallback is emulated with OPENBLAS_CORETYPE=Prescott
# (before: as the library would run it) and TB_TEST_BLAS_FALLBACK=1 (after:
# trainbench treats the setting as the library's own choice and replaces it).
# Prints a markdown page; the raw output of every run goes to $TB_LOG_DIR
# (default: a temporary directory, named on the page).
set -eu
tb=${1:-build/trainbench}
rounds=${2:-2}
logs=${TB_LOG_DIR:-$(mktemp -d)}
mkdir -p "$logs"
shown=$logs
logs=$(cd "$logs" && pwd)
tbabs=$(cd "$(dirname "$tb")" && pwd)/$(basename "$tb")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rate() { sed -n 's/^# training: .*, \([0-9.]*\) img\/s .*/\1/p' "$1" | tail -n 1; }
kern() { sed -n 's/^# cpu: .*BLAS: [^ ]* [^ ]* \([A-Za-z0-9]*\) kernels.*/\1/p' "$1" | head -n 1; }
rows=""
r=1
while [ "$r" -le "$rounds" ]; do
  for v in before after; do
    log=$logs/default_job_${v}_r$r.log
    if [ "$v" = before ]; then
      (cd "$work" && OPENBLAS_CORETYPE=Prescott "$tbabs" >"$log" 2>&1)
    else
      (cd "$work" && OPENBLAS_CORETYPE=Prescott TB_TEST_BLAS_FALLBACK=1 "$tbabs" >"$log" 2>&1)
    fi
    rows="$rows$v $r $(kern "$log") $(rate "$log")
"
  done
  r=$((r + 1))
done
echo "# The default job on an OpenBLAS that fell back to its generic kernels"
echo
echo "Machine: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores;"
echo "$("$tb" --version). Command: \`bench/blas_fallback_default_job.sh $tb $rounds\`;"
echo "raw logs: \`$shown\`. img/s: the job's \`# training:\` line (95 timed steps)."
echo
echo "| variant | round | BLAS kernels | img/s |"
echo "|---|---|---|---|"
printf '%s' "$rows" | while read -r v n k ips; do
  case $v in before) label="before: the library's Prescott kernels" ;; *) label="after: trainbench's choice" ;; esac
  echo "| $label | $n | $k | $ips |"
done
echo
printf '%s' "$rows" | awk '{s[$1] += $4; n[$1]++} END {
  printf "Mean img/s: before %.1f, after %.1f: %.2fx.\n", s["before"] / n["before"], s["after"] / n["after"],
         (s["after"] / n["after"]) / (s["before"] / n["before"]) }'
