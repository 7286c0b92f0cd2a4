#!/bin/sh
# fresh_debian12.sh ROOTFS OUTDIR - the README's commands on a fresh Debian 12,
# as a new user would run them, each step timed; for results/.
#
# As root on a Debian machine with debootstrap (no GPU needed):
#   1. debootstrap --variant=minbase bookworm ROOTFS (ROOTFS must not exist);
#      apt sources: Debian's archive (bookworm, -updates, -security);
#   2. git clone of this repository's HEAD into ROOTFS/root/trainbench;
#   3. /proc, /sys, /dev, /dev/pts bound into it (unmounted at the end);
#   4. in the chroot, under `env -i` (nothing inherited), from the clone:
#        cpu-setup  the README's first command (install, build, default job)
#        gpu-setup  the README's GPU command, step by step (&& as written)
#        checks     the configure summary's CUDA lines, ldd of the binary
#                   and of cuDNN's libraries without LD_LIBRARY_PATH, the
#                   job's lines about the missing GPU
#        tests      the README's test command (nice; TB_FRESH_TESTS=0 skips)
#      The commands are read from the README (tests/readme_commands.py show).
# OUTDIR gets one log per step, steps.tsv (step, seconds, exit status) and
# summary.txt. The test step runs in network and mount namespaces of its own
# (unshare --net --mount, loopback only), so the emulated-host tests' fixed
# names (tbh1.., tbbr0) and their /run/netns mount cannot meet another run's
# on this machine.
#
# TB_FRESH_SITE_CA=1: this machine reaches PyPI through a TLS-intercepting
# proxy whose CA it trusts; give the chroot the same CA
# (/usr/local/share/ca-certificates/*.crt) and PIP_CERT, as this machine has.
# TB_FRESH_MIRROR: the Debian mirror (default http://deb.debian.org/debian).
set -eu

[ $# -eq 2 ] || { sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//'; exit 2; }
[ "$(id -u)" = 0 ] || { echo "fresh_debian12.sh: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
rootfs=$1
out=$2
repo=$(cd "$(dirname "$0")/../.." && pwd)
mirror=${TB_FRESH_MIRROR:-http://deb.debian.org/debian}
[ ! -e "$rootfs" ] || { echo "fresh_debian12.sh: $rootfs exists: give a new path" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh_debian12.sh: no debootstrap (apt-get install debootstrap)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
: >"$out/steps.tsv"
: >"$out/summary.txt"

# shellcheck source=tests/fresh/steps.sh
. "$repo/tests/fresh/steps.sh"

mounted=""
cleanup() {
    for m in $mounted; do umount -l "$m" 2>/dev/null || true; done
    # anything the steps mounted below the root (deepest first)
    awk -v r="$rootfs/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null || true; done
}
trap cleanup EXIT

say "# the README's commands on a fresh Debian 12 ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
say "# repository $(git -C "$repo" describe --always --dirty --abbrev=12), host $(uname -r), $(nproc) CPUs"

step debootstrap debootstrap --variant=minbase bookworm "$rootfs" "$mirror"
cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
pip_env=""
if [ "${TB_FRESH_SITE_CA:-0}" = 1 ]; then
    mkdir -p "$rootfs/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    pip_env="PIP_CERT=/etc/ssl/certs/ca-certificates.crt"
    say "# site CA: $(cd /usr/local/share/ca-certificates && echo *.crt) copied in; PIP_CERT set (this machine's TLS proxy)"
fi
step clone git clone -q --no-hardlinks "$repo" "$rootfs/root/trainbench"
say "# clone at $(git -C "$rootfs/root/trainbench" rev-parse --short=12 HEAD)"

for m in proc sys dev dev/pts; do
    mount --bind "/$m" "$rootfs/$m"
    mounted="$rootfs/$m $mounted"
done

# in_chroot CMD: sh -c CMD in the clone, clean environment
in_chroot() {
    # shellcheck disable=SC2086  # $pip_env is empty or one assignment
    chroot "$rootfs" env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin $pip_env \
        sh -c "cd /root/trainbench && $1"
}
readme() { python3 "$repo/tests/readme_commands.py" --root "$repo" show "$1"; }

cpu=$(readme cpu-setup)
gpu=$(readme gpu-setup)
tests=$(readme tests)
printf '%s\n' "$cpu" >"$out/cpu-setup.cmd"
printf '%s\n' "$gpu" >"$out/gpu-setup.cmd"
printf '%s\n' "$tests" >"$out/tests.cmd"

# 1. the CPU command, whole
step cpu-setup in_chroot "$cpu" || say "cpu-setup FAILED (cpu-setup.log)"

# 2. the GPU command, one && part at a time (the same commands, timed apart)
i=0
gpu_ok=1
printf '%s\n' "$gpu" | sed 's/ && /\n/g' >"$out/gpu-setup.parts"
while IFS= read -r part; do
    i=$((i + 1))
    case "$part" in
        *install_gpu.sh*) n="gpu-1-install" ;;
        "cmake -S"*) n="gpu-2-configure" ;;
        "cmake --build"*) n="gpu-3-build" ;;
        *trainbench*) n="gpu-4-job" ;;
        *) n="gpu-$i" ;;
    esac
    if ! step "$n" in_chroot "$part"; then gpu_ok=0; break; fi
done <"$out/gpu-setup.parts"
[ "$gpu_ok" = 1 ] || say "gpu-setup FAILED at $n ($n.log)"

# 3. what the GPU command must have produced
check() {
    echo "== configure summary"
    grep -E 'CUDA toolkit|CUDA from|cuDNN|NCCL  |nvJPEG|backends built|comm paths' "$out/gpu-2-configure.log"
    echo "== ldd build/trainbench (env -i: no LD_LIBRARY_PATH)"
    in_chroot 'ldd build/trainbench' | grep -E 'cudnn|nccl|cublas|nvjpeg|cudart|not found' || true
    echo "== RUNPATH"
    in_chroot 'readelf -d build/trainbench' | grep -E 'RUNPATH|RPATH' || true
    echo "== ldd of cuDNN's libraries (their own links; cuBLASLt and NVRTC they open later through their RUNPATH, \$ORIGIN/../../cu13/lib)"
    # shellcheck disable=SC2016  # expanded by the chroot's shell
    in_chroot 'for f in .venv-cuda/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn*.so.9; do echo "$f"; ldd "$f" | grep -E "cublas|nvrtc|cudnn|not found"; done' || true
    echo "== the job's lines about the GPU"
    grep -nE 'GPU|backend auto|driver' "$out/gpu-4-job.log" || true
    echo "== verdicts"
    for l in libcudnn.so.9 libnccl.so.2 libnvjpeg.so.13; do
        p=$(in_chroot 'ldd build/trainbench' | awk -v l="$l" '$1 == l {print $3}')
        case "$p" in
            */.venv-cuda/*) echo "ok   $l => $p" ;;
            *) echo "FAIL $l => ${p:-not resolved}"; bad=1 ;;
        esac
    done
    # cuBLAS is opened at run time (core/cublas_lib.h), not linked: probe names the file
    p=$(in_chroot 'build/trainbench probe --quick' 2>/dev/null | sed -n 's/^# cuBLASLt library  *//p')
    case "$p" in
        */.venv-cuda/*) echo "ok   libcublasLt.so.13 => $p (opened at run time)" ;;
        *) echo "FAIL libcublasLt.so.13 => ${p:-not loaded}"; bad=1 ;;
    esac
    for w in cuDNN NCCL nvJPEG 'CUDA from'; do
        if grep -E "^-- +$w +:.*\.venv-cuda" "$out/gpu-2-configure.log" >/dev/null; then echo "ok   configure names $w in .venv-cuda"
        else echo "FAIL configure does not name $w in .venv-cuda"; bad=1; fi
    done
    if grep -q 'backends built : cpu, cuda' "$out/gpu-2-configure.log"; then echo "ok   backends built: cpu, cuda"
    else echo "FAIL no CUDA backend built"; bad=1; fi
    n=$(grep -c 'GPU' "$out/gpu-4-job.log" || true)
    if [ "$n" = 1 ] && grep -q '^--backend auto: cpu (no GPU found' "$out/gpu-4-job.log"; then echo "ok   the job says once that it found no GPU"
    else echo "FAIL the job's lines naming the GPU: $n (want 1, '--backend auto: cpu (no GPU found ...')"; bad=1; fi
    if grep -q '^# scaling, every row' "$out/gpu-4-job.log"; then echo "ok   the job printed its scaling table"
    else echo "FAIL no scaling table"; bad=1; fi
    return "${bad:-0}"
}
if [ "$gpu_ok" = 1 ]; then
    step checks check || say "checks FAILED (checks.log)"
    grep -E '^(ok|FAIL) ' "$out/checks.log" | sed 's/^/  /' | tee -a "$out/summary.txt" >/dev/null
    in_chroot 'du -sh .venv-cuda; .venv-cuda/bin/pip list 2>/dev/null | grep -i ^nvidia' >"$out/venv.txt" 2>&1 || true
fi

# 4. the README's test command, at the end, on the build the GPU command left
if [ "${TB_FRESH_TESTS:-1}" = 1 ]; then
    step tests unshare --net --mount sh -c "ip link set lo up && $(
        printf 'chroot %s env -i HOME=/root TERM=dumb LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin nice -n 10 sh -c %s' \
            "$rootfs" "'cd /root/trainbench && $tests'")" || say "tests: exit status non-zero (tests.log)"
    grep -E 'tests passed|tests failed|Total Test time' "$out/tests.log" | sed 's/^/  /' | tee -a "$out/summary.txt" >/dev/null
fi
say "# done: $(awk -F '\t' '{s += $2} END {print s}' "$out/steps.tsv") s in all"
