#!/bin/sh
# common.sh - what the emulated-host scripts share (sourced by run_test.sh,
# test_shaped_link.sh and scaling_links.sh; `here` is tests/multihost).
#
#   mh_require_hosts [tc]   skip (exit 77), saying why, unless this machine
#                           can host them: root, the commands (ip, nsenter,
#                           unshare, mpirun, and tc), a bridge and veth pairs
#                           (tried in a throwaway network namespace), a named
#                           namespace (ip netns add, entered with nsenter),
#                           unshare --uts
#   mh_in_ns NS CMD...      run CMD in emulated host NS's network namespace
#                           (nsenter: unlike `ip netns exec` / `ip -n` it needs
#                           no `mount --make-rslave /`, which fails in a chroot
#                           whose / is not a mount point)
#   mh_lock SECONDS         hold the emulated-host lock (or fail after SECONDS)
#   mh_launch_env [ARGS]    the launch/hostfile.sh settings for the hosts, with
#                           ARGS appended to mpirun's
#
# Environment (knobs, with defaults; the same as hosts.sh):
#   TB_MH_PREFIX=tbh, TB_MH_NET=10.212.0, TB_MH_BRIDGE=tbbr0
#   TB_MH_LOCK=/run/lock/trainbench-multihost.lock   flock(1) file that keeps
#                          two emulated-host runs (other build trees, other
#                          ctest runs) from tearing down each other's hosts

: "${TB_MH_PREFIX:=tbh}"
: "${TB_MH_NET:=10.212.0}"
: "${TB_MH_BRIDGE:=tbbr0}"
export TB_MH_PREFIX TB_MH_NET TB_MH_BRIDGE

skip() {
    echo "SKIP: $*"
    exit 77
}
fail() {
    echo "FAIL: $*"
    exit 1
}

# where `ip netns add` keeps its namespaces (iproute2's NETNS_RUN_DIR)
TB_MH_NETNS_DIR=/var/run/netns

mh_in_ns() {
    _ns=$1
    shift
    nsenter --net="$TB_MH_NETNS_DIR/$_ns" "$@"
}

# shellcheck disable=SC2120  # the argument is optional
mh_require_hosts() {
    [ "$(id -u)" = 0 ] || skip "emulated hosts need root (ip netns, veth, bridge${1:+, $1})"
    command -v ip >/dev/null 2>&1 || skip "no ip (install iproute2)"
    command -v nsenter >/dev/null 2>&1 || skip "no nsenter (install util-linux)"
    command -v unshare >/dev/null 2>&1 || skip "no unshare (install util-linux)"
    command -v mpirun >/dev/null 2>&1 || skip "no mpirun (install openmpi-bin)"
    if [ "${1:-}" = tc ]; then
        command -v tc >/dev/null 2>&1 || skip "no tc (install iproute2)"
    fi
    # what hosts.sh builds, in a network namespace of its own that vanishes
    # with the command: nothing of this machine's network changes
    _probe="ip link add tbprobe0 type bridge && ip link add tbprobe1 type veth peer name tbprobe2 &&
            ip link set tbprobe1 master tbprobe0 && ip link set tbprobe1 up"
    [ "${1:-}" = tc ] && _probe="$_probe && tc qdisc add dev tbprobe1 root tbf rate 1mbit burst 32kb latency 100ms"
    _err=$(unshare --net sh -c "$_probe" 2>&1) ||
        skip "cannot build the emulated network here (bridge, veth${1:+, $1} in a new network namespace): $_err"
    _err=$(unshare --uts true 2>&1) || skip "unshare --uts is not permitted here: $_err"
    # a named namespace, entered the way rsh_agent.sh and hosts.sh enter it
    _ns=tbprobe$$
    _err=$(ip netns add "$_ns" 2>&1) || skip "ip netns add fails here: $_err"
    _err=$(mh_in_ns "$_ns" ip link show lo 2>&1) || {
        ip netns del "$_ns" 2>/dev/null || true
        skip "cannot enter a named network namespace (nsenter --net=$TB_MH_NETNS_DIR/$_ns): $_err"
    }
    ip netns del "$_ns" || fail "ip netns del $_ns failed"
}

# One emulated-host run at a time on this machine, across ctest invocations
# and build trees: the hosts, bridge and subnet have fixed names. The lock is
# fd 9; callers close it for mpirun (9>&-), so a stray rank cannot keep it.
mh_lock() {
    command -v flock >/dev/null 2>&1 || return 0
    exec 9>"${TB_MH_LOCK:-/run/lock/trainbench-multihost.lock}"
    flock -w "$1" 9 ||
        fail "another emulated-host run held ${TB_MH_LOCK:-/run/lock/trainbench-multihost.lock} for $1 s"
}

# shellcheck disable=SC2120,SC2154  # the argument is optional; $here is the caller's
mh_launch_env() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # MPI over TCP on the hosts' subnet; remote start through the agent
    export TB_IFACE="$TB_MH_NET.0/24" TB_BTL=tcp,self
    export TB_MPIRUN_ARGS="--mca plm_rsh_agent $here/rsh_agent.sh --mca plm_rsh_no_tree_spawn 1${1:+ $1}"
    # the agent starts ranks with a clean environment, as ssh does: a sanitizer
    # build's settings (.ci/run: leak suppressions, slow unwinder) must be exported
    export TB_EXPORT="${TB_EXPORT:-} ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS"
}
