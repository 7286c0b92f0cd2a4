# tests/nccl_host.cmake: issue 26's host tests of the NCCL >= 2.30 set-up
# for two ranks on one GPU (no GPU needed; a few seconds each):
#   slim_nccl_script   tests/gpu/slim_nccl.sh's argument handling and its
#                      whole flow on a fake NCCL source tree and toolkit
#                      (tests/gpu/test_slim_nccl.sh)
#   nccl_bundle_order  the GPU bundle loads a slim NCCL ahead of PyTorch's,
#                      with two stand-in libnccl.so.2 (tests/gpu/nccl_stub.c,
#                      tests/gpu/test_bundle_env.sh)
#   nccl_calls         comm_nccl.c's calls on a communicator never overlap
#                      across threads (the watchdog's poll and the trainer's),
#                      against stand-ins of NCCL and the CUDA runtime
#                      (tests/test_nccl_calls.c)
add_test(NAME slim_nccl_script COMMAND sh ${TB_TEST_DIR}/gpu/test_slim_nccl.sh ${TB_TEST_DIR}/gpu/slim_nccl.sh)
set_tests_properties(slim_nccl_script PROPERTIES TIMEOUT 120)
if(TB_HAVE_NCCL)
  foreach(v new old)
    if(v STREQUAL new)
      set(_tb_code 23007)
      set(_tb_ver 2.30.7)
    else()
      set(_tb_code 22809)
      set(_tb_ver 2.28.9)
    endif()
    add_library(nccl_stub_${v} SHARED gpu/nccl_stub.c)
    target_include_directories(nccl_stub_${v} PRIVATE ${TB_NCCL_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
    target_compile_definitions(nccl_stub_${v} PRIVATE TB_STUB_NCCL_VERSION=${_tb_code})
    set_target_properties(nccl_stub_${v} PROPERTIES OUTPUT_NAME nccl VERSION ${_tb_ver} SOVERSION 2
                          LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/nccl_stub_${v})
  endforeach()
  add_test(NAME nccl_bundle_order
           COMMAND sh ${TB_TEST_DIR}/gpu/test_bundle_env.sh ${TB_BIN} $<TARGET_FILE_DIR:nccl_stub_new>
                   $<TARGET_FILE_DIR:nccl_stub_old>)
  set_tests_properties(nccl_bundle_order PROPERTIES TIMEOUT 120)
  # comm_nccl.c against stand-ins of NCCL and the CUDA runtime (in the test):
  # the watchdog's polls never overlap the trainer's calls on a communicator
  add_executable(test_nccl_calls test_nccl_calls.c ${PROJECT_SOURCE_DIR}/comm/comm_nccl.c
                 ${PROJECT_SOURCE_DIR}/comm/nccl_bounded.c ${PROJECT_SOURCE_DIR}/comm/comm_single.c)
  target_include_directories(test_nccl_calls PRIVATE ${PROJECT_SOURCE_DIR} ${TB_NCCL_INCLUDE}
                             ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(test_nccl_calls PRIVATE tb_core Threads::Threads ${CMAKE_DL_LIBS})
  add_test(NAME nccl_calls COMMAND test_nccl_calls)
  set_tests_properties(nccl_calls PROPERTIES TIMEOUT 120)
else()
  add_test(NAME nccl_bundle_order COMMAND sh -c "echo 'SKIP: this build has no NCCL (nothing to load)'; exit 77")
  set_tests_properties(nccl_bundle_order PROPERTIES SKIP_RETURN_CODE 77)
endif()
