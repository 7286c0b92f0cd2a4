# Reliability (issue 7): killed, frozen and early-leaving ranks end the job
# within --timeout + a grace with a message on every other rank and an
# "aborted" results file; NaN stops with the step and tensor; --resume is
# exact; a kill during a checkpoint write leaves the previous one loadable.
foreach(mode killed frozen early nan resume ckptkill)
  add_test(NAME resilience_${mode}
           COMMAND ${TB_PY} ${TB_TEST_DIR}/test_resilience.py ${mode} --trainbench ${TB_BIN}
                   --mpiexec "${MPIEXEC_EXECUTABLE}" --ckpt-copy $<TARGET_FILE:tb_ckpt_copy>)
  set_tests_properties(resilience_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 PROCESSORS 3
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
endforeach()
