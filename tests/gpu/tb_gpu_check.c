/* tb_gpu_check.c - exit 0 when a CUDA device is visible (printing it), else
 * print why and exit 77, so ctest shows the GPU tests as skipped, not passed
 * (tests/gpu/gpu_run.sh). */
#include <stdio.h>

#include "model/cuda/cuda_backend.h"

int main(void) {
    char why[200];
    int n = tb_cuda_device_count(why, sizeof why);
    if (n <= 0) {
        printf("SKIP: no CUDA device: %s\n", why);
        return 77;
    }
    printf("# %d CUDA device%s visible\n", n, n > 1 ? "s" : "");
    return 0;
}
