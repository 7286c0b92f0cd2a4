#!/bin/sh
# test_launch_scripts.sh - the launch scripts build the commands they should:
# each --dry-run (TB_DRY_RUN=1 for the .sbatch scripts, with a faked Slurm
# job) is compared with the exact expected line or checked for the flags it
# must and must not hold; the printed line, run by sh, hands the launcher
# the same arguments as the script itself does when it runs (so --dry-run
# prints the exact command, quoting included); wrong input is refused.
#
#   test_launch_scripts.sh [REPO_ROOT]
#
# Every case runs under `env -i` with only the variables it names, so the
# caller's NCCL_* or SLURM_* cannot change the outcome. Exit 0 when every
# check holds, 1 otherwise (each failure printed as FAIL).
set -eu

root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
L=$root/launch
work=$(mktemp -d "${TMPDIR:-/tmp}/tb_launch_test.XXXXXX")
trap 'rm -rf "$work"' EXIT

failures=0
checks=0
fail() {
    echo "FAIL $*"
    failures=$((failures + 1))
}

# a fake launcher (mpirun, srun): prints its arguments one per line; asked
# for its --version alone, it is Open MPI's mpirun (the scripts check that)
cat >"$work/fake_launcher" <<'EOF'
#!/bin/sh
[ "$*" != --version ] || { echo "mpirun (Open MPI) 4.1.4"; exit 0; }
for a in "$@"; do printf '<%s>\n' "$a"; done
EOF
chmod +x "$work/fake_launcher"
# a fake nvidia-smi with 4 GPUs
mkdir -p "$work/gpubin"
cat >"$work/gpubin/nvidia-smi" <<'EOF'
#!/bin/sh
[ "$1" = -L ] || exit 1
for i in 0 1 2 3; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-0000000$i)"; done
EOF
chmod +x "$work/gpubin/nvidia-smi"
printf '# two nodes, eight GPUs each\nnodeA slots=8\nnodeB slots=8   # comment\n\n' >"$work/hosts16"

base_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if [ "$(id -u)" = 0 ]; then root_flag=" --allow-run-as-root"; else root_flag=""; fi

# out VAR=VALUE... -- CMD...: stdout of CMD in a clean environment, on one
# socket (TB_SOCKETS=1: this machine's own must not change the expected
# lines; the socket cases name theirs, TB_SOCKETS= reads lscpu)
run_clean() {
    env -i PATH="$base_path" HOME=/nonexistent TB_SOCKETS=1 "$@"
}

# expect_line NAME EXPECTED VAR=VALUE... -- CMD...
expect_line() {
    name=$1 want=$2
    shift 2
    checks=$((checks + 1))
    if ! got=$(run_clean "$@" 2>"$work/err"); then
        fail "$name: exit status $?, stderr: $(cat "$work/err")"
        return
    fi
    [ "$got" = "$want" ] || fail "$name:
  expected: $want
  got:      $got"
}

# expect_words NAME 'A|B|...' 'X|Y|...' VAR=VALUE... CMD...: the output holds
# each of A, B, ... as whole words (they may contain spaces) and none of the
# strings X, Y, ...
expect_words() {
    name=$1 present=$2 absent=$3
    shift 3
    checks=$((checks + 1))
    if ! got=$(run_clean "$@" 2>"$work/err"); then
        fail "$name: exit status, stderr: $(cat "$work/err")"
        return
    fi
    padded=" $got "
    old_ifs=$IFS
    IFS='|'
    for w in $present; do
        case $padded in *" $w "*) ;; *) fail "$name: lacks '$w' in: $got" ;; esac
    done
    for w in $absent; do
        case $padded in *"$w"*) fail "$name: must not hold '$w': $got" ;; esac
    done
    IFS=$old_ifs
}

# expect_error NAME MESSAGE VAR=VALUE... CMD...: non-zero exit, MESSAGE on stderr
expect_error() {
    name=$1 msg=$2
    shift 2
    checks=$((checks + 1))
    if run_clean "$@" >"$work/out" 2>"$work/err"; then
        fail "$name: exited 0 (output: $(cat "$work/out"))"
        return
    fi
    grep -qF -- "$msg" "$work/err" || fail "$name: stderr lacks '$msg': $(cat "$work/err")"
}

# expect_note NAME MESSAGE VAR=VALUE... CMD...: exit 0, MESSAGE on stderr
expect_note() {
    name=$1 msg=$2
    shift 2
    checks=$((checks + 1))
    if ! run_clean "$@" >"$work/out" 2>"$work/err"; then
        fail "$name: exit status, stderr: $(cat "$work/err")"
        return
    fi
    grep -qF -- "$msg" "$work/err" || fail "$name: stderr lacks '$msg': $(cat "$work/err")"
}

# expect_same_args NAME VAR=VALUE... CMD...: the printed dry-run line run by
# sh gives the fake launcher the same arguments as the script's own run
expect_same_args() {
    name=$1
    shift
    checks=$((checks + 1))
    line=$(run_clean TB_DRY_RUN=1 "$@" 2>/dev/null) || { fail "$name: dry run failed"; return; }
    run_clean sh -c "$line" >"$work/from_line" 2>&1 || { fail "$name: the printed line does not run: $line"; return; }
    run_clean "$@" >"$work/from_run" 2>/dev/null || { fail "$name: the script's run failed"; return; }
    if ! cmp -s "$work/from_line" "$work/from_run"; then
        fail "$name: printed line and actual run differ:
$(diff "$work/from_line" "$work/from_run")"
    fi
    for w in "<x y.h5>" "<it's>" "<--results>"; do
        grep -qxF -- "$w" "$work/from_run" || fail "$name: argument $w did not reach the launcher intact"
    done
}

echo "== sh -n"
for f in "$L"/local.sh "$L"/hostfile.sh "$L"/common.sh "$L"/slurm.sbatch "$L"/slurm_mpirun.sbatch \
         "$root"/tests/multihost/*.sh; do
    checks=$((checks + 1))
    sh -n "$f" || fail "sh -n $f"
done

echo "== --help lists the knobs"
for s in local.sh hostfile.sh slurm.sbatch slurm_mpirun.sbatch; do
    checks=$((checks + 1))
    help=$(run_clean sh "$L/$s" --help) || fail "$s --help failed"
    # every TB_ knob the script reads is in its help, with those of the
    # fabric settings when it applies them
    knobs=$(grep -o 'TB_[A-Z_]*' "$L/$s")
    if grep -q '^tb_fabric ' "$L/$s"; then
        knobs="$knobs $(sed -n '/^tb_fabric() {/,/^}/p' "$L/common.sh" | grep -o 'TB_[A-Z_]*')"
    fi
    # shellcheck disable=SC2086  # one knob a word
    for k in $(printf '%s\n' $knobs | sort -u); do
        case $k in TB_SCRIPT | TB_CMD | TB_SET_ENV | TB_SET_MCA) continue ;; esac
        case $help in *"$k"*) ;; *) fail "$s --help does not document $k" ;; esac
    done
done

# Open MPI 5's mpirun, as far as --version tells
printf '#!/bin/sh\necho "mpirun (Open MPI) 5.0.3"\n' >"$work/mpirun5"
chmod +x "$work/mpirun5"
echo "== local.sh"
expect_line "local -n 2, 8 cores" \
    "mpirun -np 2$root_flag --map-by slot:PE=4 --bind-to core trainbench train --steps 2" \
    TB_CORES=8 "$L/local.sh" -n 2 --dry-run -- trainbench train --steps 2
expect_line "local: no GPU -> 1 rank with every core" \
    "mpirun -np 1$root_flag --map-by slot:PE=8 --bind-to core trainbench" \
    TB_CORES=8 "$L/local.sh" --dry-run -- trainbench
expect_line "local: nvidia-smi lists 4 GPUs -> 4 ranks" \
    "mpirun -np 4$root_flag --map-by slot:PE=4 --bind-to core trainbench" \
    PATH="$work/gpubin:$base_path" TB_CORES=16 "$L/local.sh" --dry-run -- trainbench
checks=$((checks + 1))
if command -v taskset >/dev/null 2>&1 && command -v lscpu >/dev/null 2>&1; then
    got=$(run_clean taskset -c 0 "$L/local.sh" -n 1 --dry-run -- trainbench 2>/dev/null)
    [ "$got" = "mpirun -np 1$root_flag --map-by slot:PE=1 --bind-to core trainbench" ] ||
        fail "local: the cores of its cpuset (taskset -c 0: one), not the machine's: got $got"
fi
expect_line "local: inside a Slurm allocation: this machine's cores, not the job's tasks" \
    "mpirun -np 2 --mca ras '^slurm'$root_flag --map-by slot:PE=4 --bind-to core trainbench" \
    SLURM_JOB_ID=9 SLURM_TASKS_PER_NODE=1 TB_CORES=8 "$L/local.sh" -n 2 --dry-run -- trainbench
expect_line "local: CUDA_VISIBLE_DEVICES=2,3 -> 2 ranks, exported" \
    "mpirun -np 2$root_flag --map-by slot:PE=8 --bind-to core -x CUDA_VISIBLE_DEVICES trainbench" \
    PATH="$work/gpubin:$base_path" CUDA_VISIBLE_DEVICES=2,3 TB_CORES=16 "$L/local.sh" --dry-run -- trainbench
expect_line "local: CUDA_VISIBLE_DEVICES= (empty) hides the GPUs nvidia-smi lists -> 1 rank" \
    "mpirun -np 1$root_flag --map-by slot:PE=16 --bind-to core -x CUDA_VISIBLE_DEVICES trainbench" \
    PATH="$work/gpubin:$base_path" CUDA_VISIBLE_DEVICES= TB_CORES=16 "$L/local.sh" --dry-run -- trainbench
expect_line "local: CUDA_VISIBLE_DEVICES=0,-1,1 -> CUDA stops at -1: 1 rank" \
    "mpirun -np 1$root_flag --map-by slot:PE=16 --bind-to core -x CUDA_VISIBLE_DEVICES trainbench" \
    PATH="$work/gpubin:$base_path" CUDA_VISIBLE_DEVICES=0,-1,1 TB_CORES=16 "$L/local.sh" --dry-run -- trainbench
expect_words "local: set NCCL/UCX/OMP/TB_GRAD_SYNC variables are exported, unset ones not" \
    "-x NCCL_DEBUG|-x NCCL_ALGO|-x UCX_TLS|-x OMP_NUM_THREADS|-x OPENBLAS_NUM_THREADS|-x MY_VAR|-x TB_GRAD_SYNC_POLL_US" \
    "NCCL_IB_HCA|NCCL_SOCKET_IFNAME|CUDA_VISIBLE_DEVICES|UNSET_VAR|-x PATH|NCCL_DEBUG=|TB_GRAD_SYNC_STATS|TB_CORES" \
    NCCL_DEBUG=INFO NCCL_ALGO=Ring UCX_TLS=rc OMP_NUM_THREADS=3 OPENBLAS_NUM_THREADS=1 TB_GRAD_SYNC_POLL_US=0 \
    TB_EXPORT="MY_VAR UNSET_VAR" MY_VAR=1 TB_CORES=4 "$L/local.sh" -n 2 --dry-run -- trainbench
expect_words "local: more ranks than cores -> oversubscribe, no binding" \
    "-np 6|--oversubscribe|--bind-to none" "PE=|--bind-to core" \
    TB_CORES=4 "$L/local.sh" -n 6 --dry-run -- trainbench
expect_words "local: TB_BIND=none, TB_MPIRUN_ARGS, TB_REPORT_BINDINGS" \
    "--bind-to none|--report-bindings|--mca btl self,vader" "PE=" \
    TB_BIND=none TB_REPORT_BINDINGS=1 TB_MPIRUN_ARGS="--mca btl self,vader" TB_CORES=4 \
    "$L/local.sh" -n 2 --dry-run -- trainbench
expect_words "local: TB_MAP_BY, TB_PE" \
    "--map-by ppr:2:socket:PE=3|--bind-to core" "" \
    TB_MAP_BY=ppr:2:socket:PE=3 TB_CORES=16 "$L/local.sh" -n 4 --dry-run -- trainbench
expect_words "local: TB_PE" "--map-by slot:PE=2" "" TB_PE=2 TB_CORES=16 "$L/local.sh" -n 4 --dry-run -- trainbench
# sockets: 8 ranks on 2 x 56 cores went all to socket 0 (slot:PE=6 fills it
# first); 2 x 64 cores with PE=12 put a rank across both
expect_line "local: 8 ranks on 2 sockets of 56 cores: 4 on each" \
    "mpirun -np 8$root_flag --map-by ppr:4:socket:PE=14 --bind-to core trainbench" \
    TB_SOCKETS=2 TB_CORES=112 "$L/local.sh" -n 8 --dry-run -- trainbench
expect_words "local: TB_PE=6, 8 ranks, 2 sockets" "--map-by ppr:4:socket:PE=6" "slot:" \
    TB_PE=6 TB_SOCKETS=2 TB_CORES=112 "$L/local.sh" -n 8 --dry-run -- trainbench
expect_words "local: Open MPI 5 calls a socket a package" "--map-by ppr:4:package:PE=16" "slot:" \
    TB_MPIRUN="$work/mpirun5" TB_SOCKETS=2 TB_CORES=128 "$L/local.sh" -n 8 --dry-run -- trainbench
expect_words "local: 6 ranks on 4 sockets: slot mapping kept" "--map-by slot:PE=2" "ppr:" \
    TB_SOCKETS=4 TB_CORES=16 "$L/local.sh" -n 6 --dry-run -- trainbench
expect_note "local: 6 ranks on 4 sockets: the note says why" \
    "note: 6 ranks a node do not divide evenly over its 4 sockets: ranks take cores in order, filling socket 0 first" \
    TB_SOCKETS=4 TB_CORES=16 "$L/local.sh" -n 6 --dry-run -- trainbench
expect_words "local: 2 ranks of 12 cores do not fit 2 sockets of 8: slot mapping kept" "--map-by slot:PE=12" "ppr:" \
    TB_PE=12 TB_SOCKETS=2 TB_CORES=16 "$L/local.sh" -n 2 --dry-run -- trainbench
checks=$((checks + 1))
if command -v taskset >/dev/null 2>&1 && taskset -c 0,1 true 2>/dev/null; then
    # the sockets from lscpu (here a fake one: CPUs 0 and 1 on sockets 0 and 1)
    mkdir -p "$work/lscpubin"
    printf '#!/bin/sh\necho "# CPU,Core,Socket"\necho 0,0,0\necho 1,1,1\n' >"$work/lscpubin/lscpu"
    chmod +x "$work/lscpubin/lscpu"
    got=$(run_clean PATH="$work/lscpubin:$base_path" TB_SOCKETS= taskset -c 0,1 "$L/local.sh" -n 2 --dry-run \
        -- trainbench 2>/dev/null)
    [ "$got" = "mpirun -np 2$root_flag --map-by ppr:1:socket:PE=1 --bind-to core trainbench" ] ||
        fail "local: the sockets lscpu lists: got $got"
fi
expect_same_args "local: printed line = what runs" \
    TB_MPIRUN="$work/fake_launcher" TB_CORES=4 NCCL_DEBUG=WARN \
    "$L/local.sh" -n 2 -- trainbench --results "x y.h5" "it's"
# no mpirun, or MPICH's first in PATH: one line naming the fix, not
# "exec: mpirun: not found" or MPICH misreading Open MPI's flags
expect_error "local: no mpirun named, with the fix" \
    "TB_MPIRUN '/nonexistent/mpirun' not found: install Open MPI (apt-get install openmpi-bin)" \
    TB_MPIRUN=/nonexistent/mpirun TB_CORES=4 "$L/local.sh" -n 2 -- trainbench
mkdir -p "$work/mpich"
printf '#!/bin/sh\necho "HYDRA build details:"\necho "    Version: 4.0.2"\n' >"$work/mpich/mpirun"
chmod +x "$work/mpich/mpirun"
expect_error "local: MPICH's mpirun first in PATH is refused" \
    "TB_MPIRUN 'mpirun' ($work/mpich/mpirun) is not Open MPI's (--version: 'HYDRA build details:')" \
    PATH="$work/mpich:$base_path" TB_CORES=4 "$L/local.sh" -n 2 -- trainbench
# Open MPI 4's launcher under its other names says (OpenRTE); Open MPI 5's
# prterun (PRRTE) with a version of its own: both are Open MPI's
for v in "mpiexec (OpenRTE) 4.1.4" "prterun (PRRTE) 3.0.6"; do
    cat >"$work/other_name" <<EOF
#!/bin/sh
[ "\$*" != --version ] || { echo "$v"; exit 0; }
echo "ran: \$*"
EOF
    chmod +x "$work/other_name"
    expect_words "local: a launcher that says '$v' runs" "ran:|-np|2|trainbench" "" \
        TB_MPIRUN="$work/other_name" TB_CORES=4 "$L/local.sh" -n 2 -- trainbench
done
expect_words "local: prterun (PRRTE 3) maps as Open MPI 5" "--map-by ppr:4:package:PE=16" "socket" \
    TB_MPIRUN="$work/other_name" TB_SOCKETS=2 TB_CORES=128 "$L/local.sh" -n 8 --dry-run -- trainbench
# counts with leading zeros are decimal, as Open MPI reads slots=08 ($(( ))
# alone would read 010 as 8 and stop at 08)
expect_words "local: TB_CORES=010, TB_SOCKETS=02: 10 cores" "-np 2|--map-by ppr:1:socket:PE=5" "" \
    TB_SOCKETS=02 TB_CORES=010 "$L/local.sh" -n 02 --dry-run -- trainbench
expect_words "local: TB_PE=08" "--map-by ppr:4:socket:PE=8" "" \
    TB_SOCKETS=2 TB_CORES=112 TB_PE=08 "$L/local.sh" -n 8 --dry-run -- trainbench
expect_error "local: -n 0" "-n (ranks) must be a positive number" "$L/local.sh" -n 0 -- trainbench
expect_error "local: no command" "no command" "$L/local.sh" -n 2
expect_error "local: bad option" "unknown option '--bogus'" "$L/local.sh" --bogus -- trainbench
expect_error "local: bad TB_BIND" "TB_BIND must be core or none" TB_BIND=socket "$L/local.sh" -- trainbench

echo "== hostfile.sh"
H=$work/hosts16
expect_line "hostfile: auto fabric, slots summed" \
    "mpirun -np 16 --hostfile $H$root_flag --map-by socket --rank-by core --bind-to socket -x PATH trainbench train" \
    "$L/hostfile.sh" --hostfile "$H" --dry-run -- trainbench train
# Open MPI 5 (PRRTE) refuses --rank-by core: the socket mapping in its words
expect_line "hostfile: Open MPI 5's socket mapping" \
    "$work/mpirun5 -np 16 --hostfile $H$root_flag --map-by package:nooversubscribe --rank-by fill --bind-to package -x PATH trainbench" \
    TB_MPIRUN="$work/mpirun5" "$L/hostfile.sh" --hostfile "$H" --dry-run -- trainbench
# Open MPI's other spellings of slots: "slots = N", count=N, cpu=N (not max_slots=)
printf 'nodeA slots = 8\nnodeB count=4 max_slots=9\nnodeC cpu=2\n' >"$work/hosts_spelled"
expect_words "hostfile: slots = 8, count=, cpu= add up to 14" "-np 14" "" \
    "$L/hostfile.sh" --hostfile "$work/hosts_spelled" --dry-run -- trainbench
expect_line "hostfile: tcp on eth1, 8 cores per rank" \
    "mpirun -np 16 --hostfile $H$root_flag --map-by slot:PE=8 --bind-to core --mca pml ob1 --mca btl tcp,self,vader --mca btl_tcp_if_include eth1 --mca oob_tcp_if_include eth1 -x NCCL_IB_DISABLE=1 -x NCCL_SOCKET_IFNAME==eth1 -x PATH trainbench" \
    TB_IFACE=eth1 TB_PE=8 "$L/hostfile.sh" --hostfile "$H" --fabric tcp --dry-run -- trainbench
expect_note "hostfile: TB_PE without TB_SOCKETS: the note says socket 0 fills first" \
    "note: TB_PE=8 without TB_SOCKETS: each node's ranks take cores in order, filling socket 0 first" \
    TB_SOCKETS= TB_PE=8 "$L/hostfile.sh" --hostfile "$H" --dry-run -- trainbench
# TB_SOCKETS: each node's 8 ranks 4 on each socket, not all 8 on socket 0
expect_words "hostfile: TB_PE=6, TB_SOCKETS=2, 8 slots a node: 4 ranks on each socket" \
    "--map-by ppr:4:socket:PE=6|--bind-to core" "slot:PE" \
    TB_PE=6 TB_SOCKETS=2 TB_CORES=112 "$L/hostfile.sh" --hostfile "$H" --dry-run -- trainbench
expect_words "hostfile: Open MPI 5: ppr on packages" "--map-by ppr:4:package:PE=6" "socket" \
    TB_MPIRUN="$work/mpirun5" TB_PE=6 TB_SOCKETS=2 "$L/hostfile.sh" --hostfile "$H" --dry-run -- trainbench
expect_words "hostfile: 4 ranks of 16 cores do not fit a socket of 56: slot mapping kept" "--map-by slot:PE=16" \
    "ppr:" TB_PE=16 TB_SOCKETS=2 TB_CORES=112 "$L/hostfile.sh" --hostfile "$H" --dry-run -- trainbench
expect_note "hostfile: -n 12 of 16 slots: the nodes' counts differ, slot mapping with a note" \
    "note: the nodes run different numbers of ranks" \
    TB_PE=6 TB_SOCKETS=2 "$L/hostfile.sh" --hostfile "$H" -n 12 --dry-run -- trainbench
expect_words "hostfile: TB_PE=06, TB_SOCKETS=02" "--map-by ppr:4:socket:PE=6" "" \
    TB_PE=06 TB_SOCKETS=02 "$L/hostfile.sh" --hostfile "$H" --dry-run -- trainbench
printf 'nodeA slots=8\nnodeB slots=4\n' >"$work/hosts_uneven"
expect_words "hostfile: unequal slots: slot mapping" "--map-by slot:PE=6" "ppr:" \
    TB_PE=6 TB_SOCKETS=2 "$L/hostfile.sh" --hostfile "$work/hosts_uneven" --dry-run -- trainbench
expect_words "hostfile: tcp on a subnet: MPI takes it, NCCL_SOCKET_IFNAME does not" \
    "--mca btl_tcp_if_include 10.1.0.0/16|--mca oob_tcp_if_include 10.1.0.0/16|--mca btl tcp,self" \
    "NCCL_SOCKET_IFNAME" \
    TB_IFACE=10.1.0.0/16 TB_BTL=tcp,self "$L/hostfile.sh" --hostfile "$H" --fabric tcp --dry-run -- trainbench
expect_words "hostfile: ib" \
    "-np 16|--mca pml ucx|--mca osc ucx|--mca btl '^openib'|-x UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1|-x NCCL_IB_HCA==mlx5_0:1,mlx5_1:1|-x NCCL_SOCKET_IFNAME==ib0|--mca oob_tcp_if_include ib0|-x NCCL_NET_GDR_LEVEL=PHB" \
    "GID_INDEX|NCCL_IB_DISABLE|NCCL_IB_TC" \
    TB_IB_HCA=mlx5_0:1,mlx5_1:1 TB_IFACE=ib0 TB_GDR_LEVEL=PHB "$L/hostfile.sh" --hostfile "$H" --fabric ib --dry-run -- trainbench
expect_words "hostfile: roce without TB_IB_HCA or a GID index: NCCL and UCX choose ports and GID" \
    "--mca pml ucx|-x NCCL_SOCKET_IFNAME==ens1f0np0|--mca oob_tcp_if_include ens1f0np0|-x NCCL_IB_TC=106|-x UCX_IB_TRAFFIC_CLASS=106" \
    "NCCL_NET_GDR_LEVEL|NCCL_IB_DISABLE|NCCL_IB_HCA|UCX_NET_DEVICES|GID_INDEX" \
    TB_IFACE=ens1f0np0 TB_IB_TC=106 "$L/hostfile.sh" --hostfile "$H" --fabric roce --dry-run -- trainbench
expect_words "hostfile: roce with TB_IB_HCA and TB_GID_INDEX" \
    "-x UCX_NET_DEVICES=mlx5_0:1|-x NCCL_IB_HCA==mlx5_0:1|-x NCCL_IB_GID_INDEX=3|-x UCX_IB_GID_INDEX=3" "NCCL_IB_DISABLE" \
    TB_IB_HCA=mlx5_0:1 TB_GID_INDEX=3 TB_IFACE=ens1f0np0 "$L/hostfile.sh" --hostfile "$H" --fabric roce --dry-run -- trainbench
expect_words "hostfile: ib without TB_IB_HCA: every port" "--mca pml ucx" "NCCL_IB_HCA|UCX_NET_DEVICES" \
    TB_IFACE=ib0 "$L/hostfile.sh" --hostfile "$H" --fabric ib --dry-run -- trainbench
expect_words "hostfile: roce, TB_GID_INDEX=5" "-x NCCL_IB_GID_INDEX=5|-x UCX_IB_GID_INDEX=5" "=3" \
    TB_GID_INDEX=5 TB_IFACE=eth2 "$L/hostfile.sh" --hostfile "$H" --fabric roce --dry-run -- trainbench
expect_words "hostfile: roce, NCCL_IB_GID_INDEX set: exported by name, UCX follows it" \
    "-x NCCL_IB_GID_INDEX|-x UCX_IB_GID_INDEX=7|-x NCCL_IB_HCA" "NCCL_IB_GID_INDEX=|=3|NCCL_IB_HCA=" \
    NCCL_IB_GID_INDEX=7 NCCL_IB_HCA="=mlx5_2:1" TB_IFACE=eth2 TB_FABRIC=roce \
    "$L/hostfile.sh" --hostfile "$H" --dry-run -- trainbench
expect_words "hostfile: PATH, LD_LIBRARY_PATH, NCCL_DEBUG exported; -n, prefix, extra args" \
    "-np 9|-x PATH|-x LD_LIBRARY_PATH|-x NCCL_DEBUG|--prefix /opt/ompi|--mca plm_rsh_agent /x/agent.sh" \
    "NCCL_IB_HCA|UCX_" \
    LD_LIBRARY_PATH=/opt/lib NCCL_DEBUG=INFO TB_MPI_PREFIX=/opt/ompi TB_MPIRUN_ARGS="--mca plm_rsh_agent /x/agent.sh" \
    "$L/hostfile.sh" --hostfile "$H" -n 9 --dry-run -- trainbench
expect_words "hostfile: TB_EXPORT with commas: each name exported, PATH and LD_LIBRARY_PATH still" \
    "-x MY_A|-x MY_B|-x PATH|-x LD_LIBRARY_PATH" "MY_A,MY_B" \
    TB_EXPORT="MY_A,MY_B" MY_A=1 MY_B=2 LD_LIBRARY_PATH=/opt/lib \
    "$L/hostfile.sh" --hostfile "$H" --dry-run -- trainbench
# a word that is not a name made tb_is_set's eval fail in a subshell: -x PATH
# and -x LD_LIBRARY_PATH vanished and the script still exited 0
expect_error "hostfile: TB_EXPORT='NCCL_*' (a pattern) refused, named" "TB_EXPORT: 'NCCL_*' is not a variable name" \
    TB_EXPORT="NCCL_*" LD_LIBRARY_PATH=/opt/lib "$L/hostfile.sh" --hostfile "$H" --dry-run -- trainbench
expect_error "local: TB_EXPORT='MY_A MY-VAR' refused, named" "TB_EXPORT: 'MY-VAR' is not a variable name" \
    TB_EXPORT="MY_A MY-VAR" TB_CORES=4 "$L/local.sh" -n 2 --dry-run -- trainbench
expect_same_args "hostfile: printed line = what runs" \
    TB_MPIRUN="$work/fake_launcher" TB_IFACE=ib0 TB_IB_HCA="mlx5_0:1,mlx5_1:1" \
    "$L/hostfile.sh" --hostfile "$H" --fabric ib -- trainbench --results "x y.h5" "it's"
expect_error "hostfile: roce needs TB_IFACE" "--fabric roce needs TB_IFACE" \
    "$L/hostfile.sh" --hostfile "$H" --fabric roce -- trainbench
expect_error "hostfile: roce with a subnet as TB_IFACE names the subnet and the knob NCCL needs" \
    "TB_IFACE '10.1.0.0/16' is a subnet, which NCCL's bootstrap does not take: also set TB_NCCL_SOCKET_IFNAME" \
    TB_IFACE=10.1.0.0/16 "$L/hostfile.sh" --hostfile "$H" --fabric roce -- trainbench
expect_words "hostfile: roce, subnet for MPI, netdev for NCCL" \
    "--mca oob_tcp_if_include 10.1.0.0/16|-x NCCL_SOCKET_IFNAME==ens1f0np0" "" \
    TB_IFACE=10.1.0.0/16 TB_NCCL_SOCKET_IFNAME=ens1f0np0 "$L/hostfile.sh" --hostfile "$H" --fabric roce --dry-run -- trainbench
# the header's promise: a variable already set wins, here the one roce needs
expect_words "hostfile: roce with NCCL_SOCKET_IFNAME set and no TB_IFACE: taken as it is" \
    "--mca pml ucx|-x NCCL_SOCKET_IFNAME" "NCCL_SOCKET_IFNAME=|oob_tcp_if_include" \
    NCCL_SOCKET_IFNAME=ens1f0np0 "$L/hostfile.sh" --hostfile "$H" --fabric roce --dry-run -- trainbench
expect_words "hostfile: roce, subnet for MPI, NCCL_SOCKET_IFNAME set for NCCL" \
    "--mca oob_tcp_if_include 10.1.0.0/16|-x NCCL_SOCKET_IFNAME" "NCCL_SOCKET_IFNAME=" \
    NCCL_SOCKET_IFNAME==ens1f0np0 TB_IFACE=10.1.0.0/16 \
    "$L/hostfile.sh" --hostfile "$H" --fabric roce --dry-run -- trainbench
expect_note "hostfile: tcp on a subnet says NCCL's interface is not constrained" \
    "note: TB_IFACE '10.1.0.0/16' is a subnet, which NCCL does not take: NCCL picks its own interface" \
    TB_IFACE=10.1.0.0/16 "$L/hostfile.sh" --hostfile "$H" --fabric tcp --dry-run -- trainbench
# the launch node's CUDA_VISIBLE_DEVICES goes to every rank: one hiding every GPU is warned of
for v in "" -1 NoDevFiles; do
    expect_note "hostfile: CUDA_VISIBLE_DEVICES='$v' warned of" \
        "warning: CUDA_VISIBLE_DEVICES='$v' hides every GPU, and goes to every rank on every node" \
        CUDA_VISIBLE_DEVICES="$v" "$L/hostfile.sh" --hostfile "$H" --dry-run -- trainbench
done
expect_error "hostfile: more ranks than slots" "17 ranks but" "$L/hostfile.sh" --hostfile "$H" -n 17 -- trainbench
expect_error "hostfile: MPICH's mpirun first in PATH is refused" "is not Open MPI's" \
    PATH="$work/mpich:$base_path" "$L/hostfile.sh" --hostfile "$H" -- trainbench
expect_error "hostfile: unknown fabric" "unknown fabric 'eth'" "$L/hostfile.sh" --hostfile "$H" --fabric eth -- trainbench
expect_error "hostfile: no hostfile" "--hostfile FILE (or TB_HOSTFILE) is required" "$L/hostfile.sh" -- trainbench
expect_error "hostfile: a directory as the hostfile (awk said 'read error (Is a directory)')" \
    "hostfile '$work' is a directory: give --hostfile a file of 'host slots=GPUS' lines" \
    "$L/hostfile.sh" --hostfile "$work" -- trainbench
printf 'nodeA slots=0\n' >"$work/bad_hosts"
expect_error "hostfile: slots=0" "slots must be a positive number" "$L/hostfile.sh" --hostfile "$work/bad_hosts" -- trainbench
printf 'gpu01 slots=8\r\ngpu02 slots=8\r\n' >"$work/crlf_hosts"
expect_error "hostfile: DOS line endings named, with the fix (not 'slots must be a positive number')" \
    "line 1: ends in a carriage return (a DOS/Windows line ending): convert the file with sed -i 's/\\r\$//'" \
    "$L/hostfile.sh" --hostfile "$work/crlf_hosts" -- trainbench
# a leading zero is a number, not text that sorts below "1" (awk compared "08" < 1 as strings)
printf 'nodeA slots=08\nnodeB slots=010\n' >"$work/zero_hosts"
expect_words "hostfile: slots=08 and slots=010 are 8 and 10 (as Open MPI reads them)" "-np 18" "" \
    "$L/hostfile.sh" --hostfile "$work/zero_hosts" --dry-run -- trainbench
printf '\357\273\277gpu01 slots=8\ngpu02 slots=8\n' >"$work/bom_hosts"
expect_error "hostfile: a UTF-8 byte-order mark named, with the fix (not a host named <BOM>gpu01)" \
    "line 1: starts with a UTF-8 byte-order mark (invisible), which would become part of the first host's name" \
    "$L/hostfile.sh" --hostfile "$work/bom_hosts" -- trainbench
printf 'gpu01 slots=8\ngpu02 slots=8\n# spare\ngpu01 slots=8\n' >"$work/twice_hosts"
expect_error "hostfile: a host named twice (Open MPI adds up its slots)" \
    "line 4: gpu01 is named again (first on line 1); Open MPI would add up its slots" \
    "$L/hostfile.sh" --hostfile "$work/twice_hosts" -- trainbench
printf 'gpu01 slots=8\ngpu02\n' >"$work/bare_hosts"
expect_error "hostfile: a bare host name (Open MPI: every core a slot)" "line 2: no slots= (Open MPI would count every core as a slot" \
    "$L/hostfile.sh" --hostfile "$work/bare_hosts" -- trainbench
expect_words "hostfile: NCCL's own exclude list and exact list are passed as given" \
    "-x 'NCCL_IB_HCA=^mlx5_2:1'|-x NCCL_SOCKET_IFNAME==eth2" "NCCL_IB_HCA==^|NCCL_SOCKET_IFNAME===|UCX_NET_DEVICES" \
    TB_IB_HCA="^mlx5_2:1" TB_IFACE=eth2 "$L/hostfile.sh" --hostfile "$H" --fabric ib --dry-run -- trainbench
expect_words "hostfile: an exact list keeps one =, UCX gets the names" \
    "-x NCCL_IB_HCA==mlx5_0:1|-x UCX_NET_DEVICES=mlx5_0:1" "NCCL_IB_HCA===" \
    TB_IB_HCA="=mlx5_0:1" TB_IFACE=ib0 "$L/hostfile.sh" --hostfile "$H" --fabric ib --dry-run -- trainbench
expect_error "hostfile: bad GID index" "TB_GID_INDEX must be a number" \
    TB_GID_INDEX=x TB_IFACE=e "$L/hostfile.sh" --hostfile "$H" --fabric roce -- trainbench

echo "== slurm.sbatch (faked job: 2 nodes x 8 tasks, 12 CPUs each)"
job="SLURM_JOB_ID=42 SLURM_JOB_NODELIST=gpu[07-08] SLURM_JOB_NUM_NODES=2 SLURM_NTASKS=16 SLURM_TASKS_PER_NODE=8(x2) SLURM_CPUS_PER_TASK=12"
# shellcheck disable=SC2086  # $job is a list of assignments
expect_line "slurm: srun line" \
    "env OMP_NUM_THREADS=12 srun --mpi=pmix --cpu-bind=cores --kill-on-bad-exit=1 --export=ALL --distribution=block:block --cpus-per-task=12 trainbench train --model resnet50" \
    $job TB_DRY_RUN=1 sh "$L/slurm.sbatch" trainbench train --model resnet50
# shellcheck disable=SC2086
expect_words "slurm: roce knobs become the ranks' environment" \
    "OMPI_MCA_pml=ucx|UCX_NET_DEVICES=mlx5_0:1|NCCL_IB_HCA==mlx5_0:1|NCCL_IB_GID_INDEX=3|UCX_IB_GID_INDEX=3|NCCL_SOCKET_IFNAME==ens1f0|NCCL_NET_GDR_LEVEL=PIX|srun --mpi=pmix_v4 --cpu-bind=sockets|--gpus-per-task=1" \
    "OMP_NUM_THREADS|-x " \
    $job OMP_NUM_THREADS=6 TB_FABRIC=roce TB_IB_HCA=mlx5_0:1 TB_GID_INDEX=3 TB_IFACE=ens1f0 TB_GDR_LEVEL=PIX TB_SRUN_MPI=pmix_v4 TB_CPU_BIND=sockets \
    TB_SRUN_ARGS=--gpus-per-task=1 TB_DRY_RUN=1 sh "$L/slurm.sbatch" -- trainbench
# shellcheck disable=SC2086
expect_line "slurm: 8 tasks a node on 2 sockets: 4 on each" \
    "env OMP_NUM_THREADS=12 srun --mpi=pmix --cpu-bind=cores --kill-on-bad-exit=1 --export=ALL --distribution=block:block --cpus-per-task=12 --ntasks-per-socket=4 trainbench" \
    $job TB_SOCKETS=2 TB_CORES=128 TB_DRY_RUN=1 sh "$L/slurm.sbatch" trainbench
# shellcheck disable=SC2086
expect_words "slurm: 8 tasks a node on 3 sockets: no --ntasks-per-socket" "--distribution=block:block" \
    "ntasks-per-socket" $job TB_SOCKETS=3 TB_CORES=96 TB_DRY_RUN=1 sh "$L/slurm.sbatch" trainbench
# shellcheck disable=SC2086
expect_same_args "slurm: printed line = what runs" \
    $job TB_SRUN="$work/fake_launcher" TB_FABRIC=ib sh "$L/slurm.sbatch" trainbench --results "x y.h5" "it's"
# shellcheck disable=SC2086
expect_error "slurm: no srun named" "TB_SRUN 'no-such-srun' not found" \
    $job TB_SRUN=no-such-srun sh "$L/slurm.sbatch" trainbench
expect_error "slurm: outside a job" "not inside a Slurm job" TB_DRY_RUN=1 sh "$L/slurm.sbatch" trainbench
# containers: pyxis's srun options, or apptainer exec --nv in front of the command
# pyxis: the submit directory mounted and the tasks' working directory, so
# the results file (trainbench_results.h5 there by default) outlives the
# container; the user's mounts after it
# shellcheck disable=SC2086
expect_line "slurm: pyxis image and mounts, the submit directory the working directory" \
    "env OMP_NUM_THREADS=12 srun --mpi=pmix --cpu-bind=cores --kill-on-bad-exit=1 --export=ALL --distribution=block:block --cpus-per-task=12 '--container-image=reg#trainbench:1' --container-mounts=/home/u/run:/home/u/run,/data:/data --container-workdir=/home/u/run trainbench --data /data/train" \
    $job SLURM_SUBMIT_DIR=/home/u/run TB_CONTAINER_IMAGE='reg#trainbench:1' TB_CONTAINER_MOUNTS=/data:/data \
    TB_DRY_RUN=1 \
    sh "$L/slurm.sbatch" trainbench --data /data/train
# shellcheck disable=SC2086
expect_words "slurm: pyxis without TB_CONTAINER_MOUNTS: the submit directory alone" \
    "--container-mounts=/home/u/run:/home/u/run|--container-workdir=/home/u/run" "," \
    $job SLURM_SUBMIT_DIR=/home/u/run TB_CONTAINER_IMAGE=reg#tb TB_DRY_RUN=1 sh "$L/slurm.sbatch" trainbench
# shellcheck disable=SC2086
expect_words "slurm: pyxis, the submit directory mounted by the user already: once" \
    "--container-mounts=/data:/data,/home/u/run:/home/u/run:ro" "run,/data" \
    $job SLURM_SUBMIT_DIR=/home/u/run TB_CONTAINER_IMAGE=reg#tb \
    TB_CONTAINER_MOUNTS=/data:/data,/home/u/run:/home/u/run:ro \
    TB_DRY_RUN=1 sh "$L/slurm.sbatch" trainbench
# shellcheck disable=SC2086
expect_line "slurm: apptainer exec --nv per task" \
    "env OMP_NUM_THREADS=12 srun --mpi=pmix --cpu-bind=cores --kill-on-bad-exit=1 --export=ALL --distribution=block:block --cpus-per-task=12 apptainer exec --nv --bind /data /img/trainbench.sif trainbench" \
    $job TB_SIF=/img/trainbench.sif TB_CONTAINER_MOUNTS=/data TB_DRY_RUN=1 sh "$L/slurm.sbatch" trainbench
# shellcheck disable=SC2086
expect_error "slurm: two container kinds at once" "set one" \
    $job TB_SIF=/img/x.sif TB_CONTAINER_IMAGE=x TB_DRY_RUN=1 sh "$L/slurm.sbatch" trainbench
# docker run --rm: the results file is written in the working directory,
# which must be the host's (-w on a -v mount) or it goes with the container;
# the image's default command must then not depend on the working directory
checks=$((checks + 1))
# shellcheck disable=SC2016  # $PWD as the docs write it
grep -n 'docker run --rm --gpus' "$root/README.md" "$root/docs/building.md" "$L/container/Dockerfile" "$L/local.sh" |
    grep -v -e '-v "$PWD":/out -w /out' | sed 's/^/FAIL docker run without -w on a mount: /' |
    grep . && failures=$((failures + 1))
grep -q '^CMD \["/' "$L/container/Dockerfile" || fail "Dockerfile: CMD not by its full path (docker run -w moves)"
checks=$((checks + 1))
for d in "--nodes=" "--ntasks-per-node=" "--gpus-per-node=" "--cpus-per-task="; do
    grep -q "^#SBATCH $d" "$L/slurm.sbatch" || fail "slurm.sbatch has no #SBATCH $d"
    grep -q "^#SBATCH $d" "$L/slurm_mpirun.sbatch" || fail "slurm_mpirun.sbatch has no #SBATCH $d"
done
# Slurm reads #SBATCH only before the first command
checks=$((checks + 1))
for s in slurm.sbatch slurm_mpirun.sbatch; do
    first_cmd=$(grep -n -v -e '^#' -e '^$' "$L/$s" | head -1 | cut -d: -f1)
    last_sbatch=$(grep -n '^#SBATCH' "$L/$s" | tail -1 | cut -d: -f1)
    [ "$last_sbatch" -lt "$first_cmd" ] || fail "$s: an #SBATCH line comes after a command (line $last_sbatch)"
done

echo "== slurm_mpirun.sbatch"
# shellcheck disable=SC2086
expect_line "slurm_mpirun: mpirun reads the allocation" \
    "mpirun -np 16$root_flag --map-by slot:PE=12 --bind-to core -x OMP_NUM_THREADS=12 -x PATH trainbench train" \
    $job TB_DRY_RUN=1 sh "$L/slurm_mpirun.sbatch" trainbench train
# shellcheck disable=SC2086
expect_line "slurm_mpirun: TB_SLURM_HOSTFILE=1 writes the allocation" \
    "mpirun -np 16 --hostfile $work/job.hosts$root_flag --map-by slot:PE=12 --bind-to core --mca pml ucx --mca osc ucx --mca btl '^openib' -x UCX_NET_DEVICES=mlx5_0:1 -x NCCL_IB_HCA==mlx5_0:1 -x OMP_NUM_THREADS=12 -x NCCL_DEBUG -x PATH trainbench" \
    $job NCCL_DEBUG=INFO TB_FABRIC=ib TB_IB_HCA=mlx5_0:1 TB_SLURM_HOSTFILE=1 TB_HOSTFILE_PATH="$work/job.hosts" TB_DRY_RUN=1 \
    sh "$L/slurm_mpirun.sbatch" trainbench
checks=$((checks + 1))
[ "$(cat "$work/job.hosts" 2>/dev/null)" = "gpu07 slots=8
gpu08 slots=8" ] || fail "slurm_mpirun: hostfile is '$(cat "$work/job.hosts" 2>/dev/null)'"
# Slurm counting hardware threads (SMT: 96 CPUs on 48 cores): PE in cores
# shellcheck disable=SC2086
expect_words "slurm_mpirun: 12 CPUs a task are 6 cores on 2 threads a core" \
    "--map-by slot:PE=6|-x OMP_NUM_THREADS=12" "PE=12" \
    $job SLURM_CPUS_ON_NODE=96 TB_CORES=48 TB_DRY_RUN=1 sh "$L/slurm_mpirun.sbatch" trainbench
# shellcheck disable=SC2086
expect_words "slurm_mpirun: 8 ranks of 12 cores on 2 x 64 cores: 4 on each socket, none across" \
    "--map-by ppr:4:socket:PE=12" "slot:" \
    $job TB_SOCKETS=2 TB_CORES=128 TB_DRY_RUN=1 sh "$L/slurm_mpirun.sbatch" trainbench
# shellcheck disable=SC2086
expect_words "slurm_mpirun: 2 x 56 cores, 2 threads a core: 4 ranks of 6 cores on each socket" \
    "--map-by ppr:4:socket:PE=6" "slot:" \
    $job SLURM_CPUS_ON_NODE=224 TB_SOCKETS=2 TB_CORES=112 TB_DRY_RUN=1 sh "$L/slurm_mpirun.sbatch" trainbench
expect_note "slurm_mpirun: nodes with different task counts keep the slot mapping, and say so" \
    "note: the nodes run different numbers of ranks: ranks take cores in order" \
    SLURM_JOB_ID=7 SLURM_JOB_NODELIST="n[1-2],login3" SLURM_TASKS_PER_NODE="4(x2),2" SLURM_CPUS_PER_TASK=4 \
    TB_SOCKETS=2 TB_CORES=16 TB_DRY_RUN=1 sh "$L/slurm_mpirun.sbatch" trainbench
# shellcheck disable=SC2086
expect_words "slurm_mpirun: Slurm counting cores keeps PE=12" "--map-by slot:PE=12" "PE=6" \
    $job SLURM_CPUS_ON_NODE=96 TB_CORES=96 TB_DRY_RUN=1 sh "$L/slurm_mpirun.sbatch" trainbench
expect_line "slurm_mpirun: uneven tasks per node, no CPUs per task" \
    "mpirun -np 10 --hostfile $work/uneven.hosts$root_flag --map-by socket --rank-by core --bind-to socket -x PATH trainbench" \
    SLURM_JOB_ID=7 SLURM_JOB_NODELIST="n[1-2],login3" SLURM_TASKS_PER_NODE="4(x2),2" \
    TB_SLURM_HOSTFILE=1 TB_HOSTFILE_PATH="$work/uneven.hosts" TB_DRY_RUN=1 sh "$L/slurm_mpirun.sbatch" trainbench
checks=$((checks + 1))
[ "$(cat "$work/uneven.hosts" 2>/dev/null)" = "n1 slots=4
n2 slots=4
login3 slots=2" ] || fail "slurm_mpirun: uneven hostfile is '$(cat "$work/uneven.hosts" 2>/dev/null)'"
# shellcheck disable=SC2086
expect_words "slurm_mpirun: not the batch node's CUDA_VISIBLE_DEVICES (each node has its own)" \
    "-x OMP_NUM_THREADS=12" "CUDA_VISIBLE_DEVICES" \
    $job CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 TB_DRY_RUN=1 sh "$L/slurm_mpirun.sbatch" trainbench
# shellcheck disable=SC2086
expect_same_args "slurm_mpirun: printed line = what runs" \
    $job TB_MPIRUN="$work/fake_launcher" sh "$L/slurm_mpirun.sbatch" trainbench --results "x y.h5" "it's"
# shellcheck disable=SC2086
expect_error "slurm_mpirun: TB_EXPORT='1X' refused, named" "TB_EXPORT: '1X' is not a variable name" \
    $job TB_EXPORT="1X" TB_DRY_RUN=1 sh "$L/slurm_mpirun.sbatch" trainbench
expect_error "slurm_mpirun: node list and tasks disagree" "disagree" \
    SLURM_JOB_ID=7 SLURM_JOB_NODELIST="n[1-3]" SLURM_TASKS_PER_NODE="4(x2)" TB_DRY_RUN=1 \
    sh "$L/slurm_mpirun.sbatch" trainbench
# shellcheck disable=SC2086
expect_error "slurm_mpirun: no mpirun named" "TB_MPIRUN 'no-such-mpirun' not found" \
    $job TB_MPIRUN=no-such-mpirun sh "$L/slurm_mpirun.sbatch" trainbench
expect_error "slurm_mpirun: outside a job" "not inside a Slurm job" TB_DRY_RUN=1 sh "$L/slurm_mpirun.sbatch" trainbench

echo "== CDPATH exported: cd prints the directory it found there, which must not join the path"
# each script run as launch/NAME from the repository root, with CDPATH
# pointing at the root (as a user's ~/.profile may)
# shellcheck disable=SC2016  # expanded by the sh -c that runs it
cd_root='cd "$0" && exec "$@"'
expect_words "CDPATH: local.sh" "-np 1" "" \
    CDPATH="$root" TB_CORES=4 sh -c "$cd_root" "$root" sh launch/local.sh -n 1 --dry-run -- trainbench
expect_words "CDPATH: hostfile.sh" "-np 16" "" \
    CDPATH="$root" sh -c "$cd_root" "$root" sh launch/hostfile.sh --hostfile "$H" --dry-run -- trainbench
# shellcheck disable=SC2086
expect_words "CDPATH: slurm.sbatch" "--mpi=pmix" "" \
    $job CDPATH="$root" TB_DRY_RUN=1 sh -c "$cd_root" "$root" sh launch/slurm.sbatch trainbench
# shellcheck disable=SC2086
expect_words "CDPATH: slurm_mpirun.sbatch" "-np 16" "" \
    $job CDPATH="$root" TB_DRY_RUN=1 sh -c "$cd_root" "$root" sh launch/slurm_mpirun.sbatch trainbench
checks=$((checks + 1))
got=$(run_clean CDPATH="$root" sh -c "$cd_root" "$root" sh launch/install_gpu.sh --dry-run --no-apt 2>&1) || true
case $got in
    *"-r $root/launch/cuda-wheels.txt"*) ;;
    *) fail "CDPATH: install_gpu.sh --dry-run does not read $root/launch/cuda-wheels.txt: $got" ;;
esac

echo "# test_launch_scripts: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
