#!/bin/sh
# scaling_links.sh - the scaling table of trainbench's default job (ResNet-18,
# 64 px, batch 32 per rank: 45 MB of gradients per step) on three emulated
# hosts, once per link setting, for results/multihost_scaling.md.
#
#   scaling_links.sh TRAINBENCH OUTDIR LINK...
#
# LINK is "unshaped" or a tc rate (1gbit, 100mbit: hosts.sh up 3 --rate).
# For each: the hosts come up, linkprobe.py measures the tbh1 -> tbh2 link
# (TCP round trip, one stream's throughput), then launch/hostfile.sh
# --fabric tcp runs `trainbench train` with 1 compute thread per rank and
# writes OUTDIR/multihost_LINK.h5; its console output goes to
# OUTDIR/multihost_LINK.txt, with the exact command and the load average
# before and after. The hosts are torn down at the end (trap).
#
# Environment (knobs, with defaults):
#   TB_SCALING_ARGS="--scaling-steps 20 --scaling-warmup 3"   scaling options
#   TB_TRAIN_STEPS=4       training steps before the scaling rows (1 warm-up)
#   TB_MH_PYTHON=/usr/bin/python3   interpreter for linkprobe.py
#   TB_MH_EXTRA_ARGS=      more mpirun arguments (e.g. an all-reduce algorithm:
#                          "--mca coll_tuned_use_dynamic_rules 1
#                           --mca coll_tuned_allreduce_algorithm 4")
#   TB_MH_TAG=             appended to the file names (multihost_LINK_TAG.*)
#   TB_MH_LOCK=/run/lock/trainbench-multihost.lock   as in run_test.sh
set -eu

[ $# -ge 3 ] || { echo "usage: scaling_links.sh TRAINBENCH OUTDIR LINK..." >&2; exit 2; }
tb=$1
out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
: "${TB_SCALING_ARGS:=--scaling-steps 20 --scaling-warmup 3}"
: "${TB_TRAIN_STEPS:=4}"
: "${TB_MH_PYTHON:=/usr/bin/python3}"
[ "$(id -u)" = 0 ] || { echo "scaling_links.sh: needs root" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

# shellcheck source=tests/multihost/common.sh
. "$here/common.sh"
mh_launch_env "${TB_MH_EXTRA_ARGS:-}"
mh_lock 900
trap '"$here/hosts.sh" down' EXIT

# train across the 3 hosts; hostfile.sh prints the mpirun line it runs
train() {
    # shellcheck disable=SC2086  # TB_SCALING_ARGS is a list of options
    "$root/launch/hostfile.sh" --hostfile "$here/hostfile" --fabric tcp -- "$tb" train \
        --model resnet18 --image-size 64 --batch-size 32 --steps "$TB_TRAIN_STEPS" --warmup-steps 1 \
        $TB_SCALING_ARGS --threads 1 --loader-threads 1 --results "$1"
}

for link in "$@"; do
    if [ "$link" = unshaped ]; then
        "$here/hosts.sh" up 3
    else
        "$here/hosts.sh" up 3 --rate "$link"
    fi
    name=multihost_$link${TB_MH_TAG:+_$TB_MH_TAG}
    log=$out/$name.txt
    {
        echo "# link: $link; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
        mh_in_ns tbh2 "$TB_MH_PYTHON" "$here/linkprobe.py" serve 5301 9>&- &
        mib=64
        case $link in *mbit) mib=8 ;; esac
        mh_in_ns tbh1 "$TB_MH_PYTHON" "$here/linkprobe.py" probe 10.212.0.12 5301 "$mib"
        wait
        train "$out/$name.h5" 2>&1 9>&-
        echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    } >"$log" 2>&1
    tail -n 25 "$log"
done
