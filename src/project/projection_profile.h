/* projection_profile.h - where the projection's one-rank step
 * (projection.h tb_proj_profile) comes from:
 *
 * - a results file of `trainbench train`: the 1-rank row of /scaling
 *   (median phase times) and, when the run recorded them, the 1-rank rows
 *   of /grad_ready (when backward finished each gradient range;
 *   bucket_profile.h); for older files the ready times are estimated from
 *   the model's per-layer work (below);
 * - a profile file, key = value text, for runs published elsewhere (a
 *   paper's or a vendor's table put through the model):
 *       name, source            text, printed
 *       model                   resnet18 .. resnet152 (gradient layout, work per layer)
 *       classes, image_size     the network's classes and input side
 *       batch_size              samples per rank and step
 *       grad_bytes_per_param    4 (fp32 gradients, DDP's default) or 2
 *       step_ms                 the one-rank step
 *       data_ms, h2d_ms, forward_ms, backward_ms, optimizer_ms
 *                               its phases (what is not in them is overhead)
 *       bucket_mb, overlap      the run's bucket cap (MiB) and 1/0
 *       first_bucket_mb         the first bucket's cap (MiB; default 0: as
 *                               bucket_mb; PyTorch DDP's is 1)
 *       measured = N:EFF[:label]  a published efficiency at N ranks (repeatable)
 *
 * Ready times estimated from work: backward visits the layers in reverse;
 * a layer's range is ready when the work of every layer after it and its
 * own is done, work = multiply-accumulates of convolutions and fc (twice
 * for the weight and input gradients, once for the first convolution),
 * plus 4 per element for BatchNorm, ReLU, add and pooling; spread over the
 * measured backward time. */
#ifndef TB_PROJECTION_PROFILE_H
#define TB_PROJECTION_PROFILE_H

#include "src/project/projection.h"
#include "src/results/results.h"

#define TB_PROJ_MAX_MEASURED 16

/* A published (profile file) efficiency to put beside the prediction. */
typedef struct {
    int ranks;
    double efficiency;
    char label[128];
} tb_proj_published;

/* The gradient layout of a model: ranges in backward order with their
 * share of backward's work, the trainable and statistics element counts.
 * Returns 0, or -1 with a line in err (unknown model). */
int tb_proj_model_ranges(const char *model, int classes, int image, double elem_bytes, tb_grad_range **ranges,
                         int *n, double *n_train, double *n_state, char *err, size_t errlen);

/* Bytes on the wire per gradient byte of a run: 0.5 when it ran with
 * --allreduce-dtype bf16 (its /grad_ready and /buckets count the float32
 * gradients), else 1. */
double tb_proj_wire_scale(const tb_results *r);

/* From a results file. Returns 0, or -1 with one line in err (no 1-rank
 * scaling row, unknown model). */
int tb_proj_profile_from_results(const tb_results *r, tb_proj_profile *p, char *err, size_t errlen);

/* From a profile file; published points into pub (up to
 * TB_PROJ_MAX_MEASURED), their count in *npub. */
int tb_proj_profile_from_file(const char *path, tb_proj_profile *p, tb_proj_published *pub, int *npub,
                              char *err, size_t errlen);

#endif
