# Reliability (issue 7): killed, frozen and early-leaving ranks end the job
# within --timeout + a grace with a message on every other rank and an
# "aborted" results file; NaN stops with the step and tensor; --resume is
# exact; a kill during a checkpoint write leaves the previous one loadable,
# a SIGTERM during one marks the results file aborted, and on 2 ranks (the
# watchdog ends the job) leaves no temporary file either; a checkpoint write
# longer than --timeout (stall-ckpt) is named as such, with what to do.
# HDF5 from several threads (issue 12): the process-wide lock, the
# watchdog's bounded wait, results snapshots, exit waiting for a writer.
add_executable(test_h5_lock test_h5_lock.c)
target_link_libraries(test_h5_lock PRIVATE tb_app)
add_test(NAME h5_lock_threads COMMAND test_h5_lock)
set_tests_properties(h5_lock_threads PROPERTIES TIMEOUT 120)

foreach(mode killed frozen early early-late-pong killed-bwd frozen-bwd nan resume ckptkill ckptterm ckptterm_np2 ckptslow_np2)
  add_test(NAME resilience_${mode}
           COMMAND ${TB_PY} ${TB_TEST_DIR}/test_resilience.py ${mode} --trainbench ${TB_BIN}
                   --mpiexec "${MPIEXEC_EXECUTABLE}" --ckpt-copy $<TARGET_FILE:tb_ckpt_copy>)
  set_tests_properties(resilience_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 PROCESSORS 1
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
endforeach()
# PROCESSORS (ctest -j's share of the cores, here and below): what the test
# keeps busy, measured as CPU time over wall time on a 2-core machine
# (tests/measure_processors.py): three ranks, but one is killed, frozen or
# gone and the others wait out --timeout, 0.04-0.9 cores; resume's
# trainings, 1.16 cores.

# an end on an error or a signal (--strict-data, a full disk, Ctrl-C on one
# rank, a launch mistake): one line, no temporary file, no crash after the
# line, and the results file marked "aborted" with the reason
add_test(NAME abort_marks_results
         COMMAND sh ${TB_TEST_DIR}/abort_marks_results.sh ${TB_BIN} ${TB_PYTHON} ${MPIEXEC_EXECUTABLE})
# PROCESSORS 1: mostly one rank, or two waiting on a stopped one (0.56 cores)
set_tests_properties(abort_marks_results PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 PROCESSORS 1
                     ENVIRONMENT "${TB_MPI_TEST_ENV}")

# a checkpoint whose fsync fails (EIO, a write-back error; fail_fsync.c
# preloaded) does not replace the last good one: one line, exit 1
add_library(tb_fail_fsync SHARED fail_fsync.c)
target_link_libraries(tb_fail_fsync PRIVATE ${CMAKE_DL_LIBS})
add_test(NAME ckpt_fsync_fails COMMAND sh ${TB_TEST_DIR}/ckpt_fsync_fails.sh ${TB_BIN} $<TARGET_FILE:tb_fail_fsync>)
set_tests_properties(ckpt_fsync_fails PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# a limit of the environment (stdout piped to 'head', ulimit -f): one line,
# no temporary file, an earlier checkpoint kept, the results file marked,
# where the signal's default (SIGPIPE, SIGXFSZ) ended the process silently
add_test(NAME resource_limits COMMAND sh ${TB_TEST_DIR}/resource_limits.sh ${TB_BIN} ${TB_PYTHON} ${TB_HAVE_MPI})
set_tests_properties(resource_limits PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# a rank frozen where no watchdog runs (before MPI_Init; after the last
# collective, before MPI_Finalize; in allreduce-bench's sweep and
# preflight's launch checks) ends the job through the stall guard within
# --timeout, instead of a hang
if(TB_HAVE_MPI)
  add_test(NAME frozen_rank_guard_np2
           COMMAND sh ${TB_TEST_DIR}/frozen_rank_guard.sh train ${TB_BIN} ${MPIEXEC_EXECUTABLE} ${TB_PYTHON})
  add_test(NAME frozen_rank_guard_commands_np2
           COMMAND sh ${TB_TEST_DIR}/frozen_rank_guard.sh commands ${TB_BIN} ${MPIEXEC_EXECUTABLE} ${TB_PYTHON})
  # PROCESSORS 1: two ranks, but one is stopped and the other waits out a
  # 4 s deadline (~40 s of the two tests' time is waiting): reserving both
  # cores of a 2-core CI machine for it held every other test back
  set_tests_properties(frozen_rank_guard_np2 frozen_rank_guard_commands_np2 PROPERTIES TIMEOUT 120 PROCESSORS 1
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
endif()

# allreduce-bench sums in place: each all-reduce starts from the inputs
# again, so 200 of them on 3 ranks stay exact (3^200 would be inf) and the
# check reads the last timed one.
if(TB_HAVE_MPI)
  add_test(NAME allreduce_bench_values_stay_exact
           COMMAND sh -c "out=$(\"$@\" 2>&1); rc=$?; printf '%s\\n' \"$out\" | tail -n 4; [ $rc -eq 0 ] && printf '%s\\n' \"$out\" | grep -q 'Out of bounds values : 0 OK'"
                   allreduce_bench ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 3 ${TB_BIN} allreduce-bench
                   -b 4 -e 64K -f 16 -n 200 -w 5)
  set_tests_properties(allreduce_bench_values_stay_exact PROPERTIES TIMEOUT 300 PROCESSORS 3
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
  # ... and its check can fail: one spoiled element of one rank's sum
  # (TB_TEST_FAULT=wrong-sum) is counted in its row, exits 1 and marks the
  # results file aborted (tests/allreduce_wrong.sh)
  if(TB_PYTHON)
    add_test(NAME allreduce_bench_wrong_sum_caught_np2
             COMMAND sh ${TB_TEST_DIR}/allreduce_wrong.sh ${TB_BIN} ${TB_PYTHON} ${MPIEXEC_EXECUTABLE}
                     ${MPIEXEC_NUMPROC_FLAG})
    set_tests_properties(allreduce_bench_wrong_sum_caught_np2 PROPERTIES TIMEOUT 120 PROCESSORS 1 # 0.54 cores
                         ENVIRONMENT "${TB_MPI_TEST_ENV}")
    # -a combines the ranks' times as nccl-tests' -a (0 rank 0, 1 mean: the default, 2 min, 3 max): one
    # rank's time planted 1 s longer (TB_TEST_FAULT=slow-time) moves each as it should (tests/allreduce_average.sh)
    add_test(NAME allreduce_bench_average_np2
             COMMAND sh ${TB_TEST_DIR}/allreduce_average.sh ${TB_BIN} ${TB_PYTHON} ${MPIEXEC_EXECUTABLE}
                     ${MPIEXEC_NUMPROC_FLAG})
    set_tests_properties(allreduce_bench_average_np2 PROPERTIES TIMEOUT 120 PROCESSORS 1
                         ENVIRONMENT "${TB_MPI_TEST_ENV}")
  endif()
  # a size's first all-reduce is never timed, even with -w 0 (nccl-tests' BenchTime runs one before its
  # loop): a first call planted 1 s slow (TB_TEST_FAULT=slow-first) leaves the slowest rank's time (-a 3)
  # at microseconds, where timing it gave 0.5 s over -n 2
  add_test(NAME allreduce_bench_first_untimed_np2
           COMMAND sh -c "out=$(\"$@\" 2>&1); rc=$?; printf '%s\\n' \"$out\"; [ $rc -eq 0 ] && printf '%s\\n' \"$out\" | awk '/^ +[0-9]/ { n++; if ($6 + 0 >= 1e5) bad = 1 } END { exit !(n == 1 && !bad) }'"
                   allreduce_bench ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 -x TB_TEST_FAULT=slow-first:1:0
                   ${TB_BIN} allreduce-bench -b 4K -e 4K -n 2 -w 0 -a 3)
  set_tests_properties(allreduce_bench_first_untimed_np2 PROPERTIES TIMEOUT 120 PROCESSORS 1
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
endif()

# An output flag never destroys a file it was not meant to replace: a
# checkpoint at --results or --trace, a results file at --ckpt or --save, a
# FIFO, step's --out on its own inputs (tests/output_guard.sh)
add_test(NAME output_guard COMMAND sh ${TB_TEST_DIR}/output_guard.sh ${TB_BIN} ${TB_PYTHON})
set_tests_properties(output_guard PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
# NaN or Inf never goes in or out through a checkpoint or a batch file: step
# and train refuse such /images, step a step whose weights overflow, train
# and step a checkpoint holding one (tests/nonfinite_inputs.sh)
add_test(NAME nonfinite_inputs COMMAND sh ${TB_TEST_DIR}/nonfinite_inputs.sh ${TB_BIN} ${TB_PYTHON})
set_tests_properties(nonfinite_inputs PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# What train leaves in its checkpoint and results files (tests/ckpt_outputs.sh):
# --ckpt checkpoints the last step (with --ckpt-every too, once); --resume keeps an
# earlier results file under a name of its own; a checkpoint is never written
# with NaN/Inf (BatchNorm statistics overflowing under --lr 100000 on 2 ranks:
# every rank stops with the tensor and the last good checkpoint's step);
# start-up refusals of --ckpt and --resume reach every rank and touch no file.
if(TB_PYTHON)
  set(TB_CKPT_OUT sh ${TB_TEST_DIR}/ckpt_outputs.sh)
  add_test(NAME ckpt_written_at_end COMMAND ${TB_CKPT_OUT} at-end ${TB_BIN} ${TB_PYTHON})
  add_test(NAME ckpt_every_longer_than_run COMMAND ${TB_CKPT_OUT} every-longer ${TB_BIN} ${TB_PYTHON})
  add_test(NAME ckpt_damaged_refused COMMAND ${TB_CKPT_OUT} damaged ${TB_BIN} ${TB_PYTHON})
  add_test(NAME resume_keeps_earlier_results COMMAND ${TB_CKPT_OUT} keep ${TB_BIN} ${TB_PYTHON})
  set_tests_properties(ckpt_written_at_end ckpt_every_longer_than_run ckpt_damaged_refused resume_keeps_earlier_results
                       PROPERTIES TIMEOUT 300)
  if(TB_HAVE_MPI)
    add_test(NAME ckpt_never_nonfinite_np2
             COMMAND ${TB_CKPT_OUT} nonfinite ${TB_BIN} ${TB_PYTHON} ${TB_MPIRUN} 2)
    add_test(NAME ckpt_resume_refused_all_ranks_np2
             COMMAND ${TB_CKPT_OUT} all-ranks ${TB_BIN} ${TB_PYTHON} ${TB_MPIRUN} 2)
    # PROCESSORS 1: 0.9 and 0.5 cores (two ranks that stop early, one-rank runs)
    set_tests_properties(ckpt_never_nonfinite_np2 ckpt_resume_refused_all_ranks_np2 PROPERTIES TIMEOUT 300
                         PROCESSORS 1 ENVIRONMENT "${TB_MPI_TEST_ENV}")
  endif()
endif()

# the watchdog's line names the scaling row a step belongs to (a row's
# steps count from 0 again): rank 1 frozen in the 2-rank row
if(TB_HAVE_MPI)
  add_test(NAME watchdog_scaling_row_np2
           COMMAND sh ${TB_TEST_DIR}/watchdog_scaling_row.sh ${TB_BIN} ${MPIEXEC_EXECUTABLE} ${TB_PYTHON})
  set_tests_properties(watchdog_scaling_row_np2 PROPERTIES TIMEOUT 120 PROCESSORS 1 # mostly the 3 s wait
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
  # a slow batch in a row of fewer ranks is no stalled collective: every rank's
  # step 1 made 1 s slower (TB_TEST_FAULT=slow-step, alike on all: no
  # collective waits for it), --timeout 0.5. The 1-rank row's data wait was
  # labelled as its start (a collective), and the watchdog ended the job
  # blaming rank 1, which is not in that row.
  add_test(NAME watchdog_slow_data_in_row_np2
           COMMAND ${TB_TEST_DIR}/expect_pass.sh "^# scaling row 2 of 2: 2 ranks, [0-9.]+ img/s" --
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 -x TB_TEST_FAULT=slow-step:-1:1 ${TB_BIN} --model resnet18
                   --image-size 32 --batch-size 4 --steps 2 --scaling-steps 2 --scaling-warmup 1 --threads 1
                   --timeout 0.5 --results "")
  set_tests_properties(watchdog_slow_data_in_row_np2 PROPERTIES TIMEOUT 120 ENVIRONMENT "${TB_MPI_TEST_ENV}")
  # a rank that ends in the end's teardown (after the watchdog stopped): every
  # rank's line, none ended by the launcher's SIGTERM without a word
  add_test(NAME end_teardown_all_ranks_say_np3
           COMMAND sh ${TB_TEST_DIR}/end_teardown.sh ${TB_BIN} ${MPIEXEC_EXECUTABLE})
  set_tests_properties(end_teardown_all_ranks_say_np3 PROPERTIES TIMEOUT 150 ENVIRONMENT "${TB_MPI_TEST_ENV}")
  # the same with rank 0 slow to say its line: Open MPI 4.1's mpirun SIGKILLs
  # every rank as soon as one exits, so rank 2 stays (the teardown's hold)
  add_test(NAME end_teardown_late_line_np3
           COMMAND sh ${TB_TEST_DIR}/end_teardown.sh ${TB_BIN} ${MPIEXEC_EXECUTABLE} die-end-late-line)
  set_tests_properties(end_teardown_late_line_np3 PROPERTIES TIMEOUT 150 ENVIRONMENT "${TB_MPI_TEST_ENV}")
endif()
