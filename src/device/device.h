/* device.h - the device room's public face: facts about the machine for
 * the rooms above. NVML (nvml.h), the CUDA runtime calls src/ makes itself
 * (gpu_runtime.h), library versions compiled vs loaded (gpu_versions.h),
 * datasheet peaks (gpu_peaks.h), and what probe measures on the GPU and the
 * CPU (probe_gpu.h, probe_cpu.h). */
#ifndef TB_DEVICE_H
#define TB_DEVICE_H

#include "src/device/gpu_peaks.h"
#include "src/device/gpu_runtime.h"
#include "src/device/gpu_versions.h"
#include "src/device/nvml.h"
#include "src/device/probe_cpu.h"
#include "src/device/probe_gpu.h"

#endif
