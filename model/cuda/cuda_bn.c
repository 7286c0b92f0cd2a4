/* cuda_bn.c - batch normalisation (+ residual add + ReLU) on the GPU (the
 * counterpart of cpu/cpu_bn.c).
 *
 *   y = act(gamma * (x - mean) * invstd + beta + z)
 *
 * Two paths, chosen per node by bn_plan:
 *  - cuDNN's fused kernels, cudnnBatchNormalizationForwardTrainingEx /
 *    BackwardEx in CUDNN_BATCHNORM_SPATIAL_PERSISTENT mode with
 *    CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION (or BN_ACTIVATION, or BN), where
 *    cuDNN takes them: NHWC, 16-bit activations, C % 4 == 0, and a ReLU
 *    whenever there is a residual. The ReLU mask lives in the node's reserve
 *    space (sized by cudnnGetBatchNormalizationTrainingExReserveSpaceSize at
 *    the largest batch). Backward uses it only when both gradient outputs
 *    are overwritten (ResNet's case): BackwardEx has one data blend factor.
 *  - own kernels (cuda_bn_kernels.cu) for everything else: shifted double
 *    partial sums per channel, combined in a fixed order.
 * Both keep the semantics of backend.h: biased variance to normalise,
 * unbiased into running_var, momentum 0.1, eps 1e-5, save_invstd =
 * 1/sqrt(var + eps). A cuDNN call that refuses the configuration at run
 * time (NOT_SUPPORTED or BAD_PARAM, any cuDNN 9 sub-code: cu_bn_falls_back)
 * moves the node to the own kernels for good (forward) or for that call
 * (backward: the own backward needs only x, y and the saved statistics,
 * which both paths keep alike). The first refusal in a process, at plan
 * time or at run time, is one "# cuda bn:" line (rank 0) with cuDNN's status.
 *
 * The own kernels' ReLU mask: a node planned on them with a ReLU whose C
 * takes 16-byte words (NHWC) has its reserve space sized for the mask
 * (cu_bn_mask_bytes), which the own training forward writes, or bn_apply
 * under --fuse graph (cu_bn_apply_mask), and the own backward reads
 * instead of y. A node --fuse graph means to fold into the next conv's
 * prologue has none (y_in_consumer: the conv makes y; ~105 MB at batch
 * 256 in bf16); under TB_BN_KERNELS=auto a node cuDNN takes has room for
 * the larger of cuDNN's reserve and the mask, as bn_tune may pick either.
 * The plan notes the batch the last forward wrote the mask for (mask_n, 0:
 * none; cuDNN's forward and the inference forward clear it), so a
 * backward never reads a mask its forward did not write.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_index.h"
#include "model/cuda/cuda_internal.h"

typedef struct {
    cu_bn_shape shape;          /* at the largest batch */
    int relu, has_z;
    int cudnn;                  /* 1: the fused cuDNN path */
    cudnnBatchNormOps_t ops;
    cudnnTensorDescriptor_t xd; /* x, y, z, dy, dx, dz: one descriptor, set per batch */
    int xd_n;
    cudnnTensorDescriptor_t pd; /* [1,C,1,1] float: gamma, beta, statistics */
    cudnnActivationDescriptor_t act;
    size_t reserve;             /* cuDNN's bytes at the largest batch */
    size_t mask_per_sample;     /* the own kernels' ReLU mask: bytes per sample (0: none) */
    int mask_n;                 /* the batch the mask holds y's ReLU for (0: none) */
    int measure;                /* 1 until bn_tune timed cuDNN's path against the own kernels
                                   (TB_BN_KERNELS=auto with autotune; cuda_bn_tune.c) */
    float ms_cudnn, ms_own;     /* what that timing gave (-1: not timed; ms_cudnn -1 with
                                   ms_own timed: cuDNN declined the node at run time) */
} bn_plan;

/* One line, the first time cuDNN refuses a node (later ones go quietly). */
static void say_refused(const bn_plan *p, int n, const char *where, cudnnStatus_t s) {
    static int said;
    if (said++) return;
    tb_info("# cuda bn: cuDNN's fused BatchNorm refused a %s NHWC [%d,%d,%d,%d]%s%s node %s (%s, %d); such "
            "nodes run on the own kernels",
            tb_dtype_name(p->shape.dtype), n, p->shape.C, p->shape.H, p->shape.W, p->has_z ? " +add" : "",
            p->relu ? " +relu" : "", where, cudnnGetErrorString(s), (int)s);
}

int tb_cuda_bn_plan_on_cudnn(const void *plan) { return plan && ((const bn_plan *)plan)->cudnn; }

int tb_cuda_bn_plan_to_measure(const void *plan) {
    const bn_plan *p = plan;
    return p && p->measure && p->cudnn;
}

void cu_bn_plan_use(void *plan, int cudnn, int measure) {
    bn_plan *p = plan;
    p->cudnn = cudnn;
    p->measure = measure;
}

void cu_bn_plan_timed(void *plan, float ms_cudnn, float ms_own) {
    bn_plan *p = plan;
    p->ms_cudnn = ms_cudnn, p->ms_own = ms_own;
}

void cu_bn_plan_describe(tb_backend *be, void *plan, char *buf, size_t len) {
    (void)be;
    const bn_plan *p = plan;
    int k = snprintf(buf, len, "kernels %s", p && p->cudnn ? "cudnn" : "own");
    if (!p || !(p->ms_own >= 0.0f) || k < 0 || (size_t)k >= len) return;
    if (p->ms_cudnn >= 0.0f)
        snprintf(buf + k, len - (size_t)k, " (timed: cudnn %.4f ms, own %.4f ms)", (double)p->ms_cudnn,
                 (double)p->ms_own);
    else
        snprintf(buf + k, len - (size_t)k, " (timed: cudnn declined, own %.4f ms)", (double)p->ms_own);
}

static int cudnn_eligible(const cu_state *st, const tb_bn_args *a) {
    const tb_tensor *x = a->x;
    if (st->bn_cudnn == CU_BN_OWN || a->stats_elsewhere) return 0; /* its forward may not be cuDNN's (--fuse graph) */
    if (x->dtype == TB_F32 || x->layout != TB_NHWC || x->c % 4 != 0) return 0;
    if (a->z && !a->relu) return 0; /* no "BN + add" op without the activation */
    return 1;
}

static void set_x_desc(bn_plan *p, int n) {
    if (p->xd_n == n) return;
    TB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->xd, CUDNN_TENSOR_NHWC,
                                              cu_cudnn_dtype(p->shape.dtype), n, p->shape.C,
                                              p->shape.H, p->shape.W));
    p->xd_n = n;
}

void *cu_bn_plan(tb_backend *be, const tb_bn_args *a, size_t *reserve_bytes) {
    cu_state *st = cu_state_of(be);
    const tb_tensor *x = a->x;
    *reserve_bytes = 0;
    bn_plan *p = calloc(1, sizeof *p);
    if (!p) TB_FATAL("out of host memory");
    cu_bn_shape s = {x->dtype, x->layout, x->n, x->c, x->h, x->w};
    p->shape = s;
    p->relu = a->relu;
    p->has_z = a->z != NULL;
    p->ms_cudnn = p->ms_own = -1.0f;
    /* the own kernels' scratch, at the largest batch: sized now, not in a step */
    cu_scratch(be, cu_bn_scratch_bytes(&s));
    if (a->relu && x->layout == TB_NHWC && !a->y_in_consumer)
        p->mask_per_sample = cu_bn_mask_bytes(1, x->c, x->h, x->w, (int)tb_dtype_size(x->dtype));
    *reserve_bytes = p->mask_per_sample * (size_t)x->n; /* the own kernels' (cuDNN's below, if it plans) */
    if (!cudnn_eligible(st, a)) return p;

    p->ops = a->z ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
             : a->relu ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION
                       : CUDNN_BATCHNORM_OPS_BN;
    TB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->xd));
    TB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->pd));
    TB_CUDNN_CHECK(cudnnCreateActivationDescriptor(&p->act));
    TB_CUDNN_CHECK(cudnnSetActivationDescriptor(p->act, CUDNN_ACTIVATION_RELU,
                                                CUDNN_PROPAGATE_NAN, 0.0));
    set_x_desc(p, x->n);
    TB_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p->pd, p->xd, CUDNN_BATCHNORM_SPATIAL_PERSISTENT));
    cudnnActivationDescriptor_t act = p->ops == CUDNN_BATCHNORM_OPS_BN ? NULL : p->act;
    cudnnTensorDescriptor_t zd = a->z ? p->xd : NULL;
    size_t fws = 0, bws = 0, res = 0;
    cudnnStatus_t s1 = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
        st->cudnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, p->ops, p->xd, zd, p->xd, p->pd, act, &fws);
    cudnnStatus_t s2 = cudnnGetBatchNormalizationBackwardExWorkspaceSize(
        st->cudnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, p->ops, p->xd, p->xd, p->xd, zd, p->xd,
        p->pd, act, &bws);
    cudnnStatus_t s3 = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
        st->cudnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, p->ops, act, p->xd, &res);
    if (s1 != CUDNN_STATUS_SUCCESS || s2 != CUDNN_STATUS_SUCCESS || s3 != CUDNN_STATUS_SUCCESS) {
        /* cuDNN declines this shape: the own kernels */
        say_refused(p, x->n, "at plan time", s1 != CUDNN_STATUS_SUCCESS ? s1 : s2 != CUDNN_STATUS_SUCCESS ? s2 : s3);
        return p;
    }
    p->cudnn = 1;
    p->reserve = res;
    *reserve_bytes = res; /* after a refusal, the mask only where it fits (mask_at) */
    if (st->bn_cudnn == CU_BN_AUTO && st->autotune) { /* either may run: room for both's reserve */
        p->measure = 1;
        size_t mask = p->mask_per_sample * (size_t)x->n;
        if (mask > res) *reserve_bytes = mask;
    }
    cu_workspace(st, fws > bws ? fws : bws);
    return p;
}

void cu_bn_plan_free(tb_backend *be, void *plan) {
    (void)be;
    bn_plan *p = plan;
    if (!p) return;
    if (p->xd) TB_CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->xd));
    if (p->pd) TB_CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->pd));
    if (p->act) TB_CUDNN_CHECK(cudnnDestroyActivationDescriptor(p->act));
    free(p);
}

void cu_check_xyz(const char *op, const tb_tensor *x, const tb_tensor *y, const tb_tensor *z) {
    cu_check(x, op, "x");
    cu_check(y, op, "y");
    cu_check_same(x, y, op, "x", "y");
    if (z) {
        cu_check(z, op, "z");
        cu_check_same(x, z, op, "x", "z");
    }
}

/* 1 when a call on x (with or without a ReLU) fits plan p's shape */
static int fits(const bn_plan *p, const tb_tensor *x, int relu) {
    return x->c == p->shape.C && x->h == p->shape.H && x->w == p->shape.W && x->n <= p->shape.N &&
           x->dtype == p->shape.dtype && x->layout == p->shape.layout && relu == p->relu;
}

static void bn_check(const char *op, const tb_bn_args *a, const bn_plan *p) {
    cu_check_xyz(op, a->x, a->y, a->z);
    if (!a->gamma || !a->beta) TB_FATAL("cuda %s: gamma or beta is NULL", op);
    if (!p) TB_FATAL("cuda %s: no plan (bn_plan was not called for this node)", op);
    if (!fits(p, a->x, a->relu) || (a->z != NULL) != p->has_z)
        TB_FATAL("cuda %s: the call [%d,%d,%d,%d] does not fit the plan [<=%d,%d,%d,%d]", op,
                 a->x->n, a->x->c, a->x->h, a->x->w, p->shape.N, p->shape.C, p->shape.H,
                 p->shape.W);
}

/* The node's ReLU mask at batch n in its reserve space, or NULL (none
 * planned, the test switch off, or no room). */
static void *mask_at(const cu_state *st, const bn_plan *p, void *reserve, size_t reserve_bytes, int n) {
    size_t need = p->mask_per_sample * (size_t)n;
    if (!st->bn_mask || !need || !reserve || reserve_bytes < need) return NULL;
    return reserve;
}

void *cu_bn_apply_mask(tb_backend *be, void *plan, void *reserve, size_t reserve_bytes, const tb_tensor *x,
                       int relu) {
    bn_plan *p = plan;
    if (!p) return NULL;
    if (!fits(p, x, relu))
        TB_FATAL("cuda bn_apply: the call [%d,%d,%d,%d]%s does not fit its BatchNorm's plan [<=%d,%d,%d,%d]%s",
                 x->n, x->c, x->h, x->w, relu ? " relu" : "", p->shape.N, p->shape.C, p->shape.H, p->shape.W,
                 p->relu ? " relu" : "");
    p->mask_n = 0; /* until cu_bn_apply_masked says it was written */
    return mask_at(cu_state_of(be), p, reserve, reserve_bytes, x->n);
}

void cu_bn_apply_masked(void *plan, int n, int wrote) {
    if (plan) ((bn_plan *)plan)->mask_n = wrote ? n : 0;
}

int tb_cuda_bn_plan_masked(const void *plan) { return plan ? ((const bn_plan *)plan)->mask_n : 0; }

void tb_cuda_bn_relu_mask(tb_backend *be, int on) { cu_state_of(be)->bn_mask = on; }

int cu_bn_mask_from_env(void) {
    return cu_env_on_off("TB_BN_RELU_MASK", 1, "whether the own BatchNorm kernels keep the ReLU's mask");
}

static cu_bn_shape shape_of(const tb_tensor *x) {
    cu_bn_shape s = {x->dtype, x->layout, x->n, x->c, x->h, x->w};
    return s;
}

void cu_bn_forward_train(tb_backend *be, const tb_bn_args *a) {
    const char *op = "bn_forward_train";
    bn_plan *p = a->plan;
    bn_check(op, a, p);
    if (!a->running_mean || !a->running_var || !a->save_mean || !a->save_invstd)
        TB_FATAL("cuda %s: running or saved statistics are NULL", op);
    if ((size_t)a->x->n * a->x->h * a->x->w < 2)
        TB_FATAL("cuda %s: training batch norm needs more than 1 value per channel", op);
    cu_state *st = cu_state_of(be);
    if (p->cudnn) {
        if (!a->reserve && p->reserve) TB_FATAL("cuda %s: the node's reserve space is missing", op);
        set_x_desc(p, a->x->n);
        const float one = 1.0f, zero = 0.0f;
        cudnnStatus_t r = cudnnBatchNormalizationForwardTrainingEx(
            st->cudnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, p->ops, &one, &zero, p->xd, a->x->data,
            a->z ? p->xd : NULL, a->z ? a->z->data : NULL, p->xd, a->y->data, p->pd, a->gamma,
            a->beta, a->momentum, a->running_mean, a->running_var, a->eps, a->save_mean,
            a->save_invstd, p->ops == CUDNN_BATCHNORM_OPS_BN ? NULL : p->act, st->ws, st->ws_bytes,
            a->reserve, a->reserve_bytes);
        p->mask_n = 0; /* the reserve holds cuDNN's state, if anything */
        if (r == CUDNN_STATUS_SUCCESS) return;
        if (!cu_bn_falls_back(r)) TB_CUDNN_CHECK(r);
        say_refused(p, a->x->n, "in forward", r);
        p->cudnn = 0; /* declined at run time: the own kernels from now on */
    }
    cu_bn_shape s = shape_of(a->x);
    int wrote = cu_bn_train_kernels(cu_stream(be), &s, a->x->data, a->z ? a->z->data : NULL, a->y->data,
                                    a->relu, a->gamma, a->beta, a->running_mean, a->running_var,
                                    a->save_mean, a->save_invstd, a->momentum, a->eps,
                                    cu_scratch(be, cu_bn_scratch_bytes(&s)),
                                    mask_at(st, p, a->reserve, a->reserve_bytes, a->x->n));
    p->mask_n = wrote ? a->x->n : 0;
}

void cu_bn_forward_infer(tb_backend *be, const tb_bn_args *a) {
    const char *op = "bn_forward_infer";
    bn_check(op, a, a->plan);
    if (!a->running_mean || !a->running_var) TB_FATAL("cuda %s: running statistics are NULL", op);
    ((bn_plan *)a->plan)->mask_n = 0; /* y changes; the mask does not */
    cu_bn_shape s = shape_of(a->x);
    cu_bn_infer_kernels(cu_stream(be), &s, a->x->data, a->z ? a->z->data : NULL, a->y->data,
                        a->relu, a->gamma, a->beta, a->running_mean, a->running_var, a->eps,
                        cu_scratch(be, cu_bn_scratch_bytes(&s)));
}

void cu_bn_backward(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g) {
    const char *op = "bn_backward";
    bn_plan *p = a->plan;
    bn_check(op, a, p);
    cu_check(g->dy, op, "dy");
    cu_check(g->dx, op, "dx");
    cu_check_same(a->x, g->dy, op, "x", "dy");
    cu_check_same(a->x, g->dx, op, "x", "dx");
    if (g->dz) {
        cu_check(g->dz, op, "dz");
        cu_check_same(a->x, g->dz, op, "x", "dz");
    }
    if ((g->dz != NULL) != (a->z != NULL)) TB_FATAL("cuda %s: dz must be given exactly with z", op);
    if (!a->save_mean || !a->save_invstd || !g->dgamma || !g->dbeta)
        TB_FATAL("cuda %s: saved statistics, dgamma or dbeta is NULL", op);
    cu_state *st = cu_state_of(be);
    if (p->cudnn && !g->accumulate_dx && !(g->dz && g->accumulate_dz)) {
        set_x_desc(p, a->x->n);
        const float one = 1.0f, zero = 0.0f;
        cudnnStatus_t r = cudnnBatchNormalizationBackwardEx(
            st->cudnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, p->ops, &one, &zero, &one, &zero, p->xd,
            a->x->data, p->xd, a->y->data, p->xd, g->dy->data, g->dz ? p->xd : NULL,
            g->dz ? g->dz->data : NULL, p->xd, g->dx->data, p->pd, a->gamma, a->beta, g->dgamma,
            g->dbeta, a->eps, a->save_mean, a->save_invstd,
            p->ops == CUDNN_BATCHNORM_OPS_BN ? NULL : p->act, st->ws, st->ws_bytes, a->reserve,
            a->reserve_bytes);
        if (r == CUDNN_STATUS_SUCCESS) return;
        if (!cu_bn_falls_back(r)) TB_CUDNN_CHECK(r);
        say_refused(p, a->x->n, "in backward", r);
    }
    cu_bn_shape s = shape_of(a->x);
    const void *mask = p->mask_n == a->x->n ? mask_at(st, p, a->reserve, a->reserve_bytes, a->x->n) : NULL;
    cu_bn_backward_kernels(cu_stream(be), &s, a->x->data, a->y->data, g->dy->data, g->dx->data,
                           g->dz ? g->dz->data : NULL, a->relu, g->accumulate_dx,
                           g->accumulate_dz, a->gamma, a->save_mean, a->save_invstd, g->dgamma,
                           g->dbeta, cu_scratch(be, cu_bn_scratch_bytes(&s)), mask);
}
