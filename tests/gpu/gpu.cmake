# tests/gpu/gpu.cmake: the CUDA backend's tests, label "gpu" (list and what
# each proves: tests/gpu/README.md). Without a visible device each prints why
# and exits 77, which ctest reports as skipped; in a build without the CUDA
# backend they are registered as skips that say so. The golden GPU cases are
# in tests/golden.cmake. Run them alone with: ctest --test-dir build -L gpu
set(TB_GPU_TESTS cuda_fused cuda_fused_step cuda_fused_refused startup_plan_cache_gpu cuda_ops cuda_ops_memory
    cuda_model cuda_model_memory mkdata_gpu train_cuda_bf16_mkdata
    train_cuda_bf16_loss_fell train_cuda_graph_val
    nccl_train_equals_plain staged_train_equals_plain graph_equals_eager graph_equals_eager_nccl resident_equals_host_gpu
    wgrad_stream_equals_serial wgrad_stream_equals_serial_bf16 wgrad_stream_equals_serial_nccl
    wgrad_stream_equals_serial_fused wgrad_stream_graph_val wgrad_stream_short_batch wgrad_stream_capture_fails
    stem_pad_equals_plain
    stem_pad_equals_plain_fused stem_pad_graph_equals_eager stem_pad_auto_unmeasured_said relu_mask_equals_y
    relu_mask_equals_y_fused convert_many_equals_per_tensor bn_own_equals_cudnn bn_timed_equals_cudnn
    bf16_allreduce_cost_gpu allreduce_bench_nccl allreduce_bench_nccl_bf16 preflight_gpu
    dp_exact_gpu_shared_mpi_np2 dp_exact_gpu_shared_mpi_np2_keep duplicate_gpu_refused duplicate_gpu_nccl_forced
    op_profile_gpu_graph nccl_watch_gpu)
# issue 26: two ranks over NCCL on the one GPU (NCCL >= 2.30 with
# NCCL_MULTI_RANK_GPU_ENABLE=1, tests/gpu/nccl_np2_run.sh); labels gpu and
# np2, run by the suite's np2 stage (two tests at a time), left out of its
# tests stage
set(TB_NP2_TESTS dp_exact_gpu_nccl_np2 dp_exact_gpu_nccl_np2_keep dp_exact_gpu_nccl_np2_pad
    dp_exact_gpu_nccl_np2_bcast_off
    nccl_np2_resnet50_bf16_dp_exact nccl_np2_equals_staged nccl_np2_graph_equals_eager
    allreduce_bench_nccl_np2 allreduce_bench_nccl_np2_bf16 allreduce_bench_nccl_np2_deadline nccl_np2_overlap_run
    nccl_np2_overlap
    nccl_np2_killed_in_backward nccl_np2_frozen_in_backward nccl_np2_async_error)
if(TARGET tb_cuda)
  add_executable(tb_gpu_check gpu/tb_gpu_check.c)
  target_link_libraries(tb_gpu_check PRIVATE tb_model tb_comm)
  # sh gpu_run.sh CHECKER CMD...: CMD only when a device is visible, else exit 77
  set(TB_GPU_RUN sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu/gpu_run.sh $<TARGET_FILE:tb_gpu_check>)
  # the CUDA build's line on a machine without a usable GPU, per driver state
  add_test(NAME no_gpu_driver_lines
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/no_gpu_run.sh $<TARGET_FILE:tb_gpu_check>
                   sh ${CMAKE_CURRENT_SOURCE_DIR}/no_gpu_driver_lines.sh $<TARGET_FILE:tb_gpu_check>)
  set_tests_properties(no_gpu_driver_lines PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)

  add_executable(test_cuda_ops test_cuda_ops.c test_cuda_ops_layers.c)  # convs and BN; the other ops
  target_link_libraries(test_cuda_ops PRIVATE tb_model)
  add_test(NAME cuda_ops COMMAND test_cuda_ops)
  set_tests_properties(cuda_ops PROPERTIES TIMEOUT 900)
  # its fp32 tolerance rule for long reductions, on any machine (no label gpu)
  add_test(NAME cuda_ops_tolerances COMMAND test_cuda_ops tolerances)
  set_tests_properties(cuda_ops_tolerances PROPERTIES TIMEOUT 60)

  # --fuse graph (issue 30): every fused op against the CPU's twins, on the
  # fused graphs and on the forced composition; a whole step fused vs
  # unfused; the second launch with the plan cache reaching its first step
  # in under 5 s (1 and 2 ranks). RUN_SERIAL: start-up times.
  add_executable(test_cuda_fused test_cuda_fused.c test_cuda_fused_step.c test_cuda_fused_refused.c)  # ops; step; trials
  target_link_libraries(test_cuda_fused PRIVATE tb_model)
  add_test(NAME cuda_fused COMMAND test_cuda_fused)
  add_test(NAME cuda_fused_step COMMAND test_cuda_fused step)
  add_test(NAME cuda_fused_refused COMMAND test_cuda_fused refused)
  add_test(NAME startup_plan_cache_gpu
           COMMAND ${TB_GPU_RUN} sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu/startup_cache.sh ${TB_BIN} "${MPIEXEC_EXECUTABLE}")
  set_tests_properties(cuda_fused cuda_fused_step cuda_fused_refused PROPERTIES TIMEOUT 600)
  # COST: ctest holds a RUN_SERIAL test until every other one has ended; on a
  # fresh build (no cost data) it would start last in a stage with a
  # deadline, and be cut: first, alone, instead
  set_tests_properties(startup_plan_cache_gpu PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE COST 1000
                       ENVIRONMENT "${TB_MPI_TEST_ENV}")

  add_executable(test_cuda_model test_cuda_model.c)
  target_link_libraries(test_cuda_model PRIVATE tb_model)
  add_test(NAME cuda_model COMMAND test_cuda_model)
  set_tests_properties(cuda_model PROPERTIES TIMEOUT 900)
  # the allocator's accounting against cudaMemGetInfo, which counts every
  # process on the device: alone, while the rest may run in parallel (ctest -j)
  add_test(NAME cuda_ops_memory COMMAND test_cuda_ops memory)
  add_test(NAME cuda_model_memory COMMAND test_cuda_model memory)
  set_tests_properties(cuda_ops_memory cuda_model_memory PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE)
  # the step checks of cuda_model (SGD rule, carried vs fresh state, the CPU
  # chain) run on a second CPU backend in the GPU's place: their logic in CI
  add_test(NAME cuda_model_host_logic COMMAND test_cuda_model host)
  set_tests_properties(cuda_model_host_logic PROPERTIES TIMEOUT 600)

  # bf16 training on a learnable mkdata set (one rank): the loss falls
  add_test(NAME mkdata_gpu
           COMMAND ${TB_GPU_RUN} sh -c "rm -rf mkdata_gpu && \"$0\" mkdata --out mkdata_gpu --classes 4 --per-class 24 --seed 3 --min-side 96 --max-side 160"
                   ${TB_BIN})
  set_tests_properties(mkdata_gpu PROPERTIES TIMEOUT 300 FIXTURES_SETUP mkdata_gpu)
  add_test(NAME train_cuda_bf16_mkdata
           COMMAND ${TB_GPU_RUN} ${TB_BIN} --backend cuda --precision bf16 --data mkdata_gpu
                   --image-size 64 --batch-size 16 --steps 40 --lr 0.4 --lr-warmup-steps 5
                   --warmup-steps 2 --scaling-steps 0 --loader-threads 2
                   --results train_cuda_bf16.h5)
  set_tests_properties(train_cuda_bf16_mkdata PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED mkdata_gpu
                       FIXTURES_SETUP cuda_bf16_results)
  if(TB_PYTHON)
    add_test(NAME train_cuda_bf16_loss_fell
             COMMAND ${TB_GPU_RUN} ${TB_PYTHON} ${TB_TEST_DIR}/check_results.py train_cuda_bf16.h5
                     --loss-falls 0.8)
  else()
    add_test(NAME train_cuda_bf16_loss_fell
             COMMAND sh -c "echo 'SKIP: no python3 with h5py'; exit 77")
  endif()
  set_tests_properties(train_cuda_bf16_loss_fell PROPERTIES FIXTURES_REQUIRED cuda_bf16_results)
  # --val with the CUDA graph on: the validation set's short last batch (96
  # images, batch 20) plans new conv entries and the next step re-captures
  # at once, after each of two evaluations; the run keeps its graph (no
  # fallback, no failure inside the capture)
  add_test(NAME train_cuda_graph_val
           COMMAND ${TB_GPU_RUN} ${TB_TEST_DIR}/expect_pass.sh "eval +epoch 1 +top-1"
                   "# cuda graph: on; [0-9]+ training steps replayed"
                   -- ${TB_BIN} --backend cuda --precision bf16 --data mkdata_gpu --val mkdata_gpu
                   --image-size 64 --batch-size 20 --last-batch drop --steps 10 --cuda-graph on
                   --graph-warmup 2 --warmup-steps 2 --scaling-steps 0 --loader-threads 2 --results "")
  set_tests_properties(train_cuda_graph_val PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED mkdata_gpu)
  # the same with the weight gradients on a second stream: the evaluation's
  # short batch grows the conv workspace, both streams' grow together, and
  # the step captured straight after it keeps its graph; then --last-batch
  # keep's short training batch (96 images: 40, 40, 16), eager, makes its
  # filter entries inside the branches (--fuse graph: the plain convs'
  # filter gradients are planned at the largest batch only)
  add_test(NAME wgrad_stream_graph_val
           COMMAND ${TB_GPU_RUN} env TB_WGRAD_STREAM=on ${TB_TEST_DIR}/expect_pass.sh "eval +epoch 1 +top-1"
                   "# cuda graph: on; [0-9]+ training steps replayed"
                   "# wgrad stream: on; [1-9][0-9]* convolutions' weight gradients on a second stream"
                   -- ${TB_BIN} --backend cuda --precision bf16 --data mkdata_gpu --val mkdata_gpu
                   --image-size 64 --batch-size 20 --last-batch drop --steps 10 --cuda-graph on
                   --graph-warmup 2 --warmup-steps 2 --scaling-steps 0 --loader-threads 2 --results "")
  add_test(NAME wgrad_stream_short_batch
           COMMAND ${TB_GPU_RUN} env TB_WGRAD_STREAM=on ${TB_TEST_DIR}/expect_pass.sh
                   "# wgrad stream: on; [1-9][0-9]* convolutions' weight gradients on a second stream"
                   -- ${TB_BIN} --backend cuda --precision fp16 --fuse graph --no-autotune --model resnet50
                   --data mkdata_gpu --image-size 64 --batch-size 40 --last-batch keep --steps 12 --cuda-graph on
                   --graph-warmup 2 --warmup-steps 2 --scaling-steps 0 --loader-threads 2 --results "")
  set_tests_properties(wgrad_stream_graph_val wgrad_stream_short_batch PROPERTIES TIMEOUT 600
                       FIXTURES_REQUIRED mkdata_gpu)
  # a failure inside the capture with a weight-gradient branch open (a test
  # fault, TB_FATAL in the first branch the capture opens): the second
  # stream joins back (capture_unwind) before the capture ends, which then
  # ends without an error (not cudaErrorStreamCaptureUnjoined), the run
  # says so, falls back to eager steps and trains them all
  add_test(NAME wgrad_stream_capture_fails
           COMMAND ${TB_GPU_RUN} env TB_WGRAD_STREAM=on TB_TEST_FAULT=fatal-in-branch:-1 ${TB_TEST_DIR}/expect_pass.sh
                   "second stream was open when the capture was abandoned; joined back"
                   "# cuda graph: the abandoned capture ended: no error"
                   "# cuda graph: off: inside the capture: .*test fault fatal-in-branch.*the steps run eagerly"
                   "^# training: 6 steps"
                   -- ${TB_BIN} --backend cuda --precision bf16 --model resnet18 --image-size 64 --batch-size 16
                   --synthetic-size 64 --steps 6 --cuda-graph on --graph-warmup 2 --warmup-steps 2 --scaling-steps 0
                   --results "")

  # --op-profile after timed steps replayed from a CUDA graph: the profiled
  # steps run eagerly (real timing events), every kind of the bf16 step is
  # timed, the ops cover at least half of the profiled steps' own measured
  # time, and the timed (replayed) steps' time is printed beside it.
  # RUN_SERIAL: a timing ratio; on a GPU shared with other tests' processes
  # (ctest -j) the device time-slices between contexts, inside and between
  # the ops' event pairs
  add_test(NAME op_profile_gpu_graph
           COMMAND ${TB_GPU_RUN} ${TB_TEST_DIR}/expect_pass.sh
                   "cuda graph: on; [1-9][0-9]* training steps replayed"
                   "^  conv_fwd +[0-9.]+ +[0-9.]+ +20$" "^  conv_dgrad +[0-9.]+ +[0-9.]+ +19$"
                   "^  conv_wgrad " "^  bn_bwd " "^  weight_convert +[0-9.]+ +[0-9.]+ +1$"
                   "^  grad_convert +[0-9.]+ +[0-9.]+ +1$" "^  sgd " "^  nonfinite_check "
                   "^# covered: [0-9.]+ ms of [0-9.]+ ms step \\(([5-9][0-9]|10[0-5])\\.[0-9] %\\)"
                   "^# profiled steps \\(eager, an event pair per op\\): [0-9.]+ ms per step; the timed steps before them: [0-9.]+ ms per step \\([1-9][0-9]* of [1-9][0-9]* replayed from a CUDA graph\\)$"
                   -- ${TB_BIN} --backend cuda --precision bf16 --model resnet18 --image-size 64 --batch-size 32
                   --steps 8 --warmup-steps 5 --cuda-graph on --graph-warmup 2 --op-profile 2 --scaling-steps 0
                   --results op_profile_gpu.h5)
  set_tests_properties(op_profile_gpu_graph PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE COST 900) # first too (above)

  # ---- issue 14: NCCL and the GPU gradient paths on one GPU ------------------------------
  # the NCCL cases skip, saying so, in a CUDA build without NCCL
  if(TB_HAVE_NCCL)
    set(TB_GPU_NCCL_RUN ${TB_GPU_RUN})
  else()
    set(TB_GPU_NCCL_RUN sh -c "echo 'SKIP: this build has no NCCL (set NCCL_ROOT)'; exit 77" --)
  endif()
  # Bit for bit: fp32, heuristic conv algorithms and deterministic ones, so
  # two processes run the same kernels (tests/test_async_step.py).
  set(TB_GPU_EXACT --extra "--precision fp32 --no-autotune --deterministic" --batch 8 --image-size 64
                   --synthetic-size 64 --steps 7)
  # a 1-rank NCCL run (buckets on the communication stream, ncclBroadcast of
  # the BN statistics) against the same run without communication
  add_test(NAME nccl_train_equals_plain
           COMMAND ${TB_GPU_NCCL_RUN} ${TB_ASYNC}
                   --mode nccl-plain ${TB_GPU_EXACT})
  # the MPI path's staging (pinned down-copy, MPI, up-copy on its own stream) on one rank
  add_test(NAME staged_train_equals_plain
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC}
                   --mode staged-plain ${TB_GPU_EXACT})
  # the captured step replayed equals the eager step, without and with NCCL inside
  add_test(NAME graph_equals_eager
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC}
                   --mode graph-eager ${TB_GPU_EXACT})
  add_test(NAME graph_equals_eager_nccl
           COMMAND ${TB_GPU_NCCL_RUN} ${TB_ASYNC}
                   --mode graph-eager --batch 8 --image-size 64 --synthetic-size 64 --steps 7
                   --extra "--precision fp32 --no-autotune --deterministic --comm nccl")
  # each conv's weight gradient on a second stream beside its data gradient
  # (TB_WGRAD_STREAM=on, two branches of the captured graph) against one
  # stream: bit for bit, in fp32 and in the bench's bf16 NHWC ResNet-50 (one
  # rank, no grad-ready hook: the weight gradients' conversions at the end of
  # backward, as the bench's rows run), and with a hook (_nccl, below: the
  # bf16 conversions on the second stream, the NCCL buckets after each join)
  add_test(NAME wgrad_stream_equals_serial
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC} --mode wgrad-stream ${TB_GPU_EXACT})
  add_test(NAME wgrad_stream_equals_serial_bf16
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC} --mode wgrad-stream --model resnet50 --batch 16 --image-size 64
                   --synthetic-size 64 --steps 7 --extra "--precision bf16 --layout nhwc --no-autotune --deterministic")
  # --fuse graph in fp32 NHWC (cuda_fused_step's fused reference: where a
  # fused kind runs as the unfused composition, its pro(x) goes to the
  # second stream's own buffer), deterministic on both sides as the unfused
  # fp32 runs are: no fused 16-bit engine whose statistics could differ
  # between two runs for reasons of its own
  add_test(NAME wgrad_stream_equals_serial_fused
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC} --mode wgrad-stream --model resnet50 --batch 16 --image-size 64
                   --synthetic-size 64 --steps 7
                   --extra "--precision fp32 --layout nhwc --fuse graph --no-autotune --deterministic")
  # the stem on 4 channels (cuda_conv_pad.c) in whole steps, fp16 NHWC
  # ResNet-50: one eager step against the unpadded run, the stem's weights
  # and momentum (its gradient) within 2 % relative L2 (--tensor: the stem
  # is under 1 % of all weights), the rest within 1 %; unfused, and under
  # --fuse graph (the stem's forward a fused graph, its filter gradient
  # padded). Then padded steps captured and replayed against eager, bit for
  # bit. cuda_ops checks the op itself against the CPU, with a planted
  # error. First GPU run: calibrate the 2 %
  set(TB_STEM_PAD_ARGS --model resnet50 --batch 16 --image-size 64 --synthetic-size 64)
  add_test(NAME stem_pad_equals_plain
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC} --mode stem-pad ${TB_STEM_PAD_ARGS} --steps 1 --tolerance 1e-2
                   --tensor conv1.weight 2e-2 --extra "--precision fp16 --layout nhwc --no-autotune --deterministic")
  add_test(NAME stem_pad_equals_plain_fused
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC} --mode stem-pad ${TB_STEM_PAD_ARGS} --steps 1 --tolerance 1e-2
                   --tensor conv1.weight 2e-2
                   --extra "--precision fp16 --layout nhwc --fuse graph --no-autotune --deterministic")
  add_test(NAME stem_pad_graph_equals_eager
           COMMAND ${TB_GPU_RUN} env TB_STEM_PAD=4 ${TB_ASYNC} --mode graph-eager ${TB_STEM_PAD_ARGS} --steps 6
                   --expect-line "^# cuda conv: the 7x7/2 conv with 3 input channels reads them padded to 4 "
                   --extra "--precision fp16 --layout nhwc --no-autotune --deterministic")
  # TB_STEM_PAD=auto with nothing measured (--no-autotune) says that the stem
  # stays on 3 channels, as every TB_STEM_PAD run says what it chose
  add_test(NAME stem_pad_auto_unmeasured_said
           COMMAND ${TB_GPU_RUN} env TB_STEM_PAD=auto ${TB_TEST_DIR}/expect_pass.sh
                   "^# cuda conv: the 7x7/2 conv with 3 input channels stays on 3 .TB_STEM_PAD=auto: the plain conv has no measured time"
                   -- ${TB_BIN} --backend cuda --model resnet18 --precision fp16 --layout nhwc --no-autotune
                   --batch-size 8 --image-size 64 --synthetic-size 16 --steps 1 --warmup-steps 0 --scaling-steps 0
                   --results=)
  # the own BatchNorm kernels' ReLU mask in whole captured steps: every
  # BatchNorm on them (TB_BN_KERNELS=own), the mask against the backward
  # reading y, bit for bit; in fp16 NHWC, and fused in fp32 NHWC (the
  # applied BatchNorms' mask written by bn_apply; deterministic as
  # wgrad_stream_equals_serial_fused)
  add_test(NAME relu_mask_equals_y
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC} --mode relu-mask --model resnet50 --batch 16 --image-size 64
                   --synthetic-size 64 --steps 7 --extra "--precision fp16 --layout nhwc --no-autotune --deterministic")
  add_test(NAME relu_mask_equals_y_fused
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC} --mode relu-mask --model resnet50 --batch 16 --image-size 64
                   --synthetic-size 64 --steps 7
                   --extra "--precision fp32 --layout nhwc --fuse graph --no-autotune --deterministic")
  # the op weights' refresh in one launch against one conversion a tensor,
  # in whole captured bf16 steps: bit for bit
  add_test(NAME convert_many_equals_per_tensor
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC} --mode convert-many --model resnet50 --batch 16 --image-size 64
                   --synthetic-size 64 --steps 7 --extra "--precision bf16 --layout nhwc --no-autotune --deterministic")
  # a whole step with every BatchNorm on the own kernels, and with each
  # timed at start-up (the faster kept; the plan cache off, so the timing
  # runs), against cuDNN's untimed: within 1 % (other kernels, other
  # rounding; cuda_ops checks the ops against the CPU). First GPU run:
  # calibrate the 1 %
  add_test(NAME bn_own_equals_cudnn
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC} --mode bn-kernels --bn-kernels own ${TB_STEM_PAD_ARGS} --steps 1
                   --tolerance 1e-2 --extra "--precision fp16 --layout nhwc --no-autotune --deterministic")
  add_test(NAME bn_timed_equals_cudnn
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC} --mode bn-kernels --bn-kernels auto ${TB_STEM_PAD_ARGS} --steps 1
                   --tolerance 1e-2 --extra "--precision fp16 --layout nhwc --deterministic --plan-cache off")
  # COST above startup_plan_cache_gpu's: the tests every bench row's figures wait on (the ops against the
  # CPU, the BatchNorm kernels, the weights' refresh) start first, together, in a stage with a deadline
  set_tests_properties(cuda_ops bn_own_equals_cudnn bn_timed_equals_cudnn convert_many_equals_per_tensor
                       PROPERTIES COST 1100)
  # with a grad-ready hook (--comm nccl, one rank): each conv's bf16 weight
  # gradient is converted into the float32 flat gradients on the second
  # stream, inside its branch, before the hook hands the range to NCCL after
  # the join; in fp32 NCHW there are no op copies, so nothing was converted
  # there, and without a hook (the tests above, the bench's rows) the
  # conversions wait for the end of backward on the compute stream
  add_test(NAME wgrad_stream_equals_serial_nccl
           COMMAND ${TB_GPU_NCCL_RUN} ${TB_ASYNC} --mode wgrad-stream --batch 8 --image-size 64 --synthetic-size 64
                   --steps 7
                   --extra "--precision bf16 --layout nhwc --no-autotune --deterministic --comm nccl --bucket-mb 1")
  # the synthetic pool resident in device memory (the CUDA default) against
  # batches uploaded from the host
  add_test(NAME resident_equals_host_gpu
           COMMAND ${TB_GPU_RUN} ${TB_ASYNC} --mode resident-cuda ${TB_GPU_EXACT})
  # what the bf16 hook costs on one rank (the casts only): bounded, printed
  # --allreduce-dtype bf16 on one rank (the casts alone) after ONE step, where
  # its effect is exact: momentum = the all-reduced gradient (+ decay), so
  # bf16's round-to-nearest moves it by at most 2^-9 per element (about 2^-9
  # / sqrt(3) in L2), and by more than nothing. The first H100 run compared
  # 7 steps (0.28 apart, tol 0.02): a chaotic regime (tests/test_cuda_model.c's
  # header), where any rounding grows ~10x per step.
  add_test(NAME bf16_allreduce_cost_gpu
           COMMAND ${TB_GPU_NCCL_RUN} ${TB_ASYNC}
                   --mode bf16-fp32 --tolerance 2e-2 --momentum-band 1e-5 3.9e-3 ${TB_GPU_EXACT} --steps 1)
  add_test(NAME allreduce_bench_nccl
           COMMAND ${TB_GPU_NCCL_RUN} ${TB_TEST_DIR}/expect_pass.sh "Out of bounds values : 0 OK" "path nccl-device .*, out of place,"
                   -- ${TB_BIN} allreduce-bench --comm nccl -b 8 -e 256M -f 4 -n 10 -w 3)
  add_test(NAME allreduce_bench_nccl_bf16
           COMMAND ${TB_GPU_NCCL_RUN} ${TB_TEST_DIR}/expect_pass.sh "Out of bounds values : 0 OK"
                   -- ${TB_BIN} allreduce-bench --comm nccl --dtype bf16 -b 8 -e 64M -f 8 -n 5 -w 2)
  add_test(NAME preflight_gpu
           COMMAND ${TB_GPU_NCCL_RUN} ${TB_TEST_DIR}/expect_pass.sh "all-reduce \\(NCCL, device buffers\\).*#wrong 0"
                   "timed after an untimed warm-up all-reduce .*NCCL's kernels loaded"
                   "NCCL library, compiled against vs loaded" "preflight: OK"
                   -- ${TB_BIN} preflight --bytes 64M --timeout 60)
  # what 1-rank runs never reach: the watchdog's queries around a graph
  # capture from another thread, ncclCommSplit with NCCL_SPLIT_NOCOLOR,
  # finalize+destroy and the bounded ncclCommAbort timed (tests/test_nccl_watch.c)
  add_executable(test_nccl_watch test_nccl_watch.c)
  target_link_libraries(test_nccl_watch PRIVATE tb_app)
  add_test(NAME nccl_watch_gpu COMMAND ${TB_GPU_NCCL_RUN} $<TARGET_FILE:test_nccl_watch>)
  set_tests_properties(nccl_train_equals_plain staged_train_equals_plain graph_equals_eager graph_equals_eager_nccl
                       wgrad_stream_equals_serial wgrad_stream_equals_serial_bf16 wgrad_stream_equals_serial_nccl
                       wgrad_stream_equals_serial_fused stem_pad_equals_plain stem_pad_equals_plain_fused
                       stem_pad_graph_equals_eager stem_pad_auto_unmeasured_said relu_mask_equals_y
                       relu_mask_equals_y_fused convert_many_equals_per_tensor bn_own_equals_cudnn
                       bn_timed_equals_cudnn nccl_watch_gpu
                       resident_equals_host_gpu bf16_allreduce_cost_gpu allreduce_bench_nccl allreduce_bench_nccl_bf16 preflight_gpu
                       PROPERTIES TIMEOUT 600 ENVIRONMENT "${TB_MPI_TEST_ENV}")
  if(TB_HAVE_MPI)
    # 2 ranks sharing the one GPU over MPI (staged through pinned memory):
    # their weights equal the data-parallel reference built from per-shard
    # `trainbench step --backend cuda` (BatchNorm normalises each rank's
    # batch, so a 1-rank run of the doubled batch is not the reference; the
    # per-shard sum is, as in dp_exact on the CPU)
    set(TB_DP_GPU --train-arg=--backend --train-arg=cuda --train-arg=--comm --train-arg=mpi
                  --train-arg=--share-gpu --train-arg=--precision --train-arg=fp32 --train-arg=--no-autotune
                  --train-arg=--deterministic --step-arg=--backend --step-arg=cuda --step-arg=--precision
                  --step-arg=fp32 --step-arg=--no-autotune --step-arg=--deterministic)
    add_test(NAME dp_exact_gpu_shared_mpi_np2
             COMMAND ${TB_GPU_RUN} ${TB_PY} ${TB_TEST_DIR}/test_data_parallel.py --trainbench ${TB_BIN}
                     --mpiexec "${MPIEXEC_EXECUTABLE}" --ranks 2 --batch 4 --steps 2 ${TB_DP_GPU})
    add_test(NAME dp_exact_gpu_shared_mpi_np2_keep
             COMMAND ${TB_GPU_RUN} ${TB_PY} ${TB_TEST_DIR}/test_data_parallel.py --trainbench ${TB_BIN}
                     --mpiexec "${MPIEXEC_EXECUTABLE}" --ranks 2 --batch 2 --n 5 --steps 2 --last-batch keep
                     --image-size 64 ${TB_DP_GPU})
    # two ranks on the one GPU with NCCL: our launch check first, on every rank
    add_test(NAME duplicate_gpu_refused
             COMMAND ${TB_GPU_NCCL_RUN} ${TB_EXPECT_ALL} 2 "ranks outnumber devices: 2 ranks run on"
                     ${MPIEXEC_EXECUTABLE} -n 2 ${TB_BIN} --backend cuda --comm nccl --steps 2 --scaling-steps 0
                     --results "")
    # ... and forced past it (--share-gpu) without NCCL_MULTI_RANK_GPU_ENABLE:
    # NCCL < 2.30's own refusal, named, or (the bundle's slim NCCL >= 2.30
    # loaded) ours asking for the variable; every rank ends
    add_test(NAME duplicate_gpu_nccl_forced
             COMMAND ${TB_GPU_NCCL_RUN} env -u NCCL_MULTI_RANK_GPU_ENABLE ${TB_TEST_DIR}/expect_fail.sh
                     "Duplicate GPU detected.*NCCL 2\\.[0-9]+ refuses|NCCL 2\\.[0-9]+\\.[0-9]+ runs several ranks on one GPU only with NCCL_MULTI_RANK_GPU_ENABLE=1"
                     ${MPIEXEC_EXECUTABLE} -n 2 ${TB_BIN} --backend cuda --comm nccl --share-gpu --steps 2
                     --scaling-steps 0 --timeout 60 --results "")
    set_tests_properties(dp_exact_gpu_shared_mpi_np2 dp_exact_gpu_shared_mpi_np2_keep duplicate_gpu_refused
                         duplicate_gpu_nccl_forced PROPERTIES TIMEOUT 600 PROCESSORS 2
                         ENVIRONMENT "${TB_MPI_TEST_ENV}")
  else()
    foreach(t dp_exact_gpu_shared_mpi_np2 dp_exact_gpu_shared_mpi_np2_keep duplicate_gpu_refused
              duplicate_gpu_nccl_forced)
      add_test(NAME ${t} COMMAND sh -c "echo 'SKIP: ${t}: this build has no MPI'; exit 77")
    endforeach()
  endif()

  # ---- issue 26: two ranks over NCCL on the one GPU -------------------------------------
  if(TB_HAVE_NCCL AND TB_HAVE_MPI)
    set(TB_NP2_RUN sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu/nccl_np2_run.sh $<TARGET_FILE:tb_gpu_check>)
    # the data-parallel reference of the staged MPI tests above, over NCCL:
    # replicas bit-identical (the run's own check) and equal to the
    # per-shard `trainbench step` sum at the same tolerance; keep and pad on
    # 5 rows of batch 2 x 2 ranks (keep's last step leaves rank 1 empty)
    string(REPLACE "--train-arg=mpi" "--train-arg=nccl" TB_DP_NCCL "${TB_DP_GPU}")
    add_test(NAME dp_exact_gpu_nccl_np2
             COMMAND ${TB_NP2_RUN} ${TB_PY} ${TB_TEST_DIR}/test_data_parallel.py --trainbench ${TB_BIN}
                     --mpiexec "${MPIEXEC_EXECUTABLE}" --ranks 2 --batch 4 --steps 2 ${TB_DP_NCCL})
    # --broadcast-buffers off: no ncclBroadcast before each forward, the same reference (training never reads
    # the statistics; rank 0's, which the checkpoint holds, are its own either way)
    add_test(NAME dp_exact_gpu_nccl_np2_bcast_off
             COMMAND ${TB_NP2_RUN} ${TB_PY} ${TB_TEST_DIR}/test_data_parallel.py --trainbench ${TB_BIN}
                     --mpiexec "${MPIEXEC_EXECUTABLE}" --ranks 2 --batch 4 --steps 2 ${TB_DP_NCCL}
                     --train-arg=--broadcast-buffers --train-arg=off)
    foreach(rule keep pad)
      add_test(NAME dp_exact_gpu_nccl_np2_${rule}
               COMMAND ${TB_NP2_RUN} ${TB_PY} ${TB_TEST_DIR}/test_data_parallel.py --trainbench ${TB_BIN}
                       --mpiexec "${MPIEXEC_EXECUTABLE}" --ranks 2 --batch 2 --n 5 --steps 2 --last-batch ${rule}
                       --image-size 64 ${TB_DP_NCCL})
    endforeach()
    # ResNet-50 bf16 NHWC over NCCL against the per-shard reference (equal
    # shards: the loss pre-scale 1/2 is exact in bf16, so the same tolerance)
    add_test(NAME nccl_np2_resnet50_bf16_dp_exact
             COMMAND ${TB_NP2_RUN} ${TB_PY} ${TB_TEST_DIR}/test_data_parallel.py --trainbench ${TB_BIN}
                     --mpiexec "${MPIEXEC_EXECUTABLE}" --ranks 2 --batch 4 --steps 2 --model resnet50 --image-size 64
                     --train-arg=--backend --train-arg=cuda --train-arg=--comm --train-arg=nccl --train-arg=--share-gpu
                     --train-arg=--precision --train-arg=bf16 --train-arg=--layout --train-arg=nhwc
                     --train-arg=--no-autotune --train-arg=--deterministic --train-arg=--cuda-graph --train-arg=off
                     --step-arg=--backend --step-arg=cuda --step-arg=--precision --step-arg=bf16 --step-arg=--layout
                     --step-arg=nhwc --step-arg=--no-autotune --step-arg=--deterministic)
    # NCCL against the MPI staging on the same 2 ranks, bit for bit (a sum
    # of two floats is the same on both paths), 33 samples of batch 4 x 2:
    # step 4 gives rank 0 one sample and rank 1 none; scaling rows included
    set(TB_NP2_R50 --mpiexec ${MPIEXEC_EXECUTABLE} --ranks 2 --model resnet50 --image-size 64 --batch 4
                   --synthetic-size 33 --last-batch keep)
    add_test(NAME nccl_np2_equals_staged
             COMMAND ${TB_NP2_RUN} ${TB_ASYNC} --mode nccl-staged ${TB_NP2_R50} --steps 7
                     --extra "--precision bf16 --layout nhwc --no-autotune --deterministic")
    # the captured step with cross-rank NCCL collectives inside, replayed,
    # equals the eager step bit for bit (the short and empty step 4 runs
    # eagerly and the graph is captured again after it)
    add_test(NAME nccl_np2_graph_equals_eager
             COMMAND ${TB_NP2_RUN} ${TB_ASYNC} --mode graph-eager ${TB_NP2_R50} --steps 10
                     --extra "--comm nccl --share-gpu --precision bf16 --layout nhwc --no-autotune --deterministic")
    # nccl-tests' sweep on 2 ranks sharing the GPU: every element of every
    # row checked against the exact sum, the bandwidth labelled as shared
    foreach(dt float bf16)
      if(dt STREQUAL float)
        set(_tb_np2_ar allreduce_bench_nccl_np2)
      else()
        set(_tb_np2_ar allreduce_bench_nccl_np2_bf16)
      endif()
      add_test(NAME ${_tb_np2_ar}
               COMMAND ${TB_NP2_RUN} ${TB_TEST_DIR}/expect_pass.sh "Out of bounds values : 0 OK" "path nccl-device .*, out of place,"
                       "# busbw: 2 ranks share one GPU" "^  +268435456 +[0-9]+ +${dt} +sum .* 0$"
                       -- ${MPIEXEC_EXECUTABLE} -n 2 ${TB_BIN} allreduce-bench --comm nccl --share-gpu --dtype ${dt}
                       -b 8 -e 256M -f 2 -n 5 -w 2 --timeout 120)
    endforeach()
    # a rank that passes the barrier and never queues its all-reduces (TB_TEST_FAULT=freeze-nccl): the other's
    # NCCL wait ends the run at the deadline it enforces, --timeout for each of the 3 queued (1 untimed + -w 2)
    # of size row 1, and its line says that deadline (it said 10 s, --timeout, after waiting 30)
    add_test(NAME allreduce_bench_nccl_np2_deadline
             COMMAND ${TB_NP2_RUN} ${TB_TEST_DIR}/expect_fail.sh
                     "did not finish within 30 s \\(--timeout 10 s for each of the 3 queued together\\)"
                     ${MPIEXEC_EXECUTABLE} -n 2 -x TB_TEST_FAULT=freeze-nccl:1:1 ${TB_BIN} allreduce-bench
                     --comm nccl --share-gpu -b 8 -e 16 -n 3 -w 2 --timeout 10)
    # the overlap, measured: a 2-rank ResNet-50 bf16 run over NCCL with its
    # scaling rows; /grad_ready and /buckets from CUDA events, consistent,
    # and report's overlap table (tests/test_project.py timeline)
    add_test(NAME nccl_np2_overlap_run
             COMMAND ${TB_NP2_RUN} sh -c "rm -f nccl_np2_overlap.h5 && exec \"$0\" \"$@\""
                     ${MPIEXEC_EXECUTABLE} -n 2 ${TB_BIN} --backend cuda --comm nccl --share-gpu --model resnet50
                     --precision bf16 --layout nhwc --image-size 128 --batch-size 32 --synthetic --no-autotune --steps 8
                     --warmup-steps 2 --scaling-steps 8 --scaling-warmup 3 --timeout 120
                     --results nccl_np2_overlap.h5)
    set_tests_properties(nccl_np2_overlap_run PROPERTIES FIXTURES_SETUP nccl_np2_overlap)
    add_test(NAME nccl_np2_overlap
             COMMAND ${TB_NP2_RUN} ${TB_PY} ${TB_TEST_DIR}/test_project.py timeline nccl_np2_overlap.h5
                     --trainbench ${TB_BIN} --clock "CUDA events")
    set_tests_properties(nccl_np2_overlap PROPERTIES FIXTURES_REQUIRED nccl_np2_overlap)
    # failures: every one ends the job within --timeout + 30 s, naming the
    # rank, host, step (and collective), exit non-zero, no process left,
    # the results file "aborted" (tests/test_resilience.py)
    set(TB_NP2_FAIL ${TB_NP2_RUN} ${TB_PY} ${TB_TEST_DIR}/test_resilience.py --trainbench ${TB_BIN}
                    --mpiexec ${MPIEXEC_EXECUTABLE} --ranks 2 --timeout 20 --grace 30
                    --extra "--backend cuda --comm nccl --share-gpu --precision bf16 --no-autotune")
    add_test(NAME nccl_np2_killed_in_backward COMMAND ${TB_NP2_FAIL} killed-bwd)
    add_test(NAME nccl_np2_frozen_in_backward COMMAND ${TB_NP2_FAIL} frozen-bwd)
    add_test(NAME nccl_np2_async_error COMMAND ${TB_NP2_FAIL} nccl-abort)
    set_tests_properties(${TB_NP2_TESTS} PROPERTIES TIMEOUT 600 PROCESSORS 2 ENVIRONMENT "${TB_MPI_TEST_ENV}")
    # started first (ctest -j runs the costlier first): what the issue asks
    # that no other stage reruns (the failures, the bf16 ResNet-50 replicas),
    # so a budget that ends the stage leaves the small dp tests Not Run
    set_tests_properties(nccl_np2_killed_in_backward nccl_np2_frozen_in_backward nccl_np2_async_error
                         nccl_np2_resnet50_bf16_dp_exact PROPERTIES COST 1000)
  else()
    foreach(t ${TB_NP2_TESTS})
      add_test(NAME ${t} COMMAND sh -c "echo 'SKIP: ${t}: this build lacks NCCL or MPI'; exit 77")
    endforeach()
  endif()
else()
  foreach(t ${TB_GPU_TESTS} ${TB_NP2_TESTS})
    add_test(NAME ${t} COMMAND sh -c "echo 'SKIP: ${t}: this build has no CUDA backend (TB_CUDA=OFF or no toolkit)'; exit 77")
  endforeach()
endif()
set_tests_properties(${TB_GPU_TESTS} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
set_tests_properties(${TB_NP2_TESTS} PROPERTIES LABELS "gpu;np2" SKIP_RETURN_CODE 77)
# --fuse graph's tests: their own suite stage (tests/gpu/run_suite.sh fused),
# minutes of planning and compiling fused engines the routine stage leaves out
set_tests_properties(cuda_fused cuda_fused_step cuda_fused_refused startup_plan_cache_gpu PROPERTIES LABELS "gpu;fused")

