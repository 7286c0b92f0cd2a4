#!/bin/sh
# different_data.sh TRAINBENCH MPIEXEC: two ranks given the same --data
# argument that resolves to different trees (each rank starts in its own
# working directory, mpirun --wdir, so the launch check sees identical
# command lines). Every rank must stop before training with one line that
# names rank 1 and its host: once for a different image count, once for the
# same count but a renamed file (only the hash differs), once for a
# tree that is missing on rank 1, and once for the same names holding other
# images (mkdata with another --seed: only the sampled file sizes differ; it
# trained with other labels on rank 1 and exited 0).
if [ "$1" = "--launch" ]; then # --launch TRAINBENCH MPIEXEC WDIR0 WDIR1
  for w in "$4" "$5"; do
    set -- "$@" -n 1 --wdir "$w" "$2" --data ds --image-size 32 --batch-size 2 --steps 1 \
      --scaling-steps 0 --threads 1 --loader-threads 1 --results "" :
  done
  mpiexec=$3
  shift 5
  # drop the trailing ':'
  n=$#
  i=0
  for a in "$@"; do
    shift
    i=$((i + 1))
    [ "$i" -lt "$n" ] && set -- "$@" "$a"
  done
  exec "$mpiexec" "$@"
fi
tb=$1
mpiexec=$2
dir=$(mktemp -d "$(pwd)/tb_diffdata.XXXXXX")
trap 'rm -rf "$dir"' EXIT
mk() { "$tb" mkdata --out "$1" --classes 2 --per-class "$2" --seed "${3:-4}" --min-side 40 --max-side 48 >/dev/null ||
  exit 1; }
mkdir -p "$dir/a" "$dir/b" "$dir/c" "$dir/d" "$dir/e"
mk "$dir/a/ds" 4
mk "$dir/b/ds" 5
mk "$dir/c/ds" 4
mk "$dir/e/ds" 4 5
f=$(find "$dir/c/ds" -name '*.jpg' | sort | head -n 1)
mv "$f" "$(dirname "$f")/renamed.jpg"
x="$(dirname "$0")/expect_all_ranks.sh"
fail=0
"$x" 2 "--data 'ds' is not the same data set on every rank: rank 0 \(.*\) indexes 8 images in 2 classes .* but rank 1 \(.*\): 10 images in 2 classes" \
  "$0" --launch "$tb" "$mpiexec" "$dir/a" "$dir/b" || fail=1
"$x" 2 "--data 'ds' is not the same data set on every rank: rank 0 \(.*\) indexes 8 images .* but rank 1 \(.*\): 8 images in 2 classes, hash" \
  "$0" --launch "$tb" "$mpiexec" "$dir/a" "$dir/c" || fail=1
"$x" 2 "(--data: data path ds: No such file|--data 'ds' cannot be indexed on rank 1 \()" \
  "$0" --launch "$tb" "$mpiexec" "$dir/a" "$dir/d" || fail=1
"$x" 2 "--data 'ds' holds other files on rank 1 \(.*\) than on rank 0 \(.*\): the same paths and labels, but the sizes of the 8 files sampled differ" \
  "$0" --launch "$tb" "$mpiexec" "$dir/a" "$dir/e" || fail=1
exit $fail
