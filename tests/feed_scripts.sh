#!/bin/sh
# feed_scripts.sh PYTHON PROBE SRC: the GPU feed stage's scripts, checked on
# the host with what runs here (tests in the build's tests directory, after
# feed_cpu_table): bench/loader_psnr.py on the GPU path's host emulation
# (exact against Pillow by construction, so a wrong box, flip or parse shows),
# bench/feed_table.py on feed_cpu.h5 (the CPU run of loader-bench --feed).
# Exits 77 without torch, torchvision, Pillow or h5py.
set -u
py=$1
probe=$2
src=$3
"$py" -c 'import torch, torchvision, PIL, h5py' 2>/dev/null ||
  { echo "SKIP: python3 lacks torch, torchvision, Pillow or h5py"; exit 77; }
"$py" "$src/bench/loader_psnr.py" --probe "$probe" --data feed_cpu_data --samples 8 --crops 2 --size 48 \
  --modes partial --gpu-emulated --out feed_psnr_emu.md || exit 1
cat feed_psnr_emu.md
for kind in train eval; do
  grep -qE "^\| $kind \| gpu-emulated \| [0-9]+ \| [1-9][0-9]* \| 0 \| 0 \| 0\.0000 \| exact \| exact \|$" feed_psnr_emu.md ||
    { echo "FAIL: the $kind row of the emulated GPU path is not exact, or nothing went through it"; exit 1; }
done
"$py" "$src/bench/feed_table.py" --tb feed_cpu.h5 --note "CPU test run" --out feed_cpu.md >/dev/null || exit 1
if ! grep -q '^## Side by side, at the seeds' feed_cpu.md ||
   ! grep -qE '^\| no worker \(main thread decodes\), prefetch 2, pinned memory \| n/m \|' feed_cpu.md; then
  echo "FAIL: feed_table.py's markdown lacks its tables"
  cat feed_cpu.md
  exit 1
fi
echo "ok: loader_psnr.py --gpu-emulated exact, feed_table.py tables written"
