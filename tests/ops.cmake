# tests/ops.cmake: per-op checks of the CPU backend against double-precision
# references and finite differences (tests/test_cpu_ops.c).
add_executable(test_cpu_ops test_cpu_ops.c test_cpu_ops_layers.c)  # convs and BN; the other ops
target_link_libraries(test_cpu_ops PRIVATE tb_cpu)
add_test(NAME cpu_ops COMMAND test_cpu_ops)
set_tests_properties(cpu_ops PROPERTIES TIMEOUT 300)

# Buffer lifetimes and fresh-buffer reruns of every op in ResNet-50 steps,
# under several thread counts and conv cuts (tests/test_graph_buffers.c).
add_executable(test_graph_buffers test_graph_buffers.c test_graph_buffers_wrap.c)  # the op wrappers in the second
target_link_libraries(test_graph_buffers PRIVATE tb_model)
add_test(NAME graph_buffers COMMAND test_graph_buffers)
set_tests_properties(graph_buffers PROPERTIES TIMEOUT 900 ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")

# The conv's weight gradient on the backend's second queue (backend.h
# branch_*), its ops run early and late around the data gradient and, as a
# planted fault, after backward: the same training, every range final when
# the ready hook gets it (tests/test_graph_branch.c).
add_executable(test_graph_branch test_graph_branch.c)
target_link_libraries(test_graph_branch PRIVATE tb_model)
add_test(NAME graph_branch COMMAND test_graph_branch)
set_tests_properties(graph_branch PROPERTIES TIMEOUT 300 ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
