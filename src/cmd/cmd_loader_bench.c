/* cmd_loader_bench.c - `trainbench loader-bench`: how fast the JPEG loader
 * delivers batches, one `#` table row per worker thread count (img/s, MB/s
 * of compressed input, ms per batch, decode and resize ms per image in
 * thread time, files skipped; --decode gpu: the GPU stage's wall ms per
 * batch and busy share), with each row's CPU budget (cores used: process
 * CPU seconds per wall second; img/s per core) and its stages in ms per
 * batch (data/loader_timeline.h). The consumer only takes and releases
 * batches (a GPU batch is waited for on release), so the table is the
 * loader's ceiling. --memory-every samples host RSS and the decoders'
 * device memory through the run (a long run shows whether they stay flat);
 * --timeline writes the last row's stage intervals as a Chrome trace.
 *
 * `loader-bench --feed`: the same loader feeding real training steps
 * (src/cmd/cmd_loader_feed.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/log.h"
#include "core/timer.h"
#include "core/version.h"
#include "data/dataset.h"
#include "data/gpu_decode.h"
#include "data/jpeg.h"
#include "data/loader.h"
#include "src/cmd/commands.h"
#include "src/cmd/loader_bench_args.h"
#include "src/feed/feed.h"
#include "src/results/results.h"

typedef struct {
    double img_s, mb_s, ms_batch, decode_ms, resize_ms, wait_ms;
    double stage_ms, stage_pct; /* --decode gpu: GPU stages' busy ms per batch finished in the row, % of
                                   the row's time busy per stage (else NaN) */
    int stages;                 /* GPU stages (0: CPU decode) */
    tb_cpu_budget cpu;
    double stages_ms[TB_STAGE_COUNT];
    int64_t skipped, images;
    tb_loader_stats st;
    char decoder[900];
} bench_row;

typedef struct {
    char data[TB_OPT_STR_MAX], threads[TB_OPT_STR_MAX], format[TB_OPT_STR_MAX], decode[TB_OPT_STR_MAX];
    char results[TB_OPT_STR_MAX], nvjpeg[TB_OPT_STR_MAX], timeline[TB_OPT_STR_MAX];
    int batch, size, batches, warmup, train, eval, prefetch, seed, strict, repeat, index_only, index_threads;
    int rank, world, feed_unused, decode_streams, memory_every;
    tb_decode_mode mode; /* --decode, parsed */
} bench_args;

static tb_loader *create_loader(const tb_loader_opts *lo) {
    char err[768];
    tb_loader *ld = tb_loader_create(lo, err, sizeof err);
    if (!ld) tb_die("loader-bench: %s", err);
    return ld;
}

/* One timed run of loader ld (NULL: a new one from lo), which it destroys:
 * `warmup` batches, then `batches` timed ones; epochs roll over as needed.
 * mem: samples every `every` batches (NULL: none); timeline: the run's stage
 * intervals written there. Every column counts the timed batches only. */
static bench_row run_once(tb_loader *ld, const tb_loader_opts *lo, int warmup, int batches, tb_mem_log *mem,
                          int every, const char *timeline) {
    char err[768];
    if (!ld) ld = create_loader(lo);
    int64_t epoch = 0;
    tb_loader_start_epoch(ld, epoch, 0);
    tb_loader_stats s0, s1;
    memset(&s0, 0, sizeof s0);
    double t0 = tb_now(), c0 = tb_process_cpu_s(), wait = 0;
    int64_t images = 0;
    int timed = 0;
    for (int k = 0; k < warmup + batches; k++) {
        /* the window opens once, at the first timed batch's request: where the warm-up ends with its epoch,
         * before the next epoch starts (a reading after it could already hold that epoch's first batch,
         * its bad files and time, prepared by a worker as soon as the epoch began) */
        if (k == warmup && !timed) {
            timed = 1;
            tb_loader_get_stats(ld, &s0);
            t0 = tb_now();
            c0 = tb_process_cpu_s();
            wait = 0;
            images = 0;
        }
        if (mem && k >= warmup && (k - warmup) % every == 0) tb_mem_log_sample(mem, ld, k - warmup, tb_now() - t0);
        const tb_batch *b = tb_loader_next(ld);
        if (!b) {
            tb_loader_start_epoch(ld, ++epoch, 0);
            k--;
            continue;
        }
        images += b->n;
        wait += b->wait_s;
        tb_loader_release(ld, b); /* a GPU batch: waited for here, as no consumer ordered on it */
    }
    double dt = tb_now() - t0, cpu = tb_process_cpu_s() - c0;
    if (mem) tb_mem_log_sample(mem, ld, batches, dt);
    tb_loader_get_stats(ld, &s1);
    bench_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.decoder, sizeof r.decoder, "%s", tb_loader_decoder(ld));
    r.stages = tb_loader_gpu_stages(ld);
    if (timeline && tb_loader_timeline_write(ld, timeline, r.decoder, err, sizeof err) != 0)
        tb_die("loader-bench --timeline: %s", err);
    tb_loader_destroy(ld);
    int64_t done = s1.images - s0.images > 0 ? s1.images - s0.images : 1;
    r.images = images;
    r.img_s = (double)images / dt;
    r.mb_s = (double)(s1.bytes_read - s0.bytes_read) / 1e6 / dt;
    r.ms_batch = dt * 1e3 / batches;
    r.decode_ms = (s1.decode_s - s0.decode_s) * 1e3 / (double)done;
    r.resize_ms = (s1.resize_s - s0.resize_s) * 1e3 / (double)done;
    r.wait_ms = wait * 1e3 / batches;
    r.cpu = tb_feed_cpu_budget(cpu, s1.cpu_s - s0.cpu_s, dt, r.img_s);
    tb_loader_stage_split(&s0, &s1, r.stages, &r.stage_ms, &r.stage_pct);
    tb_loader_stage_ms(&s0, &s1, batches, r.stages_ms);
    r.skipped = s1.skipped - s0.skipped;
    r.st = s1;
    return r;
}

static void parse_args(int argc, char **argv, bench_args *a) {
    memset(a, 0, sizeof *a);
    snprintf(a->threads, sizeof a->threads, "1,2");
    snprintf(a->format, sizeof a->format, "f32-nchw");
    snprintf(a->decode, sizeof a->decode, "fast");
    a->batch = 64, a->size = 224, a->batches = 40, a->warmup = 3, a->prefetch = 4, a->seed = 1, a->repeat = 1;
    a->world = 1;
    const tb_opt opts[] = {
        {.name = "data", .kind = TB_OPT_STRING, .dst = a->data, .help = "ImageFolder directory or 'PATH LABEL' list file"},
        {.name = "threads", .kind = TB_OPT_STRING, .dst = a->threads, .help = "worker thread counts to measure, e.g. 1,2,4"},
        {.name = "batch-size", .kind = TB_OPT_INT, .dst = &a->batch, .min = 1, .max = 1 << 16, .help = "samples per batch"},
        {.name = "image-size", .kind = TB_OPT_INT, .dst = &a->size, .min = 8, .max = 8192, .help = "output side S"},
        {.name = "batches", .kind = TB_OPT_INT, .dst = &a->batches, .min = 1, .max = 1 << 30,
         .help = "timed batches per thread count"},
        {.name = "warmup", .kind = TB_OPT_INT, .dst = &a->warmup, .max = 1 << 20, .help = "batches before the timing starts"},
        {.name = "train", .kind = TB_OPT_FLAG, .dst = &a->train, .help = "train transform: RandomResizedCrop + flip (the default)"},
        {.name = "eval", .kind = TB_OPT_FLAG, .dst = &a->eval, .help = "eval transform: resize + centre crop"},
        {.name = "prefetch", .kind = TB_OPT_INT, .dst = &a->prefetch, .min = 2, .max = 1024, .help = "batch slots in the ring"},
        {.name = "format", .kind = TB_OPT_CHOICE, .dst = a->format, .choices = "f32-nchw|f32-nhwc|u8-nhwc",
         .help = "output layout"},
        {.name = "decode", .kind = TB_OPT_CHOICE, .dst = a->decode, .choices = TB_DECODE_CHOICES,
         .help = "fast: crop at DCT scale 1/2..1/8; fast-all: any k/8; partial: crop; full: all; gpu: nvJPEG"},
        {.name = "decode-streams", .kind = TB_OPT_INT, .dst = &a->decode_streams, .max = 16,
         .help = "--decode gpu: batches decoded on the GPU at once, each on its own thread, nvJPEG state and CUDA "
                 "stream (0: 2)"},
        {.name = "nvjpeg", .kind = TB_OPT_STRING, .dst = a->nvjpeg,
         .help = "--decode gpu: backend=auto|hardware|hybrid,roi=on|off,priority=high|default,chunk=N,sync=on|off,"
                 "inflight=N,alloc=pool|nvjpeg,sort=on|off,cpu=PCT (that share of each batch on the loader threads),"
                 "barrier=on|off,stall=MS (tests),wait=auto|spin|yield|block (how host threads wait for the GPU)"},
        {.name = "timeline", .kind = TB_OPT_STRING, .dst = a->timeline,
         .help = "write the last row's stage intervals as a Chrome trace (Perfetto, chrome://tracing)"},
        {.name = "memory-every", .kind = TB_OPT_INT, .dst = &a->memory_every, .max = 1 << 30,
         .help = "sample host RSS and the decoders' device memory every N timed batches (0: off; table /memory)"},
        {.name = "seed", .kind = TB_OPT_INT, .dst = &a->seed, .max = 2147483647, .help = "shuffle and augmentation seed"},
        {.name = "strict-data", .kind = TB_OPT_FLAG, .dst = &a->strict, .help = "a bad file ends the run"},
        {.name = "repeat", .kind = TB_OPT_INT, .dst = &a->repeat, .min = 1, .max = 100,
         .help = "runs per thread count; the best is reported"},
        {.name = "rank", .kind = TB_OPT_INT, .dst = &a->rank, .max = 1 << 20, .help = "shard of the data to read"},
        {.name = "world", .kind = TB_OPT_INT, .dst = &a->world, .min = 1, .max = 1 << 20, .help = "number of shards"},
        {.name = "index-only", .kind = TB_OPT_FLAG, .dst = &a->index_only, .help = "index the data set, report, exit"},
        {.name = "index-threads", .kind = TB_OPT_INT, .dst = &a->index_threads, .max = 1024,
         .help = "directory scanner threads (0: auto)"},
        {.name = "results", .kind = TB_OPT_STRING, .dst = a->results,
         .help = "also write the table and provenance to this HDF5 file (trainbench report reads it)"},
        {.name = "feed", .kind = TB_OPT_FLAG, .dst = &a->feed_unused,
         .help = "train a model on the data while sweeping the loader (loader-bench --feed --help)"},
        {.name = NULL},
    };
    tb_cli_parse("loader-bench", "trainbench loader-bench --data DIR [--threads 1,2,4] [options]", argc, argv, opts);
    tb_cli_require("loader-bench", "data", a->data);
    if (a->train && a->eval) tb_die("loader-bench: --train and --eval exclude each other");
    if (a->rank >= a->world) tb_die("loader-bench: --rank %d must be below --world %d", a->rank, a->world);
    if (tb_decode_parse(a->decode, &a->mode) != 0) tb_die("loader-bench: --decode '%s' is unknown", a->decode);
    if (a->nvjpeg[0]) { /* named now, not when the first GPU row starts */
        char err[600];
        tb_gpu_decoder_opts go = tb_gpu_decoder_defaults(-1, 1, 1);
        if (a->mode != TB_DECODE_GPU)
            tb_die("loader-bench: --nvjpeg '%s' sets the GPU decoder, which only --decode gpu uses; add --decode gpu "
                   "or drop --nvjpeg",
                   a->nvjpeg);
        if (tb_gpu_decoder_parse(a->nvjpeg, &go, err, sizeof err) != 0) tb_die("loader-bench: %s", err);
    }
    if (a->index_only && a->results[0])
        tb_die("loader-bench: --index-only measures no loader row, so it writes no --results file; drop one of them");
    const char *in_flag[1] = {"--data"}, *in_path[1] = {a->data}; /* a list file */
    tb_output_not_input("loader-bench", "--results", a->results, in_flag, in_path, 1);
    tb_output_path_require("loader-bench", a->results, TB_OUT_RESULTS, "results file", "--results");
    /* the timeline is written after the rows: checked now, so that a bad path loses no measurement */
    tb_output_not_input("loader-bench", "--timeline", a->timeline, in_flag, in_path, 1);
    tb_output_not_same("loader-bench", "--results", a->results, "--timeline", a->timeline);
    tb_output_path_require("loader-bench", a->timeline, TB_OUT_TEXT, "stage timeline", "--timeline");
}

static tb_loader_opts loader_opts(bench_args *a, const tb_dataset *ds) {
    tb_loader_opts lo;
    memset(&lo, 0, sizeof lo);
    lo.ds = ds;
    lo.batch = a->batch;
    lo.image_size = a->size;
    lo.train = !a->eval;
    lo.prefetch = a->prefetch;
    lo.rank = a->rank;
    lo.world = a->world;
    lo.seed = (uint64_t)a->seed;
    lo.strict = a->strict;
    lo.format = strcmp(a->format, "f32-nhwc") == 0  ? TB_OUT_F32_NHWC
                : strcmp(a->format, "u8-nhwc") == 0 ? TB_OUT_U8_NHWC
                                                    : TB_OUT_F32_NCHW;
    lo.decode = a->mode;
    lo.gpu_device = -1;
    lo.gpu_stages = a->decode_streams;
    lo.gpu_options = a->nvjpeg[0] ? a->nvjpeg : NULL;
    lo.timeline_events = a->timeline[0] ? (size_t)4000000 : 0;
    if (lo.decode == TB_DECODE_GPU) { /* uint8 rows on the device, the flip left to the consumer */
        lo.format = TB_OUT_U8_NHWC;
        lo.gpu_flip = 1;
        snprintf(a->format, sizeof a->format, "u8-nhwc");
    }
    return lo;
}

static void print_row(int threads, const bench_row *b, int gpu) {
    char gm[32], gb[32];
    printf("  %7d %9.1f %9.1f %8.1f %9.2f %10.3f %10.3f %8.2f %8lld %8s %6s %6.2f %10.1f %9.2f\n", threads, b->img_s,
           b->img_s / threads, b->mb_s, b->ms_batch, b->decode_ms, b->resize_ms, b->wait_ms, (long long)b->skipped,
           tb_bench_num(gm, sizeof gm, b->stage_ms, 2), tb_bench_num(gb, sizeof gb, b->stage_pct, 0), b->cpu.cores,
           b->cpu.img_per_s_per_core, b->cpu.loader_cores);
    tb_bench_print_stages(stdout, b->stages_ms);
    for (int k = 0; k < 3 && b->st.first_bad[k][0]; k++) printf("#   skipped %s\n", b->st.first_bad[k]);
    if (gpu)
        printf("#   %s: %lld samples decoded on the GPU, %lld by the CPU instead, %lld by the CPU's share (cpu=) "
               "(since the loader started); at most %d batches in the GPU stage at once\n",
               b->decoder, (long long)b->st.gpu_decoded, (long long)b->st.gpu_to_cpu, (long long)b->st.gpu_cpu_share,
               b->st.gpu_stage_max);
    fflush(stdout);
}

static void write_results(const bench_args *a, int argc, char **argv, const tb_dataset *ds, const tb_loader_opts *lo,
                          const char *t_start, const char *decoder, const char *gpu_split, const tb_table *tab,
                          const tb_table *mem) {
    tb_attrs at;
    memset(&at, 0, sizeof at);
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    tb_provenance_head(&at, "loader-bench", argc, argv, t_start, host);
    tb_attrs_str(&at, "libjpeg_turbo_version", tb_jpeg_version());
    tb_provenance_cpu_dispatch(&at);
    tb_attrs_str(&at, "data", a->data);
    tb_attrs_int(&at, "samples", ds->n);
    tb_attrs_str(&at, "transform", lo->train ? "train" : "eval");
    tb_attrs_int(&at, "image_size", a->size);
    tb_attrs_int(&at, "batch_size", a->batch);
    tb_attrs_str(&at, "format", a->format);
    tb_attrs_str(&at, "decode", a->decode);
    tb_attrs_str(&at, "decoder", decoder);
    tb_attrs_str(&at, "nvjpeg", a->nvjpeg);
    if (lo->decode == TB_DECODE_GPU) tb_attrs_str(&at, "gpu_split", gpu_split);
    tb_attrs_int(&at, "prefetch", a->prefetch);
    tb_attrs_int(&at, "batches", a->batches);
    tb_attrs_int(&at, "repeat", a->repeat);
    tb_attrs_int(&at, "host_cpus", sysconf(_SC_NPROCESSORS_ONLN));
    const tb_table *tabs[2] = {tab, mem};
    tb_results_write(a->results, &at, tabs, mem ? 2 : 1);
    tb_attrs_free(&at);
    printf("# results written to %s\n", a->results);
}

/* With --last-batch keep semantics a shard of fewer samples than --world
 * holds none in an epoch: its rows would time empty batches. */
static void refuse_empty_shard(const bench_args *a, const tb_dataset *ds) {
    int64_t steps = tb_shard_steps(ds->n, a->world, a->batch, TB_LAST_KEEP), start = 0;
    int count = 0;
    if (steps > 0) tb_shard_range(ds->n, a->world, a->batch, TB_LAST_KEEP, steps - 1, a->rank, &start, &count);
    if (steps <= 1 && count == 0)
        tb_die("loader-bench: shard %d of %d holds no sample (%s has %lld): use a --world of at most %lld", a->rank,
               a->world, a->data, (long long)ds->n, (long long)ds->n);
}

int tb_cmd_loader_bench(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--feed") == 0) return tb_cmd_loader_feed(argc, argv);
    static bench_args a;
    parse_args(argc, argv, &a);
    int tlist[64];
    int nt = tb_bench_int_list(a.threads, 1, tlist, 64);
    if (nt <= 0) tb_die("loader-bench: --threads expects a list like 1,2,4 (each 1..1024), got '%s'", a.threads);
    tb_dataset ds;
    char err[1024];
    if (tb_dataset_open_threads(a.data, a.index_threads, &ds, err, sizeof err) != 0) tb_die("loader-bench: %s", err);
    if (a.strict && tb_dataset_unreadable(&ds, a.data, err, sizeof err)) tb_die("loader-bench: %s", err);
    tb_dataset_describe(&ds, stdout, 20);
    if (a.index_only) {
        printf("# index: %lld samples + %lld skipped entries in %.3f s (%.0f entries/s)\n", (long long)ds.n,
               (long long)tb_dataset_skipped(&ds), ds.index_s,
               (double)(ds.n + tb_dataset_skipped(&ds)) / (ds.index_s > 0 ? ds.index_s : 1e-9));
        tb_dataset_close(&ds);
        return 0;
    }
    tb_loader_opts lo = loader_opts(&a, &ds);
    refuse_empty_shard(&a, &ds);
    lo.threads = tlist[0];
    tb_loader *first = create_loader(&lo); /* a refusal (--decode gpu without nvJPEG) comes before the table */
    printf("# loader-bench: %s %d, batch %d, %s, decode %s, prefetch %d, shard %d/%d, %d+%d batches, best of %d, "
           "%s; %ld CPUs\n",
           lo.train ? "train" : "eval", a.size, a.batch, a.format, a.decode, a.prefetch, a.rank, a.world, a.warmup,
           a.batches, a.repeat, tb_jpeg_version(), sysconf(_SC_NPROCESSORS_ONLN));
    tb_bench_print_cpu_level(stdout);
    char t_start[32], decoder[900] = "", gpu_split[64] = "-", spec[1024];
    tb_utc_now(t_start, sizeof t_start);
    snprintf(spec, sizeof spec,
             "threads:i,img_per_s,img_per_s_per_thread,mb_per_s,ms_per_batch,decode_ms_per_img,resize_ms_per_img,"
             "wait_ms_per_batch,skipped:i,gpu_stage_ms_per_batch,gpu_stage_busy_pct,gpu_stages:i,cpu_cores,"
             "img_per_s_per_core,loader_cores");
    tb_bench_stage_spec(spec, sizeof spec);
    tb_table tab;
    tb_table_init(&tab, "loader", spec);
    tb_mem_log mem;
    if (a.memory_every > 0) tb_mem_log_init(&mem, lo.decode == TB_DECODE_GPU);
    printf("# %7s %9s %9s %8s %9s %10s %10s %8s %8s %8s %6s %6s %10s %9s\n", "threads", "img/s", "img/s/thr", "MB/s",
           "ms/batch", "decode_ms", "resize_ms", "wait_ms", "skipped", "stage_ms", "stage%", "cores", "img/s/core",
           "ldr_cores");
    for (int i = 0; i < nt; i++) {
        lo.threads = tlist[i];
        bench_row best;
        memset(&best, 0, sizeof best);
        for (int k = 0; k < a.repeat; k++) { /* memory and timeline: the last thread count's first run */
            int last = i == nt - 1 && k == 0;
            bench_row r = run_once(i == 0 && k == 0 ? first : NULL, &lo, a.warmup, a.batches,
                                   last && a.memory_every > 0 ? &mem : NULL, a.memory_every,
                                   last && a.timeline[0] ? a.timeline : NULL);
            if (r.img_s > best.img_s) best = r;
        }
        print_row(tlist[i], &best, lo.decode == TB_DECODE_GPU);
        snprintf(decoder, sizeof decoder, "%s", best.decoder);
        snprintf(gpu_split, sizeof gpu_split, "%lld / %lld / %lld", (long long)best.st.gpu_decoded,
                 (long long)best.st.gpu_to_cpu, (long long)best.st.gpu_cpu_share);
        double row[15 + TB_STAGE_COUNT] = {tlist[i],       best.img_s,       best.img_s / tlist[i], best.mb_s,
                                           best.ms_batch,  best.decode_ms,   best.resize_ms,        best.wait_ms,
                                           (double)best.skipped, best.stage_ms, best.stage_pct, (double)best.stages,
                                           best.cpu.cores, best.cpu.img_per_s_per_core, best.cpu.loader_cores};
        for (int k = 0; k < TB_STAGE_COUNT; k++) row[15 + k] = best.stages_ms[k];
        tb_table_row(&tab, row, NULL);
    }
    printf("# cores: process CPU seconds per wall second over the timed batches (the CPU budget), img/s/core: img/s "
           "per core used, ldr_cores: the loader threads' own CPU seconds per wall second\n");
    if (a.memory_every > 0) tb_mem_log_print(stdout, &mem);
    if (a.timeline[0]) printf("# timeline of the last row's stages: %s\n", a.timeline);
    if (a.results[0])
        write_results(&a, argc, argv, &ds, &lo, t_start, decoder, gpu_split, &tab, a.memory_every > 0 ? &mem.tab : NULL);
    if (a.memory_every > 0) tb_mem_log_free(&mem);
    tb_table_free(&tab);
    tb_dataset_close(&ds);
    return 0;
}
