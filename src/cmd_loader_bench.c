/* cmd_loader_bench.c - `trainbench loader-bench`: how fast the JPEG loader
 * delivers batches, one `#` table row per worker thread count (img/s, MB/s
 * of compressed input, ms per batch, decode and resize ms per image in
 * thread time, files skipped). The consumer only takes and releases
 * batches, so the table is the loader's ceiling. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/jpeg.h"
#include "data/loader.h"
#include "src/cli.h"
#include "src/commands.h"
#include "src/h5io.h"
#include "src/core/log.h"
#include "src/results.h"
#include "src/core/timer.h"
#include "src/core/version.h"

typedef struct {
    double img_s, mb_s, ms_batch, decode_ms, resize_ms, wait_ms;
    int64_t skipped, images;
    tb_loader_stats st;
} bench_row;

/* One timed run: `warmup` batches, then `batches` timed ones; epochs roll
 * over as needed. */
static bench_row run_once(const tb_loader_opts *lo, int warmup, int batches, int epoch0) {
    char err[256];
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
    tb_loader_destroy(ld);
    bench_row r;
    memset(&r, 0, sizeof r);
    int64_t done = s1.images - s0.images > 0 ? s1.images - s0.images : 1;
    r.images = images;
    r.img_s = (double)images / dt;
    r.mb_s = (double)(s1.bytes_read - s0.bytes_read) / 1e6 / dt;
    r.ms_batch = dt * 1e3 / batches;
    r.decode_ms = (s1.decode_s - s0.decode_s) * 1e3 / (double)done;
    r.resize_ms = (s1.resize_s - s0.resize_s) * 1e3 / (double)done;
    r.wait_ms = wait * 1e3 / batches;
    r.skipped = s1.skipped;
    r.st = s1;
    return r;
}

static int parse_threads(const char *s, int *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1024 || n == max) return -1;
        out[n++] = (int)v;
        p = end;
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    return n;
}

int tb_cmd_loader_bench(int argc, char **argv) {
    char data[TB_OPT_STR_MAX] = "", threads_s[TB_OPT_STR_MAX] = "1,2", format[TB_OPT_STR_MAX] = "f32-nchw";
    char decode[TB_OPT_STR_MAX] = "fast";
    int batch = 64, size = 224, batches = 40, warmup = 3, train = 0, eval = 0, prefetch = 4, seed = 1;
    int strict = 0, repeat = 1, index_only = 0, index_threads = 0, rank = 0, world = 1;
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
        {.name = "decode", .kind = TB_OPT_CHOICE, .dst = decode, .choices = "fast|fast-all|partial|full",
         .help = "fast: crop at DCT scale 1/2..1/8; fast-all: any k/8; partial: crop; full: all"},
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
    lo.decode = strcmp(decode, "partial") == 0    ? TB_DECODE_PARTIAL
                : strcmp(decode, "full") == 0     ? TB_DECODE_FULL
                : strcmp(decode, "fast-all") == 0 ? TB_DECODE_FAST_ALL
                                                  : TB_DECODE_FAST;
    printf("# loader-bench: %s %d, batch %d, %s, decode %s, prefetch %d, shard %d/%d, %d+%d batches, best of %d, "
           "%s\n",
           lo.train ? "train" : "eval", size, batch, format, decode, prefetch, rank, world, warmup, batches, repeat,
           tb_jpeg_version());
    char t_start[32];
    tb_utc_now(t_start, sizeof t_start);
    tb_table tab;
    tb_table_init(&tab, "loader",
                  "threads:i,img_per_s,img_per_s_per_thread,mb_per_s,ms_per_batch,decode_ms_per_img,"
                  "resize_ms_per_img,wait_ms_per_batch,skipped:i");
    printf("# %7s %9s %9s %8s %9s %10s %10s %8s %8s\n", "threads", "img/s", "img/s/thr", "MB/s", "ms/batch",
           "decode_ms", "resize_ms", "wait_ms", "skipped");
    for (int i = 0; i < nt; i++) {
        lo.threads = tlist[i];
        bench_row best;
        memset(&best, 0, sizeof best);
        for (int k = 0; k < repeat; k++) {
            bench_row r = run_once(&lo, warmup, batches, 0);
            if (r.img_s > best.img_s) best = r;
        }
        printf("  %7d %9.1f %9.1f %8.1f %9.2f %10.3f %10.3f %8.2f %8lld\n", tlist[i], best.img_s,
               best.img_s / tlist[i], best.mb_s, best.ms_batch, best.decode_ms, best.resize_ms, best.wait_ms,
               (long long)best.skipped);
        for (int k = 0; k < 3 && best.st.first_bad[k][0]; k++) printf("#   skipped %s\n", best.st.first_bad[k]);
        fflush(stdout);
        double row[9] = {tlist[i], best.img_s, best.img_s / tlist[i], best.mb_s, best.ms_batch,
                         best.decode_ms, best.resize_ms, best.wait_ms, (double)best.skipped};
        tb_table_row(&tab, row, NULL);
    }
    if (results[0]) {
        tb_attrs a;
        memset(&a, 0, sizeof a);
        char buf[4096], host[64] = "localhost", t_end[32];
        gethostname(host, sizeof host - 1);
        size_t used = (size_t)snprintf(buf, sizeof buf, "trainbench loader-bench");
        for (int i = 0; i < argc && used < sizeof buf; i++)
            used += (size_t)snprintf(buf + used, sizeof buf - used, " %s", argv[i]);
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
        tb_attrs_str(&a, "data", data);
        tb_attrs_int(&a, "samples", ds.n);
        tb_attrs_str(&a, "transform", lo.train ? "train" : "eval");
        tb_attrs_int(&a, "image_size", size);
        tb_attrs_int(&a, "batch_size", batch);
        tb_attrs_str(&a, "format", format);
        tb_attrs_str(&a, "decode", decode);
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
