#!/bin/sh
# podman_image.sh OUTDIR - build launch/container/Dockerfile with podman on a
# machine that reaches Debian's archive and PyPI but no container registry,
# run the image's default command and look inside; each step timed, for
# results/.
#
# As root, with podman and runc (Debian 12: apt-get install podman runc)
# and debootstrap:
#   1. base      debootstrap --variant=minbase bookworm, imported as the
#                image localhost/debian12-minbase:bookworm (the Dockerfile's
#                BASE; debian:12 from a registry is out of reach)
#   2. build     podman build --no-cache of launch/container/Dockerfile with
#                BASE set to it and TB_GIT_REVISION
#   3. job       podman run of the image's default command (launch/local.sh
#                -- trainbench: the default job on every GPU, here none)
#   4. inside    ldd of the binary in the image, LD_LIBRARY_PATH unset, sizes
# OUTDIR gets one log per step, steps.tsv and summary.txt.
#
# This machine's limits, as knobs: TB_PODMAN_ISOLATION (chroot: RUN steps
# without an OCI runtime), TB_PODMAN_ULIMITS (--ulimit options: podman's
# defaults raise limits, which needs CAP_SYS_RESOURCE), TB_PODMAN_RUNTIME
# (runc: crun refuses hybrid cgroup hierarchies), TB_PODMAN_CA (a CA file
# mounted for pip: a TLS-intercepting proxy in front of PyPI).
set -eu

[ $# -eq 1 ] || { sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//'; exit 2; }
out=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
: >"$out/steps.tsv"
: >"$out/summary.txt"
iso=${TB_PODMAN_ISOLATION:-chroot}
ulimits=${TB_PODMAN_ULIMITS:---ulimit nofile=20000:20000 --ulimit nproc=4096:4096}
runtime=${TB_PODMAN_RUNTIME:-runc}
base=localhost/debian12-minbase:bookworm
image=localhost/trainbench:podman-check

# shellcheck source=tests/fresh/steps.sh
. "$repo/tests/fresh/steps.sh"
tmp=$(mktemp -d /var/tmp/tb_podman.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

say "# launch/container/Dockerfile with $(podman --version) ($(date -u +%Y-%m-%dT%H:%M:%SZ)), repository $(git -C "$repo" describe --always --dirty --abbrev=12)"
make_base() {
    debootstrap --variant=minbase bookworm "$tmp/rootfs" http://deb.debian.org/debian &&
        tar -C "$tmp/rootfs" -c . | podman import - "$base"
}
step base make_base
ca=""
if [ -n "${TB_PODMAN_CA:-}" ]; then
    ca="-v $TB_PODMAN_CA:/run/site-ca.crt:ro --build-arg TB_PIP_CERT=/run/site-ca.crt"
    say "# pip's CA: $TB_PODMAN_CA mounted for the build (this machine's TLS proxy)"
fi
# shellcheck disable=SC2086  # $ulimits and $ca are lists of options
step build podman build --no-cache --isolation "$iso" $ulimits $ca -f "$repo/launch/container/Dockerfile" \
    --build-arg "BASE=$base" --build-arg "TB_GIT_REVISION=$(git -C "$repo" describe --always --dirty --abbrev=12)" \
    -t "$image" "$repo" || true
grep -E 'CUDA from|cuDNN  |NCCL  |nvJPEG|backends built|build.sh:' "$out/build.log" | sed 's/^/  /' | tee -a "$out/summary.txt" >/dev/null
# shellcheck disable=SC2086
step job podman --runtime "$runtime" run --rm --ipc=host $ulimits "$image" || true
grep -E 'backend auto|GPU|^# training:|results written' "$out/job.log" | sed 's/^/  /' | tee -a "$out/summary.txt" >/dev/null
# shellcheck disable=SC2086,SC2016  # expanded in the image
step inside podman --runtime "$runtime" run --rm $ulimits "$image" sh -c \
    'echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-unset}"; ldd /opt/trainbench/build/trainbench | grep -E "cudnn|nccl|cublas|nvjpeg|not found"; du -sh /opt/trainbench/.venv-cuda /opt/trainbench/build' || true
sed 's/^/  /' "$out/inside.log" >>"$out/summary.txt"
say "  image size: $(podman image inspect "$image" --format '{{.Size}}' | awk '{printf "%.2f GB", $1 / 1e9}')"
