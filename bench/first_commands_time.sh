#!/bin/sh
# first_commands_time.sh - how long the README's first command takes once
# the packages are installed: configure + build (Release, -j NPROC) of a
# clean clone, then the default job (`./build/trainbench`) on one rank and
# under `mpirun -np 2`, each timed with the wall clock. The machine's load
# average is printed before and after: a busy machine takes longer.
#
#   bench/first_commands_time.sh REPO [CUDA=OFF|AUTO]
#
# The clone and its build go under /tmp and are deleted at the end.
set -eu
REPO=${1:?usage: first_commands_time.sh REPO [OFF|AUTO]}
CUDA=${2:-OFF}
DIR=$(mktemp -d /tmp/tb_first_XXXXXX)
trap 'rm -rf "$DIR"' EXIT INT TERM
now() { date +%s.%N; }
since() { echo "$1 $(now)" | awk '{printf "%.1f", $2 - $1}'; }
echo "# machine: $(uname -srm), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
git clone -q "$REPO" "$DIR/src"
echo "# trainbench $(git -C "$DIR/src" rev-parse --short HEAD), TB_CUDA=$CUDA"
cd "$DIR/src"
t=$(now)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTB_CUDA="$CUDA" >"$DIR/configure.log" 2>&1
cmake --build build -j"$(nproc)" >"$DIR/build.log" 2>&1
echo "# configure and build: $(since "$t") s"
t=$(now)
./build/trainbench >"$DIR/job1.log" 2>&1
echo "# default job, 1 rank: $(since "$t") s; $(grep -m1 '^# training:' "$DIR/job1.log" | cut -c1-150)"
t=$(now)
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  mpirun -np 2 ./build/trainbench >"$DIR/job2.log" 2>&1
echo "# default job, mpirun -np 2: $(since "$t") s; $(grep -m1 '^# training:' "$DIR/job2.log" | cut -c1-150)"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
