#!/bin/sh
# resource_limits.sh TRAINBENCH PYTHON [HAVE_MPI]: a run that meets a limit of its
# environment ends with one stderr line, leaves no temporary file and no
# earlier file destroyed, and its results file says "aborted" with the
# reason, where the signal's default once ended it without a line:
#   pipe    standard output piped to 'head -2', whose exit makes every
#           later write raise SIGPIPE: exit 141, "stopped by SIGPIPE", the
#           results file marked with it (it was left with the snapshot's
#           guess, the process dead without a word);
#   lbpipe  the same under loader-bench: it finishes, writes its results
#           file and says "standard output: Broken pipe", exit 1 (SIGPIPE
#           ended it without a line, its results file never written);
#   fsize   a file-size limit (ulimit -f) below the checkpoint's size, an
#           earlier checkpoint at the path: "cannot write checkpoint ...
#           File too large", exit 1, no ck.h5.tmp.PID left, the earlier
#           checkpoint unchanged (SIGXFSZ ended it silently, exit 153);
#   mkdata  the same limit under mkdata's JPEG writer: its one line;
#   full    standard output to /dev/full (a log on a full disk), and
#           closed: exit 1 and "standard output: ..." (the lost output went
#           unsaid, exit status 0), the results file whole ("complete");
#   threads a thread that cannot start (ulimit -u reached; the test's
#           fault makes the first start fail): one line naming it, why and
#           the limit (it said "cannot start the X thread", or
#           "pthread_create: ..." for the loader's);
#   emfile  the loader's open of a file failing with EMFILE (ulimit -n
#           reached; the test's fault): one line naming the file and the
#           limit (the file was skipped as bad data instead);
#   vmem    an address-space limit (ulimit -v 200000, 195 MiB, or the least
#           above it in steps of 128 MiB under which the binary's libraries
#           load) too tight for OpenBLAS's 128 MiB buffer: "the address-space limit (ulimit -v)
#           ... raise the limit", exit 1 (the library retries the map for
#           ever: train hung, with no line, in MPI_Init); skipped, and said
#           so, where the binary's libraries alone do not load under it;
#   vmem-pool the same limit, 48 MiB above what that run had mapped, for
#           commands that never call the BLAS (report --help, mkdata,
#           loader-bench) and probe: exit 0, probe's CPU GEMM "not measured"
#           (each hung at exit: OpenBLAS's pool threads, started as the
#           library loads, retry their buffers' map for ever);
#   nofile, stack  a soft ulimit -n 24 or -s 200 KiB, under what MPI's
#           start needs: raised toward the hard limit, the run trains (Open
#           MPI's singleton start failed with pages of lines); a hard limit
#           there: one line naming the limit, exit 1 (HAVE_MPI OFF: not
#           checked; a build without MPI starts no daemon); the descriptor
#           floor only where the user turned the isolated singleton off
#           (OMPI_MCA_ess_singleton_isolated=0): by default the run trains.
# PYTHON needs h5py (exit 77 without). About 15 s (60 s more where vmem hangs).
set -u
tb=$1
py=$2
have_mpi=${3:-ON} # TB_HAVE_MPI: the nofile and stack hard-limit lines are MPI's start's
"$py" -c 'import h5py' 2>/dev/null || { echo "SKIP: $py has no h5py"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
# shellcheck disable=SC1091 # fail, status and check: tests/one_line_checks.sh
. "$(dirname "$0")/one_line_checks.sh"
run() { "$tb" --model resnet18 --image-size 32 --batch-size 4 --scaling-steps 0 --synthetic "$@"; }

# pipe: the exit status of trainbench, not of head, through a file
for i in 1 2; do
  rm -f "$d/pipe.h5"
  { run --steps 20 --print-every 1 --results "$d/pipe.h5" 2>"$d/err"; echo $? >"$d/rc"; } | head -n 2 >/dev/null
  check "pipe $i" "$(cat "$d/rc")" 141 "$d/err" "stopped by SIGPIPE" "$d/pipe.h5"
done

"$tb" mkdata --out "$d/lbset" --classes 2 --per-class 16 --min-side 48 --max-side 64 >/dev/null || exit 1
{ "$tb" loader-bench --data "$d/lbset" --threads 1,2 --batch-size 4 --image-size 32 --batches 4 \
    --results "$d/lb.h5" 2>"$d/err"; echo $? >"$d/rc"; } | head -n 1 >/dev/null
check "lbpipe" "$(cat "$d/rc")" 1 "$d/err" "standard output: Broken pipe;"
[ -f "$d/lb.h5" ] || fail "lbpipe: no results file"

# fsize: ResNet-18's checkpoint is 90 MB; the limit (10 MB under dash's
# 512-byte blocks, 20 MB under bash's KiB) leaves room for MPI's own files
run --steps 2 --ckpt "$d/ck.h5" --results "$d/fsize.h5" >"$d/out" 2>"$d/err" || { cat "$d/err"; exit 1; }
cp "$d/ck.h5" "$d/ck.before"
(ulimit -f 20000 && run --steps 4 --ckpt "$d/ck.h5" --resume --results "$d/fsize.h5") >/dev/null 2>"$d/err"
check "fsize" $? 1 "$d/err" "cannot write checkpoint '$d/ck.h5': File too large" "$d/fsize.h5"
cmp -s "$d/ck.h5" "$d/ck.before" || fail "fsize: the earlier checkpoint was changed"

# a hard limit of 20 kB (dash's 512-byte blocks; 40 kB under bash): Open MPI 4's PMIx data store is a file too
# (9 "PMIX ERROR" lines and an abort in MPI_Init, alone or under mpirun, before PMIX_MCA_gds=hash): the run's own
# line, once (under ~12 kB the singleton's daemon gets SIGXFSZ itself and says so)
(ulimit -f 40 && run --steps 1 --results "$d/tiny.h5") >/dev/null 2>"$d/err"
check "fsize-hard" $? 1 "$d/err" "cannot write results file '$d/tiny.h5': File too large"

(ulimit -f 20000 && "$tb" mkdata --out "$d/set" --classes 1 --per-class 2 --min-side 4000 --max-side 4000 \
  --quality 100) >/dev/null 2>"$d/err"
check "mkdata" $? 1 "$d/err" "File too large"

run --steps 2 --results "$d/full.h5" >/dev/full 2>"$d/err"
check "full" $? 1 "$d/err" "standard output: No space left on device"
case $(status "$d/full.h5") in complete\|*) ;; *) fail "full: results file says '$(status "$d/full.h5")', want complete" ;; esac
run --steps 2 --results "$d/full.h5" >&- 2>"$d/err"
check "closed" $? 1 "$d/err" "standard output: Bad file descriptor"
"$tb" mkdata --out "$d/set2" --classes 1 --per-class 2 --min-side 64 --max-side 64 >/dev/full 2>"$d/err"
check "mkdata-full" $? 1 "$d/err" "standard output: No space left on device"
[ "$(find "$d/set2" -name '*.jpg' | wc -l)" -eq 2 ] || fail "mkdata-full: the set is not whole"

# threads: a thread that cannot start (the per-user limit on processes and
# threads, ulimit -u, reached: TB_TEST_FAULT=no-thread makes the first start
# fail with EAGAIN) names the thread, the error and the limit in one line
TB_TEST_FAULT=no-thread:-1:1 run --steps 2 --results "$d/thr.h5" >/dev/null 2>"$d/err"
check "threads" $? 1 "$d/err" "cannot start the .* thread: Resource temporarily unavailable: the user's limit on processes and threads (ulimit -u"
[ -e "$d/thr.h5" ] && fail "threads: a results file was written"
TB_TEST_FAULT=no-thread:-1:1 "$tb" loader-bench --data "$d/lbset" --image-size 32 --batch-size 4 --threads 2 \
  >/dev/null 2>"$d/err"
check "threads-loader" $? 1 "$d/err" "cannot start a loader worker thread: Resource temporarily unavailable: the user's limit"
# emfile: the loader's 5th file open fails as under a reached ulimit -n (TB_TEST_FAULT=emfile): one line
# saying the data is not at fault and what to do (the file was skipped as bad, and with every open
# failing every good file after it, until "the data set needs valid JPEGs")
TB_TEST_FAULT=emfile:-1:5 "$tb" loader-bench --data "$d/lbset" --image-size 32 --batch-size 4 --threads 2 \
  >/dev/null 2>"$d/err"
check "emfile-loader" $? 1 "$d/err" "cannot open .*lbset/.*: Too many open files; the data is not at fault: raise the open-file limit (ulimit -n)"

# nofile, stack: a soft limit under what MPI's start needs (Open MPI's
# singleton daemon failed under ulimit -n 24 and ulimit -s 200 with pages of
# ORTE_ERROR_LOG lines, and the run with them) is raised toward the hard one
# and the run trains; a hard limit under it: one line naming the limit and
# what to do, exit 1, no results file
# limited ULIMIT_ARGS OUT [VAR=VALUE]: a 2-step training under `ulimit
# ULIMIT_ARGS` (and VAR in its environment), results to OUT; its exit status
limited() {
  # shellcheck disable=SC2086 # $1: ulimit's arguments; $3: empty or one assignment
  (ulimit $1 && exec env ${3:-} timeout -s KILL 60 "$tb" --model resnet18 --image-size 32 --batch-size 4 \
    --scaling-steps 0 --synthetic --steps 2 --results "$2") >/dev/null 2>"$d/err"
}
# trains NAME WHAT RC OUT: the run of RC trained (exit 0, OUT written)
trains() {
  if [ "$3" -ne 0 ] || [ ! -f "$4" ]; then fail "$1: $2: exit $3: $(head -c 300 "$d/err")"; else echo "ok   $1: $2, trained"; fi
}
for c in nofile stack; do
  case $c in nofile) flag=-n val=24 name=open-files ;; *) flag=-s val=200 name=stack-size ;; esac
  limited "-S $flag $val" "$d/$c.h5"
  trains "$c" "soft ulimit $flag $val raised" $? "$d/$c.h5"
  [ "$have_mpi" = ON ] || { echo "skip $c-hard: built without MPI (the line is MPI's start's)"; continue; }
  # the descriptor floor is Open MPI 4's singleton daemon's (5 starts none; other MPIs their own way)
  mpi=$("$py" -c 'import sys, h5py; print(h5py.File(sys.argv[1], "r").attrs.get("mpi_version", ""))' "$d/$c.h5")
  case $c:$mpi in nofile:*"Open MPI v4."*) ;; nofile:*)
    echo "skip nofile-hard: the MPI is '$mpi', not Open MPI 4 (its singleton's floor)"
    continue
    ;;
  esac
  # nofile: the daemon's floor, where the user turned trainbench's isolated singleton off; with
  # it (the default) no daemon starts and the run trains under the same hard limit
  iso=""
  if [ $c = nofile ]; then
    iso="OMPI_MCA_ess_singleton_isolated=0"
    limited "$flag $val" "$d/$c-iso.h5"
    trains "$c-isolated" "hard ulimit $flag $val, a singleton without a daemon" $? "$d/$c-iso.h5"
  fi
  limited "$flag $val" "$d/$c-hard.h5" "$iso"
  check "$c-hard" $? 1 "$d/err" "the $name limit (ulimit $flag) is $val [a-zA-Z]*, its hard limit $val: .*MPI's start.* need"
  [ -e "$d/$c-hard.h5" ] && fail "$c-hard: a results file was written"
done

# The lowest limit, from 195 MiB in steps of 128 MiB, under which the
# binary's libraries load (a CUDA build maps cuBLAS and cuDNN: about 1 GiB
# more): OpenBLAS's 128 MiB per thread does not fit under it.
vmem() { # KIB: the run under ulimit -v KIB; its exit status
  # shellcheck disable=SC3045 # ulimit -v: dash's and bash's (KiB both)
  (ulimit -v "$1" && exec timeout -s KILL 60 "$tb" --model resnet18 --image-size 32 --batch-size 4 \
    --scaling-steps 0 --synthetic --steps 2 --results "$d/vmem.h5") >/dev/null 2>"$d/err"
}
# pool: 48 MiB above what train had mapped: the libraries load, but not one
# more 128 MiB buffer fits, which each thread of OpenBLAS's pool (started as
# the library loads, one a core) maps as it starts: commands that never call
# the BLAS end as they would without the limit, and probe's CPU GEMM says it
# was not measured (each hung at exit, where the library joins its threads)
vmem_pool() { # MIB: what the vmem case's train had mapped
  [ -n "$1" ] || { fail "vmem: no 'N MiB mapped' in its line"; return; }
  lim=$((($1 + 48) * 1024))
  for c in help mkdata loader-bench probe; do
    # shellcheck disable=SC3045 # ulimit -v: dash's and bash's (KiB both)
    (ulimit -v $lim && case $c in
      help) exec timeout -s KILL 30 "$tb" report --help ;;
      mkdata) exec timeout -s KILL 30 "$tb" mkdata --out "$d/poolset" --classes 1 --per-class 2 --min-side 48 \
        --max-side 48 --threads 1 ;; # one writer: each thread's 8 MiB stack counts against the limit
      loader-bench) exec timeout -s KILL 30 "$tb" loader-bench --data "$d/lbset" --threads 1 --batches 2 \
        --batch-size 2 --image-size 32 ;;
      probe) exec timeout -s KILL 30 "$tb" probe --quick ;;
    esac) >"$d/out" 2>"$d/err"
    rc=$?
    if [ $rc -ne 0 ]; then
      fail "vmem-pool $c: exit $rc under ulimit -v $lim (137: it hung): $(cut -c1-200 <"$d/err")"
    elif [ $c = probe ] && ! grep -q 'sgemm .*not measured: the address-space limit' "$d/out"; then
      fail "vmem-pool probe: no 'sgemm not measured' line: $(grep sgemm "$d/out")"
    else
      echo "ok   vmem-pool $c: exit 0 under ulimit -v $lim"
    fi
  done
}

kib=200000
vmem $kib
rc=$?
while grep -q 'error while loading shared libraries' "$d/err" && [ $kib -lt 4400000 ]; do
  kib=$((kib + 131072))
  vmem $kib
  rc=$?
done
if ! grep -q 'BLAS: OpenBLAS' "$d/out"; then
  echo "skip vmem: the BLAS is not OpenBLAS (the check is for its buffer)"
elif grep -q 'error while loading shared libraries' "$d/err"; then
  echo "skip vmem: the binary's libraries do not load under $((kib / 1024)) MiB: $(cut -c1-150 <"$d/err")"
elif grep -q 'ReserveShadowMemoryRange failed' "$d/err"; then
  # AddressSanitizer maps terabytes of shadow before main: a sanitizer build
  # cannot start under any such limit (the Release suite runs this case)
  echo "skip vmem: AddressSanitizer cannot start under an address-space limit"
else
  check "vmem" $rc 1 "$d/err" "the address-space limit (ulimit -v) is $((kib / 1024)) MiB"
  vmem_pool "$(sed -n 's/.* with \([0-9]*\) MiB mapped.*/\1/p' "$d/err")"
fi

[ "$fails" -eq 0 ] || exit 1
echo "all resource-limit cases passed"
