/* fused_desc.h - the fused convolution + BatchNorm graphs of --fuse graph as
 * plain C descriptions: tensors (dims, strides, unique ids, data types,
 * virtual and by-value flags) and operations, built and checked on the host
 * without a GPU or cuDNN, then lowered one to one to cuDNN backend
 * descriptors (model/cuda/fused_lower.c).
 *
 * The four graphs (cudnn-frontend's samples show the same ones in C++):
 *
 *   FD_G_CONV_STATS   [relu(x * scale + bias)] -> conv fprop -> y, and
 *                     GEN_STATS of y -> sum, sqsum              ("SBRCS")
 *   FD_G_FINALIZE     BN_FINALIZE_STATISTICS: sum, sqsum, gamma, beta,
 *                     running stats, eps, momentum, count -> eq scale, eq
 *                     bias, saved mean, saved 1/std, next running stats
 *   FD_G_WGRAD_PRO    relu(x * scale + bias) -> conv wgrad with dy -> dw
 *   FD_G_DGRAD_DBN    conv dgrad of dy with w -> t; dr = drelu(t, bn(x))
 *                     with bn(x) = (x - mean) * invstd * gamma + beta;
 *                     BN_BWD_WEIGHTS(x, mean, invstd, gamma, dr) ->
 *                     dgamma, dbeta and the coefficients A, B, C of
 *                     dx = A * dr + B * x + C                    ("Dgrad
 *                     Drelu DBNweight", cuDNN >= 9.8)
 *
 * Every non-virtual tensor is backed by one buffer of the op's arguments,
 * named by its role (fd_role); its unique id is role + 1, so a variant pack
 * is the list of roles a graph uses. Virtual tensors (the prologue's and the
 * dgrad's intermediates) get ids from FD_UID_VIRTUAL, by-value scalars
 * (epsilon, momentum, the element count) from FD_UID_SCALAR. Dimensions are
 * in N,C,H,W order (filters K,C,R,S) with the strides of the layout (NHWC:
 * filters KRSC); per-channel tensors are [1,C,1,1] and scalars [1,1,1,1].
 *
 * Data types: x, w, y, dy, dx, dw and dr in the activation dtype; sums,
 * statistics, gamma, beta and the BN coefficients float; the prologue's
 * scale and bias and the virtual intermediates as the variant says (cuDNN's
 * samples use float intermediates with fp16 scale and bias in one place and
 * fp16 intermediates in another: the planner tries the variants in turn).
 */
#ifndef TB_FUSED_DESC_H
#define TB_FUSED_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "model/backend.h"

typedef enum { FD_FLOAT = 0, FD_HALF = 1, FD_BF16 = 2, FD_INT64 = 3, FD_DOUBLE = 4 } fd_dtype;

typedef enum { FD_PW_ADD, FD_PW_SUB, FD_PW_MUL, FD_PW_RELU_FWD, FD_PW_RELU_BWD } fd_pw_mode;

typedef enum {
    FD_OP_CONV_FWD,       /* in: x, w             out: y */
    FD_OP_CONV_DGRAD,     /* in: dy, w            out: dx */
    FD_OP_CONV_WGRAD,     /* in: x, dy            out: dw */
    FD_OP_POINTWISE,      /* in: x [, b]          out: y  (RELU_BWD: in dy, x; out dx) */
    FD_OP_GENSTATS,       /* in: x                out: sum, sqsum */
    FD_OP_BN_FINALIZE,    /* in: sum, sqsum, scale, bias, prev mean, prev var, eps, momentum, count
                             out: eq scale, eq bias, mean, invstd, next mean, next var */
    FD_OP_BN_BWD_WEIGHTS, /* in: x, mean, invstd, scale, dy
                             out: dscale, dbias, eq dy scale, eq x scale, eq bias */
} fd_op_kind;

/* The buffer behind a non-virtual tensor (its uid is role + 1). */
typedef enum {
    FD_R_X,     /* conv input, or the folded BN's input (the previous conv's raw output) */
    FD_R_W,     /* filter */
    FD_R_Y,     /* conv output */
    FD_R_DY,    /* gradient of the conv output */
    FD_R_DW,    /* filter gradient */
    FD_R_DR,    /* gradient of the folded BN's output before its ReLU (dgrad graph) */
    FD_R_SCALE, /* prologue: per-channel scale (gamma * invstd) */
    FD_R_BIAS,  /* prologue: per-channel bias (beta - mean * gamma * invstd) */
    FD_R_SUM,   /* per-channel sum of y */
    FD_R_SQSUM, /* per-channel sum of y^2 */
    FD_R_GAMMA,
    FD_R_BETA,
    FD_R_MEAN,     /* saved batch mean */
    FD_R_INVSTD,   /* saved batch 1/sqrt(var + eps) */
    FD_R_RUN_MEAN, /* running statistics before the update */
    FD_R_RUN_VAR,
    FD_R_NEXT_MEAN, /* running statistics after it */
    FD_R_NEXT_VAR,
    FD_R_EQ_SCALE, /* BN finalize: the forward's per-channel scale and bias */
    FD_R_EQ_BIAS,
    FD_R_DGAMMA,
    FD_R_DBETA,
    FD_R_COEF_A, /* dx = A * dr + B * x + C */
    FD_R_COEF_B,
    FD_R_COEF_C,
    FD_R_COUNT
} fd_role;

#define FD_UID_VIRTUAL 100
#define FD_UID_SCALAR 200
#define FD_MAX_TENSORS 32
#define FD_MAX_OPS 12
#define FD_MAX_IO 9

typedef struct {
    const char *name; /* for messages: "x", "scale", "bn(x)" ... */
    int64_t uid;
    int64_t dim[4], stride[4];
    fd_dtype dt;
    int virt;     /* an intermediate that no buffer backs */
    int by_value; /* a host scalar, given at execution */
    double value; /* by-value: epsilon, momentum, count */
    int role;     /* fd_role, or -1 (virtual, by value) */
} fd_tensor;

typedef struct {
    fd_op_kind kind;
    fd_pw_mode mode;        /* FD_OP_POINTWISE */
    int in[FD_MAX_IO], nin; /* tensor indices */
    int out[FD_MAX_IO], nout;
    int stride, pad; /* convolutions: square, symmetric; dilation 1 */
} fd_op;

typedef enum { FD_G_CONV_STATS, FD_G_FINALIZE, FD_G_WGRAD_PRO, FD_G_DGRAD_DBN, FD_G_KINDS } fd_kind;

typedef struct {
    fd_kind kind;
    fd_tensor t[FD_MAX_TENSORS];
    int nt;
    fd_op op[FD_MAX_OPS];
    int nop;
    char label[128]; /* "conv+stats 64->64 k3 s1 p1 bf16 NHWC n=256 56x56 pro v0" */
} fd_graph;

/* How the prologue's operands are typed: scale and bias float or in the
 * activation dtype, the virtual intermediates float or the activation dtype. */
typedef struct {
    int io_scale_bias; /* 1: scale and bias in the activation dtype */
    int io_virtual;    /* 1: virtual tensors in the activation dtype */
} fd_variant;
#define FD_VARIANTS 3
/* The variants in the order the planner tries them: {float, float},
 * {io, float}, {io, io}. */
fd_variant fd_variant_nth(int i);

/* One conv node's problem. */
typedef struct {
    tb_conv_geom g;
    tb_dtype dtype;
    tb_layout layout;
    int n, h, w;  /* x is [n, cin, h, w] */
    int prologue; /* CONV_STATS: x goes through relu(x * scale + bias) first */
} fd_conv_problem;

fd_dtype fd_dtype_of(tb_dtype d);
const char *fd_dtype_name(fd_dtype d);
const char *fd_kind_name(fd_kind k);
const char *fd_role_name(int role);

/* The builders: 0 on success, -1 with the reason in why (a problem no graph
 * can express, as a channel count < 1). */
int fd_build_conv_stats(fd_graph *gr, const fd_conv_problem *p, fd_variant v, char *why, size_t len);
int fd_build_wgrad_pro(fd_graph *gr, const fd_conv_problem *p, fd_variant v, char *why, size_t len);
int fd_build_dgrad_dbn(fd_graph *gr, const fd_conv_problem *p, char *why, size_t len);
/* C channels, count values per channel (N*H*W), momentum and eps (float,
 * or double by value: cudnn-frontend's legacy samples pass them so). */
int fd_build_finalize(fd_graph *gr, int C, int64_t count, double momentum, double eps, int double_scalars, char *why,
                      size_t len);

/* The structural checks every graph must pass before it is lowered: unique
 * ids; every tensor used; virtual tensors produced exactly once, before
 * they are read, and read at least once; non-virtual tensors never both
 * read and written by different ops in a way cuDNN cannot order (outputs
 * produced exactly once); no op reads its own output; strides of a dense
 * tensor in some dimension order; shapes per op (convolution output size,
 * pointwise broadcast of [1,C,1,1] operands, per-channel outputs of C
 * channels, scalars [1,1,1,1]); statistics float; by-value tensors are
 * scalars and never virtual. 0 when it passes, else -1 with the first
 * problem in why. */
int fd_check(const fd_graph *gr, char *why, size_t len);

/* A 64-bit hash of what a plan of gr runs: every tensor's uid, shape,
 * strides, dtype, virtual and by-value flags and role, every op's kind,
 * mode, operands and geometry (not the names or the by-value values, which
 * the plan takes at execution). The plan cache keys fused plans by it, so
 * a plan saved for another graph under the same label is never loaded. */
uint64_t fd_graph_hash(const fd_graph *gr);

/* The roles a graph's variant pack needs (its non-virtual, non-scalar
 * tensors), in tensor order; returns how many (<= FD_R_COUNT). */
int fd_pack_roles(const fd_graph *gr, int roles[FD_R_COUNT]);

/* Bytes of a dense tensor. */
size_t fd_tensor_bytes(const fd_tensor *t);

#endif
