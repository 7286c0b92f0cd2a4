# Launch mistakes (src/train/launch_check.c), each provoked for real: the run must
# end with its message on every rank and a non-zero exit. Plus preflight on
# a healthy launch and with a silent rank or a stuck all-reduce (test-only
# fault injection: TB_TEST_FAULT=hang-rollcall:R | hang-allreduce:R |
# hang-barrier:R).
add_test(NAME launch_singleton_trap COMMAND ${TB_TEST_DIR}/singleton_trap.sh ${TB_BIN})
set_tests_properties(launch_singleton_trap PROPERTIES TIMEOUT 120)
if(TB_HAVE_MPI)
  set(TB_EXPECT_ALL ${TB_TEST_DIR}/expect_all_ranks.sh)
  set(TB_PF preflight --bytes 4K --timeout 30)
  add_test(NAME launch_shared_device
           COMMAND ${TB_EXPECT_ALL} 2 "ranks 0 and 1 on .* share one device \\(cpus:0\\)"
                   ${MPIEXEC_EXECUTABLE} -n 2 --bind-to none taskset -c 0 ${TB_BIN} ${TB_PF})
  add_test(NAME launch_other_binary
           COMMAND sh -c "cp \"$0\" tb_other_binary && printf x >> tb_other_binary && exec \"$1\" 2 \"another trainbench binary\" \"$2\" -n 1 \"$0\" preflight --bytes 4K : -n 1 ./tb_other_binary preflight --bytes 4K"
                   ${TB_BIN} ${TB_EXPECT_ALL} ${MPIEXEC_EXECUTABLE})
  add_test(NAME launch_other_arguments
           COMMAND ${TB_EXPECT_ALL} 2 "was started as 'preflight --bytes 8K' but rank 0 as 'preflight --bytes 4K'; start every rank with the same arguments"
                   ${MPIEXEC_EXECUTABLE} -n 1 ${TB_BIN} preflight --bytes 4K : -n 1 ${TB_BIN} preflight --bytes 8K)
  # train beside preflight (MPMD): their collectives part ways after
  # MPI_Init, so it waited --timeout and named a broadcast; now named at once
  add_test(NAME launch_other_subcommand
           COMMAND ${TB_EXPECT_ALL} 2 "launch mistake: rank 1 runs 'trainbench preflight' but rank 0 runs 'trainbench train'"
                   ${MPIEXEC_EXECUTABLE} -n 1 ${TB_BIN} train --model resnet18 --image-size 32 --batch-size 2 --steps 1
                   --warmup-steps 0 --scaling-steps 0 --results tb_other_subcommand.h5 --timeout 600 :
                   -n 1 ${TB_BIN} preflight --bytes 4K --timeout 600)
  add_test(NAME launch_nccl_env_on_rank0_only
           COMMAND ${TB_EXPECT_ALL} 3 "NCCL_IB_HCA is set on rank 0 \\(mlx5_0\\) but not on rank 1"
                   ${MPIEXEC_EXECUTABLE} -n 1 env NCCL_IB_HCA=mlx5_0 ${TB_BIN} ${TB_PF} : -n 2 ${TB_BIN} ${TB_PF})
  # per-rank UCX_NET_DEVICES (each rank its closest NIC, as multi-rail
  # wrappers set it) is not a launch mistake
  add_test(NAME launch_per_rank_ucx_devices
           COMMAND ${TB_TEST_DIR}/expect_pass.sh "preflight: OK" --
                   ${MPIEXEC_EXECUTABLE} -n 1 env UCX_NET_DEVICES=mlx5_0:1 ${TB_BIN} ${TB_PF} : -n 1
                   env UCX_NET_DEVICES=mlx5_1:1 ${TB_BIN} ${TB_PF})
  # ranks whose --data resolves to different trees stop together, naming them
  add_test(NAME launch_different_data
           COMMAND ${TB_TEST_DIR}/different_data.sh ${TB_BIN} ${MPIEXEC_EXECUTABLE})
  # ranks on different devices (one CPU against two): the header and
  # preflight say so, and device_names lists each with its rank count
  add_test(NAME launch_mixed_devices
           COMMAND sh ${TB_TEST_DIR}/mixed_devices.sh ${TB_BIN} ${MPIEXEC_EXECUTABLE} "${TB_PYTHON}")
  set_tests_properties(launch_mixed_devices PROPERTIES TIMEOUT 120 PROCESSORS 2 SKIP_RETURN_CODE 77
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
  # the timed all-reduce follows an untimed warm-up (#wrong 0: its sums
  # did not leak into the timed one's inputs) and a barrier
  add_test(NAME preflight_np3
           COMMAND ${TB_TEST_DIR}/expect_pass.sh "#wrong 0" "preflight: OK"
                   "timed after an untimed warm-up all-reduce of the same size \\([0-9.]+ ms on the slowest rank"
                   -- ${MPIEXEC_EXECUTABLE} -n 3 ${TB_BIN} preflight --bytes 1M --timeout 30)
  # the environment block shows what the launch set (OMPI_MCA_btl here), and
  # trainbench's own Open MPI defaults on a line of their own, not as the
  # launch's (they read as if a script had set them)
  add_test(NAME preflight_env_as_launched
           COMMAND ${TB_TEST_DIR}/expect_pass.sh "^#   rank 1: OMPI_MCA_btl=self,vader,tcp$"
                   "^#   and trainbench's defaults, where the launch set none \\(every rank\\): OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 OMPI_MCA_btl_vader_max_send_size=262144"
                   -- ${MPIEXEC_EXECUTABLE} -n 2 -x OMPI_MCA_btl=self,vader,tcp ${TB_BIN} preflight --bytes 4K --timeout 30)
  add_test(NAME preflight_names_silent_rank
           COMMAND ${TB_TEST_DIR}/expect_fail.sh "rank 2 did not answer within 3 s"
                   ${MPIEXEC_EXECUTABLE} -n 3 -x TB_TEST_FAULT=hang-rollcall:2 ${TB_BIN} preflight --bytes 4K --timeout 3)
  add_test(NAME preflight_stuck_allreduce
           COMMAND ${TB_TEST_DIR}/expect_fail.sh "all-reduce of 4096 bytes did not finish within 3 s"
                   ${MPIEXEC_EXECUTABLE} -n 3 -x TB_TEST_FAULT=hang-allreduce:1 ${TB_BIN} preflight --bytes 4K --timeout 3)
  # a rank that stops between the warm-up and the timed all-reduce: the
  # barrier before the timer has the deadline too
  add_test(NAME preflight_stuck_barrier
           COMMAND ${TB_TEST_DIR}/expect_fail.sh "the barrier before the timed all-reduce did not complete within 3 s"
                   ${MPIEXEC_EXECUTABLE} -n 3 -x TB_TEST_FAULT=hang-barrier:1 ${TB_BIN} preflight --bytes 4K --timeout 3)
  set_tests_properties(launch_shared_device launch_other_binary launch_other_arguments launch_other_subcommand
                       launch_nccl_env_on_rank0_only launch_per_rank_ucx_devices launch_different_data preflight_np3
                       preflight_env_as_launched preflight_names_silent_rank
                       preflight_stuck_allreduce preflight_stuck_barrier
                       PROPERTIES TIMEOUT 120 ENVIRONMENT "${TB_MPI_TEST_ENV}")
  # a slot per rank: under ctest -j the 3-second deadlines must not race a
  # neighbouring test for the cores. The launch mistakes have none (the
  # default --timeout), and keep 0.1-0.9 cores busy (ranks that stop at
  # start-up, tests/measure_processors.py): one slot each.
  set_tests_properties(preflight_np3 preflight_names_silent_rank preflight_stuck_allreduce preflight_stuck_barrier
                       PROPERTIES PROCESSORS 3)
endif()
