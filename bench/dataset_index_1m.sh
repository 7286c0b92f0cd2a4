#!/bin/sh
# dataset_index_1m.sh - how long trainbench takes to index an ImageFolder tree
# of 1,000,000 files (1000 classes x 1000 empty .jpg), against
# torchvision.datasets.ImageFolder on the same tree. The tree is made under
# /tmp and deleted at the end.
#
#   bench/dataset_index_1m.sh BUILD_DIR [CLASSES] [PER_CLASS]
#
# Prints the command, the machine and one '#' row per run: trainbench with 1,
# 2 and the automatic number of scanner threads (best of 3, warm dentry cache
# after the first pass), then ImageFolder once (set TB_SKIP_IMAGEFOLDER=1 to
# leave it out).
set -eu
BUILD=${1:?usage: dataset_index_1m.sh BUILD_DIR [CLASSES] [PER_CLASS]}
CLASSES=${2:-1000}
PER=${3:-1000}
TB="$BUILD/trainbench"
ROOT=$(mktemp -d /tmp/tb_index_XXXXXX)
trap 'rm -rf "$ROOT"' EXIT INT TERM

echo "# machine: $(uname -srm), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# file system of /tmp: $(df -T /tmp | awk 'NR==2 {print $2}'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# making $CLASSES x $PER empty .jpg files under $ROOT"
t0=$(date +%s.%N)
c=0
while [ "$c" -lt "$CLASSES" ]; do
  d="$ROOT/n$(printf '%08d' "$c")"
  mkdir "$d"
  (cd "$d" && seq -f "n$(printf '%08d' "$c")_%06g.JPEG" 0 $((PER - 1)) | xargs touch)
  c=$((c + 1))
done
t1=$(date +%s.%N)
echo "# made in $(echo "$t1 - $t0" | bc) s"

for threads in 1 2 0; do
  best=""
  for _rep in 1 2 3; do
    line=$("$TB" loader-bench --data "$ROOT" --index-only --index-threads "$threads" | grep '^# index:')
    s=$(echo "$line" | sed 's/.* in \([0-9.]*\) s.*/\1/')
    if [ -z "$best" ] || [ "$(echo "$s < $best" | bc)" -eq 1 ]; then best=$s; fi
  done
  label=$threads
  [ "$threads" = 0 ] && label="auto"
  echo "# trainbench index, $label scanner threads: best of 3: $best s for $((CLASSES * PER)) files"
done

if [ "${TB_SKIP_IMAGEFOLDER:-0}" != 1 ]; then
  /usr/bin/python3 - "$ROOT" <<'EOF'
import sys, time
try:
    import torchvision
except ImportError as e:
    print(f"# torchvision.datasets.ImageFolder: not measured ({e})")
    sys.exit(0)
t = time.time()
ds = torchvision.datasets.ImageFolder(sys.argv[1], loader=lambda p: p)
print(f"# torchvision {torchvision.__version__} ImageFolder: {time.time() - t:.2f} s for {len(ds)} files (one run)")
EOF
fi
