#!/bin/sh
# launch/install_gpu.sh - everything the CUDA build of trainbench needs, on
# Debian 12 or Ubuntu 22.04 / 24.04 whose only NVIDIA software is the driver
# (580 or newer), or with no GPU at all (the build is the same; the job then
# runs on the CPU and says so):
#
#   sh launch/install_gpu.sh [--venv DIR] [--no-apt] [--no-wheels] [--dry-run]
#
# 1. the distribution's packages (apt-get, through sudo unless root): C
#    compiler, CMake, Open MPI, HDF5, libjpeg-turbo, OpenBLAS, python3-venv;
# 2. NVIDIA's CUDA 13.0 wheels from PyPI, pinned in launch/cuda-wheels.txt
#    (nvcc, the CUDA runtime, cuBLAS, cuDNN 9, NCCL, nvJPEG, NVRTC: about
#    1.2 GB to download, 1.8 GB installed), into a Python virtual
#    environment: DIR, default .venv-cuda at the top of the source tree,
#    where CMake looks for them (elsewhere: cmake -DTB_CUDA_WHEELS=DIR).
# Then: cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build
# (the configure summary names cuDNN, NCCL and nvJPEG from DIR; the binaries
# find them through their RUNPATH, no LD_LIBRARY_PATH).
#
# The Dockerfile and the Apptainer definition in launch/container/ run this
# script too. --no-apt: the packages are there already (or named otherwise
# on this system); --no-wheels: the CUDA pieces come from elsewhere (NVIDIA's
# apt repository: see the README). --dry-run prints the commands only.
# pip reads its usual environment (PIP_INDEX_URL for a mirror, PIP_NO_CACHE_DIR).
set -eu

here=$(CDPATH='' cd -P -- "$(dirname -- "$0")" >/dev/null && pwd)
root=$(dirname "$here")
venv=$root/.venv-cuda
apt=1
wheels=1
dry=0
while [ $# -gt 0 ]; do
    case $1 in
        --venv) [ $# -ge 2 ] || { echo "install_gpu.sh: --venv needs a directory" >&2; exit 2; }
                venv=$2; shift 2 ;;
        --no-apt) apt=0; shift ;;
        --no-wheels) wheels=0; shift ;;
        --dry-run) dry=1; shift ;;
        -h | --help) sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# //' -e 's/^#$//'; exit 0 ;;
        *) echo "install_gpu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

run() {
    echo "+ $*"
    [ "$dry" = 1 ] || "$@"
}

# ---- the distribution's packages ------------------------------------------------
# libjpeg-turbo's libjpeg API is libjpeg62-turbo-dev on Debian and
# libjpeg-turbo8-dev on Ubuntu; everything else has the same name on both.
if [ "$apt" = 1 ]; then
    id=unknown; like=""; ver=""
    if [ -r /etc/os-release ]; then
        # shellcheck disable=SC1091
        . /etc/os-release
        id=${ID:-unknown}; like=${ID_LIKE:-}; ver=${VERSION_ID:-}
    fi
    case " $id $like " in
        *" ubuntu "*) jpeg=libjpeg-turbo8-dev ;;
        *" debian "*) jpeg=libjpeg62-turbo-dev ;;
        *) echo "install_gpu.sh: $id is neither Debian nor Ubuntu: install a C compiler, CMake >= 3.22, Open MPI," \
                "HDF5, libjpeg-turbo (TurboJPEG and libjpeg APIs), a CBLAS and python3-venv, then run" \
                "this script with --no-apt" >&2
           exit 2 ;;
    esac
    case "$id $ver" in
        "debian 12" | "ubuntu 22.04" | "ubuntu 24.04") ;;
        *) echo "install_gpu.sh: note: $id $ver is not one of Debian 12, Ubuntu 22.04, 24.04; trying the same packages" >&2 ;;
    esac
    sudo=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || { echo "install_gpu.sh: not root and no sudo: run it as root, or with --no-apt once the packages are in" >&2; exit 2; }
        sudo=sudo
    fi
    pkgs="build-essential cmake pkg-config libopenmpi-dev openmpi-bin openssh-client libhdf5-dev \
libturbojpeg0-dev $jpeg libopenblas-dev python3-venv ca-certificates"
    # NVIDIA's apt repository instead of the wheels: wget fetches its keyring
    if [ "$wheels" = 0 ]; then pkgs="$pkgs wget"; fi
    run $sudo apt-get update -qq
    # shellcheck disable=SC2086  # $pkgs is a list of package names
    run $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs
fi

# ---- NVIDIA's CUDA wheels into the virtual environment --------------------------
if [ "$wheels" = 1 ]; then
    if [ ! -x "$venv/bin/pip" ]; then
        run python3 -m venv "$venv"
    fi
    run "$venv/bin/pip" install --disable-pip-version-check -q -r "$here/cuda-wheels.txt"
    if [ "$dry" = 0 ]; then
        echo "install_gpu.sh: CUDA wheels in $venv ($(du -sh "$venv" | cut -f1)):"
        "$venv/bin/pip" list --disable-pip-version-check 2>/dev/null | grep -i '^nvidia' | sed 's/^/  /'
    fi
fi

# ---- the driver, if any: CUDA 13.0 needs 580 or newer ------------------------------
# /sys/module/nvidia/version holds the version alone; /proc's line reads
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05 ..." or, with
# the open kernel module of current servers, "... Open Kernel Module for
# x86_64  580.95.05 ...": the version is the first dotted number standing
# alone (not the 86 of x86_64). TB_DRIVER_VERSION_FILE replaces both (tests).
drv=""
for f in ${TB_DRIVER_VERSION_FILE:-/sys/module/nvidia/version /proc/driver/nvidia/version}; do
    [ -r "$f" ] || continue
    drv=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9][0-9.]*$/) {print $i; exit}}' "$f")
    [ -n "$drv" ] && break
done
if [ -z "$drv" ]; then
    echo "install_gpu.sh: no NVIDIA driver is loaded here: the CUDA backend builds, and trainbench runs on the CPU until there is a GPU"
elif [ "${drv%%.*}" -lt 580 ] 2>/dev/null; then
    echo "install_gpu.sh: warning: NVIDIA driver $drv is older than CUDA 13.0 needs (580 or newer): trainbench will not use the GPU until the driver is updated" >&2
else
    echo "install_gpu.sh: NVIDIA driver $drv: CUDA 13.0 runs on it"
fi
