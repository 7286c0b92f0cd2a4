/* cmd_loader_feed.c - `trainbench loader-bench --feed`: the JPEG loader
 * feeding real training steps, one row per loader configuration (threads x
 * prefetch x pinned, or --rows, which may hold a `resident` row: the same
 * step on data in device memory), with the seeds' columns (GPU idle %, the
 * share of the step spent waiting for data, img/s, ms per batch), the
 * step's own time, the row's CPU budget (cores used, img/s per core), the
 * loader's stages and, with --decode gpu, its GPU stage
 * (src/cmd/loader_feed.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/cli.h"
#include "core/log.h"
#include "data/dataset.h"
#include "data/gpu_decode.h"
#include "data/jpeg.h"
#include "src/cmd/commands.h"
#include "src/cmd/loader_bench_args.h"
#include "src/cmd/loader_feed.h"
#include "src/device/device.h"
#include "src/feed/feed.h"
#include "src/results/results.h"

#define MAX_ROWS 256

typedef struct {
    char data[TB_OPT_STR_MAX], threads[TB_OPT_STR_MAX], prefetch[TB_OPT_STR_MAX], pinned[TB_OPT_STR_MAX];
    char backend[TB_OPT_STR_MAX], model[TB_OPT_STR_MAX], precision[TB_OPT_STR_MAX], decode[TB_OPT_STR_MAX];
    char results[TB_OPT_STR_MAX], rows[TB_OPT_STR_MAX], nvjpeg[TB_OPT_STR_MAX], timeline[TB_OPT_STR_MAX];
    char step_mode[TB_OPT_STR_MAX];
    int feed, batch, size, steps, warmup, seed, compute_threads, strict, decode_streams;
    double lr, min_row;
    tb_feed_config rowv[MAX_ROWS];
    tb_decode_mode mode;         /* --decode, parsed */
    tb_decode_mode rowd[MAX_ROWS];
    int nrows, any_gpu;
} feed_args;

static void parse_args(int argc, char **argv, feed_args *a) {
    memset(a, 0, sizeof *a);
    snprintf(a->threads, sizeof a->threads, "0,1,2,4,8,16");
    snprintf(a->prefetch, sizeof a->prefetch, "2,4");
    snprintf(a->pinned, sizeof a->pinned, "on,off");
    snprintf(a->backend, sizeof a->backend, "auto");
    snprintf(a->model, sizeof a->model, "resnet50");
    snprintf(a->precision, sizeof a->precision, "auto");
    snprintf(a->decode, sizeof a->decode, "fast");
    snprintf(a->step_mode, sizeof a->step_mode, "auto");
    a->batch = 64, a->size = 224, a->steps = 20, a->warmup = 3, a->seed = 1, a->lr = 0.01;
    a->min_row = -1; /* --min-row-seconds; -1: 1.25 x NVML's longest period with NVML, else 0 */
    const tb_opt opts[] = {
        {.name = "feed", .kind = TB_OPT_FLAG, .dst = &a->feed, .help = "this mode: the loader feeding training steps"},
        {.name = "data", .kind = TB_OPT_STRING, .dst = a->data,
         .help = "ImageFolder directory or 'PATH LABEL' list file"},
        {.name = "threads", .kind = TB_OPT_STRING, .dst = a->threads,
         .help = "loader worker threads per row, a list; 0: the main thread decodes"},
        {.name = "prefetch", .kind = TB_OPT_STRING, .dst = a->prefetch,
         .help = "batch slots per row, a list (each >= 2)"},
        {.name = "pinned", .kind = TB_OPT_STRING, .dst = a->pinned,
         .help = "on,off: slots in pinned memory with asynchronous copies, or pageable"},
        {.name = "rows", .kind = TB_OPT_STRING, .dst = a->rows,
         .help = "explicit rows THREADS:PREFETCH:on|off[:DECODE[:STREAMS[:NVJPEG]]],... (NVJPEG: that row's --nvjpeg, "
                 "KEY=VALUE joined by '+') or `resident` (the same step on data in device memory) instead of the "
                 "product of the three lists"},
        {.name = "batch-size", .kind = TB_OPT_INT, .dst = &a->batch, .min = 1, .max = 1 << 16,
         .help = "samples per step"},
        {.name = "image-size", .kind = TB_OPT_INT, .dst = &a->size, .min = 32, .max = 8192, .help = "training side S"},
        {.name = "steps", .kind = TB_OPT_INT, .dst = &a->steps, .min = 1, .max = 1 << 30, .help = "timed steps per row"},
        {.name = "warmup", .kind = TB_OPT_INT, .dst = &a->warmup, .max = 1 << 20, .help = "untimed steps per row first"},
        {.name = "min-row-seconds", .kind = TB_OPT_DOUBLE, .dst = &a->min_row, .min = -1, .max = 3600,
         .help = "more timed steps than --steps until a row lasts this long (default: 1.25 s where NVML measures "
                 "the GPU, whose GPU-Util needs a window of 1 s; else 0)"},
        {.name = "backend", .kind = TB_OPT_CHOICE, .dst = a->backend, .choices = "cpu|cuda|auto",
         .help = "compute backend"},
        {.name = "model", .kind = TB_OPT_STRING, .dst = a->model, .help = "resnet18 .. resnet152"},
        {.name = "precision", .kind = TB_OPT_CHOICE, .dst = a->precision, .choices = "auto|fp32|tf32|bf16|fp16",
         .help = "compute precision (auto: bf16 on CUDA, fp32 on the CPU)"},
        {.name = "decode", .kind = TB_OPT_CHOICE, .dst = a->decode, .choices = TB_DECODE_CHOICES,
         .help = "how much of each JPEG the CPU decodes; gpu: nvJPEG on the device (CUDA backend)"},
        {.name = "decode-streams", .kind = TB_OPT_INT, .dst = &a->decode_streams, .max = 16,
         .help = "--decode gpu: batches decoded on the GPU at once, each on its own thread, nvJPEG state and CUDA "
                 "stream (0: 2; 1 with threads 0)"},
        {.name = "nvjpeg", .kind = TB_OPT_STRING, .dst = a->nvjpeg,
         .help = "--decode gpu: backend=auto|hardware|hybrid,roi=on|off,priority=high|default,chunk=N,sync=on|off,"
                 "inflight=N,alloc=pool|nvjpeg,sort=on|off,cpu=PCT (that share of each batch on the loader threads),"
                 "barrier=on|off,stall=MS (tests),wait=auto|spin|yield|block (how host threads wait for the GPU)"},
        {.name = "timeline", .kind = TB_OPT_STRING, .dst = a->timeline,
         .help = "write each loader row's stage timeline as a Chrome trace, FILE.rowK.json"},
        {.name = "lr", .kind = TB_OPT_DOUBLE, .dst = &a->lr, .min = 0, .max = 100, .help = "SGD learning rate"},
        {.name = "seed", .kind = TB_OPT_INT, .dst = &a->seed, .max = 2147483647, .help = "init, shuffle, augmentation"},
        {.name = "compute-threads", .kind = TB_OPT_INT, .dst = &a->compute_threads, .max = 4096,
         .help = "CPU backend threads (0: all cores)"},
        {.name = "strict-data", .kind = TB_OPT_FLAG, .dst = &a->strict, .help = "a bad file ends the run"},
        {.name = "step-mode", .kind = TB_OPT_CHOICE, .dst = a->step_mode, .choices = "auto|sync|async",
         .help = "as train's: auto is asynchronous on CUDA (a CUDA graph after the warm-up), synchronous on the CPU; "
                 "async on the CPU tests that path"},
        {.name = "results", .kind = TB_OPT_STRING, .dst = a->results,
         .help = "also write the table (group /feed) and provenance to this HDF5 file"},
        {.name = NULL},
    };
    tb_cli_parse("loader-bench", "trainbench loader-bench --feed --data DIR [--threads 0,1,2,4,8,16] [options]", argc,
                 argv, opts);
    tb_cli_require("loader-bench", "data", a->data);
    if (tb_decode_parse(a->decode, &a->mode) != 0) tb_die("loader-bench --feed: --decode '%s' is unknown", a->decode);
    const char *in_flag[1] = {"--data"}, *in_path[1] = {a->data}; /* a list file */
    tb_output_not_input("loader-bench --feed", "--results", a->results, in_flag, in_path, 1);
    tb_output_path_require("loader-bench --feed", a->results, TB_OUT_RESULTS, "results file", "--results");
}

/* The rows: --rows, else the product of --threads, --prefetch, --pinned. */
static void make_rows(feed_args *a) {
    int tl[64], pl[16], nl[2];
    int nt = tb_bench_int_list(a->threads, 0, tl, 64), np = tb_bench_int_list(a->prefetch, 2, pl, 16);
    int nn = tb_bench_onoff_list(a->pinned, nl, 2);
    if (nt <= 0)
        tb_die("loader-bench --feed: --threads expects a list like 0,1,2,4 (each 0..1024), got '%s'", a->threads);
    if (np <= 0)
        tb_die("loader-bench --feed: --prefetch expects a list like 2,4 (each 2..1024), got '%s'", a->prefetch);
    if (nn <= 0) tb_die("loader-bench --feed: --pinned expects on, off or on,off, got '%s'", a->pinned);
    tb_decode_mode def = a->mode;
    a->nrows = 0;
    if (a->rows[0]) {
        a->nrows = tb_bench_rows(a->rows, a->rowv, a->rowd, def, a->decode_streams, MAX_ROWS);
        if (a->nrows <= 0)
            tb_die("loader-bench --feed: --rows expects THREADS:PREFETCH:on|off[:DECODE[:STREAMS]],... (or `resident`: "
                   "the same step on data in device memory; prefetch >= 2; decode " TB_DECODE_CHOICES "; "
                   "streams 0..16), got '%s'",
                   a->rows);
    } else {
        for (int i = 0; i < nt; i++)
            for (int j = 0; j < np; j++)
                for (int k = 0; k < nn && a->nrows < MAX_ROWS; k++) {
                    memset(&a->rowv[a->nrows], 0, sizeof a->rowv[a->nrows]);
                    a->rowv[a->nrows].threads = tl[i];
                    a->rowv[a->nrows].prefetch = pl[j];
                    a->rowv[a->nrows].pinned = nl[k];
                    a->rowv[a->nrows].decode_streams = a->decode_streams;
                    a->rowd[a->nrows++] = def;
                }
    }
    for (int i = 0; i < a->nrows; i++) a->any_gpu |= a->rowd[i] == TB_DECODE_GPU && !a->rowv[i].resident;
    /* the --nvjpeg choices, the call's and each row's, named now rather than at their row */
    char err[600];
    tb_gpu_decoder_opts go = tb_gpu_decoder_defaults(-1, 1, 1);
    if (tb_gpu_decoder_parse(a->nvjpeg, &go, err, sizeof err) != 0) tb_die("loader-bench --feed: %s", err);
    for (int i = 0; i < a->nrows; i++)
        if (a->rowv[i].nvjpeg[0] && tb_gpu_decoder_parse(a->rowv[i].nvjpeg, &go, err, sizeof err) != 0)
            tb_die("loader-bench --feed: --rows, row %d: %s", i + 1, err);
    /* each row's timeline file, written after its row: checked now, so that a bad path loses no measurement */
    const char *in_flag[1] = {"--data"}, *in_path[1] = {a->data};
    for (int i = 0; a->timeline[0] && i < a->nrows; i++) {
        char path[TB_OPT_STR_MAX + 32];
        tb_feed_row_path(path, sizeof path, a->timeline, i);
        tb_output_not_input("loader-bench --feed", "--timeline", path, in_flag, in_path, 1);
        tb_output_not_same("loader-bench --feed", "--results", a->results, "--timeline", path);
        tb_output_path_require("loader-bench --feed", path, TB_OUT_TEXT, "stage timeline", "--timeline");
    }
}

/* The backend and the model (ResNet on ds's classes), initialised; dies with one line on a bad choice. */
static tb_model *make_model(const feed_args *a, const tb_dataset *ds, tb_precision *prec_out) {
    char err[1024];
    tb_precision prec = TB_PREC_FP32;
    int prec_auto = strcmp(a->precision, "auto") == 0;
    if (!prec_auto && tb_precision_parse(a->precision, &prec) != 0)
        tb_die("loader-bench --feed: --precision %s is not available in this build", a->precision);
    tb_backend_opts bo = {.threads = a->compute_threads};
    tb_precision_backend_opts(prec, &bo);
    tb_backend *be = tb_backend_create(a->backend, &bo, err, sizeof err);
    if (!be) tb_die("loader-bench --feed: %s", err);
    if (prec_auto) prec = tb_precision_default(be);
    if (prec == TB_PREC_TF32 && strcmp(be->name, "cuda") != 0)
        tb_die("loader-bench --feed: --precision tf32 needs the CUDA backend; use fp32 on %s", be->name);
    if (a->any_gpu && strcmp(be->name, "cuda") != 0)
        tb_die("loader-bench --feed: --decode gpu decodes on the GPU the model trains on: it needs the CUDA backend "
               "(this run: %s)", be->name);
    tb_resnet_config cfg;
    if (tb_resnet_config_init(&cfg, a->model, ds->classes) != 0)
        tb_die("loader-bench --feed: unknown --model '%s'; known: %s", a->model, tb_resnet_known_names());
    tb_model_opts mo = tb_model_opts_for(prec);
    tb_model *m = tb_model_create(&cfg, be, a->batch, a->size, a->size, &mo);
    const char *degenerate = tb_model_degenerate_bn(m, a->batch);
    if (degenerate) { /* the name outlives the model, which goes before the error ends the process */
        char layer[128];
        snprintf(layer, sizeof layer, "%s", degenerate);
        tb_model_destroy(m);
        be->destroy(be);
        tb_die("loader-bench --feed: a batch of %d at %dx%d leaves one value per channel in %s, which BatchNorm "
               "in training cannot normalise; raise --batch-size or --image-size",
               a->batch, a->size, a->size, layer);
    }
    tb_model_init(m, (uint64_t)a->seed);
    *prec_out = prec;
    return m;
}

/* NVML's GPU-Util on the device the backend runs on, or why not (dev_note). */
static tb_nvml_sampler *start_nvml(tb_backend *be, tb_nvml **nv, char *dev_note, size_t len) {
    char err[512] = "";
    *nv = NULL;
    if (strncmp(be->device_key, "gpu:", 4) != 0) {
        snprintf(dev_note, len, "not measured: the %s backend has no GPU", be->name);
        return NULL;
    }
    *nv = tb_nvml_open(err, sizeof err);
    tb_nvml_dev *d = *nv ? tb_nvml_device(*nv, be->device_key + 4, err, sizeof err) : NULL;
    tb_nvml_sampler *smp = d ? tb_nvml_sampler_start(d, 0.05) : NULL;
    if (smp)
        snprintf(dev_note, len,
                 "NVML GPU-Util sampled every 50 ms on %s (rows of 1 s or more: NVML's longest sample period)",
                 be->device_key + 4);
    else
        snprintf(dev_note, len, "not measured: %.400s", err);
    return smp;
}

#define FEED_COLS                                                                                                 \
    "threads:i,prefetch:i,pinned:i,gpu_decode:i,img_per_s,ms_per_batch,wait_pct,h2d_ms,step_ms,gpu_util_pct,"      \
    "gpu_idle_pct,sm_active_pct,decode_ms_per_img,lookahead_pct,images:i,skipped:i,gpu_decoded:i,gpu_to_cpu:i,"    \
    "gpu_stage_ms_per_batch,gpu_stage_busy_pct,gpu_stages:i,timed_steps:i,row_s,resident:i,cpu_cores,loader_cores," \
    "img_per_s_per_core,gpu_cpu_share:i"
#define FEED_NCOLS (28 + TB_STAGE_COUNT)

static void print_header(void) {
    printf("# %7s %8s %6s %8s %9s %9s %7s %7s %9s %9s %8s %8s %8s %6s %10s %7s %7s %6s %10s %9s\n", "threads",
           "prefetch", "pinned", "decode", "img/s", "ms/batch", "wait%", "h2d_ms", "GPU-util%", "GPU-idle%", "SM-act%",
           "step_ms", "stage_ms", "stage%", "dec_ms/img", "ahead%", "skipped", "cores", "img/s/core", "ldr_cores");
}

/* One row on the console and into the table. */
static void print_row(tb_table *tab, const tb_feed_config *c, tb_decode_mode d, const tb_feed_row *r) {
    char u[32], id[32], sa[32], gm[32], gb[32], dm[32], t[16], p[16];
    const char *dec = c->resident ? "resident" : d != TB_DECODE_GPU ? "cpu" : c->nvjpeg[0] ? "gpu*" : "gpu";
    snprintf(t, sizeof t, "%d", c->threads);
    snprintf(p, sizeof p, "%d", c->prefetch);
    printf("  %7s %8s %6s %8s %9.1f %9.2f %7.1f %7.2f %9s %9s %8s %8.2f %8s %6s %10s %7.0f %7lld %6.2f %10.1f %9.2f\n",
           c->resident ? "-" : t, c->resident ? "-" : p, c->resident ? "-" : c->pinned ? "on" : "off", dec,
           r->img_per_s, r->ms_per_batch, r->wait_pct, r->h2d_ms, tb_bench_num(u, sizeof u, r->gpu_util_pct, 1),
           tb_bench_num(id, sizeof id, r->gpu_idle_pct, 1), tb_bench_num(sa, sizeof sa, r->sm_active_pct, 1),
           r->step_ms, tb_bench_num(gm, sizeof gm, r->gpu_stage_ms, 2),
           tb_bench_num(gb, sizeof gb, r->gpu_stage_busy_pct, 0), tb_bench_num(dm, sizeof dm, r->decode_ms_per_img, 3),
           r->lookahead_pct, (long long)r->skipped, r->cores, r->img_per_s_per_core, r->loader_cores);
    if (c->resident)
        printf("#   %s\n", r->decoder);
    else
        tb_bench_print_stages(stdout, r->stage_ms);
    for (int k = 0; k < 3 && !c->resident && r->first_bad[k][0]; k++) printf("#   skipped %s\n", r->first_bad[k]);
    if (!c->resident && d == TB_DECODE_GPU && c->nvjpeg[0]) printf("#   gpu*: this row's --nvjpeg %s\n", c->nvjpeg);
    if (!c->resident && d == TB_DECODE_GPU)
        printf("#   %s: %lld timed samples decoded on the GPU, %lld by the CPU instead, %lld by the CPU's share (cpu=); "
               "%d GPU stage%s\n",
               r->decoder, (long long)r->gpu_decoded, (long long)r->gpu_to_cpu, (long long)r->gpu_cpu_share,
               r->gpu_stages, r->gpu_stages == 1 ? "" : "s");
    if (r->timeline[0]) printf("#   timeline of the row's loader stages: %s\n", r->timeline);
    fflush(stdout);
    double row[FEED_NCOLS] = {c->threads,        c->prefetch,      c->pinned,           !c->resident && d == TB_DECODE_GPU,
                              r->img_per_s,      r->ms_per_batch,  r->wait_pct,         r->h2d_ms,
                              r->step_ms,        r->gpu_util_pct,  r->gpu_idle_pct,     r->sm_active_pct,
                              r->decode_ms_per_img, r->lookahead_pct, (double)r->images, (double)r->skipped,
                              (double)r->gpu_decoded, (double)r->gpu_to_cpu, r->gpu_stage_ms, r->gpu_stage_busy_pct,
                              (double)r->gpu_stages, r->timed_steps, r->row_s, c->resident,
                              r->cores,          r->loader_cores,  r->img_per_s_per_core,
                              (double)r->gpu_cpu_share};
    for (int k = 0; k < TB_STAGE_COUNT; k++) row[28 + k] = r->stage_ms[k];
    tb_table_row(tab, row, c->nvjpeg[0] ? c->nvjpeg : "");
}

/* The results file with the rows measured so far (written atomically after
 * each row, so a row that ends the process leaves the ones before it):
 * status "complete" once rows_done is every row asked for, "aborted" until
 * then. */
static void write_results(const feed_args *a, int argc, char **argv, tb_backend *be, tb_precision prec,
                          const tb_dataset *ds, const char *t_start, const char *dev_note, const tb_table *tab,
                          int rows_done) {
    tb_attrs at;
    memset(&at, 0, sizeof at);
    char host[64] = "localhost", t_end[32];
    gethostname(host, sizeof host - 1);
    tb_utc_now(t_end, sizeof t_end);
    tb_attrs_str(&at, "kind", "loader-feed");
    tb_attrs_str(&at, "start_time", t_start);
    tb_attrs_str(&at, "end_time", t_end);
    tb_attrs_str(&at, "status", rows_done == a->nrows ? "complete" : "aborted");
    tb_attrs_int(&at, "rows_asked", a->nrows);
    tb_attrs_int(&at, "rows_measured", rows_done);
    /* versions, command line, host, backend, device, GPU and library
     * versions: as every results file of train */
    tb_provenance_fill(&at, "loader-bench", argc, argv, be, 1, host, NULL);
    tb_attrs_str(&at, "device_columns", dev_note);
    tb_attrs_str(&at, "model", a->model);
    tb_attrs_str(&at, "precision", tb_precision_name(prec));
    tb_attrs_str(&at, "data", a->data);
    tb_attrs_int(&at, "samples", ds->n);
    tb_attrs_int(&at, "image_size", a->size);
    tb_attrs_int(&at, "batch_size", a->batch);
    tb_attrs_str(&at, "decode", a->decode);
    tb_attrs_str(&at, "nvjpeg", a->nvjpeg);
    tb_attrs_int(&at, "steps", a->steps);
    tb_attrs_int(&at, "warmup_steps", a->warmup);
    tb_attrs_num(&at, "min_row_seconds", a->min_row);
    tb_attrs_int(&at, "seed", a->seed);
    tb_attrs_int(&at, "host_cpus", sysconf(_SC_NPROCESSORS_ONLN));
    const tb_table *tabs[1] = {tab};
    tb_results_write(a->results, &at, tabs, 1);
    tb_attrs_free(&at);
}

int tb_cmd_loader_feed(int argc, char **argv) {
    static feed_args a;
    parse_args(argc, argv, &a);
    make_rows(&a);
    tb_comm_info info;
    tb_comm_init(&argc, &argv, &info);
    if (info.world > 1) tb_die("loader-bench --feed measures one rank: run it without mpirun (%d ranks)", info.world);
    tb_dataset ds;
    char err[1024];
    if (tb_dataset_open(a.data, &ds, err, sizeof err) != 0) tb_die("loader-bench --feed: %s", err);
    if (a.strict && tb_dataset_unreadable(&ds, a.data, err, sizeof err)) tb_die("loader-bench --feed: %s", err);
    tb_dataset_describe(&ds, stdout, 10);
    if (ds.n < a.batch)
        tb_die("loader-bench --feed: --data has %lld images, fewer than one batch of %d; lower --batch-size",
               (long long)ds.n, a.batch);
    tb_precision prec;
    tb_model *m = make_model(&a, &ds, &prec);
    tb_backend *be = m->be;
    /* the step train runs by default: on CUDA asynchronous, captured as a
     * CUDA graph after its warm-up (src/train/trainer.h); one rank, no reduction */
    int cuda = strcmp(be->name, "cuda") == 0;
    if (cuda && strcmp(a.step_mode, "sync") == 0)
        tb_die("loader-bench --feed: --step-mode sync is the CPU backend's; CUDA steps are asynchronous");
    int async = strcmp(a.step_mode, "async") == 0 || (cuda && strcmp(a.step_mode, "auto") == 0);
    tb_train_hparams hp = {.momentum = 0.9, .weight_decay = 5e-5, .bucket_bytes = (size_t)25 << 20, .overlap = 1,
                           .transport = "mpi-host", .device = -1, .timeout_s = 300, .async = async, .cuda_graph = cuda,
                           .graph_warmup = 3};
    tb_trainer *tr = tb_trainer_create(m, tb_comm_world(), NULL, &hp);
    char dev_note[512];
    tb_nvml *nv;
    tb_nvml_sampler *smp = start_nvml(be, &nv, dev_note, sizeof dev_note);
    if (a.min_row < 0) a.min_row = smp ? TB_NVML_UTIL_ROW_S : 0;
    tb_feed_setup fs = {&ds, tr, smp, a.batch, a.size, 1, a.warmup, a.steps, a.mode,
                        (uint64_t)a.seed, a.lr, a.min_row, a.nvjpeg[0] ? a.nvjpeg : NULL,
                        a.timeline[0] ? a.timeline : NULL, 0};
    printf("# loader-bench --feed: %s %s on %s (%s), batch %d at %d, decode %s, %d+%d steps per row%s, %s; %ld "
           "CPUs\n",
           a.model, tb_precision_name(prec), be->name, be->device, a.batch, a.size, a.decode, a.warmup, a.steps,
           a.min_row > 0 ? " (more until a row lasts --min-row-seconds)" : "", tb_jpeg_version(),
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("# GPU columns: %s\n", dev_note);
    tb_bench_print_cpu_level(stdout);
    char t_start[32], spec[1024] = FEED_COLS;
    tb_utc_now(t_start, sizeof t_start);
    tb_bench_stage_spec(spec, sizeof spec);
    tb_table tab;
    tb_table_init(&tab, "feed", spec);
    tb_table_add_string_column(&tab, "nvjpeg"); /* the row's own --nvjpeg choices ("": the call's) */
    print_header();
    for (int i = 0; i < a.nrows; i++) {
        fs.decode = a.rowd[i];
        fs.row_index = i;
        tb_feed_row r = tb_feed_measure(&fs, &a.rowv[i]);
        print_row(&tab, &a.rowv[i], a.rowd[i], &r);
        if (a.results[0]) write_results(&a, argc, argv, be, prec, &ds, t_start, dev_note, &tab, i + 1);
    }
    printf("# threads 0: the main thread decodes; decode cpu: libjpeg-turbo (--decode %s), gpu: nvJPEG, resident: the "
           "same step on data in device memory (no loader); wait%%: share of the wall time the step waited for its "
           "batch; step_ms: the device's time per step; stage_ms, stage%%: the loader's GPU stage (--decode gpu), busy "
           "ms per batch and share of the wall time busy, per stage; ahead%%: batches whose copy overlapped the step "
           "before; cores: process CPU seconds per wall second (the CPU budget), img/s/core: img/s per core used, "
           "ldr_cores: the loader threads' own CPU seconds per wall second\n",
           a.mode == TB_DECODE_GPU ? "fast" : a.decode);
    if (a.results[0]) printf("# results written to %s (after each row)\n", a.results);
    tb_table_free(&tab);
    if (smp) tb_nvml_sampler_stop(smp);
    if (nv) tb_nvml_close(nv);
    tb_trainer_destroy(tr);
    tb_model_destroy(m);
    be->destroy(be);
    tb_dataset_close(&ds);
    tb_comm_finalize();
    return 0;
}
