#!/bin/sh
# test_bundle_env.sh TRAINBENCH NEW_STUB_DIR OLD_STUB_DIR: the GPU bundle
# loads a slim NCCL ahead of PyTorch's (issue 26), checked on any machine
# with two stand-in libnccl.so.2 (tests/gpu/nccl_stub.c): NEW_STUB_DIR's
# reports 2.30.7 (the slim build, put in a bundle by bundle_nccl.sh),
# OLD_STUB_DIR's 2.28.9 (the GPU machine's PyTorch wheel, under a fake
# site-packages nvidia/nccl/lib, and in a folder already on LD_LIBRARY_PATH
# before the suite starts). With the bundle's env.sh
# (bundle_env.sh) and the suite's library path (suite_env.sh), as
# run_suite.sh sets them:
#   - the loader resolves libnccl.so.2 to the bundle's (ldd), trainbench
#     probe reports NCCL 2.30.7 loaded from there with the slim record's
#     ONLY_FUNCS, and its results file says the same (nccl_library);
#   - without a slim NCCL in the bundle the same set-up loads the 2.28.9
#     one (the order is what decides, not chance);
#   - bundle_nccl.sh refuses a folder without a record, and a record older
#     than 2.30.
set -u
TB=$1 NEW=$2 OLD=$3
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() { # COND-EXIT-STATUS WHAT
  if [ "$1" -eq 0 ]; then echo "ok   $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi
}

# a slim build's --out folder, as tests/gpu/slim_nccl.sh leaves it
mkdir -p "$T/slim/lib" "$T/site/nvidia/nccl/lib" "$T/gpu-bundle/lib" "$T/preset"
cp "$NEW/libnccl.so.2.30.7" "$T/slim/lib/"
ln -s libnccl.so.2.30.7 "$T/slim/lib/libnccl.so.2"
cat >"$T/slim/nccl_slim.txt" <<REC
version = 2.30.7
version_code = 23007
only_funcs = AllReduce Sum f32 * *|AllReduce Sum bf16 * *|Broadcast * *
archs = 90
REC
cp "$OLD/libnccl.so.2.28.9" "$T/site/nvidia/nccl/lib/libnccl.so.2"
cp "$OLD/libnccl.so.2.28.9" "$T/preset/libnccl.so.2"

out=$(sh "$HERE/bundle_nccl.sh" "$T/slim" "$T/gpu-bundle" 2>&1)
check $? "bundle_nccl.sh carries the slim build ($out)"
[ -f "$T/gpu-bundle/nccl/lib/libnccl.so.2" ] && [ -f "$T/gpu-bundle/nccl/nccl_slim.txt" ]
check $? "the bundle holds nccl/lib/libnccl.so.2 and nccl/nccl_slim.txt"

# what run_suite.sh does: env.sh, then the machine's libraries after it
env_run() { # CMD... in a shell set up like the suite's
  ( export LD_LIBRARY_PATH="$T/preset"
    export TB_BUNDLE="$T/gpu-bundle"
    # shellcheck disable=SC1091
    . "$HERE/bundle_env.sh"
    # shellcheck disable=SC1091
    . "$HERE/suite_env.sh"
    tb_suite_libpath "$T/site/nvidia/nccl/lib"
    "$@" )
}
got=$(env_run ldd "$TB" | awk '$1 == "libnccl.so.2" {print $3}')
[ "$got" = "$T/gpu-bundle/nccl/lib/libnccl.so.2" ]
check $? "the loader resolves libnccl.so.2 to the bundle's slim build (got '$got')"
p=$(env_run "$TB" probe --quick --results "$T/probe.h5" 2>&1)
echo "$p" | grep -Eq '^# NCCL +2\.[0-9]+\.[0-9]+ +2\.30\.7 '
check $? "probe: NCCL 2.30.7 loaded"
echo "$p" | grep -Fq "# NCCL library                 $T/gpu-bundle/nccl/lib/libnccl.so.2.30.7"
check $? "probe: the NCCL library is the bundle's file"
echo "$p" | grep -Fq 'slim build (tests/gpu/slim_nccl.sh): sm 90, ONLY_FUNCS "AllReduce Sum f32 * *|AllReduce Sum bf16 * *|Broadcast * *"'
check $? "probe: the slim build's ONLY_FUNCS, from its record"
a=$("$TB" report "$T/probe.h5" 2>&1)
echo "$a" | grep -q "nccl_library.*gpu-bundle/nccl/lib/libnccl.so.2.30.7; slim build"
check $? "probe's results file records the library and the slim build (nccl_library)"

# without the slim build: PyTorch's stand-in, after the bundle's libraries
rm -rf "$T/gpu-bundle/nccl"
p=$(env_run "$TB" probe --quick 2>&1)
echo "$p" | grep -Eq '^# NCCL +2\.[0-9]+\.[0-9]+ +2\.28\.9 ' && echo "$p" | grep -Fq "$T/preset/libnccl.so.2"
check $? "without a slim build the machine's NCCL 2.28.9 is loaded (the first on LD_LIBRARY_PATH before the suite)"

# refusals
mkdir -p "$T/empty"
sh "$HERE/bundle_nccl.sh" "$T/empty" "$T/b2" >"$T/r1" 2>&1
[ $? -eq 2 ] && grep -q "has no nccl_slim.txt: build it with tests/gpu/slim_nccl.sh" "$T/r1"
check $? "bundle_nccl.sh refuses a folder without a record: $(cat "$T/r1")"
sed -i 's/^version_code = .*/version_code = 22809/' "$T/slim/nccl_slim.txt"
sh "$HERE/bundle_nccl.sh" "$T/slim" "$T/b3" >"$T/r2" 2>&1
[ $? -eq 2 ] && grep -q "need 2.30 or newer" "$T/r2"
check $? "bundle_nccl.sh refuses NCCL before 2.30: $(cat "$T/r2")"

echo "# test_bundle_env: $fails failed"
[ "$fails" -eq 0 ]
