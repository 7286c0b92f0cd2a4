# trainbench_fp64: the model, the CPU backend and the subcommands compiled
# with tb_real = double (TB_REAL_DOUBLE). Same sources, same CLI, same
# float32 files; only the arithmetic is double. The golden tests use it to
# prove the semantics against PyTorch float64, where float32 rounding (ReLU
# inputs within rounding of zero) would otherwise hide or fake differences.
# data/ and comm/ never see tb_real (batches are float32 host memory,
# collectives take a type tag), so their normal libraries are linked.
add_executable(trainbench_fp64
  ${TB_CPU_SOURCES} ${TB_MODEL_SOURCES} ${TB_APP_SOURCES} ${TB_PROBE_NONE_SOURCE}
  ${PROJECT_SOURCE_DIR}/src/cmd/main.c)
target_compile_definitions(trainbench_fp64 PRIVATE TB_REAL_DOUBLE=1)
# the CPU backend's inner loops in double, once per vector level
tb_dispatch_sources(TARGET trainbench_fp64 SOURCES ${TB_CPU_KERN_SOURCE} DEFINITIONS TB_REAL_DOUBLE=1
                    LIBS OpenMP::OpenMP_C)
target_include_directories(trainbench_fp64 PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(trainbench_fp64 PRIVATE tb_data tb_comm tb_core tb_hdf5 tb_blas
                      OpenMP::OpenMP_C ${TB_LIBM} ${CMAKE_DL_LIBS})
