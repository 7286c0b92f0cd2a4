# `trainbench report` and bench/plot_results.py (issue 8), on results files
# that trainbench writes here with tiny settings: one rank, two ranks under
# mpirun (when MPI is built in; else a second one-rank run with another
# batch size to compare against), and a run stopped by an injected NaN
# (TB_TEST_FAULT, core/faults.h). tests/test_report.py reads the same files
# with h5py and checks the printed numbers against them.
set(TB_REPORT_RUN --model resnet18 --image-size 32 --batch-size 4 --steps 6 --warmup-steps 2
    --scaling-steps 2 --scaling-warmup 1 --threads 1)
if(TB_PYTHON)
  set(TB_REPORT_PY ${TB_PYTHON} ${TB_TEST_DIR}/test_report.py)
else()
  set(TB_REPORT_PY sh -c "echo 'SKIP: no python3 with h5py found at configure time (set -DTB_PYTHON)'; exit 77" --)
endif()

# the results files (stale ones removed first, so a failed run cannot leave
# an old file for the checks); stdout kept: the live run's tables
add_test(NAME report_run_np1
         COMMAND sh -c "rm -f report_np1.h5 report_np1.log && \"$0\" \"$@\" > report_np1.log"
                 ${TB_BIN} ${TB_REPORT_RUN} --results report_np1.h5)
set_tests_properties(report_run_np1 PROPERTIES TIMEOUT 300 FIXTURES_SETUP report_np1)
if(TB_HAVE_MPI)
  set(TB_REPORT_B report_np2)
  set(TB_REPORT_BN np2)
  set(TB_REPORT_DIFF world_size)
  add_test(NAME report_run_np2
           COMMAND sh -c "rm -f report_np2.h5 report_np2.log && \"$0\" \"$@\" > report_np2.log"
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${TB_BIN} ${TB_REPORT_RUN}
                   --results report_np2.h5)
  set_tests_properties(report_run_np2 PROPERTIES TIMEOUT 300 PROCESSORS 2 ENVIRONMENT "${TB_MPI_TEST_ENV}"
                       FIXTURES_SETUP report_b)
else()
  set(TB_REPORT_B report_b2)
  set(TB_REPORT_BN b2)
  set(TB_REPORT_DIFF batch_size)
  add_test(NAME report_run_b2
           COMMAND sh -c "rm -f report_b2.h5 report_b2.log && \"$0\" \"$@\" --batch-size 2 > report_b2.log"
                   ${TB_BIN} ${TB_REPORT_RUN} --results report_b2.h5)
  set_tests_properties(report_run_b2 PROPERTIES TIMEOUT 300 FIXTURES_SETUP report_b)
endif()
add_test(NAME report_run_aborted
         COMMAND ${TB_TEST_DIR}/expect_fail.sh "NaN/Inf"
                 sh -c "rm -f report_aborted.h5 && exec \"$0\" \"$@\""
                 ${TB_BIN} ${TB_REPORT_RUN} --results report_aborted.h5)
set_tests_properties(report_run_aborted PROPERTIES TIMEOUT 300 ENVIRONMENT "TB_TEST_FAULT=nan:0:3"
                     FIXTURES_SETUP report_aborted)

# the checks
function(tb_report_test name fixtures)
  add_test(NAME ${name} COMMAND ${TB_REPORT_PY} ${ARGN} --trainbench ${TB_BIN}
                                --plot ${PROJECT_SOURCE_DIR}/bench/plot_results.py)
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 FIXTURES_REQUIRED "${fixtures}")
endfunction()
tb_report_test(report_md_np1 report_np1 md report_np1.h5)
tb_report_test(report_md_${TB_REPORT_BN} report_b md ${TB_REPORT_B}.h5)
tb_report_test(report_csv report_b csv ${TB_REPORT_B}.h5)
tb_report_test(report_text_np1 report_np1 text report_np1.h5 report_np1.log)
tb_report_test(report_text_${TB_REPORT_BN} report_b text ${TB_REPORT_B}.h5 ${TB_REPORT_B}.log)
tb_report_test(report_compare "report_np1;report_b" compare report_np1.h5 ${TB_REPORT_B}.h5 ${TB_REPORT_DIFF})
tb_report_test(report_aborted report_aborted aborted report_aborted.h5)
tb_report_test(report_errors report_np1 errors report_np1.h5)
tb_report_test(report_generic_groups report_b generic ${TB_REPORT_B}.h5)
tb_report_test(plot_results "report_np1;report_b" plot report_np1.h5 ${TB_REPORT_B}.h5)

# loader-bench --results: a kind=loader-bench file that report prints whole
# (exit 0) and the plot script turns into loader throughput against threads
if(TB_PYTHON)  # the plot half needs matplotlib's interpreter
  add_test(NAME loader_bench_results
           COMMAND sh -c "rm -rf lb_data lb.h5 lb_plots && \"$0\" mkdata --out lb_data --classes 3 --per-class 8 --min-side 96 --max-side 128 >/dev/null && \"$0\" loader-bench --data lb_data --threads 1,2 --batch-size 4 --batches 4 --warmup 1 --image-size 64 --results lb.h5 >/dev/null && \"$0\" report lb.h5 | tee lb_report.txt | grep -q '/loader (2 rows)' && grep -q 'kind *loader-bench' lb_report.txt && \"$1\" \"$2\" lb.h5 --out lb_plots && test -s lb_plots/lb_loader.png"
                   ${TB_BIN} ${TB_PYTHON} ${PROJECT_SOURCE_DIR}/bench/plot_results.py)
  set_tests_properties(loader_bench_results PROPERTIES TIMEOUT 300)
endif()

# a run whose steps all fell within --warmup-steps has no timed /ranks row
# and no /scaling: the plot script draws the loss alone and says why the
# others are left out (it ended in a traceback), and a path that is not a
# results file is one line naming it
if(TB_PYTHON)
  add_test(NAME plot_results_untimed_run
           COMMAND sh -c "rm -rf pu.h5 pu_plots pu.log && \"$0\" --image-size 32 --batch-size 2 --steps 2 --warmup-steps 5 --scaling-steps 0 --threads 1 --results pu.h5 >/dev/null && \"$1\" \"$2\" pu.h5 --out pu_plots > pu.log 2>&1; rc=$?; cat pu.log; test $rc = 0 && test \"$(ls pu_plots)\" = pu_loss.png && grep -q 'pu.h5: no timed /ranks rows' pu.log && ! \"$1\" \"$2\" pu_plots --out pu_plots2 > pu.log 2>&1 && test \"$(cat pu.log)\" = \"plot_results.py: pu_plots: is a directory; name a results file in it (a run's --results FILE)\""
                   ${TB_BIN} ${TB_PYTHON} ${PROJECT_SOURCE_DIR}/bench/plot_results.py)
  set_tests_properties(plot_results_untimed_run PROPERTIES TIMEOUT 300)
endif()

# report A B with no scaling row in both says so under the empty table (it
# printed the table's head alone)
add_test(NAME report_compare_no_common_rows
         COMMAND sh -c "rm -f nc_a.h5 && \"$0\" --image-size 32 --batch-size 2 --steps 1 --warmup-steps 0 --scaling-steps 0 --threads 1 --results nc_a.h5 >/dev/null && \"$0\" report nc_a.h5 nc_a.h5 | grep '^# no scaling row in both: A has 0, B 0 (a run given --scaling-steps 0, or an aborted one, has none)$'"
                 ${TB_BIN})
set_tests_properties(report_compare_no_common_rows PROPERTIES TIMEOUT 120)

# report A B of two loader-bench files compares their /loader rows by thread
# count (threads 1,2 against 2,4: the row of 2 threads in both), not the
# training tables they do not have
add_test(NAME report_loader_compare
         COMMAND sh -c "rm -rf lbc_data lbc_a.h5 lbc_b.h5 && \"$0\" mkdata --out lbc_data --classes 2 --per-class 6 --min-side 48 --max-side 64 >/dev/null && \"$0\" loader-bench --data lbc_data --threads 1,2 --batch-size 4 --batches 3 --warmup 1 --image-size 32 --results lbc_a.h5 >/dev/null && \"$0\" loader-bench --data lbc_data --threads 2,4 --batch-size 4 --batches 3 --warmup 1 --image-size 32 --results lbc_b.h5 >/dev/null && \"$0\" report lbc_a.h5 lbc_b.h5 --format csv | tee lbc_report.txt | grep -q '^# loader rows measured in both' && test \"$(grep -c '^[124],' lbc_report.txt)\" = 1 && grep -q '^2,' lbc_report.txt && ! grep -q 'training run' lbc_report.txt"
                 ${TB_BIN})
set_tests_properties(report_loader_compare PROPERTIES TIMEOUT 300)

# --scaling-min-seconds: a row still short after --scaling-steps runs on, the
# same number of steps on every rank (one all-reduce of the row's length),
# until it lasts that long -- on CUDA by default 1.25 s, so NVML's GPU-Util
# speaks for the row (the H200 run's 0.11-s row read 0 %). Here on the CPU:
# 1 step (0.1-0.5 s, ASan included) and a 3-s minimum give more than 1
# timed step in both rows; 0 gives exactly 1.
if(TB_HAVE_MPI)
  add_test(NAME scaling_min_seconds_np2
           COMMAND sh -c "\"$0\" \"$@\" --scaling-min-seconds 3 > scaling_min.log && grep '^# scaling row' scaling_min.log && test \"$(grep -cE '^# scaling row [12] of 2: .* over ([2-9]|[1-9][0-9]+) timed steps' scaling_min.log)\" -eq 2 && \"$0\" \"$@\" --scaling-min-seconds 0 > scaling_min0.log && grep '^# scaling row' scaling_min0.log && test \"$(grep -cE '^# scaling row [12] of 2: .* over 1 timed step ' scaling_min0.log)\" -eq 2"
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${TB_BIN} ${TB_REPORT_RUN} --steps 2 --scaling-steps 1
                   --results=)
  set_tests_properties(scaling_min_seconds_np2 PROPERTIES TIMEOUT 300 PROCESSORS 2
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
endif()

# report and project on odd input (fabric files of nonsense values, --set
# batch=inf, files of other commands, an aborted run, a missing column or
# attribute, a run with no timed step): one error line, or a result with a
# note, never nan, inf or a 20-digit figure
if(TB_PYTHON)
  add_test(NAME report_project_odd_inputs
           COMMAND sh ${TB_TEST_DIR}/report_project_odd_inputs.sh ${TB_BIN} ${TB_PYTHON} ${TB_REPORT_B}.h5)
  set_tests_properties(report_project_odd_inputs PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
                       FIXTURES_REQUIRED report_b)
endif()

# report A B on pairs of each kind (stored loader-feed and projection files,
# allreduce-bench and loader-bench sweeps, edited copies of a run): the
# tables both have row by row, a note where no row matched, the rows only
# one file has, the workload note
if(TB_PYTHON)
  add_test(NAME report_pairs
           COMMAND sh ${TB_TEST_DIR}/report_pairs.sh ${TB_BIN} ${TB_PYTHON} ${TB_REPORT_B}.h5 ${PROJECT_SOURCE_DIR})
  set_tests_properties(report_pairs PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 FIXTURES_REQUIRED report_b)
endif()

# bench/plot_results.py on odd input (files of one name from two folders,
# /scaling without ranks, nan and inf points, files of kinds it does not
# draw): a plot per file, or one line saying what is left out; no traceback
if(TB_PYTHON)
  add_test(NAME plot_results_odd_inputs
           COMMAND ${TB_PYTHON} ${TB_TEST_DIR}/plot_odd_inputs.py ${TB_REPORT_B}.h5
                   --plot ${PROJECT_SOURCE_DIR}/bench/plot_results.py --trainbench ${TB_BIN}
                   --source ${PROJECT_SOURCE_DIR})
  set_tests_properties(plot_results_odd_inputs PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180 FIXTURES_REQUIRED report_b)
endif()

# report A B's list of the convolutions that ran another engine or algorithm
# (/conv_algorithms, a row per part), on stored H200 runs: two repeats that
# read the plan cache (none), a week apart (most), --fuse graph against plain
# (every one, the fused parts); against an independent reading of the two
# tables; an engine, the times only, a batch size, a dropped line planted in
# copies. report RUN's per-rank lists: four planted ranks, no rank 0 row, a
# stored 2-rank H100 run (tests/check_report_convs.py)
if(TB_PYTHON)
  add_test(NAME report_conv_choices
           COMMAND ${TB_PYTHON} ${TB_TEST_DIR}/check_report_convs.py --trainbench ${TB_BIN}
                   --results ${PROJECT_SOURCE_DIR}/results)
  set_tests_properties(report_conv_choices PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
