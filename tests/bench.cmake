# tests/bench.cmake: the bench/ scripts that turn logs into figures and
# compare trainbench with PyTorch, on the CPU (CI). Included by
# tests/CMakeLists.txt (TB_TEST_DIR, TB_BIN).
#   results_summaries       bench/summary/make_summary.py on the stored GPU
#                           runs (results/gpu_*/): each summary.tsv is what
#                           its logs give, the headline figures in it, and
#                           the extractors on the bench's new row layout
#                           (tests/test_summary.py summaries, ~2 s)
#   results_pages_figures   bench/summary/check_pages.py: every rate and ratio
#                           the results/gpu_*.md pages quote is in the runs'
#                           summaries and divides out, every efficiency and
#                           share of the on-device rate is one of theirs (or
#                           of results/*.h5); planted errors (the 1.44x the
#                           H200 page once had for 6606 / 4279, a changed
#                           table cell, a changed rate, three changed
#                           percentages) fail (~4 s)
#   convergence_compare_rule bench/convergence.py --self-test: the curve
#                           comparison passes noise and fails an offset, a
#                           shifted schedule, a side that does not learn (~2 s)
#   convergence_cpu_resnet18 trainbench's CPU backend and PyTorch trained
#                           side by side, ResNet-18 at 32 px, batch 16, 60
#                           steps, the GPU bench row's schedule scaled to the
#                           batch (lr 0.1 per 256, warm-up, label smoothing
#                           0.1, zero-init residual): the lr of every step
#                           equal, the windowed loss curves within 0.05 + 0.1
#                           x PyTorch's, both falling (~20 s on 2 busy cores,
#                           14 s of CPU)
#   bench_row_budget        bench/gpu_resnet50.sh's row budget with a stand-in
#                           trainbench: rows of a shape whose plans are in the
#                           stage's cache start on the estimate a run of that
#                           shape measured, not their own (~15 s; the script
#                           before that estimate fails it: 2 of 6 rows ran)
# None of them is run under the sanitizers (.ci/run): no C code of their own
# but `trainbench train`, which the sanitizer suite runs elsewhere.
if(TB_PYTHON)
  set(_tb_bench_py ${TB_PYTHON})
else()
  set(_tb_bench_py sh -c "echo 'SKIP: no python3 with torch, torchvision, h5py and numpy found at configure time'; exit 77" --)
endif()
add_test(NAME results_summaries COMMAND ${_tb_bench_py} ${TB_TEST_DIR}/test_summary.py summaries)
add_test(NAME results_pages_figures COMMAND ${_tb_bench_py} ${TB_TEST_DIR}/test_summary.py pages)
add_test(NAME convergence_compare_rule COMMAND ${_tb_bench_py} ${PROJECT_SOURCE_DIR}/bench/convergence.py --self-test)
add_test(NAME convergence_cpu_resnet18
         COMMAND ${_tb_bench_py} ${PROJECT_SOURCE_DIR}/bench/convergence.py --trainbench ${TB_BIN}
                 --out ${CMAKE_CURRENT_BINARY_DIR}/convergence_cpu_resnet18 --model resnet18 --image-size 32
                 --batch 16 --steps 40 --pool 128 --threads 1 --lr 0.1 --lr-base-batch 256 --warmup-steps 10
                 --label-smoothing 0.1 --zero-init-residual --window 10 --bound-abs 0.05 --bound-rel 0.1 --no-plot)
# the same run with trainbench's label smoothing planted away (0 against
# PyTorch's 0.1): the windows must differ (a bound that can fail on real
# curves; Nesterov or weight decay x100 over 40 steps do not move the curves
# beyond it: the golden steps' exact update check holds those)
if(TB_PYTHON)
  add_test(NAME convergence_cpu_resnet18_catches
           COMMAND sh ${TB_TEST_DIR}/expect_fail.sh "windows: worst .*curves DIFFER"
                   ${TB_PYTHON} ${PROJECT_SOURCE_DIR}/bench/convergence.py --trainbench ${TB_BIN}
                   --out ${CMAKE_CURRENT_BINARY_DIR}/convergence_cpu_resnet18_catches --model resnet18 --image-size 32
                   --batch 16 --steps 40 --pool 128 --threads 1 --lr 0.1 --lr-base-batch 256 --warmup-steps 10
                   --label-smoothing 0.1 --zero-init-residual --window 10 --bound-abs 0.05 --bound-rel 0.1 --no-plot
                   --tb-arg=--label-smoothing --tb-arg=0)
else()
  add_test(NAME convergence_cpu_resnet18_catches COMMAND ${_tb_bench_py})
endif()
set_tests_properties(results_summaries results_pages_figures convergence_compare_rule convergence_cpu_resnet18
                     convergence_cpu_resnet18_catches
                     PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "bench;python"
                     ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
add_test(NAME bench_row_budget COMMAND sh ${TB_TEST_DIR}/bench_row_budget.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(bench_row_budget PROPERTIES TIMEOUT 120 LABELS "bench")
