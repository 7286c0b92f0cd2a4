/* backend.c - choosing a backend by name, and capability checks.
 *
 * --backend auto (the default of train) takes CUDA when this build has it
 * and the runtime sees a device, else the CPU, and says which and why in
 * one line; --backend cuda without a usable device fails with one line. */
#include "model/backend.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "model/cpu/cpu_backend.h"
#ifdef TB_HAVE_CUDA
#include "model/cuda/cuda_backend.h"
#endif

tb_backend *tb_backend_create(const char *name, const tb_backend_opts *opts, char *err,
                              size_t errlen) {
    int is_auto = strcmp(name, "auto") == 0;
    if (!is_auto && strcmp(name, "cpu") != 0 && strcmp(name, "cuda") != 0) {
        snprintf(err, errlen, "unknown backend '%s': use cpu, cuda or auto", name);
        return NULL;
    }
    char why[400] = "";
#ifdef TB_HAVE_CUDA
    if (strcmp(name, "cuda") == 0 || is_auto) {
        char reason[256] = "";
        int n = is_auto ? tb_cuda_device_count(reason, sizeof reason) : 1;
        if (n > 0) {
            tb_backend *be = tb_cuda_backend_create(opts, err, errlen);
            if (!be) return NULL;
            if (is_auto)
                snprintf(be->choice, sizeof be->choice,
                         "--backend auto: cuda (%d device%s visible; this rank uses %.100s)", n,
                         n > 1 ? "s" : "", be->device);
            else
                snprintf(be->choice, sizeof be->choice, "--backend cuda: %.120s", be->device);
            if (is_auto) tb_info("%s", be->choice);
            return be;
        }
        snprintf(why, sizeof why,
                 "--backend auto: cpu (%.250s; the CUDA backend is built and runs where a GPU is)",
                 reason);
    }
#else
    if (strcmp(name, "cuda") == 0) {
        snprintf(err, errlen,
                 "--backend cuda: this trainbench was built without the CUDA backend; "
                 "use --backend cpu");
        return NULL;
    }
    snprintf(why, sizeof why, "--backend auto: cpu (this build has no CUDA backend)");
#endif
    tb_backend *be = tb_cpu_backend_create(opts);
    snprintf(be->choice, sizeof be->choice, "%s", is_auto ? why : "--backend cpu");
    if (is_auto) tb_info("%s", be->choice);
    return be;
}

void tb_backend_require(const tb_backend *be, tb_dtype dtype, tb_layout layout) {
    unsigned need_dtype = dtype == TB_F32    ? TB_CAP_F32
                          : dtype == TB_F64  ? TB_CAP_F64
                          : dtype == TB_BF16 ? TB_CAP_BF16
                                             : TB_CAP_F16;
    unsigned need_layout = layout == TB_NCHW ? TB_CAP_NCHW : TB_CAP_NHWC;
    if (!(be->caps & need_dtype))
        tb_die("the %s backend does not compute in %s; choose another --precision or backend",
               be->name, tb_dtype_name(dtype));
    if (!(be->caps & need_layout))
        tb_die("the %s backend does not support the %s layout; choose another layout or backend",
               be->name, tb_layout_name(layout));
}
