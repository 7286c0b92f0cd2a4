# Emulated multi-host tests (tests/multihost/): network-namespace hosts on a
# bridge, Open MPI starting the remote ranks through `ip netns exec`. Root
# only; they skip (77) visibly elsewhere. RUN_SERIAL: they own the bridge
# tbbr0, the namespaces tbh1..tbhN and 10.212.0.0/24 while they run; across
# ctest runs and build trees a lock file serialises them (TB_MH_LOCK, waits
# up to 4 min, hence the timeout).
if(TB_HAVE_MPI)
  if(TB_PYTHON)
    set(TB_MH_PY ${TB_PYTHON})
  else()
    set(TB_MH_PY python3-with-h5py-not-found)
  endif()
  # launch/hostfile.sh --fabric tcp across 3 hosts: rank placement, preflight,
  # train, results file naming 3 distinct hosts
  add_test(NAME multihost_3hosts_train
           COMMAND sh ${TB_TEST_DIR}/multihost/run_test.sh ${TB_BIN} ${TB_MH_PY})
  # tc shaping bounds the all-reduce to the link rate; up/down leave nothing
  add_test(NAME multihost_shaped_link
           COMMAND sh ${TB_TEST_DIR}/multihost/test_shaped_link.sh ${TB_BIN})
  set_tests_properties(multihost_3hosts_train multihost_shaped_link PROPERTIES
                       SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 420
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
else()
  add_test(NAME multihost_3hosts_train COMMAND sh -c "echo 'SKIP: built without MPI'; exit 77")
  set_tests_properties(multihost_3hosts_train PROPERTIES SKIP_RETURN_CODE 77)
endif()
# delayq.py (hosts.sh --delay without sch_netem): its DELAY syntax and the
# packet ids it reads from nfnetlink_queue messages; no root needed
add_test(NAME multihost_delayq_parse
         COMMAND sh -c "command -v python3 >/dev/null 2>&1 || { echo 'SKIP: no python3'; exit 77; }; exec python3 \"$0\""
                 ${TB_TEST_DIR}/multihost/test_delayq.py)
set_tests_properties(multihost_delayq_parse PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)
