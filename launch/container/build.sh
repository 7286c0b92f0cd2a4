#!/bin/sh
# launch/container/build.sh - the build step of both container recipes
# (Dockerfile, trainbench.def), run as root inside the image from the copied
# source tree: the README's GPU command without the run.
#   1. launch/install_gpu.sh: Debian packages, NVIDIA's pinned CUDA wheels
#      into /opt/trainbench/.venv-cuda (where CMake finds them);
#   2. the README's configure and build commands (the trainbench target:
#      the image runs trainbench, not the test suite);
#   3. apt's lists, pip's cache and the object files removed.
# TB_GIT_REVISION (a build argument) stands in for the git revision the
# results files record: the image has no .git. TB_PIP_INDEX_URL, TB_PIP_CERT:
# pip's index and CA file, for sites behind a mirror or a TLS proxy.
set -eu
CDPATH='' cd -P -- "$(dirname -- "$0")/../.." >/dev/null
# a site's PyPI mirror or TLS-intercepting proxy (build arguments, empty:
# PyPI itself with pip's own CA bundle)
if [ -n "${TB_PIP_INDEX_URL:-}" ]; then export PIP_INDEX_URL="$TB_PIP_INDEX_URL"; fi
if [ -n "${TB_PIP_CERT:-}" ]; then export PIP_CERT="$TB_PIP_CERT"; fi
sh launch/install_gpu.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)" --target trainbench
test -x build/trainbench
find build -name '*.o' -delete
rm -rf /var/lib/apt/lists/* /root/.cache/pip
echo "build.sh: $(build/trainbench --version)"
