#!/bin/sh
# hosts.sh - emulated hosts on one machine: network namespaces joined by veth
# pairs and a bridge, optionally with a shaped link, for the multi-host test
# (tests/multihost/run_test.sh) and the shaped-link scaling results.
#
#   hosts.sh up N [--rate RATE] [--delay DELAY]   create hosts 1..N (root only)
#   hosts.sh down                                 remove every host and the bridge
#   hosts.sh status                               addresses, links and qdiscs
#
# Host i is network namespace ${TB_MH_PREFIX}i with interface eth0 at
# ${TB_MH_NET}.(10+i)/24 and lo up; its veth peer ${TB_MH_PREFIX}i-br sits on
# bridge ${TB_MH_BRIDGE}, which holds ${TB_MH_NET}.1 for this (the launching)
# machine. Give each host its own hostname by running commands with
# `nsenter --net=/var/run/netns/${TB_MH_PREFIX}i unshare --uts sh -c 'hostname ...'`
# (rsh_agent.sh does), since namespaces share the UTS namespace otherwise.
# Commands enter a host with nsenter, not `ip netns exec` or `ip -n`: those
# first run `mount --make-rslave /`, which fails in a chroot whose / is not a
# mount point.
#
# Shaping (tc, both directions of each host's link):
#   --rate RATE    token bucket (tbf) at RATE on the host's eth0 egress
#                  (upload) and on its bridge port egress (download), e.g.
#                  100mbit, 1gbit: each host gets a full-duplex RATE link.
#   --delay DELAY  a delay added to what the host sends on eth0, e.g. 2ms, so
#                  a packet from host a to host b waits DELAY once (on a's
#                  uplink) and a round trip between two hosts gains 2 x DELAY:
#                  netem where the kernel has sch_netem, otherwise delayq.py
#                  (iptables -j NFQUEUE on the host's OUTPUT to eth0, packets
#                  held DELAY in user space; needs iptables and python3, and
#                  adds its own ~0.2-0.5 ms per trip: linkprobe.py measures
#                  the round trip). Without either, `up` fails and says why.
# Without either, the links are plain veth (several GB/s, ~20 us).
#
# Environment (knobs, with defaults):
#   TB_MH_PREFIX=tbh        namespace / host name prefix (hosts tbh1..tbhN)
#   TB_MH_BRIDGE=tbbr0      bridge name
#   TB_MH_NET=10.212.0      first three octets of the private /24
#   TB_MH_BURST=128kb       tbf bucket size (must exceed one segment; veth
#                           GSO packets larger than it are split by tbf)
#   TB_MH_TBF_LATENCY=100ms longest a packet may wait in the tbf queue
#   TB_MH_NETEM_LIMIT=10000 netem queue length in packets
#   TB_MH_DELAY_WITH=auto   netem | nfqueue | auto (netem when it works)
#   TB_MH_PYTHON=python3    interpreter for delayq.py
#   TB_MH_TCP_CC=           TCP congestion control between the hosts (a route
#                           attribute, e.g. cubic; empty: the kernel default).
#                           BBR over delayq.py can collapse: in a 2-rank run
#                           over --delay 2ms it settled at a 25 Mbit/s bandwidth
#                           estimate (cwnd 30) while the link carries 1 Gbit/s
#
# `up` first removes what a previous run left; `down` kills any process still
# running inside a host (by pid, from `ip netns pids`) and is safe to repeat.
set -eu

: "${TB_MH_PREFIX:=tbh}"
: "${TB_MH_BRIDGE:=tbbr0}"
: "${TB_MH_NET:=10.212.0}"
: "${TB_MH_BURST:=128kb}"
: "${TB_MH_TBF_LATENCY:=100ms}"
: "${TB_MH_NETEM_LIMIT:=10000}"
: "${TB_MH_DELAY_WITH:=auto}"
: "${TB_MH_PYTHON:=python3}"
: "${TB_MH_TCP_CC:=}"
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "hosts.sh: error: $*" >&2; exit 1; }

# in_ns NS CMD...: CMD in namespace NS (see above for why not ip netns exec)
in_ns() {
    _ns=$1
    shift
    nsenter --net="/var/run/netns/$_ns" "$@"
}

usage() {
    sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# //' -e 's/^#$//'
}

# namespaces of ours, by prefix: tbh1, tbh2, ... (not tbhx or others)
our_namespaces() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${TB_MH_PREFIX}[0-9]+\$" || true
}

hosts_down() {
    for ns in $(our_namespaces); do
        pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ' || true)
        if [ -n "$pids" ]; then
            echo "hosts.sh: killing processes left in $ns: $pids" >&2
            for p in $pids; do kill "$p" 2>/dev/null || true; done
            sleep 1
            for p in $(ip netns pids "$ns" 2>/dev/null || true); do kill -9 "$p" 2>/dev/null || true; done
        fi
        ip link del "${ns}-br" 2>/dev/null || true
        ip netns del "$ns"
    done
    # veth peers whose namespace went away already
    for l in $(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(${TB_MH_PREFIX}[0-9]*-br\)[@:].*/\1/p"); do
        ip link del "$l" 2>/dev/null || true
    done
    if ip link show "$TB_MH_BRIDGE" >/dev/null 2>&1; then
        ip link del "$TB_MH_BRIDGE"
    fi
    rm -f /run/tb-delayq-"${TB_MH_PREFIX}"[0-9]*.ready /run/tb-delayq-"${TB_MH_PREFIX}"[0-9]*.log
}

# netem_works: this kernel has sch_netem (tried in a throwaway namespace)
netem_works() {
    unshare --net sh -c "ip link set lo up && tc qdisc add dev lo root netem delay 1ms" >/dev/null 2>&1
}

# delay_with: how --delay is done here: netem or nfqueue (dies when neither can)
delay_with() {
    case $TB_MH_DELAY_WITH in
        netem) echo netem; return ;;
        nfqueue) ;;
        auto) if netem_works; then echo netem; return; fi ;;
        *) die "TB_MH_DELAY_WITH must be netem, nfqueue or auto, got '$TB_MH_DELAY_WITH'" ;;
    esac
    command -v iptables >/dev/null 2>&1 ||
        die "--delay: this kernel has no sch_netem, and the NFQUEUE fallback needs iptables (apt-get install iptables)"
    command -v "$TB_MH_PYTHON" >/dev/null 2>&1 || die "--delay: the NFQUEUE fallback needs $TB_MH_PYTHON"
    echo nfqueue
}

# delay_nfqueue NS: hold what NS sends on eth0 for $delay (delayq.py, bound to
# queue 0 of NS before the iptables rule sends packets there)
delay_nfqueue() {
    _ready="/run/tb-delayq-$1.ready"
    rm -f "$_ready"
    # a simple command, not the in_ns function: dash keeps a copy of a
    # redirected function's stdout open (fd 10+) in the background child,
    # which would hold `$(hosts.sh up ...)` and the caller's lock (fd 9)
    # open as long as delayq.py runs
    nsenter --net="/var/run/netns/$1" "$TB_MH_PYTHON" "$here/delayq.py" 0 "$delay" "$_ready" \
        </dev/null >/dev/null 2>"/run/tb-delayq-$1.log" 9>&- &
    _t=0
    while [ ! -s "$_ready" ]; do
        [ $_t -lt 50 ] || die "delayq.py did not bind NFQUEUE 0 in $1 within 5 s: $(cat "/run/tb-delayq-$1.log")"
        sleep 0.1
        _t=$((_t + 1))
    done
    in_ns "$1" iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 0 ||
        die "iptables -j NFQUEUE failed in $1 (the kernel needs nfnetlink_queue and xt_NFQUEUE)"
}

# shape DEV IN_NS(or "") : tbf RATE at the root, netem DELAY under it (or,
# without netem, the NFQUEUE delay on the host's own eth0)
shape() {
    dev=$1 ns=$2 with_delay=$3
    run() { if [ -n "$ns" ]; then in_ns "$ns" "$@"; else "$@"; fi; }
    netem_delay=""
    if [ "$with_delay" = 1 ] && [ -n "$delay" ]; then
        if [ "$how_delay" = netem ]; then netem_delay=$delay; else delay_nfqueue "$ns"; fi
    fi
    if [ -n "$rate" ]; then
        run tc qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst "$TB_MH_BURST" latency "$TB_MH_TBF_LATENCY"
        if [ -n "$netem_delay" ]; then
            run tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$delay" limit "$TB_MH_NETEM_LIMIT" ||
                die "tc netem failed (TB_MH_DELAY_WITH=nfqueue avoids it)"
        fi
    elif [ -n "$netem_delay" ]; then
        run tc qdisc add dev "$dev" root handle 10: netem delay "$delay" limit "$TB_MH_NETEM_LIMIT" ||
            die "tc netem failed (TB_MH_DELAY_WITH=nfqueue avoids it)"
    fi
}

hosts_up() {
    n=$1
    shift
    rate="" delay=""
    while [ $# -gt 0 ]; do
        case $1 in
            --rate) [ $# -ge 2 ] || die "--rate needs a value (e.g. 100mbit)"; rate=$2; shift 2 ;;
            --delay) [ $# -ge 2 ] || die "--delay needs a value (e.g. 1ms)"; delay=$2; shift 2 ;;
            *) die "unknown option '$1' (see --help)" ;;
        esac
    done
    case $n in ''|*[!0-9]*) die "N must be a number of hosts, got '$n'" ;; esac
    if [ "$n" -lt 1 ] || [ "$n" -gt 200 ]; then die "N must be 1..200, got $n"; fi
    [ "$(id -u)" = 0 ] || die "needs root (ip netns, veth, bridge, tc)"
    how_delay=""
    if [ -n "$delay" ]; then
        how_delay=$(delay_with) || exit 1
    fi

    hosts_down
    # a failure half-way leaves nothing behind
    trap 'hosts_down' EXIT
    ip link add "$TB_MH_BRIDGE" type bridge
    ip addr add "${TB_MH_NET}.1/24" dev "$TB_MH_BRIDGE"
    ip link set "$TB_MH_BRIDGE" up
    i=1
    while [ "$i" -le "$n" ]; do
        ns="${TB_MH_PREFIX}$i"
        ip netns add "$ns"
        ip link add "${ns}-br" type veth peer name "${ns}-eth"
        ip link set "${ns}-br" master "$TB_MH_BRIDGE"
        ip link set "${ns}-br" up
        ip link set "${ns}-eth" netns "$ns"
        in_ns "$ns" ip link set "${ns}-eth" name eth0
        in_ns "$ns" ip addr add "${TB_MH_NET}.$((10 + i))/24" dev eth0
        in_ns "$ns" ip link set lo up
        in_ns "$ns" ip link set eth0 up
        in_ns "$ns" ip route add default via "${TB_MH_NET}.1"
        if [ -n "$TB_MH_TCP_CC" ]; then
            in_ns "$ns" ip route replace "${TB_MH_NET}.0/24" dev eth0 proto kernel scope link \
                src "${TB_MH_NET}.$((10 + i))" congctl "$TB_MH_TCP_CC" ||
                die "ip route ... congctl $TB_MH_TCP_CC failed in $ns (tcp_available_congestion_control: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control))"
        fi
        shape eth0 "$ns" 1
        shape "${ns}-br" "" 0
        i=$((i + 1))
    done
    trap - EXIT
    echo "hosts.sh: $n hosts ${TB_MH_PREFIX}1..${TB_MH_PREFIX}$n at ${TB_MH_NET}.11..${TB_MH_NET}.$((10 + n)) on $TB_MH_BRIDGE (${TB_MH_NET}.1);" \
         "link: ${rate:-unshaped}${delay:+, +$delay one way ($how_delay)}${TB_MH_TCP_CC:+; TCP $TB_MH_TCP_CC between hosts}"
}

hosts_status() {
    ip -br addr show dev "$TB_MH_BRIDGE" 2>/dev/null || echo "no bridge $TB_MH_BRIDGE"
    for ns in $(our_namespaces); do
        echo "== $ns"
        in_ns "$ns" ip -br addr
        in_ns "$ns" tc qdisc show dev eth0
        tc qdisc show dev "${ns}-br"
        if command -v iptables >/dev/null 2>&1; then in_ns "$ns" iptables -S OUTPUT | grep NFQUEUE || true; fi
    done
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1
shift
case $cmd in
    up) [ $# -ge 1 ] || die "up needs N"; hosts_up "$@" ;;
    down) [ "$(id -u)" = 0 ] || die "needs root"; hosts_down ;;
    status) hosts_status ;;
    -h|--help|help) usage ;;
    *) die "unknown command '$cmd' (up N | down | status)" ;;
esac
