/* gpu_peaks.h - datasheet ceilings of common training GPUs, printed beside
 * what probe measures (dense tensor-core rates: NVIDIA's datasheets quote
 * TF32/BF16 "with sparsity", twice these). */
#ifndef TB_GPU_PEAKS_H
#define TB_GPU_PEAKS_H

typedef struct {
    const char *match;       /* substring of the CUDA device name */
    const char *label;       /* "H100 SXM5 80GB" */
    double fp32_tflops, tf32_tflops, bf16_tflops; /* dense */
    double hbm_gbs;          /* device memory bandwidth, GB/s */
    double pcie_gbs;         /* host link, one direction, GB/s */
    const char *source;
} tb_gpu_peak;

/* The entry for a device name ("NVIDIA H100 80GB HBM3"), or NULL. */
const tb_gpu_peak *tb_gpu_peak_find(const char *device_name);

#endif
