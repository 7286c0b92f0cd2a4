/* make_ckpt.c - test tool: writes a complete, real ResNet-18 checkpoint (2
 * classes, torchvision initialisation, ~90 MB with momentum) with
 * tb_ckpt_save, the way training writes one. The committed fuzz seeds leave
 * the big tensors unwritten to stay small; this file gives the replay of
 * the checkpoint target one input with every tensor present.
 * Usage: fuzz_make_ckpt OUT.h5 */
#include <stdio.h>

#include "core/log.h"
#include "model/cpu/cpu_backend.h"
#include "model/model.h"
#include "src/results/checkpoint.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_make_ckpt OUT.h5\n");
        return 2;
    }
    tb_resnet_config cfg;
    if (tb_resnet_config_init(&cfg, "resnet18", 2) != 0) tb_die("resnet18 is unknown");
    tb_backend_opts bo = {.threads = 1};
    tb_backend *be = tb_cpu_backend_create(&bo);
    tb_model *m = tb_model_create(&cfg, be, 1, 32, 32, NULL);
    tb_model_init(m, 7);
    tb_ckpt_meta meta;
    tb_ckpt_meta_for(&meta, m, 32, 0, 0, 7);
    tb_ckpt_save(argv[1], m, &meta);
    tb_model_destroy(m);
    be->destroy(be);
    return 0;
}
