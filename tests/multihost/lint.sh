#!/bin/sh
# lint.sh - shellcheck, as POSIX sh, over the launch scripts, the test
# scripts, the GPU suite scripts, .ci/run and bench/*.sh. Exit 0 clean, 1 findings, 77 without shellcheck.
#
#   lint.sh [REPO_ROOT]
set -eu
command -v shellcheck >/dev/null 2>&1 || { echo "SKIP: no shellcheck (install shellcheck)"; exit 77; }
cd "${1:-$(dirname "$0")/../..}"
shellcheck -x -s sh launch/*.sh launch/container/*.sh launch/*.sbatch tests/*.sh tests/fresh/*.sh tests/multihost/*.sh tests/gpu/make_bundle.sh tests/gpu/gpu_run.sh .ci/run
# bench scripts: each under the shell its first line names
for f in bench/*.sh; do
  case "$(head -n 1 "$f")" in *bash*) shellcheck -x -s bash "$f" ;; *) shellcheck -x -s sh "$f" ;; esac
done
# the GPU suite runner is bash (arrays, process substitution)
shellcheck -x -s bash tests/gpu/run_suite.sh
echo "shellcheck: clean"
