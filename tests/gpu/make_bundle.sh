#!/bin/sh
# make_bundle.sh [OUT.tar.xz]: build trainbench with CUDA here and pack what
# the GPU machine lacks into one relocatable archive (default
# gpu-bundle.tar.xz at the repository root, ignored by git).
#
# The lent GPU machine has nvcc, cmake, PyTorch and the CUDA libraries (cuDNN,
# cuBLAS, NCCL under python's site-packages nvidia/), but no MPI, HDF5,
# libjpeg-turbo or OpenBLAS and no network. So this script, on a Debian 12
# development machine:
#   1. configures build-gpu/ (Release, TB_CUDA=ON, TB_MPI=ON, sm_90 machine
#      code + PTX; TB_BUNDLE_ARCH overrides) and builds everything;
#   2. copies every ELF program of build-gpu/ and every CTestTestfile.cmake;
#   3. copies the shared-library closure of those programs and of Open MPI's
#      and PMIx's plugins, except the C library (the GPU machine's is newer)
#      and the CUDA libraries (the GPU machine's own are used: they must
#      match its driver);
#   4. copies Open MPI's runtime (orterun, orted, plugins, help files) and
#      PMIx's plugins under root/usr, relocated on the GPU machine through
#      OPAL_PREFIX and PMIX_PREFIX (env.sh);
#   5. packs it with xz (identical CUDA code in many test programs compresses
#      away), within the device tool's 64 MiB for everything carried.
# nvJPEG (--decode gpu): the lent machine's PyTorch wheels ship none and its
# toolkit may lack it, so the build uses the PyPI wheel nvidia-nvjpeg (as
# .ci/run, same cache) and the bundle carries its libnvjpeg.so.13 (about
# 6 MB, 2 MB packed; it holds its own CUDA runtime and needs only the
# driver). TB_BUNDLE_NVJPEG=0 builds without it.
# NCCL >= 2.30 (two ranks on the one GPU, the suite's `nccl` and `np2`
# tests): the lent machine has 2.28.9, PyPI's 2.30+ library is 344 MB; so
# TB_BUNDLE_NCCL=DIR carries a slim build made by tests/gpu/slim_nccl.sh
# --out DIR (about 5 MB packed), loaded ahead of PyTorch's NCCL (env.sh).
# Without it the np2 tests skip on the GPU machine, saying why (and the
# suite counts that as a failure).
# TB_BUNDLE_WHEELS=DIR: also the README's GPU command's build, against
# NVIDIA's pinned CUDA wheels in the virtual environment DIR (made by
# launch/install_gpu.sh [--no-apt] --venv DIR): build-wheels/trainbench,
# whose RUNPATH names DIR's nvidia/{cu13,cudnn,nccl}/lib. The bundle carries
# it under wheels/ with DIR's path and its libnvjpeg.so.13 (the GPU machine's
# PyTorch has none); run_suite.sh's `wheels` stage rebuilds DIR's layout
# there from the machine's own NVIDIA wheels and runs the binary through its
# RUNPATH: ldd, probe, one training run.
# tests/gpu/run_suite.sh unpacks and uses it.
set -eu
cd "$(dirname "$0")/../.."
root=$PWD
out=${1:-$root/gpu-bundle.tar.xz}
arch=${TB_BUNDLE_ARCH:-90-real;90-virtual}
# TB_BUNDLE_CUDA=AUTO: a bundle even before the CUDA backend builds (tests
# of the bundle itself)
bdir=$root/build-gpu
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
B=$stage/gpu-bundle

nvjpeg_version=13.3.2.43
nvjpeg_cache=${TB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trainbench}/nvjpeg-$nvjpeg_version
nvjpeg_root=""
if [ "${TB_BUNDLE_NVJPEG:-1}" = 1 ]; then
  if [ ! -f "$nvjpeg_cache/nvidia/cu13/include/nvjpeg.h" ]; then
    echo "== fetching nvJPEG $nvjpeg_version from PyPI into $nvjpeg_cache"
    mkdir -p "$nvjpeg_cache"
    python3 -m pip download -q --no-deps --only-binary=:all: --dest "$nvjpeg_cache" "nvidia-nvjpeg==$nvjpeg_version"
    (cd "$nvjpeg_cache" && python3 -m zipfile -e nvidia_nvjpeg-"$nvjpeg_version"-*.whl .)
  fi
  nvjpeg_root=$nvjpeg_cache/nvidia/cu13
fi

echo "== configure $bdir (CUDA targets $arch)"
cmake -S "$root" -B "$bdir" -DCMAKE_BUILD_TYPE=Release "-DTB_CUDA=${TB_BUNDLE_CUDA:-ON}" -DTB_MPI=ON -DTB_WERROR=ON \
  "-DCMAKE_CUDA_ARCHITECTURES=$arch" -DTB_PYTHON=/usr/bin/python3 "-DNVJPEG_ROOT=$nvjpeg_root" \
  >"$stage/configure.log" 2>&1 ||
  { cat "$stage/configure.log"; exit 1; }
grep -E 'backends built|comm paths|CUDA toolkit|cuDNN|NCCL|nvJPEG' "$stage/configure.log"
echo "== build"
cmake --build "$bdir" -j "$(nproc)" >"$stage/build.log" 2>&1 || { tail -40 "$stage/build.log"; exit 1; }

wheels=${TB_BUNDLE_WHEELS:-}
if [ -n "$wheels" ]; then
  wheels=$(cd "$wheels" && pwd)
  wdir=$root/build-wheels
  echo "== configure $wdir (the README's GPU build, CUDA from $wheels)"
  cmake -S "$root" -B "$wdir" -DCMAKE_BUILD_TYPE=Release -DTB_CUDA=ON -DTB_MPI=ON -DTB_WERROR=ON \
    "-DTB_CUDA_WHEELS=$wheels" -DTB_PYTHON=/usr/bin/python3 >"$stage/configure-wheels.log" 2>&1 ||
    { cat "$stage/configure-wheels.log"; exit 1; }
  grep -E 'CUDA from|cuDNN|NCCL|nvJPEG' "$stage/configure-wheels.log"
  grep -q "CUDA from .*$wheels" "$stage/configure-wheels.log" ||
    { echo "build-wheels does not take CUDA from $wheels"; exit 1; }
  cmake --build "$wdir" -j "$(nproc)" --target trainbench >"$stage/build-wheels.log" 2>&1 ||
    { tail -40 "$stage/build-wheels.log"; exit 1; }
fi

echo "== programs and test files"
mkdir -p "$B/build" "$B/lib" "$B/root"
(cd "$bdir" && find . -type f \( -name CTestTestfile.cmake -o -perm -u+x \) ! -path './CMakeFiles/*' \
   ! -path '*/CMakeFiles/*' ! -name '*.cmake.in' -print) | while read -r f; do
  case "$f" in
    *CTestTestfile.cmake) ;;
    *) head -c 4 "$bdir/$f" | grep -q 'ELF' || continue ;;
  esac
  mkdir -p "$B/build/$(dirname "$f")"
  cp -P "$bdir/$f" "$B/build/$f"
done
# shared libraries the tests build (the stand-in NVML), kept with their links
(cd "$bdir" && find . -name '*.so*' ! -path '*/CMakeFiles/*' -print) | while read -r f; do
  mkdir -p "$B/build/$(dirname "$f")"
  cp -P "$bdir/$f" "$B/build/$f"
done
echo "$bdir" >"$B/build_dir_here"
echo "$root" >"$B/source_dir_here"
git -C "$root" describe --always --dirty --abbrev=12 >"$B/git_revision" 2>/dev/null || echo unknown >"$B/git_revision"

echo "== Open MPI and PMIx runtime"
ML=/usr/lib/x86_64-linux-gnu
for p in usr/bin/orterun usr/bin/orted usr/bin/ompi_info; do
  mkdir -p "$B/root/$(dirname "$p")"
  cp "/$p" "$B/root/$p"
done
ln -sf orterun "$B/root/usr/bin/mpirun"
ln -sf orterun "$B/root/usr/bin/mpiexec"
mkdir -p "$B/root$ML/openmpi" "$B/root$ML/pmix2" "$B/root/usr/share"
cp -a "$ML/openmpi/lib" "$B/root$ML/openmpi/"
rm -rf "$B/root$ML/openmpi/lib/pkgconfig" "$B/root$ML/openmpi/lib/"*.a
# Java, Fortran and C++ bindings are not used
rm -f "$B/root$ML/openmpi/lib/"libmpi_java* "$B/root$ML/openmpi/lib/"libmpi_mpifh* \
  "$B/root$ML/openmpi/lib/"libmpi_usempi* "$B/root$ML/openmpi/lib/"libmpi_cxx* \
  "$B/root$ML/openmpi/lib/"libompitrace*
cp -a "$ML/pmix2/lib" "$B/root$ML/pmix2/"
cp -a /usr/share/openmpi "$B/root/usr/share/"
[ -d /usr/share/pmix ] && cp -a /usr/share/pmix "$B/root/usr/share/"
[ -d "$ML/pmix2/share" ] && cp -a "$ML/pmix2/share" "$B/root$ML/pmix2/"

echo "== shared-library closure"
# never bundled: the C library (the GPU machine's is newer and must be used
# with its own loader), the CUDA stack (must match the GPU machine's driver)
skip='^(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64|libcuda|libcudnn.*|libcublas.*|libcudart|libnccl|libnvidia-ml|libstdc\+\+|libgcc_s)\.so'
list=$stage/elfs
find "$B/build" "$B/root" -type f | while read -r f; do
  if head -c 4 "$f" | grep -q ELF; then echo "$f"; fi # not `&&`: a last file that is no ELF would end the loop 1 (set -e)
done >"$list"
: >"$stage/libs"
while read -r f; do
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' >>"$stage/libs" || true
done <"$list"
sort -u "$stage/libs" | while read -r name path; do
  echo "$name" | grep -Eq "$skip" && continue
  case "$path" in "$B"/*) continue ;; esac
  # Open MPI's and PMIx's own libraries are already under root/ at their paths
  case "$path" in "$ML/openmpi/"* | "$ML/pmix2/"*) continue ;; esac
  cp -L "$path" "$B/lib/$name"
done
# nvJPEG comes with the bundle (found through the build's RUNPATH above)
if [ -n "$nvjpeg_root" ]; then
  if [ -f "$B/lib/libnvjpeg.so.13" ]; then echo "   libnvjpeg.so.13 carried ($(du -h "$B/lib/libnvjpeg.so.13" | cut -f1))"
  else echo "nvJPEG was built in but libnvjpeg.so.13 is not in the bundle"; exit 1; fi
fi
if [ -n "${TB_BUNDLE_NCCL:-}" ]; then
  sh "$root/tests/gpu/bundle_nccl.sh" "$TB_BUNDLE_NCCL" "$B"
else
  echo "   no slim NCCL (TB_BUNDLE_NCCL unset): the nccl+np2 tests will skip on the GPU machine (NCCL 2.28 there)"
fi
if [ -n "$wheels" ]; then
  echo "== the wheels build: wheels/trainbench"
  mkdir -p "$B/wheels"
  cp "$wdir/trainbench" "$B/wheels/trainbench"
  echo "$wheels" >"$B/wheels/venv_path"
  nv=$(dirname "$(dirname "$(grep -E '^TB_CUDNN_LIB:' "$wdir/CMakeCache.txt" | cut -d= -f2)")")
  nv=$(dirname "$nv")
  echo "${nv#"$wheels"/}" >"$B/wheels/nvidia_subdir"  # lib/python3.X/site-packages/nvidia
  cp -L "$nv/cu13/lib/libnvjpeg.so.13" "$B/wheels/libnvjpeg.so.13"
  cp "$root/launch/cuda-wheels.txt" "$B/wheels/"
  readelf -d "$B/wheels/trainbench" | grep -E 'RUNPATH|RPATH' | sed 's/^ */   /'
  # its other libraries are build-gpu's (the same packages), in the bundle already
  wmiss=$(LD_LIBRARY_PATH="$B/lib:$B/root$ML/openmpi/lib:$B/root$ML/pmix2/lib" ldd "$B/wheels/trainbench" | grep 'not found' || true)
  [ -z "$wmiss" ] || { echo "wheels/trainbench needs libraries the bundle lacks:"; echo "$wmiss"; exit 1; }
fi
missing=$(while read -r f; do LD_LIBRARY_PATH="$B/lib:$B/root$ML/openmpi/lib" ldd "$f" 2>/dev/null | grep 'not found' || true; done <"$list" | sort -u)
if [ -n "$missing" ]; then
  echo "unresolved libraries in the bundle:"
  echo "$missing"
  exit 1
fi

cp "$root/tests/gpu/bundle_env.sh" "$B/env.sh"

echo "== pack $out"
du -sh "$B" | sed 's/^/   unpacked: /'
(cd "$stage" && tar -cf - gpu-bundle | xz -9e -T "$(nproc)" --lzma2=dict=192MiB >"$out.tmp")
mv "$out.tmp" "$out"
size=$(stat -c %s "$out")
echo "   packed: $(( size / 1048576 )) MiB ($size bytes) -> $out"
# the device tool's 64 MiB hold the working tree it copies too (tracked and
# untracked files git does not ignore): the bundle gets what they leave
tree=$(cd "$root" && git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
tree=${tree:-0}
echo "   with the working tree's $(( tree / 1048576 )) MiB: $(( (size + tree) / 1048576 )) MiB of the 64 a call carries"
if [ $((size + tree)) -gt $((62 * 1048576)) ]; then
  echo "the bundle and the working tree come to over 62 MiB: they may not fit the device tool's 64 MiB a call"
  exit 1
fi
