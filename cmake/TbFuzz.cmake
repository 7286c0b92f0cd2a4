# TB_FUZZ=ON: builds the libFuzzer targets of tests/fuzz (tests/fuzz.cmake).
# libFuzzer comes with clang only, so any other compiler stops the configure
# with a message. Every library is then compiled with coverage
# instrumentation (-fsanitize=fuzzer-no-link), so the fuzzer sees the edges
# of trainbench's own code, and with AddressSanitizer and
# UndefinedBehaviorSanitizer unless TB_SANITIZE names others.
# Sets TB_FUZZ_DESC and TB_SANITIZE_DESC for the configuration summary.
set(TB_FUZZ_DESC "off (TB_FUZZ=OFF)")
if(TB_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR
      "TB_FUZZ=ON needs clang (libFuzzer ships with it), but the C compiler is "
      "${CMAKE_C_COMPILER_ID} ${CMAKE_C_COMPILER_VERSION} (${CMAKE_C_COMPILER}). Use a fresh "
      "build directory with -DCMAKE_C_COMPILER=clang (Debian: apt-get install clang-14 "
      "libclang-rt-14-dev libomp-14-dev). The sanitizers alone work with gcc: "
      "-DTB_SANITIZE=address,undefined.")
  endif()
  if(NOT TB_SANITIZE)
    set(TB_SANITIZE address,undefined)
  endif()
  include(CheckCSourceCompiles)
  include(CMakePushCheckState)
  cmake_push_check_state(RESET)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,${TB_SANITIZE}")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=fuzzer,${TB_SANITIZE}")
  check_c_source_compiles([=[
    #include <stddef.h>
    #include <stdint.h>
    int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }
  ]=] TB_HAVE_LIBFUZZER)
  cmake_pop_check_state()
  if(NOT TB_HAVE_LIBFUZZER)
    message(FATAL_ERROR
      "TB_FUZZ=ON: ${CMAKE_C_COMPILER} cannot link a libFuzzer target with "
      "-fsanitize=fuzzer,${TB_SANITIZE}: the fuzzer and sanitizer runtimes are missing "
      "(Debian: apt-get install libclang-rt-14-dev, the version of your clang).")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=fuzzer-no-link>)
  set(TB_FUZZ_DESC "libFuzzer targets fuzz_jpeg, fuzz_ckpt, fuzz_batchfile (ctest -L fuzz)")
endif()
if(TB_SANITIZE)
  set(TB_SANITIZE_DESC "${TB_SANITIZE}")
else()
  set(TB_SANITIZE_DESC "none")
endif()
