# tests/data.cmake: the data path (dataset index, JPEG loader, transforms,
# mkdata). Included by tests/CMakeLists.txt (TB_TEST_DIR, TB_BIN).
#   data_unit              test_data.c: crop geometry, resampling invariants,
#                          partial == whole-image decode, sharding over 1/2/3
#                          ranks with a remainder, 1 vs 4 threads bitwise,
#                          resume, output layouts, bad files and
#                          --strict-data, ImageFolder order, list files
#   data_synthetic_pool    test_synthetic.c: the pool's bits pinned, on 1 and
#                          3 threads; class structure; 2^20 classes
#   data_mkdata            test_mkdata.c: counts, sizes, 4:2:0, determinism
#   data_ref_boxes         data_ref.py: crop boxes == torchvision's get_params
#                          on the same draws (fallback path included)
#   data_ref_pixels        data_ref.py: eval/train pixels vs torchvision +
#                          Pillow (full/partial exact, fast within tolerance)
#   data_ref_corpus        data_ref.py: odd and bad files made with Pillow and
#                          cjpeg, decoded or skipped, --strict-data
#   data_ref_imagefolder   data_ref.py: labels and order == ImageFolder
# The data_ref_* tests need /usr/bin/python3 (or TB_PYTHON) with torch,
# torchvision and Pillow; without them they print why and exit 77 (skipped).

add_executable(tb_data_probe tb_data_probe.c)
target_link_libraries(tb_data_probe PRIVATE tb_data)

add_executable(test_data test_data.c test_data_files.c)  # bad files and the index in the second
target_link_libraries(test_data PRIVATE tb_data)
add_test(NAME data_unit COMMAND test_data ${TB_BIN})
set_tests_properties(data_unit PROPERTIES TIMEOUT 300 LABELS "data")

# the synthetic pool: the same bits on 1 and 3 threads and as every earlier
# version (pinned hashes), its class structure, 2^20 classes
add_executable(test_synthetic test_synthetic.c)
target_link_libraries(test_synthetic PRIVATE tb_data)
add_test(NAME data_synthetic_pool COMMAND test_synthetic)
set_tests_properties(data_synthetic_pool PROPERTIES TIMEOUT 120 LABELS "data")

# a list file's index line names the list file, not its directory (it said
# '# dataset lists (list file)' for lists/train.txt)
add_test(NAME data_list_file_named
         COMMAND ${TB_TEST_DIR}/expect_pass.sh "^# dataset lst_set/lists/train.txt \\(list file\\): 2 samples in 2 classes"
                 -- sh -c "rm -rf lst_set && \"$0\" mkdata --out lst_set --classes 2 --per-class 1 --min-side 64 --max-side 64 >/dev/null && mkdir lst_set/lists && printf '../class_000/img_000000.jpg 0\\n../class_001/img_000000.jpg 1\\n' > lst_set/lists/train.txt && \"$0\" loader-bench --index-only --data lst_set/lists/train.txt"
                 ${TB_BIN})
set_tests_properties(data_list_file_named PROPERTIES TIMEOUT 60 LABELS "data")

add_executable(test_mkdata test_mkdata.c)
target_link_libraries(test_mkdata PRIVATE tb_data)
add_test(NAME data_mkdata COMMAND test_mkdata ${TB_BIN})
set_tests_properties(data_mkdata PROPERTIES TIMEOUT 300 LABELS "data")

# Python references: TB_PYTHON if configured, else /usr/bin/python3; the
# script exits 77 (skipped) when torch, torchvision or Pillow is missing.
set(_tb_data_py "${TB_PYTHON}")
if(NOT _tb_data_py)
  find_program(_tb_data_py_found NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT _tb_data_py_found)
    find_program(_tb_data_py_found NAMES python3)
  endif()
  set(_tb_data_py "${_tb_data_py_found}")
endif()
foreach(what boxes pixels corpus imagefolder)
  if(_tb_data_py)
    add_test(NAME data_ref_${what} COMMAND ${_tb_data_py} ${TB_TEST_DIR}/data_ref.py ${what}
             --probe $<TARGET_FILE:tb_data_probe> --trainbench ${TB_BIN})
  else()
    add_test(NAME data_ref_${what} COMMAND sh -c
      "echo 'SKIP: data_ref_${what}: no python3 found at configure time (set -DTB_PYTHON=/path/to/python3)'; exit 77")
  endif()
  set_tests_properties(data_ref_${what} PROPERTIES
    SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "data;python"
    ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1;OMP_NUM_THREADS=1")
endforeach()

# The loader's feed features (issue 15): inline decode (0 workers), the
# deferred flip with uint8 output, non-blocking try_next, slot allocators,
# --decode gpu's loader logic on the host emulation of the GPU decoder (the
# same batches as the CPU path, fallbacks per file; several GPU stages the
# same as one), its routing rule on the fuzz corpus.
add_executable(test_loader_feed test_loader_feed.c)
target_link_libraries(test_loader_feed PRIVATE tb_data)
add_test(NAME data_loader_feed COMMAND test_loader_feed ${TB_TEST_DIR}/fuzz/corpus/jpeg)
set_tests_properties(data_loader_feed PROPERTIES TIMEOUT 300 LABELS "data")

# --nvjpeg cpu=PCT (issue 31) on the host emulation: the rule's exact
# counts, the batches byte for byte the CPU path's at cpu=50 and 90, the
# share's samples moving one for one out of the GPU's count.
add_executable(test_loader_cpu_share test_loader_cpu_share.c)
target_link_libraries(test_loader_cpu_share PRIVATE tb_data)
add_test(NAME data_loader_cpu_share COMMAND test_loader_cpu_share)
set_tests_properties(data_loader_cpu_share PROPERTIES TIMEOUT 120 LABELS "data")

# The loader's stage timeline, CPU-time accounting and --decode gpu's
# fences (issue 31) on the host: intervals inside the run and equal to the
# per-stage sums, the Chrome trace, the emulated GPU path with rows held
# back until their fence completes (ordered: the CPU path's batches; read
# without the fence: old rows, the planted error), device times collected
# while idle equal to sync=on's, process CPU time counting every thread,
# --nvjpeg's options. About 2 s.
add_executable(test_loader_timeline test_loader_timeline.c)
target_link_libraries(test_loader_timeline PRIVATE tb_data)
add_test(NAME data_loader_timeline COMMAND test_loader_timeline)
set_tests_properties(data_loader_timeline PROPERTIES TIMEOUT 120 LABELS "data")

# Host memory flat over a long loader run (issue 31): one loader, 70
# epochs of a small set, CPU decode and the emulated GPU path; resident
# memory after the warm-up and at the end within 1 %, and a planted leak of
# 4 KiB per batch caught by the same bound. About 1 s.
add_executable(test_loader_memory test_loader_memory.c)
target_link_libraries(test_loader_memory PRIVATE tb_data)
add_test(NAME data_loader_memory COMMAND test_loader_memory)
set_tests_properties(data_loader_memory PROPERTIES TIMEOUT 120 LABELS "data")

# Batches into a model through src/batch_upload (issue 15) on the CPU
# backend: the uint8 + flip path equals the float transform step for step,
# pinned and pageable; a slot never goes back while its copy is pending
# (events held pending, copies deferred until their event is waited for).
add_executable(test_batch_upload test_batch_upload.c)
target_link_libraries(test_batch_upload PRIVATE tb_app)
add_test(NAME feed_upload COMMAND test_batch_upload)
set_tests_properties(feed_upload PROPERTIES TIMEOUT 300 LABELS "data")

# loader-bench --feed on the CPU backend (issue 15): the data-loading table
# of SEEDS.md section 2 with the device columns marked as not measured; 3
# thread counts (0 = main thread) x pinned on/off = 6 rows on a small set.
add_test(NAME feed_cpu_table
         COMMAND sh -c "rm -rf feed_cpu_data feed_cpu.h5 && \"$0\" mkdata --out feed_cpu_data --classes 4 --per-class 12 --min-side 64 --max-side 96 >/dev/null && \"$0\" loader-bench --feed --backend cpu --data feed_cpu_data --model resnet18 --image-size 32 --batch-size 8 --threads 0,1,2 --prefetch 2 --pinned on,off --steps 2 --warmup 1 --compute-threads 2 --results feed_cpu.h5 | tee feed_cpu.txt && test \"$(grep -cE '^ +[0-9]+ +2 +(on|off) ' feed_cpu.txt)\" -eq 6 && grep -q 'GPU columns: not measured' feed_cpu.txt && test \"$(grep -cE '^ +[0-9]+ +2 +(on|off) +cpu +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +- +- +- ' feed_cpu.txt)\" -eq 6"
                 ${TB_BIN})
set_tests_properties(feed_cpu_table PROPERTIES TIMEOUT 600 LABELS "data" FIXTURES_SETUP feed_cpu)
if(_tb_data_py)
  add_test(NAME feed_cpu_results COMMAND ${_tb_data_py} ${TB_TEST_DIR}/check_feed.py feed_cpu.h5 --rows 6)
else()
  add_test(NAME feed_cpu_results COMMAND sh -c "echo 'SKIP: feed_cpu_results: no python3 found at configure time'; exit 77")
endif()
set_tests_properties(feed_cpu_results PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS "data;python"
                     FIXTURES_REQUIRED feed_cpu)

# the results file written after every row: a run killed after 2 of 4 rows
# leaves them on disk (status aborted), the whole run is complete (~10 s)
if(_tb_data_py)
  add_test(NAME feed_rows_written COMMAND sh ${TB_TEST_DIR}/feed_rows_written.sh ${TB_BIN} ${_tb_data_py})
else()
  add_test(NAME feed_rows_written COMMAND sh -c "echo 'SKIP: feed_rows_written: no python3 found at configure time'; exit 77")
endif()
set_tests_properties(feed_rows_written PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "data;python")
# NaN/Inf gradients end the feed with one line in both step modes (the
# asynchronous one only flags them on the device, as CUDA's steps do)
add_test(NAME feed_nonfinite COMMAND sh ${TB_TEST_DIR}/feed_nonfinite.sh ${TB_BIN})
set_tests_properties(feed_nonfinite PROPERTIES TIMEOUT 120 LABELS "data")

# --min-row-seconds: timed steps beyond --steps until a row lasts that long
# (on a GPU the default, 1.25 s, keeps every row inside what NVML's GPU-Util
# can speak for; the H200 run's 0.24-s rows could not); check_feed.py holds
# timed_steps, row_s, images and ms/batch to each other and to the minimum.
# 1 step against 2 s: a step takes ~0.2 s here, ~0.35 s under ASan, so
# every row must run on. The rows: the resident data (the on-device rate a
# loader row is measured against) and 4 loader threads (the summary's
# 4-thread row); the console log is bench/summary/feed.py's test input.
add_test(NAME feed_cpu_min_row
         COMMAND sh -c "rm -f feed_min_row.h5 feed_min_row.txt && \"$0\" loader-bench --feed --backend cpu --data feed_cpu_data --model resnet18 --image-size 32 --batch-size 8 --rows resident,4:2:off --steps 1 --warmup 1 --compute-threads 2 --min-row-seconds 2 --results feed_min_row.h5 > feed_min_row.txt; rc=$?; cat feed_min_row.txt; exit $rc"
                 ${TB_BIN})
set_tests_properties(feed_cpu_min_row PROPERTIES TIMEOUT 300 LABELS "data" FIXTURES_REQUIRED feed_cpu
                     FIXTURES_SETUP feed_min_row)
if(_tb_data_py)
  add_test(NAME feed_cpu_min_row_results COMMAND ${_tb_data_py} -c
    "import h5py,subprocess,sys; r=subprocess.call([sys.executable,'${TB_TEST_DIR}/check_feed.py','feed_min_row.h5','--rows','2']); f=h5py.File('feed_min_row.h5'); t=f['feed/timed_steps'][()]; s=f['feed/row_s'][()]; print('# timed steps', list(t), 'row seconds', list(s)); sys.exit(r or int(not (min(t) > 1 and min(s) >= 2 and f.attrs['min_row_seconds'] == 2)))")
else()
  add_test(NAME feed_cpu_min_row_results COMMAND sh -c "echo 'SKIP: no python3 found at configure time'; exit 77")
endif()
set_tests_properties(feed_cpu_min_row_results PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS "data;python"
                     FIXTURES_REQUIRED feed_min_row)
# bench/summary/feed.py (the summary's feed_* rows): from the stored H200
# and H100 feed logs and from feed_cpu_min_row's log of today's table
# (checked against its results file); a malformed row is refused. < 1 s.
if(_tb_data_py)
  add_test(NAME feed_summary_rows COMMAND ${_tb_data_py} ${TB_TEST_DIR}/test_summary_feed.py ${PROJECT_SOURCE_DIR}
           feed_min_row.txt feed_min_row.h5)
else()
  add_test(NAME feed_summary_rows COMMAND sh -c "echo 'SKIP: no python3 found at configure time'; exit 77")
endif()
set_tests_properties(feed_summary_rows PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS "data;python"
                     FIXTURES_REQUIRED feed_min_row ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")

# --decode gpu's crop + resize: the packed tables and the kernels'
# arithmetic (run on the host) equal the CPU path's Pillow-exact resize.
add_executable(test_gpu_resize test_gpu_resize.c)
target_link_libraries(test_gpu_resize PRIVATE tb_data)
add_test(NAME feed_gpu_resize_host COMMAND test_gpu_resize)
set_tests_properties(feed_gpu_resize_host PROPERTIES TIMEOUT 300 LABELS "data")

# --decode gpu without a GPU or nvJPEG: one clear line and a failing exit,
# from loader-bench, from loader-bench --feed on the CPU backend, and from
# train on the CPU backend.
add_test(NAME feed_decode_gpu_cpu_backend
         COMMAND ${TB_TEST_DIR}/expect_fail.sh "--decode gpu decodes on the GPU the model trains on: it needs the CUDA backend"
                 ${TB_BIN} loader-bench --feed --backend cpu --decode gpu --data feed_cpu_data --model resnet18
                 --image-size 32 --batch-size 8 --threads 0 --prefetch 2 --pinned on --steps 1 --warmup 0)
add_test(NAME feed_decode_gpu_train_cpu
         COMMAND ${TB_TEST_DIR}/expect_fail.sh "--decode gpu decodes into device memory and needs the CUDA backend"
                 ${TB_BIN} --backend cpu --decode gpu --data feed_cpu_data --image-size 32 --batch-size 8 --steps 1
                 --warmup-steps 0 --scaling-steps 0 --results feed_decode_gpu_train_cpu.h5)
set_tests_properties(feed_decode_gpu_cpu_backend feed_decode_gpu_train_cpu PROPERTIES
                     TIMEOUT 120 LABELS "data" FIXTURES_REQUIRED feed_cpu)
# --rows' optional 4th (decode), 5th (GPU stages) and 6th (the row's
# --nvjpeg) fields: with them given, the row's decode is the 4th field's
# (gpu here: refused on the CPU backend), a decode mode that does not exist
# is refused, and so is an --nvjpeg choice that does not.
add_test(NAME feed_rows_decode_field
         COMMAND ${TB_TEST_DIR}/expect_fail.sh "--decode gpu decodes on the GPU the model trains on: it needs the CUDA backend"
                 ${TB_BIN} loader-bench --feed --backend cpu --data feed_cpu_data --model resnet18
                 --image-size 32 --batch-size 8 --rows 0:2:on:gpu:1:sync=on+roi=off --steps 1 --warmup 0)
add_test(NAME feed_rows_bad_nvjpeg
         COMMAND ${TB_TEST_DIR}/expect_fail.sh "--rows, row 2: --nvjpeg: 'inflight=9' is not one of"
                 ${TB_BIN} loader-bench --feed --backend cpu --data feed_cpu_data --model resnet18
                 --image-size 32 --batch-size 8 --rows resident,0:2:on:gpu:1:sync=on+inflight=9 --steps 1 --warmup 0)
set_tests_properties(feed_rows_bad_nvjpeg PROPERTIES TIMEOUT 120 LABELS "data" FIXTURES_REQUIRED feed_cpu)
add_test(NAME feed_rows_bad_decode
         COMMAND ${TB_TEST_DIR}/expect_fail.sh "--rows expects THREADS:PREFETCH:on.off.:DECODE.:STREAMS..,... .*got '0:2:on:bogus:1'"
                 ${TB_BIN} loader-bench --feed --backend cpu --data feed_cpu_data --model resnet18
                 --image-size 32 --batch-size 8 --rows 0:2:on:bogus:1 --steps 1 --warmup 0)
set_tests_properties(feed_rows_decode_field feed_rows_bad_decode PROPERTIES
                     TIMEOUT 120 LABELS "data" FIXTURES_REQUIRED feed_cpu)
# (on a machine with a GPU and nvJPEG this one is the GPU tests' job: skipped)
if(TARGET tb_gpu_check)
  set(_tb_no_gpu sh ${TB_TEST_DIR}/no_gpu_run.sh $<TARGET_FILE:tb_gpu_check>)
else()
  set(_tb_no_gpu)
endif()
add_test(NAME feed_decode_gpu_refused
         COMMAND ${_tb_no_gpu} ${TB_TEST_DIR}/expect_fail.sh "loader: --decode gpu: (no CUDA device|this build has no nvJPEG)"
                 ${TB_BIN} loader-bench --data feed_cpu_data --decode gpu --threads 1 --batch-size 4 --batches 1
                 --image-size 32)
set_tests_properties(feed_decode_gpu_refused PROPERTIES TIMEOUT 120 LABELS "data" SKIP_RETURN_CODE 77
                     FIXTURES_REQUIRED feed_cpu)

# loader-bench's row: skipped counts the timed batches only; an empty shard
# and --decode gpu where it cannot run are refused before the table.
add_test(NAME loader_bench_rows COMMAND sh ${TB_TEST_DIR}/loader_bench_rows.sh ${TB_BIN})
set_tests_properties(loader_bench_rows PROPERTIES TIMEOUT 120 LABELS "data")

# --decode full on a 4 KB damaged file whose header says 16384x16384: named
# once, skipped, and its 1 GiB decode buffer let go (host RSS under 256 MiB)
if(TB_PYTHON)
  add_test(NAME decode_full_damaged_header COMMAND sh ${TB_TEST_DIR}/decode_full_bomb.sh ${TB_BIN} ${TB_PYTHON})
  set_tests_properties(decode_full_damaged_header PROPERTIES TIMEOUT 120 LABELS "data" SKIP_RETURN_CODE 77)
endif()

# ---- on a GPU (label gpu; skipped here): tests/gpu/README.md ----
add_executable(test_gpu_decode test_gpu_decode.c)
target_link_libraries(test_gpu_decode PRIVATE tb_data)
set(TB_FEED_GPU_TESTS feed_upload_cuda feed_gpu_decode feed_gpu_table feed_gpu_table_check feed_gpu_train_decode)
if(TARGET tb_cuda)
  add_test(NAME feed_upload_cuda COMMAND ${TB_GPU_RUN} $<TARGET_FILE:test_batch_upload> cuda)
  add_test(NAME feed_gpu_decode COMMAND ${TB_GPU_RUN} $<TARGET_FILE:test_gpu_decode> ${TB_TEST_DIR}/fuzz/corpus/jpeg)
  # the feed table on the GPU: NVML columns measured; CPU and GPU decode rows
  add_test(NAME feed_gpu_table COMMAND ${TB_GPU_RUN} sh ${TB_TEST_DIR}/feed_gpu.sh table ${TB_BIN})
  set_tests_properties(feed_gpu_table PROPERTIES FIXTURES_SETUP feed_gpu_results)
  if(_tb_data_py)
    add_test(NAME feed_gpu_table_check
             COMMAND ${TB_GPU_RUN} ${_tb_data_py} ${TB_TEST_DIR}/check_feed.py feed_gpu.h5 --rows 4 --device-measured 1)
  else()
    add_test(NAME feed_gpu_table_check COMMAND sh -c "echo 'SKIP: no python3 found at configure time'; exit 77")
  endif()
  set_tests_properties(feed_gpu_table_check PROPERTIES FIXTURES_REQUIRED feed_gpu_results)
  # train with --decode gpu (one rank): runs, and its results file says so
  add_test(NAME feed_gpu_train_decode COMMAND ${TB_GPU_RUN} sh ${TB_TEST_DIR}/feed_gpu.sh train ${TB_BIN})
  set_tests_properties(feed_upload_cuda feed_gpu_decode feed_gpu_table feed_gpu_train_decode PROPERTIES
                       TIMEOUT 600)
  set_tests_properties(feed_gpu_table feed_gpu_train_decode PROPERTIES FIXTURES_REQUIRED mkdata_gpu)
else()
  foreach(t ${TB_FEED_GPU_TESTS})
    add_test(NAME ${t} COMMAND sh -c "echo 'SKIP: ${t}: this build has no CUDA backend (TB_CUDA=OFF or no toolkit)'; exit 77")
  endforeach()
endif()
set_tests_properties(${TB_FEED_GPU_TESTS} PROPERTIES LABELS "gpu;data" SKIP_RETURN_CODE 77)

# bench/gpu_feed.sh's scripts on the host: loader_psnr.py through the GPU
# path's host emulation, feed_table.py on the CPU feed table.
if(_tb_data_py)
  add_test(NAME feed_scripts COMMAND sh ${TB_TEST_DIR}/feed_scripts.sh ${_tb_data_py} $<TARGET_FILE:tb_data_probe>
                                     ${PROJECT_SOURCE_DIR})
else()
  add_test(NAME feed_scripts COMMAND sh -c "echo 'SKIP: feed_scripts: no python3 found at configure time'; exit 77")
endif()
set_tests_properties(feed_scripts PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "data;python"
                     FIXTURES_REQUIRED feed_cpu ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1;OMP_NUM_THREADS=1")
