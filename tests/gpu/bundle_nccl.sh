#!/bin/sh
# bundle_nccl.sh SLIM_DIR BUNDLE_DIR: puts a slim NCCL (the --out folder of
# tests/gpu/slim_nccl.sh: lib/libnccl.so.2 and nccl_slim.txt) into a GPU
# bundle being made (BUNDLE_DIR/nccl/), after checking that it is one:
# NCCL >= 2.30 (what lets two ranks share the lent machine's one GPU), the
# library named in the record, its version and ONLY_FUNCS printed. Called by
# tests/gpu/make_bundle.sh (TB_BUNDLE_NCCL=SLIM_DIR) and by
# tests/gpu/test_bundle_env.sh.
set -eu
die() { echo "bundle_nccl.sh: $*" >&2; exit 2; }
[ $# -eq 2 ] || die "usage: bundle_nccl.sh SLIM_DIR BUNDLE_DIR"
src=$1 dst=$2
rec=$src/nccl_slim.txt
[ -f "$rec" ] || die "$src has no nccl_slim.txt: build it with tests/gpu/slim_nccl.sh --src NCCL_SOURCE --out $src"
get() { sed -n "s/^$1 = //p" "$rec" | head -1; }
version=$(get version) code=$(get version_code) funcs=$(get only_funcs)
if [ -z "$version" ] || [ -z "$code" ]; then die "$rec lacks version or version_code"; fi
lib=$src/lib/libnccl.so.$version
[ -f "$lib" ] || die "$rec names NCCL $version but $lib is missing"
[ "$code" -ge 23000 ] || die "NCCL $version in $src: two ranks on one GPU need 2.30 or newer"
mkdir -p "$dst/nccl/lib"
cp "$lib" "$dst/nccl/lib/"
ln -sf "libnccl.so.$version" "$dst/nccl/lib/libnccl.so.2"
cp "$rec" "$dst/nccl/nccl_slim.txt"
echo "   slim NCCL $version carried ($(du -h "$lib" | cut -f1)); ONLY_FUNCS=\"$funcs\""
