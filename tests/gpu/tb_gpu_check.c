/* tb_gpu_check.c - exit 0 when a CUDA device is visible (printing it), else
 * print why and exit 77, so ctest shows the GPU tests as skipped, not passed
 * (tests/gpu/gpu_run.sh). With --nccl-min CODE (tests/gpu/nccl_np2_run.sh),
 * also exit 77 when the NCCL loaded is older than CODE (23000: two ranks on
 * one GPU), naming the version, the library file and what to carry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/nccl.h"
#include "model/cuda/cuda_backend.h"

int main(int argc, char **argv) {
    char why[320];
    int n = tb_cuda_device_count(why, sizeof why);
    if (n <= 0) {
        printf("SKIP: no CUDA device: %s\n", why);
        return 77;
    }
    printf("# %d CUDA device%s visible\n", n, n > 1 ? "s" : "");
    if (argc == 3 && strcmp(argv[1], "--nccl-min") == 0) {
        int need = atoi(argv[2]), compiled = 0, loaded = 0;
        tb_nccl_versions(&compiled, &loaded);
        char lib[1024], slim[800];
        tb_nccl_library(lib, sizeof lib, slim, sizeof slim);
        if (!tb_nccl_built()) {
            printf("SKIP: this build has no NCCL (set NCCL_ROOT)\n");
            return 77;
        }
        if (loaded < need) {
            printf("SKIP: NCCL %d.%d.%d is loaded (%s); two ranks on one GPU need NCCL >= %d.%d with "
                   "NCCL_MULTI_RANK_GPU_ENABLE=1: build one with tests/gpu/slim_nccl.sh and carry it "
                   "(TB_BUNDLE_NCCL=DIR sh tests/gpu/make_bundle.sh)\n",
                   loaded / 10000, loaded % 10000 / 100, loaded % 100, lib, need / 10000, need % 10000 / 100);
            return 77;
        }
        printf("# NCCL %d.%d.%d loaded from %s%s%s\n", loaded / 10000, loaded % 10000 / 100, loaded % 100, lib,
               slim[0] ? "; " : "", slim);
    }
    return 0;
}
