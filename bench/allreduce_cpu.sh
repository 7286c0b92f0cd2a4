#!/bin/sh
# allreduce_cpu.sh - what an all-reduce between emulated hosts costs the
# machine's CPUs: on one machine the "network" (TCP, veth, bridge, tbf,
# delayq.py) runs on the same cores as the ranks' compute, so every byte
# all-reduced takes CPU time from training. Per link setting and host count:
#
#   allreduce_cpu.sh TRAINBENCH [LINK...]     (LINK as in project_validate.sh)
#
# `trainbench allreduce-bench -b S -e S` (the gradient thread's call) across
# the hosts once with -n 1 and once with -n 21 (no warm-up); the difference
# in machine-wide busy CPU time (/proc/stat: user + nice + system + irq +
# softirq, all CPUs), less the idle machine's own rate over the same wall
# time, over the 20 extra all-reduces is the CPU cost of one, printed per MB
# and for TB_AR_STEP_MB (44.7: ResNet-18's gradients) with its wall time.
# Environment: TB_AR_HOSTS="2 3", TB_AR_SIZE=16M, TB_AR_STEP_MB=44.7,
# TB_VAL_DELAY_CC=cubic (as project_validate.sh). Root.
set -eu
[ $# -ge 1 ] || { echo "usage: allreduce_cpu.sh TRAINBENCH [LINK...]" >&2; exit 2; }
tb=$1
shift
[ $# -gt 0 ] || set -- unshaped 1gbit 100mbit delay2ms
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/tests/multihost
case $tb in /*) ;; *) tb=$(pwd)/$tb ;; esac
[ -x "$tb" ] || { echo "allreduce_cpu.sh: no trainbench at $tb" >&2; exit 1; }
: "${TB_AR_HOSTS:=2 3}"
: "${TB_AR_SIZE:=16M}"
: "${TB_AR_STEP_MB:=44.7}"
: "${TB_VAL_DELAY_CC=cubic}"
# shellcheck source=tests/multihost/common.sh
. "$here/common.sh"
mh_require_hosts tc
mh_launch_env
mh_lock 900
trap '"$here/hosts.sh" down >/dev/null 2>&1 || true; rm -f "$hf"' EXIT
hf=$(mktemp)

# "busy_ticks wall_ns": machine-wide busy CPU ticks and the clock
now() { printf '%s %s\n' "$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat)" "$(date +%s%N)"; }

# CPU ticks and wall ns of one allreduce-bench run with -n $1
bench() {
    set -- "$1" "$(now)"
    "$root/launch/hostfile.sh" --hostfile "$hf" --fabric tcp -- "$tb" allreduce-bench -b "$TB_AR_SIZE" -e "$TB_AR_SIZE" \
        -n "$1" -w 0 >/dev/null 2>&1 9>&- || { echo "allreduce_cpu.sh: allreduce-bench failed" >&2; exit 1; }
    # shellcheck disable=SC2046,SC2086  # "ticks ns"
    set -- $2 $(now)
    echo "$(($3 - $1)) $(($4 - $2))"
}

hz=$(getconf CLK_TCK)
bytes=$(awk -v s="$TB_AR_SIZE" 'BEGIN { m = 1; if (s ~ /K$/) m = 1024; if (s ~ /M$/) m = 1048576; print int(s) * m }')
echo "# allreduce_cpu.sh: $TB_AR_SIZE all-reduces, 20 timed; machine-wide busy CPU per all-reduce; $(nproc) CPUs"
printf '# %-9s %5s %12s %12s %14s %14s  %s\n' link hosts "wall ms" "CPU ms" "CPU ms per MB" \
    "CPU ms/${TB_AR_STEP_MB}MB" "idle machine's busy CPU"
for link in "$@"; do
    case $link in
        unshaped) shape="" cc="" ;;
        delay*) shape="--delay ${link#delay}" cc=$TB_VAL_DELAY_CC ;;
        *) shape="--rate $link" cc="" ;;
    esac
    for h in $TB_AR_HOSTS; do
        : >"$hf"
        i=1
        while [ "$i" -le "$h" ]; do
            echo "${TB_MH_PREFIX}$i slots=1" >>"$hf"
            i=$((i + 1))
        done
        # shellcheck disable=SC2086  # shape is a list of options
        TB_MH_TCP_CC=$cc "$here/hosts.sh" up "$h" $shape >/dev/null
        set -- "$(now)"
        sleep 5
        # shellcheck disable=SC2046,SC2086  # "ticks ns"
        set -- $1 $(now)
        idle=$(awk -v t="$(($3 - $1))" -v ns="$(($4 - $2))" -v hz="$hz" 'BEGIN { print t / hz / (ns / 1e9) }')
        one=$(bench 1)
        many=$(bench 21)
        # shellcheck disable=SC2086
        set -- $one $many
        awk -v t1="$1" -v w1="$2" -v t2="$3" -v w2="$4" -v hz="$hz" -v idle="$idle" -v b="$bytes" \
            -v s="$TB_AR_STEP_MB" -v link="$link" -v h="$h" 'BEGIN {
            wall = (w2 - w1) / 1e9; cpu = (t2 - t1) / hz - idle * wall
            per = cpu / 20 * 1e3; mb = b / 1e6
            printf "  %-9s %5d %12.1f %12.1f %14.2f %14.0f  %.2f CPUs\n", link, h, wall / 20 * 1e3, per, per / mb,
                   per / mb * s, idle }'
    done
done
