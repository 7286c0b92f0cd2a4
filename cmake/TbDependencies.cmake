# Finds what trainbench builds against. Required: HDF5, libjpeg-turbo, a CBLAS,
# OpenMP. Detected: CUDA toolkit (+ cuDNN, NCCL) and MPI. Each finding is
# described in a TB_*_DESC variable that the top level prints.

# ---- HDF5 (required) ------------------------------------------------------
find_package(HDF5 REQUIRED COMPONENTS C)
set(TB_HDF5_LIBS "${HDF5_C_LIBRARIES}")
add_library(tb_hdf5 INTERFACE)
target_include_directories(tb_hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS})
target_link_libraries(tb_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
target_compile_definitions(tb_hdf5 INTERFACE ${HDF5_C_DEFINITIONS})

# ---- libjpeg-turbo (required; the TurboJPEG API) --------------------------
find_path(TB_TURBOJPEG_INCLUDE turbojpeg.h)
find_library(TB_TURBOJPEG_LIB turbojpeg)
if(NOT TB_TURBOJPEG_INCLUDE OR NOT TB_TURBOJPEG_LIB)
  message(FATAL_ERROR "libjpeg-turbo's TurboJPEG API not found: install libturbojpeg0-dev "
                      "(Debian) or set CMAKE_PREFIX_PATH to your libjpeg-turbo install")
endif()
add_library(tb_turbojpeg INTERFACE)
target_include_directories(tb_turbojpeg INTERFACE ${TB_TURBOJPEG_INCLUDE})
target_link_libraries(tb_turbojpeg INTERFACE ${TB_TURBOJPEG_LIB})

# ---- libjpeg API of the same libjpeg-turbo (required; partial decode) ------
# The loader's crop-aware decode needs jpeg_crop_scanline / jpeg_skip_scanlines
# and DCT scaling, which only the libjpeg API offers.
find_path(TB_LIBJPEG_INCLUDE jpeglib.h)
find_library(TB_LIBJPEG_LIB jpeg)
if(NOT TB_LIBJPEG_INCLUDE OR NOT TB_LIBJPEG_LIB)
  message(FATAL_ERROR "libjpeg-turbo's libjpeg API (jpeglib.h, libjpeg) not found: install "
                      "libjpeg62-turbo-dev (Debian) or set CMAKE_PREFIX_PATH to your "
                      "libjpeg-turbo install")
endif()
include(CheckSymbolExists)
include(CMakePushCheckState)
cmake_push_check_state()
set(CMAKE_REQUIRED_INCLUDES ${TB_LIBJPEG_INCLUDE})
set(CMAKE_REQUIRED_LIBRARIES ${TB_LIBJPEG_LIB})
check_symbol_exists(jpeg_crop_scanline "stdio.h;jpeglib.h" TB_HAVE_JPEG_CROP_SCANLINE)
cmake_pop_check_state()
if(NOT TB_HAVE_JPEG_CROP_SCANLINE)
  message(FATAL_ERROR "${TB_LIBJPEG_LIB} lacks jpeg_crop_scanline: it is not libjpeg-turbo "
                      ">= 1.5; install libjpeg62-turbo-dev (Debian)")
endif()
add_library(tb_libjpeg INTERFACE)
target_include_directories(tb_libjpeg INTERFACE ${TB_LIBJPEG_INCLUDE})
target_link_libraries(tb_libjpeg INTERFACE ${TB_LIBJPEG_LIB})

# ---- CBLAS (required): OpenBLAS preferred, any CBLAS accepted -------------
include(CheckSymbolExists)
include(CMakePushCheckState)
find_path(TB_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas)
find_library(TB_OPENBLAS_LIB openblas)
if(TB_OPENBLAS_LIB)
  set(TB_BLAS_LIBS ${TB_OPENBLAS_LIB})
  set(TB_BLAS_DESC "OpenBLAS (${TB_OPENBLAS_LIB})")
else()
  find_package(BLAS)
  find_library(TB_CBLAS_LIB cblas)
  set(TB_BLAS_LIBS ${TB_CBLAS_LIB} ${BLAS_LIBRARIES})
  set(TB_BLAS_DESC "generic CBLAS (${TB_BLAS_LIBS})")
endif()
if(NOT TB_CBLAS_INCLUDE OR NOT TB_BLAS_LIBS)
  message(FATAL_ERROR "no CBLAS found: install libopenblas-dev (Debian) or point "
                      "CMAKE_PREFIX_PATH at a BLAS with cblas.h")
endif()
cmake_push_check_state()
set(CMAKE_REQUIRED_INCLUDES ${TB_CBLAS_INCLUDE})
set(CMAKE_REQUIRED_LIBRARIES ${TB_BLAS_LIBS})
check_symbol_exists(cblas_sgemm cblas.h TB_HAVE_CBLAS_SGEMM)
check_symbol_exists(openblas_set_num_threads cblas.h TB_HAVE_OPENBLAS_THREADS)
cmake_pop_check_state()
if(NOT TB_HAVE_CBLAS_SGEMM)
  message(FATAL_ERROR "${TB_BLAS_DESC} does not provide cblas_sgemm")
endif()
add_library(tb_blas INTERFACE)
target_include_directories(tb_blas INTERFACE ${TB_CBLAS_INCLUDE})
target_link_libraries(tb_blas INTERFACE ${TB_BLAS_LIBS})
if(TB_HAVE_OPENBLAS_THREADS)
  target_compile_definitions(tb_blas INTERFACE TB_HAVE_OPENBLAS_THREADS=1)
endif()

# ---- OpenMP (required: the CPU backend's threads) --------------------------
find_package(OpenMP REQUIRED COMPONENTS C)

find_library(TB_LIBM m)

# ---- CUDA from NVIDIA's PyPI wheels (TB_CUDA_WHEELS) ------------------------
# launch/install_gpu.sh installs nvcc, the CUDA runtime, cuBLAS, cuDNN, NCCL
# and nvJPEG as NVIDIA's wheels (pinned in launch/cuda-wheels.txt) into a
# virtual environment, .venv-cuda at the top of the source tree unless told
# otherwise. Their layout under site-packages/nvidia/:
#   cu13/{bin/nvcc, nvvm/, include/, lib/lib*.so.13, lib/libcudart_static.a}
#   cudnn/{include/cudnn*.h, lib/libcudnn*.so.9}   nccl/{include/nccl.h, lib/libnccl.so.2}
# a toolkit without the unversioned lib*.so links, so the libraries are named
# here by file (and the search below takes the versioned names too). The
# executables get these directories as their RUNPATH (CMake's build RPATH),
# so they run without LD_LIBRARY_PATH. TB_CUDA_WHEELS: the environment, its
# site-packages, or its nvidia/ directory; empty: .venv-cuda when it exists.
set(TB_CUDA_WHEELS "" CACHE PATH "Virtual environment (or its nvidia/ directory) with NVIDIA's CUDA wheels; empty: ./.venv-cuda if present")
set(TB_CUDA_FROM_DESC "")
set(_tb_nv "")
if(NOT TB_CUDA STREQUAL "OFF")
  set(_tb_wheels "${TB_CUDA_WHEELS}")
  if(NOT _tb_wheels AND EXISTS "${PROJECT_SOURCE_DIR}/.venv-cuda")
    set(_tb_wheels "${PROJECT_SOURCE_DIR}/.venv-cuda")
  endif()
  if(_tb_wheels)
    get_filename_component(_tb_wheels "${_tb_wheels}" ABSOLUTE BASE_DIR "${CMAKE_BINARY_DIR}")
    file(GLOB _tb_nv_cands "${_tb_wheels}/cu13" "${_tb_wheels}/nvidia/cu13"
         "${_tb_wheels}/lib/python3*/site-packages/nvidia/cu13"
         "${_tb_wheels}/lib64/python3*/site-packages/nvidia/cu13")
    if(_tb_nv_cands)
      list(GET _tb_nv_cands 0 _tb_cu13)
      get_filename_component(_tb_nv "${_tb_cu13}" DIRECTORY)
    elseif(TB_CUDA_WHEELS)
      message(FATAL_ERROR "TB_CUDA_WHEELS=${TB_CUDA_WHEELS} holds no nvidia/cu13 (NVIDIA's CUDA 13 "
                          "wheels): run launch/install_gpu.sh --venv ${TB_CUDA_WHEELS}, or point it at the "
                          "virtual environment they were installed into")
    endif()
  endif()
  if(_tb_nv)
    set(_tb_cu13 "${_tb_nv}/cu13")
    # nvcc links against $TOP/lib64 (its nvcc.profile), which a toolkit has
    # and the wheels lack: one link, lib64 -> lib, makes that path true
    if(NOT EXISTS "${_tb_cu13}/lib64" AND EXISTS "${_tb_cu13}/lib")
      file(CREATE_LINK lib "${_tb_cu13}/lib64" RESULT _tb_ln SYMBOLIC)
      if(NOT _tb_ln EQUAL 0)
        message(FATAL_ERROR "${_tb_cu13}/lib64 is missing and cannot be made (${_tb_ln}): nvcc links "
                            "from there; create it as a link to lib (ln -s lib ${_tb_cu13}/lib64)")
      endif()
    endif()
    # A build directory configured before with another CUDA (a toolkit in
    # /usr/local/cuda) keeps that compiler, which CMake cannot change there,
    # and its cached libraries: mixing them with the wheels' would build
    # against two CUDAs. The compiler: stop with what to do; the libraries:
    # searched again (from the wheels, or CUDNN_ROOT / NCCL_ROOT).
    string(FIND "${CMAKE_CUDA_COMPILER}" "${_tb_cu13}/" _tb_in_wheels)
    if(CMAKE_CUDA_COMPILER AND NOT _tb_in_wheels EQUAL 0)
      message(FATAL_ERROR "this build directory (${CMAKE_BINARY_DIR}) was configured with the CUDA compiler "
                          "${CMAKE_CUDA_COMPILER}, which CMake cannot change in it; to build with NVIDIA's wheels "
                          "in ${_tb_nv}, configure a fresh directory (rm -rf ${CMAKE_BINARY_DIR}, then the same "
                          "cmake command), or keep that CUDA: move ${PROJECT_SOURCE_DIR}/.venv-cuda away and "
                          "configure without -DTB_CUDA_WHEELS")
    endif()
    foreach(_tb_v CUDA_cudart_LIBRARY CUDA_cublas_LIBRARY CUDA_cublasLt_LIBRARY CUDA_CUDART TB_CUDNN_INCLUDE
                  TB_CUDNN_LIB TB_NCCL_INCLUDE TB_NCCL_LIB)
      string(FIND "${${_tb_v}}" "${_tb_nv}/" _tb_in_wheels)
      if(${_tb_v} AND NOT _tb_in_wheels EQUAL 0)
        unset(${_tb_v} CACHE)
      endif()
    endforeach()
    if(NOT CMAKE_CUDA_COMPILER AND EXISTS "${_tb_cu13}/bin/nvcc")
      # also replaces a NOTFOUND left by an earlier configure without the wheels
      set(CMAKE_CUDA_COMPILER "${_tb_cu13}/bin/nvcc" CACHE FILEPATH "CUDA compiler" FORCE)
    endif()
    set(CUDAToolkit_ROOT "${_tb_cu13}")
    foreach(_tb_l cudart cublas cublasLt)
      if(EXISTS "${_tb_cu13}/lib/lib${_tb_l}.so.13" AND NOT CUDA_${_tb_l}_LIBRARY)
        set(CUDA_${_tb_l}_LIBRARY "${_tb_cu13}/lib/lib${_tb_l}.so.13" CACHE FILEPATH "" FORCE)
      endif()
    endforeach()
    if(EXISTS "${_tb_cu13}/lib/libcudart.so.13" AND NOT CUDA_CUDART)
      set(CUDA_CUDART "${_tb_cu13}/lib/libcudart.so.13" CACHE FILEPATH "" FORCE)
    endif()
    if(NOT NVJPEG_ROOT AND EXISTS "${_tb_cu13}/include/nvjpeg.h")
      set(NVJPEG_ROOT "${_tb_cu13}" CACHE PATH "" FORCE)
    endif()
    set(TB_CUDA_FROM_DESC "NVIDIA's wheels in ${_tb_nv}")
  endif()
endif()

# ---- CUDA toolkit, cuDNN, cuBLAS(Lt), NCCL (detected) -----------------------
# TB_CUDA=AUTO builds the CUDA backend when nvcc, cuBLAS(Lt) and cuDNN are all
# found; TB_CUDA=ON fails configuration unless it is really built. NCCL is
# separate (TB_HAVE_NCCL): the CUDA backend works without it (MPI moves the
# gradients through host staging), the NCCL path needs it.
set(TB_CUDA_DESC "not searched (TB_CUDA=OFF)")
set(TB_CUDNN_DESC "-")
set(TB_NCCL_DESC "-")
set(TB_HAVE_CUDA OFF)
set(TB_HAVE_NCCL OFF)
if(NOT TB_CUDA STREQUAL "OFF")
  set(_tb_cuda_missing "")
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  if(NOT CMAKE_CUDA_COMPILER)
    list(APPEND _tb_cuda_missing "nvcc (put it on PATH or set CMAKE_CUDA_COMPILER)")
  endif()
  if(NOT CUDAToolkit_FOUND)
    list(APPEND _tb_cuda_missing "the CUDA toolkit (set CUDAToolkit_ROOT)")
  else()
    if(NOT TARGET CUDA::cublas OR NOT TARGET CUDA::cublasLt)
      list(APPEND _tb_cuda_missing "cuBLAS / cuBLASLt")
    endif()
    # With the wheels: cuDNN and NCCL from them too (or from CUDNN_ROOT /
    # NCCL_ROOT), never a system copy of another version beside them.
    set(_tb_cudnn_hints ${CUDAToolkit_INCLUDE_DIRS})
    set(_tb_cudnn_lib_hints ${CUDAToolkit_LIBRARY_DIR})
    set(_tb_only_hints "")
    if(_tb_nv)
      set(_tb_cudnn_hints "${_tb_nv}/cudnn")
      set(_tb_cudnn_lib_hints "${_tb_nv}/cudnn")
      set(_tb_only_hints NO_DEFAULT_PATH)
    endif()
    find_path(TB_CUDNN_INCLUDE cudnn.h HINTS ENV CUDNN_ROOT ${_tb_cudnn_hints}
              PATH_SUFFIXES include ${_tb_only_hints})
    find_library(TB_CUDNN_LIB NAMES cudnn libcudnn.so.9 NAMES_PER_DIR
                 HINTS ENV CUDNN_ROOT ${_tb_cudnn_lib_hints} PATH_SUFFIXES lib lib64 ${_tb_only_hints})
    if(NOT TB_CUDNN_INCLUDE OR NOT TB_CUDNN_LIB)
      list(APPEND _tb_cuda_missing "cuDNN 9 (cudnn.h, libcudnn; set CUDNN_ROOT)")
    else()
      file(STRINGS ${TB_CUDNN_INCLUDE}/cudnn_version.h _tb_cudnn_v REGEX "define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
      string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*CUDNN_MINOR ([0-9]+).*CUDNN_PATCHLEVEL ([0-9]+).*" "\\1.\\2.\\3"
             TB_CUDNN_VERSION "${_tb_cudnn_v}")
      if(TB_CUDNN_VERSION VERSION_LESS 9.0)
        list(APPEND _tb_cuda_missing "cuDNN >= 9 (found ${TB_CUDNN_VERSION})")
      endif()
      set(TB_CUDNN_DESC "${TB_CUDNN_VERSION} (${TB_CUDNN_LIB})")
    endif()
    set(_tb_nccl_hints ${CUDAToolkit_INCLUDE_DIRS})
    set(_tb_nccl_lib_hints ${CUDAToolkit_LIBRARY_DIR})
    if(_tb_nv)
      set(_tb_nccl_hints "${_tb_nv}/nccl")
      set(_tb_nccl_lib_hints "${_tb_nv}/nccl")
    endif()
    find_path(TB_NCCL_INCLUDE nccl.h HINTS ENV NCCL_ROOT ${_tb_nccl_hints}
              PATH_SUFFIXES include ${_tb_only_hints})
    find_library(TB_NCCL_LIB NAMES nccl libnccl.so.2 NAMES_PER_DIR
                 HINTS ENV NCCL_ROOT ${_tb_nccl_lib_hints} PATH_SUFFIXES lib lib64 ${_tb_only_hints})
    if(TB_NCCL_INCLUDE AND TB_NCCL_LIB)
      file(STRINGS ${TB_NCCL_INCLUDE}/nccl.h _tb_nccl_v REGEX "define NCCL_(MAJOR|MINOR|PATCH) ")
      string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*NCCL_MINOR ([0-9]+).*NCCL_PATCH ([0-9]+).*" "\\1.\\2.\\3"
             TB_NCCL_VERSION "${_tb_nccl_v}")
      set(TB_NCCL_DESC "${TB_NCCL_VERSION} (${TB_NCCL_LIB})")
      # ncclCommSplit with a config and NCCL_SPLIT_NOCOLOR, non-blocking
      # communicators, ncclCommFinalize: 2.18 and newer
      if(TB_NCCL_VERSION VERSION_LESS 2.18)
        set(TB_NCCL_DESC "${TB_NCCL_VERSION} found, 2.18 or newer needed (set NCCL_ROOT): gradients move over MPI only")
        unset(TB_NCCL_LIB CACHE)
        set(TB_NCCL_LIB "")
      endif()
    else()
      set(TB_NCCL_DESC "not found (set NCCL_ROOT): gradients move over MPI only")
    endif()
  endif()
  if(_tb_cuda_missing STREQUAL "")
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      # A100 (sm_80), H100/H200 (sm_90) as machine code, plus sm_90 PTX that
      # the driver compiles for anything newer.
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual" CACHE STRING "CUDA targets")
    endif()
    enable_language(CUDA)
    # Executables stay linked by the C compiler (as without CUDA, so link
    # options such as -fsanitize keep working): the .cu objects need no
    # device link, and cudart comes in as a static library.
    set(CMAKE_CUDA_LINKER_PREFERENCE_PROPAGATES OFF)
    set(TB_HAVE_CUDA ON)
    # cuBLAS(Lt) is opened when a GPU path first needs it (core/cublas_lib.c),
    # not linked, so no start pays for mapping it: its folder joins the
    # executables' RUNPATH as a linked library's would
    get_filename_component(_tb_cublas_dir "${CUDA_cublasLt_LIBRARY}" DIRECTORY)
    list(APPEND CMAKE_BUILD_RPATH "${_tb_cublas_dir}")
    if(TB_NCCL_INCLUDE AND TB_NCCL_LIB)
      set(TB_HAVE_NCCL ON)
    endif()
    set(TB_CUDA_DESC "${CUDAToolkit_VERSION}, nvcc ${CMAKE_CUDA_COMPILER_VERSION}, targets ${CMAKE_CUDA_ARCHITECTURES}")
  else()
    string(REPLACE ";" ", " _tb_cuda_missing_s "${_tb_cuda_missing}")
    set(TB_CUDA_DESC "not built: missing ${_tb_cuda_missing_s}")
    if(TB_CUDA STREQUAL "ON")
      message(FATAL_ERROR "TB_CUDA=ON but the CUDA backend cannot be built: missing "
                          "${_tb_cuda_missing_s}")
    endif()
  endif()
endif()

# ---- nvJPEG (detected; --decode gpu) ------------------------------------------
# The GPU decode path needs nvjpeg.h and libnvjpeg from the CUDA toolkit, or
# from NVJPEG_ROOT (cache variable or environment): the PyPI wheel
# nvidia-nvjpeg unpacks to nvidia/cu13/{include/nvjpeg.h,lib/libnvjpeg.so.13},
# which .ci/run fetches. Without it the build is complete and --decode gpu
# says in one line that it is missing.
set(NVJPEG_ROOT "$ENV{NVJPEG_ROOT}" CACHE PATH "Directory with include/nvjpeg.h and lib/libnvjpeg.so* (--decode gpu)")
set(TB_NVJPEG_DESC "not searched (no CUDA backend)")
set(TB_HAVE_NVJPEG OFF)
if(TB_HAVE_CUDA)
  find_path(TB_NVJPEG_INCLUDE nvjpeg.h HINTS ${NVJPEG_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include
            NO_CACHE)
  find_library(TB_NVJPEG_LIB NAMES nvjpeg libnvjpeg.so.${CUDAToolkit_VERSION_MAJOR}
               HINTS ${NVJPEG_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64 NO_CACHE)
  if(TB_NVJPEG_INCLUDE AND TB_NVJPEG_LIB)
    file(STRINGS ${TB_NVJPEG_INCLUDE}/nvjpeg.h _tb_nvjpeg_v REGEX "define NVJPEG_VER_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*NVJPEG_VER_MAJOR ([0-9]+).*NVJPEG_VER_MINOR ([0-9]+).*NVJPEG_VER_PATCH ([0-9]+).*"
           "\\1.\\2.\\3" TB_NVJPEG_VERSION "${_tb_nvjpeg_v}")
    string(REGEX MATCH "^[0-9]+" _tb_nvjpeg_major "${TB_NVJPEG_VERSION}")
    if(NOT _tb_nvjpeg_major STREQUAL CUDAToolkit_VERSION_MAJOR)
      set(TB_NVJPEG_DESC "found ${TB_NVJPEG_VERSION} (${TB_NVJPEG_LIB}) but CUDA is ${CUDAToolkit_VERSION}: not used")
    else()
      set(TB_HAVE_NVJPEG ON)
      set(TB_NVJPEG_DESC "${TB_NVJPEG_VERSION} (${TB_NVJPEG_LIB}): --decode gpu")
    endif()
  else()
    set(TB_NVJPEG_DESC "not found (set NVJPEG_ROOT): --decode gpu not built")
  endif()
endif()

# ---- MPI (detected) ---------------------------------------------------------
set(TB_MPI_DESC "not searched (TB_MPI=OFF)")
set(TB_HAVE_MPI OFF)
if(NOT TB_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS C)
  if(MPI_C_FOUND)
    set(TB_HAVE_MPI ON)
    set(TB_MPI_DESC "MPI ${MPI_C_VERSION} (${MPI_C_LIBRARIES}); launcher ${MPIEXEC_EXECUTABLE}")
  else()
    set(TB_MPI_DESC "not found")
    if(TB_MPI STREQUAL "ON")
      message(FATAL_ERROR "TB_MPI=ON but no MPI was found: install libopenmpi-dev (Debian)")
    endif()
  endif()
endif()

# ---- Python with torch + h5py (tests only; tests skip visibly without it) ---
set(TB_PYTHON "" CACHE FILEPATH "Python interpreter with torch, torchvision and h5py (tests)")
if(NOT TB_PYTHON)
  foreach(cand /usr/bin/python3 python3)
    find_program(_tb_py NAMES ${cand} NO_CACHE)
    if(_tb_py)
      execute_process(COMMAND ${_tb_py} -c "import torch, torchvision, h5py"
                      RESULT_VARIABLE _tb_py_rc OUTPUT_QUIET ERROR_QUIET)
      if(_tb_py_rc EQUAL 0)
        set(TB_PYTHON ${_tb_py} CACHE FILEPATH "" FORCE)
        break()
      endif()
    endif()
    unset(_tb_py)
  endforeach()
endif()
if(TB_PYTHON)
  set(TB_PYTHON_DESC "${TB_PYTHON} (torch, torchvision, h5py)")
else()
  set(TB_PYTHON_DESC "no python3 with torch+torchvision+h5py: golden tests will SKIP")
endif()

# What this build contains (printed at the end of configuration).
set(TB_BACKENDS "cpu")  # the top level adds cuda once model/cuda's target exists
if(TB_HAVE_MPI)
  set(TB_COMM_PATHS "mpi (all-reduce on host buffers)")
else()
  set(TB_COMM_PATHS "single-process (no MPI)")
endif()
