#!/bin/sh
# common.sh - what the emulated-host scripts share (sourced by run_test.sh,
# test_shaped_link.sh and scaling_links.sh; `here` is tests/multihost).
#
#   mh_require_hosts [tc]   skip (exit 77) unless this machine can host them:
#                           root, ip netns, unshare --uts, mpirun (and tc)
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

# shellcheck disable=SC2120  # the argument is optional
mh_require_hosts() {
    [ "$(id -u)" = 0 ] || skip "emulated hosts need root (ip netns, veth, bridge${1:+, $1})"
    command -v ip >/dev/null 2>&1 || skip "no ip (iproute2)"
    ip netns list >/dev/null 2>&1 || skip "ip netns is not available here"
    if [ "${1:-}" = tc ]; then
        command -v tc >/dev/null 2>&1 || skip "no tc (iproute2)"
    fi
    command -v unshare >/dev/null 2>&1 || skip "no unshare (util-linux)"
    unshare --uts true 2>/dev/null || skip "unshare --uts is not permitted here"
    command -v mpirun >/dev/null 2>&1 || skip "no mpirun"
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
