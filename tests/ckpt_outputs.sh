#!/bin/sh
# ckpt_outputs.sh MODE TRAINBENCH PYTHON [LAUNCHER...]: what `train` leaves
# in its checkpoint and results files (PYTHON: a python3 with h5py; the
# launcher, `mpirun -np 2` say, runs the nonfinite and all-ranks modes).
#   at-end     --ckpt without --ckpt-every writes one checkpoint, of the
#              last step (with the ranks and global batch that wrote it), and
#              a resume from it continues there; a resume with another batch
#              continues too, with one '# --resume:' line saying it is not
#              the interrupted run's continuation (so does one over data of
#              another size, which the checkpoint records, or of the same size
#              but another fingerprint: a file renamed); one without a seed
#              attribute, or at a negative position, is refused with one line
#              saying so
#   every-longer  --ckpt-every longer than the run still leaves a checkpoint
#              of the last step, and a resumed run whose last step is one of
#              --ckpt-every's writes it once, not twice
#   damaged    a checkpoint with 4 bytes of a weight overwritten on disk
#              (finite values, so only its checksum can tell) is refused by
#              --resume, --init and step with one line naming the dataset
#              (it resumed and trained on, exit 0)
#   keep       --resume keeps an earlier --results file as
#              NAME.before_resume_stepK.h5 (NAME...K.1.h5 when that exists),
#              with the steps it held, and says so in one '# ' line; a
#              plain rerun replaces the file as before
#   nonfinite  a run whose BatchNorm statistics overflow stops on every rank
#              with one line naming the tensor and the last good checkpoint's
#              step; the checkpoint on disk is that step's and holds only
#              finite values; the results file says the same
#   all-ranks  start-up refusals (a checkpoint at --ckpt without --resume,
#              --resume from a checkpoint already at --steps) reach every
#              rank, each with its own one line, and touch no file
mode=$1
tb=$2
py=$3
shift 3
dir=$(mktemp -d "$(pwd)/tb_ckpt_out.XXXXXX")
trap 'rm -rf "$dir"' EXIT
small="--image-size 32 --batch-size 4 --threads 1 --scaling-steps 0 --warmup-steps 0 --timeout 60"
fails=0

fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# h5 FILE EXPR: prints EXPR of the open h5py.File f (a one-line python expression)
h5() {
  "$py" -c "import sys, h5py; f = h5py.File(sys.argv[1], 'r'); print($2)" "$1"
}

# run LOG ARGS...: trainbench with the small settings, its output in LOG
run() {
  log=$1
  shift
  # shellcheck disable=SC2086 # $small is a list of words
  "$tb" $small "$@" >"$log" 2>&1
}

case $mode in
at-end)
  run "$dir/a.log" --steps 3 --ckpt "$dir/c.h5" --results "" || { cat "$dir/a.log"; fail "run with --ckpt"; }
  step=$(h5 "$dir/c.h5" "int(f.attrs['step'])" 2>&1)
  [ "$step" = 3 ] || fail "--ckpt without --ckpt-every: checkpoint step '$step', expected 3 (the last step)"
  run "$dir/b.log" --steps 5 --ckpt "$dir/c.h5" --resume --results "" || { cat "$dir/b.log"; fail "resume"; }
  grep -q "resuming from .* at step 3" "$dir/b.log" || fail "the resumed run did not start at step 3"
  step=$(h5 "$dir/c.h5" "int(f.attrs['step'])" 2>&1)
  [ "$step" = 5 ] || fail "after the resumed run the checkpoint holds step '$step', expected 5"
  grep -q "not as the interrupted run" "$dir/b.log" && fail "a resume with the same ranks and batch says it differs"
  grep -q "written over data" "$dir/b.log" && fail "a resume over the same data says the data differs"
  grep -q "written over other data" "$dir/b.log" && fail "a resume over the same synthetic pool says it differs"
  run_of=$(h5 "$dir/c.h5" "int(f.attrs['world_size']), int(f.attrs['global_batch']), int(f.attrs['dataset_size'])" 2>&1)
  [ "$run_of" = "1 4 50000" ] ||
    fail "the checkpoint records ranks, global batch and samples '$run_of', expected 1 4 50000"
  # another batch: the run goes on, and one line says it is not the same run
  run "$dir/c.log" --steps 6 --batch-size 8 --ckpt "$dir/c.h5" --resume --results "" ||
    { cat "$dir/c.log"; fail "resume with another batch"; }
  grep -q "^# --resume: the checkpoint was written by 1 rank(s), global batch 4; this run has 1, global batch 8: it goes on from step 5, but not as the interrupted run would have" "$dir/c.log" ||
    fail "a resume with another global batch does not say it differs from the interrupted run"
  # other data (fewer samples): the run goes on, and one line says so
  run "$dir/e.log" --steps 7 --batch-size 8 --synthetic-size 4000 --ckpt "$dir/c.h5" --resume --results "" ||
    { cat "$dir/e.log"; fail "resume over other data"; }
  grep -q "^# --resume: the checkpoint was written over data of 50000 samples; this run's data has 4000: it goes on from step 6, but its epochs and sample order are not the interrupted run's" "$dir/e.log" ||
    { cat "$dir/e.log"; fail "a resume over data of another size does not say so"; }
  # a file without a seed (weights written by another tool) is refused with
  # what it lacks, not as "written with --seed 0"
  cp "$dir/c.h5" "$dir/noseed.h5"
  "$py" -c "import sys, h5py; del h5py.File(sys.argv[1], 'r+').attrs['seed']" "$dir/noseed.h5"
  run "$dir/d.log" --steps 9 --ckpt "$dir/noseed.h5" --resume --results "" && fail "resume from a file without a seed ran"
  grep -q "error: train: '$dir/noseed.h5' records no seed, so it is not the checkpoint of a run to resume; start from its weights with --init instead$" "$dir/d.log" ||
    { cat "$dir/d.log"; fail "resume from a file without a seed: no line saying so"; }
  # --save after a resume with another batch records the loop's position,
  # as --ckpt does: 16 samples at batch 4 (4 steps an epoch) to step 5 =
  # epoch 1, step 1; resumed at batch 2 (8 an epoch) to step 7 = epoch 1,
  # step 3, where step / steps-per-epoch (0, 7) is not where the data stands
  run "$dir/s1.log" --steps 5 --synthetic-size 16 --ckpt "$dir/s.h5" --results "" || { cat "$dir/s1.log"; fail "s1"; }
  run "$dir/s2.log" --steps 7 --synthetic-size 16 --batch-size 2 --ckpt "$dir/s.h5" --resume --save "$dir/saved.h5" \
    --results "" || { cat "$dir/s2.log"; fail "s2"; }
  pos=$(h5 "$dir/saved.h5" "int(f.attrs['step']), int(f.attrs['epoch']), int(f.attrs['epoch_step'])" 2>&1)
  ck=$(h5 "$dir/s.h5" "int(f.attrs['step']), int(f.attrs['epoch']), int(f.attrs['epoch_step'])" 2>&1)
  if [ "$pos" != "7 1 3" ] || [ "$pos" != "$ck" ]; then
    fail "--save records step, epoch, epoch_step $pos, --ckpt $ck; expected 7 1 3 in both"
  fi
  # a position before the start (a damaged or hand-made file: attributes
  # carry no checksum) is refused, not read as an index into the data
  cp "$dir/c.h5" "$dir/negative.h5"
  "$py" -c "import sys, h5py; h5py.File(sys.argv[1], 'r+').attrs['epoch_step'] = -3" "$dir/negative.h5"
  run "$dir/n.log" --steps 9 --ckpt "$dir/negative.h5" --resume --results "" &&
    fail "resume from a file at epoch_step -3 ran"
  grep -q "error: train: '$dir/negative.h5' records a position before the start (step 7, epoch 0, step -3 of it)" \
    "$dir/n.log" || { cat "$dir/n.log"; fail "resume from a negative position: no line saying so"; }
  # other data of the same size (a file renamed: same count, another
  # fingerprint): the run goes on, and one line says so; the same tree
  # resumed says nothing
  "$tb" mkdata --out "$dir/ds" --classes 2 --per-class 4 --min-side 40 --max-side 48 >/dev/null ||
    fail "mkdata"
  jpeg="--data $dir/ds --loader-threads 1"
  # shellcheck disable=SC2086 # $jpeg is a list of words
  run "$dir/j1.log" $jpeg --steps 2 --ckpt "$dir/j.h5" --results "" || { cat "$dir/j1.log"; fail "j1"; }
  # shellcheck disable=SC2086
  run "$dir/j2.log" $jpeg --steps 3 --ckpt "$dir/j.h5" --resume --results "" || { cat "$dir/j2.log"; fail "j2"; }
  grep -q "other data" "$dir/j2.log" && { cat "$dir/j2.log"; fail "a resume over the same files says they differ"; }
  mv "$dir/ds/class_001/img_000003.jpg" "$dir/ds/class_001/img_000009.jpg"
  # shellcheck disable=SC2086
  run "$dir/j3.log" $jpeg --steps 4 --ckpt "$dir/j.h5" --resume --results "" || { cat "$dir/j3.log"; fail "j3"; }
  grep -q "^# --resume: the checkpoint was written over other data of the same size (fingerprint [0-9a-f]\{16\}; this run's [0-9a-f]\{16\}: other samples, labels or order): it goes on from step 3" "$dir/j3.log" ||
    { cat "$dir/j3.log"; fail "a resume over other files of the same count does not say so"; }
  ;;
every-longer)
  run "$dir/a.log" --steps 3 --ckpt "$dir/c.h5" --ckpt-every 5 --results "" || { cat "$dir/a.log"; fail "run A"; }
  step=$(h5 "$dir/c.h5" "int(f.attrs['step'])" 2>&1)
  [ "$step" = 3 ] || fail "3 steps with --ckpt-every 5: checkpoint step '$step', expected 3 (the last step)"
  grep -q "^# checkpoints: 1 written to $dir/c.h5 " "$dir/a.log" || fail "run A: no '# checkpoints: 1 written' line"
  # resumed to 10: steps 5 and 10, the last one written once (--ckpt-every's write, not a second at the end)
  run "$dir/b.log" --steps 10 --ckpt "$dir/c.h5" --ckpt-every 5 --resume --results "" ||
    { cat "$dir/b.log"; fail "run B"; }
  step=$(h5 "$dir/c.h5" "int(f.attrs['step'])" 2>&1)
  [ "$step" = 10 ] || fail "resumed to 10 steps: checkpoint step '$step', expected 10"
  grep -q "^# checkpoints: 2 written to $dir/c.h5 " "$dir/b.log" || fail "run B: steps 5 and 10, not 2 writes"
  ;;
damaged)
  run "$dir/a.log" --steps 2 --ckpt "$dir/c.h5" --results "" || { cat "$dir/a.log"; fail "run A"; }
  # 4 bytes in the middle of layer2.0.conv1.weight's data: the float there becomes 2.1e9
  off=$(h5 "$dir/c.h5" "f['params/layer2.0.conv1.weight'].id.get_chunk_info(0).byte_offset + 1000" 2>&1)
  printf '\000\000\000\117' | dd of="$dir/c.h5" bs=1 seek="$off" conv=notrunc 2>/dev/null ||
    fail "could not damage the file at '$off'"
  want="dataset /params/layer2.0.conv1.weight fails its checksum: the file is damaged"
  for how in resume init step; do
    case $how in
    resume) run "$dir/$how.log" --steps 4 --ckpt "$dir/c.h5" --resume --results "" ;;
    init) run "$dir/$how.log" --steps 1 --init "$dir/c.h5" --results "" ;;
    step)
      "$py" -c "import h5py, numpy as np, sys
with h5py.File(sys.argv[1], 'w') as f:
    f['images'] = np.zeros((4, 3, 32, 32), np.float32); f['labels'] = np.arange(4, dtype=np.int64)" "$dir/b.h5"
      "$tb" step --ckpt "$dir/c.h5" --batch "$dir/b.h5" --out "$dir/o.h5" >"$dir/$how.log" 2>&1 ;;
    esac
    rc=$?
    [ $rc -eq 1 ] || fail "$how from the damaged checkpoint: exit $rc, want 1"
    if [ "$(grep -c 'error' "$dir/$how.log")" -ne 1 ] || ! grep -qF -- "$want" "$dir/$how.log"; then
      fail "$how: no one line '$want': $(tail -n 2 "$dir/$how.log")"
    fi
  done
  [ -e "$dir/o.h5" ] && fail "step wrote --out from the damaged checkpoint"
  # a read that fails for another reason is not called damaged: a batch file compressed with h5py's lzf, a
  # filter this HDF5 lacks, names HDF5's reason
  run "$dir/good.log" --steps 2 --ckpt "$dir/g.h5" --results "" || { cat "$dir/good.log"; fail "run G"; }
  "$py" -c "import h5py, numpy as np, sys
with h5py.File(sys.argv[1], 'w') as f:
    f.create_dataset('images', data=np.zeros((4, 3, 32, 32), np.float32), compression='lzf')
    f['labels'] = np.arange(4, dtype=np.int64)" "$dir/lzf.h5"
  "$tb" step --ckpt "$dir/g.h5" --batch "$dir/lzf.h5" --out "$dir/o.h5" >"$dir/lzf.log" 2>&1 && fail "step read lzf"
  grep -qF "'$dir/lzf.h5': dataset /images cannot be read (HDF5: " "$dir/lzf.log" ||
    fail "lzf: no line naming HDF5's reason: $(tail -n 1 "$dir/lzf.log")"
  grep -q "damaged" "$dir/lzf.log" && fail "lzf: called damaged"
  ;;
keep)
  r=$dir/run.h5
  run "$dir/a.log" --steps 2 --ckpt "$dir/c.h5" --ckpt-every 1 --results "$r" || { cat "$dir/a.log"; fail "run A"; }
  run "$dir/b.log" --steps 4 --ckpt "$dir/c.h5" --ckpt-every 1 --resume --results "$r" ||
    { cat "$dir/b.log"; fail "resumed run B"; }
  grep "^# --resume: the earlier results file $r is kept as $dir/run.before_resume_step2.h5$" "$dir/b.log" ||
    fail "no '# --resume: ... kept as run.before_resume_step2.h5' line"
  kept=$(h5 "$dir/run.before_resume_step2.h5" "list(f['steps/step'][()])" 2>&1)
  [ "$kept" = "[0, 1]" ] || fail "the kept file's steps are '$kept', expected the earlier run's [0, 1]"
  now=$(h5 "$r" "list(f['steps/step'][()])" 2>&1)
  [ "$now" = "[2, 3]" ] || fail "$r holds steps '$now', expected the resumed run's [2, 3]"
  # a name taken already: the next free one
  cp "$r" "$dir/run.before_resume_step4.h5"
  run "$dir/c.log" --steps 5 --ckpt "$dir/c.h5" --ckpt-every 1 --resume --results "$r" ||
    { cat "$dir/c.log"; fail "resumed run C"; }
  grep -q "is kept as $dir/run.before_resume_step4.1.h5$" "$dir/c.log" || fail "no run.before_resume_step4.1.h5"
  # a plain rerun replaces the results file and keeps nothing
  n=$(find "$dir" -name 'run.before_resume*' | wc -l)
  run "$dir/d.log" --steps 1 --results "$r" || { cat "$dir/d.log"; fail "plain rerun"; }
  [ "$(find "$dir" -name 'run.before_resume*' | wc -l)" = "$n" ] || fail "a plain rerun kept a copy"
  grep -q "is kept as" "$dir/d.log" && fail "a plain rerun says it kept a copy"
  ;;
nonfinite)
  ck=$dir/nan.ckpt.h5
  # shellcheck disable=SC2086 # $small is a list of words
  "$@" "$tb" $small --steps 30 --lr 100000 --lr-warmup-steps 0 --ckpt "$ck" --ckpt-every 1 \
    --results "$dir/n.h5" >"$dir/n.log" 2>&1 && fail "the run with --lr 100000 exited 0"
  grep "error:" "$dir/n.log"
  for rank in 0 1; do
    grep -Eq "trainbench\[rank $rank [^]]*\]: error: train: .*(NaN/Inf|the loss is).*; the last good checkpoint, '$ck', holds step [0-9]+$" "$dir/n.log" ||
      fail "rank $rank printed no line naming the last good checkpoint's step"
  done
  [ "$(grep -c "error:" "$dir/n.log")" = 2 ] || fail "expected one error line per rank"
  good=$(sed -n "s/.*the last good checkpoint, '.*', holds step \([0-9]*\)$/\1/p" "$dir/n.log" | head -n 1)
  step=$(h5 "$ck" "int(f.attrs['step'])" 2>&1)
  [ "$step" = "$good" ] || fail "the checkpoint holds step '$step', the stop line says $good"
  bad=$(h5 "$ck" "[n for n in [k for g in ('params', 'momentum') for k in (g + '/' + x for x in f[g])] if f[n].dtype.kind == 'f' and not __import__('numpy').isfinite(f[n][()]).all()]" 2>&1)
  [ "$bad" = "[]" ] || fail "the checkpoint holds non-finite tensors: $bad"
  left=$(find "$dir" -name '*.tmp.*')
  [ -z "$left" ] || fail "the stopped write left its temporary: $left"
  reason=$(h5 "$dir/n.h5" "f.attrs['status'], f.attrs['abort_reason']" 2>&1)
  case $reason in *aborted*"last good checkpoint"*) ;; *) fail "results file: $reason" ;; esac
  ;;
all-ranks)
  run "$dir/a.log" --steps 2 --ckpt "$dir/c.h5" --results "$dir/r.h5" || { cat "$dir/a.log"; fail "run A"; }
  cp "$dir/c.h5" "$dir/c_orig.h5"
  cp "$dir/r.h5" "$dir/r_orig.h5"
  # shellcheck disable=SC2086 # $small is a list of words
  sh "$(dirname "$0")/expect_all_ranks.sh" 2 "--ckpt '$dir/c.h5' already holds a checkpoint \(step 2\); add --resume" \
    "$@" "$tb" $small --steps 3 --ckpt "$dir/c.h5" --results "$dir/r.h5" || fail "refusal of an existing checkpoint"
  # shellcheck disable=SC2086 # $small is a list of words
  sh "$(dirname "$0")/expect_all_ranks.sh" 2 "is at step 2, which already reaches --steps 2; raise --steps" \
    "$@" "$tb" $small --steps 2 --ckpt "$dir/c.h5" --resume --results "$dir/r.h5" || fail "refusal of a finished resume"
  cmp -s "$dir/c.h5" "$dir/c_orig.h5" || fail "a refused run changed the checkpoint"
  cmp -s "$dir/r.h5" "$dir/r_orig.h5" || fail "a refused run changed the results file"
  [ -z "$(find "$dir" -name 'r.before_resume*')" ] || fail "a refused run renamed the results file"
  ;;
*)
  echo "usage: ckpt_outputs.sh at-end|keep|nonfinite|all-ranks TRAINBENCH PYTHON [LAUNCHER...]"
  exit 2
  ;;
esac
[ "$fails" = 0 ] || exit 1
echo "ok: $mode"
