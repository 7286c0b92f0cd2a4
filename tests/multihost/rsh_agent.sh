#!/bin/sh
# rsh_agent.sh - Open MPI's remote-start agent for the emulated hosts of
# hosts.sh: mpirun calls it as ssh would be called,
#     rsh_agent.sh [SSH-OPTIONS] HOST COMMAND...
# and it runs COMMAND (joined and parsed by sh, as ssh's remote shell does)
# inside HOST's network namespace (entered with nsenter, which works in a
# chroot where `ip netns exec` fails), in a fresh UTS namespace whose
# hostname is HOST's name, so MPI_Get_processor_name and gethostname differ
# per host.
# Like ssh, it starts COMMAND with a clean environment (PATH, HOME, USER,
# LANG, TMPDIR only): variables reach remote ranks only when mpirun exports
# them (-x), as on a real cluster.
#
# HOST is a host name (tbh3), its address (10.212.0.13) or name@address.
# Use: mpirun --mca plm_rsh_agent tests/multihost/rsh_agent.sh
#             --mca plm_rsh_no_tree_spawn 1 ...
#
# Environment (knobs, with defaults; the same as hosts.sh):
#   TB_MH_PREFIX=tbh     namespace / host name prefix
#   TB_MH_NET=10.212.0   first three octets of the hosts' /24
#   TB_MH_AGENT_LOG=     when set, a file to which each call is appended
set -eu

: "${TB_MH_PREFIX:=tbh}"
: "${TB_MH_NET:=10.212.0}"

# ssh options Open MPI may pass before the host (plm_rsh_args): skip them,
# with the value of those that take one
while [ $# -gt 0 ]; do
    case $1 in
        -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;
        -*) shift ;;
        *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "rsh_agent.sh: usage: rsh_agent.sh HOST COMMAND..." >&2; exit 255; }
host=${1#*@}
shift

case $host in
    "$TB_MH_NET".*)
        octet=${host##*.}
        case $octet in ''|*[!0-9]*) echo "rsh_agent.sh: bad address '$host'" >&2; exit 255 ;; esac
        name="${TB_MH_PREFIX}$((octet - 10))" ;;
    *) name=${host%%.*} ;;
esac
case $name in
    "$TB_MH_PREFIX"[0-9]*) ;;
    *) echo "rsh_agent.sh: '$host' is not an emulated host (${TB_MH_PREFIX}N or ${TB_MH_NET}.(10+N))" >&2; exit 255 ;;
esac
if ! ip netns list | awk '{print $1}' | grep -qx "$name"; then
    echo "rsh_agent.sh: no namespace '$name' (run tests/multihost/hosts.sh up N first)" >&2
    exit 255
fi
if [ -n "${TB_MH_AGENT_LOG:-}" ]; then
    echo "$name: $*" >>"$TB_MH_AGENT_LOG"
fi

# shellcheck disable=SC2016  # $1 and $* belong to the inner sh
exec nsenter --net="/var/run/netns/$name" unshare --uts \
    env -i PATH="$PATH" HOME="${HOME:-/}" USER="${USER:-$(id -un)}" LANG="${LANG:-C}" TMPDIR="${TMPDIR:-/tmp}" \
    sh -c 'hostname "$1" && shift && exec sh -c "$*"' rsh_agent "$name" "$@"
