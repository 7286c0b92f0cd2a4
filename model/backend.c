/* backend.c - choosing a backend by name, and capability checks. */
#include "model/backend.h"

#include <stdio.h>
#include <string.h>

#include "model/cpu/cpu_backend.h"
#include "src/core/log.h"

tb_backend *tb_backend_create(const char *name, const tb_backend_opts *opts, char *err,
                              size_t errlen) {
    if (strcmp(name, "cpu") == 0 || strcmp(name, "auto") == 0)
        return tb_cpu_backend_create(opts);
    if (strcmp(name, "cuda") == 0) {
        snprintf(err, errlen,
                 "--backend cuda: this trainbench was built without the CUDA backend; "
                 "use --backend cpu");
        return NULL;
    }
    snprintf(err, errlen, "unknown backend '%s': use cpu, cuda or auto", name);
    return NULL;
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
