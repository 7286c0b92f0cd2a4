# Communication tests: the bucketed all-reduce and the collectives, under
# mpirun with 1, 2 and 3 ranks (run directly when built without MPI).
add_executable(test_grad_sync test_grad_sync.c)
target_link_libraries(test_grad_sync PRIVATE tb_comm)

# Open MPI needs these to start ranks as root and more ranks than cores (CI
# runs as root on 2 cores); other MPIs ignore them.
set(TB_MPI_TEST_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_rmaps_base_oversubscribe=1 PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe)
if(TB_HAVE_MPI)
  foreach(np 1 2 3)
    add_test(NAME grad_sync_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                     $<TARGET_FILE:test_grad_sync> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(grad_sync_np${np} PROPERTIES TIMEOUT 300 ENVIRONMENT "${TB_MPI_TEST_ENV}"
                         PROCESSORS ${np})
  endforeach()
else()
  add_test(NAME grad_sync_np1 COMMAND test_grad_sync)
endif()

# Open MPI's shared-memory fragment for the sleep-polled all-reduce
# (comm/comm_mpi.c): 256 KiB unless the user set one, as the library reads it
if(TB_HAVE_MPI)
  add_executable(test_comm_env test_comm_env.c)
  target_link_libraries(test_comm_env PRIVATE tb_comm)
  add_test(NAME comm_env_vader_fragment
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:test_comm_env>)
  add_test(NAME comm_env_vader_fragment_user
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:test_comm_env>)
  set_tests_properties(comm_env_vader_fragment PROPERTIES TIMEOUT 120 PROCESSORS 2 SKIP_RETURN_CODE 77
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
  set_tests_properties(comm_env_vader_fragment_user PROPERTIES TIMEOUT 120 PROCESSORS 2 SKIP_RETURN_CODE 77
                       ENVIRONMENT "${TB_MPI_TEST_ENV};OMPI_MCA_btl_vader_max_send_size=65536;TB_WANT_MAX_SEND=65536")
endif()

# The device gradient path's pure parts (comm/bucket_plan.h, comm/device_map.h)
# and the bf16 compression hook's rounding and error, on the host.
add_executable(test_bucket_plan test_bucket_plan.c)
target_link_libraries(test_bucket_plan PRIVATE tb_comm tb_model)
add_test(NAME bucket_plan COMMAND test_bucket_plan)
add_executable(test_device_map test_device_map.c)
target_link_libraries(test_device_map PRIVATE tb_comm)
add_test(NAME device_map COMMAND test_device_map)
add_executable(test_bf16_allreduce test_bf16_allreduce.c)
target_link_libraries(test_bf16_allreduce PRIVATE tb_comm ${TB_LIBM})
add_test(NAME bf16_allreduce_error COMMAND test_bf16_allreduce)
set_tests_properties(bucket_plan device_map bf16_allreduce_error PROPERTIES TIMEOUT 300)
if(TB_HAVE_MPI)
  foreach(np 2 3)
    add_test(NAME bf16_allreduce_mpi_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                     $<TARGET_FILE:test_bf16_allreduce> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(bf16_allreduce_mpi_np${np} PROPERTIES TIMEOUT 300 ENVIRONMENT "${TB_MPI_TEST_ENV}"
                         PROCESSORS ${np})
  endforeach()
endif()

# The abort path's bounded wait for ncclCommAbort (comm/nccl.h,
# tb_nccl_run_bounded) on the host: a function that blocks for ever comes
# back after the bound, timed out; a quick one at once, done.
add_executable(test_nccl_bounded test_nccl_bounded.c)
target_link_libraries(test_nccl_bounded PRIVATE tb_comm)
add_test(NAME nccl_abort_bounded COMMAND test_nccl_bounded)
set_tests_properties(nccl_abort_bounded PROPERTIES TIMEOUT 120)

# --broadcast-buffers off: one broadcast fewer per step (MPI_Bcast bytes
# counted by a preloaded PMPI shim), the same checkpoint, recorded
if(TB_HAVE_MPI)
  add_library(tb_count_bcast SHARED count_bcast.c)
  target_link_libraries(tb_count_bcast PRIVATE MPI::MPI_C)
  add_test(NAME broadcast_buffers_off_np2
           COMMAND sh ${TB_TEST_DIR}/broadcast_buffers.sh ${TB_BIN} "${TB_PYTHON}" ${MPIEXEC_EXECUTABLE}
                   $<TARGET_FILE:tb_count_bcast>)
  set_tests_properties(broadcast_buffers_off_np2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                       ENVIRONMENT "${TB_MPI_TEST_ENV}" PROCESSORS 2)
endif()
