/* tb_ckpt_copy.c - test tool: loads a checkpoint into trainbench's model
 * (with every validation a real run does) and saves it again, so round trips
 * through trainbench can be checked bit for bit. Usage: tb_ckpt_copy IN OUT */
#include <stdio.h>

#include "core/log.h"
#include "model/cpu/cpu_backend.h"
#include "model/model.h"
#include "src/results/checkpoint.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tb_ckpt_copy IN.h5 OUT.h5\n");
        return 2;
    }
    tb_ckpt_meta meta;
    tb_ckpt_read_meta(argv[1], &meta);
    tb_resnet_config cfg;
    if (tb_resnet_config_init(&cfg, meta.model, (int)meta.classes) != 0)
        tb_die("unknown model '%s' in '%s'", meta.model, argv[1]);
    tb_backend_opts bo = {.threads = 1};
    tb_backend *be = tb_cpu_backend_create(&bo);
    tb_model *m = tb_model_create(&cfg, be, 1, 32, 32, NULL);
    tb_ckpt_load(argv[1], m);
    tb_ckpt_save(argv[2], m, &meta);
    tb_model_destroy(m);
    be->destroy(be);
    return 0;
}
