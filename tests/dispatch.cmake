# tests/dispatch.cmake: runtime CPU dispatch of the hot loops
# (core/cpu_dispatch.h). Included by tests/CMakeLists.txt (TB_TEST_DIR, TB_BIN).
#   cpu_dispatch_unit   test_cpu_dispatch.c (+ _model.c): the level rule with
#                       made-up CPUs; every level this CPU has against scalar
#                       references and each other, bit for bit: the resize on
#                       many geometries, the output stores, whole loader
#                       epochs, the CPU backend's loops
add_executable(test_cpu_dispatch test_cpu_dispatch.c test_cpu_dispatch_model.c)
target_link_libraries(test_cpu_dispatch PRIVATE tb_data tb_cpu)
if(TB_HAS_FP_CONTRACT_OFF)
  target_compile_options(test_cpu_dispatch PRIVATE -ffp-contract=off) # the references as the loops compute
endif()
add_test(NAME cpu_dispatch_unit COMMAND test_cpu_dispatch)
set_tests_properties(cpu_dispatch_unit PROPERTIES TIMEOUT 120 LABELS "data;model")
#   cpu_levels_train    cpu_levels.sh: ResNet-18 trained 2 steps on JPEGs at
#                       each level this CPU has (TB_CPU_LEVEL): checkpoints
#                       and losses bit for bit baseline's, the results file
#                       names the level; a level the CPU lacks refused in one line
#   cpu_level_refused   TB_CPU_LEVEL=avx9: one line naming it, exit 1, nothing else run
#   golden_fp32_resnet18_<level>  one golden step (tests/golden.cmake's float32
#                       rule, 2 PyTorch floor variants) forced to each level;
#                       skipped (77, the refusal as reason) where the CPU lacks
#                       it, and for the level picked by default, which
#                       golden_fp32_resnet18 (3 steps) runs
add_test(NAME cpu_levels_train COMMAND sh ${TB_TEST_DIR}/cpu_levels.sh ${TB_BIN} $<TARGET_FILE:tb_run_compare>)
set_tests_properties(cpu_levels_train PROPERTIES TIMEOUT 300 LABELS "data;model")
add_test(NAME cpu_level_refused COMMAND sh -c
  "out=$(TB_CPU_LEVEL=avx9 \"$0\" --synthetic --steps 1 2>&1); rc=$?; printf '%s\\n' \"$out\"; test $rc -eq 1 && test \"$(printf '%s\\n' \"$out\" | wc -l)\" -eq 1 && printf '%s\\n' \"$out\" | grep -q '^trainbench: error: TB_CPU_LEVEL=avx9 is not a level: use baseline, avx2, avx512 or auto'"
  ${TB_BIN})
set_tests_properties(cpu_level_refused PROPERTIES TIMEOUT 60)

set(_tb_golden_level --model resnet18 --classes 10 --batch 4 --height 64 --width 64 --steps 1 --lr 0.01
  --momentum 0.9 --weight-decay 5e-4 --seed 72 --compute-dtype float64 --chain ref --floor --floor-factor 10
  --floor-rel 1e-4 --floor-variants mkldnn-nchw-1t,native-nhwc-1t --threads 2 --torch-threads 1)
foreach(lv ${TB_ISA_LEVELS})
  set(name golden_fp32_resnet18_${lv})
  if(TB_PYTHON)
    add_test(NAME ${name} COMMAND sh ${TB_TEST_DIR}/with_cpu_level.sh --skip-if-auto golden_fp32_resnet18
             ${lv} ${TB_BIN} ${TB_PYTHON}
             ${TB_TEST_DIR}/golden_step.py --trainbench ${TB_BIN} ${_tb_golden_level}
             --workdir ${CMAKE_CURRENT_BINARY_DIR}/golden/level_${lv})
  else()
    add_test(NAME ${name} COMMAND sh -c
      "echo 'SKIP: ${name}: no python3 with torch, torchvision and h5py found at configure time'; exit 77")
  endif()
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "golden;python"
                       ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
endforeach()
