#!/bin/sh
# end_teardown.sh TRAINBENCH MPIEXEC: a rank that ends after train's last
# collective (TB_TEST_FAULT=die-end:1: its own error once the watchdog has
# stopped, in the end's teardown) still ends every rank with a line: rank
# 1's own, and each other rank's 'the job was ended (SIGTERM) after its last
# collective' (the launcher's SIGTERM used to end them without a word,
# exit 143 and nothing on stderr). 3 ranks; exit non-zero.
# A third argument, die-end-late-line, has rank 0 say its line late (off the
# CPU on a loaded host): rank 2, prompt, must stay until it is out.
set -u
tb=$1
mpi=$2
fault=${3:-die-end}
out=$(timeout 120 "$mpi" -np 3 -x TB_TEST_FAULT="$fault":1 "$tb" --model resnet18 --image-size 32 --batch-size 4 \
  --steps 3 --scaling-steps 0 --threads 1 --timeout 20 --results "" 2>&1)
rc=$?
printf '%s\n' "$out" | grep 'error'
fail=0
[ "$rc" -ne 0 ] || { echo "FAIL: exit 0"; fail=1; }
printf '%s\n' "$out" | grep -q "^trainbench\[rank 1 [^]]*\]: error: TB_TEST_FAULT die-end" ||
  { echo "FAIL: rank 1 did not print its own line"; fail=1; }
n=$(printf '%s\n' "$out" | grep -c "^trainbench\[rank 1 [^]]*\]: error:")
[ "$n" -eq 1 ] || { echo "FAIL: rank 1 printed $n error lines, want its own alone"; fail=1; }
for r in 0 2; do
  n=$(printf '%s\n' "$out" | grep -c "^trainbench\[rank $r [^]]*\]: error: the job was ended (SIGTERM) after its last collective")
  [ "$n" -eq 1 ] || { echo "FAIL: rank $r printed $n 'ended after its last collective' lines, want 1"; fail=1; }
done
[ "$fail" -eq 0 ] && echo "ok: every rank ended with a line"
exit "$fail"
