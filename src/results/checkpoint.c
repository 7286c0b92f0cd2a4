/* checkpoint.c - saving and loading model state in HDF5 (see checkpoint.h). */
#include "src/results/checkpoint.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/faults.h"
#include "core/log.h"
#include "core/version.h"
#include "src/results/h5io.h"

static const char *k_hint = "pass a trainbench checkpoint (convert torchvision weights with "
                            "model/convert_torchvision.py)";

/* A torchvision state_dict written to HDF5 as /params/<key>, without trainbench's attributes (DESIGN.md: it
 * loads into trainbench): the model from its blocks per stage and their kind, the classes from fc.weight
 * [classes, features]. 0, -1 when the keys are no known ResNet's, -2 for a wide or grouped variant of one
 * (wide_resnet50_2, resnext50_32x4d: the same names, the first 3x3 conv not [64, 64, 3, 3]). */
static int infer_model(hid_t f, tb_ckpt_meta *meta) {
    static const char *const names[] = {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"};
    int blocks[4];
    char key[96];
    for (int s = 0; s < 4; s++)
        for (blocks[s] = 0; blocks[s] < 64; blocks[s]++) {
            snprintf(key, sizeof key, "/params/layer%d.%d.conv1.weight", s + 1, blocks[s]);
            if (!tb_h5_exists(f, key)) break;
        }
    int bottleneck = tb_h5_exists(f, "/params/layer1.0.conv3.weight");
    int64_t dims[8];
    if (!tb_h5_exists(f, "/params/fc.weight") || tb_h5_shape(f, "/params/fc.weight", dims) != 2 || dims[0] < 1)
        return -1;
    int64_t c2[8];
    if (!tb_h5_exists(f, "/params/layer1.0.conv2.weight") || tb_h5_shape(f, "/params/layer1.0.conv2.weight", c2) != 4)
        return -1;
    if (c2[0] != 64 || c2[1] != 64) return -2;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        tb_resnet_config c;
        if (tb_resnet_config_init(&c, names[i], 1) != 0) continue;
        if (c.bottleneck == bottleneck && memcmp(c.blocks, blocks, sizeof blocks) == 0) {
            snprintf(meta->model, sizeof meta->model, "%s", names[i]);
            meta->classes = dims[0];
            return 0;
        }
    }
    return -1;
}

void tb_ckpt_read_meta(const char *path, tb_ckpt_meta *meta) {
    memset(meta, 0, sizeof *meta);
    hid_t f = tb_h5_open_read(path, "checkpoint", "check the path");
    if (tb_h5_attr_read_str(f, "model", meta->model, sizeof meta->model) != 0) {
        if (H5Aexists(f, "model") > 0) /* there, but no name: a damaged checkpoint, not a bare state_dict */
            tb_die("checkpoint '%s' has a 'model' attribute that is not a model name; %s", path, k_hint);
        int inferred = tb_h5_exists(f, "/params") ? infer_model(f, meta) : -1;
        if (inferred == -2)
            tb_die("'%s' is the state_dict of a wide or grouped ResNet (wide_resnet50_2, resnext50_32x4d: "
                   "layer1.0.conv2.weight is not [64, 64, 3, 3]), which trainbench does not build; give a "
                   "resnet18/34/50/101/152 state_dict", path);
        if (inferred != 0)
            tb_die("'%s' is not a trainbench checkpoint (no 'model' attribute, and its /params are no "
                   "torchvision ResNet's state_dict); %s", path, k_hint);
        tb_info("# '%s': a torchvision state_dict (no trainbench attributes): %s with %lld classes, from its "
                "parameter names and fc.weight", path, meta->model, (long long)meta->classes);
    } else if (tb_h5_attr_read_i64(f, "classes", &meta->classes) != 0 || meta->classes < 1) {
        tb_die("checkpoint '%s' has no valid 'classes' attribute; %s", path, k_hint);
    }
    if (!tb_h5_exists(f, "/params"))
        tb_die("checkpoint '%s' has no /params group; %s", path, k_hint);
    /* optional counters: default 0 */
    tb_h5_attr_read_i64(f, "image_size", &meta->image_size);
    tb_h5_attr_read_i64(f, "step", &meta->step);
    tb_h5_attr_read_i64(f, "epoch", &meta->epoch);
    meta->has_seed = tb_h5_attr_read_i64(f, "seed", &meta->seed) == 0;
    tb_h5_attr_read_i64(f, "epoch_step", &meta->epoch_step);
    tb_h5_attr_read_i64(f, "world_size", &meta->world_size);
    tb_h5_attr_read_i64(f, "global_batch", &meta->global_batch);
    tb_h5_attr_read_i64(f, "dataset_size", &meta->dataset_size);
    tb_h5_attr_read_str(f, "data_hash", meta->data_hash, sizeof meta->data_hash);
    meta->has_loss_scale = tb_h5_attr_read_f64(f, "loss_scale", &meta->loss_scale) == 0;
    tb_h5_attr_read_i64(f, "loss_scale_good_steps", &meta->loss_scale_good_steps);
    tb_h5_attr_read_i64(f, "loss_scale_growth", &meta->loss_scale_growth);
    tb_h5_attr_read_i64(f, "skipped_steps", &meta->skipped_steps);
    tb_h5_attr_read_str(f, "trainbench_version", meta->version, sizeof meta->version);
    tb_h5_attr_read_str(f, "git_revision", meta->git_revision, sizeof meta->git_revision);
    tb_h5_close_read(f);
}

int tb_ckpt_mismatch(const char *path, const tb_ckpt_meta *meta, const tb_resnet_config *cfg, int64_t image_size,
                     char *why, size_t len) {
    if (strcmp(meta->model, cfg->name) != 0 || meta->classes != cfg->classes) {
        snprintf(why, len,
                 "checkpoint '%s' holds %s with %lld classes, but this run builds %s with %d "
                 "classes; match --model and --classes (with --data, the classes are the data's) or use another "
                 "checkpoint",
                 path, meta->model, (long long)meta->classes, cfg->name, cfg->classes);
        return -1;
    }
    if (image_size > 0 && meta->image_size > 0 && meta->image_size != image_size) {
        snprintf(why, len,
                 "checkpoint '%s' was trained at image size %lld, but this run trains at %lld; resume with "
                 "--image-size %lld or use another checkpoint",
                 path, (long long)meta->image_size, (long long)image_size, (long long)meta->image_size);
        return -1;
    }
    return 0;
}

void tb_ckpt_require_match(const char *path, const tb_ckpt_meta *meta,
                           const tb_resnet_config *cfg) {
    char why[1024];
    if (tb_ckpt_mismatch(path, meta, cfg, 0, why, sizeof why) != 0) tb_die("%s", why);
}

int tb_ckpt_peek_step(const char *path, int64_t *step) {
    *step = -1;
    tb_h5_lock("checkpoint peek");
    tb_h5_quiet();
    hid_t f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    char model[TB_MODEL_NAME_MAX];
    /* a results file has a 'model' attribute too: a checkpoint is the one with /params */
    int is = f >= 0 && tb_h5_attr_read_str(f, "model", model, sizeof model) == 0 &&
             H5Lexists(f, "params", H5P_DEFAULT) > 0;
    if (is && tb_h5_attr_read_i64(f, "step", step) != 0) *step = -1;
    if (f >= 0) H5Fclose(f);
    tb_h5_unlock();
    return is;
}

/* The first float value of buf[0..n) that is NaN or Inf, or -1. */
static long first_nonfinite(const float *buf, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(buf[i])) return (long)i;
    return -1;
}

/* Checks that group `grp` of the file holds exactly the names the model
 * expects (trainable_only: the momentum group), with the right shapes. */
static void check_names(const char *path, hid_t f, const char *grp, const tb_model *m,
                        int trainable_only) {
    const tb_param_table *pt = &m->pt;
    hid_t g = H5_CHECK(H5Gopen2(f, grp, H5P_DEFAULT));
    int count = 0;
    char **names = tb_h5_list(g, &count);
    char extra[128] = "";
    for (int i = 0; i < count && !extra[0]; i++) {
        int idx = tb_params_find(pt, names[i]);
        if (idx < 0 || (trainable_only &&
                        tb_param_store_of(pt->items[idx].role) != TB_STORE_TRAIN))
            snprintf(extra, sizeof extra, "%s", names[i]);
    }
    /* freed before any message: under the fuzz targets tb_die returns to the caller */
    tb_h5_free_names(names, count);
    if (extra[0])
        tb_die("checkpoint '%s' has %s/%s, which %s with %d classes does not have; the file "
               "is for another model",
               path, grp, extra, m->cfg.name, m->cfg.classes);
    for (int i = 0; i < pt->count; i++) {
        const tb_param *p = &pt->items[i];
        if (trainable_only && tb_param_store_of(p->role) != TB_STORE_TRAIN) continue;
        char full[128];
        snprintf(full, sizeof full, "%s/%s", grp, p->name);
        if (!tb_h5_exists(f, full))
            tb_die("checkpoint '%s' lacks %s, which %s has; the file is incomplete or for another "
                   "model",
                   path, full, m->cfg.name);
        int64_t dims[8];
        int nd = tb_h5_shape(f, full, dims);
        int same = nd == p->ndim;
        for (int d = 0; same && d < nd; d++) same = dims[d] == p->shape[d];
        if (!same) {
            char want[64], got[64] = "[";
            tb_params_shape_str(p, want, sizeof want);
            for (int d = 0; d < nd; d++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "",
                         (long long)dims[d]);
            strncat(got, "]", sizeof got - strlen(got) - 1);
            tb_die("checkpoint '%s': %s has shape %s but %s with %d classes expects %s", path, full,
                   got, m->cfg.name, m->cfg.classes, want);
        }
        int want_float = p->role != TB_ROLE_BN_COUNTER;
        if (tb_h5_is_float(f, full) != want_float)
            tb_die("checkpoint '%s': %s should be %s", path, full,
                   want_float ? "floating point (float32)" : "an integer (int64)");
    }
    H5_CHECK(H5Gclose(g));
}

/* 1 when buf[0..n), read from dataset `full`, is finite; otherwise the
 * buffer is freed, the file closed and the load refused (0: under the fuzz
 * targets tb_die may return: the caller returns at once). trainbench never
 * writes a NaN or Inf (tb_ckpt_write_checked), so one here is a damaged or
 * foreign file: trained from, it would stop at its first step with advice
 * about --lr. */
static int loaded_finite(const char *path, hid_t f, const char *full, float *buf, size_t n) {
    long at = first_nonfinite(buf, n);
    if (at < 0) return 1;
    float v = buf[at];
    free(buf);
    tb_h5_close_read(f);
    tb_die("checkpoint '%s': %s holds %s (element %ld); trainbench never writes one, so the file is damaged or "
           "was made elsewhere: start from another checkpoint",
           path, full, isnan(v) ? "NaN" : "Inf", at);
    return 0;
}

void tb_ckpt_load(const char *path, tb_model *m) {
    const tb_param_table *pt = &m->pt;
    hid_t f = tb_h5_open_read(path, "checkpoint", "check the path");
    check_names(path, f, "/params", m, 0);
    int has_momentum = tb_h5_exists(f, "/momentum");
    if (has_momentum) check_names(path, f, "/momentum", m, 1);

    size_t maxn = 1;
    for (int i = 0; i < pt->count; i++)
        if (pt->items[i].numel > maxn) maxn = pt->items[i].numel;
    float *buf = malloc(maxn * sizeof *buf);
    if (!buf) TB_FATAL("out of host memory");
    for (int i = 0; i < pt->count; i++) {
        const tb_param *p = &pt->items[i];
        char full[128];
        snprintf(full, sizeof full, "/params/%s", p->name);
        if (p->role == TB_ROLE_BN_COUNTER) {
            int64_t v;
            tb_h5_read_i64(f, full, &v);
            tb_model_set_tensor(m, i, &v);
            continue;
        }
        tb_h5_read_f32(f, full, buf);
        if (!loaded_finite(path, f, full, buf, p->numel)) return;
        tb_model_set_tensor(m, i, buf);
        if (tb_param_store_of(p->role) != TB_STORE_TRAIN) continue;
        if (has_momentum) {
            snprintf(full, sizeof full, "/momentum/%s", p->name);
            tb_h5_read_f32(f, full, buf);
            if (!loaded_finite(path, f, full, buf, p->numel)) return;
        } else {
            memset(buf, 0, p->numel * sizeof *buf);
        }
        tb_model_set_momentum(m, i, buf);
    }
    free(buf);
    tb_h5_close_read(f);
}

void tb_ckpt_meta_scaler(tb_ckpt_meta *meta, tb_model *m) {
    if (!m->loss_scaling) return;
    tb_step_scalars sc;
    tb_model_read_scalars(m, &sc);
    meta->has_loss_scale = 1;
    meta->loss_scale = (double)sc.loss_scale;
    meta->loss_scale_good_steps = sc.good_steps;
    meta->loss_scale_growth = m->growth_interval;
    meta->skipped_steps = sc.skipped_steps;
}

void tb_ckpt_meta_for(tb_ckpt_meta *meta, const tb_model *m, int64_t image_size, int64_t step,
                      int64_t epoch, int64_t seed) {
    memset(meta, 0, sizeof *meta);
    snprintf(meta->model, sizeof meta->model, "%s", m->cfg.name);
    meta->classes = m->cfg.classes;
    meta->image_size = image_size;
    meta->step = step;
    meta->epoch = epoch;
    meta->seed = seed;
}

/* Checks the host copy buf[0..p->numel) of p (its momentum when momentum)
 * as tb_ckpt_write_checked does: 1 with the first NaN/Inf named in bad. */
static int check_finite(const tb_param *p, const float *buf, int momentum, char *bad, size_t len) {
    long at = first_nonfinite(buf, p->numel);
    if (at < 0) return 0;
    snprintf(bad, len, "%s%s (element %ld: %g)", momentum ? "the momentum of " : "", p->name, at, buf[at]);
    return 1;
}

int tb_ckpt_write_checked(hid_t file, tb_model *m, const tb_ckpt_meta *meta, char *bad, size_t bad_len) {
    const tb_param_table *pt = &m->pt;
    tb_h5_lock("checkpoint write"); /* held already when `file` came from tb_h5_create_atomic */
    tb_h5_attr_write_str(file, "model", meta->model);
    tb_h5_attr_write_i64(file, "classes", meta->classes);
    tb_h5_attr_write_i64(file, "image_size", meta->image_size);
    tb_h5_attr_write_i64(file, "step", meta->step);
    tb_h5_attr_write_i64(file, "epoch", meta->epoch);
    tb_h5_attr_write_i64(file, "seed", meta->seed);
    tb_h5_attr_write_i64(file, "epoch_step", meta->epoch_step);
    if (meta->world_size > 0) tb_h5_attr_write_i64(file, "world_size", meta->world_size);
    if (meta->global_batch > 0) tb_h5_attr_write_i64(file, "global_batch", meta->global_batch);
    if (meta->dataset_size > 0) tb_h5_attr_write_i64(file, "dataset_size", meta->dataset_size);
    if (meta->data_hash[0]) tb_h5_attr_write_str(file, "data_hash", meta->data_hash);
    if (meta->has_loss_scale) { /* the dynamic loss scaler, as GradScaler's state_dict: --resume goes on with it */
        tb_h5_attr_write_f64(file, "loss_scale", meta->loss_scale);
        tb_h5_attr_write_i64(file, "loss_scale_good_steps", meta->loss_scale_good_steps);
        tb_h5_attr_write_i64(file, "loss_scale_growth", meta->loss_scale_growth);
        tb_h5_attr_write_i64(file, "skipped_steps", meta->skipped_steps);
    }
    tb_h5_attr_write_str(file, "trainbench_version", tb_version_string);
    tb_h5_attr_write_str(file, "git_revision", tb_git_revision);

    hid_t gp = tb_h5_group_create(file, "params");
    hid_t gm = tb_h5_group_create(file, "momentum");
    size_t maxn = 1;
    for (int i = 0; i < pt->count; i++)
        if (pt->items[i].numel > maxn) maxn = pt->items[i].numel;
    float *buf = malloc(maxn * sizeof *buf);
    if (!buf) TB_FATAL("out of host memory");
    int found = 0;
    /* each tensor is downloaded once: checked (bad given), then written */
    for (int i = 0; i < pt->count; i++) {
        const tb_param *p = &pt->items[i];
        /* test only: die half-way through writing this checkpoint */
        if (i == pt->count / 2 && tb_fault("kill-in-ckpt", tb_log_rank() < 0 ? 0 : tb_log_rank(), meta->step))
            raise(SIGKILL);
        if (i == pt->count / 2 && tb_fault("term-in-ckpt", tb_log_rank() < 0 ? 0 : tb_log_rank(), meta->step)) {
            struct timespec one = {1, 0}; /* the signal's thread ends the run meanwhile */
            raise(SIGTERM);
            nanosleep(&one, NULL);
        }
        if (p->role == TB_ROLE_BN_COUNTER) {
            int64_t v;
            tb_model_get_tensor(m, i, &v);
            tb_h5_write_i64(gp, p->name, 0, NULL, &v);
            continue;
        }
        tb_model_get_tensor(m, i, buf);
        if (bad && (found = check_finite(p, buf, 0, bad, bad_len))) break;
        tb_h5_write_f32(gp, p->name, p->ndim, p->shape, buf);
        if (tb_param_store_of(p->role) == TB_STORE_TRAIN) {
            tb_model_get_momentum(m, i, buf);
            if (bad && (found = check_finite(p, buf, 1, bad, bad_len))) break;
            tb_h5_write_f32(gm, p->name, p->ndim, p->shape, buf);
        }
    }
    free(buf);
    H5_CHECK(H5Gclose(gm));
    H5_CHECK(H5Gclose(gp));
    tb_h5_unlock();
    return found;
}

void tb_ckpt_write(hid_t file, tb_model *m, const tb_ckpt_meta *meta) {
    tb_ckpt_write_checked(file, m, meta, NULL, 0);
}

void tb_ckpt_save(const char *path, tb_model *m, const tb_ckpt_meta *meta) {
    tb_ckpt_save_checked(path, m, meta, NULL, 0); /* unchecked: always written */
}

int tb_ckpt_save_checked(const char *path, tb_model *m, const tb_ckpt_meta *meta, char *bad, size_t len) {
    /* another thread is ending the process (the watchdog holding on in the
     * launcher's teardown, its cleanups already run): a checkpoint begun
     * now would leave its temporary file behind */
    tb_log_park_if_ending();
    tb_h5_writer w;
    tb_h5_create_atomic(&w, path, "checkpoint");
    if (tb_ckpt_write_checked(w.file, m, meta, bad, len)) {
        tb_h5_abandon_atomic(&w); /* an earlier checkpoint at path stays as it was */
        return 1;
    }
    tb_h5_commit_atomic(&w);
    return 0;
}
