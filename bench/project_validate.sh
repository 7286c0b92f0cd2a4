#!/bin/sh
# project_validate.sh - `trainbench project` against measured runs on
# emulated hosts (issue 16): for each link setting and host count,
#   1. the hosts come up (tests/multihost/hosts.sh: network namespaces,
#      veth + bridge, tc-shaped links) and linkprobe.py measures tbh1 -> tbh2;
#   2. `trainbench allreduce-bench` across the hosts writes its table
#      (--results): the fabric is the alpha-beta fit to it;
#   3. `trainbench train` measures the scaling rows 1..H with one rank per
#      host, recording /grad_ready and /buckets;
#   4. `trainbench project RUN.h5 --fabric fit:AR.h5` projects every row from
#      the 1-rank row and the fit, beside the measured rows, with the
#      differences by phase (and once more on the link's preset fabric);
# then one summary: link, hosts, ranks, projected and measured efficiency,
# the difference in points, and the load average around each run (the
# machine's own contention, measured: the phase table shows how much each
# compute phase slowed down at N ranks against 1).
#
#   project_validate.sh TRAINBENCH OUTDIR [LINK...]
#
# LINK: unshaped | RATE (1gbit, 100mbit: hosts.sh --rate RATE) |
#       delayDELAY (delay2ms: hosts.sh --delay 2ms, i.e. +2 ms each way)
# Default links: unshaped 1gbit 100mbit delay2ms. Needs root (like
# tests/multihost/scaling_links.sh); holds the emulated-host lock.
#
# Environment (knobs, with defaults):
#   TB_VAL_HOSTS="2 3"       host counts (one rank per host)
#   TB_VAL_TRAIN="--model resnet18 --image-size 64 --batch-size 32 --steps 2 --warmup-steps 1
#                 --scaling-steps 20 --scaling-warmup 3 --threads 1 --loader-threads 1"
#   TB_VAL_BENCH=            allreduce-bench sizes (default per link: to 64M unshaped,
#                            32M at 1gbit, 8M at 100mbit; -f 4)
#   TB_VAL_PYTHON=/usr/bin/python3   for linkprobe.py
#   TB_MH_LOCK, TB_MH_PREFIX, TB_MH_NET, TB_MH_BRIDGE: as in tests/multihost/common.sh
set -eu

[ $# -ge 2 ] || { echo "usage: project_validate.sh TRAINBENCH OUTDIR [LINK...]" >&2; exit 2; }
tb=$1
out=$2
shift 2
[ $# -gt 0 ] || set -- unshaped 1gbit 100mbit delay2ms
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/tests/multihost
case $tb in /*) ;; *) tb=$(pwd)/$tb ;; esac
[ -x "$tb" ] || { echo "project_validate.sh: no trainbench at $tb" >&2; exit 1; }
: "${TB_VAL_HOSTS:=2 3}"
: "${TB_VAL_TRAIN:=--model resnet18 --image-size 64 --batch-size 32 --steps 2 --warmup-steps 1 --scaling-steps 20 --scaling-warmup 3 --threads 1 --loader-threads 1}"
: "${TB_VAL_PYTHON:=/usr/bin/python3}"
mkdir -p "$out"
out=$(cd "$out" && pwd)

# shellcheck source=tests/multihost/common.sh
. "$here/common.sh"
mh_require_hosts tc
mh_launch_env
mh_lock 900
trap '"$here/hosts.sh" down >/dev/null 2>&1 || true' EXIT

summary=$out/summary.txt
printf '# project_validate.sh %s (trainbench %s)\n' "$*" "$("$tb" --version | cut -d' ' -f2-)" >"$summary"
printf '# %-9s %5s %5s %9s %9s %8s  %s\n' link hosts ranks "proj eff" "meas eff" "diff pt" "load average before -> after" >>"$summary"

bench_sizes() {
    [ -n "${TB_VAL_BENCH:-}" ] && { echo "$TB_VAL_BENCH"; return; }
    case $1 in
        *100mbit*) echo "-b 4K -e 8M -f 4 -n 2 -w 1" ;;
        *mbit* | *gbit*) echo "-b 4K -e 32M -f 4 -n 3 -w 1" ;;
        *) echo "-b 4K -e 64M -f 4 -n 10 -w 2" ;;
    esac
}

# The main table of `project --format csv`: "ranks eff_pct meas_eff_pct" lines.
efficiencies() {
    awk -F, '/^# projection per rank count/ { want = 1; next }
             want && hdr == "" { for (i = 1; i <= NF; i++) col[$i] = i; hdr = $0; next }
             want && NF == 0 { exit }
             want { print $col["ranks"], $col["efficiency_pct"], $col["measured_efficiency_pct"] }' "$1"
}

for link in "$@"; do
    case $link in
        unshaped) shape="" preset=emu-unshaped ;;
        delay*) shape="--delay ${link#delay}" preset=emu-delay2ms ;;
        *) shape="--rate $link" preset=emu-$link ;;
    esac
    for h in $TB_VAL_HOSTS; do
        name=val_${link}_${h}h
        hf=$out/$name.hosts
        : >"$hf"
        i=1
        while [ "$i" -le "$h" ]; do
            echo "${TB_MH_PREFIX}$i slots=1" >>"$hf"
            i=$((i + 1))
        done
        # shellcheck disable=SC2086  # shape is a list of options
        "$here/hosts.sh" up "$h" $shape >/dev/null
        log=$out/$name.txt
        load0=$(cut -d' ' -f1-3 /proc/loadavg)
        {
            echo "# link $link, $h hosts, one rank each; load average before: $load0"
            ip netns exec "${TB_MH_PREFIX}2" "$TB_VAL_PYTHON" "$here/linkprobe.py" serve 5301 9>&- &
            mib=32
            case $link in *mbit*) mib=4 ;; esac
            ip netns exec "${TB_MH_PREFIX}1" "$TB_VAL_PYTHON" "$here/linkprobe.py" probe "$TB_MH_NET.12" 5301 "$mib" 9>&- || true
            wait
            # shellcheck disable=SC2046  # the sizes are a list of options
            "$root/launch/hostfile.sh" --hostfile "$hf" --fabric tcp -- "$tb" allreduce-bench \
                $(bench_sizes "$link") --results "$out/$name.ar.h5" 9>&- | tee "$out/$name.ar.txt"
            # shellcheck disable=SC2086  # TB_VAL_TRAIN is a list of options
            "$root/launch/hostfile.sh" --hostfile "$hf" --fabric tcp -- "$tb" train $TB_VAL_TRAIN \
                --results "$out/$name.run.h5" 9>&-
        } >"$log" 2>&1 || { echo "project_validate.sh: $name failed; see $log" >&2; exit 1; }
        load1=$(cut -d' ' -f1-3 /proc/loadavg)
        echo "# load average after: $load1" >>"$log"
        "$here/hosts.sh" down >/dev/null
        # the projection from the 1-rank row and the fitted fabric, then on the preset
        "$tb" project "$out/$name.run.h5" --fabric "fit:$out/$name.ar.h5" --out "$out/$name.proj.h5" \
            --ranks "$(seq -s, 1 "$h")" >"$out/$name.proj.txt"
        "$tb" project "$out/$name.run.h5" --fabric "$preset" --ranks "$(seq -s, 1 "$h")" \
            >"$out/$name.proj_preset.txt"
        "$tb" project "$out/$name.run.h5" --fabric "fit:$out/$name.ar.h5" --ranks "$(seq -s, 1 "$h")" \
            --format csv --what-if "" >"$out/$name.proj.csv"
        efficiencies "$out/$name.proj.csv" | while read -r n p m; do
            [ "$n" -gt 1 ] || continue
            d=$(awk -v p="$p" -v m="$m" 'BEGIN { if (m == "") print "-"; else printf "%+.1f", m - p }')
            printf '  %-9s %5s %5s %9s %9s %8s  %s -> %s\n' "$link" "$h" "$n" "$p" "${m:--}" "$d" "$load0" \
                "$load1" >>"$summary"
        done
        echo "== $name"
        sed -n '/^# projection per rank count/,/^#$/p' "$out/$name.proj.txt"
        grep -E '^# [0-9]+ ranks: measured step' "$out/$name.proj.txt" || true
    done
done
echo
cat "$summary"
