#!/bin/sh
# scratch_left.sh DIR - the suite's last test: every test ran with TMPDIR=DIR
# (the build's test-scratch folder, emptied by the suite's first test), so
# whatever is still in DIR was left there by a test. Lists each entry with
# its size and exits 1; exits 0 when DIR is empty. A suite run over and over
# (CI, a bisect) would otherwise fill the disk: one run of ResNet
# checkpoints and results files left behind is a gigabyte or more.
#
# scratch_left.sh --selftest: plants a file and a folder in a scratch folder
# of its own and checks each is reported (exit 1), and that an empty folder
# passes.
set -u
check() {
    [ -d "$1" ] || { echo "FAIL: no scratch folder $1 (the suite's first test, scratch_fresh, makes it)"; return 1; }
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
    out=$(check "$d/missing") && { echo "FAIL: a missing folder passed"; bad=1; }
    [ $bad -eq 0 ] && echo "# scratch_left.sh --selftest: an empty folder passes; a file, a folder, no folder are caught"
    exit $bad
fi
[ $# -eq 1 ] || { echo "usage: scratch_left.sh DIR | --selftest" >&2; exit 2; }
check "$1"
