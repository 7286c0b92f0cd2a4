# steps.sh - sourced by the fresh-machine scripts of tests/fresh/: say (a line
# to the terminal and OUTDIR/summary.txt) and step (a timed, logged step in
# OUTDIR/steps.tsv). The caller sets out=OUTDIR.
# shellcheck shell=sh disable=SC2154  # out: set by the script that sources this

# say LINE...: print and keep in the summary
say() { printf '%s\n' "$*" | tee -a "$out/summary.txt"; }

# step NAME CMD...: run CMD with its output in OUTDIR/NAME.log, record NAME,
# seconds and exit status; returns CMD's status
step() {
    name=$1
    shift
    t0=$(date +%s)
    rc=0
    "$@" >"$out/$name.log" 2>&1 || rc=$?
    dt=$(($(date +%s) - t0))
    printf '%s\t%s\t%s\n' "$name" "$dt" "$rc" >>"$out/steps.tsv"
    say "$(printf '%-22s %5s s  exit %s' "$name" "$dt" "$rc")"
    return "$rc"
}
