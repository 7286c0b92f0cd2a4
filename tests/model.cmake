# Model tests without PyTorch: tables vs torchvision counts, init statistics,
# gradient-arena plan, fused vs unfused graph, checkpoint round trip, and
# one-line errors for bad input.
add_executable(test_model test_model.c)
target_link_libraries(test_model PRIVATE tb_app)
add_test(NAME model_unit COMMAND test_model)

add_executable(tb_ckpt_copy tb_ckpt_copy.c)
target_link_libraries(tb_ckpt_copy PRIVATE tb_app)

add_executable(test_cli_errors test_cli_errors.c)
target_link_libraries(test_cli_errors PRIVATE tb_app)
add_test(NAME cli_bad_input COMMAND test_cli_errors $<TARGET_FILE:trainbench>)
set_tests_properties(model_unit cli_bad_input PROPERTIES TIMEOUT 600)
# each flag's help states its default once (a default said in words, not also the not-set value)
add_test(NAME cli_help_defaults COMMAND sh ${PROJECT_SOURCE_DIR}/tests/help_defaults.sh $<TARGET_FILE:trainbench>)
set_tests_properties(cli_help_defaults PROPERTIES TIMEOUT 60)

# core/: abort cleanups (ncclCommAbort's slot) run before the job ends
find_package(Threads REQUIRED) # the trap test runs a second thread
add_executable(test_core test_core.c)
target_link_libraries(test_core PRIVATE tb_core Threads::Threads)
add_test(NAME core_abort_cleanups COMMAND test_core)
# the host memory still free (core/host_memory.c) on made-up /proc and
# cgroup trees: MemAvailable, cgroup v2 and v1 limits, the verdict
add_executable(test_host_memory test_host_memory.c)
target_link_libraries(test_host_memory PRIVATE tb_core)
add_test(NAME host_memory_unit COMMAND test_host_memory)
# core/cpu_features: CPUID + XGETBV against the kernel's /proc/cpuinfo flags
add_executable(test_cpu_features test_cpu_features.c)
target_link_libraries(test_cpu_features PRIVATE tb_core)
add_test(NAME core_cpu_features COMMAND test_cpu_features)

# The GPU work's host side, on every machine: layout math and 16-bit formats,
# the CPU convert / input ops, step scalars, CPU events, the arena plan, and
# in a CUDA build the cuDNN descriptor shapes and device discovery.
add_executable(test_cuda_host test_cuda_host.c test_cuda_host_descs.c test_cuda_host_kernels.c)  # CUDA build checks in the two others
target_link_libraries(test_cuda_host PRIVATE tb_app)
if(TARGET tb_cuda)
  target_compile_definitions(test_cuda_host PRIVATE TB_HAVE_CUDA=1)
endif()
add_test(NAME cuda_host COMMAND test_cuda_host)
set_tests_properties(cuda_host PROPERTIES TIMEOUT 300)

# --fuse graph without a GPU: the fused graphs' descriptions (and, in a CUDA
# build, their lowering to cuDNN descriptors), planted errors, the schedule;
# then the fused step on the CPU twins against the unfused one and the
# fallback rules, in float32 (the loss) and in float64 (everything, 1e-6:
# the model and CPU sources with tb_real = double, as trainbench_fp64)
add_executable(test_fused_host test_fused_host.c)
target_link_libraries(test_fused_host PRIVATE tb_model)
if(TARGET tb_cuda)
  target_compile_definitions(test_fused_host PRIVATE TB_HAVE_CUDA=1)
endif()
add_test(NAME fused_host COMMAND test_fused_host)
add_executable(test_fused_step test_fused_step.c)
target_link_libraries(test_fused_step PRIVATE tb_model)
add_test(NAME fused_step COMMAND test_fused_step)
set_tests_properties(fused_host fused_step PROPERTIES TIMEOUT 300)
# --fuse fastest from the command line on the CPU: ResNet-18's 8 folds
# timed, then the BNs on their conv's statistics (how many depends on the
# folds kept: real times decide here), the lines that say so, the summary
# after them, and a training that ends well; a --fuse word that is none of
# the five is refused with them all
add_test(NAME fuse_fastest_cli COMMAND ${TB_TEST_DIR}/expect_pass.sh
  "^# fuse fastest: 8 folds timed, .* \\(forward \\+ backward at batch 2; [1-8] problems, 0 of them from the plan cache\\): [0-8] applied instead"
  "^# fuse fastest: [0-9]+ BatchNorms timed on their conv's statistics and unfused"
  "^# fuse graph: [0-9]+ of 20 BatchNorms on conv statistics: [0-8] folded" "^# training: 2 steps, loss"
  -- $<TARGET_FILE:trainbench> train --backend cpu --synthetic --steps 2 --batch-size 2 --image-size 32 --threads 2
  --scaling-steps 0 --results= --fuse fastest)
add_test(NAME fuse_word_refused COMMAND ${TB_TEST_DIR}/expect_fail.sh
  "^trainbench: error: train: --fuse expects one of auto\\|fastest\\|graph\\|bn\\|off, got 'fast'$"
  $<TARGET_FILE:trainbench> train --backend cpu --synthetic --steps 1 --fuse fast)
set_tests_properties(fuse_fastest_cli fuse_word_refused PROPERTIES TIMEOUT 120)
if(TB_FP64)
  add_executable(test_fused_step_fp64 test_fused_step.c ${TB_CPU_SOURCES} ${TB_MODEL_SOURCES})
  target_compile_definitions(test_fused_step_fp64 PRIVATE TB_REAL_DOUBLE=1)
  tb_dispatch_sources(TARGET test_fused_step_fp64 SOURCES ${TB_CPU_KERN_SOURCE} DEFINITIONS TB_REAL_DOUBLE=1
                      LIBS OpenMP::OpenMP_C)
  target_include_directories(test_fused_step_fp64 PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(test_fused_step_fp64 PRIVATE tb_core tb_blas OpenMP::OpenMP_C ${TB_LIBM})
  add_test(NAME fused_step_fp64 COMMAND test_fused_step_fp64)
  set_tests_properties(fused_step_fp64 PROPERTIES TIMEOUT 300)
endif()

# --plan-cache (model/plan_cache.c) on the host: keys, atomic write, every
# kind of corruption rebuilt with one line, merge, the lock's wait limit; then
# four ranks under mpirun meeting through the file: one plans, three load
add_executable(test_plan_cache test_plan_cache.c)
target_link_libraries(test_plan_cache PRIVATE tb_model)
add_test(NAME plan_cache COMMAND test_plan_cache)
set_tests_properties(plan_cache PROPERTIES TIMEOUT 120)
if(TB_HAVE_MPI)
  add_test(NAME plan_cache_ranks_np4
           COMMAND sh -c "rm -rf plan_cache_ranks && \"$0\" -n 4 \"$1\" rank plan_cache_ranks 20 && \"$1\" check plan_cache_ranks 4 20"
                   ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:test_plan_cache>)
  # as comm.cmake's TB_MPI_TEST_ENV (included after this file): root, oversubscribed
  set_tests_properties(plan_cache_ranks_np4 PROPERTIES TIMEOUT 120 PROCESSORS 2 ENVIRONMENT
                       "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe")
endif()
