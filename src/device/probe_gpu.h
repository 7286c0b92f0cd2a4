/* probe_gpu.h - what `trainbench probe` measures on a GPU: library versions
 * compiled against vs loaded (no GPU needed), the device's facts, pinned
 * host<->device and device<->device bandwidth, and GEMM rates in fp32, tf32
 * and bf16 (SEEDS.md section 3's self-check). probe_gpu.c on CUDA builds,
 * probe_gpu_none.c otherwise. */
#ifndef TB_PROBE_GPU_H
#define TB_PROBE_GPU_H

#include <stddef.h>

#include "src/device/gpu_versions.h"

#define TB_PROBE_NBW 2    /* transfer sizes: 4 MiB, 256 MiB */
#define TB_PROBE_NGEMM 2  /* GEMM sizes: 4096, 8192 */
enum { TB_PROBE_FP32, TB_PROBE_TF32, TB_PROBE_BF16, TB_PROBE_NPREC };

typedef struct {
    int built_with_cuda;
    /* ---- versions (tb_probe_gpu_versions) */
    int runtime_version, driver_version;   /* CUDA codes; driver 0: none */
    tb_lib_check libs[5];
    int nlibs;
    char cublas_path[512];                 /* the libcublasLt file loaded ("": not loaded) */
    /* ---- the device (tb_probe_gpu_measure) */
    int device_count;
    int device;
    char name[256], bus_id[32];   /* name: cudaDeviceProp.name is 256 */
    int cc_major, cc_minor, sms;
    double mem_bytes, l2_bytes;
    int sm_clock_mhz_max, mem_clock_mhz_max, mem_bus_bits;
    /* median times of pinned copies; [0] 4 MiB, [1] 256 MiB */
    double bw_bytes[TB_PROBE_NBW], h2d_ms[TB_PROBE_NBW], d2h_ms[TB_PROBE_NBW];
    double d2d_bytes, d2d_ms;              /* one copy of d2d_bytes: read + write = 2x */
    /* median GEMM times, C[n,n] = A[n,n] B[n,n], random inputs */
    int gemm_n[TB_PROBE_NGEMM];
    double gemm_ms[TB_PROBE_NPREC][TB_PROBE_NGEMM];
} tb_probe_gpu;

/* Versions of the CUDA runtime, driver, cuDNN, cuBLAS and NCCL, each judged
 * (gpu_versions.h). Needs no GPU. */
void tb_probe_gpu_versions(tb_probe_gpu *p);
/* Device facts and the measurements on `device`; quick skips the 256 MiB
 * copies and the 8192 GEMMs. Returns 0, or -1 with a one-line reason when
 * there is no usable device. */
int tb_probe_gpu_measure(tb_probe_gpu *p, int device, int quick, char *err, size_t errlen);

#endif
