# Launch scripts (launch/): the commands they build, their shell syntax, and
# a real run through launch/local.sh. The scripts' tests live in
# tests/multihost/ next to the emulated multi-host test.
set(TB_LAUNCH_DIR ${CMAKE_SOURCE_DIR}/launch)

# every --dry-run against its expected mpirun / srun line, -x exports of set
# (and only set) variables, printed line == what runs, refused input; sh -n
add_test(NAME launch_scripts_dry_run
         COMMAND sh ${TB_TEST_DIR}/multihost/test_launch_scripts.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(launch_scripts_dry_run PROPERTIES TIMEOUT 120)

# launch/install_gpu.sh's reading of the driver version (open and
# proprietary kernel modules, /sys, none)
add_test(NAME install_gpu_driver_version
         COMMAND sh ${TB_TEST_DIR}/test_install_gpu_driver.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(install_gpu_driver_version PROPERTIES TIMEOUT 60)

# shellcheck as POSIX sh, when installed
add_test(NAME launch_scripts_shellcheck
         COMMAND sh ${TB_TEST_DIR}/multihost/lint.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(launch_scripts_shellcheck PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# more --threads than the CPUs a rank may use: one warning line, and the
# results file records the threads that ran (taskset stands in for mpirun's
# default binding)
add_test(NAME launch_threads_over_affinity
         COMMAND sh ${TB_TEST_DIR}/multihost/test_threads_affinity.sh ${TB_BIN})
set_tests_properties(launch_threads_over_affinity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

if(TB_HAVE_MPI)
  # a real run through launch/local.sh: 2 ranks train and exit 0 (train
  # itself fails when the replicas differ), and the results file meets the
  # contract with the 1- and 2-rank scaling rows, whose gradient timeline
  # (/grad_ready, /buckets) holds the 2 timed steps of each, not the warm-up
  add_test(NAME launch_local_np2_train
           COMMAND sh ${TB_LAUNCH_DIR}/local.sh -n 2 -- ${TB_BIN} train --model resnet18 --image-size 32
                   --batch-size 4 --steps 2 --warmup-steps 1 --scaling-steps 2 --scaling-warmup 1
                   --threads 1 --loader-threads 1 --results launch_local_np2.h5)
  set_tests_properties(launch_local_np2_train PROPERTIES TIMEOUT 300 PROCESSORS 2
                       ENVIRONMENT "${TB_MPI_TEST_ENV}" FIXTURES_SETUP launch_local_results)
  add_test(NAME launch_local_np2_results
           COMMAND ${TB_PY} ${TB_TEST_DIR}/check_results.py launch_local_np2.h5 --ranks 1,2 --timeline-steps 2)
  set_tests_properties(launch_local_np2_results PROPERTIES SKIP_RETURN_CODE 77
                       FIXTURES_REQUIRED launch_local_results)
  # local.sh gives each rank cores of its own: preflight's cpus column shows
  # two different, bound sets (skipped on a 1-core machine, where it cannot)
  add_test(NAME launch_local_np2_binding
           COMMAND sh ${TB_TEST_DIR}/multihost/test_local_binding.sh ${TB_BIN})
  set_tests_properties(launch_local_np2_binding PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 PROCESSORS 2
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
endif()

# The README's commands against what runs them (.ci/run, launch/cuda-wheels.txt,
# the container recipes), the docs' links, measured figures, scripts run by
# their path, names (against this build's ctest list) and every --help flag of
# this build's trainbench, and a break of each
# kind planted in copies to show each is caught (tests/readme_commands.py;
# standard library only, < 1 s)
find_program(TB_PYTHON3_ANY NAMES python3)
if(TB_PYTHON3_ANY)
  add_test(NAME readme_commands
           COMMAND ${TB_PYTHON3_ANY} ${TB_TEST_DIR}/readme_commands.py --root ${CMAKE_SOURCE_DIR}
                   --build ${CMAKE_BINARY_DIR} check)
  add_test(NAME readme_commands_catches
           COMMAND ${TB_PYTHON3_ANY} ${TB_TEST_DIR}/readme_commands.py --root ${CMAKE_SOURCE_DIR}
                   --build ${CMAKE_BINARY_DIR} --self-test)
  set_tests_properties(readme_commands readme_commands_catches PROPERTIES TIMEOUT 60)
endif()
