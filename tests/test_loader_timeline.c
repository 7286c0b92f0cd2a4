/* test_loader_timeline.c - the loader's stage timeline, its CPU-time
 * accounting and --decode gpu's fences, on the host (issue 31):
 *   - every stage interval lies inside the run, the per-stage sums equal
 *     the intervals kept, the workers' stages never add up to more than
 *     threads x wall, each sample is read once and decoded or checked once,
 *     the consumer's waits are one per batch; the Chrome trace names every
 *     track and holds every interval;
 *   - the emulated GPU path with its rows held back until the fence
 *     completes (emulate_async): a consumer that orders on the fence gets
 *     the CPU path's batches bit for bit; one that reads without it reads
 *     old rows (the planted error the fences exist for); a batch released
 *     unordered is waited for; the device stages the GPU stage threads
 *     collect while idle match, batch for batch, a run with sync=on (the
 *     host waiting in every call), host stages and device stages counted;
 *     the first 3 files the GPU stages give back to the CPU path named, each
 *     the file the decoder failed (the hash of its bytes in the reason);
 *   - CPU time: the loader's own (thread CPU time) is > 0 and at most
 *     threads x wall; the process CPU time sees every thread (a spinning
 *     thread planted next to an idle loop shows as about one core more);
 *   - --nvjpeg's KEY=VALUE options: parsed, printed back, bad ones named.
 * Usage: test_loader_timeline (JPEGs made here). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/hash.h"
#include "core/timer.h"
#include "data/dataset.h"
#include "data/gpu_decode.h"
#include "data/loader.h"
#include "data/loader_timeline.h"
#include "data/transform.h"
#include "tests/tb_test.h"
#include "tests/tb_test_jpeg.h"
#include "tests/tb_test_loader.h"

#define S 24
#define BATCH 4

static tb_loader_opts base_opts(const tb_dataset *ds) {
    tb_loader_opts o = tbl_opts(ds, BATCH, S, 3, 3, 11);
    o.gpu_flip = 1;
    return o;
}

static tb_loader *make(const tb_loader_opts *o) { return tbl_make(o); }

/* How a consumer treats an on-device batch before reading it. */
enum { READ_ORDERED, READ_SYNCED, READ_BLIND };

typedef struct {
    uint8_t img[400][S * S * 3];
    int32_t labels[400];
    int n, batches;
    tb_loader_stats st;
    double wall_s, cpu_s;      /* create to destroy: wall, process CPU */
} seen;

static void consume(const tb_loader_opts *o, int epochs, int how, seen *v, const char *trace) {
    memset(v, 0, sizeof *v);
    double t0 = tb_now(), c0 = tb_process_cpu_s();
    tb_loader *ld = make(o);
    for (int e = 0; e < epochs; e++) {
        tb_loader_start_epoch(ld, e, 0);
        const tb_batch *b;
        while ((b = tb_loader_next(ld)) != NULL) {
            if (b->on_device && how == READ_ORDERED) tb_loader_batch_order(ld, b, NULL);
            if (b->on_device && how == READ_SYNCED) tb_loader_batch_sync(ld, b);
            if (v->n + b->n > 400) {
                printf("FAIL: more samples than the test holds\n");
                exit(1);
            }
            memcpy(v->img[v->n], b->images, (size_t)b->n * S * S * 3);
            memcpy(v->labels + v->n, b->labels, (size_t)b->n * sizeof(int32_t));
            v->n += b->n;
            v->batches += b->n > 0;
            tb_loader_release(ld, b);
        }
    }
    /* the GPU stages collect their last device times while idle */
    nanosleep(&(struct timespec){0, 150000000}, NULL);
    tb_loader_get_stats(ld, &v->st);
    if (trace) {
        char err[256];
        TB_CHECK(tb_loader_timeline_write(ld, trace, "test_loader_timeline", err, sizeof err) == 0,
                 "timeline write: %s", err);
        const tb_timeline *tl = tb_loader_timeline(ld);
        double lo = 1e300, hi = -1e300;
        int outside = 0;
        double sum[TB_STAGE_COUNT] = {0};
        int64_t cnt[TB_STAGE_COUNT] = {0};
        for (size_t i = 0; i < tb_timeline_kept(tl); i++) {
            tb_timeline_event e = tb_timeline_get(tl, i);
            outside += !tb_timeline_ready(tl, i); /* every one written whole once the loader is idle */
            outside += e.t0 < t0 || e.t1 > tb_now() || e.t1 < e.t0 || e.stage < 0 || e.stage >= TB_STAGE_COUNT;
            if (e.t0 < lo) lo = e.t0;
            if (e.t1 > hi) hi = e.t1;
            if (e.stage >= 0 && e.stage < TB_STAGE_COUNT) {
                sum[e.stage] += e.t1 - e.t0;
                cnt[e.stage]++;
            }
        }
        TB_CHECK(outside == 0 && tb_timeline_dropped(tl) == 0, "%d intervals outside the run or reversed, %zu dropped",
                 outside, tb_timeline_dropped(tl));
        int bad = 0;
        for (int k = 0; k < TB_STAGE_COUNT; k++)
            bad += cnt[k] != v->st.stage_n[k] || fabs(sum[k] - v->st.stage_s[k]) > 1e-6 + 1e-9 * sum[k];
        TB_CHECK(bad == 0, "%d stages whose sums differ from the intervals kept", bad);
    }
    tb_loader_destroy(ld);
    v->wall_s = tb_now() - t0;
    v->cpu_s = tb_process_cpu_s() - c0;
}

/* Counts occurrences of needle in the file. */
static int count_in_file(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    static char buf[1 << 22];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    int c = 0;
    for (const char *p = buf; (p = strstr(p, needle)) != NULL; p++) c++;
    return c;
}

static void test_cpu_timeline(const tb_dataset *ds) {
    tb_loader_opts o = base_opts(ds);
    o.timeline_events = 100000;
    static seen v;
    consume(&o, 2, READ_ORDERED, &v, tbj_path("cpu_trace.json"));
    const tb_loader_stats *st = &v.st;
    int64_t images = st->images, reads = st->stage_n[TB_STAGE_READ];
    /* 2 epochs of 40 with 5 bad files each: 80 samples, their reads plus
     * the bad candidates read (each bad file at most once per epoch and
     * sample that hits it) */
    TB_CHECK(v.n == 80 && images == 80, "%d samples handed out, %lld made; want 80", v.n, (long long)images);
    TB_CHECK(reads >= images && reads <= images + 2 * 5 * 2, "%lld reads for %lld samples", (long long)reads,
             (long long)images);
    /* every read file is rendered (a bad one fails in its render) */
    TB_CHECK(st->stage_n[TB_STAGE_DECODE] >= images && st->stage_n[TB_STAGE_DECODE] <= reads &&
                 st->stage_n[TB_STAGE_CHECK] == 0 &&
                 st->stage_n[TB_STAGE_GPU_SUBMIT] == 0 && st->stage_n[TB_STAGE_DEV_DECODE] == 0,
             "CPU path: %lld decodes for %lld samples, %lld checks, %lld GPU submits, %lld device decodes",
             (long long)st->stage_n[TB_STAGE_DECODE], (long long)images, (long long)st->stage_n[TB_STAGE_CHECK],
             (long long)st->stage_n[TB_STAGE_GPU_SUBMIT], (long long)st->stage_n[TB_STAGE_DEV_DECODE]);
    TB_CHECK(st->stage_n[TB_STAGE_NEXT_WAIT] == v.batches, "%lld consumer waits for %d batches",
             (long long)st->stage_n[TB_STAGE_NEXT_WAIT], v.batches);
    double worker_s = 0;
    for (int k = TB_STAGE_READ; k <= TB_STAGE_RESIZE; k++) worker_s += st->stage_s[k];
    TB_CHECK(worker_s > 0 && worker_s <= o.threads * v.wall_s, "the workers' stages sum to %.4f s in %.4f s x %d threads",
             worker_s, v.wall_s, o.threads);
    /* the loader's CPU time: some, and no more than its threads could use */
    TB_CHECK(st->cpu_s > 0 && st->cpu_s <= o.threads * v.wall_s * 1.05 + 0.02,
             "loader CPU %.4f s over %.4f s wall with %d threads", st->cpu_s, v.wall_s, o.threads);
    TB_CHECK(v.cpu_s >= st->cpu_s * 0.9, "process CPU %.4f s below the loader's own %.4f s", v.cpu_s, st->cpu_s);
    double ms[TB_STAGE_COUNT];
    tb_loader_stats zero;
    memset(&zero, 0, sizeof zero);
    tb_loader_stage_ms(&zero, st, v.batches, ms);
    TB_CHECK_CLOSE(ms[TB_STAGE_READ], st->stage_s[TB_STAGE_READ] * 1e3 / v.batches, 1e-9, 1e-9, "read ms per batch");
    /* the trace: every interval an "X" event, every track named */
    int x = count_in_file(tbj_path("cpu_trace.json"), "\"ph\": \"X\"");
    int64_t kept = 0;
    for (int k = 0; k < TB_STAGE_COUNT; k++) kept += st->stage_n[k];
    TB_CHECK(x == kept, "the trace holds %d intervals, the stats count %lld", x, (long long)kept);
    TB_CHECK(count_in_file(tbj_path("cpu_trace.json"), "\"thread_name\"") == o.threads + 1,
             "the trace names %d tracks; want %d workers and the consumer",
             count_in_file(tbj_path("cpu_trace.json"), "\"thread_name\""), o.threads + 1);
    printf("# CPU path: %d batches in %.3f s; ms per batch:", v.batches, v.wall_s);
    for (int k = 0; k < TB_STAGE_COUNT; k++)
        if (st->stage_n[k]) printf(" %s %.3f", tb_loader_stage_name(k), ms[k]);
    printf("; loader CPU %.3f s = %.2f cores\n", st->cpu_s, st->cpu_s / v.wall_s);
}

/* A whole file (the caller frees), or NULL. */
static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    unsigned char *b = malloc(cap);
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap) b = realloc(b, cap *= 2);
    fclose(f);
    *len = n;
    return b;
}

/* The first 3 files the GPU stages give back to the CPU path are named,
 * one line each: every named file is one the emulated decoder failed (the
 * reason carries the hash of the bytes it was given), and the third line
 * says the rest are counted, not named. */
static void test_gpu_named(const tb_dataset *ds) {
    static seen got;
    tb_loader_opts o = base_opts(ds);
    o.decode = TB_DECODE_GPU;
    o.gpu_emulate = 1;
    o.gpu_emulate_fail_every = 6;
    char out[512];
    tb_test_tmp(out, sizeof out, "tb_named_XXXXXX");
    int fd = mkstemp(out), saved = dup(1);
    fflush(stdout);
    dup2(fd, 1);
    consume(&o, 2, READ_ORDERED, &got, NULL);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(fd);
    FILE *f = fopen(out, "r");
    char line[2048];
    int named = 0, right = 0, counted = 0;
    while (f && fgets(line, sizeof line, f)) {
        char file[1024];
        unsigned long long h = 0;
        if (sscanf(line, "# --decode gpu: %1023[^:]: emulated nvJPEG failure (file fnv1a %llx)", file, &h) != 2)
            continue;
        named++;
        counted += strstr(line, "(further such files are counted, not named: gpu_to_cpu)") != NULL;
        size_t len = 0;
        unsigned char *bytes = read_all(file, &len);
        right += bytes && tb_fnv1a(TB_FNV1A_INIT, bytes, len) == h;
        free(bytes);
    }
    if (f) fclose(f);
    unlink(out);
    TB_CHECK(named == 3 && right == 3 && counted == 1 && got.st.gpu_to_cpu > 3,
             "GPU fallbacks named: %d lines (want 3), %d of them the failed file, %d saying the rest are counted; "
             "%lld given back in all",
             named, right, counted, (long long)got.st.gpu_to_cpu);
    printf("# the first 3 of %lld files given back to the CPU path named, each the file the decoder failed\n",
           (long long)got.st.gpu_to_cpu);
}

static void test_gpu_fences(const tb_dataset *ds) {
    static seen ref, got, blind, synced, sync_on;
    tb_loader_opts o = base_opts(ds);
    o.decode = TB_DECODE_PARTIAL;
    consume(&o, 2, READ_ORDERED, &ref, NULL);
    o.decode = TB_DECODE_GPU;
    o.gpu_emulate = 1;
    o.gpu_emulate_async = 1;
    o.gpu_emulate_fail_every = 6;
    o.prefetch = 4;
    o.timeline_events = 100000;
    consume(&o, 2, READ_ORDERED, &got, tbj_path("gpu_trace.json"));
    int img = memcmp(ref.img, got.img, sizeof ref.img) != 0, lab = memcmp(ref.labels, got.labels, sizeof ref.labels);
    TB_CHECK(got.n == ref.n && !img && !lab, "ordered on the fences: %d/%d samples, images differ %d, labels %d",
             got.n, ref.n, img, lab != 0);
    TB_CHECK(got.st.gpu_orders == got.batches && got.st.gpu_release_syncs == 0,
             "%lld batches ordered, %lld released unordered, of %d", (long long)got.st.gpu_orders,
             (long long)got.st.gpu_release_syncs, got.batches);
    /* the planted error: reading without the fence reads the slot's old rows */
    consume(&o, 2, READ_BLIND, &blind, NULL);
    int stale = 0;
    for (int i = 0; i < blind.n; i++) stale += memcmp(ref.img[i], blind.img[i], S * S * 3) != 0;
    TB_CHECK(stale > blind.n / 2, "read without the fence: only %d of %d samples differ from the finished rows", stale,
             blind.n);
    TB_CHECK(blind.st.gpu_release_syncs == blind.batches, "%lld of %d unordered batches waited for at release",
             (long long)blind.st.gpu_release_syncs, blind.batches);
    consume(&o, 1, READ_SYNCED, &synced, NULL);
    TB_CHECK(memcmp(ref.img, synced.img, (size_t)synced.n * S * S * 3) == 0 && synced.st.gpu_syncs == synced.batches,
             "host-synced batches differ from the CPU path, or %lld syncs for %d batches", (long long)synced.st.gpu_syncs,
             synced.batches);
    /* device times: collected late by the idle stages, the same as the host waiting in every call */
    o.gpu_options = "sync=on";
    consume(&o, 2, READ_ORDERED, &sync_on, NULL);
    const tb_loader_stats *a = &got.st, *b = &sync_on.st;
    int dev_same = 1;
    for (int k = TB_STAGE_DEV_UPLOAD; k <= TB_STAGE_DEV_RESIZE; k++) dev_same &= a->stage_n[k] == b->stage_n[k];
    TB_CHECK(dev_same && a->stage_n[TB_STAGE_DEV_DECODE] > 0 && a->stage_n[TB_STAGE_DEV_UPLOAD] > 0,
             "device intervals: fenced %lld upload, %lld decode, %lld resize; sync=on %lld, %lld, %lld",
             (long long)a->stage_n[TB_STAGE_DEV_UPLOAD], (long long)a->stage_n[TB_STAGE_DEV_DECODE],
             (long long)a->stage_n[TB_STAGE_DEV_RESIZE], (long long)b->stage_n[TB_STAGE_DEV_UPLOAD],
             (long long)b->stage_n[TB_STAGE_DEV_DECODE], (long long)b->stage_n[TB_STAGE_DEV_RESIZE]);
    TB_CHECK(a->stage_n[TB_STAGE_CHECK] + a->stage_n[TB_STAGE_DECODE] >= a->images && a->stage_n[TB_STAGE_GPU_FALLBACK] > 0,
             "GPU path: %lld checks + %lld CPU decodes for %lld samples, %lld fallback intervals",
             (long long)a->stage_n[TB_STAGE_CHECK], (long long)a->stage_n[TB_STAGE_DECODE], (long long)a->images,
             (long long)a->stage_n[TB_STAGE_GPU_FALLBACK]);
    TB_CHECK(count_in_file(tbj_path("gpu_trace.json"), "\"GPU stage 1 (device)\"") == 1,
             "the trace lacks the second GPU stage's device track");
    int64_t dev, pinned;
    tb_loader *ld = make(&o);
    tb_loader_memory(ld, &dev, &pinned);
    tb_loader_destroy(ld);
    TB_CHECK(dev >= (int64_t)o.prefetch * BATCH * S * S * 3, "the decoders hold %lld device bytes, less than the slots",
             (long long)dev);
    printf("# GPU path (emulated, rows held until the fence): %d batches, %lld decoded, %lld to the CPU; read blind: "
           "%d of %d samples stale\n",
           got.batches, (long long)a->gpu_decoded, (long long)a->gpu_to_cpu, stale, blind.n);
}

static atomic_int g_spin_stop;
static double g_spin_cpu;

static void *spin(void *arg) {
    (void)arg;
    double c0 = tb_thread_cpu_s();
    volatile double x = 0;
    while (!atomic_load(&g_spin_stop)) x += 1.0;
    g_spin_cpu = tb_thread_cpu_s() - c0;
    return NULL;
}

/* The process's CPU time counts every thread's: a thread spinning beside a
 * sleeping main thread adds its own CPU time (however much of a core the
 * machine gives it), and the main thread asleep adds almost none. */
static void test_process_cpu(void) {
    double t0 = tb_now(), c0 = tb_process_cpu_s();
    nanosleep(&(struct timespec){0, 200000000}, NULL);
    double idle = tb_process_cpu_s() - c0, idle_wall = tb_now() - t0;
    pthread_t th;
    atomic_store(&g_spin_stop, 0);
    t0 = tb_now();
    c0 = tb_process_cpu_s();
    pthread_create(&th, NULL, spin, NULL);
    nanosleep(&(struct timespec){0, 300000000}, NULL);
    atomic_store(&g_spin_stop, 1);
    pthread_join(th, NULL);
    double busy = tb_process_cpu_s() - c0, wall = tb_now() - t0;
    printf("# process CPU: %.3f s in %.3f s asleep (%.2f cores); %.3f s in %.3f s with a thread spinning %.3f s "
           "(%.2f cores)\n",
           idle, idle_wall, idle / idle_wall, busy, wall, g_spin_cpu, busy / wall);
    TB_CHECK(idle < 0.02 && g_spin_cpu > 0.03 && busy >= 0.97 * g_spin_cpu && busy <= g_spin_cpu + 0.05,
             "process CPU %.4f s asleep (want < 0.02); %.4f s beside a thread that spun %.4f s (want that, +- a little)",
             idle, busy, g_spin_cpu);
}

static void test_options(void) {
    tb_gpu_decoder_opts o = tb_gpu_decoder_defaults(-1, 8, 32);
    char err[512], buf[256];
    TB_CHECK(tb_gpu_decoder_parse("backend=hybrid,roi=off,priority=default,chunk=64,sync=on,inflight=3,alloc=nvjpeg,"
                                  "sort=off,cpu=40,barrier=off,stall=25,wait=block",
                                  &o, err, sizeof err) == 0,
             "a valid --nvjpeg list refused: %s", err);
    tb_gpu_decoder_opts_string(&o, buf, sizeof buf);
    TB_CHECK(strcmp(buf, "backend=hybrid,roi=off,priority=default,chunk=64,sync=on,inflight=3,alloc=nvjpeg,sort=off,"
                         "cpu=40,barrier=off,stall=25,wait=block") == 0,
             "printed back as %s", buf);
    const char *waits[] = {"auto", "spin", "yield", "block"};
    for (int i = 0; i < 4; i++) { /* each schedule read as its TB_GPU_WAIT_ value and printed back by name */
        char spec[32], want[16];
        snprintf(spec, sizeof spec, "wait=%s", waits[i]);
        TB_CHECK(tb_gpu_decoder_parse(spec, &o, err, sizeof err) == 0 && o.wait == i, "%s read as %d", spec, o.wait);
        tb_gpu_decoder_opts_string(&o, buf, sizeof buf);
        snprintf(want, sizeof want, ",wait=%s", waits[i]);
        TB_CHECK(strstr(buf, want) != NULL, "%s printed back as %s", spec, buf);
    }
    tb_gpu_decoder_opts d = tb_gpu_decoder_defaults(-1, 8, 32);
    tb_gpu_decoder_opts_string(&d, buf, sizeof buf);
    TB_CHECK(strcmp(buf, "backend=auto,roi=on,priority=high,chunk=0,sync=off,inflight=2,alloc=pool,sort=on,cpu=0,"
                         "barrier=on,stall=0,wait=auto") == 0,
             "defaults printed as %s", buf);
    const char *bad[] = {"backend=cpu", "inflight=5", "chunk=-1", "roi", "sync=maybe", "speed=11", "cpu=91", "cpu=-1",
                         "cpu=half", "barrier=maybe", "stall=1001", "stall=-5", "wait=sleep", "wait=",  ",",
                         "roi=on,"};
    int accepted = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int rc = tb_gpu_decoder_parse(bad[i], &d, err, sizeof err);
        if (i == sizeof bad / sizeof bad[0] - 1) { /* a trailing comma ends the list */
            accepted += rc != 0;
            continue;
        }
        if (rc == 0 || !strstr(err, "--nvjpeg")) {
            printf("  '%s' accepted or no message (%s)\n", bad[i], err);
            accepted++;
        }
    }
    TB_CHECK(accepted == 0, "%d bad --nvjpeg lists handled wrongly", accepted);
}

int main(void) {
    tbj_init();
    tbj_make_list("tl.txt", "tl", 40, 8, 9); /* 5 bad files, some progressive */
    tb_dataset ds;
    tbj_open_list("tl.txt", &ds);
    test_options();
    test_cpu_timeline(&ds);
    test_gpu_fences(&ds);
    test_gpu_named(&ds);
    test_process_cpu();
    tb_dataset_close(&ds);
    tbj_cleanup();
    return tb_test_exit("test_loader_timeline");
}
