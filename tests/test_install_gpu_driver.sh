#!/bin/sh
# test_install_gpu_driver.sh SRC - launch/install_gpu.sh reads the NVIDIA
# driver's version from each form the kernel gives it (TB_DRIVER_VERSION_FILE
# stands in for /sys/module/nvidia/version and /proc/driver/nvidia/version):
# the open kernel module's line ("... Open Kernel Module for x86_64
# 580.95.05 ...", where a pattern after "Kernel Module" once read 86 from
# x86_64 and warned of a too-old driver), the proprietary module's line, the
# /sys file's bare version, and no driver at all.
src=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-A24-23-4)  Thu Sep 25 00:58:06 UTC 2025\nGCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n' >"$d/open"
printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.57.08  Sat May 24 07:21:18 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n' >"$d/proprietary"
printf '580.159.03\n' >"$d/sys"
fail=0
check() { # FILE EXPECTED-WORDS
    out=$(TB_DRIVER_VERSION_FILE=$1 sh "$src/launch/install_gpu.sh" --no-apt --no-wheels 2>&1)
    case "$out" in
        *"$2"*) echo "ok   $(basename "$1"): $2" ;;
        *) echo "FAIL $(basename "$1"): want '$2', got: $out"; fail=1 ;;
    esac
}
check "$d/open" "NVIDIA driver 580.95.05: CUDA 13.0 runs on it"
check "$d/proprietary" "warning: NVIDIA driver 575.57.08 is older than CUDA 13.0 needs"
check "$d/sys" "NVIDIA driver 580.159.03: CUDA 13.0 runs on it"
check "$d/none" "no NVIDIA driver is loaded here"
exit $fail
