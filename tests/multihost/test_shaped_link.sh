#!/bin/sh
# test_shaped_link.sh - hosts.sh's link shaping is real and its state is
# clean: two emulated hosts run `trainbench allreduce-bench` (4 MiB, nccl-tests
# style table) unshaped, then with `hosts.sh up 2 --rate 40mbit` (brought up
# over the running hosts: `up` must replace them), and the shaped bus
# bandwidth must be at most the link rate (+15 % for the token bucket's
# burst) while the unshaped one is at least 3x the rate; then `hosts.sh up 2
# --delay 5ms` (netem, or delayq.py where the kernel has no sch_netem; with
# TB_MH_TCP_CC=cubic, which must show on the hosts' route) must add at least
# the 2 x 5 ms to linkprobe.py's round trip (a lower bound only: load can
# only lengthen it); after `down` (twice) no namespace, veth,
# bridge or delayq.py of ours is left.
#
#   test_shaped_link.sh TRAINBENCH
#
# Exit 0 pass, 1 fail, 77 skipped with the reason (common.sh: mh_require_hosts).
# Environment: TB_MH_TIMEOUT=120 (seconds per mpirun); TB_MH_LOCK (as in
# run_test.sh: one emulated-host run at a time); TB_MH_PREFIX, TB_MH_NET,
# TB_MH_BRIDGE as in hosts.sh.
set -eu

[ $# -ge 1 ] || { echo "usage: test_shaped_link.sh TRAINBENCH" >&2; exit 2; }
tb=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
: "${TB_MH_TIMEOUT:=120}"
# shellcheck source=tests/multihost/common.sh
. "$here/common.sh"

mh_require_hosts tc
[ -x "$tb" ] || fail "no trainbench at $tb"
case $tb in /*) ;; *) tb=$(pwd)/$tb ;; esac

mh_lock 240
trap '"$here/hosts.sh" down' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

printf '%s1 slots=1\n%s2 slots=1\n' "$TB_MH_PREFIX" "$TB_MH_PREFIX" >"$(pwd)/shaped_hosts"
mh_launch_env

# busbw (GB/s) of one 4 MiB all-reduce between the two hosts, from the time
# column (us) for more digits than the table prints: size / time, x 2(n-1)/n = 1
busbw() {
    timeout "$TB_MH_TIMEOUT" "$root/launch/hostfile.sh" --hostfile "$(pwd)/shaped_hosts" --fabric tcp -n 2 -- \
        "$tb" allreduce-bench -b 4M -e 4M -n 3 -w 1 >"$1" 2>&1 9>&- || { cat "$1"; fail "allreduce-bench across 2 hosts failed"; }
    grep -q "Out of bounds values : 0 OK" "$1" || { cat "$1"; fail "allreduce-bench reported wrong values"; }
    awk '$1 == 4194304 { printf "%.6f\n", $1 / ($6 * 1e-6) / 1e9 }' "$1" # time: $6, as nccl-tests'
}

"$here/hosts.sh" up 2
plain=$(busbw shaped_plain.txt)
"$here/hosts.sh" up 2 --rate 40mbit
"$here/hosts.sh" status
shaped=$(busbw shaped_40mbit.txt)
echo "# 4 MiB all-reduce, 2 hosts: unshaped busbw $plain GB/s, 40 Mbit/s link busbw $shaped GB/s (link: 0.005 GB/s)"
awk -v p="$plain" -v s="$shaped" 'BEGIN {
    rate = 40e6 / 8 / 1e9
    bad = 0
    if (s == "" || s <= 0 || s > 1.15 * rate) { print "FAIL shaped busbw " s " GB/s is not within the 40 Mbit/s link (" rate " GB/s)"; bad = 1 }
    if (p == "" || p < 3 * rate) { print "FAIL unshaped busbw " p " GB/s is not well above 40 Mbit/s"; bad = 1 }
    exit bad }' || fail "the link shaping did not take effect"

# --delay: the round trip must carry both one-way delays (2 x 5 ms)
: "${TB_MH_PYTHON:=python3}"
if out=$(TB_MH_TCP_CC=cubic "$here/hosts.sh" up 2 --delay 5ms 2>&1); then
    echo "$out"
    "$here/hosts.sh" status
    # TB_MH_TCP_CC: the hosts' subnet route carries the congestion control
    for ns in "${TB_MH_PREFIX}1" "${TB_MH_PREFIX}2"; do
        mh_in_ns "$ns" ip route show "$TB_MH_NET.0/24" | grep -q "congctl cubic" ||
            fail "TB_MH_TCP_CC=cubic: $ns's route is '$(mh_in_ns "$ns" ip route show "$TB_MH_NET.0/24")'"
    done
    mh_in_ns "${TB_MH_PREFIX}2" "$TB_MH_PYTHON" "$here/linkprobe.py" serve 5302 9>&- &
    probe=$(mh_in_ns "${TB_MH_PREFIX}1" "$TB_MH_PYTHON" "$here/linkprobe.py" probe "$TB_MH_NET.12" 5302 1 9>&-) ||
        fail "linkprobe.py across the delayed link failed"
    wait
    echo "$probe"
    rtt=$(echo "$probe" | sed -n 's/.*rtt median \([0-9]*\) us.*/\1/p')
    if [ -z "$rtt" ] || [ "$rtt" -lt 10000 ]; then
        fail "--delay 5ms: round trip ${rtt:-?} us, expected at least 10000 us"
    fi
else
    case $out in
        *"needs iptables"* | *"needs python"*) echo "# --delay not checked: $out" ;;
        *) echo "$out"; fail "hosts.sh up 2 --delay 5ms failed" ;;
    esac
fi

trap - EXIT
"$here/hosts.sh" down
"$here/hosts.sh" down
if ls /run/tb-delayq-"${TB_MH_PREFIX}"* >/dev/null 2>&1; then fail "delayq.py files left after down: $(ls /run/tb-delayq-"${TB_MH_PREFIX}"*)"; fi
left=$(ip netns list | awk '{print $1}' | grep -E "^${TB_MH_PREFIX}[0-9]+\$" || true)
[ -z "$left" ] || fail "namespaces left after down: $left"
if ip -o link show | grep -E ": (${TB_MH_PREFIX}[0-9]+-br|$TB_MH_BRIDGE)[@:]" >/dev/null; then
    fail "links left after down: $(ip -o link show | grep -E ": (${TB_MH_PREFIX}[0-9]+-br|$TB_MH_BRIDGE)[@:]")"
fi
echo "PASS: the shaped link holds the all-reduce to 40 Mbit/s, --delay lengthens the round trip, down leaves nothing behind"
