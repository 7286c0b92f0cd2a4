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

# src/core/: abort cleanups (ncclCommAbort's slot) run before the job ends
find_package(Threads REQUIRED) # the trap test runs a second thread
add_executable(test_core test_core.c)
target_link_libraries(test_core PRIVATE tb_core Threads::Threads)
add_test(NAME core_abort_cleanups COMMAND test_core)
# src/core/cpu_features: CPUID + XGETBV against the kernel's /proc/cpuinfo flags
add_executable(test_cpu_features test_cpu_features.c)
target_link_libraries(test_cpu_features PRIVATE tb_core)
add_test(NAME core_cpu_features COMMAND test_cpu_features)

# The GPU work's host side, on every machine: layout math and 16-bit formats,
# the CPU convert / input ops, step scalars, CPU events, the arena plan, and
# in a CUDA build the cuDNN descriptor shapes and device discovery.
add_executable(test_cuda_host test_cuda_host.c)
target_link_libraries(test_cuda_host PRIVATE tb_app)
if(TARGET tb_cuda)
  target_compile_definitions(test_cuda_host PRIVATE TB_HAVE_CUDA=1)
endif()
add_test(NAME cuda_host COMMAND test_cuda_host)
set_tests_properties(cuda_host PROPERTIES TIMEOUT 300)
