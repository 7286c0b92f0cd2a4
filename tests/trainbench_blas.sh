#!/bin/sh
# trainbench_blas.sh ARGS...: trainbench ($TB_BLAS_TRAINBENCH) on OpenBLAS's
# $TB_BLAS_KERNELS kernels, checked: the library's own report of the kernels
# it loaded (OPENBLAS_VERBOSE=2 prints "Core: NAME" on stderr) must name
# them, else exit 3. Stands in for the binary in golden_step.py --trainbench.
set -u
: "${TB_BLAS_TRAINBENCH:?set TB_BLAS_TRAINBENCH to the trainbench binary}"
: "${TB_BLAS_KERNELS:?set TB_BLAS_KERNELS to OpenBLAS kernels (tests/blas_kernels_run.sh does)}"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
# the kernels are set as a user sets them: an emulated fallback
# (TB_TEST_BLAS_FALLBACK=1, say for a whole suite run) must not take them
# for the library's own choice and replace them
OPENBLAS_CORETYPE=$TB_BLAS_KERNELS OPENBLAS_VERBOSE=2 env -u TB_TEST_BLAS_FALLBACK "$TB_BLAS_TRAINBENCH" "$@" 2>"$err"
rc=$?
cat "$err" >&2
core=$(sed -n 's/^Core: //p' "$err" | tail -n 1)
if [ "$(printf %s "$core" | tr '[:upper:]' '[:lower:]')" != "$(printf %s "$TB_BLAS_KERNELS" | tr '[:upper:]' '[:lower:]')" ]; then
  echo "trainbench_blas.sh: OpenBLAS ran '${core:-no Core line}' kernels, not $TB_BLAS_KERNELS" >&2
  exit 3
fi
exit "$rc"
