# Runtime CPU dispatch of trainbench's own hot loops (core/cpu_dispatch.h).
#
# tb_dispatch_sources(TARGET t SOURCES a.c ... [DEFINITIONS d ...] [LIBS l ...])
# compiles each source once per vector level, into object libraries
# t_isa_baseline, t_isa_avx2, t_isa_avx512 whose objects go into t:
#   baseline  the compiler's x86-64 default (SSE2)
#   avx2      -mavx2 -mfma -mf16c (what tb_cpu_isa_best checks for avx2)
#   avx512    avx2's + -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512cd
# with TB_ISA_SUFFIX=<level> (TB_ISA_FN names the functions per level) and
# TB_ISA_IS_<level> (the baseline object also holds the choice). LIBS
# give the objects their usage requirements (include paths, OpenMP).
# -ffp-contract=off on every level: no level fuses a*b+c where another does
# not (clang fuses within an expression by default once FMA is on), so the
# levels compute the same floats. Off x86-64 only baseline is built and
# TB_CPU_DISPATCH_X86 is not defined.
#
# Why an explicit table and not GCC's target_clones or an ifunc: their
# resolver runs in the dynamic loader and picks from CPUID alone, so no test
# could run the avx2 code on an AVX-512 machine, and nothing reports what
# was picked; the table is chosen by trainbench (TB_CPU_LEVEL forces it) and
# every level the CI machine has is tested against the others.

include(CheckCCompilerFlag)
set(TB_ISA_FLAGS_avx2 -mavx2 -mfma -mf16c)
set(TB_ISA_FLAGS_avx512 ${TB_ISA_FLAGS_avx2} -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512cd)
set(TB_DISPATCH_X86 OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  check_c_compiler_flag("-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512cd -mavx2 -mfma -mf16c"
                        TB_HAS_ISA_FLAGS)
  if(TB_HAS_ISA_FLAGS)
    set(TB_DISPATCH_X86 ON)
  endif()
endif()
if(TB_DISPATCH_X86)
  set(TB_ISA_LEVELS baseline avx2 avx512)
  set(TB_DISPATCH_DESC "runtime: baseline, avx2, avx512 (TB_CPU_LEVEL forces one)")
else()
  set(TB_ISA_LEVELS baseline)
  set(TB_DISPATCH_DESC "baseline only (not x86-64, or the compiler lacks the AVX flags)")
endif()
check_c_compiler_flag(-ffp-contract=off TB_HAS_FP_CONTRACT_OFF)

function(tb_dispatch_sources)
  cmake_parse_arguments(D "" "TARGET" "SOURCES;DEFINITIONS;LIBS" ${ARGN})
  foreach(level ${TB_ISA_LEVELS})
    set(obj ${D_TARGET}_isa_${level})
    add_library(${obj} OBJECT ${D_SOURCES})
    target_include_directories(${obj} PRIVATE ${PROJECT_SOURCE_DIR})
    target_compile_definitions(${obj} PRIVATE TB_ISA_SUFFIX=${level} TB_ISA_IS_${level}=1 ${D_DEFINITIONS}
                               $<$<BOOL:${TB_DISPATCH_X86}>:TB_CPU_DISPATCH_X86=1>)
    target_compile_options(${obj} PRIVATE ${TB_ISA_FLAGS_${level}}
                           $<$<BOOL:${TB_HAS_FP_CONTRACT_OFF}>:-ffp-contract=off>)
    if(D_LIBS)
      target_link_libraries(${obj} PRIVATE ${D_LIBS})
    endif()
    target_sources(${D_TARGET} PRIVATE $<TARGET_OBJECTS:${obj}>)
  endforeach()
endfunction()
