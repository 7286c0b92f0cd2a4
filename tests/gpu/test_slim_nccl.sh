#!/bin/sh
# test_slim_nccl.sh SLIM_NCCL_SH: tests/gpu/slim_nccl.sh on a fake NCCL
# source tree (its version.mk, a Makefile whose src.build records what it
# was given and leaves a small shared library) and a fake CUDA toolkit
# whose include folder carries an older NCCL's headers:
#   - every argument mistake ends with exit 2 and one line naming it;
#   - a pattern that leaves out a collective trainbench calls is refused;
#   - the build gets CUDA_INC without nccl.h, nccl_device.h, nccl_device/
#     but with the toolkit's other headers, the architectures as
#     NVCC_GENCODE, ONLY_FUNCS unchanged, BUILDDIR under --out;
#   - --out holds lib/libnccl.so.2 (-> the versioned, stripped file),
#     include/nccl.h and nccl_slim.txt with version, ONLY_FUNCS, archs;
#   - --dry-run builds nothing.
set -u
S=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() { if [ "$1" -eq 0 ]; then echo "ok   $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi; }
refused() { # PATTERN ARGS...: exit 2 and the pattern in the message
  pat=$1
  shift
  msg=$(bash "$S" "$@" 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] && echo "$msg" | grep -Eq -- "$pat"
  check $? "refused ($*): $(echo "$msg" | tail -1)"
}

# the fake toolkit: nvcc, the toolkit's headers and an older NCCL's
mkdir -p "$T/cuda/bin" "$T/cuda/include/nccl_device" "$T/cuda/include/cccl"
printf '#!/bin/sh\necho "Cuda compilation tools, release 13.0, V13.0.88"\n' >"$T/cuda/bin/nvcc"
chmod +x "$T/cuda/bin/nvcc"
for h in cuda_runtime.h cuda.h nccl.h nccl_device.h nccl_device/core.h; do echo "/* $h */" >"$T/cuda/include/$h"; done
# the fake NCCL source tree
mk_src() { # DIR MAJOR MINOR PATCH
  mkdir -p "$1/makefiles" "$1/src/device"
  printf 'NCCL_MAJOR   := %s\nNCCL_MINOR   := %s\nNCCL_PATCH   := %s\nNCCL_SUFFIX  :=\n' "$2" "$3" "$4" \
    >"$1/makefiles/version.mk"
  : >"$1/src/device/generate.py"
  cat >"$1/Makefile" <<'MK'
include makefiles/version.mk
V := $(NCCL_MAJOR).$(NCCL_MINOR).$(NCCL_PATCH)
src.build:
	mkdir -p $(BUILDDIR)/lib $(BUILDDIR)/include
	printf 'BUILDDIR=%s\nCUDA_HOME=%s\nCUDA_INC=%s\nNVCC_GENCODE=%s\nONLY_FUNCS=%s\n' '$(BUILDDIR)' '$(CUDA_HOME)' '$(CUDA_INC)' '$(NVCC_GENCODE)' '$(ONLY_FUNCS)' > $(BUILDDIR)/args
	ls $(CUDA_INC) > $(BUILDDIR)/cuda_inc_list
	printf 'int nccl_fake_symbol(void) { return 1; }\n' | cc -shared -fPIC -g -x c - -o $(BUILDDIR)/lib/libnccl.so.$(V)
	echo '/* nccl.h $(V) */' > $(BUILDDIR)/include/nccl.h
MK
}
mk_src "$T/nccl" 2 30 7
mk_src "$T/old" 2 17 1
mk_src "$T/v228" 2 28 9
mkdir -p "$T/notnccl"

refused "give --src DIR" --out "$T/o"
refused "give --out DIR" --src "$T/nccl"
refused "is not a folder" --src "$T/nope" --out "$T/o"
refused "is not an NCCL source tree" --src "$T/notnccl" --out "$T/o"
refused "unknown argument '--fast'" --src "$T/nccl" --out "$T/o" --fast
refused "--arch needs a value" --src "$T/nccl" --out "$T/o" --arch
refused "--arch 'sm90' is not a compute capability" --src "$T/nccl" --out "$T/o" --arch sm90 --cuda "$T/cuda"
refused "--arch 60: NCCL 2.30.7 for CUDA 13 builds sm_70 and newer" --src "$T/nccl" --out "$T/o" --arch 60
refused "--jobs 0 is not a positive number" --src "$T/nccl" --out "$T/o" --jobs 0
refused "NCCL 2.17.1 is older than 2.18" --src "$T/old" --out "$T/o" --cuda "$T/cuda"
refused "leaves out 'AllReduce Sum bf16 TREE LL', which trainbench calls" --src "$T/nccl" --out "$T/o" \
  --cuda "$T/cuda" --only-funcs "AllReduce Sum f32 * *|Broadcast * *"
refused "leaves out 'AllReduce Sum f32 RING LL'" --src "$T/nccl" --out "$T/o" --cuda "$T/cuda" \
  --only-funcs "AllReduce Sum (f32|bf16) TREE *|Broadcast * *"
refused "leaves out 'Broadcast RING LL'" --src "$T/nccl" --out "$T/o" --cuda "$T/cuda" \
  --only-funcs "AllReduce Sum f32 * *|AllReduce Sum bf16 * *"
refused "is not a valid pattern" --src "$T/nccl" --out "$T/o" --cuda "$T/cuda" --only-funcs "AllReduce (Sum f32 * *"
refused "has no bin/nvcc" --src "$T/nccl" --out "$T/o" --cuda "$T/notnccl"
refused "is inside the source tree" --src "$T/nccl" --out "$T/nccl/build" --cuda "$T/cuda"

# --dry-run: the make command, nothing built
msg=$(bash "$S" --src "$T/nccl" --out "$T/dry" --cuda "$T/cuda" --dry-run 2>&1)
rc=$?
[ $rc -eq 0 ] && echo "$msg" | grep -q "CUDA_INC=$T/dry/cuda-include" &&
  echo "$msg" | grep -q 'NVCC_GENCODE=-gencode=arch=compute_90\\,code=sm_90' &&
  echo "$msg" | grep -q "kept out of the include path: $T/cuda/include/{nccl.h nccl_device nccl_device.h}" &&
  [ ! -e "$T/dry/lib" ] && [ ! -e "$T/dry/build" ]
check $? "--dry-run prints the make command and builds nothing"

# a build of 2.30.7 for sm_90 and sm_100 with the default functions
log=$(bash "$S" --src "$T/nccl" --out "$T/out" --cuda "$T/cuda" --arch 90,100 --jobs 1 2>&1)
check $? "the build runs (exit 0)"
a=$T/out/build/args
grep -qx "BUILDDIR=$T/out/build" "$a" && grep -qx "CUDA_HOME=$T/cuda" "$a" && grep -qx "CUDA_INC=$T/out/cuda-include" "$a"
check $? "make got BUILDDIR under --out, the toolkit and the filtered include folder"
grep -qx 'NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_100,code=sm_100' "$a"
check $? "make got NVCC_GENCODE for sm_90 and sm_100"
grep -qxF 'ONLY_FUNCS=AllReduce Sum f32 * *|AllReduce Sum bf16 * *|AllReduce Sum f64 * *|AllReduce Sum i64 * *|Broadcast * *' "$a"
check $? "make got the default ONLY_FUNCS unchanged"
l=$T/out/build/cuda_inc_list
! grep -Eqx 'nccl.h|nccl_device.h|nccl_device' "$l" && grep -qx cuda_runtime.h "$l" && grep -qx cccl "$l"
check $? "CUDA_INC holds the toolkit's headers but not its NCCL ones ($(tr '\n' ' ' <"$l"))"
[ -L "$T/out/lib/libnccl.so.2" ] && [ "$(readlink "$T/out/lib/libnccl.so.2")" = libnccl.so.2.30.7 ] &&
  [ -f "$T/out/lib/libnccl.so.2.30.7" ] && [ -f "$T/out/include/nccl.h" ]
check $? "--out holds lib/libnccl.so.2 -> libnccl.so.2.30.7 and include/nccl.h"
! readelf -S "$T/out/lib/libnccl.so.2.30.7" 2>/dev/null | grep -q '\.debug_info' &&
  readelf -S "$T/out/build/lib/libnccl.so.2.30.7" | grep -q '\.debug_info'
check $? "the library in --out is stripped (the build's keeps its debug info)"
r=$T/out/nccl_slim.txt
grep -qx 'version = 2.30.7' "$r" && grep -qx 'version_code = 23007' "$r" && grep -qx 'archs = 90 100' "$r" &&
  grep -qxF 'only_funcs = AllReduce Sum f32 * *|AllReduce Sum bf16 * *|AllReduce Sum f64 * *|AllReduce Sum i64 * *|Broadcast * *' "$r" &&
  grep -q '^built = .* with CUDA 13.0$' "$r"
check $? "nccl_slim.txt records version, code, archs, ONLY_FUNCS and the toolkit"
# 2.28: built, with a note that it refuses two ranks on one GPU
log=$(bash "$S" --src "$T/v228" --out "$T/o228" --cuda "$T/cuda" --jobs 1 2>&1) &&
  echo "$log" | grep -q "note: NCCL 2.28.9 refuses two ranks on one GPU"
check $? "NCCL 2.28.9 builds, with the note that it refuses two ranks on one GPU"
echo "# test_slim_nccl: $fails failed"
[ "$fails" -eq 0 ]
