/* fused_desc.c - builders and structural checks of the fused graphs'
 * plain C descriptions (see fused_desc.h). No cuDNN, no device. */
#include "model/fused_desc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model/plan_cache.h"

static const char *k_role_names[FD_R_COUNT] = {
    "x",        "w",       "y",      "dy",    "dw",     "dr",       "scale",   "bias",      "sum",
    "sqsum",    "gamma",   "beta",   "mean",  "invstd", "run_mean", "run_var", "next_mean", "next_var",
    "eq_scale", "eq_bias", "dgamma", "dbeta", "coef_a", "coef_b",   "coef_c"};

const char *fd_role_name(int role) { return role >= 0 && role < FD_R_COUNT ? k_role_names[role] : "?"; }

const char *fd_kind_name(fd_kind k) {
    static const char *n[FD_G_KINDS] = {"conv+stats", "bn-finalize", "wgrad+prologue", "dgrad+drelu+dbn"};
    return k < FD_G_KINDS ? n[k] : "?";
}

fd_dtype fd_dtype_of(tb_dtype d) {
    return d == TB_BF16 ? FD_BF16 : d == TB_F16 ? FD_HALF : d == TB_F64 ? FD_DOUBLE : FD_FLOAT;
}

const char *fd_dtype_name(fd_dtype d) {
    static const char *n[] = {"float", "half", "bfloat16", "int64", "double"};
    return d <= FD_DOUBLE ? n[d] : "?";
}

fd_variant fd_variant_nth(int i) {
    fd_variant v = {i >= 1, i >= 2};
    return v;
}

size_t fd_tensor_bytes(const fd_tensor *t) {
    size_t es = t->dt == FD_INT64 || t->dt == FD_DOUBLE ? 8 : t->dt == FD_FLOAT ? 4 : 2;
    size_t n = 1;
    for (int i = 0; i < 4; i++) n *= (size_t)t->dim[i];
    return n * es;
}

static int fail(char *why, size_t len, const char *fmt, ...) {
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- building ---------------------------------------------------------------------------- */

/* A tensor [n,c,h,w] with the strides of layout l (NHWC: C innermost). */
static int add_tensor(fd_graph *gr, const char *name, int role, fd_dtype dt, int64_t n, int64_t c, int64_t h, int64_t w,
                      tb_layout l) {
    if (gr->nt >= FD_MAX_TENSORS) return -1;
    int i = gr->nt++;
    fd_tensor *t = &gr->t[i];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->role = role;
    t->dt = dt;
    t->dim[0] = n, t->dim[1] = c, t->dim[2] = h, t->dim[3] = w;
    if (l == TB_NCHW) {
        t->stride[0] = c * h * w, t->stride[1] = h * w, t->stride[2] = w, t->stride[3] = 1;
    } else {
        t->stride[0] = h * w * c, t->stride[1] = 1, t->stride[2] = w * c, t->stride[3] = c;
    }
    t->uid = role >= 0 ? role + 1 : FD_UID_VIRTUAL + i;
    return i;
}

static int add_virtual(fd_graph *gr, const char *name, fd_dtype dt, const fd_tensor *like) {
    int i = add_tensor(gr, name, -1, dt, like->dim[0], like->dim[1], like->dim[2], like->dim[3], TB_NHWC);
    if (i < 0) return i;
    memcpy(gr->t[i].stride, like->stride, sizeof like->stride);
    gr->t[i].virt = 1;
    return i;
}

static int add_scalar(fd_graph *gr, const char *name, fd_dtype dt, double value) {
    int i = add_tensor(gr, name, -1, dt, 1, 1, 1, 1, TB_NCHW);
    if (i < 0) return i;
    gr->t[i].by_value = 1;
    gr->t[i].value = value;
    gr->t[i].uid = FD_UID_SCALAR + i;
    return i;
}

static fd_op *add_op(fd_graph *gr, fd_op_kind kind) {
    if (gr->nop >= FD_MAX_OPS) return NULL;
    fd_op *o = &gr->op[gr->nop++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    return o;
}

static void op_io(fd_op *o, int nin, const int *in, int nout, const int *out) {
    o->nin = nin;
    o->nout = nout;
    memcpy(o->in, in, (size_t)nin * sizeof *in);
    memcpy(o->out, out, (size_t)nout * sizeof *out);
}

static int pointwise(fd_graph *gr, fd_pw_mode mode, int a, int b, int out) {
    fd_op *o = add_op(gr, FD_OP_POINTWISE);
    if (!o) return -1;
    o->mode = mode;
    int in[2] = {a, b};
    op_io(o, b >= 0 ? 2 : 1, in, 1, &out);
    return 0;
}

static int check_problem(const fd_conv_problem *p, char *why, size_t len) {
    const tb_conv_geom *g = &p->g;
    if (g->cin < 1 || g->cout < 1 || g->k < 1 || g->stride < 1 || g->pad < 0 || p->n < 1 || p->h < 1 || p->w < 1)
        return fail(why, len, "conv %d->%d k%d s%d p%d at [%d,%d,%d] cannot be a graph", g->cin, g->cout, g->k,
                    g->stride, g->pad, p->n, p->h, p->w);
    if (p->h + 2 * g->pad < g->k || p->w + 2 * g->pad < g->k)
        return fail(why, len, "conv k%d is larger than its padded %dx%d input", g->k, p->h, p->w);
    if (p->dtype == TB_F64) return fail(why, len, "float64 activations have no cuDNN fused engines");
    return 0;
}

static void begin(fd_graph *gr, fd_kind kind) {
    memset(gr, 0, sizeof *gr);
    gr->kind = kind;
}

static void conv_label(fd_graph *gr, const fd_conv_problem *p, const char *tail) {
    /* the label is the plan's key (registry, plan cache): every dimension that shapes a tensor is in it */
    snprintf(gr->label, sizeof gr->label, "%s %d->%d k%d s%d p%d %s %s n=%d %dx%d%s", fd_kind_name(gr->kind),
             p->g.cin, p->g.cout, p->g.k, p->g.stride, p->g.pad, tb_dtype_name(p->dtype), tb_layout_name(p->layout),
             p->n, p->h, p->w, tail);
}

/* x, w (and, with a prologue, scale and bias and relu(x * scale + bias));
 * returns the index of the tensor the convolution reads, or -1. */
static int input_side(fd_graph *gr, const fd_conv_problem *p, int prologue, fd_variant v, int *w_out) {
    fd_dtype io = fd_dtype_of(p->dtype);
    const tb_conv_geom *g = &p->g;
    int x = add_tensor(gr, "x", FD_R_X, io, p->n, g->cin, p->h, p->w, p->layout);
    if (w_out) *w_out = add_tensor(gr, "w", FD_R_W, io, g->cout, g->cin, g->k, g->k, p->layout);
    if (x < 0 || !prologue) return x;
    fd_dtype sb = v.io_scale_bias ? io : FD_FLOAT, vt = v.io_virtual ? io : FD_FLOAT;
    int s = add_tensor(gr, "scale", FD_R_SCALE, sb, 1, g->cin, 1, 1, p->layout);
    int b = add_tensor(gr, "bias", FD_R_BIAS, sb, 1, g->cin, 1, 1, p->layout);
    int t1 = add_virtual(gr, "x*scale", vt, &gr->t[x]);
    int t2 = add_virtual(gr, "x*scale+bias", vt, &gr->t[x]);
    int t3 = add_virtual(gr, "relu(x*scale+bias)", vt, &gr->t[x]);
    if (s < 0 || b < 0 || t3 < 0 || pointwise(gr, FD_PW_MUL, x, s, t1) || pointwise(gr, FD_PW_ADD, t1, b, t2) ||
        pointwise(gr, FD_PW_RELU_FWD, t2, -1, t3))
        return -1;
    return t3;
}

static int out_hw(const fd_conv_problem *p, int *ho, int *wo) {
    *ho = (p->h + 2 * p->g.pad - p->g.k) / p->g.stride + 1;
    *wo = (p->w + 2 * p->g.pad - p->g.k) / p->g.stride + 1;
    return 0;
}

int fd_build_conv_stats(fd_graph *gr, const fd_conv_problem *p, fd_variant v, char *why, size_t len) {
    begin(gr, FD_G_CONV_STATS);
    if (check_problem(p, why, len)) return -1;
    int w = -1, ho, wo;
    out_hw(p, &ho, &wo);
    int in = input_side(gr, p, p->prologue, v, &w);
    int y = add_tensor(gr, "y", FD_R_Y, fd_dtype_of(p->dtype), p->n, p->g.cout, ho, wo, p->layout);
    int s = add_tensor(gr, "sum", FD_R_SUM, FD_FLOAT, 1, p->g.cout, 1, 1, p->layout);
    int q = add_tensor(gr, "sqsum", FD_R_SQSUM, FD_FLOAT, 1, p->g.cout, 1, 1, p->layout);
    fd_op *c = in < 0 || w < 0 || y < 0 || s < 0 || q < 0 ? NULL : add_op(gr, FD_OP_CONV_FWD);
    fd_op *st = c ? add_op(gr, FD_OP_GENSTATS) : NULL;
    if (!st) return fail(why, len, "conv+stats graph: out of description slots");
    int cin[2] = {in, w}, sums[2] = {s, q};
    op_io(c, 2, cin, 1, &y);
    c->stride = p->g.stride, c->pad = p->g.pad;
    op_io(st, 1, &y, 2, sums);
    char tail[24] = "";
    if (p->prologue) snprintf(tail, sizeof tail, " pro v%d%d", v.io_scale_bias, v.io_virtual);
    conv_label(gr, p, tail);
    return 0;
}

int fd_build_wgrad_pro(fd_graph *gr, const fd_conv_problem *p, fd_variant v, char *why, size_t len) {
    begin(gr, FD_G_WGRAD_PRO);
    if (check_problem(p, why, len)) return -1;
    int ho, wo;
    out_hw(p, &ho, &wo);
    fd_dtype io = fd_dtype_of(p->dtype);
    int in = input_side(gr, p, 1, v, NULL);
    int dy = add_tensor(gr, "dy", FD_R_DY, io, p->n, p->g.cout, ho, wo, p->layout);
    int dw = add_tensor(gr, "dw", FD_R_DW, io, p->g.cout, p->g.cin, p->g.k, p->g.k, p->layout);
    fd_op *c = in < 0 || dy < 0 || dw < 0 ? NULL : add_op(gr, FD_OP_CONV_WGRAD);
    if (!c) return fail(why, len, "wgrad graph: out of description slots");
    int cin[2] = {in, dy};
    op_io(c, 2, cin, 1, &dw);
    c->stride = p->g.stride, c->pad = p->g.pad;
    char tail[16];
    snprintf(tail, sizeof tail, " v%d%d", v.io_scale_bias, v.io_virtual);
    conv_label(gr, p, tail);
    return 0;
}

int fd_build_dgrad_dbn(fd_graph *gr, const fd_conv_problem *p, char *why, size_t len) {
    begin(gr, FD_G_DGRAD_DBN);
    if (check_problem(p, why, len)) return -1;
    int ho, wo;
    out_hw(p, &ho, &wo);
    fd_dtype io = fd_dtype_of(p->dtype);
    const tb_conv_geom *g = &p->g;
    int dy = add_tensor(gr, "dy", FD_R_DY, io, p->n, g->cout, ho, wo, p->layout);
    int w = add_tensor(gr, "w", FD_R_W, io, g->cout, g->cin, g->k, g->k, p->layout);
    int x = add_tensor(gr, "x", FD_R_X, io, p->n, g->cin, p->h, p->w, p->layout);
    int t = x < 0 ? -1 : add_virtual(gr, "dgrad", FD_FLOAT, &gr->t[x]);
    int pc[8];
    static const int roles[8] = {FD_R_MEAN,   FD_R_INVSTD, FD_R_GAMMA,  FD_R_BETA,
                                 FD_R_DGAMMA, FD_R_DBETA,  FD_R_COEF_A, FD_R_COEF_B};
    for (int i = 0; i < 8; i++)
        pc[i] = add_tensor(gr, k_role_names[roles[i]], roles[i], FD_FLOAT, 1, g->cin, 1, 1, p->layout);
    int cc = add_tensor(gr, "coef_c", FD_R_COEF_C, FD_FLOAT, 1, g->cin, 1, 1, p->layout);
    int a1 = t < 0 ? -1 : add_virtual(gr, "x-mean", FD_FLOAT, &gr->t[x]);
    int a2 = a1 < 0 ? -1 : add_virtual(gr, "(x-mean)*invstd", FD_FLOAT, &gr->t[x]);
    int a3 = a2 < 0 ? -1 : add_virtual(gr, "xhat*gamma", FD_FLOAT, &gr->t[x]);
    int a4 = a3 < 0 ? -1 : add_virtual(gr, "bn(x)", FD_FLOAT, &gr->t[x]);
    int dr = add_tensor(gr, "dr", FD_R_DR, io, p->n, g->cin, p->h, p->w, p->layout);
    if (dy < 0 || w < 0 || cc < 0 || a4 < 0 || dr < 0) return fail(why, len, "dgrad graph: out of description slots");
    for (int i = 0; i < 8; i++)
        if (pc[i] < 0) return fail(why, len, "dgrad graph: out of description slots");
    fd_op *c = add_op(gr, FD_OP_CONV_DGRAD);
    int cin[2] = {dy, w};
    op_io(c, 2, cin, 1, &t);
    c->stride = g->stride, c->pad = g->pad;
    if (pointwise(gr, FD_PW_SUB, x, pc[0], a1) || pointwise(gr, FD_PW_MUL, a1, pc[1], a2) ||
        pointwise(gr, FD_PW_MUL, a2, pc[2], a3) || pointwise(gr, FD_PW_ADD, a3, pc[3], a4) ||
        pointwise(gr, FD_PW_RELU_BWD, t, a4, dr))
        return fail(why, len, "dgrad graph: out of description slots");
    fd_op *b = add_op(gr, FD_OP_BN_BWD_WEIGHTS);
    if (!b) return fail(why, len, "dgrad graph: out of description slots");
    int bin[5] = {x, pc[0], pc[1], pc[2], dr}, bout[5] = {pc[4], pc[5], pc[6], pc[7], cc};
    op_io(b, 5, bin, 5, bout);
    conv_label(gr, p, "");
    return 0;
}

int fd_build_finalize(fd_graph *gr, int C, int64_t count, double momentum, double eps, int double_scalars, char *why,
                      size_t len) {
    begin(gr, FD_G_FINALIZE);
    if (C < 1 || count < 2)
        return fail(why, len, "BN finalize over %d channels of %lld values cannot be a graph", C, (long long)count);
    static const int in_roles[6] = {FD_R_SUM, FD_R_SQSUM, FD_R_GAMMA, FD_R_BETA, FD_R_RUN_MEAN, FD_R_RUN_VAR};
    static const int out_roles[6] = {FD_R_EQ_SCALE, FD_R_EQ_BIAS,   FD_R_MEAN,
                                     FD_R_INVSTD,   FD_R_NEXT_MEAN, FD_R_NEXT_VAR};
    int in[9], out[6];
    for (int i = 0; i < 6; i++)
        in[i] = add_tensor(gr, k_role_names[in_roles[i]], in_roles[i], FD_FLOAT, 1, C, 1, 1, TB_NHWC);
    fd_dtype sd = double_scalars ? FD_DOUBLE : FD_FLOAT; /* the new samples: float; the legacy ones: double */
    in[6] = add_scalar(gr, "epsilon", sd, eps);
    in[7] = add_scalar(gr, "momentum", sd, momentum);
    in[8] = add_scalar(gr, "count", FD_INT64, (double)count);
    for (int i = 0; i < 6; i++)
        out[i] = add_tensor(gr, k_role_names[out_roles[i]], out_roles[i], FD_FLOAT, 1, C, 1, 1, TB_NHWC);
    fd_op *o = add_op(gr, FD_OP_BN_FINALIZE);
    if (!o) return fail(why, len, "finalize graph: out of description slots");
    op_io(o, 9, in, 6, out);
    snprintf(gr->label, sizeof gr->label, "%s C=%d count=%lld%s", fd_kind_name(gr->kind), C, (long long)count,
             double_scalars ? " scalars double" : "");
    return 0;
}

/* ---- checking ----------------------------------------------------------------------------- */

/* Dense in some dimension order: ignoring dimensions of size 1, sorted by
 * stride the innermost has stride 1 and each next one spans the previous. */
static int dense(const fd_tensor *t) {
    int idx[4], n = 0;
    for (int i = 0; i < 4; i++) {
        if (t->dim[i] < 1 || t->stride[i] < 1) return 0;
        if (t->dim[i] > 1) idx[n++] = i;
    }
    for (int i = 1; i < n; i++) /* insertion sort by stride, innermost first */
        for (int j = i; j > 0 && t->stride[idx[j]] < t->stride[idx[j - 1]]; j--) {
            int k = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = k;
        }
    int64_t span = 1;
    for (int i = 0; i < n; i++) {
        if (t->stride[idx[i]] != span) return 0;
        span *= t->dim[idx[i]];
    }
    return 1;
}

static int same_dims(const fd_tensor *a, const fd_tensor *b) { return memcmp(a->dim, b->dim, sizeof a->dim) == 0; }

static int per_channel(const fd_tensor *t, int64_t C) {
    return t->dim[0] == 1 && t->dim[1] == C && t->dim[2] == 1 && t->dim[3] == 1;
}

static int is_scalar(const fd_tensor *t) {
    return t->dim[0] == 1 && t->dim[1] == 1 && t->dim[2] == 1 && t->dim[3] == 1;
}

/* conv output size of input side n with kernel k */
static int64_t conv_out(int64_t n, int64_t k, const fd_op *o) { return (n + 2 * o->pad - k) / o->stride + 1; }

static int check_conv(const fd_graph *gr, const fd_op *o, char *why, size_t len) {
    const fd_tensor *x, *w, *y; /* input image, filter, output image in the forward sense */
    if (o->nin != 2 || o->nout != 1) return fail(why, len, "a convolution takes 2 inputs and makes 1 output");
    if (o->stride < 1 || o->pad < 0) return fail(why, len, "convolution stride %d pad %d", o->stride, o->pad);
    if (o->kind == FD_OP_CONV_FWD)
        x = &gr->t[o->in[0]], w = &gr->t[o->in[1]], y = &gr->t[o->out[0]];
    else if (o->kind == FD_OP_CONV_DGRAD)
        y = &gr->t[o->in[0]], w = &gr->t[o->in[1]], x = &gr->t[o->out[0]];
    else
        x = &gr->t[o->in[0]], y = &gr->t[o->in[1]], w = &gr->t[o->out[0]];
    if (w->dim[2] != w->dim[3]) return fail(why, len, "filter %s is not square", w->name);
    if (x->dim[1] != w->dim[1] || y->dim[1] != w->dim[0] || x->dim[0] != y->dim[0])
        return fail(why, len,
                    "convolution %s [%lld,%lld] / %s [%lld,%lld] / %s [%lld,%lld]: channels or batch "
                    "do not match",
                    x->name, (long long)x->dim[0], (long long)x->dim[1], w->name, (long long)w->dim[0],
                    (long long)w->dim[1], y->name, (long long)y->dim[0], (long long)y->dim[1]);
    if (conv_out(x->dim[2], w->dim[2], o) != y->dim[2] || conv_out(x->dim[3], w->dim[3], o) != y->dim[3])
        return fail(why, len, "convolution output %s is %lldx%lld, the geometry gives %lldx%lld", y->name,
                    (long long)y->dim[2], (long long)y->dim[3], (long long)conv_out(x->dim[2], w->dim[2], o),
                    (long long)conv_out(x->dim[3], w->dim[3], o));
    if (x->dt == FD_INT64 || w->dt == FD_INT64 || y->dt == FD_INT64)
        return fail(why, len, "a convolution on int64 tensors");
    return 0;
}

static int check_pointwise(const fd_graph *gr, const fd_op *o, char *why, size_t len) {
    int bwd = o->mode == FD_PW_RELU_BWD, unary = o->mode == FD_PW_RELU_FWD;
    if (o->nout != 1 || o->nin != (unary ? 1 : 2))
        return fail(why, len, "pointwise mode %d takes %d inputs (has %d)", (int)o->mode, unary ? 1 : 2, o->nin);
    const fd_tensor *a = &gr->t[o->in[0]], *y = &gr->t[o->out[0]];
    if (!same_dims(a, y)) return fail(why, len, "pointwise output %s does not have the shape of %s", y->name, a->name);
    if (!unary) {
        const fd_tensor *b = &gr->t[o->in[1]];
        if (bwd ? !same_dims(a, b) : !(same_dims(a, b) || per_channel(b, a->dim[1])))
            return fail(why, len, "pointwise operand %s [%lld,%lld,%lld,%lld] neither matches %s nor is [1,%lld,1,1]",
                        b->name, (long long)b->dim[0], (long long)b->dim[1], (long long)b->dim[2], (long long)b->dim[3],
                        a->name, (long long)a->dim[1]);
    }
    return 0;
}

static int check_channels(const fd_graph *gr, const int *ts, int n, int64_t C, int want_float, char *why, size_t len) {
    for (int i = 0; i < n; i++) {
        const fd_tensor *t = &gr->t[ts[i]];
        if (t->by_value) continue;
        if (!per_channel(t, C)) return fail(why, len, "%s must be [1,%lld,1,1] per channel", t->name, (long long)C);
        if (want_float && t->dt != FD_FLOAT) return fail(why, len, "statistic %s must be float", t->name);
    }
    return 0;
}

static int check_op(const fd_graph *gr, const fd_op *o, char *why, size_t len) {
    switch (o->kind) {
    case FD_OP_CONV_FWD:
    case FD_OP_CONV_DGRAD:
    case FD_OP_CONV_WGRAD: return check_conv(gr, o, why, len);
    case FD_OP_POINTWISE: return check_pointwise(gr, o, why, len);
    case FD_OP_GENSTATS:
        if (o->nin != 1 || o->nout != 2) return fail(why, len, "GEN_STATS takes 1 input and makes 2 outputs");
        return check_channels(gr, o->out, 2, gr->t[o->in[0]].dim[1], 1, why, len);
    case FD_OP_BN_FINALIZE: {
        if (o->nin != 9 || o->nout != 6) return fail(why, len, "BN_FINALIZE takes 9 inputs and makes 6 outputs");
        int64_t C = gr->t[o->in[0]].dim[1];
        for (int i = 6; i < 9; i++)
            if (!gr->t[o->in[i]].by_value || !is_scalar(&gr->t[o->in[i]]))
                return fail(why, len, "BN_FINALIZE's %s must be a by-value scalar", gr->t[o->in[i]].name);
        if (gr->t[o->in[8]].dt != FD_INT64) return fail(why, len, "BN_FINALIZE's count must be int64");
        if (check_channels(gr, o->in, 6, C, 1, why, len)) return -1;
        return check_channels(gr, o->out, 6, C, 1, why, len);
    }
    case FD_OP_BN_BWD_WEIGHTS: {
        if (o->nin != 5 || o->nout != 5) return fail(why, len, "BN_BWD_WEIGHTS takes 5 inputs and makes 5 outputs");
        const fd_tensor *x = &gr->t[o->in[0]], *dy = &gr->t[o->in[4]];
        if (!same_dims(x, dy)) return fail(why, len, "BN_BWD_WEIGHTS: %s and %s differ in shape", x->name, dy->name);
        if (check_channels(gr, o->in + 1, 3, x->dim[1], 1, why, len)) return -1;
        return check_channels(gr, o->out, 5, x->dim[1], 1, why, len);
    }
    }
    return fail(why, len, "unknown operation kind %d", (int)o->kind);
}

/* Per tensor: how many ops write it, how many read it, and the first op
 * that writes / reads it. */
typedef struct {
    int writes, reads, first_write, first_read;
} use_count;

static int check_tensors(const fd_graph *gr, const use_count *u, char *why, size_t len) {
    for (int i = 0; i < gr->nt; i++) {
        const fd_tensor *t = &gr->t[i];
        for (int j = 0; j < i; j++)
            if (gr->t[j].uid == t->uid)
                return fail(why, len, "tensors %s and %s share unique id %lld", gr->t[j].name, t->name,
                            (long long)t->uid);
        if (!dense(t)) return fail(why, len, "tensor %s has strides that are not dense", t->name);
        if (t->virt && t->by_value) return fail(why, len, "tensor %s is both virtual and by value", t->name);
        if (t->by_value && (!is_scalar(t) || u[i].writes))
            return fail(why, len, "by-value tensor %s must be a scalar input", t->name);
        if (!t->virt && !t->by_value && (t->role < 0 || t->role >= FD_R_COUNT || t->uid != t->role + 1))
            return fail(why, len, "tensor %s has no buffer role (uid %lld)", t->name, (long long)t->uid);
        if (u[i].writes + u[i].reads == 0) return fail(why, len, "tensor %s is not used", t->name);
        if (u[i].writes > 1) return fail(why, len, "tensor %s is written by %d operations", t->name, u[i].writes);
        if (t->virt && (u[i].writes != 1 || u[i].reads < 1))
            return fail(why, len, "virtual tensor %s must be written once and read (written %d, read %d)", t->name,
                        u[i].writes, u[i].reads);
        if (u[i].writes && u[i].reads && u[i].first_read <= u[i].first_write)
            return fail(why, len, "tensor %s is read by operation %d before operation %d writes it", t->name,
                        u[i].first_read, u[i].first_write);
    }
    return 0;
}

int fd_check(const fd_graph *gr, char *why, size_t len) {
    if (gr->nop < 1) return fail(why, len, "the graph has no operation");
    use_count u[FD_MAX_TENSORS];
    memset(u, 0, sizeof u);
    for (int k = 0; k < gr->nop; k++) {
        const fd_op *o = &gr->op[k];
        for (int j = 0; j < o->nin + o->nout; j++) {
            int ti = j < o->nin ? o->in[j] : o->out[j - o->nin];
            if (ti < 0 || ti >= gr->nt) return fail(why, len, "operation %d names tensor %d of %d", k, ti, gr->nt);
            for (int i2 = 0; j >= o->nin && i2 < o->nin; i2++)
                if (o->in[i2] == ti) return fail(why, len, "operation %d reads its own output %s", k, gr->t[ti].name);
            use_count *c = &u[ti];
            if (j < o->nin) {
                if (!c->reads++) c->first_read = k;
            } else if (!c->writes++) {
                c->first_write = k;
            }
        }
    }
    if (check_tensors(gr, u, why, len)) return -1;
    for (int k = 0; k < gr->nop; k++) {
        char inner[192];
        if (check_op(gr, &gr->op[k], inner, sizeof inner))
            return fail(why, len, "%s, operation %d: %s", gr->label, k, inner);
    }
    return 0;
}

int fd_pack_roles(const fd_graph *gr, int roles[FD_R_COUNT]) {
    int n = 0;
    for (int i = 0; i < gr->nt && n < FD_R_COUNT; i++)
        if (!gr->t[i].virt && !gr->t[i].by_value) roles[n++] = gr->t[i].role;
    return n;
}

/* the plan cache's FNV-1a over v's 8 bytes, lowest first */
static uint64_t mix(uint64_t h, int64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    return tb_pc_fnv1a(b, sizeof b, h);
}

uint64_t fd_graph_hash(const fd_graph *gr) {
    uint64_t h = mix(0, gr->kind); /* 0: FNV's offset basis */
    h = mix(mix(h, gr->nt), gr->nop);
    for (int i = 0; i < gr->nt; i++) {
        const fd_tensor *t = &gr->t[i];
        h = mix(mix(mix(mix(mix(h, t->uid), t->dt), t->virt), t->by_value), t->role);
        for (int d = 0; d < 4; d++) h = mix(mix(h, t->dim[d]), t->stride[d]);
    }
    for (int i = 0; i < gr->nop; i++) {
        const fd_op *o = &gr->op[i];
        h = mix(mix(mix(mix(mix(mix(h, o->kind), o->mode), o->nin), o->nout), o->stride), o->pad);
        for (int k = 0; k < o->nin; k++) h = mix(h, o->in[k]);
        for (int k = 0; k < o->nout; k++) h = mix(h, o->out[k]);
    }
    return h;
}
