# train --op-profile (model/op_profile.h, src/train/train_profile.c): the profiler
# on a step through every op kind (C, on the CPU backend), the whole train
# path with its tables and results groups checked against the graph, the
# asynchronous (event) step and the unfused graph, two ranks, the flag's
# refusal; and the PyTorch side of the GPU bench's comparison
# (bench/torch_resnet50.py --profile, its kernel-name mapping, the
# side-by-side table) on the CPU.
add_executable(test_op_profile test_op_profile.c)
target_link_libraries(test_op_profile PRIVATE tb_app)
add_test(NAME op_profile_unit COMMAND test_op_profile)
set_tests_properties(op_profile_unit PROPERTIES TIMEOUT 300)

set(TB_OPPROF ${TB_PY} ${TB_TEST_DIR}/test_op_profile.py --trainbench ${TB_BIN})
add_test(NAME op_profile_train_np1 COMMAND ${TB_OPPROF})
# the step the GPU runs (events, records collected later) and relu/add nodes;
# --cuda-graph auto: on the CPU the graph is off (no stream), and --cuda-graph
# on is refused there (cuda_graph_on_needs_a_stream), so the profiled steps'
# forced eager path with a live graph runs in the GPU suite (gpu.cmake)
add_test(NAME op_profile_train_async_nofuse
         COMMAND ${TB_OPPROF} --extra "--step-mode async --no-fuse --cuda-graph auto" --profile 3)
set_tests_properties(op_profile_train_np1 op_profile_train_async_nofuse PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
if(TB_HAVE_MPI)
  add_test(NAME op_profile_train_np2
           COMMAND ${TB_OPPROF} --mpiexec ${MPIEXEC_EXECUTABLE} --ranks 2)
  set_tests_properties(op_profile_train_np2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 PROCESSORS 2
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")
endif()
add_test(NAME op_profile_bad_value
         COMMAND ${TB_TEST_DIR}/expect_fail.sh "^trainbench: error: train: --op-profile expects an integer in \\[0, 100000\\], got '-1'$"
                 ${TB_BIN} --backend cpu --op-profile -1 --steps 1)
add_test(NAME op_profile_bad_word
         COMMAND ${TB_TEST_DIR}/expect_fail.sh "--op-profile expects an integer in \\[0, 100000\\], got 'five'"
                 ${TB_BIN} --backend cpu --op-profile five --steps 1)
set_tests_properties(op_profile_bad_value op_profile_bad_word PROPERTIES TIMEOUT 60)

# The PyTorch side (bench/torch_resnet50.py --profile, bench/op_kinds.py,
# bench/op_profile_compare.py): the kernel-name mapping on a fixed list of
# CUDA kernel names (from memory of H100/A100 traces: see op_kinds.py) and
# torch 1.13 CPU op names, trainbench's kinds all mapped; the profile and the
# side-by-side table on the CPU (skips without torch)
add_test(NAME op_kinds_mapping
         COMMAND ${TB_PY} ${CMAKE_SOURCE_DIR}/bench/op_kinds.py --self-test --repo ${CMAKE_SOURCE_DIR})
add_test(NAME torch_profile_cpu
         COMMAND ${TB_PY} ${TB_TEST_DIR}/test_torch_profile.py --trainbench ${TB_BIN} --repo ${CMAKE_SOURCE_DIR})
set_tests_properties(op_kinds_mapping torch_profile_cpu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# bench/resnet50_step_cost.py (the roofline model of docs/perf_review_resnet50.md):
# its layer list against torchvision's resnet50 counts (53 convs, forward
# MACs, trainable parameters), trainbench's fused step moving fewer bytes
# than PyTorch eager's, and every lever saving time in the model
add_test(NAME resnet50_step_cost_model
         COMMAND ${TB_PY} ${CMAKE_SOURCE_DIR}/bench/resnet50_step_cost.py --check)
set_tests_properties(resnet50_step_cost_model PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)
