#!/bin/sh
# decode_full_bomb.sh TRAINBENCH PYTHON: --decode full on a damaged file
# whose header promises a huge image (a 4 KB copy of an mkdata JPEG with its
# frame header set to 16384x16384): the file is skipped and named once, and
# the loader lets the decode's buffer go. It used to decode the whole 1 GiB
# image before the first warning failed it, keep the buffer for good (RSS
# 1 GiB a loader thread) and decode it again every epoch (308 img/s against
# 14,000). Passes when loader-bench's /memory table (host RSS every 10
# batches over 60 batches, about 30 epochs of the 17-file set) stays under
# 256 MiB and '#   skipped ...zz_bomb.jpg' is printed once.
set -u
tb=$1
py=$2
"$py" -c 'import h5py' 2>/dev/null || { echo "SKIP: $py has no h5py"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$tb" mkdata --out "$d/set" --classes 2 --per-class 8 --min-side 64 --max-side 96 >/dev/null || exit 1
"$py" - "$d/set" <<'PY' || { echo "FAIL: could not make the damaged file"; exit 1; }
import glob, sys
src = sorted(glob.glob(sys.argv[1] + "/class_000/*.jpg"))[0]
b = bytearray(open(src, "rb").read())
i = 0
while not (b[i] == 0xFF and b[i + 1] in (0xC0, 0xC1, 0xC2)):  # the frame header (SOF0/1/2)
    i += 1
b[i + 5:i + 9] = (16384).to_bytes(2, "big") * 2  # height, width
open(sys.argv[1] + "/class_000/zz_bomb.jpg", "wb").write(b)
PY
"$tb" loader-bench --data "$d/set" --threads 1 --batch-size 8 --batches 60 --image-size 32 --decode full \
  --memory-every 10 --results "$d/m.h5" >"$d/out" 2>&1 || { echo "FAIL: loader-bench exited $?"; tail -n 5 "$d/out"; exit 1; }
grep -E '^#   skipped|^# memory' "$d/out"
fail=0
n=$(grep -c '^#   skipped .*zz_bomb\.jpg: ' "$d/out")
[ "$n" -eq 1 ] || { echo "FAIL: the damaged file named $n times, want once"; fail=1; }
"$py" - "$d/m.h5" <<'PY' || fail=1
import sys, h5py
rss = h5py.File(sys.argv[1], "r")["memory"]["rss_mib"][:]
print("host RSS over the run: %.1f to %.1f MiB (under 256 wanted)" % (rss.min(), rss.max()))
if not rss.max() < 256:
    print("FAIL: the loader kept the damaged file's decode buffer")
    sys.exit(1)
PY
[ "$fail" -eq 0 ] && echo "ok: the damaged file skipped and named once, its buffer let go"
exit "$fail"
