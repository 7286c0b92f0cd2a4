#!/bin/sh
# scratch_left.sh DIR - the suite's last test: every test ran with TMPDIR=DIR
# (the build's test-scratch folder, emptied by the suite's first test), so
# whatever is still in DIR was left there by a test. Lists each entry with
# its size and exits 1; exits 0 when DIR is empty. A suite run over and over
# (CI, a bisect) would otherwise fill the disk: one run of ResNet
# checkpoints and results files left behind is a gigabyte or more.
# Open MPI's session folders (ompi.HOST.UID: what a run that called
# MPI_Abort or was killed, as the error and resilience tests make them,
# leaves behind) are removed and counted in a line, not failed: they are
# Open MPI's, and which test's run left them depends on the order runs end.
#
# scratch_left.sh --selftest: plants a file and a folder in a scratch folder
# of its own and checks each is reported (exit 1), and that an empty folder
# passes.
set -u
check() {
    [ -d "$1" ] || { echo "FAIL: no scratch folder $1 (the suite's first test, scratch_fresh, makes it)"; return 1; }
    ompi=$(find "$1" -mindepth 1 -maxdepth 1 -name 'ompi.*' | LC_ALL=C sort)
    if [ -n "$ompi" ]; then
        echo "# Open MPI session folders left by aborted or killed runs, removed:" \
            "$(echo "$ompi" | while IFS= read -r e; do
                printf '%s (%s, %s folders) ' "$(basename "$e")" "$(du -sh "$e" | cut -f1)" "$(find "$e" -type d | wc -l)"
            done)"
        echo "$ompi" | while IFS= read -r e; do rm -rf "$e"; done
    fi
    left=$(find "$1" -mindepth 1 -maxdepth 1 | LC_ALL=C sort)
    if [ -z "$left" ]; then
        echo "# $1: empty (no test left anything in TMPDIR)"
        return 0
    fi
    echo "FAIL: tests left $(echo "$left" | wc -l) entries in their TMPDIR $1 (a test must remove what it makes):"
    echo "$left" | while IFS= read -r e; do
        echo "  $(du -sh "$e" 2>/dev/null | cut -f1)	$(basename "$e")"
    done
    return 1
}

if [ "${1:-}" = "--selftest" ]; then
    d=$(mktemp -d "${TMPDIR:-/tmp}/tb_scratch_selftest.XXXXXX") || exit 1
    trap 'rm -rf "$d"' EXIT
    bad=0
    mkdir "$d/s"
    out=$(check "$d/s") || { echo "FAIL: an empty folder was reported: $out"; bad=1; }
    echo "$out"
    : >"$d/s/tb_opprof_x.h5"
    out=$(check "$d/s") && { echo "FAIL: a file left in the folder passed"; bad=1; }
    if ! echo "$out" | grep -q "left 1 entries" || ! echo "$out" | grep -q "tb_opprof_x.h5"; then
        echo "FAIL: the file is not named: $out"
        bad=1
    fi
    rm "$d/s/tb_opprof_x.h5"
    mkdir -p "$d/s/tb_async_y/sub"
    head -c 300000 /dev/zero >"$d/s/tb_async_y/sub/a.ckpt.h5"
    out=$(check "$d/s") && { echo "FAIL: a folder left in the folder passed"; bad=1; }
    echo "$out" | grep -qE "^  [0-9.]+K	tb_async_y$" || { echo "FAIL: the folder and its size are not listed: $out"; bad=1; }
    echo "$out"
    rm -rf "$d/s/tb_async_y"
    mkdir -p "$d/s/ompi.host.0/jf.0/1/0"
    out=$(check "$d/s") || { echo "FAIL: an Open MPI session folder failed the check: $out"; bad=1; }
    echo "$out"
    [ -e "$d/s/ompi.host.0" ] && { echo "FAIL: the Open MPI session folder was not removed"; bad=1; }
    out=$(check "$d/missing") && { echo "FAIL: a missing folder passed"; bad=1; }
    [ $bad -eq 0 ] && echo "# scratch_left.sh --selftest: an empty folder passes; a file, a folder, no folder are caught;" \
        "an Open MPI session folder is removed"
    exit $bad
fi
[ $# -eq 1 ] || { echo "usage: scratch_left.sh DIR | --selftest" >&2; exit 2; }
check "$1"
