# The GPU gradient paths and the asynchronous step, their host side (issues
# 13 and 14): the asynchronous step run on the CPU backend (--step-mode
# async: events, records collected later, the device's non-finite flag,
# preset step scalars) against the synchronous one, bit for bit; the flags'
# refusals on every rank; the NCCL environment in the results file. The
# pure parts (bucket plan, device map, bf16 error) are in comm.cmake; the
# GPU checks in gpu/gpu.cmake.
# two runs compared with trainbench's own HDF5 reader (no h5py on the GPU machine)
add_executable(tb_run_compare tb_run_compare.c)
target_link_libraries(tb_run_compare PRIVATE tb_app)
set(TB_ASYNC ${TB_PY} ${TB_TEST_DIR}/test_async_step.py --trainbench ${TB_BIN}
    --compare $<TARGET_FILE:tb_run_compare>)
add_test(NAME async_step_np1 COMMAND ${TB_ASYNC})
add_test(NAME async_step_np1_nesterov_smoothing
         COMMAND ${TB_ASYNC} --extra "--nesterov --label-smoothing 0.1 --no-bn-decay --bucket-mb 0.5")
# --resident on (the synthetic pool in device memory, batches gathered
# there: the CUDA default) against batches from host memory
add_test(NAME resident_equals_host_np1 COMMAND ${TB_ASYNC} --mode resident --extra "--step-mode async")
set_tests_properties(async_step_np1 async_step_np1_nesterov_smoothing resident_equals_host_np1
                     PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
if(TB_HAVE_MPI)
  # uneven shards: rank 1 has no sample in the last step (keep), and a padded epoch
  add_test(NAME async_step_np2_keep_n0
           COMMAND ${TB_ASYNC} --mpiexec ${MPIEXEC_EXECUTABLE} --ranks 2 --last-batch keep --synthetic-size 5
                   --batch 2 --image-size 64 --steps 4)
  add_test(NAME async_step_np3_pad
           COMMAND ${TB_ASYNC} --mpiexec ${MPIEXEC_EXECUTABLE} --ranks 3 --last-batch pad --synthetic-size 7
                   --batch 2 --steps 5 --extra "--bucket-mb 1 --no-overlap")
  add_test(NAME resident_equals_host_np2_keep_n0
           COMMAND ${TB_ASYNC} --mode resident --mpiexec ${MPIEXEC_EXECUTABLE} --ranks 2 --last-batch keep
                   --synthetic-size 5 --batch 2 --image-size 64 --steps 4)
  set_tests_properties(async_step_np2_keep_n0 resident_equals_host_np2_keep_n0 PROPERTIES PROCESSORS 2)
  set_tests_properties(async_step_np3_pad PROPERTIES PROCESSORS 3)
  set_tests_properties(async_step_np2_keep_n0 async_step_np3_pad resident_equals_host_np2_keep_n0 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
  # NaN/Inf through the device flag: SGD skips the update, the record says
  # so, every rank stops at the step
  add_test(NAME async_step_nan_stops
           COMMAND ${TB_EXPECT_ALL} 2 "step 3: the summed gradients hold NaN/Inf \\(the device's check\\)"
                   ${MPIEXEC_EXECUTABLE} -n 2 -x TB_TEST_FAULT=nan:0:3 ${TB_BIN} --image-size 32 --batch-size 4
                   --steps 8 --warmup-steps 1 --scaling-steps 0 --threads 1 --print-every 5 --step-mode async
                   --results "")
  # refusals, one line on every rank
  add_test(NAME comm_nccl_needs_cuda
           COMMAND ${TB_EXPECT_ALL} 2 "--comm nccl needs the CUDA backend"
                   ${MPIEXEC_EXECUTABLE} -n 2 ${TB_BIN} --backend cpu --comm nccl --image-size 32 --batch-size 2
                   --steps 1 --scaling-steps 0 --threads 1 --results "")
  add_test(NAME allreduce_dtype_bf16_needs_gpu
           COMMAND ${TB_EXPECT_ALL} 2 "--allreduce-dtype bf16 is the GPU gradient path's compression hook"
                   ${MPIEXEC_EXECUTABLE} -n 2 ${TB_BIN} --backend cpu --allreduce-dtype bf16 --image-size 32
                   --batch-size 2 --steps 1 --scaling-steps 0 --threads 1 --results "")
  # PROCESSORS 1: ranks that stop at start-up or at the NaN, 0.2-0.7 cores
  # (tests/measure_processors.py)
  set_tests_properties(async_step_nan_stops comm_nccl_needs_cuda allreduce_dtype_bf16_needs_gpu PROPERTIES
                       TIMEOUT 300 PROCESSORS 1 ENVIRONMENT "${TB_MPI_TEST_ENV}")
endif()
add_test(NAME share_gpu_needs_comm_mpi
         COMMAND ${TB_TEST_DIR}/expect_fail.sh "--share-gpu needs --comm mpi" ${TB_BIN} --share-gpu --steps 1)
add_test(NAME cuda_graph_on_needs_a_stream
         COMMAND ${TB_TEST_DIR}/expect_fail.sh "--cuda-graph on: the step cannot be captured: the cpu backend has no CUDA stream"
                 ${TB_BIN} --backend cpu --cuda-graph on --image-size 32 --batch-size 2 --steps 1 --scaling-steps 0
                 --threads 1 --results "")
# allreduce-bench --comm nccl without a GPU (or without NCCL): one line
if(TB_HAVE_NCCL AND TB_HAVE_CUDA) # tb_gpu_check: tests/gpu/gpu.cmake
  add_test(NAME allreduce_bench_nccl_needs_gpu
           COMMAND sh -c "if \"$0\" >/dev/null 2>&1; then echo 'SKIP: a GPU is visible (allreduce_bench_nccl runs instead)'; exit 77; fi; exec \"$1\" \"allreduce-bench --comm nccl: --backend cuda: no usable CUDA device\" \"$2\" allreduce-bench --comm nccl -b 8 -e 8"
                   $<TARGET_FILE:tb_gpu_check> ${TB_TEST_DIR}/expect_fail.sh ${TB_BIN})
else()
  add_test(NAME allreduce_bench_nccl_needs_gpu
           COMMAND ${TB_TEST_DIR}/expect_fail.sh "allreduce-bench --comm nccl: this trainbench was built without NCCL"
                   ${TB_BIN} allreduce-bench --comm nccl -b 8 -e 8)
endif()
set_tests_properties(share_gpu_needs_comm_mpi cuda_graph_on_needs_a_stream
                     allreduce_bench_nccl_needs_gpu PROPERTIES
                     SKIP_RETURN_CODE 77 TIMEOUT 120)
# NCCL's environment is recorded in the results file: what is set, and
# which of the important variables are not (NCCL's defaults apply); and
# trainbench's own switches (TB_*: which kernels ran)
add_test(NAME nccl_env_recorded
         COMMAND env NCCL_DEBUG=WARN NCCL_IB_HCA=mlx5_0:1 NCCL_SOCKET_IFNAME=eth0 TB_BN_KERNELS=own ${TB_PY} -c
                 "import subprocess, sys, h5py; subprocess.run([sys.argv[1], '--backend', 'cpu', '--image-size', '32', '--batch-size', '2', '--steps', '1', '--warmup-steps', '0', '--scaling-steps', '0', '--threads', '1', '--results', 'nccl_env.h5'], check=True, capture_output=True); a = h5py.File('nccl_env.h5').attrs; s = lambda k: a[k].decode() if isinstance(a[k], bytes) else str(a[k]); env, unset, path, tbenv = s('nccl_environment'), s('nccl_environment_unset'), s('comm_path'), s('trainbench_environment'); print('nccl_environment:', env); print('unset:', unset); print('comm_path:', path); print('trainbench_environment:', tbenv); ok = all(x in env.split() for x in ('NCCL_DEBUG=WARN', 'NCCL_IB_HCA=mlx5_0:1', 'NCCL_SOCKET_IFNAME=eth0')) and 'NCCL_IB_HCA' not in unset and 'NCCL_NET_GDR_LEVEL' in unset and path == 'none' and 'TB_BN_KERNELS=own' in tbenv.split() and 'NCCL_DEBUG=WARN' not in tbenv; sys.exit(0 if ok else 1)"
                 ${TB_BIN})
set_tests_properties(nccl_env_recorded PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
# the comparison tool itself fails on runs that differ (one lr apart)
add_test(NAME run_compare_detects_difference
         COMMAND sh -c "for lr in 0.1 0.2; do \"$0\" --backend cpu --image-size 32 --batch-size 4 --steps 3 --warmup-steps 1 --scaling-steps 0 --threads 1 --lr $lr --save cmp_$lr.ckpt.h5 --results cmp_$lr.h5 >/dev/null 2>&1 || exit 1; done; exec \"$1\" 'differs: max' \"$2\" cmp_0.1.ckpt.h5 cmp_0.2.ckpt.h5 cmp_0.1.h5 cmp_0.2.h5"
                 ${TB_BIN} ${TB_TEST_DIR}/expect_fail.sh $<TARGET_FILE:tb_run_compare>)
set_tests_properties(run_compare_detects_difference PROPERTIES TIMEOUT 120)
# --tensor: one parameter alone (lr 0.1 against 0.11: ResNet-18's stem and its momentum have moved by more than
# 1e-9 of themselves; the same within 100 passes; a name no model has is an error)
add_test(NAME run_compare_one_tensor
         COMMAND sh -c "for lr in 0.1 0.11; do \"$0\" --backend cpu --image-size 32 --batch-size 4 --steps 3 --warmup-steps 1 --scaling-steps 0 --threads 1 --lr $lr --save one_$lr.ckpt.h5 --results one_$lr.h5 >/dev/null 2>&1 || exit 1; done; set -- \"$1\" \"$2\" one_0.1.ckpt.h5 one_0.11.ckpt.h5 one_0.1.h5 one_0.11.h5 --tolerance 100; \"$1\" 'conv1.weight: relative L2 difference .* above 1e-09' \"$2\" \"$3\" \"$4\" \"$5\" \"$6\" \"$7\" \"$8\" --tensor conv1.weight 1e-9 || exit 1; \"$1\" '--tensor conv9.weight: no such parameter' \"$2\" \"$3\" \"$4\" \"$5\" \"$6\" \"$7\" \"$8\" --tensor conv9.weight 1 || exit 1; \"$2\" \"$3\" \"$4\" \"$5\" \"$6\" \"$7\" \"$8\" --tensor conv1.weight 100"
                 ${TB_BIN} ${TB_TEST_DIR}/expect_fail.sh $<TARGET_FILE:tb_run_compare>)
set_tests_properties(run_compare_one_tensor PROPERTIES TIMEOUT 120)
# its phase-sum rule: float32 event rounding passes (the first GPU run's
# 131.120983 ms of phases in a 131.120980 ms step), a real overrun fails
add_test(NAME run_compare_phase_rule COMMAND tb_run_compare --self-test)
set_tests_properties(run_compare_phase_rule PROPERTIES TIMEOUT 60)
