/* test_fused_host.c - everything of --fuse graph that runs without a GPU:
 *
 *  1. The fused graphs as plain C descriptions (model/fused_desc.h) for
 *     every ResNet-50 conv at 224 px and batch 256 and 400, in bf16 and
 *     fp16 NHWC and fp32 NCHW, every prologue variant, and the BN finalize
 *     of every BatchNorm: each passes fd_check; in a CUDA build each is
 *     lowered to cuDNN backend descriptors on this host (every tensor and
 *     operation finalizes: attribute names, types and shapes as cuDNN
 *     checks them without a device) and every descriptor is destroyed.
 *  2. Planted errors in descriptions, each caught by fd_check with its
 *     reason (and, for a wrong convolution size, by cuDNN's own finalize).
 *  3. The schedule: which BatchNorms of ResNet-18/50 fold, fold into the
 *     block end, or are applied.
 * The fallback rules and the fused step are tests/test_fused_step.c's.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/fused_desc.h"
#include "model/graph_fused.h"
#include "model/resnet.h"
#include "tests/tb_test.h"
#ifdef TB_HAVE_CUDA
#include "model/cuda/fused_cuda.h"
#include "model/plan_cache.h"
#endif

/* ---- 1. descriptions of every conv ----------------------------------------------------- */

static void build_net(const char *name, int h, tb_graph *g, tb_param_table *pt) {
    tb_resnet_config cfg;
    memset(g, 0, sizeof *g);
    memset(pt, 0, sizeof *pt);
    TB_CHECK(tb_resnet_config_init(&cfg, name, 1000) == 0, "model %s", name);
    g->fuse_graph = 1;
    g->max_batch = 2;
    tb_resnet_build(&cfg, h, h, 1, pt, g);
}

static void free_net(tb_graph *g, tb_param_table *pt) {
    free(g->nodes);
    free(g->acts);
    tb_params_free(pt);
}

typedef struct {
    int graphs, bad, lowered, low_bad;
    char first[512];
} desc_count;

static void one_graph(desc_count *dc, const fd_graph *gr, int built, const char *why) {
    char w2[256];
    dc->graphs++;
    if (!built || fd_check(gr, w2, sizeof w2) != 0) {
        if (!dc->bad++) snprintf(dc->first, sizeof dc->first, "%.128s: %.300s", gr->label, built ? w2 : why);
        return;
    }
#ifdef TB_HAVE_CUDA
    cu_fd_lowered lw;
    cu_err err = {NULL, CUDNN_STATUS_SUCCESS};
    dc->lowered++;
    if (cu_fd_lower(gr, NULL, &lw, &err) != CUDNN_STATUS_SUCCESS) {
        if (!dc->low_bad++)
            snprintf(dc->first, sizeof dc->first, "%.128s: cuDNN refused %s (%s)", gr->label, err.why,
                     cudnnGetErrorString(err.s));
        return;
    }
    cu_fd_lowered_free(&lw);
#endif
}

static void test_descriptions(void) {
    tb_graph g;
    tb_param_table pt;
    build_net("resnet50", 224, &g, &pt);
    desc_count dc = {0};
#ifdef TB_HAVE_CUDA
    long live0 = cu_be_live();
#endif
    static const struct {
        tb_dtype dt;
        tb_layout l;
    } precs[3] = {{TB_BF16, TB_NHWC}, {TB_F16, TB_NHWC}, {TB_F32, TB_NCHW}};
    static const int batches[2] = {256, 400};
    int convs = 0, bns = 0;
    for (int i = 0; i < g.nnodes; i++) {
        const tb_node *nd = &g.nodes[i];
        const tb_act *in = &g.acts[nd->in], *out = &g.acts[nd->out];
        char why[256];
        fd_graph gr;
        if (nd->kind == TB_NODE_BN) {
            bns++;
            for (int b = 0; b < 2; b++)
                one_graph(
                    &dc, &gr,
                    fd_build_finalize(&gr, in->c, (int64_t)batches[b] * in->h * in->w, 0.1, 1e-5, b, why, sizeof why) == 0,
                    why);
        }
        if (nd->kind != TB_NODE_CONV) continue;
        convs++;
        for (int pi = 0; pi < 3; pi++)
            for (int b = 0; b < 2; b++) {
                fd_conv_problem p = {nd->conv, precs[pi].dt, precs[pi].l, batches[b], in->h, in->w, 0};
                for (int v = 0; v < FD_VARIANTS; v++) {
                    for (p.prologue = 0; p.prologue < 2; p.prologue++)
                        one_graph(&dc, &gr, fd_build_conv_stats(&gr, &p, fd_variant_nth(v), why, sizeof why) == 0, why);
                    one_graph(&dc, &gr, fd_build_wgrad_pro(&gr, &p, fd_variant_nth(v), why, sizeof why) == 0, why);
                }
                one_graph(&dc, &gr, fd_build_dgrad_dbn(&gr, &p, why, sizeof why) == 0, why);
                (void)out;
            }
    }
    int want = bns * 2 + convs * 3 * 2 * (FD_VARIANTS * 3 + 1);
    TB_CHECK(dc.bad == 0 && dc.graphs == want,
             "fused graph descriptions: %d of %d (53 convs x bf16/fp16 NHWC, fp32 NCHW x batch 256/400 x "
             "conv+stats with and without the prologue, wgrad in 3 variants, dgrad+dbn; 53 BN finalize x 2) "
             "pass fd_check; %d fail%s%s",
             dc.graphs, want, dc.bad, dc.bad ? ": " : "", dc.bad ? dc.first : "");
#ifdef TB_HAVE_CUDA
    TB_CHECK(dc.low_bad == 0 && dc.lowered == dc.graphs,
             "lowered to cuDNN backend descriptors on this host (tensors and operations finalize): %d of %d; %d "
             "refused%s%s",
             dc.lowered - dc.low_bad, dc.lowered, dc.low_bad, dc.low_bad ? ": " : "", dc.low_bad ? dc.first : "");
    TB_CHECK(cu_be_live() == live0, "every backend descriptor made is destroyed (%ld left)", cu_be_live() - live0);
#endif
    printf("# fused descriptions: %d graphs built and checked\n", dc.graphs);
    free_net(&g, &pt);
}

/* ---- 2. planted errors -------------------------------------------------------------------- */

static void expect_caught(const char *what, const fd_graph *gr, const char *reason) {
    char why[256] = "";
    int rc = fd_check(gr, why, sizeof why);
    TB_CHECK(rc != 0 && strstr(why, reason), "planted error (%s) caught: \"%s\"", what, why);
}

static int find_role(const fd_graph *gr, int role) {
    for (int i = 0; i < gr->nt; i++)
        if (gr->t[i].role == role) return i;
    return -1;
}

/* The plan cache's graph hash: the same graph twice gives one hash; a
 * change to what the plan runs (an op's mode, a tensor's dtype or flags,
 * a stride) gives another, a name or a by-value value does not. */
static void test_graph_hash(void) {
    fd_conv_problem p = {{64, 64, 3, 1, 1}, TB_BF16, TB_NHWC, 8, 14, 14, 1};
    fd_graph a, b;
    char why[256];
    TB_CHECK(fd_build_conv_stats(&a, &p, fd_variant_nth(0), why, sizeof why) == 0 &&
                 fd_build_conv_stats(&b, &p, fd_variant_nth(0), why, sizeof why) == 0,
             "conv+stats builds (%s)", why);
    uint64_t h = fd_graph_hash(&a);
    TB_CHECK(fd_graph_hash(&b) == h, "one graph, one hash");
    b.t[0].name = "another name";
    for (int i = 0; i < b.nt; i++)
        if (b.t[i].by_value) b.t[i].value += 1;
    TB_CHECK(fd_graph_hash(&b) == h, "names are not in it");
    fd_graph f, f2; /* the BN finalize: by-value scalars (eps, momentum, the count) */
    TB_CHECK(fd_build_finalize(&f, 64, 8 * 14 * 14, 0.1, 1e-5, 0, why, sizeof why) == 0 &&
                 fd_build_finalize(&f2, 64, 8 * 14 * 14, 0.25, 1e-3, 0, why, sizeof why) == 0,
             "finalize builds (%s)", why);
    int by_value = 0;
    for (int i = 0; i < f2.nt; i++) by_value += f2.t[i].by_value;
    TB_CHECK(by_value > 0 && fd_graph_hash(&f2) == fd_graph_hash(&f),
             "by-value values are not in it (%d by-value tensors, another momentum and eps)", by_value);
    int changed = 0, tried = 0;
    for (int k = 0; k < 5; k++) {
        b = a;
        if (k == 0) b.op[0].mode = b.op[0].mode == FD_PW_ADD ? FD_PW_MUL : FD_PW_ADD;
        if (k == 1) b.t[0].dt = b.t[0].dt == FD_BF16 ? FD_HALF : FD_BF16;
        if (k == 2) b.t[b.nt - 1].virt = !b.t[b.nt - 1].virt;
        if (k == 3) b.t[0].stride[3] += 1;
        if (k == 4) b.op[b.nop - 1].in[0] = b.op[b.nop - 1].in[0] + 1;
        tried++;
        changed += fd_graph_hash(&b) != h;
    }
    TB_CHECK(changed == tried, "each change to what the plan runs changes the hash (%d of %d)", changed, tried);
    for (int v = 1; v < FD_VARIANTS; v++)
        TB_CHECK(fd_build_conv_stats(&b, &p, fd_variant_nth(v), why, sizeof why) == 0 && fd_graph_hash(&b) != h,
                 "prologue variant %d has a hash of its own", v);
}

static void test_planted(void) {
    fd_conv_problem p = {{64, 64, 3, 1, 1}, TB_BF16, TB_NHWC, 8, 14, 14, 1};
    fd_graph base, gr;
    char why[256];
    TB_CHECK(fd_build_conv_stats(&base, &p, fd_variant_nth(0), why, sizeof why) == 0 &&
                 fd_check(&base, why, sizeof why) == 0,
             "the unplanted conv+stats graph passes (%s)", why);
    gr = base;
    gr.t[find_role(&gr, FD_R_X)].stride[2] += 1;
    expect_caught("a stride that is not dense", &gr, "not dense");
    gr = base;
    gr.t[find_role(&gr, FD_R_Y)].uid = gr.t[find_role(&gr, FD_R_W)].uid;
    expect_caught("two tensors with one uid", &gr, "share unique id");
    gr = base;
    gr.t[find_role(&gr, FD_R_Y)].dim[2] = 13;
    gr.t[find_role(&gr, FD_R_Y)].stride[0] = 13 * 14 * 64;
    expect_caught("a convolution output of the wrong size", &gr, "the geometry gives");
    gr = base;
    gr.op[gr.nop - 1].out[1] = gr.op[gr.nop - 1].out[0]; /* sqsum never written, sum twice */
    expect_caught("an output written twice", &gr, "written by 2");
    gr = base;
    gr.t[find_role(&gr, FD_R_SQSUM)].dt = FD_HALF;
    expect_caught("a statistic in half", &gr, "must be float");
    gr = base;
    gr.t[find_role(&gr, FD_R_SCALE)].dim[1] = 32;
    gr.t[find_role(&gr, FD_R_SCALE)].stride[0] = 32;
    expect_caught("a per-channel operand of 32 channels on 64", &gr, "neither matches");
    gr = base;
    fd_op t = gr.op[0]; /* read the relu's output before the add writes its input */
    gr.op[0] = gr.op[1], gr.op[1] = t;
    expect_caught("operations out of order", &gr, "before operation");
    gr = base;
    gr.nop--; /* no GEN_STATS: sum and sqsum unused */
    expect_caught("a tensor nothing uses", &gr, "is not used");
    fd_graph fin;
    TB_CHECK(fd_build_finalize(&fin, 64, 8 * 14 * 14, 0.1, 1e-5, 0, why, sizeof why) == 0, "finalize builds");
    gr = fin;
    for (int i = 0; i < gr.nt; i++)
        if (gr.t[i].by_value && gr.t[i].dt == FD_INT64) gr.t[i].dt = FD_FLOAT;
    expect_caught("a float element count", &gr, "count must be int64");
    gr = fin;
    for (int i = 0; i < gr.nt; i++)
        if (gr.t[i].by_value) gr.t[i].virt = 1;
    expect_caught("a virtual by-value scalar", &gr, "both virtual and by value");
    fd_graph dg;
    TB_CHECK(fd_build_dgrad_dbn(&dg, &p, why, sizeof why) == 0 && fd_check(&dg, why, sizeof why) == 0,
             "the dgrad+drelu+dbn graph passes (%s)", why);
    gr = dg;
    gr.t[find_role(&gr, FD_R_DR)].dim[0] = 4;
    expect_caught("BN weights over a gradient of another batch", &gr, "does not have the shape");
    TB_CHECK(fd_build_finalize(&gr, 0, 5, 0.1, 1e-5, 0, why, sizeof why) != 0 && strstr(why, "cannot be a graph"),
             "a finalize over 0 channels is refused when built (%s)", why);
#ifdef TB_HAVE_CUDA
    /* cuDNN's own finalize catches the wrong conv size fd_check caught above */
    gr = base;
    gr.t[find_role(&gr, FD_R_Y)].dim[2] = 13;
    gr.t[find_role(&gr, FD_R_Y)].stride[0] = 13 * 14 * 64;
    cu_fd_lowered lw;
    cu_err err = {NULL, CUDNN_STATUS_SUCCESS};
    long live0 = cu_be_live();
    cudnnStatus_t s = cu_fd_lower(&gr, NULL, &lw, &err);
    TB_CHECK(s != CUDNN_STATUS_SUCCESS && err.why && cu_be_live() == live0,
             "cuDNN refuses the wrong conv size when lowered (%s: %s), leaving no descriptor behind",
             err.why ? err.why : "-", cudnnGetErrorString(s));
#endif
}

/* ---- 3. the schedule ------------------------------------------------------------------------ */

static int node_named(const tb_graph *g, const char *name) {
    for (int i = 0; i < g->nnodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return i;
    return -1;
}

static void test_schedule(void) {
    static const struct {
        const char *model;
        int counts[4]; /* unfused, applied, folded, zfolded */
    } cases[2] = {{"resnet50", {0, 17, 32, 4}}, {"resnet18", {0, 9, 8, 3}}};
    for (int k = 0; k < 2; k++) {
        tb_graph g;
        tb_param_table pt;
        build_net(cases[k].model, 64, &g, &pt);
        tb_fused_candidates(&g);
        int c[4];
        tb_fused_count(&g, 0, c);
        TB_CHECK(memcmp(c, cases[k].counts, sizeof c) == 0,
                 "%s: %d applied (block ends, stem), %d folded into the next conv, %d into the block end, %d unfused "
                 "(want %d, %d, %d, %d)",
                 cases[k].model, c[1], c[2], c[3], c[0], cases[k].counts[1], cases[k].counts[2], cases[k].counts[3],
                 cases[k].counts[0]);
        int b1 = node_named(&g, "layer1.0.bn1"), c2 = node_named(&g, "layer1.0.conv2");
        int ds = node_named(&g, "layer2.0.downsample.1"), end = node_named(&g, k ? "layer2.0.bn2" : "layer2.0.bn3");
        int stem = node_named(&g, "bn1");
        TB_CHECK(b1 >= 0 && g.nodes[b1].fcand == TB_BNF_FOLD && g.nodes[b1].fpeer == c2 && g.nodes[c2].fpro == b1,
                 "%s: layer1.0.bn1 folds into layer1.0.conv2", cases[k].model);
        TB_CHECK(ds >= 0 && g.nodes[ds].fcand == TB_BNF_ZFOLD && g.nodes[ds].fpeer == end &&
                     g.nodes[end].fcand == TB_BNF_APPLY,
                 "%s: layer2.0.downsample.1 folds into its block end", cases[k].model);
        TB_CHECK(stem >= 0 && g.nodes[stem].fcand == TB_BNF_APPLY, "%s: the stem's bn1 is applied (max pool reads it)",
                 cases[k].model);
        /* only a fold candidate's BN plan is told its y comes from the next conv (no ReLU mask reserve) */
        tb_real *pv = calloc(pt.n_train + pt.n_state + 1, sizeof *pv);
        tb_graph_params gp = {&pt, pv, NULL, pv + pt.n_train, NULL, NULL, NULL};
        int told = 0, told_right = 1;
        for (int i = 0; i < g.nnodes; i++) {
            if (g.nodes[i].kind != TB_NODE_BN) continue;
            tb_tensor x, z, y;
            tb_bn_args a;
            tb_graph_bn_args(&g, &g.nodes[i], &gp, 2, &x, &z, &y, &a);
            told += a.y_in_consumer;
            told_right &= a.y_in_consumer == (g.nodes[i].fcand == TB_BNF_FOLD && a.relu);
        }
        free(pv);
        TB_CHECK(told == cases[k].counts[2] && told_right,
                 "%s: %d BN plans told their y is the next conv's (want the %d fold candidates, each with a ReLU)",
                 cases[k].model, told, cases[k].counts[2]);
        /* the gradient arena plans the folded BN's input gradient from its conv's backward step */
        TB_CHECK(tb_graph_bwd_node(&g, b1) == c2 && tb_graph_bwd_node(&g, stem) == stem,
                 "%s: a folded BN's backward runs at its conv's step", cases[k].model);
        free_net(&g, &pt);
    }
}

#ifdef TB_HAVE_CUDA
/* The CUDA plan cache's host parts: knob lists as the cache stores them,
 * and a conv direction's measured row through the cache and back. */
static void test_cuda_cache_text(void) {
    int64_t t[16], v[16];
    TB_CHECK(cu_be_parse_knobs("k1=2,k3=0,k17=-1", t, v, 16) == 3 && t[0] == 1 && v[0] == 2 && t[2] == 17 && v[2] == -1,
             "knob choices parse");
    TB_CHECK(cu_be_parse_knobs("", t, v, 16) == 0, "no knobs parse as none");
    TB_CHECK(cu_be_parse_knobs("k1=2,", t, v, 16) < 0 && cu_be_parse_knobs("k1:2", t, v, 16) < 0 &&
                 cu_be_parse_knobs("k1=2 k3=0", t, v, 16) < 0 && cu_be_parse_knobs("k1=2,k2=3", t, v, 1) < 0,
             "malformed knob lists are refused (a trailing comma, no '=', a space, more than room)");
    char dir[256], msg[512];
    char name[64];
    snprintf(name, sizeof name, "tb_fused_host_pc_%ld", (long)getpid());
    tb_test_tmp(dir, sizeof dir, name);
    cu_state st;
    memset(&st, 0, sizeof st);
    st.plan_cache = tb_pc_open(dir, "gpu test; key", msg, sizeof msg);
    st.plan_cache_tried = 1;
    TB_CHECK(st.plan_cache != NULL, "a cache for the conv rows (%s)", msg);
    if (!st.plan_cache) return;
    tb_conv_geom g = {64, 128, 3, 2, 1};
    char key[160];
    cu_pc_conv_key(key, sizeof key, &g, TB_BF16, TB_NHWC, 256, 56, 56, 1);
    TB_CHECK(strcmp(key, "conv data 64->128 k3 s2 p1 bfloat16 NHWC n256 56x56") == 0, "conv entry key: %s", key);
    cu_conv_perf row;
    TB_CHECK(!cu_pc_conv_row(&st, key, &row), "no row before one is kept");
    cu_pc_conv_keep(&st, key, 4, CUDNN_TENSOR_OP_MATH, 1 << 20, -1.0f, 1);
    TB_CHECK(!cu_pc_conv_row(&st, key, &row), "an unmeasured (heuristic) choice is not kept");
    cu_pc_conv_keep(&st, key, 4, CUDNN_TENSOR_OP_MATH, 1 << 20, 0.125f, 1);
    TB_CHECK(cu_pc_conv_row(&st, key, &row) && row.algo == 4 && row.math == CUDNN_TENSOR_OP_MATH &&
                 row.memory == 1 << 20 && fabs(row.time - 0.125) < 1e-6 && row.det == CUDNN_DETERMINISTIC &&
                 row.status == CUDNN_STATUS_SUCCESS,
             "a measured row comes back as a perf row cu_conv_pick can check");
    tb_pc_close(st.plan_cache);
    /* the driver in the key: the kernel module's version, proprietary and open modules */
    static const char *const lines[][2] = {
        {"NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 09:00:00 UTC 2025\n", "580.95.05"},
        {"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16)\n",
         "580.95.05"},
        {"NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.124.06  Release Build\n", "570.124.06"},
        {"NVRM version: something else\n", "-"},
        {"NVRM version: NVIDIA UNIX x86_64 Kernel Module\n", "-"}, /* "Module" and no version: ends, "-" */
        {"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64 \t\n", "-"}};
    for (int i = 0; i < 6; i++) {
        char v[32];
        cu_nvrm_version_parse(lines[i][0], v, sizeof v);
        TB_CHECK(strcmp(v, lines[i][1]) == 0, "kernel module version %s from line %d (%s)", v, i, lines[i][1]);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("# could not remove %s\n", dir);
}
#endif

int main(void) {
#ifdef TB_HAVE_CUDA
    test_cuda_cache_text();
#endif
    test_descriptions();
    test_planted();
    test_graph_hash();
    test_schedule();
    return tb_test_exit("fused_host");
}
