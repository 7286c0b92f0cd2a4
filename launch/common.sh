# launch/common.sh - shared by the launch scripts (sourced, POSIX sh): shell
# quoting for --dry-run, the command being built, the variables that travel
# to every rank, and the fabric settings (InfiniBand, RoCE v2, TCP) that
# hostfile.sh, slurm.sbatch and slurm_mpirun.sbatch apply alike.
#
# The knobs read here are documented in the header of each script that uses
# them. A variable that is already set in the environment always wins over
# the value a knob would give it, and is passed on as it is.

# tb_quote WORD: WORD quoted for sh only when it needs to be
tb_quote() {
    case $1 in
        '') printf "''" ;;
        *[!A-Za-z0-9_./:=,+@%-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
        *) printf '%s' "$1" ;;
    esac
}

# tb_add WORD...: append words to the command ($TB_CMD), quoted
TB_CMD=""
tb_add() {
    for tb_w in "$@"; do
        TB_CMD="$TB_CMD${TB_CMD:+ }$(tb_quote "$tb_w")"
    done
}

# tb_add_split STRING: append STRING's whitespace-separated words (for
# TB_MPIRUN_ARGS and TB_SRUN_ARGS; no quoting inside them)
tb_add_split() {
    case $- in *f*) tb_noglob=1 ;; *) tb_noglob= ;; esac
    set -f # split, but never glob a [ * ? against this directory
    # shellcheck disable=SC2086  # splitting is the point
    [ -z "$1" ] || tb_add $1
    [ -n "$tb_noglob" ] || set +f # the caller's own setting back
}

tb_die() {
    printf '%s\n' "$TB_SCRIPT: error: $*" >&2 # not echo: dash's would turn a \r in a path or hint into a control character
    exit 2
}

tb_note() {
    printf '%s\n' "$TB_SCRIPT: note: $*" >&2
}

tb_is_set() {
    eval "[ \"\${$1+x}\" = x ]"
}

tb_is_uint() {
    case $1 in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac
}

# tb_need_count WHAT VALUE: VALUE must be a whole number >= 1; tb_n is it
# without leading zeros (the caller keeps that: $(( )) reads 08 as octal)
tb_need_count() {
    if ! tb_is_uint "$2" || [ "$2" -lt 1 ]; then
        tb_die "$1 must be a positive number, got '$2'"
    fi
    tb_n=${2#"${2%%[!0]*}"}
}

# Variables passed on by name when set: NCCL_*, UCX_*, OMP_*, trainbench's
# gradient-thread knobs (TB_GRAD_SYNC_*: comm/grad_sync.h), the CUDA
# device selection, BLAS threads, plus the names in TB_EXPORT (and, for
# remote hosts, PATH and LD_LIBRARY_PATH: tb_passthrough_names remote; under
# Slurm, slurm: the same without CUDA_VISIBLE_DEVICES, which Slurm sets per node).
tb_passthrough_names() {
    {
        env | sed -n -e 's/^\(NCCL_[A-Za-z0-9_]*\)=.*/\1/p' \
                     -e 's/^\(UCX_[A-Za-z0-9_]*\)=.*/\1/p' \
                     -e 's/^\(OMP_[A-Za-z0-9_]*\)=.*/\1/p' \
                     -e 's/^\(TB_GRAD_SYNC_[A-Z0-9_]*\)=.*/\1/p'
        tb_cvd=CUDA_VISIBLE_DEVICES
        [ "${1:-}" = slurm ] && tb_cvd= # Slurm sets each node's own: the batch node's would override them
        for tb_n in $tb_cvd CUDA_DEVICE_ORDER CUDA_LAUNCH_BLOCKING CUDA_MODULE_LOADING \
                    OPENBLAS_NUM_THREADS ${tb_export:-}; do
            if tb_is_set "$tb_n"; then echo "$tb_n"; fi
        done
        if [ "${1:-}" = remote ] || [ "${1:-}" = slurm ]; then
            for tb_n in PATH LD_LIBRARY_PATH; do
                if tb_is_set "$tb_n"; then echo "$tb_n"; fi
            done
        fi
    } | sort -u
}

# tb_check_export: TB_EXPORT's names (spaces or commas between them) as
# tb_export. A word that is not a variable name (NCCL_*, MY-VAR) would make
# tb_is_set fail and drop the exports after it unseen, so it stops the script.
tb_check_export() {
    tb_export=""
    case $- in *f*) tb_noglob=1 ;; *) tb_noglob= ;; esac
    set -f # NCCL_* must reach the check, not match files here
    for tb_n in $(printf '%s\n' "${TB_EXPORT:-}" | tr ',' ' '); do
        case $tb_n in
            [0-9]* | *[!A-Za-z0-9_]*)
                tb_die "TB_EXPORT: '$tb_n' is not a variable name (give names of letters, digits and _," \
                    "separated by spaces or commas; NCCL_*, UCX_* and OMP_* are passed on already)" ;;
        esac
        tb_export="$tb_export $tb_n"
    done
    [ -n "$tb_noglob" ] || set +f
}

# tb_add_passthrough local|remote|slurm: -x NAME for every variable of
# tb_passthrough_names, after TB_EXPORT's names are checked
tb_add_passthrough() {
    tb_check_export
    for tb_name in $(tb_passthrough_names "$1"); do
        tb_add -x "$tb_name"
    done
}

# tb_visible_gpus: the GPUs CUDA_VISIBLE_DEVICES lets CUDA see: the entries
# up to the first it cannot read (an index, GPU-UUID or MIG-UUID), so "",
# -1 or Slurm's NoDevFiles hide every GPU
tb_visible_gpus() {
    printf '%s\n' "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' |
        awk '/^([0-9]+|GPU-.+|MIG-.+)$/ { n++; next } { exit } END { print n + 0 }'
}

# Fabric settings, collected as two lists of NAME=VALUE lines:
#   TB_SET_ENV  environment variables for every rank (NCCL_*, UCX_*)
#   TB_SET_MCA  Open MPI MCA parameters (mpirun --mca NAME VALUE, or
#               OMPI_MCA_NAME=VALUE in the environment under srun)
TB_SET_ENV=""
TB_SET_MCA=""
# tb_env NAME VALUE: give NAME this value unless it is set already
tb_env() {
    if ! tb_is_set "$1"; then
        TB_SET_ENV="$TB_SET_ENV$1=$2
"
    fi
}
tb_mca() {
    if ! tb_is_set "OMPI_MCA_$1"; then
        TB_SET_MCA="$TB_SET_MCA$1=$2
"
    fi
}

# tb_fabric auto|ib|roce|tcp: fill TB_SET_ENV and TB_SET_MCA from the knobs
#   auto: no transport settings (Open MPI and NCCL pick UCX/InfiniBand
#         themselves when present); only the interface and GDR knobs apply
#   TB_IB_HCA       HCA ports, e.g. mlx5_0:1 or mlx5_0:1,mlx5_1:1 (ib, roce);
#                   unset: NCCL and UCX use every port they find (one named
#                   port on an 8-GPU node with 4-8 ports would leave NCCL
#                   a fraction of the bandwidth, without an error)
#   TB_GID_INDEX    RoCE v2 GID index (roce; default NCCL_IB_GID_INDEX or
#                   UCX_IB_GID_INDEX when one is set, else unset: NCCL >=
#                   2.21 and UCX choose the RoCE v2 GID themselves)
#   TB_IB_TC        IB traffic class, e.g. 106 for a lossless RoCE queue
#   TB_IFACE        TCP interface or subnet (eth0, ib0, 10.1.0.0/16)
#   TB_NCCL_SOCKET_IFNAME  NCCL bootstrap interface (default: TB_IFACE when
#                   it names interfaces; NCCL takes no subnets: with one,
#                   NCCL picks its interface, and a note says so)
#   TB_GDR_LEVEL    NCCL_NET_GDR_LEVEL (LOC, PIX, PXB, PHB, SYS)
#   TB_BTL          Open MPI BTLs for tcp (default tcp,self,vader)
# tb_nccl_exact LIST: LIST as NCCL's exact match ("=mlx5_1:1"): NCCL
# matches NCCL_IB_HCA and NCCL_SOCKET_IFNAME by prefix, so mlx5_1 would
# also take mlx5_10 and mlx5_11 (and eth1 eth10); a list that already
# starts with = or ^ (exclude) is NCCL's own syntax, kept
tb_nccl_exact() {
    case $1 in
        =* | ^*) echo "$1" ;;
        *) echo "=$1" ;;
    esac
}

# tb_fabric_ucx: what ib and roce share: MPI over UCX, the HCA ports
# (TB_IB_HCA, when set) and the traffic class (TB_IB_TC, when set) for UCX
# and NCCL alike
tb_fabric_ucx() {
    tb_mca pml ucx
    tb_mca osc ucx
    tb_mca btl ^openib
    if [ -n "${TB_IB_HCA:-}" ]; then
        case $TB_IB_HCA in
            ^*) ;; # NCCL's exclude list: UCX takes names only, so it keeps every port
            *) tb_env UCX_NET_DEVICES "${TB_IB_HCA#=}" ;;
        esac
        tb_env NCCL_IB_HCA "$(tb_nccl_exact "$TB_IB_HCA")"
    fi
    if [ -n "${TB_IB_TC:-}" ]; then
        tb_env NCCL_IB_TC "$TB_IB_TC"
        tb_env UCX_IB_TRAFFIC_CLASS "$TB_IB_TC"
    fi
}

# tb_nccl_ifname FABRIC: tb_ifname, NCCL's bootstrap interface:
# TB_NCCL_SOCKET_IFNAME, else TB_IFACE when it names interfaces (NCCL takes
# no subnets). An NCCL_SOCKET_IFNAME already set needs neither. Without any,
# roce stops (its bootstrap must use the RoCE port's netdev); with a subnet
# the other fabrics leave the interface to NCCL, and say so.
tb_nccl_ifname() {
    tb_ifname=${TB_NCCL_SOCKET_IFNAME:-}
    if [ -z "$tb_ifname" ] && [ -n "${TB_IFACE:-}" ]; then
        case $TB_IFACE in
            */*) ;;  # a subnet: MPI takes it, NCCL does not
            *) tb_ifname=$TB_IFACE ;;
        esac
    fi
    if [ -n "$tb_ifname" ] || [ -n "${NCCL_SOCKET_IFNAME:-}" ]; then
        return 0
    fi
    if [ "$1" = roce ] && [ -n "${TB_IFACE:-}" ]; then
        tb_die "--fabric roce: TB_IFACE '$TB_IFACE' is a subnet, which NCCL's bootstrap does not take:" \
            "also set TB_NCCL_SOCKET_IFNAME to the RoCE port's netdev (e.g. ens1f0np0: ibdev2netdev)"
    elif [ "$1" = roce ]; then
        tb_die "--fabric roce needs TB_IFACE (the RoCE port's netdev, e.g. ens1f0np0: ibdev2netdev) for NCCL's" \
            "and MPI's TCP bootstrap, or NCCL_SOCKET_IFNAME set"
    elif [ -n "${TB_IFACE:-}" ]; then
        tb_note "TB_IFACE '$TB_IFACE' is a subnet, which NCCL does not take: NCCL picks its own interface" \
            "(set TB_NCCL_SOCKET_IFNAME to name one)"
    fi
}

tb_fabric() {
    tb_nccl_ifname "$1"
    case $1 in
        auto)
            if [ -n "${TB_IFACE:-}" ]; then
                tb_mca btl_tcp_if_include "$TB_IFACE"
            fi
            ;;
        ib)
            tb_fabric_ucx
            ;;
        roce)
            # one GID index for both: a value already given to NCCL or UCX
            # is taken for the other too; none given: both choose
            tb_gid=${TB_GID_INDEX:-${NCCL_IB_GID_INDEX:-${UCX_IB_GID_INDEX:-}}}
            [ -z "$tb_gid" ] || tb_is_uint "$tb_gid" || tb_die "TB_GID_INDEX must be a number, got '$tb_gid'"
            tb_fabric_ucx
            if [ -n "$tb_gid" ]; then
                tb_env UCX_IB_GID_INDEX "$tb_gid"
                tb_env NCCL_IB_GID_INDEX "$tb_gid"
            fi
            ;;
        tcp)
            tb_mca pml ob1
            tb_mca btl "${TB_BTL:-tcp,self,vader}"
            if [ -n "${TB_IFACE:-}" ]; then
                tb_mca btl_tcp_if_include "$TB_IFACE"
            fi
            tb_env NCCL_IB_DISABLE 1
            ;;
        *) tb_die "unknown fabric '$1' (auto, ib, roce or tcp)" ;;
    esac
    # MPI's own out-of-band channel (mpirun <-> orted) and NCCL's bootstrap
    if [ -n "${TB_IFACE:-}" ]; then
        tb_mca oob_tcp_if_include "$TB_IFACE"
    fi
    if [ -n "$tb_ifname" ]; then
        tb_env NCCL_SOCKET_IFNAME "$(tb_nccl_exact "$tb_ifname")"
    fi
    if [ -n "${TB_GDR_LEVEL:-}" ]; then
        tb_env NCCL_NET_GDR_LEVEL "$TB_GDR_LEVEL"
    fi
}

# tb_add_mpirun_fabric: the fabric as mpirun arguments (--mca, -x NAME=VALUE)
tb_add_mpirun_fabric() {
    tb_lines=$TB_SET_MCA
    while [ -n "$tb_lines" ]; do
        tb_l=${tb_lines%%
*}
        tb_lines=${tb_lines#*
}
        tb_add --mca "${tb_l%%=*}" "${tb_l#*=}"
    done
    tb_lines=$TB_SET_ENV
    while [ -n "$tb_lines" ]; do
        tb_l=${tb_lines%%
*}
        tb_lines=${tb_lines#*
}
        tb_add -x "$tb_l"
    done
}

# tb_add_env_fabric: the fabric as NAME=VALUE words for `env` (srun)
tb_add_env_fabric() {
    tb_lines=$TB_SET_MCA
    while [ -n "$tb_lines" ]; do
        tb_l=${tb_lines%%
*}
        tb_lines=${tb_lines#*
}
        tb_add "OMPI_MCA_$tb_l"
    done
    tb_lines=$TB_SET_ENV
    while [ -n "$tb_lines" ]; do
        tb_l=${tb_lines%%
*}
        tb_lines=${tb_lines#*
}
        tb_add "$tb_l"
    done
}

# tb_cpu_layout: "CORES SOCKETS PER_SOCKET" of the CPUs this process may
# run on (its affinity: a Slurm job's or container's cpuset, not every core
# of the machine): their cores (not hardware threads), the sockets holding
# them and the fewest of those cores on one socket; "0 0 0" without lscpu
tb_cpu_layout() {
    tb_allowed=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status 2>/dev/null)
    lscpu -p=CPU,CORE,SOCKET 2>/dev/null | awk -F, -v allowed="$tb_allowed" '
        BEGIN { n = split(allowed, r, ","); for (i = 1; i <= n; i++) { m = split(r[i], ab, "-");
                lo = ab[1]; hi = (m > 1 ? ab[2] : ab[1]); for (c = lo; c <= hi; c++) ok[c] = 1 } }
        /^#/ { next }
        (allowed == "" || ($1 in ok)) && !(($2 "," $3) in core) { core[$2 "," $3] = 1; t++; per[$3]++ }
        END { for (s in per) { ns++; if (min == "" || per[s] < min) min = per[s] }
              print t + 0, ns + 0, min + 0 }'
}

# tb_physical_cores: the cores of tb_cpu_layout; nproc without lscpu
tb_physical_cores() {
    tb_c=$(tb_cpu_layout) || tb_c=0
    tb_c=${tb_c%% *}
    if [ "${tb_c:-0}" -gt 0 ] 2>/dev/null; then
        echo "$tb_c"
    else
        nproc 2>/dev/null || echo 1
    fi
}

# tb_sockets CORES: tb_nsock, this node's sockets, and tb_sock_cores, the
# cores of each: TB_SOCKETS and CORES / TB_SOCKETS when it is set, else
# those of tb_cpu_layout (1 socket when it cannot tell)
tb_sockets() {
    if [ -n "${TB_SOCKETS:-}" ]; then
        tb_need_count TB_SOCKETS "$TB_SOCKETS"
        tb_nsock=$tb_n
        tb_sock_cores=$(($1 / tb_nsock))
    else
        tb_c=$(tb_cpu_layout) || tb_c="0 0 0"
        tb_sock_cores=${tb_c##* }
        tb_c=${tb_c#* }
        tb_nsock=${tb_c%% *}
    fi
    [ "$tb_nsock" -ge 1 ] 2>/dev/null || tb_nsock=1
}

# tb_per_socket RANKS PE CORES: tb_pps, the ranks each socket of a node
# takes when its RANKS ranks of PE cores share its sockets evenly and fit
# them (RANKS empty: the nodes' counts differ); else empty, with a note when
# the node has several sockets: the ranks then take cores in order, and
# fill socket 0 before the next
tb_per_socket() {
    tb_pps=""
    tb_sockets "$3"
    [ "$tb_nsock" -gt 1 ] || return 0
    tb_how="ranks take cores in order, filling socket 0 first"
    if [ -z "$1" ]; then
        tb_note "the nodes run different numbers of ranks: $tb_how"
    elif [ $(($1 % tb_nsock)) -ne 0 ]; then
        tb_note "$1 ranks a node do not divide evenly over its $tb_nsock sockets: $tb_how"
    elif [ $(($1 * $2 / tb_nsock)) -gt "$tb_sock_cores" ]; then
        tb_note "$(($1 / tb_nsock)) ranks of $2 cores do not fit a socket's $tb_sock_cores cores: $tb_how"
    else
        tb_pps=$(($1 / tb_nsock))
    fi
}

# tb_map_pe RANKS PE CORES: tb_map, the --map-by for RANKS ranks a node of
# PE cores each: ppr:N:socket:PE=PE (Open MPI 5: package), N ranks on each
# socket (local ranks 0..N-1 on the first), when tb_per_socket finds N; else
# slot:PE=PE
# shellcheck disable=SC2034  # tb_map is the caller's
tb_map_pe() {
    tb_per_socket "$@"
    if [ -z "$tb_pps" ]; then
        tb_map=slot:PE=$2
    elif [ "$(tb_mpi_major)" -ge 5 ] 2>/dev/null; then
        tb_map=ppr:$tb_pps:package:PE=$2
    else
        tb_map=ppr:$tb_pps:socket:PE=$2
    fi
}

# tb_slurm_pe: tb_cores, this node's cores (TB_CORES, else its CPU set's),
# and tb_pe, SLURM_CPUS_PER_TASK in cores: where Slurm counts hardware
# threads as CPUs (SLURM_CPUS_ON_NODE above the cores), 12 CPUs a task on
# 2 threads a core are 6 cores
tb_slurm_pe() {
    tb_need_count SLURM_CPUS_PER_TASK "$SLURM_CPUS_PER_TASK"
    tb_pe=$tb_n
    tb_cores=${TB_CORES:-$(tb_physical_cores)}
    tb_need_count TB_CORES "$tb_cores"
    tb_cores=$tb_n
    if tb_is_uint "${SLURM_CPUS_ON_NODE:-}" && [ "$SLURM_CPUS_ON_NODE" -gt "$tb_cores" ]; then
        tb_pe=$((tb_pe * tb_cores / ${SLURM_CPUS_ON_NODE#"${SLURM_CPUS_ON_NODE%%[!0]*}"}))
        [ "$tb_pe" -ge 1 ] || tb_pe=1
    fi
}

# tb_mpi_version: tb_mpiv, ${TB_MPIRUN:-mpirun} --version's output (read once)
tb_mpi_version() {
    [ -n "${tb_mpiv+x}" ] || tb_mpiv=$("${TB_MPIRUN:-mpirun}" --version 2>/dev/null) || tb_mpiv=""
}

# tb_mpi_major: the major version of ${TB_MPIRUN:-mpirun}'s Open MPI, from
# its --version ("mpirun (Open MPI) 4.1.4"; Open MPI 4's launcher under
# another name, mpiexec or orterun, says "(OpenRTE) 4.1.4"; Open MPI 5's
# prterun "(PRRTE) 3.0.x", which is 5 here); 4 when it cannot tell (a dry
# run without mpirun)
tb_mpi_major() {
    tb_mpi_version
    case $tb_mpiv in *"(PRRTE)"*) echo 5; return 0 ;; esac
    tb_v=$(printf '%s\n' "$tb_mpiv" | sed -n -e 's/.*(Open MPI) \([0-9][0-9]*\)\..*/\1/p' \
        -e 's/.*(OpenRTE) \([0-9][0-9]*\)\..*/\1/p' | head -n 1)
    echo "${tb_v:-4}"
}

# tb_check_mpirun: before a run (not a dry run, which may be read where
# there is no MPI), ${TB_MPIRUN:-mpirun} is there and is Open MPI's: the
# flags built here are Open MPI's, which MPICH's or Intel MPI's mpirun
# first in PATH would misread
tb_check_mpirun() {
    [ "${TB_DRY_RUN:-0}" != 1 ] || return 0
    tb_l=${TB_MPIRUN:-mpirun}
    command -v "$tb_l" >/dev/null 2>&1 ||
        tb_die "TB_MPIRUN '$tb_l' not found: install Open MPI (apt-get install openmpi-bin)," \
            "load your site's (module load openmpi), or set TB_MPIRUN to its mpirun"
    tb_mpi_version
    case $tb_mpiv in
        *"(Open MPI)"* | *"(OpenRTE)"* | *"(PRRTE)"*) ;; # OpenRTE: Open MPI 4's mpiexec, orterun
        *) tb_die "TB_MPIRUN '$tb_l' ($(command -v "$tb_l")) is not Open MPI's (--version:" \
               "'$(printf '%s\n' "$tb_mpiv" | head -n 1)'): put Open MPI's first in PATH (module load openmpi;" \
               "apt-get install openmpi-bin) or set TB_MPIRUN to its mpirun" ;;
    esac
}

# tb_check_srun: before a run, ${TB_SRUN:-srun} is there
tb_check_srun() {
    [ "${TB_DRY_RUN:-0}" != 1 ] || return 0
    command -v "${TB_SRUN:-srun}" >/dev/null 2>&1 ||
        tb_die "TB_SRUN '${TB_SRUN:-srun}' not found: Slurm's commands are not in PATH here" \
            "(module load slurm), or set TB_SRUN to srun"
}

# tb_add_socket_mapping: a node's ranks fill its first socket, then the
# next, each bound to its socket (local rank r beside GPU r when every slot
# is used). Open MPI 4.1: --map-by socket --rank-by core; Open MPI 5
# (PRRTE) takes no --rank-by core and calls a socket a package, and where
# a site allows oversubscription by default it fills a node's package by
# its cores, past the slots (5.0.11: three hosts of slots=1, ranks 0 and 1
# on the first): :nooversubscribe keeps one rank per slot, one per GPU.
tb_add_socket_mapping() {
    if [ "$(tb_mpi_major)" -ge 5 ] 2>/dev/null; then
        tb_add --map-by package:nooversubscribe --rank-by fill --bind-to package
    else
        tb_add --map-by socket --rank-by core --bind-to socket
    fi
}

# tb_help FILE: print FILE's header comment (from line 2 to `set -eu`)
tb_help() {
    sed -n '2,/^set -eu/p' "$1" | sed -e '/^set -eu/d' -e 's/^# //' -e 's/^#$//'
}

# tb_finish: print the command (--dry-run) or run it in place of the shell
tb_finish() {
    if [ "${TB_DRY_RUN:-0}" = 1 ]; then
        printf '%s\n' "$TB_CMD"
        exit 0
    fi
    printf '%s: %s\n' "$TB_SCRIPT" "$TB_CMD" >&2
    eval "exec $TB_CMD"
}

# tb_slurm_nodes: the job's nodes, one a line, from SLURM_JOB_NODELIST
# (scontrol show hostnames when there is scontrol; otherwise this expander,
# which knows lists like "gpu[01-04,07],login1" with one bracket per name)
tb_slurm_nodes() {
    if command -v scontrol >/dev/null 2>&1; then
        scontrol show hostnames "$SLURM_JOB_NODELIST"
        return
    fi
    printf '%s\n' "$SLURM_JOB_NODELIST" | awk '
    function expand(term,    pre, post, body, n, parts, i, lo, hi, w, k) {
        if (term !~ /\[/) { print term; return }
        pre = substr(term, 1, index(term, "[") - 1)
        body = substr(term, index(term, "[") + 1)
        post = substr(body, index(body, "]") + 1)
        body = substr(body, 1, index(body, "]") - 1)
        n = split(body, parts, ",")
        for (i = 1; i <= n; i++) {
            if (parts[i] ~ /-/) {
                lo = substr(parts[i], 1, index(parts[i], "-") - 1)
                hi = substr(parts[i], index(parts[i], "-") + 1)
            } else { lo = parts[i]; hi = parts[i] }
            w = length(lo)
            for (k = lo + 0; k <= hi + 0; k++) print pre sprintf("%0" w "d", k) post
        }
    }
    {   depth = 0; term = ""
        for (c = 1; c <= length($0); c++) {
            ch = substr($0, c, 1)
            if (ch == "[") depth++
            if (ch == "]") depth--
            if (ch == "," && depth == 0) { expand(term); term = "" } else term = term ch
        }
        if (term != "") expand(term)
    }'
}

# tb_slurm_uniform_tpn: the tasks each node of the job runs when all run as
# many; nothing when they differ or Slurm does not say
tb_slurm_uniform_tpn() {
    [ -n "${SLURM_TASKS_PER_NODE:-}${SLURM_NTASKS_PER_NODE:-}" ] || return 0
    tb_u=$(tb_slurm_tasks_per_node | sort -u)
    case $tb_u in '' | *[!0-9]*) ;; *) echo "$tb_u" ;; esac
}

# tb_slurm_tasks_per_node: one count a line, in node order, from
# SLURM_TASKS_PER_NODE ("8(x2),4") or SLURM_NTASKS_PER_NODE
tb_slurm_tasks_per_node() {
    tb_tpn=${SLURM_TASKS_PER_NODE:-}
    if [ -z "$tb_tpn" ] && [ -n "${SLURM_NTASKS_PER_NODE:-}" ]; then
        tb_tpn="$SLURM_NTASKS_PER_NODE(x${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}})"
    fi
    [ -n "$tb_tpn" ] || tb_die "neither SLURM_TASKS_PER_NODE nor SLURM_NTASKS_PER_NODE is set (sbatch --ntasks-per-node=GPUS)"
    printf '%s\n' "$tb_tpn" | tr ',' '\n' | awk '
        /^[0-9]+\(x[0-9]+\)$/ { split($0, a, /\(x|\)/); for (i = 0; i < a[2]; i++) print a[1]; next }
        /^[0-9]+$/ { print; next }
        { print "bad " $0; exit }'
}

