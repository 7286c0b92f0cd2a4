# shellcheck shell=sh
# suite_env.sh - sourced by tests/gpu/run_suite.sh after the bundle's
# env.sh: tb_suite_libpath DIRS appends the GPU machine's own CUDA
# libraries (python site-packages nvidia/*/lib, colon-separated DIRS, then
# the toolkit's) after the bundle's, so that cuDNN, cuBLAS and, without a
# slim build in the bundle, NCCL come from the machine, and a slim NCCL in
# the bundle comes first (tests/gpu/test_bundle_env.sh).
tb_suite_libpath() {
  [ -n "${1:-}" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$1"
  for _tb_d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
    [ -d "$_tb_d" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$_tb_d"
  done
  return 0
}
