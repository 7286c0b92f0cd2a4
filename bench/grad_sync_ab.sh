#!/bin/sh
# grad_sync_ab.sh - the gradient all-reduce before and after issue 16's
# fixes, on 2 emulated hosts (tests/multihost/hosts.sh) at one link rate,
# runs alternated so that both see the same machine:
#
#   grad_sync_ab.sh TRAINBENCH OUTDIR [RATE] [REPEATS]
#
#   before: MPI's blocking MPI_Allreduce on the communication thread
#           (TB_GRAD_SYNC_POLL_US=0: it spins in Open MPI's progress engine)
#           and the first bucket cut at the 25 MiB cap (--first-bucket-mb 0):
#           trainbench before 0a17ff6;
#   after:  the defaults: MPI_Iallreduce tested with sleeps (libnbc's ring)
#           and a 1 MiB first bucket.
# Each run: ResNet-18, 64 px, batch 32 per rank, 1 thread, scaling rows 1
# and 2 (20 timed steps after 3 warm-up), TB_GRAD_SYNC_STATS=1. One line per
# run: the 2-rank efficiency, step, forward, backward and exposed all-reduce
# (medians over ranks), the 1-rank row, the communication thread's CPU time
# over its all-reduces' wall time, load and CPU pressure before the run.
# RATE: hosts.sh --rate (default 1gbit); REPEATS: pairs (default 3). Root.
set -eu
[ $# -ge 2 ] || { echo "usage: grad_sync_ab.sh TRAINBENCH OUTDIR [RATE] [REPEATS]" >&2; exit 2; }
tb=$1
out=$2
rate=${3:-1gbit}
reps=${4:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/tests/multihost
case $tb in /*) ;; *) tb=$(pwd)/$tb ;; esac
[ -x "$tb" ] || { echo "grad_sync_ab.sh: no trainbench at $tb" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
# shellcheck source=tests/multihost/common.sh
. "$here/common.sh"
mh_require_hosts tc
TB_GRAD_SYNC_STATS=1
export TB_GRAD_SYNC_STATS
mh_launch_env
mh_lock 900
trap '"$here/hosts.sh" down >/dev/null 2>&1 || true' EXIT
printf '%s1 slots=1\n%s2 slots=1\n' "$TB_MH_PREFIX" "$TB_MH_PREFIX" >"$out/hosts"
"$here/hosts.sh" up 2 --rate "$rate" >/dev/null

# "step forward backward allreduce" medians over ranks of the N-rank row
phases() {
    awk -v n="$2" '/^# step time by phase/ { on = 1; next } on && $1 == n {
        gsub(/\/[ \t]+/, "/"); $0 = $0; split($2, s, "/"); split($5, f, "/"); split($6, b, "/"); split($7, a, "/")
        print s[2], f[2], b[2], a[2]; exit }' "$1"
}

r=1
while [ "$r" -le "$reps" ]; do
    for v in before after; do
        log=$out/${v}_$r.txt
        if [ "$v" = before ]; then poll=0 first=0; else poll=200 first=1; fi
        load="load $(cut -d' ' -f1-3 /proc/loadavg), cpu pressure avg10 $(sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/cpu 2>/dev/null || echo '?') %"
        echo "# $load" >"$log"
        TB_GRAD_SYNC_POLL_US=$poll "$root/launch/hostfile.sh" --hostfile "$out/hosts" --fabric tcp -- "$tb" train \
            --model resnet18 --image-size 64 --batch-size 32 --steps 2 --warmup-steps 1 --scaling-steps 20 \
            --scaling-warmup 3 --threads 1 --loader-threads 1 --first-bucket-mb "$first" \
            --results "$out/${v}_$r.h5" >>"$log" 2>&1 9>&- || { echo "grad_sync_ab.sh: $v run $r failed; see $log" >&2; exit 1; }
        eff=$(awk '/^# scaling, every row/ { on = 1 } on && $1 == 2 { print $6; exit }' "$log")
        cpu=$(awk '/^# grad_sync stats rank [0-9]+\/2 bucket/ && $(NF - 1) >= 10 {
                  for (i = 1; i <= NF; i++) { if ($i == "all-reduce") w += $(i + 1); if ($i == "CPU") c += $(i + 1) } }
                  END { if (w > 0) printf "%.0f %%", 100 * c / w; else print "-" }' "$log")
        # shellcheck disable=SC2046  # four numbers
        set -- $(phases "$log" 2) $(phases "$log" 1)
        printf '%-6s %d: 2 ranks eff %5s %%, step %7s, fwd %6s, bwd %6s, exposed %6s ms; 1 rank step %7s, fwd %6s, bwd %6s; comm CPU %5s; %s\n' \
            "$v" "$r" "$eff" "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$cpu" "$load" | tee -a "$out/ab.txt"
    done
    r=$((r + 1))
done
