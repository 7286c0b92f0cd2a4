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
 *
 * Precision: the flat params / grads / momentum / state buffers are always
 * tb_real (float32 master weights). With a 16-bit dtype or NHWC the model
 * keeps op copies of the conv and fc weights (op_params) in the op dtype and
 * layout, refreshed after every update, and an op gradient buffer (op_grads)
 * that backward converts into grads. fp16 adds dynamic loss scaling: the
 * loss gradient is multiplied by the loss scale, SGD divides it out, and a
 * step whose gradients overflow is skipped on the device.
 */
#ifndef TB_MODEL_H
#define TB_MODEL_H

#include "model/backend.h"
#include "model/graph.h"
#include "model/params.h"
#include "model/resnet.h"

/* --precision. fp32: IEEE float32 everywhere. tf32: float32 tensors, convs
 * and GEMMs on TF32 tensor cores (CUDA only). bf16 / fp16: 16-bit
 * activations and op weights in NHWC, float32 master weights, fp16 with
 * dynamic loss scaling. */
typedef enum { TB_PREC_FP32, TB_PREC_TF32, TB_PREC_BF16, TB_PREC_FP16 } tb_precision;

/* "fp32", "tf32", "bf16", "fp16" (and "fp64", the fp32 path of the fp64
 * build); -1 for anything else. */
int tb_precision_parse(const char *s, tb_precision *p);
const char *tb_precision_name(tb_precision p);
/* The precision --precision auto picks on a backend: bf16 on CUDA (tensor
 * cores at full rate, half the memory traffic, no loss scaling needed),
 * fp32 on the CPU (its only one). */
tb_precision tb_precision_default(const tb_backend *be);
/* What the precision sets in the backend options (TF32 math). */
void tb_precision_backend_opts(tb_precision p, tb_backend_opts *bo);

/* --fuse: how much of the network runs as fused ops. OFF: BatchNorm, the
 * residual add and the ReLU as separate nodes. BN: the add and the ReLU
 * inside the BN node (bn_forward_train's BN_ADD_ACTIVATION). GRAPH: BN as
 * well, with the convolutions around it: statistics in the conv's
 * epilogue, the BN folded into the next conv's prologue
 * (model/graph_fused.h); what a backend cannot run falls back to BN.
 * FASTEST: GRAPH, then each BatchNorm kept on its conv's statistics only
 * where, timed at start-up on the real buffers, that is faster than its
 * unfused ops (model/graph_fused_time.c). */
enum { TB_FUSE_OFF = 0, TB_FUSE_BN = 1, TB_FUSE_GRAPH = 2, TB_FUSE_FASTEST = 3 };
/* "auto" (today BN: GRAPH is slower in bf16 on the H200), "fastest",
 * "graph", "bn", "off"; -1 for anything else. */
int tb_fuse_parse(const char *s, int *fuse);
const char *tb_fuse_name(int fuse);

typedef struct {
    tb_dtype dtype;     /* activation/compute type (TB_F32) */
    tb_layout layout;   /* TB_NCHW */
    int fuse;           /* TB_FUSE_* (TB_FUSE_BN = default) */
    tb_loss_scaling loss_scaling; /* init_scale 0: no loss scaling */
    int op_copies;      /* 1: op weight copies even for tb_real NCHW (where they equal the
                           master weights): runs the mixed-precision plumbing on the CPU */
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
    tb_real *loss;             /* [1] mean loss of the last tb_model_loss (in sc) */
    int32_t *labels;           /* [2*max_batch]: the labels [n], then for a resident batch
                                  its pool rows [n] (one upload; tb_model_set_batch_rows) */
    tb_step_scalars *sc;       /* the per-step scalars the ops read */
    void *op_params;           /* [n_train] op dtype/layout weight copies, or NULL */
    void *op_grads;            /* [n_train] their gradients, or NULL */
    float *in_f32;             /* [max_batch,3,H,W] float32 staging when the input
                                  activation is not float32 NCHW, else NULL */
    uint8_t *in_u8;            /* [max_batch,H,W,3] uint8 staging (tb_model_u8_staging) */
    uint8_t *in_flip;          /* [max_batch] flip flags, after in_u8 */
    /* host memory */
    int64_t *counters;         /* [n_counters] num_batches_tracked */
    tb_sgd_segment *segs;      /* scratch for tb_model_sgd_step */
    tb_real *sc_stage;         /* pinned ring of host-set scalar values (2 per slot) */
    tb_event **sc_events;      /* one per ring slot: its upload has completed */
    int sc_next;
    int32_t *label_stage;      /* pinned ring [TB_MODEL_RING][2*max_batch]: labels, and
                                  rows after them (as in `labels`) */
    tb_event **label_events;   /* one per label slot: its upload has completed */
    int label_next;
    int preset;                /* lr and grad scale were uploaded for this step
                                  (tb_model_preset_scalars): loss and SGD upload nothing */
    double preset_lr, preset_grad_scale;
    int skip_nonfinite;        /* SGD checks the gradients on the device and skips the
                                  update on NaN/Inf, also without loss scaling */
    int loss_scaling;          /* 1: fp16 dynamic loss scaling */
    int growth_interval;
    int op_stale;              /* op_params must be refreshed before the next forward */
    tb_tensor *wc_src, *wc_dst; /* [wc_n] the refresh's pairs (master weight, op copy):
                                   made at the first refresh, kept (their buffers never move) */
    int wc_n;
} tb_model;

/* Depth of the pinned upload rings (step scalars, labels): a slot is
 * reused only after the copy that last read it has completed. */
#define TB_MODEL_RING 8

tb_model_opts tb_model_default_opts(void);
/* Options for a precision: fp32/tf32 float32 NCHW, bf16 NHWC, fp16 NHWC
 * with loss scaling (2^16, growth every 2000 steps, as GradScaler). */
tb_model_opts tb_model_opts_for(tb_precision p);
/* A --loss-scale the scalers can use: 0 (the precision's default) or a
 * normal float. 0 when s is one; else -1 with the line in why. */
int tb_loss_scale_check(double s, char *why, size_t len);
/* Builds the graph for inputs [<=max_batch, 3, height, width] and allocates
 * every buffer (parameters first, then the graph, whose conv plans may be
 * measured on the real buffers); parameters are zero until tb_model_init or
 * a checkpoint. */
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
/* The same from a pool already in device memory (be->alloc): pool
 * [pool_rows,3,H,W] float32; sample i of the batch is pool row rows[i]
 * (host [n], each checked in [0, pool_rows)). The labels and the rows go
 * up in one copy from a pinned slot, then the backend's input_rows op
 * gathers and converts in one pass on the compute stream: the same input
 * as tb_model_set_batch of those rows, with nothing but 2n int32 crossing
 * the host-device link. */
void tb_model_set_batch_rows(tb_model *m, const float *pool, int64_t pool_rows, const int32_t *rows,
                             const int32_t *labels, int n);
/* The same from the loader's uint8 form: images [n,H,W,3] RGB, flip [n]
 * (1: mirror; NULL: none), normalised on the device (4x less to upload). */
void tb_model_set_batch_u8(tb_model *m, const uint8_t *images, const uint8_t *flip,
                           const int32_t *labels, int n, const tb_input_norm *norm);
/* For uploads the caller orders itself (copy_h2d_async from pinned memory
 * and an event): the device staging [max_batch,H,W,3] and flip [max_batch]
 * buffers, and the op that turns their first n samples into the input. */
uint8_t *tb_model_u8_staging(tb_model *m, uint8_t **flip);
void tb_model_input_from_u8(tb_model *m, int n, int use_flip, const tb_input_norm *norm);
/* Labels [n] for the next loss (already on the device: no check). */
void tb_model_set_labels(tb_model *m, const int32_t *labels, int n);

/* ---- a step that can be captured in a CUDA graph ------------------------------
 * Capture-safety: nothing between tb_model_forward and the end of
 * tb_model_sgd_step allocates, waits on the host or reads a host value that
 * changes from step to step, provided (1) the batch is uploaded before
 * (set_batch / set_labels: pinned ring, outside the graph), (2) this
 * step's lr and grad scale are uploaded before, by tb_model_preset_scalars
 * (one copy from a pinned ring; loss and SGD then upload nothing), and (3)
 * the batch size was run eagerly before (conv plans for it exist; the
 * backend refuses to make one inside a capture). num_batches_tracked lives
 * on the host: a replayed forward does not advance it, the caller does
 * (tb_model_advance_counters). */
void tb_model_preset_scalars(tb_model *m, double lr, double grad_scale);
/* num_batches_tracked += 1 for every BatchNorm, as a training forward does. */
void tb_model_advance_counters(tb_model *m);
/* on: SGD checks the summed gradients for NaN/Inf on the device
 * (check_nonfinite) and skips the update when it finds any, also without
 * loss scaling; the flag (sc->found_inf) stays set until read and cleared
 * by the caller (no host wait in the step). */
void tb_model_set_nonfinite_skip(tb_model *m, int on);

void tb_model_forward(tb_model *m, int train);
/* Mean loss of the batch; the logits' gradient is scaled by grad_scale
 * (data parallel: local samples / global samples, so summing gradients over
 * ranks gives the global mean), and by the loss scale under fp16. */
void tb_model_loss(tb_model *m, double label_smoothing, double grad_scale);
void tb_model_backward(tb_model *m, tb_grad_ready_fn ready, void *ready_ctx);
/* SGD over all trainable parameters; weight decay wd everywhere, or only on
 * conv and fc weights when no_decay_bn_bias. Under loss scaling: the
 * overflow check, the update (skipped on overflow) and the scale update, all
 * on the device. Then the op weight copies are refreshed. */
void tb_model_sgd_step(tb_model *m, const tb_sgd_args *a, double wd, int no_decay_bn_bias);

/* Host side: float32 (the file precision) whatever tb_real is; reads wait
 * for queued work. */
float tb_model_read_loss(tb_model *m);
void tb_model_read_logits(tb_model *m, float *dst);           /* [batch, classes] */
/* The step scalars as they are now (waits). */
void tb_model_read_scalars(tb_model *m, tb_step_scalars *out);
/* Replaces them (waits): a resumed run's fp16 loss scaler (checkpoint.h). */
void tb_model_write_scalars(tb_model *m, const tb_step_scalars *in);

/* Host <-> device for one named tensor of the table (index i): float32 host
 * values for trainable and running-statistics tensors, int64 for counters. */
void tb_model_get_tensor(tb_model *m, int i, void *dst);
void tb_model_set_tensor(tb_model *m, int i, const void *src);
void tb_model_get_grad(tb_model *m, int i, float *dst);       /* trainable only */
void tb_model_get_momentum(tb_model *m, int i, float *dst);   /* trainable only */
void tb_model_set_momentum(tb_model *m, int i, const float *src);

/* --op-profile (model/op_profile.h): p times every backend call of the
 * steps queued while it is set (graph nodes, uploads, input, loss,
 * conversions, SGD); NULL turns it off. The caller brackets each step with
 * tb_op_prof_step_begin / _end and runs it eagerly (no CUDA graph capture).
 * capacity: the most backend calls one training step makes (the pool size
 * tb_op_prof_create needs). */
void tb_model_set_op_profile(tb_model *m, tb_op_prof *p);
int tb_model_op_profile_capacity(const tb_model *m);

/* The conv algorithms chosen, one line per conv node ("name: ..."), for
 * logs and the results file; returns the length written (truncated to len). */
size_t tb_model_describe_convs(tb_model *m, char *buf, size_t len);
/* How each BatchNorm runs, one line per BN node ("name: MODE[ into CONV|
 * BN][, statistics from CONV][; timed folded A ms, applied B ms][; timed
 * fused C ms, unfused D ms]; kernels K[ (timed: ...)]"): MODE, the --fuse
 * graph / fastest vocabulary, unfused (its own pass: --fuse off, bn, or no
 * fused op), applied, folded into CONV or "folded into the block end" BN;
 * the timed parts: what --fuse fastest measured at start-up; K the
 * backend's kernels for its own pass and backward (cpu; CUDA: cudnn or own,
 * with bn_tune's times where it timed them), "none (the fused ops)" for a
 * BN folded into the next conv. */
size_t tb_model_describe_bns(tb_model *m, char *buf, size_t len);

#endif
