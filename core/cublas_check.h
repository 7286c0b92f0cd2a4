/* cublas_check.h - cuBLAS's check macro, for its two users: the CUDA
 * backend's linear layer (model/cuda) and probe's GEMM ceilings (src/).
 * On failure: file:line, rank and host, the call and cuBLAS's own status
 * string; then the whole job ends through tb_abort. The calls go through
 * tb_cublas (core/cublas_lib.h: the libraries are loaded at run time). */
#ifndef TB_CUBLAS_CHECK_H
#define TB_CUBLAS_CHECK_H

#include "core/cublas_lib.h"
#include "core/log.h"

#define TB_CUBLAS_CHECK(call)                                                                \
    do {                                                                                     \
        cublasStatus_t tb_cublas_st_ = (call);                                               \
        if (tb_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                          \
            tb_fatal_at(__FILE__, __LINE__, "cuBLAS: %s failed: %s (%d)", #call,             \
                        tb_cublas_status_string(tb_cublas_st_), (int)tb_cublas_st_);         \
    } while (0)

#endif
