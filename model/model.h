/* model.h - a ResNet instance on a backend: its flat parameter, gradient,
 * momentum and statistics buffers, its graph, and one training step's parts
 * (forward, loss, backward, SGD), plus host transfers for checkpoints.
 *
 * A training step:
 *   tb_model_set_batch(m, images, labels, n);   images [n,3,H,W] float32 host
 *   tb_model_forward(m, 1);                     train mode
 *   tb_model_loss(m, smoothing, 1.0);           loss and d(loss)/d(logits)
 *   tb_model_backward(m, NULL, NULL);           grads (hook: bucket all-reduce)
 *   tb_model_sgd_step(m, &sgd, wd, 0);
 */
#ifndef TB_MODEL_H
#define TB_MODEL_H

#include "model/backend.h"
#include "model/graph.h"
#include "model/params.h"
#include "model/resnet.h"

typedef struct {
    tb_dtype dtype;     /* activation/compute type (TB_F32) */
    tb_layout layout;   /* TB_NCHW */
    int fuse;           /* fold residual add + ReLU into BN nodes (1 = default) */
} tb_model_opts;

typedef struct {
    tb_resnet_config cfg;
    tb_backend *be;
    tb_param_table pt;
    tb_graph g;
    int max_batch, height, width;
    int batch;                 /* n of the batch set last */
    /* device memory */
    tb_real *params;           /* [n_train] trainable parameters (master weights) */
    tb_real *grads;            /* [n_train] their gradients */
    tb_real *momentum;         /* [n_train] SGD momentum buffers */
    tb_real *state;            /* [n_state] BN running mean / var */
    tb_real *loss;             /* [1] mean loss of the last tb_model_loss */
    int32_t *labels;           /* [max_batch] */
    /* host memory */
    int64_t *counters;         /* [n_counters] num_batches_tracked */
    tb_sgd_segment *segs;      /* scratch for tb_model_sgd_step */
} tb_model;

tb_model_opts tb_model_default_opts(void);
/* Builds the graph for inputs [<=max_batch, 3, height, width] and allocates
 * every buffer; parameters are zero until tb_model_init or a checkpoint. */
tb_model *tb_model_create(const tb_resnet_config *cfg, tb_backend *be, int max_batch,
                          int height, int width, const tb_model_opts *opts);
void tb_model_destroy(tb_model *m);

/* torchvision's initialisation from seed; zeroes momentum. */
void tb_model_init(tb_model *m, uint64_t seed);

/* Name of the first BatchNorm that would see a single value per channel
 * for a batch of n in training (PyTorch refuses that too), or NULL. */
const char *tb_model_degenerate_bn(const tb_model *m, int n);

/* Uploads a batch: images [n,3,H,W] float32, labels [n] in [0, classes). */
void tb_model_set_batch(tb_model *m, const float *images, const int32_t *labels, int n);
void tb_model_forward(tb_model *m, int train);
/* Mean loss of the batch; the logits' gradient is scaled by grad_scale
 * (data parallel: local samples / global samples, so summing gradients over
 * ranks gives the global mean). */
void tb_model_loss(tb_model *m, double label_smoothing, double grad_scale);
void tb_model_backward(tb_model *m, tb_grad_ready_fn ready, void *ready_ctx);
/* SGD over all trainable parameters; weight decay wd everywhere, or only on
 * conv and fc weights when no_decay_bn_bias. */
void tb_model_sgd_step(tb_model *m, const tb_sgd_args *a, double wd, int no_decay_bn_bias);

/* Host side: float32 (the file precision) whatever tb_real is; reads wait
 * for queued work. */
float tb_model_read_loss(tb_model *m);
void tb_model_read_logits(tb_model *m, float *dst);           /* [batch, classes] */

/* Host <-> device for one named tensor of the table (index i): float32 host
 * values for trainable and running-statistics tensors, int64 for counters. */
void tb_model_get_tensor(tb_model *m, int i, void *dst);
void tb_model_set_tensor(tb_model *m, int i, const void *src);
void tb_model_get_grad(tb_model *m, int i, float *dst);       /* trainable only */
void tb_model_get_momentum(tb_model *m, int i, float *dst);   /* trainable only */
void tb_model_set_momentum(tb_model *m, int i, const float *src);

#endif
