#!/bin/sh
# lint.sh - shellcheck, as POSIX sh, over the launch scripts and the
# multi-host test scripts. Exit 0 clean, 1 findings, 77 without shellcheck.
#
#   lint.sh [REPO_ROOT]
set -eu
command -v shellcheck >/dev/null 2>&1 || { echo "SKIP: no shellcheck"; exit 77; }
cd "${1:-$(dirname "$0")/../..}"
shellcheck -x -s sh launch/*.sh launch/*.sbatch tests/multihost/*.sh
echo "shellcheck: clean"
