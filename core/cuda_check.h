/* cuda_check.h - the CUDA runtime's check macro, for every floor that calls
 * the runtime (model/cuda, comm/ with NCCL, data/ with pinned memory and
 * nvJPEG, src/ for probe). The other GPU libraries keep their own macro
 * next to their only users: TB_CUDNN_CHECK / TB_CUBLAS_CHECK in
 * model/cuda/cuda_internal.h, TB_NCCL_CHECK in comm/comm_nccl.c.
 *
 * On failure: file:line, rank and host (tb_fatal_at prints them), the call,
 * the runtime's error name and string; then the whole job ends through
 * tb_abort (abort cleanups such as ncclCommAbort first, then MPI_Abort). */
#ifndef TB_CUDA_CHECK_H
#define TB_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "core/log.h"

#define TB_CUDA_CHECK(call)                                                                  \
    do {                                                                                     \
        cudaError_t tb_cuda_err_ = (call);                                                   \
        if (tb_cuda_err_ != cudaSuccess)                                                     \
            tb_fatal_at(__FILE__, __LINE__, "CUDA: %s failed: %s (%s)", #call,               \
                        cudaGetErrorString(tb_cuda_err_), cudaGetErrorName(tb_cuda_err_));   \
    } while (0)

/* After a kernel launch: launch-configuration errors now, not at the next sync. */
#define TB_CUDA_CHECK_LAUNCH(what)                                                           \
    do {                                                                                     \
        cudaError_t tb_cuda_err_ = cudaGetLastError();                                       \
        if (tb_cuda_err_ != cudaSuccess)                                                     \
            tb_fatal_at(__FILE__, __LINE__, "CUDA: launching %s failed: %s (%s)", (what),    \
                        cudaGetErrorString(tb_cuda_err_), cudaGetErrorName(tb_cuda_err_));   \
    } while (0)

#endif
