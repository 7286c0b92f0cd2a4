#!/bin/sh
# run_test.sh - trainbench across three emulated hosts (network namespaces,
# veth, a bridge: hosts.sh), started from a hostfile by launch/hostfile.sh
# --fabric tcp with Open MPI's remote start going through rsh_agent.sh
# (nsenter into the host's network namespace + its own hostname, a clean
# environment like ssh).
#
#   run_test.sh TRAINBENCH PYTHON [CHECK_RESULTS]
#
# Checks, in order (any failure: exit 1):
#   1. each rank runs in its own host: rank r reports hostname tbh(r+1) and
#      address 10.212.0.(11+r) on eth0, and the agent was called for all 3;
#   2. `trainbench preflight` (when the binary has it) passes across them and
#      names all three hosts;
#   3. `trainbench train` (resnet18, 32 px, batch 4, scaling 2 steps) exits
#      0, and its results file meets check_results.py --ranks 1,2,3 with a
#      `hostnames` attribute and a /ranks/host column naming 3 distinct
#      hosts, tbh1..tbh3.
# The hosts are always torn down (trap), and torn down first, so a run that
# was killed does not break the next. Exit 77 (skipped), with the reason,
# when this machine cannot host them (common.sh: mh_require_hosts) or PYTHON
# has no h5py.
#
# Environment (knobs, with defaults):
#   TB_MH_TIMEOUT=240      seconds each mpirun may take before it is killed
#   TB_MH_LOCK=/run/lock/trainbench-multihost.lock   flock(1) file that keeps
#                          two emulated-host runs (other build trees, other
#                          ctest runs) from tearing down each other's hosts
#   TB_MH_PREFIX, TB_MH_NET, TB_MH_BRIDGE: as in hosts.sh (tbh, 10.212.0, tbbr0)
set -eu

[ $# -ge 2 ] || { echo "usage: run_test.sh TRAINBENCH PYTHON [CHECK_RESULTS]" >&2; exit 2; }
tb=$1
py=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
check=${3:-$root/tests/check_results.py}
: "${TB_MH_TIMEOUT:=240}"
# shellcheck source=tests/multihost/common.sh
. "$here/common.sh"

mh_require_hosts
"$py" -c "import h5py" 2>/dev/null || skip "$py has no h5py"
[ -x "$tb" ] || fail "no trainbench at $tb"
case $tb in /*) ;; *) tb=$(pwd)/$tb ;; esac

mh_lock 240
work=$(pwd)/multihost_work
rm -rf "$work"
mkdir -p "$work"

cleanup() {
    "$here/hosts.sh" down || echo "run_test.sh: hosts.sh down failed" >&2
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$here/hosts.sh" up 3

# launch/hostfile.sh over TCP on the hosts' subnet, remote start through the agent
mh_launch_env
export TB_NCCL_SOCKET_IFNAME=eth0
export TB_MH_AGENT_LOG="$work/agent.log"
# the hostfile names the hosts by TB_MH_PREFIX (tests/multihost/hostfile is
# the default's, tbh1..tbh3)
hostfile=$work/hostfile
for i in 1 2 3; do echo "$TB_MH_PREFIX$i slots=1"; done >"$hostfile"
launch() {
    timeout "$TB_MH_TIMEOUT" "$root/launch/hostfile.sh" --hostfile "$hostfile" --fabric tcp -n 3 -- "$@" 9>&-
}

echo "== 1. one rank per emulated host"
# shellcheck disable=SC2016  # expanded by each rank's shell
launch sh -c 'echo "rank $OMPI_COMM_WORLD_RANK $(hostname) $(ip -o -4 addr show dev eth0 | awk "{print \$4}")"' \
    >"$work/where.txt" || fail "mpirun across the emulated hosts failed"
cat "$work/where.txt"
for r in 0 1 2; do
    grep -qx "rank $r $TB_MH_PREFIX$((r + 1)) $TB_MH_NET.$((11 + r))/24" "$work/where.txt" ||
        fail "rank $r did not run on $TB_MH_PREFIX$((r + 1)) at $TB_MH_NET.$((11 + r))"
done
for h in 1 2 3; do
    grep -q "^$TB_MH_PREFIX$h: " "$TB_MH_AGENT_LOG" || fail "mpirun did not start $TB_MH_PREFIX$h through rsh_agent.sh"
done

echo "== 2. preflight"
if "$tb" preflight --help >/dev/null 2>&1; then
    launch "$tb" preflight >"$work/preflight.txt" 2>&1 || { cat "$work/preflight.txt"; fail "preflight failed across the emulated hosts"; }
    cat "$work/preflight.txt"
    for h in 1 2 3; do
        grep -qw "$TB_MH_PREFIX$h" "$work/preflight.txt" || fail "preflight's table does not name $TB_MH_PREFIX$h"
    done
else
    echo "(this trainbench has no preflight subcommand)"
fi

echo "== 3. train across 3 hosts"
launch "$tb" train --model resnet18 --image-size 32 --batch-size 4 --steps 4 --warmup-steps 1 \
    --scaling-steps 2 --scaling-warmup 1 --threads 1 --loader-threads 1 --results "$work/multihost.h5" ||
    fail "trainbench train across the emulated hosts failed"
"$py" "$check" "$work/multihost.h5" --ranks 1,2,3 || fail "results file check failed"
"$py" - "$work/multihost.h5" "$TB_MH_PREFIX" <<'EOF' || fail "the results do not name 3 distinct hosts"
import re, sys
import h5py
path, prefix = sys.argv[1], sys.argv[2]
with h5py.File(path, "r") as f:
    attr = f.attrs["hostnames"]
    attr = attr.decode() if isinstance(attr, bytes) else str(attr)
    hosts = re.findall(r"([^,\s][^,]*?) \((\d+) ranks?\)", attr)
    per_rank = [h.decode() if isinstance(h, bytes) else str(h) for h in f["ranks/host"][()]]
    world = int(f.attrs["world_size"])
print(f"# hostnames attribute: {attr!r}; /ranks/host: {per_rank}")
want = [f"{prefix}{i}" for i in (1, 2, 3)]
bad = []
if sorted(h for h, _ in hosts) != want or any(n != "1" for _, n in hosts):
    bad.append(f"hostnames {attr!r} is not {', '.join(w + ' (1 rank)' for w in want)}")
if len(set(per_rank)) != 3 or sorted(per_rank) != want:
    bad.append(f"/ranks/host {per_rank} does not hold 3 distinct hosts {want}")
if world != 3:
    bad.append(f"world_size {world}, expected 3")
for b in bad:
    print("FAIL " + b)
sys.exit(1 if bad else 0)
EOF

echo "== teardown"
trap - EXIT
"$here/hosts.sh" down
left=$(ip netns list | awk '{print $1}' | grep -E "^${TB_MH_PREFIX}[0-9]+\$" || true)
[ -z "$left" ] || fail "namespaces left after teardown: $left"
echo "PASS: trainbench ran across 3 emulated hosts and its results name them"
