/* train_flags.c - the flags of `trainbench train`: defaults, the option
 * table (--help), and the checks that need no other rank. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "src/train/train_setup.h"

static void defaults(tb_train_flags *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->backend, sizeof f->backend, "auto");
    snprintf(f->model, sizeof f->model, "resnet18");
    snprintf(f->precision, sizeof f->precision, "auto");
    snprintf(f->results, sizeof f->results, "trainbench_results.h5");
    snprintf(f->lr_schedule, sizeof f->lr_schedule, "cosine");
    snprintf(f->last_batch, sizeof f->last_batch, "drop");
    snprintf(f->comm, sizeof f->comm, "auto");
    snprintf(f->allreduce_dtype, sizeof f->allreduce_dtype, "fp32");
    snprintf(f->broadcast_buffers, sizeof f->broadcast_buffers, "on");
    snprintf(f->cuda_graph, sizeof f->cuda_graph, "auto");
    snprintf(f->step_mode, sizeof f->step_mode, "auto");
    snprintf(f->layout, sizeof f->layout, "auto");
    snprintf(f->resident, sizeof f->resident, "auto");
    snprintf(f->fuse, sizeof f->fuse, "auto");
    f->graph_warmup = 3;
    snprintf(f->decode, sizeof f->decode, "fast");
    f->batch = 32;
    f->image = TB_TRAIN_IMAGE_DEFAULT;
    f->classes = TB_TRAIN_CLASSES_DEFAULT;
    f->steps = -1; /* not given: 100, or 0 when --epochs is given (check_flags) */
    f->warmup = 5;
    f->loader_threads = 2;
    f->prefetch = 3;
    f->print_every = 10;
    f->scaling_steps = 10;
    f->scaling_warmup = 3;
    f->scaling_min_s = -1;
    f->seed = 1;
    f->lr = 0.1;
    f->lr_base_batch = 256;
    f->lr_warmup_steps = 10;
    f->momentum = 0.9;
    f->weight_decay = 5e-5;
    f->loss_scale_growth = 2000;
    f->bucket_mb = 25;
    f->first_bucket_mb = (double)TB_GRAD_SYNC_FIRST_BUCKET_BYTES / 1048576.0;
    f->synthetic_size = 50000;
    f->timeout = 600;
}

/* Two output flags that name one file would overwrite each other; an
 * output on an input file (--batch-file, --init, a --data or --val list
 * file) would destroy the input. */
static void check_outputs_distinct(const tb_train_flags *f) {
    const char *flag[4] = {"--results", "--ckpt", "--save", "--trace"};
    const char *path[4] = {f->results, f->ckpt, f->save, f->trace};
    const char *in_flag[4] = {"--batch-file", "--init", "--data", "--val"};
    const char *in_path[4] = {f->batch_file, f->init, f->data, f->val};
    char where[4][4200];
    for (int i = 0; i < 4; i++) {
        if (!path[i][0]) continue;
        tb_output_landing(path[i], where[i], sizeof where[i]);
        for (int j = 0; j < i; j++)
            if (path[j][0] && strcmp(where[i], where[j]) == 0)
                tb_die("train: %s '%s' and %s '%s' are the same file, and one would overwrite the other; give "
                       "them different paths",
                       flag[j], path[j], flag[i], path[i]);
    }
    for (int i = 0; i < 4; i++) tb_output_not_input("train", flag[i], path[i], in_flag, in_path, 4);
}

/* The flags' combinations, the LR schedule's syntax and the model's name. */
static void check_flags(tb_train_run *r) {
    const tb_train_flags *f = &r->fl;
    /* --epochs alone means epochs, as in a PyTorch recipe; --steps' default
     * of 100 applies only when neither is given */
    if (f->steps > 0 && f->epochs > 0)
        tb_die("train: give --steps %d or --epochs %d, not both (--steps counts optimizer steps over all epochs)",
               f->steps, f->epochs);
    if (f->steps < 0) r->fl.steps = f->epochs > 0 ? 0 : 100;
    char why[256];
    if (tb_loss_scale_check(f->loss_scale, why, sizeof why) != 0) tb_die("train: %s", why);
    if (f->scaling_min_s < 0 && f->scaling_min_s != -1) /* -1: not given (the backend's default) */
        tb_die("train: --scaling-min-seconds %g is negative; give 0 or more seconds", f->scaling_min_s);
    if (f->timeout > 0 && f->timeout < 0.1) /* preflight's and allreduce-bench's least too */
        tb_die("train: --timeout %g s is under 0.1 s, less than a start-up barrier or a checkpoint may take; give "
               "0.1 s or more, or 0 for no watchdog", f->timeout);
    if (f->steps == 0 && f->epochs == 0) /* --steps 0 alone: 0 steps is what --epochs N leaves to the epochs */
        tb_die("train: --steps 0 without --epochs trains nothing; give --steps 1 or more, or --epochs N");
    r->prec = TB_PREC_FP32;
    r->prec_auto = strcmp(f->precision, "auto") == 0;
    if (!r->prec_auto && tb_precision_parse(f->precision, &r->prec) != 0)
        tb_die("train: --precision %s is not available on this build; use fp32", f->precision);
    if (f->data[0] && f->batch_file[0]) tb_die("train: give --data or --batch-file, not both");
    if (f->synthetic && (f->data[0] || f->batch_file[0]))
        tb_die("train: give --synthetic or %s, not both (--synthetic trains on generated images, %s on its files)",
               f->data[0] ? "--data" : "--batch-file", f->data[0] ? "--data" : "--batch-file");
    if (f->val[0] && !f->data[0]) tb_die("train: --val needs --data (top-1/top-5 on real images)");
    if (f->ckpt_every > 0 && !f->ckpt[0]) tb_die("train: --ckpt-every needs --ckpt FILE");
    if (f->resume && !f->ckpt[0]) tb_die("train: --resume needs --ckpt FILE (the checkpoint to continue from)");
    if (f->resume && f->init[0]) tb_die("train: give --resume or --init, not both");
    check_outputs_distinct(f);
    if (f->share_gpu && strcmp(f->comm, "auto") == 0)
        tb_die("train: --share-gpu needs --comm mpi (ranks sharing a GPU move gradients over MPI through pinned "
               "memory), or --comm nccl with NCCL 2.30 or newer and NCCL_MULTI_RANK_GPU_ENABLE=1 (older NCCL "
               "refuses two ranks on one GPU)");
    tb_lr_schedule probe;
    if (tb_lr_schedule_init(&probe, f->lr_schedule, 1, 1, 1, 0, 1, 1) != 0)
        tb_die("train: --lr-schedule '%s' is not cosine, constant or step:E1,E2,... (at most 8 epochs, each after the "
               "one before)",
               f->lr_schedule);
    if (f->no_fuse && strcmp(f->fuse, "auto") != 0 && strcmp(f->fuse, "off") != 0)
        tb_die("train: --no-fuse is --fuse off; give one of --no-fuse and --fuse %s", f->fuse);
    tb_resnet_config *cfg = &r->cfg;
    if (tb_resnet_config_init(cfg, f->model, f->classes) != 0)
        tb_die("train: unknown --model '%s'; known models: %s", f->model, tb_resnet_known_names());
    cfg->zero_init_residual = f->zero_init_residual;
}

void tb_train_parse(tb_train_run *r, int argc, char **argv) {
    tb_train_flags *f = &r->fl;
    defaults(f);
    const tb_opt opts[] = {
        {"backend", TB_OPT_CHOICE, f->backend, 0, 0, "cpu|cuda|auto", "compute backend"},
        {"model", TB_OPT_STRING, f->model, 0, 0, NULL, "resnet18|resnet34|resnet50|resnet101|resnet152"},
        {"batch-size", TB_OPT_INT, &f->batch, 1, 1 << 16, NULL, "samples per step and rank"},
        {"image-size", TB_OPT_INT, &f->image, TB_RESNET_MIN_IMAGE, 4096, NULL, "input side in pixels"},
        {"classes", TB_OPT_INT, &f->classes, 2, 1 << 20, NULL, "classes of synthetic data (--data: from the folder)"},
        {"steps", TB_OPT_INT, &f->steps, 0, 1 << 30, NULL, "training steps (default 100 without --epochs)"},
        {"epochs", TB_OPT_INT, &f->epochs, 0, 1 << 20, NULL, "training epochs, instead of --steps (default 0)"},
        {"warmup-steps", TB_OPT_INT, &f->warmup, 0, 1 << 30, NULL, "first steps left out of the timing"},
        {"data", TB_OPT_STRING, f->data, 0, 0, NULL, "training images: ImageFolder directory or list file"},
        {"val", TB_OPT_STRING, f->val, 0, 0, NULL, "validation images: top-1/top-5 after each epoch"},
        {"synthetic", TB_OPT_FLAG, &f->synthetic, 0, 0, NULL, "synthetic input, no decoding (default without --data)"},
        {"synthetic-size", TB_OPT_INT, &f->synthetic_size, 1, 1 << 30, NULL, "samples in a synthetic epoch"},
        {"resident", TB_OPT_CHOICE, f->resident, 0, 0, "auto|on|off",
         "synthetic and --batch-file data: the sample pool uploaded once into device memory and each batch "
         "gathered there, no per-step upload (as a benchmark's on-device batch); auto: on with CUDA"},
        {"batch-file", TB_OPT_STRING, f->batch_file, 0, 0, NULL, "train on the rows of a batch file (/images, /labels), in order"},
        {"last-batch", TB_OPT_CHOICE, f->last_batch, 0, 0, "drop|pad|keep", "an epoch's remainder when ranks x batch does not divide the data: drop it, pad the last step from the epoch's start, or keep a short last step (uneven shards)"},
        {"strict-data", TB_OPT_FLAG, &f->strict_data, 0, 0, NULL, "a corrupt image ends the run"},
        {"threads", TB_OPT_INT, &f->threads, 0, 4096, NULL,
         "CPU compute threads per rank (0: its share of the job's CPUs on the host; docs/training.md)"},
        {"loader-threads", TB_OPT_INT, &f->loader_threads, 1, 256, NULL, "JPEG decode threads per rank"},
        {"prefetch", TB_OPT_INT, &f->prefetch, 2, 64, NULL, "batches the loader prepares ahead"},
        {"decode", TB_OPT_CHOICE, f->decode, 0, 0, TB_DECODE_CHOICES,
         "JPEG decode: libjpeg-turbo on the CPU (fast: crop at DCT scale), or gpu: nvJPEG (CUDA backend)"},
        {"seed", TB_OPT_INT, &f->seed, 0, 2147483647, NULL, "seed for weights, data order and augmentation"},
        {"precision", TB_OPT_CHOICE, f->precision, 0, 0, "auto|fp32|tf32|bf16|fp16",
         "compute precision; auto: bf16 (NHWC, fp32 master weights) on CUDA -- tensor cores at "
         "full rate, half the memory traffic, no loss scaling -- and fp32 on the CPU"},
        {"lr", TB_OPT_DOUBLE, &f->lr, 0, 1e6, NULL, "learning rate for a global batch of --lr-base-batch"},
        {"lr-base-batch", TB_OPT_INT, &f->lr_base_batch, 1, 1 << 30, NULL, "lr scales linearly: lr * global batch / this"},
        {"lr-schedule", TB_OPT_STRING, f->lr_schedule, 0, 0, NULL, "cosine | constant | step:E1,E2,... (x0.1 at each epoch)"},
        {"lr-warmup-steps", TB_OPT_INT, &f->lr_warmup_steps, 0, 1 << 30, NULL, "linear lr warm-up steps"},
        {"momentum", TB_OPT_DOUBLE, &f->momentum, 0, 1, NULL, "SGD momentum"},
        {"weight-decay", TB_OPT_DOUBLE, &f->weight_decay, 0, 1, NULL, "L2 weight decay"},
        {"no-bn-decay", TB_OPT_FLAG, &f->no_bn_decay, 0, 0, NULL, "no weight decay on BatchNorm and biases"},
        {"nesterov", TB_OPT_FLAG, &f->nesterov, 0, 0, NULL, "Nesterov momentum"},
        {"label-smoothing", TB_OPT_DOUBLE, &f->label_smoothing, 0, 1, NULL, "label smoothing epsilon"},
        {"loss-scale", TB_OPT_DOUBLE, &f->loss_scale, 0, 1e38, NULL,
         "initial dynamic loss scale, as GradScaler's init_scale (0: the precision's: 65536 with fp16, no scaling "
         "otherwise); any precision takes it; a checkpoint keeps the scaler for --resume"},
        {"loss-scale-growth", TB_OPT_INT, &f->loss_scale_growth, 1, 1 << 30, NULL,
         "overflow-free steps before the loss scale doubles (GradScaler's growth_interval)"},
        {"bucket-mb", TB_OPT_DOUBLE, &f->bucket_mb, 0.001, 1e5, NULL, "gradient all-reduce bucket size (MiB)"},
        {"first-bucket-mb", TB_OPT_DOUBLE, &f->first_bucket_mb, 0, 1e5, NULL,
         "size of the first bucket launched (the last layers'), smaller so communication starts early, as PyTorch DDP's; host and GPU paths (MiB; 0: --bucket-mb)"},
        {"no-overlap", TB_OPT_FLAG, &f->no_overlap, 0, 0, NULL, "all-reduce after backward instead of during it"},
        {"broadcast-buffers", TB_OPT_CHOICE, f->broadcast_buffers, 0, 0, "on|off",
         "BatchNorm running statistics from rank 0 to every rank before each forward, as PyTorch DDP's "
         "broadcast_buffers (on); off: each rank keeps its own until evaluation or a checkpoint, which take rank "
         "0's either way (training itself does not read them): one collective less per step"},
        {"comm", TB_OPT_CHOICE, f->comm, 0, 0, "auto|nccl|mpi", "gradient transport: nccl (CUDA, one rank per GPU), mpi (host buffers on the CPU, staged through pinned memory on CUDA); auto: nccl on CUDA with 2+ ranks when built, else mpi. Given explicitly, it is used on one rank too"},
        {"share-gpu", TB_OPT_FLAG, &f->share_gpu, 0, 0, NULL, "let ranks share a GPU (--comm mpi; or --comm nccl with NCCL >= 2.30 and NCCL_MULTI_RANK_GPU_ENABLE=1): a test of the multi-rank paths on one GPU"},
        {"allreduce-dtype", TB_OPT_CHOICE, f->allreduce_dtype, 0, 0, "fp32|bf16", "GPU: gradients on the wire in bfloat16 (DDP's bf16 compression hook: half the bytes, ~2^-9 relative error per rank)"},
        {"cuda-graph", TB_OPT_CHOICE, f->cuda_graph, 0, 0, "auto|on|off", "capture the training step in a CUDA graph after --graph-warmup steps; auto: when it can (one line says why not)"},
        {"graph-warmup", TB_OPT_INT, &f->graph_warmup, 1, 1 << 20, NULL, "eager steps before the step is captured"},
        {"step-mode", TB_OPT_CHOICE, f->step_mode, 0, 0, "auto|sync|async", "auto: asynchronous steps on CUDA (events, no host sync), synchronous on the CPU; async on the CPU tests that path"},
        {"layout", TB_OPT_CHOICE, f->layout, 0, 0, "auto|nchw|nhwc", "activation layout; auto: NHWC for bf16/fp16, NCHW for fp32/tf32"},
        {"deterministic", TB_OPT_FLAG, &f->deterministic, 0, 0, NULL, "CUDA: deterministic algorithms only"},
        {"no-autotune", TB_OPT_FLAG, &f->no_autotune, 0, 0, NULL, "CUDA: cuDNN's heuristic conv algorithms, not measured ones"},
        {"workspace-mb", TB_OPT_INT, &f->workspace_mb, 0, 1 << 20, NULL, "CUDA: most MiB a conv algorithm may use (0: 1024, at most 1/8 of the GPU)"},
        {"op-profile", TB_OPT_INT, &f->op_profile, 0, 100000, NULL,
         "after the timed steps, N more steps run eagerly (no CUDA graph) with an event around every op: "
         "ms per step by op kind and node, and the share of the step they cover (# tables, /op_profile in the "
         "results file). They train on (after --save and the replica check) and change no reported timing"},
        {"scaling-steps", TB_OPT_INT, &f->scaling_steps, 0, 1 << 20, NULL, "timed steps per scaling row (0: no scaling table)"},
        {"scaling-warmup", TB_OPT_INT, &f->scaling_warmup, 0, 1 << 20, NULL, "untimed steps before each scaling row"},
        {"scaling-min-seconds", TB_OPT_DOUBLE, &f->scaling_min_s, -1, 3600, NULL,
         "a scaling row shorter than this after --scaling-steps runs on until it lasts this long (default: 1.25 "
         "on CUDA, where NVML's GPU-Util needs a window of 1 s; 0 on the CPU)"},
        {"print-every", TB_OPT_INT, &f->print_every, 1, 1 << 30, NULL, "progress line every N steps"},
        {"ckpt", TB_OPT_STRING, f->ckpt, 0, 0, NULL,
         "checkpoint file, rewritten every --ckpt-every steps and after the last step; an existing one is "
         "continued with --resume, never overwritten without it"},
        {"ckpt-every", TB_OPT_INT, &f->ckpt_every, 0, 1 << 30, NULL,
         "steps between checkpoints (0: only the one after the last step, when --ckpt is given)"},
        {"resume", TB_OPT_FLAG, &f->resume, 0, 0, NULL,
         "continue exactly from --ckpt when it exists; an existing --results file is kept as "
         "<name>.before_resume_step<K>.h5"},
        {"save", TB_OPT_STRING, f->save, 0, 0, NULL, "checkpoint written at the end of training"},
        {"init", TB_OPT_STRING, f->init, 0, 0, NULL, "start from this checkpoint's weights"},
        {"results", TB_OPT_STRING, f->results, 0, 0, NULL, "results file (HDF5) written by rank 0"},
        {"trace", TB_OPT_STRING, f->trace, 0, 0, NULL, "per-rank timeline of the training steps (Chrome trace JSON)"},
        {"timeout", TB_OPT_DOUBLE, &f->timeout, 0, 1e7, NULL, "seconds a collective or a silent rank may take (0: no watchdog; else 0.1 or more)"},
        {"fuse", TB_OPT_CHOICE, f->fuse, 0, 0, "auto|fastest|graph|bn|off",
         "graph: BatchNorm statistics in the conv's epilogue and BN + ReLU in the next conv's prologue "
         "(cuDNN's graph API; what an engine is missing falls back to bn, one line says which); bn: residual "
         "add and ReLU inside the BN op; off: separate ops; fastest: graph, each fusion kept only where it timed "
         "faster at start-up; auto: bn (graph is correct but slower in bf16 on the H200: docs/fused_conv_bn.md)"},
        {"no-fuse", TB_OPT_FLAG, &f->no_fuse, 0, 0, NULL, "the same as --fuse off"},
        {"plan-cache", TB_OPT_STRING, f->plan_cache, 0, 0, NULL,
         "CUDA: directory of the plan cache (measured conv algorithms and fused-graph engines, per GPU, "
         "driver, cuDNN, precision, layout and shape; shared by the ranks of a node), or off "
         "(default: $TB_PLAN_CACHE, else $XDG_CACHE_HOME/trainbench/plans, else ~/.cache/trainbench/plans)"},
        {"zero-init-residual", TB_OPT_FLAG, &f->zero_init_residual, 0, 0, NULL, "each block's last BN gamma starts at 0"},
        {NULL, 0, NULL, 0, 0, NULL, NULL},
    };
    tb_cli_parse("train", "[mpirun -np N] trainbench [train] [options]", argc, argv, opts);
    tb_log_usage_errors(1); /* the checks of the argv alone: rank 0 says what is wrong */
    check_flags(r);
    tb_log_usage_errors(0);
    r->argc = argc;
    r->argv = argv;
}
