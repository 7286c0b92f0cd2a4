# tests/gpu/gpu.cmake: the CUDA backend's tests, label "gpu" (list and what
# each proves: tests/gpu/README.md). Without a visible device each prints why
# and exits 77, which ctest reports as skipped; in a build without the CUDA
# backend they are registered as skips that say so. The golden GPU cases are
# in tests/golden.cmake. Run them alone with: ctest --test-dir build -L gpu
set(TB_GPU_TESTS cuda_ops cuda_model mkdata_gpu train_cuda_bf16_mkdata train_cuda_bf16_loss_fell)
if(TARGET tb_cuda)
  add_executable(tb_gpu_check gpu/tb_gpu_check.c)
  target_link_libraries(tb_gpu_check PRIVATE tb_model)
  # sh gpu_run.sh CHECKER CMD...: CMD only when a device is visible, else exit 77
  set(TB_GPU_RUN sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu/gpu_run.sh $<TARGET_FILE:tb_gpu_check>)

  add_executable(test_cuda_ops test_cuda_ops.c)
  target_link_libraries(test_cuda_ops PRIVATE tb_model)
  add_test(NAME cuda_ops COMMAND test_cuda_ops)
  set_tests_properties(cuda_ops PROPERTIES TIMEOUT 900)

  add_executable(test_cuda_model test_cuda_model.c)
  target_link_libraries(test_cuda_model PRIVATE tb_model)
  add_test(NAME cuda_model COMMAND test_cuda_model)
  set_tests_properties(cuda_model PROPERTIES TIMEOUT 900)

  # bf16 training on a learnable mkdata set (one rank): the loss falls
  add_test(NAME mkdata_gpu
           COMMAND ${TB_GPU_RUN} sh -c "rm -rf mkdata_gpu && \"$0\" mkdata --out mkdata_gpu --classes 4 --per-class 24 --seed 3 --min-side 96 --max-side 160"
                   ${TB_BIN})
  set_tests_properties(mkdata_gpu PROPERTIES TIMEOUT 300 FIXTURES_SETUP mkdata_gpu)
  add_test(NAME train_cuda_bf16_mkdata
           COMMAND ${TB_GPU_RUN} ${TB_BIN} --backend cuda --precision bf16 --data mkdata_gpu
                   --image-size 64 --batch-size 16 --steps 40 --lr 0.4 --lr-warmup-steps 5
                   --warmup-steps 2 --scaling-steps 0 --loader-threads 2
                   --results train_cuda_bf16.h5)
  set_tests_properties(train_cuda_bf16_mkdata PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED mkdata_gpu
                       FIXTURES_SETUP cuda_bf16_results)
  if(TB_PYTHON)
    add_test(NAME train_cuda_bf16_loss_fell
             COMMAND ${TB_GPU_RUN} ${TB_PYTHON} ${TB_TEST_DIR}/check_results.py train_cuda_bf16.h5
                     --loss-falls 0.8)
  else()
    add_test(NAME train_cuda_bf16_loss_fell
             COMMAND sh -c "echo 'SKIP: no python3 with h5py'; exit 77")
  endif()
  set_tests_properties(train_cuda_bf16_loss_fell PROPERTIES FIXTURES_REQUIRED cuda_bf16_results)
else()
  foreach(t ${TB_GPU_TESTS})
    add_test(NAME ${t} COMMAND sh -c "echo 'SKIP: ${t}: this build has no CUDA backend (TB_CUDA=OFF or no toolkit)'; exit 77")
  endforeach()
endif()
set_tests_properties(${TB_GPU_TESTS} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
