/* cmd_loader_bench.c - `trainbench loader-bench`: how fast the JPEG loader
 * delivers batches, one `#` table row per worker thread count (img/s, MB/s
 * of compressed input, ms per batch, decode and resize ms per image in
 * thread time, files skipped; --decode gpu: the GPU stage's wall ms per
 * batch and busy share). The consumer only takes and releases batches, so
 * the table is the loader's ceiling.
 *
 * `loader-bench --feed`: the same loader feeding real training steps, one
 * row per loader configuration (threads x prefetch x pinned), with the
 * seeds' columns: GPU idle %, the share of the step spent waiting for data,
 * img/s, ms per batch, beside the step's time and the GPU stage's
 * (src/loader_feed.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <math.h>

#include "comm/comm.h"
#include "data/dataset.h"
#include "data/jpeg.h"
#include "data/loader.h"
#include "src/cli.h"
#include "src/commands.h"
#include "src/h5io.h"
#include "src/core/cpu_dispatch.h"
#include "src/core/log.h"
#include "src/loader_feed.h"
#include "src/nvml.h"
#include "src/provenance.h"
#include "src/results.h"
#include "src/core/timer.h"
#include "src/core/version.h"

typedef struct {
    double img_s, mb_s, ms_batch, decode_ms, resize_ms, wait_ms;
    double stage_ms, stage_pct; /* --decode gpu: GPU stages' busy ms per batch finished in the row, % of
                                   the row's time busy per stage (else NaN) */
    int stages;                 /* GPU stages (0: CPU decode) */
    int64_t skipped, images;
    tb_loader_stats st;
    char decoder[640];
} bench_row;

/* One timed run: `warmup` batches, then `batches` timed ones; epochs roll
 * over as needed. */
static bench_row run_once(const tb_loader_opts *lo, int warmup, int batches, int epoch0) {
    char err[768];
    tb_loader *ld = tb_loader_create(lo, err, sizeof err);
    if (!ld) tb_die("loader-bench: %s", err);
    int64_t epoch = epoch0;
    tb_loader_start_epoch(ld, epoch, 0);
    tb_loader_stats s0, s1;
    memset(&s0, 0, sizeof s0);
    double t0 = tb_now(), wait = 0;
    int64_t images = 0;
    for (int k = 0; k < warmup + batches; k++) {
        if (k == warmup) {
            tb_loader_get_stats(ld, &s0);
            t0 = tb_now();
            wait = 0;
            images = 0;
        }
        const tb_batch *b = tb_loader_next(ld);
        if (!b) {
            tb_loader_start_epoch(ld, ++epoch, 0);
            k--;
            continue;
        }
        images += b->n;
        wait += b->wait_s;
        tb_loader_release(ld, b);
    }
    double dt = tb_now() - t0;
    tb_loader_get_stats(ld, &s1);
    bench_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.decoder, sizeof r.decoder, "%s", tb_loader_decoder(ld));
    r.stages = tb_loader_gpu_stages(ld);
    tb_loader_destroy(ld);
    int64_t done = s1.images - s0.images > 0 ? s1.images - s0.images : 1;
    r.images = images;
    r.img_s = (double)images / dt;
    r.mb_s = (double)(s1.bytes_read - s0.bytes_read) / 1e6 / dt;
    r.ms_batch = dt * 1e3 / batches;
    r.decode_ms = (s1.decode_s - s0.decode_s) * 1e3 / (double)done;
    r.resize_ms = (s1.resize_s - s0.resize_s) * 1e3 / (double)done;
    r.wait_ms = wait * 1e3 / batches;
    tb_loader_stage_split(&s0, &s1, r.stages, &r.stage_ms, &r.stage_pct);
    r.skipped = s1.skipped;
    r.st = s1;
    return r;
}

/* A list like 1,2,4 of integers in [lo, 1024]; returns how many, -1 when malformed. */
static int parse_int_list(const char *s, int lo, int *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > 1024 || n == max) return -1;
        out[n++] = (int)v;
        p = end;
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    return n;
}

static int parse_threads(const char *s, int *out, int max) { return parse_int_list(s, 1, out, max); }

/* "on,off" -> {1, 0}; -1 when malformed. */
static int parse_onoff_list(const char *s, int *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        int v;
        if (strncmp(p, "on", 2) == 0) v = 1, p += 2;
        else if (strncmp(p, "off", 3) == 0) v = 0, p += 3;
        else return -1;
        if (n == max) return -1;
        out[n++] = v;
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    return n;
}

static tb_decode_mode decode_mode(const char *d) {
    return strcmp(d, "partial") == 0    ? TB_DECODE_PARTIAL
           : strcmp(d, "full") == 0     ? TB_DECODE_FULL
           : strcmp(d, "fast-all") == 0 ? TB_DECODE_FAST_ALL
           : strcmp(d, "gpu") == 0      ? TB_DECODE_GPU
                                        : TB_DECODE_FAST;
}

/* --rows "T:P:on|off[:decode[:streams]],...": explicit rows instead of the
 * product of --threads, --prefetch and --pinned (streams: --decode-streams
 * for that row, def_streams when left out); returns how many, -1 when
 * malformed. */
static int parse_rows(const char *s, tb_feed_config *rows, tb_decode_mode *dec, tb_decode_mode def, int def_streams,
                      int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char item[64];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item || n == max) return -1;
        memcpy(item, p, len);
        item[len] = '\0';
        p += len + (p[len] == ',');
        int t, pf, streams = def_streams, used = 0;
        char pin[8] = "", mode[16] = "";
        int got = sscanf(item, "%d:%d:%7[a-z]%n:%15[a-z-]%n:%d%n", &t, &pf, pin, &used, mode, &used, &streams, &used);
        if (got < 3 || item[used] != '\0' || t < 0 || t > 1024 || pf < 2 || pf > 1024) return -1;
        if (streams < 0 || streams > 16) return -1;
        if (strcmp(pin, "on") != 0 && strcmp(pin, "off") != 0) return -1;
        if (got >= 4 && strcmp(mode, "fast") != 0 && strcmp(mode, "fast-all") != 0 && strcmp(mode, "partial") != 0 &&
            strcmp(mode, "full") != 0 && strcmp(mode, "gpu") != 0)
            return -1;
        rows[n] = (tb_feed_config){t, pf, strcmp(pin, "on") == 0, streams};
        dec[n] = got >= 4 ? decode_mode(mode) : def; /* %n does not count in got */
        n++;
    }
    return n;
}

/* The header line saying which vector level the resize and normalise ran at. */
static void print_cpu_level(void) {
    char buf[256];
    tb_cpu_dispatch_describe(buf, sizeof buf);
    printf("# cpu vector loops: %s\n", buf);
}

/* "12.3" or "-" for a value not measured (NaN). */
static const char *num_or_dash(char *buf, size_t len, double v, int prec) {
    if (isnan(v)) snprintf(buf, len, "-");
    else snprintf(buf, len, "%.*f", prec, v);
    return buf;
}

static void command_line(char *buf, size_t len, const char *cmd, int argc, char **argv) {
    size_t used = (size_t)snprintf(buf, len, "trainbench %s", cmd);
    for (int i = 0; i < argc && used < len; i++) used += (size_t)snprintf(buf + used, len - used, " %s", argv[i]);
}

/* ---- loader-bench --feed ---------------------------------------------------------------- */

static int cmd_feed(int argc, char **argv) {
    char data[TB_OPT_STR_MAX] = "", threads_s[TB_OPT_STR_MAX] = "0,1,2,4,8,16", prefetch_s[TB_OPT_STR_MAX] = "2,4";
    char pinned_s[TB_OPT_STR_MAX] = "on,off", backend[TB_OPT_STR_MAX] = "auto", model[TB_OPT_STR_MAX] = "resnet50";
    char precision[TB_OPT_STR_MAX] = "auto", decode[TB_OPT_STR_MAX] = "fast", results[TB_OPT_STR_MAX] = "";
    char rows_s[TB_OPT_STR_MAX] = "";
    int feed = 0, batch = 64, size = 224, steps = 20, warmup = 3, seed = 1, compute_threads = 0, strict = 0;
    int decode_streams = 0;
    double lr = 0.01;
    double min_row = -1; /* --min-row-seconds; -1: 1.25 x NVML's longest period with NVML, else 0 */
    const tb_opt opts[] = {
        {.name = "feed", .kind = TB_OPT_FLAG, .dst = &feed, .help = "this mode: the loader feeding training steps"},
        {.name = "data", .kind = TB_OPT_STRING, .dst = data, .help = "ImageFolder directory or 'PATH LABEL' list file"},
        {.name = "threads", .kind = TB_OPT_STRING, .dst = threads_s,
         .help = "loader worker threads per row, a list; 0: the main thread decodes"},
        {.name = "prefetch", .kind = TB_OPT_STRING, .dst = prefetch_s, .help = "batch slots per row, a list (each >= 2)"},
        {.name = "pinned", .kind = TB_OPT_STRING, .dst = pinned_s,
         .help = "on,off: slots in pinned memory with asynchronous copies, or pageable"},
        {.name = "rows", .kind = TB_OPT_STRING, .dst = rows_s,
         .help = "explicit rows THREADS:PREFETCH:on|off[:DECODE[:STREAMS]],... instead of the product of the three "
                 "lists"},
        {.name = "batch-size", .kind = TB_OPT_INT, .dst = &batch, .min = 1, .max = 1 << 16, .help = "samples per step"},
        {.name = "image-size", .kind = TB_OPT_INT, .dst = &size, .min = 32, .max = 8192, .help = "training side S"},
        {.name = "steps", .kind = TB_OPT_INT, .dst = &steps, .min = 1, .max = 1 << 30, .help = "timed steps per row"},
        {.name = "warmup", .kind = TB_OPT_INT, .dst = &warmup, .max = 1 << 20, .help = "untimed steps per row first"},
        {.name = "min-row-seconds", .kind = TB_OPT_DOUBLE, .dst = &min_row, .min = -1, .max = 3600,
         .help = "more timed steps than --steps until a row lasts this long (default: 1.25 s where NVML measures "
                 "the GPU, whose GPU-Util needs a window of 1 s; else 0)"},
        {.name = "backend", .kind = TB_OPT_CHOICE, .dst = backend, .choices = "cpu|cuda|auto",
         .help = "compute backend"},
        {.name = "model", .kind = TB_OPT_STRING, .dst = model, .help = "resnet18 .. resnet152"},
        {.name = "precision", .kind = TB_OPT_CHOICE, .dst = precision, .choices = "auto|fp32|tf32|bf16|fp16",
         .help = "compute precision (auto: bf16 on CUDA, fp32 on the CPU)"},
        {.name = "decode", .kind = TB_OPT_CHOICE, .dst = decode, .choices = "fast|fast-all|partial|full|gpu",
         .help = "how much of each JPEG the CPU decodes; gpu: nvJPEG on the device (CUDA backend)"},
        {.name = "decode-streams", .kind = TB_OPT_INT, .dst = &decode_streams, .max = 16,
         .help = "--decode gpu: batches decoded on the GPU at once, each on its own thread, nvJPEG state and CUDA "
                 "stream (0: 2; 1 with threads 0)"},
        {.name = "lr", .kind = TB_OPT_DOUBLE, .dst = &lr, .min = 0, .max = 100, .help = "SGD learning rate"},
        {.name = "seed", .kind = TB_OPT_INT, .dst = &seed, .max = 2147483647, .help = "init, shuffle, augmentation"},
        {.name = "compute-threads", .kind = TB_OPT_INT, .dst = &compute_threads, .max = 4096,
         .help = "CPU backend threads (0: all cores)"},
        {.name = "strict-data", .kind = TB_OPT_FLAG, .dst = &strict, .help = "a bad file ends the run"},
        {.name = "results", .kind = TB_OPT_STRING, .dst = results,
         .help = "also write the table (group /feed) and provenance to this HDF5 file"},
        {.name = NULL},
    };
    tb_cli_parse("loader-bench", "trainbench loader-bench --feed --data DIR [--threads 0,1,2,4,8,16] [options]", argc,
                 argv, opts);
    tb_cli_require("loader-bench", "data", data);
    int tl[64], pl[16], nl[2];
    int nt = parse_int_list(threads_s, 0, tl, 64), np = parse_int_list(prefetch_s, 2, pl, 16);
    int nn = parse_onoff_list(pinned_s, nl, 2);
    if (nt <= 0) tb_die("loader-bench --feed: --threads expects a list like 0,1,2,4 (each 0..1024), got '%s'", threads_s);
    if (np <= 0) tb_die("loader-bench --feed: --prefetch expects a list like 2,4 (each 2..1024), got '%s'", prefetch_s);
    if (nn <= 0) tb_die("loader-bench --feed: --pinned expects on, off or on,off, got '%s'", pinned_s);
    tb_feed_config rowv[256];
    tb_decode_mode rowd[256];
    int nrows = 0;
    if (rows_s[0]) {
        nrows = parse_rows(rows_s, rowv, rowd, decode_mode(decode), decode_streams, 256);
        if (nrows <= 0)
            tb_die("loader-bench --feed: --rows expects THREADS:PREFETCH:on|off[:DECODE[:STREAMS]],... (prefetch >= 2; "
                   "decode fast|fast-all|partial|full|gpu; streams 0..16), got '%s'",
                   rows_s);
    } else {
        for (int i = 0; i < nt; i++)
            for (int j = 0; j < np; j++)
                for (int k = 0; k < nn && nrows < 256; k++) {
                    rowv[nrows] = (tb_feed_config){tl[i], pl[j], nl[k], decode_streams};
                    rowd[nrows++] = decode_mode(decode);
                }
    }
    int any_gpu = 0;
    for (int i = 0; i < nrows; i++) any_gpu |= rowd[i] == TB_DECODE_GPU;

    tb_comm_info info;
    tb_comm_init(&argc, &argv, &info);
    if (info.world > 1) tb_die("loader-bench --feed measures one rank: run it without mpirun (%d ranks)", info.world);
    tb_dataset ds;
    char err[1024];
    if (tb_dataset_open(data, &ds, err, sizeof err) != 0) tb_die("loader-bench --feed: %s", err);
    tb_dataset_describe(&ds, stdout, 10);
    if (ds.n < batch)
        tb_die("loader-bench --feed: --data has %lld images, fewer than one batch of %d; lower --batch-size",
               (long long)ds.n, batch);

    tb_precision prec = TB_PREC_FP32;
    int prec_auto = strcmp(precision, "auto") == 0;
    if (!prec_auto && tb_precision_parse(precision, &prec) != 0)
        tb_die("loader-bench --feed: --precision %s is not available in this build", precision);
    tb_backend_opts bo = {.threads = compute_threads};
    tb_precision_backend_opts(prec, &bo);
    tb_backend *be = tb_backend_create(backend, &bo, err, sizeof err);
    if (!be) tb_die("loader-bench --feed: %s", err);
    if (prec_auto) prec = tb_precision_default(be);
    if (prec == TB_PREC_TF32 && strcmp(be->name, "cuda") != 0)
        tb_die("loader-bench --feed: --precision tf32 needs the CUDA backend; use fp32 on %s", be->name);
    if (any_gpu && strcmp(be->name, "cuda") != 0)
        tb_die("loader-bench --feed: --decode gpu decodes on the GPU the model trains on: it needs the CUDA backend "
               "(this run: %s)", be->name);
    tb_resnet_config cfg;
    if (tb_resnet_config_init(&cfg, model, ds.classes) != 0)
        tb_die("loader-bench --feed: unknown --model '%s'; known: %s", model, tb_resnet_known_names());
    tb_model_opts mo = tb_model_opts_for(prec);
    tb_model *m = tb_model_create(&cfg, be, batch, size, size, &mo);
    const char *degenerate = tb_model_degenerate_bn(m, batch);
    if (degenerate) { /* the name outlives the model, which goes before the error ends the process */
        char layer[128];
        snprintf(layer, sizeof layer, "%s", degenerate);
        tb_model_destroy(m);
        be->destroy(be);
        tb_die("loader-bench --feed: a batch of %d at %dx%d leaves one value per channel in %s; raise either", batch,
               size, size, layer);
    }
    tb_model_init(m, (uint64_t)seed);
    /* the step train runs by default: on CUDA asynchronous, captured as a
     * CUDA graph after its warm-up (src/trainer.h); one rank, no reduction */
    int cuda = strcmp(be->name, "cuda") == 0;
    tb_train_hparams hp = {
        .momentum = 0.9,
        .weight_decay = 5e-5,
        .bucket_bytes = (size_t)25 << 20,
        .overlap = 1,
        .path = TB_PATH_HOST,
        .device = -1,
        .timeout_s = 300,
        .async = cuda,
        .cuda_graph = cuda,
        .graph_warmup = 3,
    };
    tb_trainer *tr = tb_trainer_create(m, tb_comm_world(), NULL, &hp);

    /* NVML's GPU-Util on the device the backend runs on */
    char dev_note[512] = "";
    tb_nvml *nv = NULL;
    tb_nvml_sampler *smp = NULL;
    if (strncmp(be->device_key, "gpu:", 4) == 0) {
        nv = tb_nvml_open(err, sizeof err);
        tb_nvml_dev *d = nv ? tb_nvml_device(nv, be->device_key + 4, err, sizeof err) : NULL;
        if (d) smp = tb_nvml_sampler_start(d, 0.05);
        if (smp)
            snprintf(dev_note, sizeof dev_note,
                     "NVML GPU-Util sampled every 50 ms on %s (rows of 1 s or more: NVML's longest sample period)",
                     be->device_key + 4);
        else snprintf(dev_note, sizeof dev_note, "not measured: %.400s", err);
    } else {
        snprintf(dev_note, sizeof dev_note, "not measured: the %s backend has no GPU", be->name);
    }

    if (min_row < 0) min_row = smp ? TB_NVML_UTIL_ROW_S : 0;
    tb_feed_setup fs = {&ds, tr, smp, batch, size, 1, warmup, steps, decode_mode(decode), (uint64_t)seed, lr, min_row};
    printf("# loader-bench --feed: %s %s on %s (%s), batch %d at %d, decode %s, %d+%d steps per row%s, %s\n", model,
           tb_precision_name(prec), be->name, be->device, batch, size, decode, warmup, steps,
           min_row > 0 ? " (more until a row lasts --min-row-seconds)" : "", tb_jpeg_version());
    printf("# GPU columns: %s\n", dev_note);
    print_cpu_level();
    char t_start[32];
    tb_utc_now(t_start, sizeof t_start);
    tb_table tab;
    tb_table_init(&tab, "feed",
                  "threads:i,prefetch:i,pinned:i,gpu_decode:i,img_per_s,ms_per_batch,wait_pct,h2d_ms,step_ms,gpu_util_pct,"
                  "gpu_idle_pct,sm_active_pct,decode_ms_per_img,lookahead_pct,images:i,skipped:i,gpu_decoded:i,"
                  "gpu_to_cpu:i,gpu_stage_ms_per_batch,gpu_stage_busy_pct,gpu_stages:i,timed_steps:i,row_s");
    printf("# %7s %8s %6s %6s %9s %9s %7s %7s %9s %9s %8s %8s %8s %6s %10s %7s %7s\n", "threads", "prefetch",
           "pinned", "decode", "img/s", "ms/batch", "wait%", "h2d_ms", "GPU-util%", "GPU-idle%", "SM-act%", "step_ms",
           "stage_ms", "stage%", "dec_ms/img", "ahead%", "skipped");
    for (int i = 0; i < nrows; i++) {
        tb_feed_config c = rowv[i];
        fs.decode = rowd[i];
        tb_feed_row r = tb_feed_measure(&fs, &c);
        char u[32], id[32], sa[32], gm[32], gb[32];
        printf("  %7d %8d %6s %6s %9.1f %9.2f %7.1f %7.2f %9s %9s %8s %8.2f %8s %6s %10.3f %7.0f %7lld\n", c.threads,
               c.prefetch, c.pinned ? "on" : "off", rowd[i] == TB_DECODE_GPU ? "gpu" : "cpu", r.img_per_s,
               r.ms_per_batch, r.wait_pct, r.h2d_ms, num_or_dash(u, sizeof u, r.gpu_util_pct, 1),
               num_or_dash(id, sizeof id, r.gpu_idle_pct, 1), num_or_dash(sa, sizeof sa, r.sm_active_pct, 1),
               r.step_ms, num_or_dash(gm, sizeof gm, r.gpu_stage_ms, 2),
               num_or_dash(gb, sizeof gb, r.gpu_stage_busy_pct, 0), r.decode_ms_per_img, r.lookahead_pct,
               (long long)r.skipped);
        if (rowd[i] == TB_DECODE_GPU)
            printf("#   %s: %lld timed samples decoded on the GPU, %lld by the CPU instead; %d GPU stage%s\n",
                   r.decoder, (long long)r.gpu_decoded, (long long)r.gpu_to_cpu, r.gpu_stages,
                   r.gpu_stages == 1 ? "" : "s");
        fflush(stdout);
        double row[23] = {c.threads,       c.prefetch,      c.pinned,           rowd[i] == TB_DECODE_GPU,
                          r.img_per_s,     r.ms_per_batch,  r.wait_pct,         r.h2d_ms,
                          r.step_ms,       r.gpu_util_pct,  r.gpu_idle_pct,     r.sm_active_pct,
                          r.decode_ms_per_img, r.lookahead_pct, (double)r.images, (double)r.skipped,
                          (double)r.gpu_decoded, (double)r.gpu_to_cpu, r.gpu_stage_ms, r.gpu_stage_busy_pct,
                          (double)r.gpu_stages, r.timed_steps, r.row_s};
        tb_table_row(&tab, row, NULL);
    }
    printf("# threads 0: the main thread decodes; decode cpu: libjpeg-turbo (--decode %s), gpu: nvJPEG; wait%%: share "
           "of the wall time the step waited for its batch; step_ms: the device's time per step; stage_ms, stage%%: "
           "the loader's GPU stage (--decode gpu), busy ms per batch and share of the wall time busy, per stage "
           "(near 100: the GPU stage limits the row); ahead%%: batches whose copy overlapped the step before\n",
           decode_mode(decode) == TB_DECODE_GPU ? "fast" : decode);
    if (results[0]) {
        tb_attrs a;
        memset(&a, 0, sizeof a);
        char host[64] = "localhost", t_end[32];
        gethostname(host, sizeof host - 1);
        tb_utc_now(t_end, sizeof t_end);
        tb_attrs_str(&a, "kind", "loader-feed");
        tb_attrs_str(&a, "start_time", t_start);
        tb_attrs_str(&a, "end_time", t_end);
        tb_attrs_str(&a, "status", "complete");
        /* versions, command line, host, backend, device, GPU and library
         * versions: as every results file of train */
        tb_provenance_fill(&a, "loader-bench", argc, argv, be, 1, host);
        tb_attrs_str(&a, "device_columns", dev_note);
        tb_attrs_str(&a, "model", model);
        tb_attrs_str(&a, "precision", tb_precision_name(prec));
        tb_attrs_str(&a, "data", data);
        tb_attrs_int(&a, "samples", ds.n);
        tb_attrs_int(&a, "image_size", size);
        tb_attrs_int(&a, "batch_size", batch);
        tb_attrs_str(&a, "decode", decode);
        tb_attrs_int(&a, "steps", steps);
        tb_attrs_int(&a, "warmup_steps", warmup);
        tb_attrs_num(&a, "min_row_seconds", min_row);
        tb_attrs_int(&a, "seed", seed);
        const tb_table *tabs[1] = {&tab};
        tb_results_write(results, &a, tabs, 1);
        tb_attrs_free(&a);
        printf("# results written to %s\n", results);
    }
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

int tb_cmd_loader_bench(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--feed") == 0) return cmd_feed(argc, argv);
    char data[TB_OPT_STR_MAX] = "", threads_s[TB_OPT_STR_MAX] = "1,2", format[TB_OPT_STR_MAX] = "f32-nchw";
    char decode[TB_OPT_STR_MAX] = "fast";
    int batch = 64, size = 224, batches = 40, warmup = 3, train = 0, eval = 0, prefetch = 4, seed = 1;
    int strict = 0, repeat = 1, index_only = 0, index_threads = 0, rank = 0, world = 1, feed_unused = 0;
    int decode_streams = 0;
    char results[TB_OPT_STR_MAX] = "";
    const tb_opt opts[] = {
        {.name = "data", .kind = TB_OPT_STRING, .dst = data,
         .help = "ImageFolder directory or 'PATH LABEL' list file"},
        {.name = "threads", .kind = TB_OPT_STRING, .dst = threads_s,
         .help = "worker thread counts to measure, e.g. 1,2,4"},
        {.name = "batch-size", .kind = TB_OPT_INT, .dst = &batch, .min = 1, .max = 1 << 16,
         .help = "samples per batch"},
        {.name = "image-size", .kind = TB_OPT_INT, .dst = &size, .min = 8, .max = 8192,
         .help = "output side S"},
        {.name = "batches", .kind = TB_OPT_INT, .dst = &batches, .min = 1, .max = 1 << 30,
         .help = "timed batches per thread count"},
        {.name = "warmup", .kind = TB_OPT_INT, .dst = &warmup, .max = 1 << 20,
         .help = "batches before the timing starts"},
        {.name = "train", .kind = TB_OPT_FLAG, .dst = &train,
         .help = "train transform: RandomResizedCrop + flip (the default)"},
        {.name = "eval", .kind = TB_OPT_FLAG, .dst = &eval, .help = "eval transform: resize + centre crop"},
        {.name = "prefetch", .kind = TB_OPT_INT, .dst = &prefetch, .min = 2, .max = 1024,
         .help = "batch slots in the ring"},
        {.name = "format", .kind = TB_OPT_CHOICE, .dst = format, .choices = "f32-nchw|f32-nhwc|u8-nhwc",
         .help = "output layout"},
        {.name = "decode", .kind = TB_OPT_CHOICE, .dst = decode, .choices = "fast|fast-all|partial|full|gpu",
         .help = "fast: crop at DCT scale 1/2..1/8; fast-all: any k/8; partial: crop; full: all; gpu: nvJPEG"},
        {.name = "decode-streams", .kind = TB_OPT_INT, .dst = &decode_streams, .max = 16,
         .help = "--decode gpu: batches decoded on the GPU at once, each on its own thread, nvJPEG state and CUDA "
                 "stream (0: 2)"},
        {.name = "seed", .kind = TB_OPT_INT, .dst = &seed, .max = 2147483647,
         .help = "shuffle and augmentation seed"},
        {.name = "strict-data", .kind = TB_OPT_FLAG, .dst = &strict, .help = "a bad file ends the run"},
        {.name = "repeat", .kind = TB_OPT_INT, .dst = &repeat, .min = 1, .max = 100,
         .help = "runs per thread count; the best is reported"},
        {.name = "rank", .kind = TB_OPT_INT, .dst = &rank, .max = 1 << 20,
         .help = "shard of the data to read"},
        {.name = "world", .kind = TB_OPT_INT, .dst = &world, .min = 1, .max = 1 << 20,
         .help = "number of shards"},
        {.name = "index-only", .kind = TB_OPT_FLAG, .dst = &index_only,
         .help = "index the data set, report, exit"},
        {.name = "index-threads", .kind = TB_OPT_INT, .dst = &index_threads, .max = 1024,
         .help = "directory scanner threads (0: auto)"},
        {.name = "results", .kind = TB_OPT_STRING, .dst = results,
         .help = "also write the table and provenance to this HDF5 file (trainbench report reads it)"},
        {.name = "feed", .kind = TB_OPT_FLAG, .dst = &feed_unused,
         .help = "train a model on the data while sweeping the loader (loader-bench --feed --help)"},
        {.name = NULL},
    };
    tb_cli_parse("loader-bench", "trainbench loader-bench --data DIR [--threads 1,2,4] [options]", argc, argv,
                 opts);
    tb_cli_require("loader-bench", "data", data);
    if (train && eval) tb_die("loader-bench: --train and --eval exclude each other");
    if (rank >= world) tb_die("loader-bench: --rank %d must be below --world %d", rank, world);
    int tlist[64];
    int nt = parse_threads(threads_s, tlist, 64);
    if (nt <= 0) tb_die("loader-bench: --threads expects a list like 1,2,4 (each 1..1024), got '%s'", threads_s);

    tb_dataset ds;
    char err[1024];
    if (tb_dataset_open_threads(data, index_threads, &ds, err, sizeof err) != 0) tb_die("loader-bench: %s", err);
    tb_dataset_describe(&ds, stdout, 20);
    if (index_only) {
        printf("# index: %lld samples + %lld skipped entries in %.3f s (%.0f entries/s)\n", (long long)ds.n,
               (long long)tb_dataset_skipped(&ds), ds.index_s,
               (double)(ds.n + tb_dataset_skipped(&ds)) / (ds.index_s > 0 ? ds.index_s : 1e-9));
        tb_dataset_close(&ds);
        return 0;
    }

    tb_loader_opts lo;
    memset(&lo, 0, sizeof lo);
    lo.ds = &ds;
    lo.batch = batch;
    lo.image_size = size;
    lo.train = !eval;
    lo.prefetch = prefetch;
    lo.rank = rank;
    lo.world = world;
    lo.seed = (uint64_t)seed;
    lo.strict = strict;
    lo.format = strcmp(format, "f32-nhwc") == 0 ? TB_OUT_F32_NHWC
                : strcmp(format, "u8-nhwc") == 0 ? TB_OUT_U8_NHWC
                                                  : TB_OUT_F32_NCHW;
    lo.decode = decode_mode(decode);
    lo.gpu_device = -1;
    lo.gpu_stages = decode_streams;
    if (lo.decode == TB_DECODE_GPU) { /* uint8 rows on the device, the flip left to the consumer */
        lo.format = TB_OUT_U8_NHWC;
        lo.gpu_flip = 1;
        snprintf(format, sizeof format, "u8-nhwc");
    }
    printf("# loader-bench: %s %d, batch %d, %s, decode %s, prefetch %d, shard %d/%d, %d+%d batches, best of %d, "
           "%s\n",
           lo.train ? "train" : "eval", size, batch, format, decode, prefetch, rank, world, warmup, batches, repeat,
           tb_jpeg_version());
    print_cpu_level();
    char t_start[32], decoder[640] = "", gpu_split[64] = "-";
    tb_utc_now(t_start, sizeof t_start);
    tb_table tab;
    tb_table_init(&tab, "loader",
                  "threads:i,img_per_s,img_per_s_per_thread,mb_per_s,ms_per_batch,decode_ms_per_img,"
                  "resize_ms_per_img,wait_ms_per_batch,skipped:i,gpu_stage_ms_per_batch,gpu_stage_busy_pct,"
                  "gpu_stages:i");
    printf("# %7s %9s %9s %8s %9s %10s %10s %8s %8s %8s %6s\n", "threads", "img/s", "img/s/thr", "MB/s", "ms/batch",
           "decode_ms", "resize_ms", "wait_ms", "skipped", "stage_ms", "stage%");
    for (int i = 0; i < nt; i++) {
        lo.threads = tlist[i];
        bench_row best;
        memset(&best, 0, sizeof best);
        for (int k = 0; k < repeat; k++) {
            bench_row r = run_once(&lo, warmup, batches, 0);
            if (r.img_s > best.img_s) best = r;
        }
        char gm[32], gb[32];
        printf("  %7d %9.1f %9.1f %8.1f %9.2f %10.3f %10.3f %8.2f %8lld %8s %6s\n", tlist[i], best.img_s,
               best.img_s / tlist[i], best.mb_s, best.ms_batch, best.decode_ms, best.resize_ms, best.wait_ms,
               (long long)best.skipped, num_or_dash(gm, sizeof gm, best.stage_ms, 2),
               num_or_dash(gb, sizeof gb, best.stage_pct, 0));
        for (int k = 0; k < 3 && best.st.first_bad[k][0]; k++) printf("#   skipped %s\n", best.st.first_bad[k]);
        if (lo.decode == TB_DECODE_GPU)
            printf("#   %s: %lld samples decoded on the GPU, %lld by the CPU instead (since the loader started); at "
                   "most %d batches in the GPU stage at once\n",
                   best.decoder, (long long)best.st.gpu_decoded, (long long)best.st.gpu_to_cpu,
                   best.st.gpu_stage_max);
        snprintf(decoder, sizeof decoder, "%s", best.decoder);
        snprintf(gpu_split, sizeof gpu_split, "%lld / %lld", (long long)best.st.gpu_decoded,
                 (long long)best.st.gpu_to_cpu);
        fflush(stdout);
        double row[12] = {tlist[i],       best.img_s,     best.img_s / tlist[i], best.mb_s,
                          best.ms_batch,  best.decode_ms, best.resize_ms,        best.wait_ms,
                          (double)best.skipped, best.stage_ms, best.stage_pct, (double)best.stages};
        tb_table_row(&tab, row, NULL);
    }
    if (results[0]) {
        tb_attrs a;
        memset(&a, 0, sizeof a);
        char buf[4096], host[64] = "localhost", t_end[32];
        gethostname(host, sizeof host - 1);
        command_line(buf, sizeof buf, "loader-bench", argc, argv);
        tb_utc_now(t_end, sizeof t_end);
        tb_attrs_str(&a, "kind", "loader-bench");
        tb_attrs_str(&a, "trainbench_version", tb_version_string);
        tb_attrs_str(&a, "git_revision", tb_git_revision);
        tb_attrs_str(&a, "command_line", buf);
        tb_attrs_str(&a, "start_time", t_start);
        tb_attrs_str(&a, "end_time", t_end);
        tb_attrs_str(&a, "status", "complete");
        tb_attrs_str(&a, "hostnames", host);
        tb_h5_library_version(buf, sizeof buf);
        tb_attrs_str(&a, "hdf5_version", buf);
        tb_attrs_str(&a, "libjpeg_turbo_version", tb_jpeg_version());
        tb_provenance_cpu_dispatch(&a);
        tb_attrs_str(&a, "data", data);
        tb_attrs_int(&a, "samples", ds.n);
        tb_attrs_str(&a, "transform", lo.train ? "train" : "eval");
        tb_attrs_int(&a, "image_size", size);
        tb_attrs_int(&a, "batch_size", batch);
        tb_attrs_str(&a, "format", format);
        tb_attrs_str(&a, "decode", decode);
        tb_attrs_str(&a, "decoder", decoder);
        if (lo.decode == TB_DECODE_GPU) tb_attrs_str(&a, "gpu_split", gpu_split);
        tb_attrs_int(&a, "prefetch", prefetch);
        tb_attrs_int(&a, "batches", batches);
        tb_attrs_int(&a, "repeat", repeat);
        const tb_table *tabs[1] = {&tab};
        tb_results_write(results, &a, tabs, 1);
        tb_attrs_free(&a);
        printf("# results written to %s\n", results);
    }
    tb_table_free(&tab);
    tb_dataset_close(&ds);
    return 0;
}
