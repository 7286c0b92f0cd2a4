/* test_batch_upload.c - the loader's batches into a model through
 * src/batch_upload (issue 15), on the CPU backend:
 *
 *   1. uint8 NHWC crops + flip flags, uploaded and turned into the input by
 *      the backend's input_u8 op, give exactly the float32 NCHW batches of
 *      the CPU transform (same crop boxes, same draws), step for step, over
 *      two epochs with bad files: pinned (asynchronous copies, lookahead)
 *      and pageable (synchronous copies).
 *   2. Release ordering: a loader slot never goes back to the loader while
 *      its upload is pending. The CPU backend's events are held pending
 *      (tb_cpu_event_hold) and its asynchronous copies are deferred until
 *      the event recorded after them is waited for (by the host, or by the
 *      compute stream), as a slow copy engine would: a slot released early
 *      would be refilled by the workers before its copy runs, and the input
 *      would then hold another batch's pixels. The upload must instead wait
 *      (forced waits counted) and report no release with a pending guard.
 *   3. Each staging buffer's next copy waits for the input op that read it.
 *   4. --decode gpu's device slots (host emulation of the decoder): the
 *      input op reads the slot, which goes back only after it.
 *   5. The seam with the asynchronous step (issue 14): tb_trainer_step
 *      queues each step (tb_batch_upload_apply inside it) and returns, the
 *      records come back later through tb_trainer_collect, the slots are
 *      released while steps are queued, copies deferred as above: losses
 *      and weights equal a synchronous trainer's on the CPU transform's
 *      float batches, bit for bit, and every record comes back once.
 *
 * `test_batch_upload cuda` (label gpu, ctest feed_upload_cuda): 1 on the
 * CUDA backend, real pinned memory, copy stream and events, exact against
 * the CPU transform; and --decode gpu with nvJPEG when the build has it:
 * labels exact, pixels within 30 dB PSNR of the CPU path (uncalibrated).
 *
 * Usage: test_batch_upload [cuda] (JPEGs made here, in a temporary directory). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "core/log.h"
#include "data/dataset.h"
#include "data/gpu_decode.h"
#include "data/loader.h"
#include "model/cpu/cpu_backend.h"
#include "model/model.h"
#include "src/feed/batch_source.h"
#include "src/feed/batch_upload.h"
#include "src/train/trainer.h"
#include "tests/tb_test.h"
#include "tests/tb_test_jpeg.h"

#define S 32
#define BATCH 4
#define NFILES 30

/* ---- the CPU backend with a slow copy engine ---------------------------------------
 * With `defer` on, a copy queued on a side stream is a job that reads its
 * source at some moment before the host can see it complete. Two moments
 * are modelled: when the compute stream waits for an event after it (the
 * job's bytes are delivered then, so that the CPU's input op, which runs at
 * once, reads them), and when the host sees an event recorded after it
 * complete (event_wait, or event_done answering 1): only then may the
 * source be reused. At that moment the source must still hold the bytes
 * the job was queued with (a checksum): a slot given back before would
 * have been refilled by the loader's workers, which is what a real copy
 * engine reading the pinned slot late would upload. The CPU backend's own
 * hold (tb_cpu_event_hold) keeps the events pending until waited for. */

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
    uint64_t sum;           /* FNV-1a of the source when queued */
    int delivered;          /* copied into dst (the compute stream waited for it) */
    long seq;
} copy_job;

static struct {
    tb_backend orig;        /* the CPU backend's own table */
    copy_job q[1024];
    int nq;
    long seq;               /* jobs queued so far */
    struct {
        const tb_event *e;
        long seq;           /* jobs queued before its last record */
    } ev[256];
    int nev;
    long deferred, completed, changed;  /* changed: completed after the source was reused */
    long stream_waits_on_copies;
    int defer;              /* 1: copies on a side stream are jobs */
} g_eng;

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static long *event_seq(const tb_event *e) {
    for (int i = 0; i < g_eng.nev; i++)
        if (g_eng.ev[i].e == e) return &g_eng.ev[i].seq;
    if (g_eng.nev == 256) TB_FATAL("test copy engine: too many events");
    g_eng.ev[g_eng.nev].e = e;
    g_eng.ev[g_eng.nev].seq = 0;
    return &g_eng.ev[g_eng.nev++].seq;
}

static void deliver(copy_job *j) {
    if (!j->delivered) memcpy(j->dst, j->src, j->bytes);
    j->delivered = 1;
}

/* The host sees every job queued before e's record complete. */
static void complete_upto(const tb_event *e) {
    long upto = *event_seq(e);
    int k = 0;
    for (int i = 0; i < g_eng.nq; i++) {
        copy_job *j = &g_eng.q[i];
        if (j->seq < upto) {
            deliver(j);
            if (fnv(j->src, j->bytes) != j->sum) g_eng.changed++;
            g_eng.completed++;
        } else {
            g_eng.q[k++] = *j;
        }
    }
    g_eng.nq = k;
}

static void eng_copy_async(tb_backend *be, void *dst, const void *src, size_t bytes, tb_stream *s) {
    if (!g_eng.defer || s == NULL) {
        g_eng.orig.copy_h2d_async(be, dst, src, bytes, s);
        return;
    }
    if (g_eng.nq == 1024) TB_FATAL("test copy engine queue full");
    g_eng.q[g_eng.nq++] = (copy_job){dst, src, bytes, fnv(src, bytes), 0, g_eng.seq++};
    g_eng.deferred++;
}

static void eng_record(tb_backend *be, tb_event *e, tb_stream *s) {
    g_eng.orig.event_record(be, e, s);
    *event_seq(e) = g_eng.seq;
}

static void eng_event_wait(tb_backend *be, tb_event *e) {
    g_eng.orig.event_wait(be, e);
    complete_upto(e);
}

static int eng_event_done(tb_backend *be, tb_event *e) {
    int d = g_eng.orig.event_done(be, e);
    if (d) complete_upto(e);
    return d;
}

/* The compute stream waits for e: the jobs before it have delivered their
 * bytes (a device-side wait: the host sees nothing complete). */
static void eng_stream_wait(tb_backend *be, tb_stream *s, tb_event *e) {
    g_eng.orig.stream_wait(be, s, e);
    long upto = *event_seq(e);
    int any = 0;
    for (int i = 0; i < g_eng.nq; i++)
        if (g_eng.q[i].seq < upto && !g_eng.q[i].delivered) deliver(&g_eng.q[i]), any = 1;
    g_eng.stream_waits_on_copies += any;
}

static tb_backend *make_backend(void) {
    tb_backend_opts bo;
    memset(&bo, 0, sizeof bo);
    bo.threads = 2;
    tb_backend *be = tb_cpu_backend_create(&bo);
    g_eng.orig = *be;
    be->copy_h2d_async = eng_copy_async;
    be->event_record = eng_record;
    be->event_wait = eng_event_wait;
    be->event_done = eng_event_done;
    be->stream_wait = eng_stream_wait;
    return be;
}

/* ---- sources ------------------------------------------------------------------------- */

static tb_loader_opts loader_opts(const tb_dataset *ds, int prefetch) {
    tb_loader_opts o;
    memset(&o, 0, sizeof o);
    o.ds = ds;
    o.batch = BATCH;
    o.image_size = S;
    o.train = 1;
    o.threads = 2;
    o.prefetch = prefetch;
    o.world = 1;
    o.seed = 11;
    o.format = TB_OUT_F32_NCHW;
    o.last_batch = TB_LAST_KEEP;
    return o;
}

/* The float batches of the CPU transform, every step of `epochs` epochs. */
static float *reference(const tb_dataset *ds, int epochs, int *steps_out, int32_t *labels, tb_decode_mode mode) {
    tb_loader_opts o = loader_opts(ds, 3);
    tb_feed_opts host = {.decode = mode}; /* float32 batches read on the host */
    tb_source *src = tb_source_loader(&o, &host, NULL);
    int64_t steps = tb_source_steps(src);
    size_t per = (size_t)BATCH * 3 * S * S;
    float *ref = calloc((size_t)(epochs * steps) * per, sizeof *ref);
    int k = 0;
    for (int e = 0; e < epochs; e++) {
        tb_source_start_epoch(src, e, 0);
        tb_source_batch b;
        while (tb_source_next(src, &b)) {
            TB_CHECK(b.in.kind == TB_INPUT_F32, "a float32 feed gave a batch of input kind %d", (int)b.in.kind);
            memcpy(ref + (size_t)k * per, b.in.f32, (size_t)b.n * 3 * S * S * sizeof(float));
            memcpy(labels + (size_t)k * BATCH, b.labels, (size_t)b.n * sizeof(int32_t));
            k++;
            tb_source_release(src);
        }
    }
    tb_source_destroy(src);
    *steps_out = k;
    return ref;
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){0, ms * 1000000L}, NULL); }

static int g_cpu = 1; /* the CPU backend with the slow copy engine; 0: CUDA */

typedef struct {
    int steps, pixel_bad, label_bad, n_bad, left;
    double sq_err_u8;       /* sum of squared differences in 0..255 units */
    long values;
    long changed;
    tb_upload_stats st;
    long forced_waits;
} feed_result;

/* Feeds `epochs` epochs through tb_source_feed and compares each step's
 * input activation and labels with the reference. */
static feed_result feed(tb_model *m, const tb_dataset *ds, const tb_feed_opts *fo, int prefetch, int hold,
                        int epochs, const float *ref, const int32_t *ref_labels, int gpu_emulated) {
    tb_backend *be = m->be;
    feed_result r;
    memset(&r, 0, sizeof r);
    tb_loader_opts o = loader_opts(ds, prefetch);
    tb_feed_opts f = *fo;
    if (gpu_emulated) { /* 1: the host emulation of the decoder; 2: nvJPEG */
        f.decode = TB_DECODE_GPU;
        o.gpu_device = -1;
        o.gpu_emulate = gpu_emulated == 1;
        o.gpu_emulate_fail_every = gpu_emulated == 1 ? 5 : 0;
    }
    tb_source *src = tb_source_loader(&o, &f, be);
    tb_source_feed(src, m);
    TB_CHECK(tb_source_upload(src) != NULL, "tb_source_feed made no upload");
    long fw0 = g_cpu ? tb_cpu_event_forced_waits(be) : 0;
    if (g_cpu) tb_cpu_event_hold(be, hold);
    g_eng.defer = hold;
    float *got = malloc((size_t)BATCH * 3 * S * S * sizeof *got);
    size_t per = (size_t)BATCH * 3 * S * S;
    int32_t labels[BATCH];
    for (int e = 0; e < epochs; e++) {
        tb_source_start_epoch(src, e, 0);
        tb_source_batch b;
        while (tb_source_next(src, &b)) {
            sleep_ms(hold ? 15 : 2); /* the workers refill every slot given back meanwhile */
            if (b.n > 0) {
                tb_batch_upload_apply(m, &b);
                tb_tensor x = tb_graph_act(&m->g, m->g.input, b.n);
                be->copy_d2h(be, got, x.data, (size_t)b.n * 3 * S * S * sizeof *got);
                const float *want = ref + (size_t)r.steps * per;
                for (size_t i = 0; i < (size_t)b.n * 3 * S * S; i++) {
                    r.pixel_bad += got[i] != want[i];
                    double d = (double)(got[i] - want[i]) * tb_imagenet_std[(i / ((size_t)S * S)) % 3] * 255.0;
                    r.sq_err_u8 += d * d;
                    r.values++;
                }
                be->copy_d2h(be, labels, m->labels, (size_t)b.n * sizeof(int32_t));
                for (int j = 0; j < b.n; j++) r.label_bad += labels[j] != ref_labels[(size_t)r.steps * BATCH + j];
            }
            r.steps++;
            tb_source_release(src);
        }
    }
    tb_upload_stats_get(tb_source_upload(src), &r.st);
    tb_source_destroy(src); /* waits for what is still in flight */
    r.left = g_eng.nq;      /* jobs the host never saw complete before their slot went back */
    while (g_eng.nq > 0) {  /* the copy engine finishes them now, reading the reused slots */
        deliver(&g_eng.q[0]);
        if (fnv(g_eng.q[0].src, g_eng.q[0].bytes) != g_eng.q[0].sum) g_eng.changed++;
        memmove(g_eng.q, g_eng.q + 1, (size_t)(--g_eng.nq) * sizeof g_eng.q[0]);
    }
    r.changed = g_eng.changed;
    g_eng.changed = 0;
    if (g_cpu) tb_cpu_event_hold(be, 0);
    g_eng.defer = 0;
    free(got);
    r.forced_waits = g_cpu ? tb_cpu_event_forced_waits(be) - fw0 : 0;
    return r;
}

/* Trains `epochs` epochs of the loader's batches (fo NULL: the float
 * batches of the CPU transform, else fed through an upload) with a trainer
 * in sync or async mode; returns the losses in step order, the final
 * weights in *params, the records collected in *nrec. */
static double *train_run(tb_backend *be, const tb_dataset *ds, const tb_feed_opts *fo, int async, int epochs,
                         float **params, int *nrec, tb_upload_stats *st) {
    tb_resnet_config cfg;
    TB_ASSERT(tb_resnet_config_init(&cfg, "resnet18", NFILES) == 0);
    tb_model_opts mo = tb_model_default_opts();
    tb_model *m = tb_model_create(&cfg, be, BATCH, S, S, &mo);
    tb_model_init(m, 5);
    tb_train_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.momentum = 0.9;
    hp.weight_decay = 5e-5;
    hp.bucket_bytes = (size_t)25 << 20;
    hp.overlap = 1;
    hp.transport = "mpi-host"; /* one rank: none */
    hp.device = -1;
    hp.timeout_s = 300;
    hp.async = async;
    hp.graph_warmup = 1;
    tb_trainer *t = tb_trainer_create(m, tb_comm_world(), NULL, &hp);
    tb_loader_opts o = loader_opts(ds, 3);
    tb_feed_opts host = {.decode = TB_DECODE_FAST}; /* float32 batches straight in */
    tb_source *src = tb_source_loader(&o, fo ? fo : &host, be);
    tb_source_feed(src, m); /* an upload for a uint8 feed; nothing for float32 */
    double *loss = calloc(256, sizeof *loss);
    int64_t *seen = calloc(256, sizeof *seen);
    *nrec = 0;
    int64_t step = 0;
    char err[256];
    tb_step_record rec;
    for (int e = 0; e < epochs; e++) {
        tb_source_start_epoch(src, e, 0);
        tb_source_batch b;
        while (tb_source_next(src, &b)) {
            TB_CHECK(tb_trainer_step(t, &b, step, 0.01, err, sizeof err) == 0, "step %lld: %s", (long long)step, err);
            tb_source_release(src); /* the step may still be queued: its slot waits for its copy */
            step++;
            while (tb_trainer_collect(t, &rec, 0) && *nrec < 256) loss[*nrec] = rec.loss, seen[(*nrec)++] = rec.step;
        }
    }
    while (tb_trainer_collect(t, &rec, 1) && *nrec < 256) loss[*nrec] = rec.loss, seen[(*nrec)++] = rec.step;
    for (int i = 0; i < *nrec; i++)
        TB_CHECK(seen[i] == i, "record %d is of step %lld (want each step once, in order)", i, (long long)seen[i]);
    TB_CHECK(*nrec == step && tb_trainer_pending(t) == 0, "%d records for %lld steps, %d pending", *nrec,
             (long long)step, tb_trainer_pending(t));
    if (st) tb_upload_stats_get(tb_source_upload(src), st);
    tb_source_destroy(src);
    tb_trainer_destroy(t);
    *params = malloc(m->pt.n_train * sizeof **params);
    be->copy_d2h(be, *params, m->params, m->pt.n_train * sizeof **params);
    tb_model_destroy(m);
    free(seen);
    return loss;
}

static void check_async_seam(tb_backend *be, const tb_dataset *ds) {
    const int epochs = 2;
    float *p_sync, *p_async;
    int n_sync, n_async;
    tb_upload_stats st;
    double *l_sync = train_run(be, ds, NULL, 0, epochs, &p_sync, &n_sync, NULL);
    tb_feed_opts pinned = {.u8 = 1, .pinned = 1};
    long changed0 = g_eng.changed;
    g_eng.defer = 1; /* copies read their slot only when waited for */
    double *l_async = train_run(be, ds, &pinned, 1, epochs, &p_async, &n_async, &st);
    g_eng.defer = 0;
    int loss_bad = 0;
    for (int i = 0; i < n_sync && i < n_async; i++) loss_bad += memcmp(&l_sync[i], &l_async[i], sizeof(double)) != 0;
    tb_resnet_config cfg;
    TB_ASSERT(tb_resnet_config_init(&cfg, "resnet18", NFILES) == 0);
    size_t np = 0;
    { /* the parameter count, from a model of the same shape */
        tb_model *m = tb_model_create(&cfg, be, BATCH, S, S, NULL);
        np = m->pt.n_train;
        tb_model_destroy(m);
    }
    size_t w_bad = 0;
    for (size_t i = 0; i < np; i++) w_bad += memcmp(&p_sync[i], &p_async[i], sizeof(float)) != 0;
    printf("# async step through the pinned upload: %d steps (first loss %.6f, last %.6f), %lld lookahead, %d "
           "losses and %zu of %zu weights differ from the sync step on float batches\n",
           n_async, n_async ? l_async[0] : NAN, n_async ? l_async[n_async - 1] : NAN, (long long)st.lookahead,
           loss_bad, w_bad, np);
    TB_CHECK(n_async == n_sync && n_sync > 0, "async %d records, sync %d", n_async, n_sync);
    TB_CHECK(loss_bad == 0 && w_bad == 0,
             "the async step through the upload differs from the sync step: %d losses, %zu weights", loss_bad, w_bad);
    TB_CHECK(st.lookahead > 0 && st.released_pending == 0 && g_eng.changed == changed0,
             "async seam: %lld lookahead, %lld released pending, %ld copies read a refilled slot",
             (long long)st.lookahead, (long long)st.released_pending, g_eng.changed - changed0);
    free(l_sync);
    free(l_async);
    free(p_sync);
    free(p_async);
}

/* The CUDA half (label gpu): real pinned memory, copy stream and events. */
static int main_cuda(const tb_dataset *ds) {
    char err[512];
    tb_backend_opts bo;
    memset(&bo, 0, sizeof bo);
    tb_backend *be = tb_backend_create("cuda", &bo, err, sizeof err);
    if (!be) {
        printf("SKIP: %s\n", err);
        return 77;
    }
    g_cpu = 0;
    printf("# %s: %s\n", be->name, be->device);
    tb_resnet_config cfg;
    TB_ASSERT(tb_resnet_config_init(&cfg, "resnet18", NFILES) == 0);
    tb_model_opts mo = tb_model_default_opts(); /* float32 NCHW input: read back exactly */
    tb_model *m = tb_model_create(&cfg, be, BATCH, S, S, &mo);
    const int epochs = 2;
    int32_t ref_labels[2 * NFILES + BATCH];
    int steps = 0;
    float *ref = reference(ds, epochs, &steps, ref_labels, TB_DECODE_FAST);
    tb_feed_opts pinned = {.u8 = 1, .pinned = 1}, pageable = {.u8 = 1, .pinned = 0};
    for (int prefetch = 2; prefetch <= 4; prefetch += 2) {
        feed_result a = feed(m, ds, &pinned, prefetch, 0, epochs, ref, ref_labels, 0);
        printf("# cuda pinned, prefetch %d: %lld lookahead, %lld slot waits, %lld released pending\n", prefetch,
               (long long)a.st.lookahead, (long long)a.st.slot_waits, (long long)a.st.released_pending);
        TB_CHECK(a.steps == steps && a.pixel_bad == 0 && a.label_bad == 0 && a.st.released_pending == 0,
                 "cuda pinned feed, prefetch %d: %d input values and %d labels differ, %lld released pending",
                 prefetch, a.pixel_bad, a.label_bad, (long long)a.st.released_pending);
    }
    feed_result b = feed(m, ds, &pageable, 3, 0, epochs, ref, ref_labels, 0);
    TB_CHECK(b.steps == steps && b.pixel_bad == 0 && b.label_bad == 0, "cuda pageable feed: %d values, %d labels differ",
             b.pixel_bad, b.label_bad);
    free(ref);
    /* --decode gpu with nvJPEG, when this build has it */
    tb_gpu_decoder_opts go = tb_gpu_decoder_defaults(-1, BATCH, S);
    tb_gpu_decoder *d = tb_gpu_decoder_create(&go, err, sizeof err);
    if (!d) {
        printf("# --decode gpu not checked: %s\n", err);
    } else {
        printf("# %s\n", tb_gpu_decoder_describe(d));
        tb_gpu_decoder_destroy(d);
        ref = reference(ds, epochs, &steps, ref_labels, TB_DECODE_PARTIAL);
        feed_result g = feed(m, ds, &pinned, 3, 0, epochs, ref, ref_labels, 2);
        double psnr = g.sq_err_u8 > 0 ? 10 * log10(255.0 * 255.0 / (g.sq_err_u8 / (double)g.values)) : 999;
        printf("# --decode gpu feed: %d steps, %d labels differ, %d of %ld values differ, PSNR %.2f dB\n", g.steps,
               g.label_bad, g.pixel_bad, g.values, psnr);
        TB_CHECK(g.steps == steps && g.label_bad == 0 && psnr >= 30.0 && g.st.released_pending == 0,
                 "--decode gpu feed: %d labels differ, PSNR %.2f dB against the CPU path (want >= 30)", g.label_bad,
                 psnr);
        free(ref);
    }
    tb_model_destroy(m);
    be->destroy(be);
    return -1;
}

int main(int argc, char **argv) {
    tbj_init();
    tbj_make_list("up.txt", "up", NFILES, 9, 4); /* bad files 8, 17, 26; some progressive */
    tb_dataset ds;
    tbj_open_list("up.txt", &ds);
    if (argc > 1 && strcmp(argv[1], "cuda") == 0) {
        int rc = main_cuda(&ds);
        tb_dataset_close(&ds);
        tbj_cleanup();
        return rc >= 0 ? rc : tb_test_exit("test_batch_upload cuda");
    }
    tb_backend *be = make_backend();
    tb_comm_info info;
    tb_comm_init(&argc, &argv, &info);
    check_async_seam(be, &ds);
    tb_resnet_config cfg;
    TB_ASSERT(tb_resnet_config_init(&cfg, "resnet18", NFILES) == 0);
    tb_model_opts mo = tb_model_default_opts();
    tb_model *m = tb_model_create(&cfg, be, BATCH, S, S, &mo);

    const int epochs = 2;
    int32_t ref_labels[2 * NFILES + BATCH];
    int steps = 0;
    float *ref = reference(&ds, epochs, &steps, ref_labels, TB_DECODE_FAST);
    TB_CHECK(steps == epochs * ((NFILES + BATCH - 1) / BATCH), "reference: %d steps", steps);

    tb_feed_opts pinned = {.u8 = 1, .pinned = 1}, pageable = {.u8 = 1, .pinned = 0};
    feed_result a = feed(m, &ds, &pinned, 3, 0, epochs, ref, ref_labels, 0);
    printf("# pinned, events complete: %d steps, %lld lookahead, %lld slot waits, %lld buffer waits, max held %d\n",
           a.steps, (long long)a.st.lookahead, (long long)a.st.slot_waits, (long long)a.st.buffer_waits,
           a.st.max_held);
    TB_CHECK(a.steps == steps && a.pixel_bad == 0 && a.label_bad == 0,
             "pinned uint8 feed: %d steps, %d input values and %d labels differ from the CPU transform", a.steps,
             a.pixel_bad, a.label_bad);
    TB_CHECK(a.st.lookahead > 0, "the next batch's copy never overlapped a step (lookahead 0 of %lld)",
             (long long)a.st.batches);
    TB_CHECK(a.st.slot_waits == 0 && a.forced_waits == 0,
             "with events that complete, the host waited %lld times for a slot (%ld forced)",
             (long long)a.st.slot_waits, a.forced_waits);
    TB_CHECK(a.st.buffer_waits > 0, "no copy waited for the input op that read its staging buffer");
    TB_CHECK(a.st.max_held >= 2, "never two slots held (copy of the next batch in flight): max %d", a.st.max_held);

    feed_result b = feed(m, &ds, &pageable, 3, 0, epochs, ref, ref_labels, 0);
    TB_CHECK(b.steps == steps && b.pixel_bad == 0 && b.label_bad == 0 && b.st.lookahead == 0,
             "pageable feed: %d steps, %d values and %d labels differ, lookahead %lld", b.steps, b.pixel_bad,
             b.label_bad, (long long)b.st.lookahead);

    long done0 = g_eng.completed;
    for (int prefetch = 2; prefetch <= 4; prefetch++) {
        feed_result c = feed(m, &ds, &pinned, prefetch, 1, epochs, ref, ref_labels, 0);
        printf("# pinned, prefetch %d, events held pending: %lld lookahead, %lld slot waits, %ld forced waits, "
               "%lld released, %lld released pending, %ld copies deferred, %ld read a reused slot\n",
               prefetch, (long long)c.st.lookahead, (long long)c.st.slot_waits, c.forced_waits,
               (long long)c.st.released, (long long)c.st.released_pending, g_eng.deferred, c.changed);
        TB_CHECK(c.steps == steps && c.pixel_bad == 0 && c.label_bad == 0,
                 "prefetch %d, copies pending until waited for: %d input values and %d labels differ (a slot "
                 "went back before its copy ran)",
                 prefetch, c.pixel_bad, c.label_bad);
        TB_CHECK(c.st.released_pending == 0, "prefetch %d: %lld slots released with their copy pending", prefetch,
                 (long long)c.st.released_pending);
        TB_CHECK(c.changed == 0 && c.left == 0,
                 "prefetch %d: %ld copies would have read a slot the loader had already refilled (%d never seen "
                 "complete before their slot went back)",
                 prefetch, c.changed, c.left);
        TB_CHECK(c.st.slot_waits > 0 && c.forced_waits >= c.st.slot_waits,
                 "prefetch %d: pending copies never made the host wait for a slot (%lld waits)", prefetch,
                 (long long)c.st.slot_waits);
        TB_CHECK(c.st.released >= c.st.batches - prefetch, "prefetch %d: %lld slots given back for %lld batches",
                 prefetch, (long long)c.st.released, (long long)c.st.batches);
    }
    TB_CHECK(g_eng.completed > done0 && g_eng.stream_waits_on_copies > 0,
             "the deferred copies did not run through the compute stream's waits (%ld completed)",
             g_eng.completed - done0);

    free(ref);

    /* --decode gpu's batches (host emulation of the decoder: "device" memory
     * is host memory on the CPU backend): no image copy, the input op reads
     * the loader slot, which goes back only after that op (events held
     * pending); the input equals the CPU transform with decode partial */
    ref = reference(&ds, epochs, &steps, ref_labels, TB_DECODE_PARTIAL);
    for (int hold = 0; hold <= 1; hold++) {
        feed_result g = feed(m, &ds, &pinned, 3, hold, epochs, ref, ref_labels, 1);
        printf("# --decode gpu (emulated), events %s: %lld slot waits, %lld released pending\n",
               hold ? "held pending" : "complete", (long long)g.st.slot_waits, (long long)g.st.released_pending);
        TB_CHECK(g.steps == steps && g.pixel_bad == 0 && g.label_bad == 0,
                 "GPU-path feed (hold %d): %d input values and %d labels differ from the CPU transform", hold,
                 g.pixel_bad, g.label_bad);
        TB_CHECK(g.st.released_pending == 0 && (!hold || g.st.slot_waits > 0),
                 "GPU-path feed (hold %d): %lld device slots released before the input op that reads them, %lld "
                 "waits",
                 hold, (long long)g.st.released_pending, (long long)g.st.slot_waits);
    }
    free(ref);
    tb_model_destroy(m);
    be->destroy(be);
    tb_dataset_close(&ds);
    tbj_cleanup();
    int rc = tb_test_exit("test_batch_upload");
    tb_comm_finalize();
    return rc;
}
