/* cmd_step.c - `trainbench step`: exactly one training step, for checking
 * trainbench against an independent implementation (DESIGN.md "Golden step").
 *
 *   IN.h5 (checkpoint) + B.h5 (/images, /labels)
 *     -> forward (train mode) -> mean cross-entropy -> backward -> SGD
 *     -> OUT.h5: a checkpoint of the updated state (step + 1) plus /loss,
 *        /logits [N,classes] and /grads/<name> (raw gradients).
 * On any backend and precision: --backend cuda --precision tf32 runs the
 * same step on the GPU (the golden tests' GPU cases). The files are float32
 * whatever the compute precision. fp16 scales the loss (--loss-scale, as
 * GradScaler; other precisions when asked): /grads holds the unscaled gradients the update used, and the
 * root attributes loss_scale and skipped_steps say at which scale and
 * whether the scaled gradients overflowed (then the update was skipped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cli.h"
#include "core/host_memory.h"
#include "core/log.h"
#include "model/cpu/cpu_blas.h"
#include "model/model.h"
#include "src/cmd/commands.h"
#include "src/results/results.h"

typedef struct {
    char ckpt[TB_OPT_STR_MAX], batch[TB_OPT_STR_MAX], out[TB_OPT_STR_MAX];
    char backend[TB_OPT_STR_MAX], model[TB_OPT_STR_MAX], precision[TB_OPT_STR_MAX];
    char layout[TB_OPT_STR_MAX], fuse[TB_OPT_STR_MAX], plan_cache[TB_OPT_STR_MAX];
    double lr, momentum, weight_decay, label_smoothing, loss_scale;
    int nesterov, no_fuse, threads, deterministic, no_autotune, workspace_mb;
} step_flags;

/* unscale: 1 / the loss scale the backward ran at (1 without loss scaling) */
static void write_step_outputs(hid_t f, tb_model *m, double unscale) {
    const tb_param_table *pt = &m->pt;
    float loss = tb_model_read_loss(m);
    tb_h5_write_f32(f, "loss", 0, NULL, &loss);

    int64_t ld[2] = {m->batch, m->cfg.classes};
    float *logits = malloc((size_t)ld[0] * (size_t)ld[1] * sizeof *logits);
    size_t maxn = 1;
    for (int i = 0; i < pt->count; i++)
        if (pt->items[i].numel > maxn) maxn = pt->items[i].numel;
    float *buf = malloc(maxn * sizeof *buf);
    if (!logits || !buf) TB_FATAL("out of host memory");
    tb_model_read_logits(m, logits);
    tb_h5_write_f32(f, "logits", 2, ld, logits);

    hid_t g = tb_h5_group_create(f, "grads");
    for (int i = 0; i < pt->count; i++) {
        const tb_param *p = &pt->items[i];
        if (tb_param_store_of(p->role) != TB_STORE_TRAIN) continue;
        tb_model_get_grad(m, i, buf);
        if (unscale != 1.0)
            for (size_t k = 0; k < p->numel; k++) buf[k] = (float)(buf[k] * unscale);
        tb_h5_write_f32(g, p->name, p->ndim, p->shape, buf);
    }
    H5_CHECK(H5Gclose(g));
    free(buf);
    free(logits);
}

int tb_cmd_step(int argc, char **argv) {
    step_flags fl;
    memset(&fl, 0, sizeof fl);
    snprintf(fl.backend, sizeof fl.backend, "cpu");
    snprintf(fl.precision, sizeof fl.precision, "fp32");
    snprintf(fl.layout, sizeof fl.layout, "auto");
    snprintf(fl.fuse, sizeof fl.fuse, "auto");
    fl.lr = 0.1;
    fl.momentum = 0.9;
    fl.weight_decay = 1e-4;
    const tb_opt opts[] = {
        {"ckpt", TB_OPT_STRING, fl.ckpt, 0, 0, NULL, "checkpoint to start from (HDF5)"},
        {"batch", TB_OPT_STRING, fl.batch, 0, 0, NULL, "batch file: /images [N,3,H,W], /labels [N]"},
        {"out", TB_OPT_STRING, fl.out, 0, 0, NULL, "output: updated checkpoint + loss, logits, grads"},
        {"lr", TB_OPT_DOUBLE, &fl.lr, 0, 1e6, NULL, "learning rate"},
        {"momentum", TB_OPT_DOUBLE, &fl.momentum, 0, 1, NULL, "SGD momentum"},
        {"weight-decay", TB_OPT_DOUBLE, &fl.weight_decay, 0, 1, NULL, "L2 weight decay (on every parameter)"},
        {"nesterov", TB_OPT_FLAG, &fl.nesterov, 0, 0, NULL, "Nesterov momentum"},
        {"label-smoothing", TB_OPT_DOUBLE, &fl.label_smoothing, 0, 1, NULL, "label smoothing epsilon"},
        {"loss-scale", TB_OPT_DOUBLE, &fl.loss_scale, 0, 1e30, NULL,
         "scale the loss by this, as GradScaler (fp16: 0 means 65536, GradScaler's and training's initial "
         "scale; other precisions: no scaling unless given)"},
        {"backend", TB_OPT_CHOICE, fl.backend, 0, 0, "cpu|cuda|auto", "compute backend"},
        {"model", TB_OPT_STRING, fl.model, 0, 0, NULL, "require the checkpoint to hold this model"},
        {"precision", TB_OPT_CHOICE, fl.precision, 0, 0, TB_REAL_DTYPE == TB_F64 ? "fp32|fp64" : "fp32|tf32|bf16|fp16",
         "compute precision: the golden contract is fp32; tf32, bf16, fp16 need --backend cuda"},
        {"layout", TB_OPT_CHOICE, fl.layout, 0, 0, "auto|nchw|nhwc", "activation layout (auto: NHWC for bf16/fp16, else NCHW)"},
        {"deterministic", TB_OPT_FLAG, &fl.deterministic, 0, 0, NULL, "CUDA: deterministic algorithms only"},
        {"no-autotune", TB_OPT_FLAG, &fl.no_autotune, 0, 0, NULL, "CUDA: cuDNN's heuristic conv algorithms, not measured ones"},
        {"workspace-mb", TB_OPT_INT, &fl.workspace_mb, 0, 1 << 20, NULL, "CUDA: most MiB a conv algorithm may use (0: 1024, at most 1/8 of the GPU)"},
        {"threads", TB_OPT_INT, &fl.threads, 0, 4096, NULL, "CPU threads (0: all cores)"},
        {"fuse", TB_OPT_CHOICE, fl.fuse, 0, 0, "auto|fastest|graph|bn|off",
         "graph: conv + BatchNorm fusion (statistics in the conv's epilogue, BN + ReLU in the next conv's "
         "prologue); fastest: graph, each fusion kept only where it timed faster at start-up; bn: residual add "
         "and ReLU inside the BN op; off: separate ops; auto: bn"},
        {"no-fuse", TB_OPT_FLAG, &fl.no_fuse, 0, 0, NULL, "the same as --fuse off"},
        {"plan-cache", TB_OPT_STRING, fl.plan_cache, 0, 0, NULL, "CUDA: plan cache directory, or off (default: $TB_PLAN_CACHE, else $XDG_CACHE_HOME/trainbench/plans, else ~/.cache/trainbench/plans)"},
        {NULL, 0, NULL, 0, 0, NULL, NULL},
    };
    tb_cli_parse("step", "trainbench step --ckpt IN.h5 --batch B.h5 --out OUT.h5 [options]", argc,
                 argv, opts);
    tb_cli_require("step", "ckpt", fl.ckpt);
    tb_cli_require("step", "batch", fl.batch);
    tb_cli_require("step", "out", fl.out);
    char scale_why[256];
    if (tb_loss_scale_check(fl.loss_scale, scale_why, sizeof scale_why) != 0) tb_die("step: %s", scale_why);
    const char *in_flag[2] = {"--ckpt", "--batch"}, *in_path[2] = {fl.ckpt, fl.batch};
    tb_output_not_input("step", "--out", fl.out, in_flag, in_path, 2);
    tb_output_path_require("step", fl.out, TB_OUT_CHECKPOINT, "step output", "--out");
    if (fl.nesterov && fl.momentum <= 0)
        tb_die("step: --nesterov needs --momentum > 0 (as torch.optim.SGD)");
    tb_precision prec;
    if (tb_precision_parse(fl.precision, &prec) != 0)
        tb_die("step: --precision %s is not available on this build; use fp32", fl.precision);

    tb_ckpt_meta meta;
    tb_ckpt_read_meta(fl.ckpt, &meta);
    tb_resnet_config cfg;
    if (tb_resnet_config_init(&cfg, meta.model, (int)meta.classes) != 0)
        tb_die("checkpoint '%s' names model '%s'; known models: %s", fl.ckpt, meta.model,
               tb_resnet_known_names());
    if (fl.model[0] && strcmp(fl.model, meta.model) != 0)
        tb_die("checkpoint '%s' holds %s, not the --model %s asked for", fl.ckpt, meta.model,
               fl.model);

    tb_batchfile b;
    tb_batchfile_read(fl.batch, cfg.classes, TB_RESNET_MIN_IMAGE, &b);

    tb_backend_opts bo = {.threads = fl.threads, .deterministic = fl.deterministic,
                          .no_autotune = fl.no_autotune,
                          .workspace_limit = (size_t)fl.workspace_mb << 20, .plan_cache = fl.plan_cache};
    tb_precision_backend_opts(prec, &bo);
    char err[512];
    tb_backend *be = tb_backend_create(fl.backend, &bo, err, sizeof err);
    if (!be) tb_die("step: %s", err);
    if (prec == TB_PREC_TF32 && strcmp(be->name, "cuda") != 0)
        tb_die("step: --precision tf32 needs the CUDA backend (TF32 is a tensor-core format); "
               "use fp32 on %s", be->name);
    tb_model_opts mo = tb_model_opts_for(prec);
    if (fl.loss_scale > 0) { /* any precision: fp32 too, as GradScaler allows (the CPU tests of this path) */
        mo.loss_scaling.init_scale = fl.loss_scale;
        if (mo.loss_scaling.growth_interval <= 0) mo.loss_scaling.growth_interval = 2000;
    }
    if (fl.no_fuse && strcmp(fl.fuse, "auto") != 0 && strcmp(fl.fuse, "off") != 0)
        tb_die("step: --no-fuse is --fuse off; give one of --no-fuse and --fuse %s", fl.fuse);
    if (tb_fuse_parse(fl.no_fuse ? "off" : fl.fuse, &mo.fuse) != 0)
        tb_die("step: --fuse %s is not auto, fastest, graph, bn or off", fl.fuse);
    if (strcmp(fl.layout, "auto") != 0) mo.layout = strcmp(fl.layout, "nhwc") == 0 ? TB_NHWC : TB_NCHW;
    tb_model *m = tb_model_create(&cfg, be, b.n, b.h, b.w, &mo);
    const char *bad = tb_model_degenerate_bn(m, b.n);
    if (bad) { /* the name outlives the model, which goes before the error ends the process */
        char layer[128];
        snprintf(layer, sizeof layer, "%s", bad);
        tb_model_destroy(m);
        be->destroy(be);
        tb_die("batch file '%s': a batch of %d at %dx%d leaves one value per channel in %s; "
               "BatchNorm in training needs more (use a larger batch or image)",
               fl.batch, b.n, b.h, b.w, layer);
    }
    tb_ckpt_load(fl.ckpt, m);
    tb_host_avail avail;
    tb_host_memory_available_here(0, &avail);
    char why[512];
    if (tb_host_memory_short((long long)tb_graph_host_bytes_unwritten(&m->g, be), 1, "for its first step", &avail,
                             why, sizeof why))
        tb_die("batch file '%s': the step on a batch of %d at %dx%d %s; use a smaller batch", fl.batch, b.n, b.h,
               b.w, why);
    if (strcmp(be->name, "cpu") == 0) tb_cpu_blas_address_check(be->threads > 0 ? be->threads : 1, "step");

    tb_model_set_batch(m, b.images, b.labels, b.n);
    tb_model_forward(m, 1);
    tb_model_loss(m, fl.label_smoothing, 1.0);
    tb_model_backward(m, NULL, NULL);
    tb_step_scalars sc;
    tb_model_read_scalars(m, &sc); /* the scale the backward ran at */
    double loss_scale = (double)sc.loss_scale;
    tb_sgd_args sgd = {fl.lr, fl.momentum, fl.nesterov, 1.0};
    tb_model_sgd_step(m, &sgd, fl.weight_decay, 0);
    tb_model_read_scalars(m, &sc);
    int scaling = mo.loss_scaling.init_scale > 0;

    tb_ckpt_meta out = meta;
    out.step = meta.step + 1;
    out.world_size = 1; /* this step's, not those of the run that wrote the input (checkpoint.h) */
    out.global_batch = b.n;
    out.data_hash[0] = 0; /* trained on the batch file, not the input's data */
    out.has_loss_scale = 0; /* its loss_scale below is the step's (before the update), not a scaler to resume */
    tb_h5_writer w;
    tb_h5_create_atomic(&w, fl.out, "step output");
    char nonfinite[256];
    if (tb_ckpt_write_checked(w.file, m, &out, nonfinite, sizeof nonfinite)) { /* as train's checkpoints */
        tb_h5_abandon_atomic(&w);
        tb_die("step: after the step %s holds NaN/Inf (loss %g), so --out '%s' is not written; the batch's "
               "/images are too large for the model, or --lr%s is too high",
               nonfinite, tb_model_read_loss(m), fl.out, scaling ? " or --loss-scale" : "");
    }
    write_step_outputs(w.file, m, scaling ? 1.0 / loss_scale : 1.0);
    if (scaling) {
        tb_h5_attr_write_f64(w.file, "loss_scale", loss_scale);
        tb_h5_attr_write_i64(w.file, "skipped_steps", sc.skipped_steps);
    }
    tb_h5_commit_atomic(&w);

    char scale_note[96] = "";
    if (scaling)
        snprintf(scale_note, sizeof scale_note, ", loss scale %g%s", loss_scale,
                 sc.skipped_steps ? " (the scaled gradients overflowed: update skipped)" : "");
    printf("step %lld: %s, batch [%d,3,%d,%d], loss %.6f%s -> %s\n", (long long)out.step, cfg.name,
           b.n, b.h, b.w, tb_model_read_loss(m), scale_note, fl.out);
    tb_model_destroy(m);
    be->destroy(be);
    tb_batchfile_free(&b);
    return 0;
}
