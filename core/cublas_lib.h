/* cublas_lib.h - cuBLAS and cuBLASLt, loaded (dlopen) the first time a GPU
 * path needs them, not when trainbench starts: mapping and relocating
 * libcublasLt (about 500 MB) costs every start about 0.13 s of CPU, CPU
 * backend runs and --help included, and a CPU-only host need not have it.
 * Its two users: the CUDA backend's linear layer (model/cuda) and probe's
 * GEMMs and library versions (src/device).
 *
 * Calls go through tb_cublas, whose members have the declared types of
 * the functions they stand for, so the compiler checks every call as it
 * would a direct one. cublas_v2.h's names apply: tb_cublas.cublasCreate is
 * the member cublasCreate_v2, looked up as "cublasCreate_v2". */
#ifndef TB_CUBLAS_LIB_H
#define TB_CUBLAS_LIB_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <stddef.h>

/* every function trainbench calls, in the library that holds it */
#define TB_CUBLASLT_FUNCS(X)                                                                                  \
    X(cublasLtGetVersion) X(cublasLtCreate) X(cublasLtDestroy)                                               \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)               \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate)           \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                               \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)
#define TB_CUBLAS_FUNCS(X)                                                                                    \
    X(cublasGetProperty) X(cublasGetStatusString) X(cublasCreate) X(cublasDestroy) X(cublasSetStream)       \
    X(cublasSetMathMode) X(cublasGemmEx)

#define TB_CUBLAS_MEMBER_(f) __typeof__(f) *f;
typedef struct {
    TB_CUBLASLT_FUNCS(TB_CUBLAS_MEMBER_)
    TB_CUBLAS_FUNCS(TB_CUBLAS_MEMBER_)
} tb_cublas_api;
#undef TB_CUBLAS_MEMBER_

/* The functions; valid once tb_cublas_load has returned 0. */
extern tb_cublas_api tb_cublas;

#define TB_CUBLAS_WHY_MAX 900 /* room for tb_cublas_load's line */

/* Loads libcublasLt.so.<major> and libcublas.so.<major> (the major version
 * trainbench was built with) once per process, thread-safe, through the
 * usual search (LD_LIBRARY_PATH, then the executable's RUNPATH, ...): 0, or
 * -1 with one line in why naming the file, the loader's error and what to
 * do (the same line on every later call). */
int tb_cublas_load(char *why, size_t len);

/* The file libcublasLt was loaded from ("" before a successful load). */
const char *tb_cublas_path(void);

/* cuBLAS's string for a status ("?" before a successful load). */
const char *tb_cublas_status_string(cublasStatus_t s);

#endif
