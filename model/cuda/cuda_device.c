/* cuda_device.c - how many CUDA devices this process can use and, when
 * none, why, in words a user without a GPU reads once: no NVIDIA driver on
 * the machine, a driver older than this build's CUDA, or a driver that sees
 * no device (CUDA_VISIBLE_DEVICES included). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cuda/cuda_backend.h"

/* The kernel module's version line, "NVRM version: NVIDIA UNIX x86_64 Kernel
 * Module  580.65.06  Sun Jul 27 ..." -> "580.65.06"; 0 when no NVIDIA driver
 * is loaded (no /proc/driver/nvidia/version; TB_TEST_NVIDIA_VERSION_FILE
 * stands in for it in tests). */
static int driver_version(char *out, size_t len) {
    const char *path = getenv("TB_TEST_NVIDIA_VERSION_FILE");
    FILE *f = fopen(path && path[0] ? path : "/proc/driver/nvidia/version", "r");
    if (!f) return 0;
    char line[256] = "";
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (len) out[0] = '\0';
    if (!ok) return 1;
    /* the first token of the form N.N... after "Module" */
    const char *p = strstr(line, "Module");
    for (p = p ? p : line; *p; p++) {
        if (*p >= '0' && *p <= '9') {
            size_t n = strspn(p, "0123456789.");
            if (memchr(p, '.', n)) {
                snprintf(out, len, "%.*s", (int)n, p);
                break;
            }
            p += n - 1;
        }
    }
    return 1;
}

int tb_cuda_device_count(char *why, size_t len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (e == cudaSuccess && n > 0) return n;
    (void)cudaGetLastError();
    if (!why) return e == cudaSuccess ? 0 : -1;
    int rt = 0;
    (void)cudaRuntimeGetVersion(&rt);
    char drv[32] = "";
    int need = rt / 1000 >= 13 ? 580 : rt / 1000 == 12 ? 525 : 0; /* the driver branch a CUDA major needs */
    if (e == cudaErrorInsufficientDriver && !driver_version(drv, sizeof drv))
        snprintf(why, len, "no GPU found: no NVIDIA driver is loaded on this machine");
    else if (e == cudaErrorInsufficientDriver && need && atoi(drv) >= need) /* new enough: libcuda is missing */
        snprintf(why, len, "no usable GPU: NVIDIA driver %s is loaded but libcuda.so.1 cannot be (a container "
                 "needs the NVIDIA runtime: docker --gpus all, apptainer --nv; else put it on the library path)",
                 drv);
    else if (e == cudaErrorInsufficientDriver)
        snprintf(why, len, "no usable GPU: NVIDIA driver %s is older than this build's CUDA %d.%d needs%s",
                 drv[0] ? drv : "(version unknown)", rt / 1000, rt % 1000 / 10,
                 rt / 1000 == 13 ? " (580 or newer)" : "");
    else if ((e == cudaErrorNoDevice || e == cudaSuccess) && cvd)
        snprintf(why, len, "no GPU found: the NVIDIA driver sees no CUDA device with "
                 "CUDA_VISIBLE_DEVICES=%.40s", cvd);
    else if (e == cudaErrorNoDevice || e == cudaSuccess)
        snprintf(why, len, "no GPU found: the NVIDIA driver sees no CUDA device");
    else
        snprintf(why, len, "no usable GPU: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return e == cudaSuccess ? 0 : -1;
}
