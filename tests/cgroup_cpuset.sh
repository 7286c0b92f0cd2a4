#!/bin/sh
# cgroup_cpuset.sh TRAINBENCH: --threads' default in a real CPU set (a
# container's or a batch job's cpuset cgroup), not the host's online CPUs.
# A cpuset cgroup is made here holding the machine's last CPU (v1, or v2
# where the cpuset controller can be enabled below the root), and a 1-rank
# run is moved into it: its header says "1 thread/rank" and no warning says
# more compute threads were asked for than it may run on. Read from the
# online CPUs instead, the host's share would be all of them (2 on a 2-CPU
# machine): more than the set's one CPU, capped with that warning (as a
# `taskset -c 1` run, bound below the job's CPUs, is). Exit 77 (skipped, with the reason) where
# no cpuset hierarchy can be written here (not root, a container's
# read-only cgroup tree) or the machine has one CPU.
set -u
tb=$1
online=$(getconf _NPROCESSORS_ONLN)
[ "$online" -ge 2 ] || { echo "SKIP: one CPU online: no smaller set to make"; exit 77; }
last=$((online - 1))
cg=""
if [ -w /sys/fs/cgroup/cpuset/cgroup.procs ]; then # v1's cpuset hierarchy
  cg=/sys/fs/cgroup/cpuset/tb_test_cpuset_$$
  mkdir "$cg" 2>/dev/null && echo "$last" >"$cg/cpuset.cpus" 2>/dev/null &&
    cat /sys/fs/cgroup/cpuset/cpuset.mems >"$cg/cpuset.mems" 2>/dev/null || cg=""
elif grep -qw cpuset /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then # v2, the root's controllers
  cg=/sys/fs/cgroup/tb_test_cpuset_$$
  { echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control && mkdir "$cg" && echo "$last" >"$cg/cpuset.cpus"; } \
    2>/dev/null || cg=""
fi
if [ -z "$cg" ]; then
  rmdir /sys/fs/cgroup/cpuset/tb_test_cpuset_$$ /sys/fs/cgroup/tb_test_cpuset_$$ 2>/dev/null
  echo "SKIP: no cpuset cgroup can be made here (needs root and a writable cgroup tree, v1 or v2)"
  exit 77
fi
d=$(mktemp -d)
trap 'rm -rf "$d"; rmdir "$cg" 2>/dev/null' EXIT
# the run inside the set: the shell moves itself in, then execs the run
sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" --model resnet18 --image-size 32 --batch-size 4 --steps 1 \
  --scaling-steps 0 --backend cpu --results ""' sh "$cg" "$tb" >"$d/out" 2>&1
rc=$?
fail=0
[ $rc -eq 0 ] || { echo "FAIL: exit $rc in the set: $(tail -n 3 "$d/out")"; fail=1; }
grep -q "^# trainbench train: .*backend cpu (1 thread/rank)" "$d/out" ||
  { echo "FAIL: in a set of CPU $last of $online, the header says: $(grep '^# trainbench train' "$d/out")"; fail=1; }
if grep -q "compute threads asked for" "$d/out"; then
  echo "FAIL: the default asked for more threads than the set holds: $(grep 'threads asked' "$d/out" | cut -c1-160)"
  fail=1
fi
[ $fail -eq 0 ] && echo "ok: in a cpuset cgroup of CPU $last ($online online): 1 thread/rank, nothing capped"
exit $fail
