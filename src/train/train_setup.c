/* train_setup.c - `trainbench train` from MPI start-up to the first step:
 * comm/ and the launch checks, the results file's report and the watchdog,
 * the data (train_data.c), the backend, the model (seeded, --init, or
 * --resume from the newest checkpoint), rank 0's state broadcast so every
 * rank starts identical, the LR schedule, and the run header on stdout. */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <unistd.h>

#include "comm/nccl.h"
#include "core/cpu_features.h"
#include "core/host_cpus.h"
#include "core/log.h"
#include "core/stall_guard.h"
#include "core/timer.h"
#include "model/cpu/cpu_blas.h"
#include "src/results/results.h"
#include "src/train/launch_check.h"
#include "src/train/train_setup.h"

/* ---- failures --------------------------------------------------------------------------- */

/* The watchdog found a dead, silent or stuck rank (monitor thread); not
 * final: a provisional reason to mark the results file with at once. */
static void on_watchdog(const char *why, int final, void *p) {
    tb_train_abort_ctx *a = p;
    tb_run_report *report = atomic_load(&a->report);
    if (final) {
        fprintf(stderr, "trainbench[rank %d %s]: error: watchdog: %s\n", a->rank, a->host, why);
        fflush(stderr);
    }
    if (a->rank == 0 && report) {
        if (final)
            tb_run_report_write(report, "aborted", why, 0.5);
        else
            tb_run_report_write_provisional(report, why, 0.5);
    }
}

void tb_train_stop_together(tb_train_run *r, const char *why) {
    tb_monitor_stop(r->mon);
    if (r->info.rank == 0) tb_run_report_write(&r->report, "aborted", why, 0);
    tb_say_error("train: %s", why);
    tb_comm_exit_all(r->world, 1);
}

void tb_train_die_together(tb_train_run *r, const char *fmt, ...) {
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    tb_monitor_stop(r->mon);
    tb_say_error("train: %s", why);
    tb_comm_exit_all(r->world, 1);
}

/* Rank 0's verdict on what only it looks at (the output files, the
 * checkpoint) for every rank: "" goes on; otherwise every rank stops
 * together with that one line. Collective. */
#define VERDICT_MAX 12288 /* room for two paths of TB_OPT_STR_MAX and the words around them */
static void verdict_from_rank0(tb_train_run *r, char why[VERDICT_MAX]) {
    tb_comm_bcast(r->world, why, VERDICT_MAX, TB_BYTES, 0);
    if (why[0]) tb_train_die_together(r, "%s", why);
}

/* Rank 0, before any work: every output path can be written and holds
 * nothing its write must not replace (output_guard.h: not a directory, its
 * directory writable, no device or FIFO, no trainbench file of the other
 * kind), and --ckpt holds no checkpoint that this run would overwrite
 * (--resume continues from it). */
static void check_outputs(const tb_train_flags *f, char *why, size_t len) {
    const char *flag[4] = {"--results", "--ckpt", "--save", "--trace"};
    const char *what[4] = {"results file", "checkpoint", "checkpoint", "trace file"};
    const char *path[4] = {f->results, f->ckpt, f->save, f->trace};
    const tb_output_kind kind[4] = {TB_OUT_RESULTS, TB_OUT_CHECKPOINT, TB_OUT_CHECKPOINT, TB_OUT_TEXT};
    for (int i = 0; i < 4; i++)
        if (path[i][0] && tb_output_path_check(path[i], kind[i], what[i], flag[i], why, len) != 0) return;
    int64_t step;
    if (!f->ckpt[0] || f->resume || access(f->ckpt, F_OK) != 0) return;
    if (tb_ckpt_peek_step(f->ckpt, &step))
        snprintf(why, len,
                 "--ckpt '%s' already holds a checkpoint (step %lld); add --resume to continue from it, or remove "
                 "it or choose another --ckpt path",
                 f->ckpt, (long long)step);
    else
        snprintf(why, len,
                 "--ckpt '%s' exists and is not a trainbench checkpoint, and the run would overwrite it; remove it "
                 "or choose another --ckpt path",
                 f->ckpt);
}

/* ---- the stages ------------------------------------------------------------------------- */

/* MPI, the singleton trap, the output files' directories, every rank's host
 * name, and the watchdog, which guards every collective from here on. */
static void bootstrap(tb_train_run *r) {
    const tb_train_flags *f = &r->fl;
    r->abort_mark = -1;
    tb_stall_guard_arm(f->timeout, "start-up", TB_GUARD_MPI_INIT); /* until the watchdog runs */
    tb_cpu_blas_address_check(1, "train"); /* before MPI_Init's fork, which a stuck OpenBLAS thread holds */
    tb_comm_init(&r->argc, &r->argv, &r->info);
    tb_launch_check_singleton(&r->info);
    r->world = tb_comm_world();
    tb_run_report_init(&r->report, r->info.rank == 0 ? f->results : "");
    tb_utc_now(r->t_start, sizeof r->t_start);
    char why[VERDICT_MAX] = "";
    if (r->info.rank == 0) check_outputs(f, why, sizeof why);
    tb_stall_guard_phase("the start-up check of the output files (a broadcast from rank 0)");
    verdict_from_rank0(r, why);
    r->hosts = calloc((size_t)r->info.world, 64);
    if (!r->hosts) TB_FATAL("out of host memory");
    tb_stall_guard_phase("the start-up exchange of host names (an all-gather of every rank)");
    tb_comm_allgather(r->world, r->info.host, r->hosts, 64);
    /* --resume keeps an earlier results file (init_model): until then a
     * failure must not write over it */
    int keep = r->info.rank == 0 && f->resume && f->results[0] && access(f->results, F_OK) == 0;
    atomic_init(&r->abort_ctx.report, keep ? NULL : &r->report);
    r->abort_ctx.rank = r->info.rank;
    r->abort_ctx.host = r->info.host;
    tb_stall_guard_phase("the watchdog's start (every rank joins it)");
    r->mon = f->timeout > 0 ? tb_monitor_start(r->world, r->hosts, f->timeout, on_watchdog, &r->abort_ctx) : NULL;
    tb_stall_guard_disarm(); /* the watchdog guards every collective from here on */
    tb_monitor_progress(r->mon, 0, "start-up", 0);
    if (!f->resume) tb_train_abort_mark_start(r); /* resuming: once the earlier results file is kept */
    tb_train_signals_start(r);
}

/* The compute backend with this rank's share of the host's cores, on the
 * CUDA device local rank mod visible devices, then the launch checks that
 * compare every rank's binary, arguments and devices. */
static void make_backend(tb_train_run *r) {
    const tb_train_flags *f = &r->fl;
    tb_core_row *cpus = tb_launch_cpu_rows(&r->info); /* on every rank: a collective */
    r->host_cpus = tb_host_cpus();
    r->threads = f->threads ? f->threads : tb_core_default_threads(cpus, r->info.world, r->info.rank, r->host_cpus);
    r->device = tb_launch_pick_device(&r->info, f->backend, &r->ndev);
    tb_backend_opts bo = {.threads = r->threads,
                          .local_rank = r->info.local_rank,
                          .device = r->device >= 0 ? r->device : 0,
                          .deterministic = f->deterministic,
                          .no_autotune = f->no_autotune,
                          .workspace_limit = (size_t)f->workspace_mb << 20,
                          .plan_cache = f->plan_cache};
    tb_precision_backend_opts(r->prec, &bo);
    char err[512];
    r->be = tb_backend_create(f->backend, &bo, err, sizeof err);
    if (!r->be) tb_die("train: %s", err);
    if (strcmp(r->be->name, "cuda") != 0) r->device = -1, r->ndev = 0;
    if (r->prec_auto) r->prec = tb_precision_default(r->be);
    if (r->prec == TB_PREC_TF32 && strcmp(r->be->name, "cuda") != 0)
        tb_die("train: --precision tf32 needs the CUDA backend (TF32 is a tensor-core format); "
               "use fp32 on %s", r->be->name);
    snprintf(r->fl.precision, sizeof r->fl.precision, "%s", tb_precision_name(r->prec));
    if (r->be->threads > 0) r->threads = r->be->threads; /* what runs: at most the CPUs this rank may use */
    /* start-up's host loops (the synthetic pool, the initial weights) on the
     * same share: 8 ranks of a node would otherwise each take every core */
    omp_set_num_threads(r->threads);
    tb_launch_check_ranks(&r->info, r->be, r->ndev, r->device, f->share_gpu, "train", r->argc, r->argv);
    r->ranks_per_gpu = f->share_gpu && r->info.world > 1 ? tb_launch_ranks_per_device(&r->info, r->be) : 1;
    r->devices = calloc((size_t)r->info.world, TB_DEVICE_NAME_MAX);
    if (!r->devices) TB_FATAL("out of host memory");
    tb_comm_allgather(r->world, r->be->device, r->devices, TB_DEVICE_NAME_MAX); /* device_names, mixed_devices */
    r->cpus_shared = tb_launch_core_sharing(&r->info, cpus, r->threads, r->shared_cpus, sizeof r->shared_cpus);
    free(cpus);
    if (strcmp(r->be->name, "cpu") != 0) { /* the GPU computes: the host's CPUs aside */
        r->cpus_shared = -1;
        snprintf(r->shared_cpus, sizeof r->shared_cpus, "not checked (%s backend)", r->be->name);
    }
}

/* The gradient path (trainer.h) from --comm, the backend and the world;
 * every rank decides alike, so a refusal is one line on every rank. */
static void choose_comm(tb_train_run *r) {
    const tb_train_flags *f = &r->fl;
    int cuda = strcmp(r->be->name, "cuda") == 0, nccl_req = strcmp(f->comm, "nccl") == 0;
    int mpi_req = strcmp(f->comm, "mpi") == 0, bf16 = strcmp(f->allreduce_dtype, "bf16") == 0;
    const char *path; /* a row of comm/grad_transport.h */
    if (!cuda) {
        if (nccl_req)
            tb_train_die_together(r, "--comm nccl needs the CUDA backend (NCCL moves device buffers); the %s "
                                     "backend all-reduces host buffers over MPI: use --comm mpi or auto",
                                  r->be->name);
        if (bf16)
            tb_train_die_together(r, "--allreduce-dtype bf16 is the GPU gradient path's compression hook; the %s "
                                     "backend all-reduces float32 host buffers",
                                  r->be->name);
        if (f->share_gpu) tb_train_die_together(r, "--share-gpu is for the CUDA backend");
        path = "mpi-host";
    } else if (nccl_req || (!mpi_req && tb_nccl_built())) {
        if (!tb_nccl_built())
            tb_train_die_together(r, "--comm nccl: this trainbench was built without NCCL (configure with NCCL, "
                                     "NCCL_ROOT); use --comm mpi");
        path = "nccl";
    } else {
        path = "mpi-staged";
    }
    int explicit_path = nccl_req || mpi_req;
    r->hp = (tb_train_hparams){
        .momentum = f->momentum,
        .weight_decay = f->weight_decay,
        .label_smoothing = f->label_smoothing,
        .nesterov = f->nesterov,
        .no_bn_decay = f->no_bn_decay,
        .bucket_bytes = (size_t)(f->bucket_mb * 1048576.0),
        .overlap = !f->no_overlap,
        .bn_broadcast = strcmp(f->broadcast_buffers, "off") != 0,
        .transport = path,
        .transport_on_one_rank = explicit_path,
        .first_bucket_bytes = (size_t)(f->first_bucket_mb * 1048576.0),
        .bf16_allreduce = bf16,
        .device = r->device,
        .timeout_s = f->timeout,
        .async = strcmp(f->step_mode, "async") == 0 || (cuda && strcmp(f->step_mode, "sync") != 0),
        .cuda_graph = strcmp(f->cuda_graph, "off") != 0,
        .graph_warmup = f->graph_warmup,
    };
    if (cuda && strcmp(f->step_mode, "sync") == 0)
        tb_train_die_together(r, "--step-mode sync is the CPU backend's; CUDA steps are asynchronous");
    if (r->hp.async && f->trace[0] && r->info.rank == 0)
        tb_warn("--trace records the synchronous step's host-clock phases; the asynchronous step's phases come "
                "from device events and are in the results file's /steps, not in the trace");
    if (strcmp(path, "nccl") == 0 && (r->info.world > 1 || explicit_path)) {
        if (f->share_gpu) tb_launch_check_share_gpu_nccl(&r->info, "train");
        tb_monitor_progress(r->mon, 0, "NCCL communicator set-up", 1);
        r->nccl = tb_nccl_create(r->world, r->device, f->timeout);
    }
}

/* GPU-Util and SM activity of this rank's device, sampled on a thread,
 * matched to the CUDA device by PCI bus id. Optional: a machine without
 * NVML gets one warning and no utilisation column. */
static void start_nvml(tb_train_run *r) {
    if (strncmp(r->be->device_key, "gpu:", 4) != 0) return;
    char err[256];
    r->nvml = tb_nvml_open(err, sizeof err);
    tb_nvml_dev *d = r->nvml ? tb_nvml_device(r->nvml, r->be->device_key + 4, err, sizeof err) : NULL;
    if (!d) {
        if (r->info.rank == 0) tb_warn("NVML: %s; the scaling table has no GPU utilisation", err);
        return;
    }
    r->util = tb_nvml_sampler_start(d, 0.05);
}

/* The batch source (a synthetic run makes its sample pool here). */
static void make_source(tb_train_run *r) {
    r->cfg.classes = r->classes;
    r->src = tb_train_source(&r->fl, &r->d, r->classes, r->info.rank, r->info.world, TB_USE_TRAIN, r->be);
    r->image = tb_source_image_size(r->src);
    /* a batch file's images are trained at their own size: an --image-size other than the default asked for
     * another (one given equal to the default cannot be told apart from none) */
    if (r->fl.batch_file[0] && r->fl.image != TB_TRAIN_IMAGE_DEFAULT && r->fl.image != r->image)
        tb_train_die_together(r, "--image-size %d does not apply to --batch-file '%s', whose images are %dx%d "
                              "and are trained at that size; drop --image-size",
                              r->fl.image, r->fl.batch_file, r->image, r->image);
    tb_train_warn_loader_cpus(r);
}

/* The model on the backend, with its plans (--plan-cache). */
static void make_model(tb_train_run *r) {
    const tb_train_flags *f = &r->fl;
    tb_model_opts mo = tb_model_opts_for(r->prec);
    if (tb_fuse_parse(f->no_fuse ? "off" : f->fuse, &mo.fuse) != 0)
        tb_die("train: --fuse %s is not auto, fastest, graph, bn or off", f->fuse);
    if (strcmp(f->layout, "nchw") == 0) mo.layout = TB_NCHW;
    if (strcmp(f->layout, "nhwc") == 0) mo.layout = TB_NHWC;
    if (f->loss_scale > 0) mo.loss_scaling.init_scale = f->loss_scale;
    mo.loss_scaling.growth_interval = f->loss_scale_growth;
    double t0 = tb_now();
    r->m = tb_model_create(&r->cfg, r->be, f->batch, r->image, r->image, &mo);
    r->model_s = tb_now() - t0;
}

/* The source feeds the model: CUDA takes uint8 batches from pinned slots
 * (src/feed/batch_upload.h) and uploads a resident synthetic pool here. */
static void feed_model(tb_train_run *r) {
    tb_source_feed(r->src, r->m);
    tb_train_check_epoch_plan(r);
}

/* The weights: seeded init, then --init or --resume's checkpoint on rank 0,
 * checked against this run (one line on every rank when it does not fit),
 * and where the run starts, broadcast. */
static void init_model(tb_train_run *r) {
    const tb_train_flags *f = &r->fl;
    tb_model_init(r->m, (uint64_t)f->seed);
    memset(r->start, 0, sizeof r->start);
    r->ckpt_step = -1;
    const char *from = f->init[0] ? f->init : (f->resume && access(f->ckpt, F_OK) == 0) ? f->ckpt : NULL;
    char why[VERDICT_MAX] = "", kept[4200] = "", other_run[1400] = "";
    if (r->info.rank == 0) {
        tb_ckpt_meta meta;
        if (from) {
            tb_ckpt_read_meta(from, &meta);
            tb_train_check_checkpoint(r, from, &meta, why, sizeof why);
        }
        if (from && !why[0]) {
            tb_ckpt_load(from, r->m);
            if (f->resume) {
                r->start[0] = r->ckpt_step = meta.step;
                r->start[1] = meta.epoch;
                r->start[2] = meta.epoch_step;
                tb_train_resume_notes(r, &meta, other_run, sizeof other_run);
                tb_train_resume_scaler(r, &meta, other_run, sizeof other_run);
            }
        }
        if (f->resume && !why[0]) tb_train_keep_earlier_results(r, r->start[0], kept, sizeof kept, why, sizeof why);
        if (!why[0]) { /* the earlier results file is kept (or there was none) */
            atomic_store(&r->abort_ctx.report, &r->report); /* a failure may write the results file now */
            if (f->resume) tb_train_abort_mark_start(r);     /* so may an error's mark (train_signals.c) */
        }
    }
    verdict_from_rank0(r, why);
    int64_t at[4] = {r->start[0], r->start[1], r->start[2], r->ckpt_step};
    tb_comm_bcast(r->world, at, 4, TB_INT64, 0);
    memcpy(r->start, at, sizeof r->start);
    r->ckpt_step = at[3];
    if (f->resume && r->info.rank == 0) {
        if (from)
            printf("# resuming from %s at step %lld (epoch %lld, %lld steps into it)\n", from,
                   (long long)r->start[0], (long long)r->start[1], (long long)r->start[2]);
        else
            printf("# --resume: no checkpoint at %s yet; starting at step 0\n", f->ckpt);
        if (kept[0]) printf("# --resume: the earlier results file %s is kept as %s\n", f->results, kept);
        fputs(other_run, stdout);
    }
}

/* The trainer (every rank now holds rank 0's state) and the LR schedule. */
static void make_trainer(tb_train_run *r) {
    const tb_train_flags *f = &r->fl;
    r->tr = tb_trainer_create(r->m, r->world, r->nccl, &r->hp);
    tb_trainer_set_monitor(r->tr, r->mon);
    tb_monitor_progress(r->mon, r->start[0], "start-up broadcast", 1);
    tb_trainer_sync_state(r->tr);
    if (strcmp(f->cuda_graph, "on") == 0 && tb_trainer_graph_status(r->tr, NULL)[0])
        tb_train_die_together(r, "--cuda-graph on: the step cannot be captured: %s", tb_trainer_graph_status(r->tr, NULL));

    r->steps_per_epoch = tb_source_steps(r->src);
    if (r->start[2] > r->steps_per_epoch)
        tb_train_die_together(r,
                              "the checkpoint is %lld steps into epoch %lld but an epoch now has %lld steps: "
                              "resume with the --batch-size, --last-batch, data and rank count of the run that "
                              "wrote it",
                              (long long)r->start[2], (long long)r->start[1], (long long)r->steps_per_epoch);
    r->total = tb_train_planned_steps(r);
    r->global_batch = f->batch * r->info.world;
    tb_lr_schedule_init(&r->sched, f->lr_schedule, f->lr, r->global_batch, f->lr_base_batch,
                        f->lr_warmup_steps, r->total, r->steps_per_epoch);
    r->dataset_size = (double)tb_source_epoch_size(r->src);
    r->gflop = 3.0 * 2.0 * tb_resnet_forward_macs(&r->m->g, &r->m->pt) * 1e-9;
}

/* The run's settings as results-file attributes (rank 0, under the report
 * lock: the watchdog may write the file from its thread at any moment). */
static void record_settings(tb_train_run *r) {
    const tb_train_flags *f = &r->fl;
    /* begun and the settings under one lock: a writer waiting for it then
     * finds them all (the abort mark, the watchdog) */
    tb_run_report_lock(&r->report);
    if (!tb_run_report_begin(&r->report)) { /* a signal ended start-up: its thread ends the process */
        tb_run_report_unlock(&r->report);
        tb_log_park();
    }
    tb_provenance_fill(&r->report.attrs, "train", r->argc, r->argv, r->be, r->info.world, r->hosts, r->devices);
    tb_attrs *a = &r->report.attrs;
    tb_attrs_str(a, "start_time", r->t_start);
    tb_attrs_str(a, "status", "running");
    tb_attrs_str(a, "kind", "train");
    tb_attrs_str(a, "model", r->cfg.name);
    tb_attrs_int(a, "classes", r->classes);
    tb_attrs_str(a, "precision", f->precision);
    if (r->m->loss_scaling) {
        double init = f->loss_scale > 0 ? f->loss_scale : tb_model_opts_for(r->prec).loss_scaling.init_scale;
        tb_attrs_num(a, "loss_scale_init", init);
        tb_attrs_int(a, "loss_scale_growth", f->loss_scale_growth);
    }
    tb_attrs_str(a, "layout", tb_layout_name(r->m->g.layout));
    tb_attrs_int(a, "batch_size", f->batch);
    tb_attrs_int(a, "global_batch", r->global_batch);
    tb_attrs_int(a, "image_size", r->image);
    tb_attrs_int(a, "seed", f->seed);
    tb_attrs_str(a, "data", f->batch_file[0] ? f->batch_file : f->data[0] ? f->data : "synthetic");
    tb_attrs_num(a, "dataset_size", r->dataset_size);
    int64_t trained = tb_source_epoch_trained(r->src), n_all = tb_source_epoch_size(r->src);
    tb_attrs_str(a, "last_batch", tb_last_batch_name(tb_source_last_batch(r->src)));
    tb_attrs_str(a, "decode", f->data[0] ? f->decode : "-"); /* JPEG decode path (--decode) */
    /* synthetic / batch-file data in device memory, gathered there (--resident) */
    tb_attrs_int(a, "resident_data_bytes", tb_source_resident_bytes(r->src));
    tb_attrs_int(a, "epoch_samples_trained", trained);
    tb_attrs_int(a, "epoch_samples_dropped", trained < n_all ? n_all - trained : 0);
    tb_attrs_int(a, "epoch_samples_padded", trained > n_all ? trained - n_all : 0);
    tb_attrs_int(a, "warmup_steps", f->warmup);
    tb_attrs_int(a, "threads_per_rank", r->threads);
    tb_attrs_int(a, "resumed_from_step", r->start[0]);
    tb_attrs_num(a, "timeout_s", f->timeout);
    tb_attrs_int(a, "scaling_steps", f->scaling_steps);
    tb_attrs_num(a, "scaling_min_seconds", tb_train_scaling_min_s(r)); /* rows ran on until this long */
    tb_attrs_str(a, "device_util_source", r->util ? "NVML GPU-Util (and GPM SM activity where supported), mean over the timed steps" : tb_scaling_util_label(r->be->name));
    tb_attrs_str(a, "comm_path", tb_trainer_transport_name(r->tr));
    tb_attrs_str(a, "allreduce_dtype", f->allreduce_dtype);
    tb_attrs_num(a, "bucket_mb", f->bucket_mb);
    tb_attrs_num(a, "first_bucket_mb", f->first_bucket_mb);
    tb_attrs_int(a, "overlap", !f->no_overlap);
    tb_attrs_int(a, "broadcast_buffers", r->hp.bn_broadcast);
    const char *gwhy = tb_trainer_graph_status(r->tr, NULL);
    char graph[256];
    snprintf(graph, sizeof graph, "%s%s", gwhy[0] ? "off: " : "on", gwhy);
    tb_attrs_str(a, "cuda_graph", graph);
    tb_attrs_str(a, "step_mode", r->hp.async ? "async" : "sync");
    char shared[200] = "no (one rank per device)";
    if (r->ranks_per_gpu > 1)
        snprintf(shared, sizeof shared, "%d ranks share one GPU (--share-gpu): the multi-rank rows time-slice one "
                 "device, they are not N GPUs", r->ranks_per_gpu);
    tb_attrs_str(a, "shared_gpu", shared);
    tb_attrs_str(a, "shared_cpus", r->cpus_shared ? r->shared_cpus : "no (every rank's threads on CPUs of its own)");
    tb_run_report_unlock(&r->report);
}

/* A job on more than one kind of device (two GPU models, or CPU ranks
 * with different thread counts): every step waits for the slowest rank, so
 * the scaling rows measure that rank, not the model on the others. */
static void mixed_devices(const tb_train_run *r) {
    char buf[1024];
    if (tb_provenance_distinct(buf, sizeof buf, r->devices, TB_DEVICE_NAME_MAX, r->info.world, 0) < 2) return;
    printf("# devices differ between ranks: %s; every step waits for the slowest, so the scaling rows measure "
           "it (one model per job for a clean table)\n",
           buf);
}

/* The run header (rank 0). */
static void print_header(const tb_train_run *r) {
    const tb_train_flags *f = &r->fl;
    int w = r->info.world;
    printf("# trainbench train: %s, %d classes, %d rank%s, backend %s (%d thread%s/rank), %s\n", r->cfg.name,
           r->classes, w, w > 1 ? "s" : "", r->be->name, r->threads, r->threads > 1 ? "s" : "", f->precision);
    if (strcmp(r->be->name, "cpu") == 0) {
        const tb_cpu_features *cf = tb_cpu_features_get();
        char units[192], blas[256];
        tb_cpu_features_str(cf, units, sizeof units);
        tb_cpu_blas_summary(blas, sizeof blas);
        printf("# cpu: %s (level %s); BLAS: %s\n", units, tb_cpu_isa_name(tb_cpu_isa_best(cf)), blas);
        const char *note = tb_cpu_blas_info_get()->note;
        if (note[0]) printf("# BLAS choice: %s\n", note);
        if (r->cpus_shared > 0)
            printf("# CPUs shared: %s; the ranks time-slice them, so the multi-rank rows measure that as well as "
                   "scaling (fewer ranks per host, or fewer --threads)\n",
                   r->shared_cpus);
    }
    mixed_devices(r);
    printf("# data: %s, %.0f samples/epoch, %lld steps/epoch; batch %d/rank (global %d), %dx%d\n",
           f->batch_file[0] ? f->batch_file : f->data[0] ? f->data : "synthetic", r->dataset_size,
           (long long)r->steps_per_epoch, f->batch, r->global_batch, r->image, r->image);
    int64_t res = tb_source_resident_bytes(r->src);
    if (res > 0)
        printf("# data resident on the device (--resident): %.0f MiB uploaded once, each batch gathered there "
               "(no per-step upload)\n",
               (double)res / 1048576.0);
    tb_train_print_epoch_plan(r);
    printf("# lr %s peak %.4g (base %.4g x %d/%d), warm-up %d steps; momentum %g%s, wd %g%s, "
           "smoothing %g; buckets %g MiB (first %g), overlap %s%s; watchdog %s\n",
           f->lr_schedule, r->sched.peak, f->lr, r->global_batch, f->lr_base_batch, f->lr_warmup_steps,
           f->momentum, f->nesterov ? " (Nesterov)" : "", f->weight_decay, f->no_bn_decay ? " (not on BN/bias)" : "",
           f->label_smoothing, f->bucket_mb,
           f->first_bucket_mb > 0 && f->first_bucket_mb < f->bucket_mb ? f->first_bucket_mb : f->bucket_mb,
           f->no_overlap ? "off" : "on", r->hp.bn_broadcast ? "" : ", BN statistics not broadcast per step",
           r->mon ? "on" : "off");
    const tb_transport_row *path = tb_trainer_transport(r->tr);
    if (path && path->on_device) {
        int c = 0, l = 0;
        tb_nccl_versions(&c, &l);
        int major, minor, patch;
        tb_nccl_version_parts(l, &major, &minor, &patch);
        char nv[48] = "";
        if (path->device_queued) snprintf(nv, sizeof nv, " (NCCL %d.%d.%d)", major, minor, patch);
        const char *gwhy = tb_trainer_graph_status(r->tr, NULL);
        printf("# gradients: %s%s on device %d, %s on the wire; steps %s; CUDA graph %s%s\n",
               path->name, nv, r->device,
               r->hp.bf16_allreduce ? "bfloat16" : "float32", r->hp.async ? "asynchronous" : "synchronous",
               gwhy[0] ? "off: " : "on after --graph-warmup steps", gwhy);
    } else if (r->be->native_stream(r->be, NULL)) {
        const char *gwhy = tb_trainer_graph_status(r->tr, NULL);
        printf("# steps asynchronous on device %d; CUDA graph %s%s\n", r->device,
               gwhy[0] ? "off: " : "on after --graph-warmup steps", gwhy);
    }
    printf("# %zu parameters, %.2f GFLOP per image per step, activations %.0f MiB/rank\n", r->m->pt.n_train,
           r->gflop, r->m->g.act_arena_bytes / 1048576.0);
    if (!f->data[0] && !f->batch_file[0] && r->classes != 1000) /* synthetic: the head is --classes wide */
        printf("# trained: %s with a %d-class head (%zu parameters), the synthetic data's --classes; ImageNet's "
               "model is --classes 1000\n",
               r->cfg.name, r->classes, r->m->pt.n_train);
    fflush(stdout);
}

/* The trainer, then rank 0's settings record and header. */
static void make_trainer_and_header(tb_train_run *r) {
    make_trainer(r);
    tb_train_check_host_memory(r); /* every rank has its weights now: what is left is the first step's */
    if (r->info.rank == 0) {
        record_settings(r);
        print_header(r);
    }
}

const char *const tb_setup_part_name[TB_SETUP_PARTS] = {"bootstrap", "data", "device", "communicator+nvml",
                                                        "source",    "model",  "feed",
                                                        "init",      "trainer+header"};

void tb_train_setup(tb_train_run *r) {
    double t = r->t_setup = tb_now(), u;
#define TB_PART(i, call) (call, u = tb_now(), r->setup_s[i] = u - t, t = u)
    TB_PART(0, bootstrap(r));
    TB_PART(1, tb_train_open_data(r));
    TB_PART(2, make_backend(r));
    TB_PART(3, (choose_comm(r), start_nvml(r)));
    TB_PART(4, make_source(r));
    TB_PART(5, make_model(r));
    TB_PART(6, feed_model(r));
    TB_PART(7, init_model(r));
    TB_PART(8, make_trainer_and_header(r));
#undef TB_PART
    if (strcmp(r->be->name, "cpu") == 0) tb_cpu_blas_address_check(r->threads, "train"); /* the workers' buffers */
    r->t_ready = t;
}

void tb_train_teardown(tb_train_run *r) {
    tb_train_signals_stop();
    tb_train_abort_mark_stop(r);
    /* another thread is ending the process (the end guard fired during the
     * final results write): its abort mark may be using the report */
    tb_log_park_if_ending();
    tb_run_report_free(&r->report);
    free(r->hosts);
    free(r->devices);
    tb_nvml_sampler_stop(r->util);
    tb_nvml_close(r->nvml);
    tb_nccl_destroy(r->nccl);
    tb_model_destroy(r->m);
    r->be->destroy(r->be);
    if (r->d.have_train_ds) tb_dataset_close(&r->d.train_ds);
    if (r->d.have_val_ds) tb_dataset_close(&r->d.val_ds);
    tb_comm_finalize();
    tb_stall_guard_disarm(); /* armed at the end of tb_train_report */
}
