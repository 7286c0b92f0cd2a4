# trainbench probe, NVML and the version checks. Host tests run everywhere;
# probe_gpu (label gpu) measures a real GPU and skips visibly without one.
add_executable(test_gpu_versions test_gpu_versions.c)
target_link_libraries(test_gpu_versions PRIVATE tb_app)
add_test(NAME probe_versions_unit COMMAND test_gpu_versions)

# NVML against a stand-in libnvidia-ml.so.1 (tests/nvml/fake_nvml.c), found
# through LD_LIBRARY_PATH: dlopen, GPM, the sampler thread, without a driver
add_library(fake_nvml SHARED nvml/fake_nvml.c)
set_target_properties(fake_nvml PROPERTIES OUTPUT_NAME nvidia-ml SOVERSION 1
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_nvml)
target_compile_options(fake_nvml PRIVATE -Wno-unused-parameter)
add_executable(test_nvml nvml/test_nvml.c)
target_link_libraries(test_nvml PRIVATE tb_app)
add_dependencies(test_nvml fake_nvml)
add_test(NAME nvml_fake_library COMMAND test_nvml)
set_tests_properties(nvml_fake_library PROPERTIES
                     ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_nvml")

if(TB_PYTHON)
  set(TB_PROBE_PY ${TB_PYTHON} ${TB_TEST_DIR}/test_probe.py ${TB_BIN})
else()
  set(TB_PROBE_PY sh -c "echo 'SKIP: no python3 with h5py found at configure time'; exit 77" --)
endif()
add_test(NAME probe_command COMMAND ${TB_PROBE_PY})
add_test(NAME probe_gpu COMMAND ${TB_PROBE_PY} --gpu)
set_tests_properties(probe_command PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
set_tests_properties(probe_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600)

# cuBLAS loaded when a GPU path needs it, not at every start (core/cublas_lib.h):
# none at --version or on the CPU backend, probe says which file, a broken one
# first on LD_LIBRARY_PATH is one line (tests/cublas_on_demand.sh)
if(TB_PYTHON)
  add_test(NAME cublas_on_demand COMMAND sh ${TB_TEST_DIR}/cublas_on_demand.sh ${TB_BIN} ${TB_PYTHON})
  add_test(NAME cublas_on_demand_gpu COMMAND sh ${TB_TEST_DIR}/cublas_on_demand.sh ${TB_BIN} ${TB_PYTHON} --gpu)
  set_tests_properties(cublas_on_demand PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
  set_tests_properties(cublas_on_demand_gpu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS gpu)
endif()

# the scaling rows' device utilisation: NVML's median, none for a window too
# short for GPU-Util, the compute share without NVML
# the gradient timeline's medians leave out every untimed step of a row, a
# CUDA graph's capture included (test_bucket_profile.c)
add_executable(test_bucket_profile test_bucket_profile.c)
target_link_libraries(test_bucket_profile PRIVATE tb_app)
add_test(NAME bucket_profile_warmup COMMAND test_bucket_profile)
# the results file's hostnames and device_names lists (test_provenance.c)
add_executable(test_provenance test_provenance.c)
target_link_libraries(test_provenance PRIVATE tb_app)
add_test(NAME provenance_name_lists COMMAND test_provenance)
add_executable(test_scaling_util test_scaling_util.c)
target_link_libraries(test_scaling_util PRIVATE tb_app)
add_test(NAME scaling_util_rows COMMAND test_scaling_util)
