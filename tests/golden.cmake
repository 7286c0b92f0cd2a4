# tests/golden.cmake: trainbench checked against PyTorch, and the torchvision
# converter round trip. Included by tests/CMakeLists.txt (TB_TEST_DIR, TB_BIN).
#   golden_fp64_*                 exact semantics: trainbench_fp64 (the same
#                                 source computing in double; float32 files)
#                                 against PyTorch float64, 3 steps, tolerance
#                                 of about one float32 ulp (rtol 1e-6,
#                                 atol_scale 1e-7), num_batches_tracked exact
#   golden_fp32_*                 the float32 production path: trainbench,
#                                 each step started from the float64
#                                 reference state (teacher forcing), against
#                                 the float64 truth: |out-ref| <= 1e-4*max|ref|
#                                 + 1e-4*|ref|, or max error <= 4x PyTorch
#                                 float32's own (gen_golden.py --floor)
#   convert_roundtrip_torchvision test_convert.py: .pt -> h5 -> tb_ckpt_copy ->
#                                 .pt exact, plus the converter's error cases
# Drivers: golden_step.py (gen_golden.py fixtures, trainbench step, then
# compare_h5.py per step). Interpreter: TB_PYTHON
# (cmake/TbDependencies.cmake). Without one every test here prints why and
# exits 77, which ctest reports as skipped.
#
# Why two kinds: two float32 implementations of a ResNet step cannot agree
# tightly. A ReLU input within float32 rounding of zero flips sign between
# them, and one flip moves gradients by up to tens of percent (measured:
# PyTorch float32 vs float64 on the resnet50 fixture, 0.06-0.5 of max|ref| on
# some gradient at most steps). So semantics are proved in double, and
# float32 is held to "no worse than PyTorch's own float32".
#
# Seeds: chosen so that the float32 results are stable: for resnet18 seed 72
# every PyTorch float32 configuration (gen_golden.py FLOOR_VARIANTS) is within
# the 1e-4 rule on every tensor at every step; for resnet50 no seed gets near
# that (every PyTorch float32 configuration is outside it on half to two
# thirds of the tensors at every step of the 45 seeds tried), and seed 24 is
# one where each configuration passes the floor rule against the others and
# trainbench passes with 1 and 2 threads. Threads are pinned (trainbench
# --threads 2, torch 1) because the float32 summation order, and so which
# ReLUs flip, depends on them. Even so a correct change to trainbench's
# float32 kernels can make golden_fp32_resnet50 fail by a new flip: a PyTorch
# configuration held out of the floor fails it on ~16% of steps over the 45
# seeds. Such a failure usually names a few tensors of one block (a conv and
# its BN: grads, momentum, params); the fp64 tests say whether the semantics
# are still right.
#
# Chaining: resnet18 double is chained from trainbench_fp64's OWN outputs
# (checkpoints it writes are what it reads next). resnet50 double is teacher
# forced too: the state in the files is float32, and a one-ulp difference in
# it (two correct double implementations round a few elements differently)
# grows to 1e-5..1e-4 max-relative by step 3 on this badly conditioned fixture
# (PyTorch float64 NCHW vs channels-last, seeds 5, 21, 24, 31), and to a
# ReLU flip (0.15 on a gradient) with trainbench_fp64 at seed 24.

function(tb_python_test name timeout)
  if(TB_PYTHON)
    add_test(NAME ${name} COMMAND ${TB_PYTHON} ${ARGN})
  else()
    add_test(NAME ${name} COMMAND sh -c
      "echo 'SKIP: ${name}: no python3 with torch, torchvision and h5py found at configure time (set -DTB_PYTHON=/path/to/python3)'; exit 77")
  endif()
  set_tests_properties(${name} PROPERTIES
    SKIP_RETURN_CODE 77
    TIMEOUT ${timeout}
    LABELS "golden;python"
    ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
endfunction()

set(_tb_golden_work ${CMAKE_CURRENT_BINARY_DIR}/golden)
# trainbench_fp64 is a test-only target; where it is not defined the fp64
# tests get an empty --trainbench and skip (exit 77).
set(_tb_fp64_bin "--trainbench=$<$<TARGET_EXISTS:trainbench_fp64>:$<TARGET_FILE:trainbench_fp64>>")
set(_tb_r18 --model resnet18 --classes 10 --batch 4 --height 64 --width 64 --steps 3
  --lr 0.01 --momentum 0.9 --weight-decay 5e-4 --seed 72)
# Bottleneck blocks, non-square images (H != W on purpose), Nesterov and label smoothing.
set(_tb_r50 --model resnet50 --classes 7 --batch 2 --height 64 --width 48 --steps 3
  --lr 0.01 --momentum 0.9 --weight-decay 1e-4 --nesterov --label-smoothing 0.1 --seed 24)
set(_tb_fp64 --compute-dtype float64 --rtol 1e-6 --atol-scale 1e-7 --threads 2 --torch-threads 1)
set(_tb_fp32 --compute-dtype float64 --chain ref --floor --floor-factor 4 --rtol 1e-4 --atol-scale 1e-4
  --threads 2 --torch-threads 1)

# Fixtures ~0.45 GB (resnet18) and ~0.95 GB (resnet50), deleted when the test passes.
tb_python_test(golden_fp64_resnet18 600
  ${TB_TEST_DIR}/golden_step.py ${_tb_fp64_bin} ${_tb_r18} ${_tb_fp64} --chain own
  --workdir ${_tb_golden_work}/fp64_resnet18)
tb_python_test(golden_fp64_resnet50 900
  ${TB_TEST_DIR}/golden_step.py ${_tb_fp64_bin} ${_tb_r50} ${_tb_fp64} --chain ref
  --workdir ${_tb_golden_work}/fp64_resnet50)

# With the float32 floor files: ~0.85 GB (resnet18) and ~1.8 GB (resnet50).
tb_python_test(golden_fp32_resnet18 600
  ${TB_TEST_DIR}/golden_step.py --trainbench ${TB_BIN} ${_tb_r18} ${_tb_fp32}
  --workdir ${_tb_golden_work}/fp32_resnet18)
tb_python_test(golden_fp32_resnet50 900
  ${TB_TEST_DIR}/golden_step.py --trainbench ${TB_BIN} ${_tb_r50} ${_tb_fp32}
  --workdir ${_tb_golden_work}/fp32_resnet50)

# tb_ckpt_copy is the lead's C tool; until its target exists the C round trip
# is skipped (exit 77) after the Python parts ran.
tb_python_test(convert_roundtrip_torchvision 600
  ${TB_TEST_DIR}/test_convert.py
  "--ckpt-copy=$<$<TARGET_EXISTS:tb_ckpt_copy>:$<TARGET_FILE:tb_ckpt_copy>>")

# ---- GPU cases (label gpu): trainbench step --backend cuda against the same
# float64 references, each step started from the reference state (--chain
# ref), 3 steps. fp32 (IEEE, TF32 off) is held to the CPU float32 rule
# above (1e-4, or 4x PyTorch float32's own error). tf32 rounds the conv and
# GEMM inputs to 10 mantissa bits (2^-11 relative): 1e-2 elementwise, or 64x
# PyTorch float32's error where a ReLU flip dominates both -- set from the
# format, not yet calibrated on a GPU (tests/gpu/README.md). Without a
# device (or without torch) each exits 77.
set(TB_GOLDEN_GPU_TESTS golden_cuda_fp32_resnet18 golden_cuda_fp32_resnet50 golden_cuda_tf32_resnet18)
if(TARGET tb_gpu_check AND TB_PYTHON)
  set(_tb_cuda_fp32 --step-arg=--backend --step-arg=cuda --step-arg=--precision --step-arg=fp32)
  set(_tb_cuda_tf32 --step-arg=--backend --step-arg=cuda --step-arg=--precision --step-arg=tf32)
  set(_tb_tf32 --compute-dtype float64 --chain ref --floor --floor-factor 64 --rtol 1e-2
    --atol-scale 1e-2 --torch-threads 1)
  add_test(NAME golden_cuda_fp32_resnet18 COMMAND ${TB_GPU_RUN} ${TB_PYTHON}
    ${TB_TEST_DIR}/golden_step.py --trainbench ${TB_BIN} ${_tb_r18} ${_tb_fp32} ${_tb_cuda_fp32}
    --workdir ${_tb_golden_work}/cuda_fp32_resnet18)
  add_test(NAME golden_cuda_fp32_resnet50 COMMAND ${TB_GPU_RUN} ${TB_PYTHON}
    ${TB_TEST_DIR}/golden_step.py --trainbench ${TB_BIN} ${_tb_r50} ${_tb_fp32} ${_tb_cuda_fp32}
    --workdir ${_tb_golden_work}/cuda_fp32_resnet50)
  add_test(NAME golden_cuda_tf32_resnet18 COMMAND ${TB_GPU_RUN} ${TB_PYTHON}
    ${TB_TEST_DIR}/golden_step.py --trainbench ${TB_BIN} ${_tb_r18} ${_tb_tf32} ${_tb_cuda_tf32}
    --workdir ${_tb_golden_work}/cuda_tf32_resnet18)
else()
  foreach(t ${TB_GOLDEN_GPU_TESTS})
    add_test(NAME ${t} COMMAND sh -c
      "echo 'SKIP: ${t}: needs the CUDA backend in this build and a python3 with torch, torchvision and h5py'; exit 77")
  endforeach()
endif()
set_tests_properties(${TB_GOLDEN_GPU_TESTS} PROPERTIES LABELS "gpu;golden;python" SKIP_RETURN_CODE 77
                     TIMEOUT 900 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
