/* init.c - torchvision's parameter initialisation for ResNet (see resnet.h). */
#include <math.h>
#include <string.h>

#include "core/rng.h"
#include "model/resnet.h"

/* "layer2.1.bn3.weight" is the last BN of a Bottleneck; ".bn2." of a BasicBlock. */
static int is_last_bn_of_block(const tb_resnet_config *cfg, const char *name) {
    if (strncmp(name, "layer", 5) != 0) return 0;
    return strstr(name, cfg->bottleneck ? ".bn3.weight" : ".bn2.weight") != NULL;
}

void tb_resnet_init(const tb_resnet_config *cfg, const tb_param_table *pt, uint64_t seed,
                    tb_real *params, tb_real *state, int64_t *counters) {
    /* each tensor draws from its own generator: the same bits on any number
     * of threads (ResNet-50's 25 M normals took 0.6 s of start-up on one) */
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < pt->count; i++) {
        const tb_param *p = &pt->items[i];
        tb_rng rng;
        tb_rng_seed(&rng, seed, 0x1417000000ULL + (uint64_t)i);
        tb_real *dst = NULL;
        if (tb_param_store_of(p->role) == TB_STORE_TRAIN) dst = params + p->offset;
        if (tb_param_store_of(p->role) == TB_STORE_STATE) dst = state + p->offset;
        switch (p->role) {
        case TB_ROLE_CONV_WEIGHT: {
            /* kaiming_normal_(mode="fan_out", nonlinearity="relu") */
            double fan_out = (double)p->shape[0] * (double)p->shape[2] * (double)p->shape[3];
            double std = sqrt(2.0 / fan_out);
            for (size_t j = 0; j < p->numel; j++) dst[j] = (tb_real)(std * tb_rng_normal(&rng));
            break;
        }
        case TB_ROLE_BN_WEIGHT: {
            tb_real v = (cfg->zero_init_residual && is_last_bn_of_block(cfg, p->name)) ? 0 : 1;
            for (size_t j = 0; j < p->numel; j++) dst[j] = v;
            break;
        }
        case TB_ROLE_BN_BIAS:
        case TB_ROLE_BN_RUNNING_MEAN:
            memset(dst, 0, p->numel * sizeof *dst);
            break;
        case TB_ROLE_BN_RUNNING_VAR:
            for (size_t j = 0; j < p->numel; j++) dst[j] = 1;
            break;
        case TB_ROLE_BN_COUNTER: counters[p->offset] = 0; break;
        case TB_ROLE_FC_WEIGHT:
        case TB_ROLE_FC_BIAS: {
            /* nn.Linear: kaiming_uniform_(a=sqrt(5)) => U(-1/sqrt(fan_in), 1/sqrt(fan_in));
             * the bias uses the same bound. fan_in = in_features. */
            int wi = p->role == TB_ROLE_FC_WEIGHT ? i : i - 1;
            double bound = 1.0 / sqrt((double)pt->items[wi].shape[1]);
            for (size_t j = 0; j < p->numel; j++)
                dst[j] = (tb_real)((2.0 * tb_rng_uniform(&rng) - 1.0) * bound);
            break;
        }
        }
    }
}
