/* gpu_decode_none.c - a build without nvJPEG: --decode gpu says so in one
 * line (the host emulation of data/gpu_decode.c still works, for tests). */
#include <stdio.h>

#include "data/gpu_decode.h"

void *tb_gpu_nvjpeg_create(const tb_gpu_decoder_opts *o, const tb_gpu_decoder_ops **ops, char *err,
                           size_t errlen) {
    (void)o;
    *ops = NULL;
    snprintf(err, errlen,
             "--decode gpu: this build has no nvJPEG (configure found no nvjpeg.h / libnvjpeg in the CUDA "
             "toolkit or under NVJPEG_ROOT; launch/install_gpu.sh installs it, docs/building.md); use --decode fast");
    return NULL;
}
