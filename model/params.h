/* params.h - the parameter table: every tensor of a model's state under its
 * torchvision state_dict name, with its shape and its place in the flat
 * buffers.
 *
 * Trainable tensors (conv and fc weights, BN gamma/beta, fc bias) are views
 * into three contiguous float32 buffers of n_train elements each: params,
 * grads and momentum, laid out in state_dict order. BatchNorm running
 * statistics are views into one float32 state buffer of n_state elements.
 * num_batches_tracked counters are int64 values kept on the host. */
#ifndef TB_PARAMS_H
#define TB_PARAMS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    TB_ROLE_CONV_WEIGHT,     /* [Cout,Cin,K,K]  trainable */
    TB_ROLE_BN_WEIGHT,       /* [C]             trainable (gamma) */
    TB_ROLE_BN_BIAS,         /* [C]             trainable (beta) */
    TB_ROLE_FC_WEIGHT,       /* [classes,K]     trainable */
    TB_ROLE_FC_BIAS,         /* [classes]       trainable */
    TB_ROLE_BN_RUNNING_MEAN, /* [C]             state */
    TB_ROLE_BN_RUNNING_VAR,  /* [C]             state */
    TB_ROLE_BN_COUNTER,      /* scalar int64    num_batches_tracked */
} tb_param_role;

typedef enum { TB_STORE_TRAIN, TB_STORE_STATE, TB_STORE_COUNTER } tb_param_store;

#define TB_PARAM_NAME_MAX 48

typedef struct {
    char name[TB_PARAM_NAME_MAX]; /* torchvision key, e.g. "layer3.5.downsample.1.bias" */
    tb_param_role role;
    int ndim;                     /* 0 for the counter */
    int64_t shape[4];
    size_t numel;                 /* 1 for the counter */
    size_t offset;                /* into params/grads/momentum, the state buffer,
                                     or the counter array, by store */
} tb_param;

typedef struct {
    tb_param *items;              /* in state_dict order */
    int count, cap;
    size_t n_train;               /* elements in each trainable flat buffer */
    size_t n_state;               /* elements in the running-statistics buffer */
    int n_counters;               /* num_batches_tracked entries */
} tb_param_table;

tb_param_store tb_param_store_of(tb_param_role role);
/* True for BN gamma/beta and biases: the tensors that training recipes
 * often exempt from weight decay. */
int tb_param_is_bn_or_bias(tb_param_role role);

/* Appends a tensor and assigns its view; returns its index. */
int tb_params_add(tb_param_table *t, const char *name, tb_param_role role, int ndim,
                  const int64_t *shape);
/* Index of name, or -1. */
int tb_params_find(const tb_param_table *t, const char *name);
void tb_params_free(tb_param_table *t);
/* "[64, 3, 7, 7]" */
void tb_params_shape_str(const tb_param *p, char *buf, size_t len);

#endif
