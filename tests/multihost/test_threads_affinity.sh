#!/bin/sh
# test_threads_affinity.sh - a rank may not run more compute threads than the
# CPUs it may use (mpirun binds one or two ranks to a core each by default;
# taskset does the same here):
#   1. `taskset -c 0 trainbench --threads 2` warns in one line (the CPUs, how
#      to launch instead), runs 1 thread, and its results file records
#      threads_per_rank 1 and "1 thread" in device_names;
#   2. `taskset -c 0 trainbench --threads 1` says nothing of it;
#   3. with 2 CPUs online, `taskset -c 0,1 --threads 2` runs and records 2.
#
#   test_threads_affinity.sh TRAINBENCH
#
# Exit 0 pass, 1 fail, 77 skipped without taskset or h5dump (util-linux,
# hdf5-tools).
set -eu
[ $# -ge 1 ] || { echo "usage: test_threads_affinity.sh TRAINBENCH" >&2; exit 2; }
tb=$1
command -v taskset >/dev/null 2>&1 || { echo "SKIP: no taskset (util-linux)"; exit 77; }
command -v h5dump >/dev/null 2>&1 || { echo "SKIP: no h5dump (hdf5-tools)"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
work=$(pwd)/threads_affinity
rm -rf "$work"
mkdir -p "$work"
small="--steps 2 --warmup-steps 0 --scaling-steps 0 --image-size 32 --batch-size 4"

# attr FILE NAME: the value of a root attribute, quotes removed
attr() { h5dump -a "$2" "$1" | sed -n 's/^ *(0): "\{0,1\}\([^"]*\)"\{0,1\}$/\1/p'; }

run() { # CPUS THREADS NAME
    # shellcheck disable=SC2086  # $small is a list of flags
    taskset -c "$1" "$tb" --threads "$2" $small --results "$work/$3.h5" >"$work/$3.out" 2>&1 ||
        { cat "$work/$3.out"; fail "taskset -c $1 trainbench --threads $2 failed"; }
}

echo "== 1. --threads 2 on one CPU"
run 0 2 one_cpu
grep warning "$work/one_cpu.out" || true
[ "$(grep -c 'warning: .*compute threads' "$work/one_cpu.out")" = 1 ] || fail "no one-line warning"
grep -q 'warning: 2 compute threads asked for .* may run on only 1 CPU (cpus:0): running 1; .*--bind-to none' \
    "$work/one_cpu.out" || fail "the warning does not name the CPU count, the CPUs and how to launch"
grep -q 'backend cpu (1 thread/rank)' "$work/one_cpu.out" || fail "the run does not say 1 thread/rank"
t=$(attr "$work/one_cpu.h5" threads_per_rank)
d=$(attr "$work/one_cpu.h5" device_names)
echo "threads_per_rank $t; device_names $d"
[ "$t" = 1 ] || fail "threads_per_rank is '$t', not 1"
case $d in *", 1 thread") ;; *) fail "device_names '$d' does not end in ', 1 thread'" ;; esac

echo "== 2. --threads 1 on one CPU"
run 0 1 one_thread
if grep -q 'compute threads' "$work/one_thread.out"; then fail "warned with as many threads as CPUs"; fi

if [ "$(nproc --all)" -ge 2 ]; then
    echo "== 3. --threads 2 on two CPUs"
    run 0,1 2 two_cpus
    if grep -q 'compute threads' "$work/two_cpus.out"; then fail "warned with 2 threads on 2 CPUs"; fi
    t=$(attr "$work/two_cpus.h5" threads_per_rank)
    echo "threads_per_rank $t"
    [ "$t" = 2 ] || fail "threads_per_rank is '$t', not 2"
else
    echo "== 3. skipped: one CPU online"
fi
rm -rf "$work"
echo "ok: a rank runs at most as many compute threads as CPUs it may use, says so, and records it"
