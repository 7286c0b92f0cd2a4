#!/bin/sh
# no_gpu_driver_lines.sh TB_GPU_CHECK - on a machine without a usable GPU
# (tests/no_gpu_run.sh runs it only there), the one line a CUDA build gives
# for each driver state, with TB_TEST_NVIDIA_VERSION_FILE standing in for
# /proc/driver/nvidia/version: no driver; a driver older than the build's
# CUDA; a new enough driver whose libcuda.so.1 cannot be loaded (a
# container started without the NVIDIA runtime).
check=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16)  Tue Sep 23 2025\n' >"$d/v580"
# 450: older than any CUDA 12 or 13 build needs (525, 580); 580: enough for both
printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  450.248.02  Thu Dec 28 15:37:48 UTC 2023\n' >"$d/v450"
fail=0
expect() { # expect FILE REGEX WHAT
  out=$(TB_TEST_NVIDIA_VERSION_FILE=$1 "$check" 2>&1)
  if printf '%s\n' "$out" | grep -qE "$2"; then echo "ok   $3: $out"
  else echo "FAIL $3: got: $out"; fail=1; fi
}
expect "$d/none" "no NVIDIA driver is loaded on this machine" "no driver"
expect "$d/v450" "driver 450\.248\.02 is older than this build's CUDA" "an old driver"
expect "$d/v580" "driver 580\.95\.05 is loaded but libcuda\.so\.1 cannot be .*docker --gpus all" "libcuda missing"
exit $fail
