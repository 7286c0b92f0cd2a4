/* checkpoint.h - trainbench checkpoint files (DESIGN.md contract):
 *   /params/<torchvision name>    float32 (num_batches_tracked: int64 scalar)
 *   /momentum/<trainable name>    float32 SGD buffers (absent: zeros)
 *   root attributes: model, classes, image_size, step, epoch, seed,
 *                    trainbench_version, git_revision; and epoch_step (steps
 *                    done in the current epoch: where --resume continues);
 *                    world_size, global_batch, dataset_size and data_hash
 *                    (the run and its data, so --resume can say what
 *                    differs); with loss scaling (meta's has_loss_scale),
 *                    the scaler's state: loss_scale, loss_scale_good_steps
 *                    (overflow-free steps since its last change),
 *                    loss_scale_growth and skipped_steps
 * Written under a temporary name and renamed (see h5io.h). */
#ifndef TB_CHECKPOINT_H
#define TB_CHECKPOINT_H

#include <hdf5.h>
#include <stdint.h>

#include "model/model.h"

typedef struct {
    char model[TB_MODEL_NAME_MAX];
    int64_t classes, image_size, step, epoch, seed;
    int64_t epoch_step;     /* steps already done in `epoch` */
    int64_t world_size;     /* ranks of the run that wrote it (0: not recorded) */
    int64_t global_batch;   /* its samples per step over all ranks (0: not recorded) */
    int64_t dataset_size;   /* samples in its data, an epoch's order (0: not recorded) */
    char data_hash[24];     /* its data's fingerprint, 16 hex digits (tb_source_fingerprint; "": none) */
    int has_seed;           /* the file records a seed (a run's checkpoint does) */
    int has_loss_scale;     /* the file records the loss scaler (a run that scaled its loss wrote it) */
    double loss_scale;      /* the dynamic loss scale at `step` */
    int64_t loss_scale_good_steps, skipped_steps; /* the scaler's counters (tb_step_scalars) */
    int64_t loss_scale_growth; /* clean steps between doublings (0: not recorded) */
    char version[64];
    char git_revision[64];
} tb_ckpt_meta;

/* Reads the root attributes; dies with one line if the file is missing, not
 * HDF5, or not a trainbench checkpoint. */
void tb_ckpt_read_meta(const char *path, tb_ckpt_meta *meta);

/* Dies unless meta describes cfg (model name and class count). */
void tb_ckpt_require_match(const char *path, const tb_ckpt_meta *meta,
                           const tb_resnet_config *cfg);
/* The same check without dying, and (image_size > 0, and the file records
 * one) the image size too: 0 when meta fits; otherwise -1 with the one-line
 * reason in why. */
int tb_ckpt_mismatch(const char *path, const tb_ckpt_meta *meta, const tb_resnet_config *cfg, int64_t image_size,
                     char *why, size_t len);

/* Whether path is a trainbench checkpoint (HDF5 with a 'model' attribute
 * and a /params group; a results file has the attribute alone),
 * without dying on any file: 1 and its step in *step (-1 when it has none),
 * or 0. */
int tb_ckpt_peek_step(const char *path, int64_t *step);

/* Loads every tensor of /params and /momentum into m. The set of names must
 * equal the model's (a missing or extra name is an error) and each shape
 * must match. Without /momentum the buffers are zeroed. */
void tb_ckpt_load(const char *path, tb_model *m);

/* Writes attributes, /params and /momentum of m into an open file. */
void tb_ckpt_write(hid_t file, tb_model *m, const tb_ckpt_meta *meta);
/* As tb_ckpt_write, checking each parameter, BatchNorm statistic and
 * momentum buffer for NaN/Inf on its host copy, between its one download
 * and its write: at the first one the write stops (the file is incomplete)
 * and 1 is returned with the tensor named in bad ("layer1.0.bn1.running_var
 * (element 3: inf)", "the momentum of fc.weight (...)"); 0 when all are
 * finite and written. */
int tb_ckpt_write_checked(hid_t file, tb_model *m, const tb_ckpt_meta *meta, char *bad, size_t len);

/* Atomic save of a whole checkpoint. */
void tb_ckpt_save(const char *path, tb_model *m, const tb_ckpt_meta *meta);
/* Atomic save through tb_ckpt_write_checked: 1 (bad filled) when a tensor
 * holds NaN/Inf, the temporary removed and any earlier file at path left as
 * it was; 0 when saved. bad NULL: no check (tb_ckpt_save). */
int tb_ckpt_save_checked(const char *path, tb_model *m, const tb_ckpt_meta *meta, char *bad, size_t len);

/* The model's loss scaler into meta (has_loss_scale and its fields; nothing
 * when m does not scale its loss): a training run's checkpoints record it,
 * `step`'s output does not (it has its own loss_scale attribute). Waits. */
void tb_ckpt_meta_scaler(tb_ckpt_meta *meta, tb_model *m);
/* meta for m with the given counters, this build's version. */
void tb_ckpt_meta_for(tb_ckpt_meta *meta, const tb_model *m, int64_t image_size, int64_t step,
                      int64_t epoch, int64_t seed);

#endif
