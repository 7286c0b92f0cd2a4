/* probe_gpu_none.c - probe's GPU half in a build without CUDA: nothing to
 * measure, and it says so (see probe_gpu.h). */
#include <stdio.h>

#include "src/device/probe_gpu.h"

void tb_probe_gpu_versions(tb_probe_gpu *p) {
    p->built_with_cuda = 0;
    p->nlibs = 0;
    p->cublas_path[0] = 0;
}

int tb_probe_gpu_measure(tb_probe_gpu *p, int device, int quick, char *err, size_t errlen) {
    (void)p;
    (void)device;
    (void)quick;
    snprintf(err, errlen, "this trainbench was built without CUDA");
    return -1;
}
