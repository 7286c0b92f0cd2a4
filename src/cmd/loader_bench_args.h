/* loader_bench_args.h - what `trainbench loader-bench` and `loader-bench
 * --feed` share: their list arguments (threads, prefetch, pinned, --rows),
 * the stage columns of each row (data/loader_timeline.h: ms per batch by
 * stage, on the console and as /loader or /feed columns), the CPU budget of
 * a row (cores used = CPU seconds / wall seconds), and the memory samples
 * of a long run (--memory-every: host RSS, the decoders' device and pinned
 * bytes, the device's memory in use). */
#ifndef TB_LOADER_BENCH_ARGS_H
#define TB_LOADER_BENCH_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "data/loader.h"
#include "src/cmd/loader_feed.h"
#include "src/results/results.h"

/* A list like 1,2,4 of integers in [lo, 1024]; returns how many, -1 when malformed. */
int tb_bench_int_list(const char *s, int lo, int *out, int max);
/* "on,off" -> {1, 0}; -1 when malformed. */
int tb_bench_onoff_list(const char *s, int *out, int max);
/* --rows "T:P:on|off[:decode[:streams[:nvjpeg]]],...,resident": explicit
 * rows (streams: --decode-streams for that row, def_streams when left out;
 * nvjpeg: that row's --nvjpeg choices joined by '+', "sync=on+roi=off";
 * `resident`: the same step on data in device memory, no loader); returns
 * how many, -1 when malformed (a bad nvjpeg choice is the loader's to
 * name). */
int tb_bench_rows(const char *s, tb_feed_config *rows, tb_decode_mode *dec, tb_decode_mode def, int def_streams,
                  int max);
/* "# cpu vector loops: avx512 (...)": the level the resize and normalise
 * run at (core/cpu_dispatch.h), a header line of both modes. */
void tb_bench_print_cpu_level(FILE *f);
/* "12.3" or "-" for a value not measured (NaN). */
const char *tb_bench_num(char *buf, size_t len, double v, int prec);

/* ",stage_read_ms,stage_check_ms,..." appended to a table's column spec. */
void tb_bench_stage_spec(char *spec, size_t len);
/* "#   stages, ms per batch: read 1.20  decode 3.40 ..." (the stages that ran). */
void tb_bench_print_stages(FILE *f, const double ms[TB_STAGE_COUNT]);

/* ---- memory samples of a long run ------------------------------------------------------ */
typedef struct {
    tb_table tab;              /* batch, t_s, rss_mib, decoder_device_mib, decoder_pinned_mib, device_used_mib */
    double first[5], last[5];  /* the first and last sample's values (columns 2..6) */
    int n;
    int device; /* the device's memory in use is sampled (the loader decodes on it) */
} tb_mem_log;
/* device: sample the device's memory in use too; only where the run holds a
 * CUDA context already (a query would make one: hundreds of MB, mid-run). */
void tb_mem_log_init(tb_mem_log *m, int device);
/* One sample now, after `batches` timed batches, `t_s` into the run. */
void tb_mem_log_sample(tb_mem_log *m, const tb_loader *ld, int64_t batches, double t_s);
/* "# memory: RSS 812.3 -> 813.0 MiB (+0.09 %), ..." over the samples. */
void tb_mem_log_print(FILE *f, const tb_mem_log *m);
void tb_mem_log_free(tb_mem_log *m);

#endif
