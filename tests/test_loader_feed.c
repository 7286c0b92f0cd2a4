/* test_loader_feed.c - the loader's features for feeding a device (issue
 * 15), on the host:
 *   - inline decode (0 workers: the caller's thread) gives bit for bit the
 *     batches of worker threads, bad files replaced alike;
 *   - uint8 output with the flip deferred (gpu_flip): the same crop boxes
 *     and draws, images unflipped, flip flags that say which to mirror:
 *     mirroring them gives exactly the flipped render;
 *   - tb_loader_try_next: never blocks, hands out batches in step order,
 *     several may be held and released in any order;
 *   - the slot allocator callbacks get their context, every allocation is
 *     freed;
 *   - --decode gpu's loader logic on the host emulation of the GPU decoder
 *     (data/gpu_decode.h): the same batches, bit for bit, as the CPU path
 *     with decode `partial` (same crop boxes, flips, labels, replacements
 *     of bad files), with formats the GPU path does not take (progressive)
 *     rendered by the CPU, and jobs the "GPU" fails going back to the CPU
 *     path file by file (a corrupt file then replaced as on the CPU path);
 *     the GPU stage's own time and batch count in the stats;
 *   - several GPU stages (each its own emulated decoder) give byte for byte
 *     the batches and counters of one, through a change of epoch while
 *     stages are busy; batches overlap in the GPU stage; a dropped epoch's
 *     waiting slots are not decoded; inline decode runs one stage; destroy
 *     with every stage busy joins them and frees the slots' device memory
 *     through the decoder that gave it;
 *   - the routing rule (tb_gpu_decodable) on the fuzz corpus's seeds.
 * Usage: test_loader_feed (JPEGs made here, in a temporary directory). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/timer.h"
#include "data/dataset.h"
#include "data/gpu_decode.h"
#include "data/jpeg.h"
#include "data/loader.h"
#include "data/transform.h"
#include "tests/tb_test.h"
#include "tests/tb_test_jpeg.h"
#include "tests/tb_test_loader.h"

enum { S = 24, BATCH = 4 };

static tb_loader_opts base_opts(const tb_dataset *ds) { return tbl_opts(ds, BATCH, S, 3, 3, 7); }

/* base_opts on the emulated GPU decode path (flip on the device) */
static tb_loader_opts emulated_gpu_opts(const tb_dataset *ds) {
    tb_loader_opts o = base_opts(ds);
    o.gpu_flip = o.gpu_emulate = 1;
    o.decode = TB_DECODE_GPU;
    return o;
}

/* Every batch of `epochs` epochs: images [total][S][S][3] (or float), labels, flips. */
typedef struct {
    uint8_t *img;
    int32_t *labels;
    uint8_t *flip;
    int n, flips_set, batches, gpu_stages;
    int64_t skipped;
    tb_loader_stats st;
    double wall_s;             /* create to destroy */
} run_out;

static run_out run(const tb_loader_opts *o, int epochs) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tb_loader *ld = tbl_make(o);
    size_t per = tb_sample_bytes(o->format, S);
    run_out r;
    memset(&r, 0, sizeof r);
    size_t cap = (size_t)epochs * (size_t)o->ds->n + BATCH;
    r.img = calloc(cap, per);
    r.labels = calloc(cap, sizeof *r.labels);
    r.flip = calloc(cap, 1);
    for (int e = 0; e < epochs; e++) {
        tb_loader_start_epoch(ld, e, 0);
        const tb_batch *b;
        while ((b = tb_loader_next(ld)) != NULL) {
            memcpy(r.img + (size_t)r.n * per, b->images, per * (size_t)b->n);
            memcpy(r.labels + r.n, b->labels, sizeof(int32_t) * (size_t)b->n);
            TB_CHECK((b->flip != NULL) == (o->gpu_flip != 0), "flip flags %s without gpu_flip",
                     b->flip ? "present" : "absent");
            if (b->flip) memcpy(r.flip + r.n, b->flip, (size_t)b->n);
            TB_CHECK(b->slot >= 0 && b->slot < o->prefetch, "slot index %d outside the ring", b->slot);
            r.n += b->n;
            r.batches += b->n > 0;
            tb_loader_release(ld, b);
        }
    }
    for (int i = 0; i < r.n; i++) r.flips_set += r.flip[i] != 0;
    tb_loader_stats st;
    tb_loader_get_stats(ld, &st);
    r.skipped = st.skipped;
    r.st = st;
    r.gpu_stages = tb_loader_gpu_stages(ld);
    tb_loader_destroy(ld);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r.wall_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return r;
}

static void run_free(run_out *r) { free(r->img), free(r->labels), free(r->flip); }

static void test_inline(const tb_dataset *ds) {
    tb_loader_opts o = base_opts(ds);
    o.format = TB_OUT_F32_NCHW;
    run_out a = run(&o, 2);
    o.inline_decode = 1;
    run_out b = run(&o, 2);
    size_t per = tb_sample_bytes(o.format, S);
    TB_CHECK(a.n == b.n && a.n == 2 * 30, "samples: %d with workers, %d inline; want 60", a.n, b.n);
    TB_CHECK(memcmp(a.img, b.img, per * (size_t)a.n) == 0 && memcmp(a.labels, b.labels, 4 * (size_t)a.n) == 0,
             "inline decode gives other batches than 3 worker threads");
    TB_CHECK(a.skipped == b.skipped && a.skipped == 2 * 4, "skipped %lld (workers) and %lld (inline); want 8",
             (long long)a.skipped, (long long)b.skipped);
    run_free(&a);
    run_free(&b);

    /* inline: wait_s is the decode time of the batch, > 0 */
    o.inline_decode = 1;
    tb_loader *ld = tbl_make(&o);
    tb_loader_start_epoch(ld, 0, 0);
    const tb_batch *bt = tb_loader_next(ld);
    TB_CHECK(bt && bt->wait_s > 0, "inline batch wait %.6f s: decoding on the caller's thread is not counted",
             bt ? bt->wait_s : -1.0);
    const tb_batch *peek = NULL;
    TB_CHECK(tb_loader_try_next(ld, &peek) == 0, "inline try_next found a batch nobody decoded");
    if (bt) tb_loader_release(ld, bt);
    tb_loader_destroy(ld);
}

static void test_gpu_flip(const tb_dataset *ds) {
    tb_loader_opts o = base_opts(ds);
    run_out a = run(&o, 2); /* flipped on the host */
    o.gpu_flip = 1;
    run_out b = run(&o, 2); /* unflipped + flags */
    TB_CHECK(a.n == b.n && memcmp(a.labels, b.labels, 4 * (size_t)a.n) == 0, "gpu_flip changes the samples");
    int bad = 0;
    for (int i = 0; i < b.n; i++) {
        const uint8_t *pa = a.img + (size_t)i * S * S * 3, *pb = b.img + (size_t)i * S * S * 3;
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++) {
                int xs = b.flip[i] ? S - 1 - x : x;
                if (memcmp(pa + ((size_t)y * S + x) * 3, pb + ((size_t)y * S + xs) * 3, 3) != 0) bad++;
            }
    }
    TB_CHECK(bad == 0, "%d pixels differ between the host flip and the deferred flip mirrored", bad);
    TB_CHECK(b.flips_set > b.n / 5 && b.flips_set < b.n * 4 / 5, "%d of %d samples flipped: the flags look wrong",
             b.flips_set, b.n);
    /* and the renders are not symmetric: an unflipped copy differs where flip is set */
    int differ = 0;
    for (int i = 0; i < b.n; i++)
        if (b.flip[i] && memcmp(a.img + (size_t)i * S * S * 3, b.img + (size_t)i * S * S * 3, S * S * 3) != 0)
            differ++;
    TB_CHECK(differ == b.flips_set, "only %d of %d flipped samples differ from their unflipped render", differ,
             b.flips_set);
    run_free(&a);
    run_free(&b);

    char err[256];
    o.format = TB_OUT_F32_NCHW;
    TB_CHECK(tb_loader_create(&o, err, sizeof err) == NULL && strstr(err, "uint8"),
             "gpu_flip with float output accepted (%s)", err);
}

static void test_try_next(const tb_dataset *ds) {
    tb_loader_opts o = base_opts(ds);
    o.prefetch = 3;
    tb_loader *ld = tbl_make(&o);
    tb_loader_start_epoch(ld, 3, 0);
    int64_t steps = tb_loader_steps_per_epoch(ld);
    const tb_batch *held[2] = {NULL, NULL};
    int64_t want = 0, got_all = 0;
    int order_ok = 1, nheld = 0, max_held = 0;
    for (int guard = 0; guard < 200000 && got_all < steps; guard++) {
        const tb_batch *b = NULL;
        int rc = tb_loader_try_next(ld, &b);
        if (rc == 1) {
            order_ok &= b->step == want++;
            held[nheld++] = b;
            got_all++;
            if (nheld > max_held) max_held = nheld;
        }
        /* Hold two at once, then release one of them, alternating the newest and the oldest so slots
         * come back out of order. Two held of three slots always leaves the loader one to fill, so
         * this never waits on itself, and holding two does not depend on how fast the loader is (a
         * consumer that released whenever nothing was ready held only one under ASan on 2 cores). */
        if (nheld == 2) {
            int k = (int)(got_all % 2);
            tb_loader_release(ld, held[k]);
            held[k] = held[1];
            nheld--;
        }
        if (rc == 0) nanosleep(&(struct timespec){0, 200000}, NULL);
    }
    while (nheld > 0) tb_loader_release(ld, held[--nheld]);
    TB_CHECK(got_all == steps && order_ok, "try_next: %lld of %lld batches, in step order: %d", (long long)got_all,
             (long long)steps, order_ok);
    TB_CHECK(max_held >= 2, "never held two batches at once (max %d)", max_held);
    const tb_batch *b = NULL;
    TB_CHECK(tb_loader_try_next(ld, &b) == -1, "try_next after the epoch's last batch is not -1");
    TB_CHECK(tb_loader_slots(ld) == 3, "tb_loader_slots %d, want prefetch 3", tb_loader_slots(ld));
    tb_loader_destroy(ld);
}

typedef struct {
    int magic, allocs, frees;
} counter;

static void *count_alloc(void *ctx, size_t bytes) {
    counter *c = ctx;
    if (c->magic != 1234) return NULL;
    c->allocs++;
    return malloc(bytes);
}

static void count_free(void *ctx, void *p) {
    counter *c = ctx;
    c->frees++;
    free(p);
}

static void test_allocator(const tb_dataset *ds) {
    counter c = {1234, 0, 0};
    tb_loader_opts o = base_opts(ds);
    o.gpu_flip = 1;
    o.host_alloc = count_alloc;
    o.host_free = count_free;
    o.host_ctx = &c;
    run_out r = run(&o, 1);
    run_free(&r);
    TB_CHECK(c.allocs == 3 * o.prefetch && c.frees == c.allocs,
             "slot allocator: %d allocations, %d frees; want 3 per slot (images, labels, flip), all freed", c.allocs,
             c.frees);
    char err[256];
    o.host_free = NULL;
    TB_CHECK(tb_loader_create(&o, err, sizeof err) == NULL, "host_alloc without host_free accepted");
}

/* The same batches from the emulated GPU path and from the CPU path
 * (decode partial, flip deferred), workers or inline. */
static void test_gpu_emulated(const tb_dataset *ds, int fail_every, int inline_decode, int expect_fallback) {
    tb_loader_opts o = base_opts(ds);
    o.gpu_flip = 1;
    o.inline_decode = inline_decode;
    o.decode = TB_DECODE_PARTIAL;
    run_out a = run(&o, 2);
    o.decode = TB_DECODE_GPU;
    o.gpu_emulate = 1;
    o.gpu_emulate_fail_every = fail_every;
    tb_loader *ld = tbl_make(&o);
    TB_CHECK(strstr(tb_loader_decoder(ld), "emulation") != NULL, "decoder: %s", tb_loader_decoder(ld));
    tb_loader_destroy(ld);
    run_out b = run(&o, 2);
    TB_CHECK(a.n == b.n && a.n == 60, "samples: CPU %d, GPU path %d", a.n, b.n);
    int img_bad = 0;
    for (int i = 0; i < a.n; i++)
        if (memcmp(a.img + (size_t)i * S * S * 3, b.img + (size_t)i * S * S * 3, S * S * 3) != 0) {
            int d = 0, mx = 0;
            for (int q = 0; q < S * S * 3; q++) {
                int e = abs(a.img[(size_t)i * S * S * 3 + q] - b.img[(size_t)i * S * S * 3 + q]);
                d += e != 0;
                mx = e > mx ? e : mx;
            }
            if (img_bad++ < 3) printf("  sample %d (label %d): %d values differ, max %d\n", i, a.labels[i], d, mx);
        }
    int lab_bad = memcmp(a.labels, b.labels, 4 * (size_t)a.n) != 0, flip_bad = memcmp(a.flip, b.flip, (size_t)a.n) != 0;
    TB_CHECK(!img_bad && !lab_bad && !flip_bad,
             "GPU path (emulated, fail every %d, inline %d) differs from the CPU path: images %d labels %d flips %d",
             fail_every, inline_decode, img_bad, lab_bad, flip_bad);
    TB_CHECK(a.skipped == b.skipped, "skipped: CPU %lld, GPU path %lld", (long long)a.skipped, (long long)b.skipped);
    /* the GPU stage's own time: every batch went through it once (two whole
     * epochs, nothing dropped), its wall time within the run's (per stage) */
    TB_CHECK(a.st.gpu_batches == 0 && a.st.gpu_stage_s == 0, "CPU path: %lld batches, %.6f s in a GPU stage",
             (long long)a.st.gpu_batches, a.st.gpu_stage_s);
    TB_CHECK(b.st.gpu_batches == b.batches && b.st.gpu_stage_s > 0 && b.st.gpu_stage_s < b.wall_s * b.gpu_stages,
             "GPU stage: %lld batches (want %d) in %.6f s (want > 0 and below the run's %.6f s x %d stages)",
             (long long)b.st.gpu_batches, b.batches, b.st.gpu_stage_s, b.wall_s, b.gpu_stages);
    /* the counters say which way the samples went */
    o.gpu_emulate_fail_every = fail_every;
    ld = tbl_make(&o);
    tb_loader_start_epoch(ld, 0, 0);
    const tb_batch *bt;
    int on_device = 1;
    while ((bt = tb_loader_next(ld)) != NULL) {
        on_device &= bt->on_device;
        tb_loader_release(ld, bt);
    }
    tb_loader_stats st;
    tb_loader_get_stats(ld, &st);
    tb_loader_destroy(ld);
    printf("# GPU path (emulated, fail every %d, inline %d): %lld decoded by the \"GPU\", %lld by the CPU instead, "
           "%lld skipped\n",
           fail_every, inline_decode, (long long)st.gpu_decoded, (long long)st.gpu_to_cpu, (long long)st.skipped);
    TB_CHECK(on_device, "a GPU-path batch not marked on_device");
    TB_CHECK(st.gpu_decoded > 10 && st.gpu_to_cpu >= expect_fallback,
             "GPU decoded %lld, CPU instead %lld (want > 10 and >= %d)", (long long)st.gpu_decoded,
             (long long)st.gpu_to_cpu, expect_fallback);
    TB_CHECK(st.images == 30, "images %lld for an epoch of 30 (5 bad files replaced)", (long long)st.images);
    run_free(&a);
    run_free(&b);
}

/* What a consumer saw: every batch's images, labels and flips in order. */
typedef struct {
    uint8_t img[200][S * S * 3];
    int32_t labels[200];
    uint8_t flip[200];
    int n, batches;
} seen;

static void take_all(tb_loader *ld, seen *v, int max_batches) {
    const tb_batch *b;
    for (int k = 0; k < max_batches && (b = tb_loader_next(ld)) != NULL; k++) {
        TB_CHECK(v->n + b->n <= 200, "more samples than the test holds");
        if (v->n + b->n > 200) exit(1);
        memcpy(v->img[v->n], b->images, (size_t)b->n * S * S * 3);
        memcpy(v->labels + v->n, b->labels, (size_t)b->n * sizeof(int32_t));
        memcpy(v->flip + v->n, b->flip, (size_t)b->n);
        v->n += b->n;
        v->batches++;
        tb_loader_release(ld, b);
    }
}

/* The script of test_gpu_stages: two batches of epoch 3, then (GPU stages
 * busy, slots waiting for them) epoch 4 from its step 2, whole, then epoch
 * 5 whole. *staged: batches through the GPU stage. */
static void stages_script(const tb_loader_opts *o, seen *v, tb_loader_stats *st, int *stages) {
    tb_loader *ld = tbl_make(o);
    *stages = tb_loader_gpu_stages(ld);
    memset(v, 0, sizeof *v);
    tb_loader_start_epoch(ld, 3, 0);
    take_all(ld, v, 2);
    tb_loader_start_epoch(ld, 4, 2);
    take_all(ld, v, 1000);
    tb_loader_start_epoch(ld, 5, 0);
    take_all(ld, v, 1000);
    tb_loader_get_stats(ld, st);
    tb_loader_destroy(ld);
}

/* Several GPU stages (each with its own emulated decoder, which ends the
 * job if two threads call it at once) against one: byte for byte the same
 * batches (samples, order, flips, replaced bad files, per-file CPU
 * fallbacks), through a change of epoch in the middle of one while stages
 * are busy; batches really overlap in the GPU stage (the emulation's delay
 * makes each take 15 ms); the dropped epoch's slots are not decoded; the
 * counters of two whole epochs are the same; inline decode runs one stage;
 * destroying the loader with every stage busy joins them and gives the
 * slots' memory back to the decoder that made it. */
static void test_gpu_stages(const tb_dataset *ds) {
    for (int fail_every = 0; fail_every <= 3; fail_every += 3) {
        tb_loader_opts o = emulated_gpu_opts(ds);
        o.gpu_emulate_fail_every = fail_every;
        o.gpu_emulate_delay_ms = 15;
        o.prefetch = 4;
        static seen ref, got;
        tb_loader_stats rs, gs;
        int stages;
        o.gpu_stages = 1;
        /* 60 ms a batch here: the consumer has that long between taking step
         * 1 and changing the epoch before the one stage starts on step 3, so
         * a descheduled test thread (ctest -j on 2 cores) does not look
         * like a dropped slot being decoded */
        o.gpu_emulate_delay_ms = 60;
        stages_script(&o, &ref, &rs, &stages);
        o.gpu_emulate_delay_ms = 15;
        TB_CHECK(stages == 1 && rs.gpu_stage_max == 1, "1 stage asked: %d stages, %d batches at once", stages,
                 rs.gpu_stage_max);
        /* 2 + 6 + 8 batches handed out; of the dropped epoch only the one
         * in the stage at the change (step 2: the stage takes it as it hands
         * out step 1): steps 3 and 4, waiting, are not decoded */
        TB_CHECK(ref.batches == 16 && rs.gpu_batches >= 16 && rs.gpu_batches <= 17,
                 "1 stage: %d batches handed out (want 16), %lld through the GPU stage (want 16 or 17)", ref.batches,
                 (long long)rs.gpu_batches);
        for (int want = 2; want <= 3; want++) {
            o.gpu_stages = want;
            stages_script(&o, &got, &gs, &stages);
            int img = memcmp(ref.img, got.img, sizeof ref.img) != 0, lab = memcmp(ref.labels, got.labels, sizeof ref.labels) != 0,
                fl = memcmp(ref.flip, got.flip, sizeof ref.flip) != 0;
            TB_CHECK(got.n == ref.n && got.batches == ref.batches && !img && !lab && !fl,
                     "%d GPU stages (fail every %d) differ from one: %d/%d samples, %d/%d batches, images %d labels %d "
                     "flips %d",
                     want, fail_every, got.n, ref.n, got.batches, ref.batches, img, lab, fl);
            TB_CHECK(stages == want && gs.gpu_stage_max == want,
                     "%d stages asked: %d stages, at most %d batches in the GPU stage at once", want, stages,
                     gs.gpu_stage_max);
            TB_CHECK(gs.gpu_batches >= 16 && gs.gpu_batches <= 16 + o.prefetch,
                     "%d stages: %lld batches through the GPU stage, want 16 .. %d", want, (long long)gs.gpu_batches,
                     16 + o.prefetch);
            printf("# %d GPU stages, fail every %d: %d samples as with one stage, %d at once, %lld staged\n", want,
                   fail_every, got.n, gs.gpu_stage_max, (long long)gs.gpu_batches);
        }
        /* two whole epochs: the same counters, fallbacks included */
        o.gpu_emulate_delay_ms = 0;
        o.gpu_stages = 1;
        run_out a = run(&o, 2);
        o.gpu_stages = 3;
        run_out b = run(&o, 2);
        TB_CHECK(a.n == b.n && memcmp(a.img, b.img, (size_t)a.n * S * S * 3) == 0 &&
                     memcmp(a.labels, b.labels, 4 * (size_t)a.n) == 0 && memcmp(a.flip, b.flip, (size_t)a.n) == 0,
                 "2 epochs: 3 GPU stages give other batches than one");
        TB_CHECK(a.st.skipped == b.st.skipped && a.st.gpu_decoded == b.st.gpu_decoded &&
                     a.st.gpu_to_cpu == b.st.gpu_to_cpu && a.st.images == b.st.images &&
                     b.st.gpu_batches == b.batches,
                 "2 epochs, fail every %d: 1 stage skipped %lld, GPU %lld, CPU instead %lld, images %lld; 3 stages "
                 "%lld, %lld, %lld, %lld, %lld of %d batches staged",
                 fail_every, (long long)a.st.skipped, (long long)a.st.gpu_decoded, (long long)a.st.gpu_to_cpu,
                 (long long)a.st.images, (long long)b.st.skipped, (long long)b.st.gpu_decoded,
                 (long long)b.st.gpu_to_cpu, (long long)b.st.images, (long long)b.st.gpu_batches, b.batches);
        /* the emulated failures did happen, and went back file by file */
        static int64_t cpu_no_fail;
        if (fail_every == 0) cpu_no_fail = b.st.gpu_to_cpu;
        TB_CHECK(fail_every == 0 || b.st.gpu_to_cpu >= cpu_no_fail + 8,
                 "fail every %d: %lld samples went back to the CPU, %lld without failures", fail_every,
                 (long long)b.st.gpu_to_cpu, (long long)cpu_no_fail);
        printf("# 2 epochs, fail every %d: 1 and 3 stages: %lld by the \"GPU\", %lld by the CPU instead, %lld skipped\n",
               fail_every, (long long)b.st.gpu_decoded, (long long)b.st.gpu_to_cpu, (long long)b.st.skipped);
        run_free(&a);
        run_free(&b);
    }
    /* inline decode: the caller's thread is the one stage, whatever is asked */
    tb_loader_opts o = emulated_gpu_opts(ds);
    o.inline_decode = 1;
    o.gpu_stages = 3;
    tb_loader *ld = tbl_make(&o);
    TB_CHECK(tb_loader_gpu_stages(ld) == 1, "inline decode runs %d GPU stages", tb_loader_gpu_stages(ld));
    tb_loader_destroy(ld);
    /* CPU decode has none; the default with workers is 2; out of range refused */
    o = base_opts(ds);
    ld = tbl_make(&o);
    TB_CHECK(tb_loader_gpu_stages(ld) == 0, "CPU decode reports %d GPU stages", tb_loader_gpu_stages(ld));
    tb_loader_destroy(ld);
    o = emulated_gpu_opts(ds);
    ld = tbl_make(&o);
    TB_CHECK(tb_loader_gpu_stages(ld) == 2, "default: %d GPU stages, want 2", tb_loader_gpu_stages(ld));
    tb_loader_destroy(ld);
    char err[256];
    o.gpu_stages = 17;
    TB_CHECK(tb_loader_create(&o, err, sizeof err) == NULL && strstr(err, "GPU stages"), "17 GPU stages accepted (%s)",
             err);
    /* destroyed with every stage busy and slots waiting for one */
    o.gpu_stages = 3;
    o.gpu_emulate_delay_ms = 30;
    o.prefetch = 6;
    ld = tbl_make(&o);
    tb_loader_start_epoch(ld, 0, 0);
    const tb_batch *bt = tb_loader_next(ld);
    TB_CHECK(bt != NULL, "no first batch");
    if (bt) tb_loader_release(ld, bt);
    nanosleep(&(struct timespec){0, 5000000}, NULL);
    tb_loader_stats st;
    tb_loader_get_stats(ld, &st);
    tb_loader_destroy(ld); /* the emulation ends the job on memory freed by another decoder or not freed */
    TB_CHECK(st.gpu_stage_max == 3, "before the destroy: at most %d batches in the GPU stage at once, want 3",
             st.gpu_stage_max);
}

/* The GPU stage's busy share over windows shorter than one stage (the
 * H200's loader-bench printed 147 % for a one-batch row): with one stage
 * kept busy (200 ms a batch, four slots waiting for it: 800 ms), every
 * window of 40 ms between two snapshots reads 80-100 % busy, also one in
 * which no batch ends (before, 0 %), and one in which a batch ends no
 * longer counts that batch's whole 200 ms (before, 500 %). The window is
 * the snapshots' own times (at_s), so a descheduled test thread does not
 * stretch it; the stage's own gaps between batches are microseconds. */
static void test_stage_busy_window(const tb_dataset *ds) {
    tb_loader_opts o = emulated_gpu_opts(ds);
    o.gpu_emulate_delay_ms = 200;
    o.gpu_stages = 1;
    o.prefetch = 4;
    tb_loader *ld = tbl_make(&o);
    tb_loader_start_epoch(ld, 0, 0);
    const tb_batch *b = tb_loader_next(ld);
    TB_CHECK(b != NULL, "no first batch");
    if (b) tb_loader_release(ld, b); /* steps 1..4 now wait for the one stage: busy for 800 ms */
    double t_start = tb_now();
    int with_end = 0, bad = 0, windows = 0;
    /* 40-ms windows for 500 ms: within steps 1..3's stages, with room for a
     * slow machine before step 4's stage (the last) ends */
    while (tb_now() - t_start < 0.5) {
        tb_loader_stats s0, s1;
        tb_loader_get_stats(ld, &s0);
        nanosleep(&(struct timespec){0, 40000000}, NULL);
        tb_loader_get_stats(ld, &s1);
        double window = s1.at_s - s0.at_s, ms, pct;
        tb_loader_stage_split(&s0, &s1, 1, &ms, &pct);
        double busy = 100.0 * (s1.gpu_stage_s - s0.gpu_stage_s) / window;
        int ended = s1.gpu_batches > s0.gpu_batches;
        with_end += ended;
        windows++;
        int busy_ok = busy >= 80.0 && busy <= 100.01 && pct >= 80.0 && pct <= 100.01;
        if (!busy_ok || (ended && !(ms > 0 && ms <= window * 1e3 + 0.01))) bad++;
        printf("# window %d: %.1f ms, %s, busy %.1f %% (stage_split %.1f %%, %.1f ms per batch ended)\n", windows,
               window * 1e3, ended ? "a batch ended in it" : "no batch ended", busy, pct, ms);
    }
    TB_CHECK(bad == 0, "%d of %d windows read the busy stage outside 80-100 %% (or more busy ms per ended batch "
             "than the window)", bad, windows);
    TB_CHECK(with_end >= 1, "no window saw a batch end (500 ms of windows against 200 ms a batch)");
    tb_loader_destroy(ld);
}

/* tb_gpu_decodable on the fuzz corpus: baseline 8-bit gray/YCbCr in
 * 4:4:4, 4:2:2, 4:2:0, 4:4:0 go to the GPU; progressive, arithmetic, CMYK,
 * YCCK, RGB-coded and 4:1:1 to the CPU; a file that fails the header check
 * never gets that far. */
static void test_routing(const char *corpus) {
    struct {
        const char *seed;
        int gpu; /* 1 GPU, 0 CPU, -1 bad header */
    } want[] = {
        {"ok-rgb420-fast-eval.bin", 1},       {"ok-rgb422-full-eval.bin", 1},
        {"ok-rgb444-partial-train.bin", 1},   {"ok-s440-fast-train.bin", 1},
        {"ok-restart-partial-train.bin", 1},  {"ok-gray-fastall-train.bin", 1},
        {"ok-s411-partial-eval.bin", 0},      {"ok-progressive-fastall-eval.bin", 0},
        {"ok-arithmetic-fast-eval.bin", 0},   {"ok-cmyk-fast-train.bin", 0},
        {"ok-ycck-partial-eval.bin", 0},      {"ok-rgbcolorspace-full-eval.bin", 0},
        {"ok-progressive-arith-restart.bin", 0}, {"bad-empty.bin", -1},
        {"bad-not-jpeg.bin", -1},             {"bad-truncated.bin", -1},
        {"bad-precision12.bin", -1},          {"bad-lossless-sof3.bin", -1},
    };
    tb_jpeg *j = tb_jpeg_create();
    int wrong = 0, seen = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", corpus, want[i].seed);
        FILE *f = fopen(p, "rb");
        if (!f) {
            printf("FAIL: missing corpus seed %s\n", p);
            wrong++;
            continue;
        }
        static uint8_t buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        /* fuzz_jpeg's input: a 32-byte control block, then the file */
        int w, h, got;
        if (n < 32 || tb_jpeg_header(j, buf + 32, n - 32, &w, &h) != 0) {
            got = -1;
        } else {
            tb_jpeg_format fm;
            tb_jpeg_header_format(j, &fm);
            char why[128] = "";
            got = tb_gpu_decodable(&fm, why, sizeof why);
        }
        seen++;
        if (got != want[i].gpu) {
            printf("  %s: routed %d, want %d\n", want[i].seed, got, want[i].gpu);
            wrong++;
        }
    }
    tb_jpeg_destroy(j);
    TB_CHECK(wrong == 0 && seen == (int)(sizeof want / sizeof want[0]), "%d of %d corpus seeds routed wrongly", wrong,
             seen);
}

int main(int argc, char **argv) {
    tbj_init();
    tbj_make_list("feed.txt", "feed", 30, 7, 5); /* 4 bad files, some progressive */
    tb_dataset ds;
    tbj_open_list("feed.txt", &ds);
    test_inline(&ds);
    test_gpu_flip(&ds);
    test_try_next(&ds);
    test_allocator(&ds);
    tb_dataset_close(&ds);

    /* the GPU path's set: 4 not-JPEG files, one corrupt inside (its end
     * marker kept: bad for libjpeg, and so for the emulated GPU decoder),
     * progressive files the GPU path leaves to the CPU */
    tbj_make_list("gpu.txt", "gpu", 30, 7, 5);
    tbj_write_damaged(tbj_path("gpu/s010.jpg"), 64, 48, 99); /* the scan cut short: corrupt data, then EOI */
    tbj_open_list("gpu.txt", &ds);
    test_gpu_emulated(&ds, 0, 0, 6);
    test_gpu_emulated(&ds, 3, 0, 12);
    test_gpu_emulated(&ds, 4, 1, 10);
    test_gpu_stages(&ds);
    test_stage_busy_window(&ds);
    tb_dataset_close(&ds);
    if (argc > 1) test_routing(argv[1]);
    tbj_cleanup();
    return tb_test_exit("test_loader_feed");
}
