#!/bin/sh
# project_validate.sh - `trainbench project` against measured runs on
# emulated hosts (issue 16), in one command:
#
#   project_validate.sh TRAINBENCH OUTDIR [LINK...]
#
# LINK: unshaped | RATE (1gbit, 100mbit: hosts.sh --rate RATE) |
#       delayDELAY (delay2ms: hosts.sh --delay 2ms, i.e. +2 ms each way;
#       netem, or the NFQUEUE fallback where the kernel has no sch_netem)
# Default links: unshaped 1gbit 100mbit delay2ms. Needs root (like
# tests/multihost/scaling_links.sh); holds the emulated-host lock.
#
# First, once per host count H, the machine's own contention (no network):
# the same training job as one process alone, then as H processes at once
# (OUTDIR/contention_Hh.txt): how much forward and backward slow down when H
# ranks compute on this machine at the same time, communication aside.
# Then, for each link setting and host count:
#   1. the hosts come up (tests/multihost/hosts.sh: network namespaces,
#      veth + bridge, tc-shaped links) and linkprobe.py measures tbh1 -> tbh2
#      (round trip, one stream, both directions at once);
#   2. `trainbench allreduce-bench` across the hosts writes its table
#      (--results): the fabric is the alpha-beta fit to it (the same
#      all-reduce call as the gradient thread's);
#   3. `trainbench train` measures the scaling rows 1..H with one rank per
#      host, recording /grad_ready and /buckets; TB_GRAD_SYNC_STATS=1 puts
#      each bucket's all-reduce wall and communication-thread CPU time, and
#      the main thread's CPU time and run-queue wait, in the log;
#   4. `trainbench project RUN.h5 --fabric fit:AR.h5` projects every row from
#      the 1-rank row and the fit, beside the measured rows, with the
#      differences by phase (and once more on the link's preset fabric);
# then one summary (OUTDIR/summary.txt): link, hosts, ranks, projected and
# measured efficiency and their difference in points, forward + backward on
# N ranks against 1 rank (in the run, and with no network in the contention
# run of N processes), the projection once more with forward and backward
# slowed by that measured contention (`project --set batch=RATIO`: compute
# and ready times scale; OUTDIR/NAME_Nr.proj_cont.csv) and the measured
# efficiency's difference to it, the communication thread's CPU share of its
# all-reduces, the CPU pressure (/proc/pressure/cpu avg10, % of time some
# task waited for a CPU) and load average before each run.
#
# Environment (knobs, with defaults):
#   TB_VAL_HOSTS="2 3"       host counts (one rank per host)
#   TB_VAL_TRAIN="--model resnet18 --image-size 64 --batch-size 32 --steps 2 --warmup-steps 1
#                 --scaling-steps 20 --scaling-warmup 3 --threads 1 --loader-threads 1"
#   TB_VAL_BENCH=            allreduce-bench sizes (default per link: 4K..64M unshaped and
#                            delayed, 1M..32M at 1gbit, 1M..16M at 100mbit)
#   TB_VAL_QUIET=            "LOAD SECONDS": before each run, wait until the 1-minute
#                            load average is below LOAD (at most SECONDS); the wait and
#                            the load reached are logged. E.g. "0.5 900" on a shared machine.
#   TB_VAL_CONTENTION=1      0: skip the contention runs
#   TB_VAL_DELAY_CC=cubic    TCP congestion control on delayed links (hosts.sh
#                            TB_MH_TCP_CC; empty: the kernel's): BBR over the NFQUEUE
#                            delay collapsed to 25 Mbit/s here
#   TB_VAL_SUMMARY_ONLY=0    1: run nothing; redo the projections and summary.txt from
#                            the files a finished run left in OUTDIR
#   TB_VAL_PYTHON=/usr/bin/python3   for linkprobe.py (and delayq.py)
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
: "${TB_VAL_CONTENTION:=1}"
: "${TB_VAL_SUMMARY_ONLY:=0}"
: "${TB_VAL_DELAY_CC=cubic}"
TB_MH_PYTHON=$TB_VAL_PYTHON
export TB_MH_PYTHON
mkdir -p "$out"
out=$(cd "$out" && pwd)

# shellcheck source=tests/multihost/common.sh
. "$here/common.sh"
[ "$TB_VAL_SUMMARY_ONLY" = 1 ] || mh_require_hosts tc
# the gradient thread's statistics reach every rank (launch/common.sh passes TB_GRAD_SYNC_*)
TB_GRAD_SYNC_STATS=1
export TB_GRAD_SYNC_STATS
mh_launch_env
[ "$TB_VAL_SUMMARY_ONLY" = 1 ] || mh_lock 900
trap '"$here/hosts.sh" down >/dev/null 2>&1 || true' EXIT

# "load1 load5 load15, cpu pressure avg10 P %"
load_now() {
    printf '%s, cpu pressure avg10 %s %%' "$(cut -d' ' -f1-3 /proc/loadavg)" \
        "$(sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/cpu 2>/dev/null || echo '?')"
}

# wait for TB_VAL_QUIET's load (when set); prints what it waited
quiet() {
    [ -n "${TB_VAL_QUIET:-}" ] || return 0
    # shellcheck disable=SC2086  # "LOAD SECONDS"
    set -- $TB_VAL_QUIET
    _w=0
    while [ "$_w" -lt "$2" ] && ! awk -v t="$1" '{ exit !($1 < t) }' /proc/loadavg; do
        sleep 10
        _w=$((_w + 10))
    done
    echo "# waited ${_w} s for a load average below $1: $(load_now)"
}

summary=$out/summary.txt
printf '# project_validate.sh %s (trainbench %s)%s\n' "$*" "$("$tb" --version | cut -d' ' -f2-)" \
    "$( [ "$TB_VAL_SUMMARY_ONLY" = 1 ] && echo ", TB_VAL_SUMMARY_ONLY=1: projections and summary redone from the files")" >"$summary"

# Column 1 of the phase table ("# step time by phase") for N ranks: the
# median over ranks of phase number $3 (1 step, 2 data, 3 h2d, 4 forward, 5 backward).
phase_median() {
    awk -v n="$2" -v col="$3" '/^# step time by phase/ { on = 1; next }
        on && /^#$/ { exit }
        on && $1 == n { gsub(/\/[ \t]+/, "/"); $0 = $0; split($(1 + col), v, "/"); print v[2]; exit }' "$1"
}

# The medians over steps of one process's forward and backward (ms) in the
# console table of a 1-rank run: "forward backward".
solo_phases() {
    awk '/^# training run, ms per step by rank/ { on = 1; next } on && $1 == 0 { print $5, $6; exit }' "$1"
}

# The contention runs: one process, then H at once, the same job, no network.
contention() {
    h=$1
    log=$out/contention_${h}h.txt
    # shellcheck disable=SC2086  # TB_VAL_TRAIN is a list of options
    {
        quiet
        echo "# contention, $h processes: load average before: $(load_now)"
        "$tb" train $TB_VAL_TRAIN --scaling-steps 0 --steps 12 --warmup-steps 2 --results "$out/contention_${h}h_alone.h5" \
            >"$out/contention_${h}h_alone.txt" 2>&1 9>&-
        echo "alone: forward backward (ms): $(solo_phases "$out/contention_${h}h_alone.txt")"
        i=1
        while [ "$i" -le "$h" ]; do
            "$tb" train $TB_VAL_TRAIN --scaling-steps 0 --steps 12 --warmup-steps 2 \
                --results "$out/contention_${h}h_p$i.h5" >"$out/contention_${h}h_p$i.txt" 2>&1 9>&- &
            i=$((i + 1))
        done
        wait
        i=1
        while [ "$i" -le "$h" ]; do
            echo "process $i of $h at once: forward backward (ms): $(solo_phases "$out/contention_${h}h_p$i.txt")"
            i=$((i + 1))
        done
        echo "# load average after: $(load_now)"
    } >"$log" 2>&1
    cat "$log"
}

# compute slowdown with no network: the median over the H processes of
# forward + backward, over the same alone; "-" without the file
contention_ratio() {
    [ -f "$1" ] || { echo -; return; }
    awk '/^alone:/ { a = $(NF - 1) + $NF } /at once:/ { b[++n] = $(NF - 1) + $NF }
         END { if (!a || !n) { print "-"; exit }
               for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (b[j] < b[i]) { t = b[i]; b[i] = b[j]; b[j] = t }
               m = n % 2 ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2; printf "%.2f", m / a }' "$1"
}

if [ "$TB_VAL_CONTENTION" = 1 ] && [ "$TB_VAL_SUMMARY_ONLY" != 1 ]; then
    for h in $TB_VAL_HOSTS; do
        echo "== contention, $h processes at once (no network)"
        contention "$h"
    done
fi

{
    echo "# proj eff: projected from the 1-rank row and the fabric fitted to the link's allreduce-bench table;"
    echo "# cmp N/1: forward + backward on N ranks over 1 rank, in the run; no-net: the same for N processes at"
    echo "# once without network (the contention run). The projection again with forward and backward slowed"
    echo "# (project --set batch=RATIO: compute and ready times scale, the measured 1-rank step does not):"
    echo "# proj+cont by no-net; proj@cmp by cmp N/1 (the run's own slowdown, network stack included);"
    echo "# proj@cmp+bw by cmp N/1 on the bandwidth the run's own bucket all-reduces reached (project --fabric fit)."
    echo "# comm CPU: the communication thread's CPU time over its all-reduces' wall time."
    printf '# %-9s %5s %5s %9s %9s %8s %8s %7s %9s %8s %8s %8s %8s %8s  %s\n' link hosts ranks "proj eff" "meas eff" \
        "diff pt" "cmp N/1" "no-net" "proj+cont" "diff pt" "proj@cmp" "@cmp+bw" "diff pt" "comm CPU" \
        "load average before, cpu pressure"
} >>"$summary"

# On a rate-shaped link the sizes start at 1 MiB: smaller all-reduces fit in
# the token bucket's burst (TB_MH_BURST, 128 kB) and go through faster than
# the rate, which would pull the fitted bandwidth above the link's (measured:
# 64 KiB at 0.19 GB/s on a 1 Gbit/s link) for buckets of many MiB.
bench_sizes() {
    [ -n "${TB_VAL_BENCH:-}" ] && { echo "$TB_VAL_BENCH"; return; }
    case $1 in
        *100mbit*) echo "-b 1M -e 16M -f 2 -n 2 -w 1" ;;
        *mbit* | *gbit*) echo "-b 1M -e 32M -f 2 -n 3 -w 1" ;;
        *) echo "-b 4K -e 64M -f 4 -n 10 -w 2" ;;
    esac
}

# The main table of `project --format csv`: "ranks eff_pct meas_eff_pct step_ms" lines.
efficiencies() {
    awk -F, '/^# projection per rank count/ { want = 1; next }
             want && hdr == "" { for (i = 1; i <= NF; i++) col[$i] = i; hdr = $0; next }
             want && NF == 0 { exit }
             want { print $col["ranks"], $col["efficiency_pct"], $col["measured_efficiency_pct"], $col["step_ms"] }' "$1"
}

# The communication thread's CPU time as a share of its all-reduces' wall
# time, summed over buckets and ranks, in the scaling row of N ranks.
comm_cpu_share() {
    awk -v n="$2" '/^# scaling row [0-9]+ of [0-9]+: [0-9]+ ranks?, [0-9]+ warm-up/ { on = ($7 == n) ; next }
        on && /^# grad_sync stats rank [0-9]+\/[0-9]+ bucket/ && $5 ~ ("/" n "$") {
            for (i = 1; i <= NF; i++) { if ($i == "all-reduce") w += $(i+1); if ($i == "CPU") c += $(i+1) } }
        END { if (w > 0) printf "%.0f %%\n", 100 * c / w; else print "-" }' "$1"
}

# The projections of one run and its summary rows (files only: also what
# TB_VAL_SUMMARY_ONLY=1 redoes over a finished OUTDIR). NAME LINK HOSTS PRESET
summarize() {
    _n=$1 _link=$2 _h=$3 _preset=$4
    _log=$out/$_n.txt _run=$out/$_n.run.h5 _ar=$out/$_n.ar.h5 _rk=$(seq -s, 1 "$_h")
    # the projection from the 1-rank row and the fitted fabric, then on the preset
    "$tb" project "$_run" --fabric "fit:$_ar" --out "$out/$_n.proj.h5" --ranks "$_rk" >"$out/$_n.proj.txt"
    "$tb" project "$_run" --fabric "$_preset" --ranks "$_rk" >"$out/$_n.proj_preset.txt"
    "$tb" project "$_run" --fabric "fit:$_ar" --ranks "$_rk" --format csv --what-if "" >"$out/$_n.proj.csv"
    _load0=$(sed -n 's/^# link .*load average before: //p' "$_log" | head -n 1)
    _cmp1=$(awk -v f="$(phase_median "$_log" 1 4)" -v b="$(phase_median "$_log" 1 5)" 'BEGIN { print f + b }')
    _step1=$(efficiencies "$out/$_n.proj.csv" | awk '$1 == 1 { print $4 }')
    efficiencies "$out/$_n.proj.csv" | while read -r n p m _; do
        [ "$n" -gt 1 ] || continue
        d=$(diff_pt "$p" "$m")
        r=$(awk -v a="$_cmp1" -v f="$(phase_median "$_log" "$n" 4)" -v b="$(phase_median "$_log" "$n" 5)" \
            'BEGIN { if (a > 0 && f + b > 0) printf "%.2f", (f + b) / a; else print "-" }')
        nonet=$(contention_ratio "$out/contention_${n}h.txt")
        pc=$(slowed_eff "$_run" "fit:$_ar" "$n" "$nonet" "$_step1" "$out/${_n}_${n}r.proj_cont.csv")
        # the run's own compute slowdown, then also the bandwidth its own bucket all-reduces reached
        pr=$(slowed_eff "$_run" "fit:$_ar" "$n" "$r" "$_step1" "$out/${_n}_${n}r.proj_run.csv")
        po=$(slowed_eff "$_run" fit "$n" "$r" "$_step1" "$out/${_n}_${n}r.proj_own.csv")
        printf '  %-9s %5s %5s %9s %9s %8s %8s %7s %9s %8s %8s %8s %8s %8s  %s\n' "$_link" "$_h" "$n" "$p" "${m:--}" "$d" \
            "$r" "$nonet" "$pc" "$(diff_pt "$pc" "$m")" "$pr" "$po" "$(diff_pt "$po" "$m")" \
            "$(comm_cpu_share "$_log" "$n")" "$_load0" >>"$summary"
    done
}

# "+D.D", measured - projected in points, or "-"
diff_pt() { awk -v p="$1" -v m="$2" 'BEGIN { if (m == "" || p == "" || p == "-") print "-"; else printf "%+.1f", m - p }'; }

# The efficiency of N ranks projected on FABRIC with forward and backward
# slowed by RATIO (project --set batch=RATIO: compute and ready times
# scale; the measured 1-rank step STEP1 does not), its CSV kept in FILE;
# "-" when RATIO is. RUN FABRIC N RATIO STEP1 FILE
slowed_eff() {
    [ "$4" != - ] || { echo -; return; }
    "$tb" project "$1" --fabric "$2" --ranks "1,$3" --set "batch=$4" --format csv --what-if "" >"$6"
    efficiencies "$6" | awk -v n="$3" -v s1="$5" '$1 == n { printf "%.1f", 100 * s1 / $4 }'
}

for link in "$@"; do
    case $link in
        unshaped) shape="" preset=emu-unshaped cc="" ;;
        delay*) shape="--delay ${link#delay}" preset=emu-delay2ms cc=$TB_VAL_DELAY_CC ;;
        *) shape="--rate $link" preset=emu-$link cc="" ;;
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
        log=$out/$name.txt
        if [ "$TB_VAL_SUMMARY_ONLY" = 1 ]; then
            if [ -f "$out/$name.run.h5" ] && [ -f "$out/$name.ar.h5" ]; then summarize "$name" "$link" "$h" "$preset"; fi
            continue
        fi
        # shellcheck disable=SC2086  # shape is a list of options
        if ! TB_MH_TCP_CC=$cc "$here/hosts.sh" up "$h" $shape >"$log" 2>&1; then
            echo "project_validate.sh: $name not run: $(tail -n 1 "$log")" >&2
            printf '  %-9s %5s     -  not run: %s\n' "$link" "$h" "$(tail -n 1 "$log")" >>"$summary"
            continue
        fi
        q=$(quiet)
        load0=$(load_now)
        {
            [ -z "$q" ] || echo "$q"
            echo "# link $link, $h hosts, one rank each; load average before: $load0"
            mh_in_ns "${TB_MH_PREFIX}2" "$TB_VAL_PYTHON" "$here/linkprobe.py" serve 5301 9>&- &
            mib=32
            case $link in *mbit*) mib=4 ;; esac
            mh_in_ns "${TB_MH_PREFIX}1" "$TB_VAL_PYTHON" "$here/linkprobe.py" probe "$TB_MH_NET.12" 5301 "$mib" 9>&- || true
            wait
            # shellcheck disable=SC2046  # the sizes are a list of options
            "$root/launch/hostfile.sh" --hostfile "$hf" --fabric tcp -- "$tb" allreduce-bench \
                $(bench_sizes "$link") --results "$out/$name.ar.h5" 9>&- | tee "$out/$name.ar.txt"
            echo "# load average before training: $(load_now)"
            # shellcheck disable=SC2086  # TB_VAL_TRAIN is a list of options
            "$root/launch/hostfile.sh" --hostfile "$hf" --fabric tcp -- "$tb" train $TB_VAL_TRAIN \
                --results "$out/$name.run.h5" 9>&-
        } >>"$log" 2>&1 || { echo "project_validate.sh: $name failed; see $log" >&2; exit 1; }
        echo "# load average after: $(load_now)" >>"$log"
        "$here/hosts.sh" down >/dev/null
        summarize "$name" "$link" "$h" "$preset"
        echo "== $name"
        sed -n '/^# projection per rank count/,/^#$/p' "$out/$name.proj.txt"
        grep -E '^# [0-9]+ ranks: measured step' "$out/$name.proj.txt" || true
    done
done
echo
cat "$summary"
