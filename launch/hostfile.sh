#!/bin/sh
# launch/hostfile.sh - run trainbench across the nodes of an Open MPI
# hostfile, one rank per GPU, over InfiniBand, RoCE v2 or TCP.
#
#   launch/hostfile.sh --hostfile FILE [--fabric auto|ib|roce|tcp] [-n N]
#                      [--dry-run] [--help] -- trainbench [ARGS...]
#
# FILE lists one node per line with its GPU count as slots ("gpu01 slots=8");
# ranks fill each node's slots in order, so a node's local ranks 0..slots-1
# take its GPUs 0..slots-1. -n N (or TB_NP) defaults to the sum of the slots.
# --dry-run prints the mpirun command on one line and exits 0.
#
# Fabrics (--fabric or TB_FABRIC; default auto):
#   auto  no transport settings: Open MPI and NCCL choose (UCX / InfiniBand
#         when they find it); TB_IFACE, TB_NCCL_SOCKET_IFNAME, TB_GDR_LEVEL
#         still apply.
#   ib    MPI over UCX (pml ucx, osc ucx) on TB_IB_HCA; NCCL_IB_HCA the same
#         ports; NCCL_SOCKET_IFNAME (bootstrap) from TB_IFACE (e.g. ib0).
#   roce  as ib, plus the RoCE v2 GID index for UCX and NCCL
#         (UCX_IB_GID_INDEX, NCCL_IB_GID_INDEX = TB_GID_INDEX) and the
#         traffic class (TB_IB_TC); TB_IFACE (the RoCE port's netdev) is
#         required unless NCCL_SOCKET_IFNAME is set: NCCL's bootstrap and
#         MPI's out-of-band channel use it.
#   tcp   MPI over TCP (pml ob1, btl TB_BTL) limited to TB_IFACE
#         (btl_tcp_if_include, oob_tcp_if_include); NCCL_IB_DISABLE=1 so NCCL
#         uses sockets too, on NCCL_SOCKET_IFNAME.
# Values derived from knobs travel as -x NAME=VALUE and --mca NAME VALUE; a
# variable already set in the environment wins and is exported by name.
#
# Exported to every rank (-x NAME) when set: NCCL_*, UCX_*, OMP_*, TB_GRAD_SYNC_*,
# CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, CUDA_LAUNCH_BLOCKING,
# CUDA_MODULE_LOADING, OPENBLAS_NUM_THREADS, PATH, LD_LIBRARY_PATH and the
# names in TB_EXPORT. Running as root adds --allow-run-as-root. A
# CUDA_VISIBLE_DEVICES that hides every GPU ('', -1, NoDevFiles) is passed
# on too, with a warning.
#
# In a container (launch/container/): each rank as `apptainer exec --nv
# trainbench.sif trainbench ARGS` after the --, started by this node's
# mpirun (its Open MPI must match the image's, 4.1 on Debian 12); under
# Slurm, launch/slurm.sbatch with TB_SIF or TB_CONTAINER_IMAGE instead.
#
# Environment (knobs, with defaults):
#   TB_HOSTFILE=           the hostfile, as --hostfile
#   TB_FABRIC=auto         auto | ib | roce | tcp, as --fabric
#   TB_NP=                 ranks, as -n (default: sum of the hostfile's slots)
#   TB_IB_HCA=             HCA ports for UCX_NET_DEVICES and NCCL_IB_HCA,
#                          comma-separated (mlx5_0:1,mlx5_1:1) (ib, roce;
#                          unset: NCCL and UCX use every port they find)
#   TB_GID_INDEX=          RoCE v2 GID index (roce): the row of `show_gids`
#                          with VER v2 and the port's IPv4 address (when
#                          unset, NCCL_IB_GID_INDEX or UCX_IB_GID_INDEX if
#                          one is set, so that both use the same index;
#                          else NCCL and UCX choose the RoCE v2 GID)
#   TB_IB_TC=              traffic class for NCCL_IB_TC and
#                          UCX_IB_TRAFFIC_CLASS (e.g. 106: the switch's
#                          lossless queue); unset: the fabric's default
#   TB_IFACE=              interface or subnet for MPI's TCP traffic and
#                          out-of-band channel (eth0, ib0, 10.1.0.0/16)
#   TB_NCCL_SOCKET_IFNAME= NCCL_SOCKET_IFNAME (default: TB_IFACE when it is a
#                          name; NCCL takes interface names, not subnets:
#                          a subnet leaves NCCL to pick one, with a note)
#   TB_GDR_LEVEL=          NCCL_NET_GDR_LEVEL (LOC, PIX, PXB, PHB, SYS);
#                          unset: NCCL decides (GPUDirect RDMA needs
#                          nvidia-peermem)
#   TB_BTL=tcp,self,vader  Open MPI BTLs for --fabric tcp
#   TB_PE=                 cores per rank: --map-by slot:PE=K --bind-to core,
#                          or with TB_SOCKETS=S, when every node runs T
#                          ranks (equal slots, all used) and S divides T,
#                          --map-by ppr:T/S:socket:PE=K (Open MPI 5:
#                          package): T/S ranks on each socket, local ranks
#                          0..T/S-1 on the first, where slot:PE=K fills
#                          socket 0 first (TB_CORES=C, each node's cores:
#                          checked that T/S ranks of K fit C/S);
#                          unset: --map-by socket --rank-by core --bind-to
#                          socket (Open MPI 5: --map-by package:nooversubscribe --rank-by
#                          fill --bind-to package): each node's ranks fill
#                          its first socket, then the next, each on the
#                          cores of its socket (safe when the nodes' core
#                          counts are not known here; local rank r beside
#                          GPU r only when -n uses every slot)
#   TB_MPI_PREFIX=         Open MPI's install prefix on the nodes (--prefix),
#                          when orted is not on the remote PATH
#   TB_MPIRUN=mpirun       the launcher: Open MPI's mpirun (checked before a
#                          run: it must be in PATH and say "(Open MPI)",
#                          or "(OpenRTE)" as mpiexec and orterun do)
#   TB_MPIRUN_ARGS=        extra mpirun arguments, split at whitespace (e.g.
#                          "--mca plm_rsh_agent ssh --mca plm_rsh_args -p2222")
#   TB_EXPORT=             more variable names to export, separated by spaces
#                          or commas
#   TB_DRY_RUN=0           1: as --dry-run
set -eu

TB_SCRIPT=hostfile.sh
# shellcheck source=launch/common.sh
. "$(CDPATH='' cd -P -- "$(dirname -- "$0")" >/dev/null && pwd)/common.sh"

np=${TB_NP:-}
hostfile=${TB_HOSTFILE:-}
fabric=${TB_FABRIC:-auto}
while [ $# -gt 0 ]; do
    case $1 in
        --hostfile | -hostfile | --machinefile)
            [ $# -ge 2 ] || tb_die "$1 needs a file"
            hostfile=$2
            shift 2 ;;
        --fabric)
            [ $# -ge 2 ] || tb_die "--fabric needs auto, ib, roce or tcp"
            fabric=$2
            shift 2 ;;
        -n | -np | --np)
            [ $# -ge 2 ] || tb_die "$1 needs a number of ranks"
            np=$2
            shift 2 ;;
        --dry-run) TB_DRY_RUN=1; shift ;;
        -h | --help) tb_help "$0"; exit 0 ;;
        --) shift; break ;;
        -*) tb_die "unknown option '$1' (see --help)" ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || tb_die "no command: launch/hostfile.sh --hostfile FILE -- trainbench ARGS..."
[ -n "$hostfile" ] || tb_die "--hostfile FILE (or TB_HOSTFILE) is required"
[ -d "$hostfile" ] && tb_die "hostfile '$hostfile' is a directory: give --hostfile a file of 'host slots=GPUS' lines"
[ -r "$hostfile" ] || tb_die "cannot read hostfile '$hostfile'"

# slots per node: "host slots=N" (N >= 1, its GPUs; "slots = N", count=N
# and cpu=N as Open MPI reads them). A bare "host" is
# refused: Open MPI 4.1 counts every core of it as a slot, so all ranks
# would land on the first host. So is a host named twice: Open MPI adds
# up its slots.
slots=$(awk '
    NR == 1 && /^\357\273\277/ { print "bom"; err = 1; exit }  # a UTF-8 byte-order mark would join the first name
    /\r$/ { print "crlf " NR; err = 1; exit }
    { sub(/#.*/, ""); gsub(/[ \t]*=[ \t]*/, "="); $0 = $0 }  # "slots = 8" as Open MPI reads it
    NF == 0 { next }
    { n = ""
      for (i = 2; i <= NF; i++)  # count= and cpu= are Open MPI names of slots= too
          if ($i ~ /^(slots|count|cpu)=/) { n = substr($i, index($i, "=") + 1) }
      if (n == "") { print "bare " NR " " $1; err = 1; exit }
      if (n !~ /^[0-9]+$/ || n + 0 < 1) { print "bad " NR ": " $0; err = 1; exit }  # + 0: 08 is 8, not text
      if ($1 in seen) { print "twice " NR " " $1 " " seen[$1]; err = 1; exit }
      seen[$1] = NR
      hosts++; total += n  # 08 and 010 as 8 and 10, as Open MPI reads them
      if (hosts == 1) each = n + 0; else if (n + 0 != each) each = 0 }
    END { if (!err && hosts) print total " " hosts " " each }' "$hostfile")  # each: every host's slots, 0 if they differ
case $slots in
    bom) tb_die "hostfile $hostfile line 1: starts with a UTF-8 byte-order mark (invisible), which would become" \
                "part of the first host's name: remove it with sed -i '1s/^\xEF\xBB\xBF//' $hostfile" ;;
    crlf*) tb_die "hostfile $hostfile line ${slots#crlf }: ends in a carriage return (a DOS/Windows line ending): convert the file with sed -i 's/\\r\$//' $hostfile" ;;
    bad*) tb_die "hostfile $hostfile line ${slots#bad }: slots must be a positive number" ;;
    bare*) tb_bare=${slots#bare }
           tb_die "hostfile $hostfile line ${tb_bare%% *}: no slots= (Open MPI would count every core as a slot and put all ranks on the first host): write '${tb_bare#* } slots=<its GPUs>'" ;;
    twice*) tb_tw=${slots#twice }        # "LINE HOST FIRST_LINE"
            tb_host=${tb_tw#* }
            tb_die "hostfile $hostfile line ${tb_tw%% *}: ${tb_host%% *} is named again (first on line ${tb_host#* }); Open MPI would add up its slots and put more ranks on it than it has GPUs: name each host once" ;;
    '') tb_die "hostfile $hostfile names no host" ;;
esac
tb_each=${slots##* }  # every host's slots (0: they differ)
slots=${slots% *}     # "TOTAL HOSTS"
[ -n "$np" ] || np=${slots%% *}
tb_need_count "-n (ranks)" "$np"
np=$tb_n
if [ "$np" -gt "${slots%% *}" ]; then
    tb_die "$np ranks but $hostfile has ${slots%% *} slots on ${slots#* } nodes (one rank per GPU: raise slots= or lower -n)"
fi

tb_fabric "$fabric"
# this node's CUDA_VISIBLE_DEVICES travels to every rank of every node
if tb_is_set CUDA_VISIBLE_DEVICES && [ "$(tb_visible_gpus)" -eq 0 ]; then
    echo "$TB_SCRIPT: warning: CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' hides every GPU, and goes to every rank" \
        "on every node: unset it, or set the GPUs the nodes should use" >&2
fi

tb_check_mpirun
tb_add "${TB_MPIRUN:-mpirun}" -np "$np" --hostfile "$hostfile"
if [ -n "${TB_MPI_PREFIX:-}" ]; then
    tb_add --prefix "$TB_MPI_PREFIX"
fi
if [ "$(id -u)" = 0 ]; then
    tb_add --allow-run-as-root
fi
if [ -n "${TB_PE:-}" ]; then
    tb_need_count TB_PE "$TB_PE"
    TB_PE=$tb_n
    if [ -n "${TB_SOCKETS:-}" ]; then
        # the nodes' sockets, told (this node may be a login node): each
        # node's ranks shared evenly over them when every node runs the
        # same number (every slot used, equal slots)
        tb_tpn=""
        [ "$tb_each" -gt 0 ] && [ "$np" -eq "${slots%% *}" ] && tb_tpn=$tb_each
        tb_c=${TB_CORES:-$((TB_PE * ${tb_tpn:-1}))} # unset: not checked against the sockets' cores
        tb_need_count TB_CORES "$tb_c"
        tb_c=$tb_n
        tb_map_pe "$tb_tpn" "$TB_PE" "$tb_c"
    else
        tb_map=slot:PE=$TB_PE
        tb_note "TB_PE=$TB_PE without TB_SOCKETS: each node's ranks take cores in order, filling socket 0 first" \
            "(set TB_SOCKETS to the nodes' sockets to share them evenly)"
    fi
    tb_add --map-by "$tb_map" --bind-to core
else
    tb_add_socket_mapping # local rank r on GPU r: 0..k-1 on the first socket
fi
tb_add_mpirun_fabric
tb_add_passthrough remote
tb_add_split "${TB_MPIRUN_ARGS:-}"
tb_add "$@"
tb_finish
