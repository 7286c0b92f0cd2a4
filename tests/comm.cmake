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
