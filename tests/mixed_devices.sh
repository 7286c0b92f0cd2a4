#!/bin/sh
# mixed_devices.sh TRAINBENCH MPIEXEC PYTHON: a job whose ranks run on different
# devices records every one. The CPU analogue of two GPU models: rank 0 is
# confined to one CPU (taskset), rank 1 may use two, both asked for
# --threads 2, so rank 0's device is "<cpu>, 1 thread" and rank 1's
# "<cpu>, 2 threads". The header must say the devices differ, and
# device_names must list both with their rank counts (it used to hold rank
# 0's alone), and preflight must say so too. A job on one kind keeps the
# bare name, as before. Open MPI's mpiexec (MPMD with ':', --bind-to none).
tb=$1
mpiexec=$2
py=$3
[ "$(nproc)" -ge 2 ] || { echo "SKIP: needs 2 CPUs (rank 1 must be able to run 2 threads)"; exit 77; }
command -v taskset >/dev/null || { echo "SKIP: no taskset"; exit 77; }
"$py" -c 'import h5py' 2>/dev/null || { echo "SKIP: no h5py for $py"; exit 77; }
dir=$(mktemp -d "$(pwd)/tb_mixed.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
args="--model resnet18 --image-size 32 --batch-size 2 --steps 1 --warmup-steps 0 --scaling-steps 0 --threads 2
--loader-threads 1"
# shellcheck disable=SC2086  # $args: the words of the command line
"$mpiexec" --bind-to none -n 1 taskset -c 0 "$tb" train $args --results "$dir/mixed.h5" : \
  -n 1 "$tb" train $args --results "$dir/mixed.h5" >"$dir/mixed.log" 2>&1 ||
  { cat "$dir/mixed.log"; fail "mixed job exit"; }
grep -E "^# devices differ between ranks: .*, 1 thread \(1 rank\); .*, 2 threads \(1 rank\); every step waits" \
  "$dir/mixed.log" || { cat "$dir/mixed.log"; fail "no header line naming both devices"; }
"$mpiexec" --bind-to none -n 1 taskset -c 0 "$tb" preflight --threads 2 --bytes 4K : \
  -n 1 "$tb" preflight --threads 2 --bytes 4K >"$dir/preflight.log" 2>&1 ||
  { cat "$dir/preflight.log"; fail "preflight exit"; }
grep -E "^# devices differ between ranks: cpu: .*, 1 thread \(1 rank\); cpu: .*, 2 threads \(1 rank\); a training" \
  "$dir/preflight.log" || { cat "$dir/preflight.log"; fail "preflight did not say the devices differ"; }
# shellcheck disable=SC2086
"$mpiexec" --bind-to none -n 2 "$tb" train $args --results "$dir/same.h5" >"$dir/same.log" 2>&1 ||
  { cat "$dir/same.log"; fail "uniform job exit"; }
! grep "devices differ" "$dir/same.log" || fail "a uniform job said its devices differ"
"$py" - "$dir/mixed.h5" "$dir/same.h5" <<'EOF' || exit 1
import re, sys
import h5py
mixed = h5py.File(sys.argv[1], "r").attrs["device_names"]
same = h5py.File(sys.argv[2], "r").attrs["device_names"]
print("mixed:", repr(mixed))
print("same: ", repr(same))
m = re.fullmatch(r"(.+), 1 thread \(1 rank\); (.+), 2 threads \(1 rank\)", mixed)
if not m or m.group(1) != m.group(2):
    sys.exit("FAIL: device_names of the mixed job does not name both ranks' devices")
if same != m.group(1) + ", 2 threads":
    sys.exit("FAIL: device_names of a one-kind job is not the bare name: %r" % same)
print("PASS")
EOF
