#!/bin/sh
# lint.sh - shellcheck, as POSIX sh, over the launch scripts, the test
# scripts, .ci/run and the emulated-host bench scripts. Exit 0 clean, 1 findings, 77 without shellcheck.
#
#   lint.sh [REPO_ROOT]
set -eu
command -v shellcheck >/dev/null 2>&1 || { echo "SKIP: no shellcheck (install shellcheck)"; exit 77; }
cd "${1:-$(dirname "$0")/../..}"
shellcheck -x -s sh launch/*.sh launch/*.sbatch tests/*.sh tests/multihost/*.sh .ci/run \
    bench/project_validate.sh bench/grad_sync_ab.sh bench/allreduce_cpu.sh
echo "shellcheck: clean"
