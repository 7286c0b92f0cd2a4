/* resnet.h - ResNet-18/34/50/101/152 exactly as torchvision builds them
 * (BasicBlock, and Bottleneck v1.5 with the stride on the 3x3 conv), for any
 * class count and input size. */
#ifndef TB_RESNET_H
#define TB_RESNET_H

#include "model/backend.h"
#include "model/graph.h"
#include "model/params.h"

#define TB_MODEL_NAME_MAX 16
/* Smallest input side for which every stage still has at least one pixel
 * from a real (unpadded) input pixel: 32 -> 16 -> 8 -> 8 -> 4 -> 2 -> 1. */
#define TB_RESNET_MIN_IMAGE 32

typedef struct {
    char name[TB_MODEL_NAME_MAX]; /* "resnet50" */
    int bottleneck;               /* 1: Bottleneck (expansion 4), 0: BasicBlock */
    int blocks[4];                /* blocks in layer1..layer4 */
    int classes;
    int zero_init_residual;       /* zero the last BN gamma of every block */
} tb_resnet_config;

/* Fills cfg for "resnet18" .. "resnet152"; returns -1 for an unknown name. */
int tb_resnet_config_init(tb_resnet_config *cfg, const char *name, int classes);
/* "resnet18, resnet34, resnet50, resnet101, resnet152" */
const char *tb_resnet_known_names(void);

/* Appends the network's parameters (state_dict order) to pt and its nodes
 * and activations to g, for inputs [N,3,height,width]. fuse: fold residual
 * add and ReLU into the BatchNorm node (otherwise separate ADD/RELU nodes). */
void tb_resnet_build(const tb_resnet_config *cfg, int height, int width, int fuse,
                     tb_param_table *pt, tb_graph *g);

/* torchvision's initialisation, into host copies of the flat buffers:
 * conv weights kaiming-normal (fan_out, ReLU gain), BN gamma 1 and beta 0
 * (gamma 0 on each block's last BN with zero_init_residual), running mean 0,
 * variance 1, counters 0, fc weight and bias uniform(+-1/sqrt(fan_in)) as
 * nn.Linear. Each tensor draws from its own stream (seed, tensor index). */
void tb_resnet_init(const tb_resnet_config *cfg, const tb_param_table *pt, uint64_t seed,
                    tb_real *params, tb_real *state, int64_t *counters);

/* Multiply-accumulates of one forward pass for one image (convs and fc). */
double tb_resnet_forward_macs(const tb_graph *g, const tb_param_table *pt);

#endif
