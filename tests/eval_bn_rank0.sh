#!/bin/sh
# eval_bn_rank0.sh TRAINBENCH MPIEXEC: --val on 2 ranks scores every shard
# with rank 0's BatchNorm running statistics (the checkpoint's), as DDP's
# broadcast buffers do. Each rank's own statistics hold its last batches, so
# without that broadcast the score depends on which rank saw which images.
# The same run twice: once as is, once with rank 1's statistics set to 1000
# before the evaluation (TB_TEST_FAULT=bn-skew:1). The two eval lines must
# be the same. Planted error: without the broadcast (tb_trainer_sync_bn in
# src/train/train_loop.c) the skewed run scored 7.50 % / 42.50 % against
# 15.00 % / 52.50 % on an AVX-512 machine, and the plain run moved too
# (top-5 50.00 %).
tb=$1
mpiexec=$2
dir=$(mktemp -d "$(pwd)/tb_evalbn.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$tb" mkdata --out "$dir/train" --classes 10 --per-class 4 --min-side 40 --max-side 56 >/dev/null || fail "mkdata"
"$tb" mkdata --out "$dir/val" --classes 10 --per-class 4 --seed 2 --min-side 40 --max-side 56 >/dev/null ||
  fail "mkdata val"
args="--data $dir/train --val $dir/val --image-size 32 --batch-size 4 --steps 3 --warmup-steps 0 --scaling-steps 0
--threads 1 --loader-threads 1 --results="
# shellcheck disable=SC2086  # $args: the words of the command line
"$mpiexec" -n 2 "$tb" train $args >"$dir/plain.log" 2>&1 || { cat "$dir/plain.log"; fail "the plain run exit"; }
# shellcheck disable=SC2086
TB_TEST_FAULT=bn-skew:1 "$mpiexec" -n 2 "$tb" train $args >"$dir/skew.log" 2>&1 ||
  { cat "$dir/skew.log"; fail "the skewed run exit"; }
grep -q "rank 1.*test fault bn-skew: this rank's BatchNorm running statistics set to 1000" "$dir/skew.log" ||
  { cat "$dir/skew.log"; fail "the fault did not fire on rank 1"; }
plain=$(grep '^eval' "$dir/plain.log")
skew=$(grep '^eval' "$dir/skew.log")
echo "plain: $plain"
echo "skew:  $skew"
[ -n "$plain" ] || fail "no eval line"
echo "$plain" | grep -q "(40 images)$" || fail "the evaluation did not count the 40 images"
[ "$plain" = "$skew" ] || fail "rank 1's own BatchNorm statistics changed the score: --val must use rank 0's"
echo "ok: the score is rank 0's statistics' on both ranks"
