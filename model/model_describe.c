/* model_describe.c - what the model's nodes were chosen to run, one line a
 * node, for the results file (/conv_algorithms, /batchnorms) and logs (see
 * model.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model/graph_fused.h"
#include "model/model.h"

/* Conv node nd's line: its plan, and with --fuse graph what its fused op runs. */
static void describe_conv(const tb_graph *g, tb_backend *be, const tb_node *nd, char *line, size_t len) {
    (void)g;
    be->conv_plan_describe(be, nd->plan, line, len);
    if (nd->fconv) {
        size_t l = strlen(line);
        int k2 = snprintf(line + l, len - l, " | fused%s: ", nd->fpro >= 0 ? " with the prologue" : "");
        if (k2 > 0 && (size_t)k2 < len - l) be->fconv_plan_describe(be, nd->fplan, line + l + k2, len - l - (size_t)k2);
    }
}

/* Appends printf's text to line (len bytes, *l used), cut short at its end. */
static void put(char *line, size_t len, size_t *l, const char *fmt, ...) {
    if (*l + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line + *l, len - *l, fmt, ap);
    va_end(ap);
    if (k > 0) *l += (size_t)k < len - *l ? (size_t)k : len - *l - 1;
}

/* BN node b's line: how it runs under --fuse, what --fuse fastest timed,
 * which kernels. */
static void describe_bn(const tb_graph *g, tb_backend *be, const tb_node *b, char *line, size_t len) {
    size_t l = 0;
    line[0] = '\0';
    put(line, len, &l, "%s", tb_bn_fuse_mode_name(b->fmode));
    if (b->fmode == TB_BNF_FOLD && b->fpeer >= 0) put(line, len, &l, " into %s", g->nodes[b->fpeer].name);
    if (b->fmode == TB_BNF_ZFOLD && b->fpeer >= 0) put(line, len, &l, " %s", g->nodes[b->fpeer].name);
    if (b->fmode != TB_BNF_UNFUSED && b->fstats >= 0)
        put(line, len, &l, ", statistics from %s", g->nodes[b->fstats].name);
    if (b->ftimed & 1)
        put(line, len, &l, "; timed folded %.4f ms, applied %.4f ms", b->ftime_ms[0][0], b->ftime_ms[0][1]);
    if (b->ftimed & 2)
        put(line, len, &l, "; timed fused %.4f ms, unfused %.4f ms", b->ftime_ms[1][0], b->ftime_ms[1][1]);
    if (b->fmode == TB_BNF_FOLD) /* its statistics, prologue and gradients: the convs' fused ops */
        put(line, len, &l, "; kernels none (the fused ops)");
    else if (be->bn_plan_describe && l + 3 < len) {
        put(line, len, &l, "; ");
        be->bn_plan_describe(be, b->plan, line + l, len - l);
    }
}

/* One "name: text" line per node of the kind into buf (len bytes, cut short
 * at its end); returns the length written. */
static size_t describe_nodes(tb_model *m, tb_node_kind kind,
                             void (*describe)(const tb_graph *, tb_backend *, const tb_node *, char *, size_t),
                             char *buf, size_t len) {
    size_t used = 0;
    if (len) buf[0] = '\0';
    /* one conv node: per batch size up to 4 choices of ~170 characters each
     * on the CUDA backend (graph-api engine, its knobs, vs legacy): 1024
     * could cut a second or third batch size's description short */
    char line[4096];
    for (int i = 0; i < m->g.nnodes && used + 1 < len; i++) {
        const tb_node *nd = &m->g.nodes[i];
        if (nd->kind != kind) continue;
        describe(&m->g, m->be, nd, line, sizeof line);
        int k = snprintf(buf + used, len - used, "%s: %s\n", nd->name, line);
        if (k < 0) break;
        used += (size_t)k < len - used ? (size_t)k : len - used - 1;
    }
    return used;
}

size_t tb_model_describe_convs(tb_model *m, char *buf, size_t len) {
    return describe_nodes(m, TB_NODE_CONV, describe_conv, buf, len);
}

size_t tb_model_describe_bns(tb_model *m, char *buf, size_t len) {
    return describe_nodes(m, TB_NODE_BN, describe_bn, buf, len);
}
