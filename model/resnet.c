/* resnet.c - the ResNet architecture: parameters in torchvision's state_dict
 * order and the node list of the forward pass.
 *
 *   stem:   conv1 7x7/2 -> bn1 -> relu -> maxpool 3x3/2
 *   layer1..layer4: blocks (BasicBlock or Bottleneck), first block of
 *           layer2..4 strides by 2 (on the 3x3 conv: "v1.5")
 *   head:   global average pool -> fc
 *
 * Parameters are created before nodes within each block because torchvision
 * registers bn3 before downsample while the forward pass runs downsample
 * before the residual add. */
#include "model/resnet.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"

static const struct {
    const char *name;
    int bottleneck;
    int blocks[4];
} k_arch[] = {
    {"resnet18", 0, {2, 2, 2, 2}},  {"resnet34", 0, {3, 4, 6, 3}},
    {"resnet50", 1, {3, 4, 6, 3}},  {"resnet101", 1, {3, 4, 23, 3}},
    {"resnet152", 1, {3, 8, 36, 3}},
};

int tb_resnet_config_init(tb_resnet_config *cfg, const char *name, int classes) {
    for (size_t i = 0; i < sizeof k_arch / sizeof k_arch[0]; i++) {
        if (strcmp(name, k_arch[i].name) == 0) {
            memset(cfg, 0, sizeof *cfg);
            snprintf(cfg->name, sizeof cfg->name, "%s", name);
            cfg->bottleneck = k_arch[i].bottleneck;
            memcpy(cfg->blocks, k_arch[i].blocks, sizeof cfg->blocks);
            cfg->classes = classes;
            return 0;
        }
    }
    return -1;
}

const char *tb_resnet_known_names(void) {
    return "resnet18, resnet34, resnet50, resnet101, resnet152";
}

typedef struct {
    tb_param_table *pt;
    tb_graph *g;
    int fuse;
} builder;

/* dst = a + "." + b (dst holds TB_PARAM_NAME_MAX bytes) */
static char *join(char *dst, const char *a, const char *b) {
    int n = snprintf(dst, TB_PARAM_NAME_MAX, "%s.%s", a, b);
    if (n < 0 || n >= TB_PARAM_NAME_MAX) TB_FATAL("module name too long: %s.%s", a, b);
    return dst;
}

/* ---- parameters -------------------------------------------------------------- */

static int conv_params(builder *b, const char *module, int cin, int cout, int k) {
    char name[TB_PARAM_NAME_MAX];
    int64_t shape[4] = {cout, cin, k, k}; /* OIHW */
    join(name, module, "weight");
    return tb_params_add(b->pt, name, TB_ROLE_CONV_WEIGHT, 4, shape);
}

/* weight, bias, running_mean, running_var, num_batches_tracked: consecutive. */
static int bn_params(builder *b, const char *module, int c) {
    static const struct {
        const char *suffix;
        tb_param_role role;
    } parts[] = {{"weight", TB_ROLE_BN_WEIGHT},
                 {"bias", TB_ROLE_BN_BIAS},
                 {"running_mean", TB_ROLE_BN_RUNNING_MEAN},
                 {"running_var", TB_ROLE_BN_RUNNING_VAR},
                 {"num_batches_tracked", TB_ROLE_BN_COUNTER}};
    int64_t shape[1] = {c};
    int first = -1;
    for (int i = 0; i < 5; i++) {
        char name[TB_PARAM_NAME_MAX];
        join(name, module, parts[i].suffix);
        int id = tb_params_add(b->pt, name, parts[i].role, i == 4 ? 0 : 1, shape);
        if (i == 0) first = id;
    }
    return first;
}

/* ---- nodes --------------------------------------------------------------------- */

static int add_node(builder *b, tb_node_kind kind, const char *module, int in, int in2, int out,
                    int param) {
    tb_node nd;
    memset(&nd, 0, sizeof nd);
    nd.kind = kind;
    if (snprintf(nd.name, sizeof nd.name, "%s", module) >= (int)sizeof nd.name)
        TB_FATAL("module name too long: %s", module);
    nd.in = in;
    nd.in2 = in2;
    nd.out = out;
    nd.param = param;
    return tb_graph_add_node(b->g, &nd);
}

/* out[N,cout,Ho,Wo] = conv(in[N,cin,H,W]); Ho = (H + 2 pad - k) / stride + 1 */
static int conv_node(builder *b, const char *module, int param, int in, int stride, int pad) {
    const tb_param *p = &b->pt->items[param];
    int cout = (int)p->shape[0], cin = (int)p->shape[1], k = (int)p->shape[2];
    TB_ASSERT(b->g->acts[in].c == cin);
    int ho = (b->g->acts[in].h + 2 * pad - k) / stride + 1;
    int wo = (b->g->acts[in].w + 2 * pad - k) / stride + 1;
    int out = tb_graph_add_act(b->g, cout, ho, wo);
    int id = add_node(b, TB_NODE_CONV, module, in, -1, out, param);
    tb_conv_geom geom = {cin, cout, k, stride, pad};
    b->g->nodes[id].conv = geom;
    return out;
}

/* out = relu?(bn(in) + z?): one fused node, or BN, ADD and RELU nodes. */
static int bn_node(builder *b, const char *module, int param, int in, int z, int relu) {
    const tb_act *x = &b->g->acts[in];
    int c = x->c, h = x->h, w = x->w;
    int fused = b->fuse || (z < 0 && !relu);
    int out = tb_graph_add_act(b->g, c, h, w);
    int id = add_node(b, TB_NODE_BN, module, in, fused ? z : -1, out, param);
    b->g->nodes[id].relu = fused ? relu : 0;
    if (fused) return out;
    char name[TB_PARAM_NAME_MAX];
    if (z >= 0) {
        int sum = tb_graph_add_act(b->g, c, h, w);
        join(name, module, "residual");
        add_node(b, TB_NODE_ADD, name, out, z, sum, -1);
        out = sum;
    }
    if (relu) {
        int r = tb_graph_add_act(b->g, c, h, w);
        join(name, module, "relu");
        add_node(b, TB_NODE_RELU, name, out, -1, r, -1);
        out = r;
    }
    return out;
}

/* ---- blocks -------------------------------------------------------------------- */

/* One convolution of a block's main path: conv<i+1> then bn<i+1>. */
typedef struct {
    int cin, cout, k, stride, pad;
} block_conv;

/* A residual block: parameters first (conv1, bn1, ..., downsample.0/.1 when the shape changes),
 * then nodes: conv -> bn+relu for every stage but the last, the shortcut, then the last bn with
 * the shortcut added and relu. basic and bottleneck blocks differ only in their stage list. */
static int residual_block(builder *b, const char *blk, int x, int inplanes, int outc, int stride,
                          const block_conv *st, int n) {
    char m[TB_PARAM_NAME_MAX], sfx[16];
    int pc[3], pb[3];
    int down = stride != 1 || inplanes != outc;
    for (int i = 0; i < n; i++) {
        snprintf(sfx, sizeof sfx, "conv%d", i + 1);
        join(m, blk, sfx);
        pc[i] = conv_params(b, m, st[i].cin, st[i].cout, st[i].k);
        snprintf(sfx, sizeof sfx, "bn%d", i + 1);
        join(m, blk, sfx);
        pb[i] = bn_params(b, m, st[i].cout);
    }
    int pdc = -1, pdb = -1;
    if (down) {
        join(m, blk, "downsample.0");
        pdc = conv_params(b, m, inplanes, outc, 1);
        join(m, blk, "downsample.1");
        pdb = bn_params(b, m, outc);
    }

    int t = x;
    for (int i = 0; i < n; i++) {
        snprintf(sfx, sizeof sfx, "conv%d", i + 1);
        join(m, blk, sfx);
        t = conv_node(b, m, pc[i], t, st[i].stride, st[i].pad);
        if (i == n - 1) break;
        snprintf(sfx, sizeof sfx, "bn%d", i + 1);
        join(m, blk, sfx);
        t = bn_node(b, m, pb[i], t, -1, 1);
    }
    int shortcut = x;
    if (down) {
        join(m, blk, "downsample.0");
        int d = conv_node(b, m, pdc, x, stride, 0);
        join(m, blk, "downsample.1");
        shortcut = bn_node(b, m, pdb, d, -1, 0);
    }
    snprintf(sfx, sizeof sfx, "bn%d", n);
    join(m, blk, sfx);
    return bn_node(b, m, pb[n - 1], t, shortcut, 1);
}

/* Two 3x3 convolutions, planes wide; the first carries the stride. */
static int basic_block(builder *b, const char *blk, int x, int inplanes, int planes, int stride) {
    const block_conv st[2] = {{inplanes, planes, 3, stride, 1}, {planes, planes, 3, 1, 1}};
    return residual_block(b, blk, x, inplanes, planes, stride, st, 2);
}

/* 1x1 down to planes, 3x3 with the stride, 1x1 up to 4 * planes. */
static int bottleneck_block(builder *b, const char *blk, int x, int inplanes, int planes,
                            int stride) {
    int width = planes, outc = planes * 4;
    const block_conv st[3] = {
        {inplanes, width, 1, 1, 0}, {width, width, 3, stride, 1}, {width, outc, 1, 1, 0}};
    return residual_block(b, blk, x, inplanes, outc, stride, st, 3);
}

/* ---- the network ------------------------------------------------------------------ */

void tb_resnet_build(const tb_resnet_config *cfg, int height, int width, int fuse,
                     tb_param_table *pt, tb_graph *g) {
    builder b = {pt, g, fuse};
    int expansion = cfg->bottleneck ? 4 : 1;

    /* stem: [N,3,H,W] -> conv1 [N,64,H/2,W/2] -> maxpool [N,64,H/4,W/4] */
    g->input = tb_graph_add_act(g, 3, height, width);
    int pc1 = conv_params(&b, "conv1", 3, 64, 7);
    int pb1 = bn_params(&b, "bn1", 64);
    int t = conv_node(&b, "conv1", pc1, g->input, 2, 3);
    t = bn_node(&b, "bn1", pb1, t, -1, 1);
    {
        const tb_act *x = &g->acts[t];
        int c = x->c, ho = (x->h + 2 - 3) / 2 + 1, wo = (x->w + 2 - 3) / 2 + 1;
        int out = tb_graph_add_act(g, c, ho, wo);
        int id = add_node(&b, TB_NODE_MAXPOOL, "maxpool", t, -1, out, -1);
        tb_pool_geom pool = {3, 2, 1};
        g->nodes[id].pool = pool;
        t = out;
    }

    /* layer1..layer4: [N,64e,H/4] -> [N,128e,H/8] -> [N,256e,H/16] -> [N,512e,H/32] */
    int inplanes = 64;
    for (int stage = 0; stage < 4; stage++) {
        int planes = 64 << stage;
        for (int blk = 0; blk < cfg->blocks[stage]; blk++) {
            char name[TB_PARAM_NAME_MAX];
            if (snprintf(name, sizeof name, "layer%d.%d", stage + 1, blk) >= (int)sizeof name)
                TB_FATAL("block name too long");
            int stride = (blk == 0 && stage > 0) ? 2 : 1;
            t = cfg->bottleneck ? bottleneck_block(&b, name, t, inplanes, planes, stride)
                                : basic_block(&b, name, t, inplanes, planes, stride);
            inplanes = planes * expansion;
        }
    }

    /* head: avgpool [N,512e,1,1] -> fc [N,classes] */
    int pooled = tb_graph_add_act(g, inplanes, 1, 1);
    add_node(&b, TB_NODE_AVGPOOL, "avgpool", t, -1, pooled, -1);
    int64_t wshape[2] = {cfg->classes, inplanes}, bshape[1] = {cfg->classes};
    int pfc = tb_params_add(pt, "fc.weight", TB_ROLE_FC_WEIGHT, 2, wshape);
    tb_params_add(pt, "fc.bias", TB_ROLE_FC_BIAS, 1, bshape);
    g->output = tb_graph_add_act(g, cfg->classes, 1, 1);
    add_node(&b, TB_NODE_LINEAR, "fc", pooled, -1, g->output, pfc);
}

double tb_resnet_forward_macs(const tb_graph *g, const tb_param_table *pt) {
    double macs = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const tb_node *nd = &g->nodes[i];
        const tb_act *y = &g->acts[nd->out];
        if (nd->kind == TB_NODE_CONV)
            macs += (double)pt->items[nd->param].numel * y->h * y->w;
        else if (nd->kind == TB_NODE_LINEAR)
            macs += (double)pt->items[nd->param].numel;
    }
    return macs;
}
