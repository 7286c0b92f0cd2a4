#!/bin/sh
# blas_kernels_run.sh KERNELS TRAINBENCH CMD...: run CMD (a golden step
# driver given tests/trainbench_blas.sh as its trainbench) with TRAINBENCH
# on OpenBLAS's KERNELS (Prescott, Haswell, Zen, SkylakeX), or skip (exit
# 77, with the reason) when this CPU cannot run them or when they are the
# ones trainbench runs by default (golden_fp32_resnet18 checks those). The
# kernels reach trainbench only, not the PyTorch references.
set -eu
kernels=$1
TB_BLAS_TRAINBENCH=$2
shift 2
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
need=""
case $kernels in
  Prescott) need="" ;;
  Haswell|Zen) need="avx2 fma" ;;
  SkylakeX) need="avx512f avx512bw avx512vl avx512dq avx512cd" ;;
  *) echo "blas_kernels_run.sh: unknown kernel set '$kernels' (Prescott, Haswell, Zen or SkylakeX)" >&2; exit 2 ;;
esac
for f in $need; do
  if ! has "$f"; then
    echo "SKIP: this CPU lacks $f, which OpenBLAS's $kernels kernels need"
    exit 77
  fi
done
# the kernels trainbench runs by default (after its own choice) are
# golden_fp32_resnet18's already
own=$(OPENBLAS_VERBOSE=2 "$TB_BLAS_TRAINBENCH" --version 2>&1 >/dev/null | sed -n 's/^Core: //p' | tail -n 1)
if [ "$own" = "$kernels" ]; then
  echo "SKIP: trainbench runs OpenBLAS's $kernels kernels by default here: golden_fp32_resnet18 checks them"
  exit 77
fi
TB_BLAS_KERNELS=$kernels
export TB_BLAS_KERNELS TB_BLAS_TRAINBENCH
exec "$@"
