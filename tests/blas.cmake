# The CPU backend's BLAS kernels (model/cpu/cpu_blas.h): which kernels
# OpenBLAS runs and who chose them, in probe, the train header, preflight and
# results files; trainbench's re-exec past a library that fell back to its
# generic kernels (emulated with TB_TEST_BLAS_FALLBACK=1); a user's
# OPENBLAS_CORETYPE and OPENBLAS_NUM_THREADS left alone; and the float32
# golden step under every kernel set this CPU can run (the library's own
# report of the kernels it loaded is checked on every step).
add_executable(test_cpu_blas test_cpu_blas.c)
target_link_libraries(test_cpu_blas PRIVATE tb_app)
add_test(NAME blas_kernels_rule COMMAND test_cpu_blas)

if(TB_PYTHON)
  add_test(NAME blas_kernels_choice COMMAND ${TB_PYTHON} ${TB_TEST_DIR}/test_blas_kernels.py ${TB_BIN}
           ${MPIEXEC_EXECUTABLE})
  set_tests_properties(blas_kernels_choice PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 PROCESSORS 1) # 1.22 cores
  # golden_fp32_resnet18's case and rule (golden.cmake), per kernel set, 2
  # of its 3 steps (teacher-forced: step 2 has the momentum, a third adds
  # CI time, not paths); a set this CPU cannot run skips with the reason
  foreach(k Prescott Haswell SkylakeX)
    string(TOLOWER ${k} _k)
    add_test(NAME golden_fp32_resnet18_blas_${_k}
      COMMAND sh ${TB_TEST_DIR}/blas_kernels_run.sh ${k} ${TB_BIN} ${TB_PYTHON} ${TB_TEST_DIR}/golden_step.py
              --trainbench ${TB_TEST_DIR}/trainbench_blas.sh ${_tb_r18} ${_tb_fp32} --steps 2
              --workdir ${_tb_golden_work}/fp32_resnet18_blas_${_k})
    set_tests_properties(golden_fp32_resnet18_blas_${_k} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
      LABELS "golden;python;blas" ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
  endforeach()
else()
  add_test(NAME blas_kernels_choice COMMAND sh -c "echo 'SKIP: no python3 with h5py found at configure time'; exit 77")
  set_tests_properties(blas_kernels_choice PROPERTIES SKIP_RETURN_CODE 77)
endif()
