# tests/fuzz.cmake: the fuzz targets of tests/fuzz/ and their tests (label
# "fuzz"). Included by tests/CMakeLists.txt (TB_TEST_DIR).
#   fuzz_replay_jpeg        every build (gcc too): each target run once on each
#   fuzz_replay_ckpt        committed seed of tests/fuzz/corpus/<target> by
#   fuzz_replay_batchfile   replay_main.c; seeds named ok-* must be accepted,
#                           bad-* rejected; the checkpoint replay also loads a
#                           real ~90 MB checkpoint written by tb_ckpt_save
#   fuzz_jpeg               TB_FUZZ=ON (clang) only: libFuzzer for
#   fuzz_ckpt               TB_FUZZ_SECONDS each, starting from the committed
#   fuzz_batchfile          corpus; fails on any crash, sanitizer report, leak,
#                           timeout or out-of-memory (run_fuzzer.sh)
# Targets: fuzz_jpeg.c (JPEG decode + train/eval transform), fuzz_ckpt.c
# (tb_ckpt_read_meta, tb_ckpt_require_match, tb_ckpt_load), fuzz_batchfile.c
# (tb_batchfile_read). Seeds: tests/fuzz/make_corpus.py.
set(TB_FUZZ_SECONDS 60 CACHE STRING "Seconds each libFuzzer test (ctest -L fuzz) runs its target")
set(_tb_fuzz_dir ${TB_TEST_DIR}/fuzz)
if(TB_FUZZ)
  find_program(TB_FUZZ_PYTHON NAMES python3 REQUIRED)  # runs run_fuzzer.py (standard library only)
endif()
set(_tb_fuzz_work ${CMAKE_CURRENT_BINARY_DIR}/fuzz_work)

add_library(tb_fuzz_common STATIC fuzz/fuzz_common.c fuzz/h5_build.c)
target_link_libraries(tb_fuzz_common PUBLIC tb_app)

add_executable(fuzz_make_ckpt fuzz/make_ckpt.c)
target_link_libraries(fuzz_make_ckpt PRIVATE tb_app)
add_test(NAME fuzz_make_real_ckpt
         COMMAND fuzz_make_ckpt ${_tb_fuzz_work}/ok-real-resnet18.h5)
set_tests_properties(fuzz_make_real_ckpt PROPERTIES
  FIXTURES_SETUP tb_fuzz_real_ckpt LABELS "fuzz" TIMEOUT 300)
file(MAKE_DIRECTORY ${_tb_fuzz_work})

# Everything the fuzz tests run: cmake --build B --target fuzz_all
add_custom_target(fuzz_all)
add_dependencies(fuzz_all fuzz_make_ckpt)

# target name -> source (the _gen targets: the same source, structure-aware)
foreach(t jpeg ckpt ckpt_gen batchfile batchfile_gen)
  string(REGEX REPLACE "_gen$" "" _src ${t})
  set(_defs "")
  if(t MATCHES "_gen$")
    set(_defs FZ_STRUCTURED)
  endif()
  add_executable(fuzz_${t}_replay fuzz/fuzz_${_src}.c fuzz/replay_main.c)
  target_link_libraries(fuzz_${t}_replay PRIVATE tb_fuzz_common)
  target_compile_definitions(fuzz_${t}_replay PRIVATE ${_defs})
  add_dependencies(fuzz_all fuzz_${t}_replay)
  set(_extra "")
  if(t STREQUAL "ckpt")
    set(_extra ${_tb_fuzz_work}/ok-real-resnet18.h5)
  endif()
  add_test(NAME fuzz_replay_${t} COMMAND fuzz_${t}_replay ${_tb_fuzz_dir}/corpus/${t} ${_extra})
  set_tests_properties(fuzz_replay_${t} PROPERTIES LABELS "fuzz" TIMEOUT 300
    ENVIRONMENT "LSAN_OPTIONS=suppressions=${_tb_fuzz_dir}/lsan.supp:print_suppressions=0")

  if(TB_FUZZ)
    add_executable(fuzz_${t} fuzz/fuzz_${_src}.c)
    target_link_libraries(fuzz_${t} PRIVATE tb_fuzz_common)
    target_compile_definitions(fuzz_${t} PRIVATE ${_defs})
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    add_dependencies(fuzz_all fuzz_${t})
    set(_third "")
    if(t STREQUAL "ckpt" OR t STREQUAL "batchfile")
      set(_third --third-party libhdf5)  # raw bytes: libhdf5's own parser crashes are listed
    endif()
    add_test(NAME fuzz_${t}
             COMMAND ${TB_FUZZ_PYTHON} ${_tb_fuzz_dir}/run_fuzzer.py $<TARGET_FILE:fuzz_${t}>
                     ${_tb_fuzz_dir}/corpus/${t} ${TB_FUZZ_SECONDS} ${_tb_fuzz_work}/${t} ${_third})
    math(EXPR _timeout "${TB_FUZZ_SECONDS} + 120")
    set_tests_properties(fuzz_${t} PROPERTIES LABELS "fuzz" TIMEOUT ${_timeout})
  endif()
endforeach()
set_tests_properties(fuzz_replay_ckpt PROPERTIES FIXTURES_REQUIRED tb_fuzz_real_ckpt)
