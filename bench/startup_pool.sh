#!/bin/sh
# startup_pool.sh OUT_DIR TRAINBENCH [OLD_TRAINBENCH] - the synthetic pool's
# share of start-up on the CPU: a bench row's data (1000 classes, 224 px,
# the pool of 1782 samples = 1 GiB that a batch of 112 or more makes) built
# by `trainbench train`, whose "# start-up:" line times its parts ("source"
# is the pool). 3 runs per thread count (1 and 2 threads), each its own
# process; with OLD_TRAINBENCH the same for an older build beside it.
# Writes OUT_DIR/runs.tsv (binary, threads, run, source_s, init_s, log) and
# each run's log; bench/startup_pool_table.py makes the table from them.
set -eu
OUT=$1
NEW=$2
OLD=${3:-}
mkdir -p "$OUT"
printf 'binary\tthreads\trun\tsource_s\tinit_s\tlog\n' >"$OUT/runs.tsv"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
  echo "new: $("$NEW" --version 2>&1 | head -1)"
  [ -n "$OLD" ] && echo "old: $("$OLD" --version 2>&1 | head -1)"
  echo "command: TRAINBENCH train --backend cpu --model resnet18 --classes 1000 --image-size 224 --batch-size 112 --steps 1 --warmup-steps 0 --scaling-steps 0 --threads T --results OUT/x.h5"
} >"$OUT/machine.txt"
for which in new old; do
  bin=$NEW
  [ "$which" = old ] && bin=$OLD
  [ -n "$bin" ] || continue
  for t in 1 2; do
    for r in 1 2 3; do
      log=$OUT/${which}_t${t}_r$r.log
      "$bin" train --backend cpu --model resnet18 --classes 1000 --image-size 224 --batch-size 112 --steps 1 \
        --warmup-steps 0 --scaling-steps 0 --threads "$t" --results "$OUT/${which}_t${t}_r$r.h5" >"$log" 2>&1
      src=$(sed -n 's/^# start-up: .*parts: .* source \([0-9.]*\),.*/\1/p' "$log")
      init=$(sed -n 's/^# start-up: .*, init \([0-9.]*\),.*/\1/p' "$log")
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$which" "$t" "$r" "${src:--}" "${init:--}" "$(basename "$log")" >>"$OUT/runs.tsv"
      rm -f "$OUT/${which}_t${t}_r$r.h5"
    done
  done
done
cat "$OUT/runs.tsv"
