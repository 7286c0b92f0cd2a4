#!/bin/sh
# project_shared_gpu.sh TRAINBENCH DIR - the model check of issue 26 on the
# H200's stored 2-rank NCCL run (DIR: scaling_nccl_np2.h5, two ranks
# time-slicing one GPU, and allreduce_nccl_np2_float.h5, the all-reduce
# measured on those two ranks). `trainbench project --set share=2` predicts
# the 2-rank step from the run's own 1-rank row and the fitted all-reduce;
# it must land within TOL % of the measured step. The same projection
# without share=2 (two devices, overlapped buckets) is the planted error:
# it must miss by more than TOL %, or the check could not fail.
set -u
tb=$1 dir=$2 tol=${TB_SHARED_TOL:-5}
step2() { # prints "projected measured" for the 2-rank row
  "$tb" project "$dir/scaling_nccl_np2.h5" --fabric "fit:$dir/allreduce_nccl_np2_float.h5" --ranks 1,2 \
    --what-if "" --format csv "$@" |
    awk -F, '/^ranks,nodes,algo/ { for (i = 1; i <= NF; i++) c[$i] = i; next }
             c["step_ms"] && $1 == 2 && $2 == 1 { print $c["step_ms"], $c["measured_step_ms"]; exit }'
}
judge() { # LABEL WANT(in|out) PROJECTED MEASURED
  awk -v l="$1" -v w="$2" -v p="$3" -v m="$4" -v t="$tol" 'BEGIN {
    d = 100 * (p - m) / m; a = d < 0 ? -d : d; inside = a <= t
    printf "%-34s projected %7.2f ms, measured %7.2f ms: %+6.1f %% (%s %s %%)\n", l, p, m, d, inside ? "within" : "beyond", t
    exit (w == "in") == inside ? 0 : 1 }'
}
# shellcheck disable=SC2046 # two numbers, split on purpose
set -- $(step2 --set share=2)
[ $# -eq 2 ] || { echo "FAIL: no 2-rank row from trainbench project --set share=2"; exit 1; }
judge "2 ranks sharing the GPU (share=2)" in "$1" "$2" || { echo "FAIL: the shared-GPU model misses the measured step"; exit 1; }
# shellcheck disable=SC2046
set -- $(step2)
[ $# -eq 2 ] || { echo "FAIL: no 2-rank row from trainbench project"; exit 1; }
judge "planted: as if 2 GPUs (no share)" out "$1" "$2" || { echo "FAIL: the check cannot tell the two models apart"; exit 1; }
echo "ok"
