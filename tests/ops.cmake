# tests/ops.cmake: per-op checks of the CPU backend against double-precision
# references and finite differences (tests/test_cpu_ops.c).
add_executable(test_cpu_ops test_cpu_ops.c)
target_link_libraries(test_cpu_ops PRIVATE tb_cpu)
add_test(NAME cpu_ops COMMAND test_cpu_ops)
set_tests_properties(cpu_ops PROPERTIES TIMEOUT 300)
