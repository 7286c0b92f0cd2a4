# Reliability (issue 7): killed, frozen and early-leaving ranks end the job
# within --timeout + a grace with a message on every other rank and an
# "aborted" results file; NaN stops with the step and tensor; --resume is
# exact; a kill during a checkpoint write leaves the previous one loadable.
# HDF5 from several threads (issue 12): the process-wide lock, the
# watchdog's bounded wait, results snapshots, exit waiting for a writer.
add_executable(test_h5_lock test_h5_lock.c)
target_link_libraries(test_h5_lock PRIVATE tb_app)
add_test(NAME h5_lock_threads COMMAND test_h5_lock)
set_tests_properties(h5_lock_threads PROPERTIES TIMEOUT 120)

foreach(mode killed frozen early nan resume ckptkill)
  add_test(NAME resilience_${mode}
           COMMAND ${TB_PY} ${TB_TEST_DIR}/test_resilience.py ${mode} --trainbench ${TB_BIN}
                   --mpiexec "${MPIEXEC_EXECUTABLE}" --ckpt-copy $<TARGET_FILE:tb_ckpt_copy>)
  set_tests_properties(resilience_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 PROCESSORS 3
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
endforeach()
