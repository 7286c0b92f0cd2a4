/* gpu_peaks.c - the datasheet table (see gpu_peaks.h). More specific names
 * come first: "H100 PCIe" and "H100 NVL" before plain "H100", "H200 NVL"
 * before "H200". Grace Hopper (GH200) gets none: its HBM (4.0 or 4.9 TB/s)
 * and its NVLink-C2C host link differ by model, and "H200" would match. */
#include "src/device/gpu_peaks.h"

#include <stddef.h>
#include <string.h>

static const tb_gpu_peak k_peaks[] = {
    {"H100 PCIe", "H100 PCIe 80GB", 51.2, 378.0, 756.0, 2000, 64,
     "NVIDIA H100 Tensor Core GPU datasheet (2023), PCIe column"},
    {"H100 NVL", "H100 NVL 94GB", 60.0, 417.5, 835.5, 3900, 64,
     "NVIDIA H100 Tensor Core GPU datasheet (2023), NVL column"},
    {"H100", "H100 SXM5 80GB", 67.0, 494.7, 989.4, 3350, 64,
     "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM column"},
    {"H800 PCIe", "H800 PCIe 80GB", 51.2, 378.0, 756.0, 2000, 64,
     "NVIDIA H800 PCIe product brief: H100 PCIe compute and memory"},
    {"H800", "H800 SXM5 80GB", 67.0, 494.7, 989.4, 3350, 64,
     "NVIDIA H800 datasheet: H100 SXM compute, NVLink 400 GB/s"},
    {"H200 NVL", "H200 NVL 141GB", 60.0, 417.5, 835.5, 4800, 64,
     "NVIDIA H200 Tensor Core GPU datasheet (2024), NVL column"},
    {"H200", "H200 SXM 141GB", 67.0, 494.7, 989.4, 4800, 64,
     "NVIDIA H200 Tensor Core GPU datasheet (2024), SXM column"},
    {"A100-SXM4-40GB", "A100 SXM4 40GB", 19.5, 156.0, 312.0, 1555, 32,
     "NVIDIA A100 Tensor Core GPU datasheet (2021)"},
    {"A100-PCIE-40GB", "A100 PCIe 40GB", 19.5, 156.0, 312.0, 1555, 32,
     "NVIDIA A100 Tensor Core GPU datasheet (2021)"},
    {"A100 80GB PCIe", "A100 PCIe 80GB", 19.5, 156.0, 312.0, 1935, 32,
     "NVIDIA A100 Tensor Core GPU datasheet (2021)"},
    {"A100", "A100 SXM4 80GB", 19.5, 156.0, 312.0, 2039, 32,
     "NVIDIA A100 Tensor Core GPU datasheet (2021)"},
};

const tb_gpu_peak *tb_gpu_peak_find(const char *name) {
    if (!name || strstr(name, "GH200")) return NULL;
    for (size_t i = 0; i < sizeof k_peaks / sizeof k_peaks[0]; i++)
        if (strstr(name, k_peaks[i].match)) return &k_peaks[i];
    return NULL;
}
