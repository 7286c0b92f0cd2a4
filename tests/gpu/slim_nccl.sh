#!/bin/bash
# slim_nccl.sh - builds a small libnccl.so.2 from an NCCL source folder the
# user names (github NVIDIA/nccl, e.g. tag v2.30.7-1): machine code for one
# GPU architecture and only the collectives trainbench calls, so that it
# fits the lent GPU machine's 64 MiB per call (tests/gpu/make_bundle.sh
# carries it with TB_BUNDLE_NCCL=OUT). PyPI's full library for every
# architecture is 344 MB; this one, for sm_90 with the default functions,
# was 32 MB (7.5 MB stripped, 4.8 MB xz) at 2.30.7, in 8.6 minutes on 2
# cores.
#
#   slim_nccl.sh --src DIR --out DIR [--arch 90[,100...]] [--only-funcs PATTERN]
#                [--cuda DIR] [--jobs N] [--no-strip] [--dry-run]
#
#   --src         the NCCL source tree (its makefiles/version.mk and
#                 src/device/generate.py must be there); it is only read:
#                 everything is built under OUT/build
#   --out         where the library goes: OUT/lib/libnccl.so.2 (and its
#                 versioned name), OUT/include/nccl.h, OUT/nccl_slim.txt (the
#                 version, ONLY_FUNCS, architectures, source revision)
#   --arch        compute capabilities (default 90: H100/H200)
#   --only-funcs  NCCL's ONLY_FUNCS (src/device/generate.py); the default is
#                 what comm/ calls. A pattern that leaves out a collective
#                 trainbench calls is refused: NCCL would run a no-op for it
#   --cuda        the CUDA toolkit (default $CUDA_HOME or /usr/local/cuda)
#   --dry-run     check everything and print the make command, build nothing
#
# The toolkit's own include folder may hold an older NCCL's headers
# (nccl.h, nccl_device.h, nccl_device/: CUDA 13's carries 2.28's), and
# NCCL's host sources are compiled with -I $(CUDA_INC) ahead of the source
# tree's headers: they shadow them and break the build
# (NCCL_GIN_MAX_CONNECTIONS undeclared in sym_kernels_host.cc). So the
# build gets CUDA_INC = a folder of links to every entry of the toolkit's
# include folder except those.
#
# NCCL's source and the library never go into trainbench's repository.
set -euo pipefail

DEFAULT_FUNCS="AllReduce Sum f32 * *|AllReduce Sum bf16 * *|AllReduce Sum f64 * *|AllReduce Sum i64 * *|Broadcast * *"
# what comm/comm_nccl.c calls: ncclAllReduce(ncclSum) on these types, ncclBroadcast
NEEDED=("AllReduce Sum f32" "AllReduce Sum bf16" "Broadcast")
MIN_CODE=21800   # trainbench works with NCCL >= 2.18
SHARE_CODE=23000 # two ranks on one GPU (NCCL_MULTI_RANK_GPU_ENABLE=1)

die() { echo "slim_nccl.sh: $*" >&2; exit 2; }

src="" out="" arch=90 funcs=$DEFAULT_FUNCS cuda=${CUDA_HOME:-/usr/local/cuda} jobs=$(nproc 2>/dev/null || echo 2)
strip=1 dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --src|--out|--arch|--only-funcs|--cuda|--jobs)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --src) src=$2 ;; --out) out=$2 ;; --arch) arch=$2 ;; --only-funcs) funcs=$2 ;;
        --cuda) cuda=$2 ;; --jobs) jobs=$2 ;;
      esac
      shift 2 ;;
    --no-strip) strip=0; shift ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

[ -n "$src" ] || die "give --src DIR, an NCCL source tree (git clone https://github.com/NVIDIA/nccl; git checkout v2.30.7-1)"
[ -n "$out" ] || die "give --out DIR, where the library goes"
[ -d "$src" ] || die "--src $src is not a folder"
src=$(cd "$src" && pwd)
if [ ! -f "$src/makefiles/version.mk" ] || [ ! -f "$src/src/device/generate.py" ]; then
  die "--src $src is not an NCCL source tree (no makefiles/version.mk or src/device/generate.py)"
fi
case "$jobs" in ''|*[!0-9]*|0) die "--jobs $jobs is not a positive number" ;; esac

ver() { sed -n "s/^$1 *:= *\([0-9]*\).*/\1/p" "$src/makefiles/version.mk" | head -1; }
major=$(ver NCCL_MAJOR) minor=$(ver NCCL_MINOR) patch=$(ver NCCL_PATCH)
if [ -z "$major" ] || [ -z "$minor" ] || [ -z "$patch" ]; then
  die "cannot read the version from $src/makefiles/version.mk"
fi
code=$(( major * 10000 + minor * 100 + patch ))
version=$major.$minor.$patch
[ "$code" -ge "$MIN_CODE" ] || die "NCCL $version is older than 2.18, the oldest trainbench works with"
[ "$code" -ge "$SHARE_CODE" ] ||
  echo "slim_nccl.sh: note: NCCL $version refuses two ranks on one GPU; NCCL_MULTI_RANK_GPU_ENABLE needs 2.30 or newer" >&2

gencode=""
IFS=',' read -r -a archs <<<"$arch"
[ ${#archs[@]} -gt 0 ] || die "--arch is empty"
for a in "${archs[@]}"; do
  case "$a" in ''|*[!0-9]*) die "--arch '$a' is not a compute capability like 90 (sm_90) or 100" ;; esac
  [ "$a" -ge 70 ] || die "--arch $a: NCCL $version for CUDA 13 builds sm_70 and newer only"
  gencode="$gencode -gencode=arch=compute_$a,code=sm_$a"
done
gencode=${gencode# }

# ONLY_FUNCS as src/device/generate.py reads it: '*' is [^ ]*, matched
# case-insensitively from the start, '$' after the whole pattern. Every
# algorithm and protocol of what trainbench calls must be built.
PY=$(command -v python3 || true)
[ -n "$PY" ] || die "python3 is needed (NCCL's build runs src/device/generate.py with it)"
missing=$("$PY" - "$funcs" "${NEEDED[@]}" <<'EOF'
import re, sys
pat, needed = sys.argv[1], sys.argv[2:]
if not pat.strip():
    sys.exit(0)  # empty: every function is built
try:
    rx = re.compile(pat.replace("*", "[^ ]*") + "$", re.IGNORECASE)
except re.error as e:
    print(f"is not a valid pattern ({e})")
    sys.exit(0)
algos = {"AllReduce": ["TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE"], "Broadcast": ["RING"]}
for need in needed:
    coll = need.split()[0]
    for algo in algos[coll]:
        for proto in ["LL", "LL128", "SIMPLE"]:
            fn = f"{need} {algo} {proto}"
            if not rx.match(fn):
                print(f"leaves out '{fn}', which trainbench calls (NCCL would run a no-op for it)")
                sys.exit(0)
EOF
)
[ -z "$missing" ] || die "--only-funcs '$funcs' $missing"

[ -x "$cuda/bin/nvcc" ] || die "--cuda $cuda has no bin/nvcc (name the CUDA toolkit with --cuda or CUDA_HOME)"
[ -d "$cuda/include" ] || die "--cuda $cuda has no include folder"

mkdir -p "$out"
out=$(cd "$out" && pwd)
case "$out/" in "$src"/*) die "--out $out is inside the source tree; build outside it" ;; esac
build=$out/build
shadow=$out/cuda-include
# links to the toolkit's headers, without an older NCCL's
rm -rf "$shadow"
mkdir -p "$shadow"
left=""
for e in "$cuda/include"/* "$cuda/include"/.[!.]*; do
  [ -e "$e" ] || continue
  n=$(basename "$e")
  case "$n" in nccl.h|nccl_device.h|nccl_device|nccl_net.h) left="$left $n"; continue ;; esac
  ln -s "$e" "$shadow/$n"
done

make_cmd=(make -C "$src" -j "$jobs" src.build "BUILDDIR=$build" "CUDA_HOME=$cuda" "CUDA_INC=$shadow"
          "NVCC_GENCODE=$gencode" "ONLY_FUNCS=$funcs")
echo "# NCCL $version from $src for ${archs[*]/#/sm_}; ONLY_FUNCS=\"$funcs\""
[ -n "$left" ] && echo "# kept out of the include path: $cuda/include/{${left# }} (the toolkit's own NCCL headers)"
echo "# $(printf '%q ' "${make_cmd[@]}")"
if [ "$dry" = 1 ]; then exit 0; fi

t0=$(date +%s)
"${make_cmd[@]}"
secs=$(( $(date +%s) - t0 ))
lib=$build/lib/libnccl.so.$version
[ -f "$lib" ] || die "the build left no $lib"
mkdir -p "$out/lib" "$out/include"
rm -f "$out/lib"/libnccl.so*
cp "$lib" "$out/lib/libnccl.so.$version"
[ "$strip" = 1 ] && strip --strip-unneeded "$out/lib/libnccl.so.$version"
ln -s "libnccl.so.$version" "$out/lib/libnccl.so.$major"
ln -s "libnccl.so.$major" "$out/lib/libnccl.so"
cp "$build/include/nccl.h" "$out/include/nccl.h"
rev=$(git -C "$src" describe --tags --always --dirty 2>/dev/null || echo "not a git checkout")
{
  echo "version = $version"
  echo "version_code = $code"
  echo "only_funcs = $funcs"
  echo "archs = ${archs[*]}"
  echo "gencode = $gencode"
  echo "source = $src"
  echo "source_revision = $rev"
  echo "stripped = $strip"
  echo "bytes = $(stat -c %s "$out/lib/libnccl.so.$version")"
  echo "build_seconds = $secs"
  echo "built = $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) with $("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/CUDA \1/p')"
} >"$out/nccl_slim.txt"
echo "# built in $secs s: $out/lib/libnccl.so.$version ($(du -h "$out/lib/libnccl.so.$version" | cut -f1))"
cat "$out/nccl_slim.txt"
