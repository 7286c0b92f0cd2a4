/* fused_lower.c - a fused graph's plain C description (model/fused_desc.h)
 * lowered one to one to cuDNN backend descriptors: each fd_tensor a
 * TENSOR_DESCRIPTOR (virtual and by-value flags as described), each fd_op
 * an OPERATION_* descriptor with the attributes cudnn-frontend's nodes set
 * (include/cudnn_frontend/node/{conv_*,pointwise,genstats,bn_finalize,
 * dbn_weight}.h): float compute everywhere, ReLU with propagated NaN and
 * clips 0 .. FLT_MAX, GEN_STATS in SUM_SQSUM mode, BN finalize in TRAINING
 * mode. Tensors and operations finalize without a device, so the host test
 * (tests/test_fused_host.c) checks every graph's lowering; the operation
 * graph (which needs a handle) is fused_plan.c's.
 */
#include <float.h>
#include <stdbool.h>
#include <string.h>

#include "model/cuda/fused_cuda.h"

#define TRY(call, reason)                                                                                              \
    do {                                                                                                               \
        cudnnStatus_t s_ = (call);                                                                                     \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                                              \
            if (!err->why) err->why = (reason), err->s = s_;                                                           \
            return s_;                                                                                                 \
        }                                                                                                              \
    } while (0)

cudnnDataType_t cu_fd_dtype(fd_dtype d) {
    switch (d) {
    case FD_HALF: return CUDNN_DATA_HALF;
    case FD_BF16: return CUDNN_DATA_BFLOAT16;
    case FD_INT64: return CUDNN_DATA_INT64;
    case FD_DOUBLE: return CUDNN_DATA_DOUBLE;
    default: return CUDNN_DATA_FLOAT;
    }
}

static cudnnStatus_t set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t v,
                              cu_err *err) {
    TRY(cudnnBackendSetAttribute(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v), "an operation's tensor");
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t math_prec(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cu_err *err) {
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    TRY(cudnnBackendSetAttribute(d, name, CUDNN_TYPE_DATA_TYPE, 1, &f), "an operation's compute type");
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t lower_pointwise(const fd_op *o, cu_fd_lowered *lw, int k, cu_err *err) {
    static const cudnnPointwiseMode_t modes[] = {[FD_PW_ADD] = CUDNN_POINTWISE_ADD,
                                                 [FD_PW_SUB] = CUDNN_POINTWISE_SUB,
                                                 [FD_PW_MUL] = CUDNN_POINTWISE_MUL,
                                                 [FD_PW_RELU_FWD] = CUDNN_POINTWISE_RELU_FWD,
                                                 [FD_PW_RELU_BWD] = CUDNN_POINTWISE_RELU_BWD};
    cudnnPointwiseMode_t mode = modes[o->mode];
    cudnnBackendDescriptor_t pw;
    TRY(cu_be_create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &lw->aux[k]), "creating a pointwise descriptor");
    pw = lw->aux[k];
    TRY(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode), "pointwise mode");
    if (math_prec(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, err)) return err->s;
    if (o->mode == FD_PW_RELU_FWD || o->mode == FD_PW_RELU_BWD) {
        cudnnNanPropagation_t nan = CUDNN_PROPAGATE_NAN;
        double lo = 0.0, hi = FLT_MAX, slope = 0.0;
        TRY(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_NAN_PROPAGATION, CUDNN_TYPE_NAN_PROPOGATION, 1, &nan),
            "ReLU NaN propagation");
        TRY(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, 1, &lo),
            "ReLU lower clip");
        TRY(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, 1, &hi),
            "ReLU upper clip");
        TRY(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, CUDNN_TYPE_DOUBLE, 1, &slope),
            "ReLU lower clip slope");
    }
    TRY(cudnnBackendFinalize(pw), "a pointwise descriptor did not finalize");
    cudnnBackendDescriptor_t op;
    TRY(cu_be_create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &lw->op[k]), "creating a pointwise operation");
    op = lw->op[k];
    if (set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, err)) return err->s;
    if (o->mode == FD_PW_RELU_BWD) { /* in: dy, x; out: dx */
        if (set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, lw->t[o->in[0]], err) ||
            set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, lw->t[o->in[1]], err) ||
            set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, lw->t[o->out[0]], err))
            return err->s;
    } else {
        if (set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, lw->t[o->in[0]], err) ||
            (o->nin > 1 && set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, lw->t[o->in[1]], err)) ||
            set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, lw->t[o->out[0]], err))
            return err->s;
    }
    float one = 1.0f;
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one), "alpha1");
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one), "alpha2");
    TRY(cudnnBackendFinalize(op), "a pointwise operation did not finalize");
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t lower_genstats(const fd_op *o, cu_fd_lowered *lw, int k, cu_err *err) {
    cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
    TRY(cu_be_create(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, &lw->op[k]), "creating GEN_STATS");
    cudnnBackendDescriptor_t op = lw->op[k];
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode),
        "GEN_STATS mode");
    if (math_prec(op, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, err) ||
        set_desc(op, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, lw->t[o->in[0]], err) ||
        set_desc(op, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, lw->t[o->out[0]], err) ||
        set_desc(op, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, lw->t[o->out[1]], err))
        return err->s;
    TRY(cudnnBackendFinalize(op), "GEN_STATS did not finalize");
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t lower_finalize(const fd_op *o, cu_fd_lowered *lw, int k, cu_err *err) {
    static const cudnnBackendAttributeName_t in[9] = {CUDNN_ATTR_OPERATION_BN_FINALIZE_Y_SUM_DESC,
                                                      CUDNN_ATTR_OPERATION_BN_FINALIZE_Y_SQ_SUM_DESC,
                                                      CUDNN_ATTR_OPERATION_BN_FINALIZE_SCALE_DESC,
                                                      CUDNN_ATTR_OPERATION_BN_FINALIZE_BIAS_DESC,
                                                      CUDNN_ATTR_OPERATION_BN_FINALIZE_PREV_RUNNING_MEAN_DESC,
                                                      CUDNN_ATTR_OPERATION_BN_FINALIZE_PREV_RUNNING_VAR_DESC,
                                                      CUDNN_ATTR_OPERATION_BN_FINALIZE_EPSILON_DESC,
                                                      CUDNN_ATTR_OPERATION_BN_FINALIZE_EXP_AVERATE_FACTOR_DESC,
                                                      CUDNN_ATTR_OPERATION_BN_FINALIZE_ACCUM_COUNT_DESC};
    static const cudnnBackendAttributeName_t out[6] = {CUDNN_ATTR_OPERATION_BN_FINALIZE_EQ_SCALE_DESC,
                                                       CUDNN_ATTR_OPERATION_BN_FINALIZE_EQ_BIAS_DESC,
                                                       CUDNN_ATTR_OPERATION_BN_FINALIZE_SAVED_MEAN_DESC,
                                                       CUDNN_ATTR_OPERATION_BN_FINALIZE_SAVED_INV_STD_DESC,
                                                       CUDNN_ATTR_OPERATION_BN_FINALIZE_UPDATED_RUNNING_MEAN_DESC,
                                                       CUDNN_ATTR_OPERATION_BN_FINALIZE_UPDATED_RUNNING_VAR_DESC};
    cudnnBnFinalizeStatsMode_t mode = CUDNN_BN_FINALIZE_STATISTICS_TRAINING;
    TRY(cu_be_create(CUDNN_BACKEND_OPERATION_BN_FINALIZE_STATISTICS_DESCRIPTOR, &lw->op[k]), "creating BN_FINALIZE");
    cudnnBackendDescriptor_t op = lw->op[k];
    TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_BN_FINALIZE_STATS_MODE, CUDNN_TYPE_BN_FINALIZE_STATS_MODE, 1,
                                 &mode),
        "BN finalize mode");
    if (math_prec(op, CUDNN_ATTR_OPERATION_BN_FINALIZE_MATH_PREC, err)) return err->s;
    for (int i = 0; i < 9; i++)
        if (set_desc(op, in[i], lw->t[o->in[i]], err)) return err->s;
    for (int i = 0; i < 6; i++)
        if (set_desc(op, out[i], lw->t[o->out[i]], err)) return err->s;
    TRY(cudnnBackendFinalize(op), "BN_FINALIZE did not finalize");
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t lower_bn_bwd_weights(const fd_op *o, cu_fd_lowered *lw, int k, cu_err *err) {
    static const cudnnBackendAttributeName_t in[5] = {
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC};
    static const cudnnBackendAttributeName_t out[5] = {
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS};
    TRY(cu_be_create(CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR, &lw->op[k]), "creating BN_BWD_WEIGHTS");
    cudnnBackendDescriptor_t op = lw->op[k];
    if (math_prec(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, err)) return err->s;
    for (int i = 0; i < 5; i++)
        if (set_desc(op, in[i], lw->t[o->in[i]], err) || set_desc(op, out[i], lw->t[o->out[i]], err)) return err->s;
    TRY(cudnnBackendFinalize(op), "BN_BWD_WEIGHTS did not finalize");
    return CUDNN_STATUS_SUCCESS;
}

/* fd's convolution roles in the forward sense: x, w, y (dgrad: dx = out,
 * w, dy = in[0]; wgrad: x = in[0], dw = out, dy = in[1]). */
static cudnnStatus_t lower_conv(const fd_op *o, cu_fd_lowered *lw, int k, cu_err *err) {
    cudnnStatus_t s = cu_be_conv_desc(o->stride, o->pad, &lw->aux[k], err);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    cudnnBackendDescriptor_t *t = lw->t;
    switch (o->kind) {
    case FD_OP_CONV_FWD:
        return cu_be_conv_op(0, 0.0f, lw->aux[k], t[o->in[0]], t[o->in[1]], t[o->out[0]], &lw->op[k], err);
    case FD_OP_CONV_DGRAD:
        return cu_be_conv_op(1, 0.0f, lw->aux[k], t[o->out[0]], t[o->in[1]], t[o->in[0]], &lw->op[k], err);
    default: return cu_be_conv_op(2, 0.0f, lw->aux[k], t[o->in[0]], t[o->out[0]], t[o->in[1]], &lw->op[k], err);
    }
}

cudnnStatus_t cu_fd_lower(const fd_graph *gr, const uint32_t *align, cu_fd_lowered *lw, cu_err *err) {
    memset(lw, 0, sizeof *lw);
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    for (int i = 0; i < gr->nt && s == CUDNN_STATUS_SUCCESS; i++) {
        const fd_tensor *t = &gr->t[i];
        int64_t a = align && t->role >= 0 && !t->virt && !t->by_value ? (int64_t)align[t->role] : 16;
        s = cu_be_tensor(&lw->t[i], t->dim, t->stride, cu_fd_dtype(t->dt), t->uid, a, t->virt, t->by_value, err);
        lw->nt = i + 1;
    }
    for (int k = 0; k < gr->nop && s == CUDNN_STATUS_SUCCESS; k++) {
        const fd_op *o = &gr->op[k];
        lw->nop = k + 1;
        switch (o->kind) {
        case FD_OP_CONV_FWD:
        case FD_OP_CONV_DGRAD:
        case FD_OP_CONV_WGRAD: s = lower_conv(o, lw, k, err); break;
        case FD_OP_POINTWISE: s = lower_pointwise(o, lw, k, err); break;
        case FD_OP_GENSTATS: s = lower_genstats(o, lw, k, err); break;
        case FD_OP_BN_FINALIZE: s = lower_finalize(o, lw, k, err); break;
        case FD_OP_BN_BWD_WEIGHTS: s = lower_bn_bwd_weights(o, lw, k, err); break;
        }
    }
    if (s != CUDNN_STATUS_SUCCESS) cu_fd_lowered_free(lw);
    return s;
}

void cu_fd_lowered_free(cu_fd_lowered *lw) {
    for (int k = lw->nop - 1; k >= 0; k--) {
        cu_be_destroy(&lw->op[k]);
        cu_be_destroy(&lw->aux[k]);
    }
    for (int i = lw->nt - 1; i >= 0; i--) cu_be_destroy(&lw->t[i]);
    lw->nt = lw->nop = 0;
}
