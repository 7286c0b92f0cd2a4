/* test_data.c - the data path without Python: crop geometry, resampling
 * invariants, the loader's sharding, thread-count independence, resume,
 * output layouts, bad-file handling (--strict-data included) and the
 * dataset index (the last two in test_data_files.c). The Pillow/torchvision comparisons are in data_ref.py.
 *
 * Usage: test_data /path/to/trainbench
 * Every JPEG it needs is made here with TurboJPEG, in a temporary directory
 * that is removed at the end. */
#include "tests/test_data.h"

char g_dir[256];
const char *g_bin;
int tb_test_failures, tb_test_checks; /* tb_test.h, shared with test_data_files.c */

/* ---- geometry --------------------------------------------------------------------------- */

typedef struct {
    double v;
} const_draw;
static double draw_const(void *ctx) { return ((const_draw *)ctx)->v; }
static double draw_rng(void *ctx) { return tb_rng_uniform((tb_rng *)ctx); }

static void test_geometry(void) {
    /* fallback path: draws that always ask for more than the image */
    const_draw hi = {0.999999};
    tb_box b = tb_rrc_box(100, 1000, draw_const, &hi); /* wide: clamp to ratio 4/3 */
    TB_CHECK(b.height == 100 && b.width == 133 && b.top == 0 && b.left == 433,
             "fallback wide: got (%d,%d,%d,%d), want (0,433,100,133)", b.top, b.left, b.height, b.width);
    b = tb_rrc_box(1000, 100, draw_const, &hi); /* tall: clamp to ratio 3/4 */
    TB_CHECK(b.width == 100 && b.height == 133 && b.left == 0 && b.top == 433,
             "fallback tall: got (%d,%d,%d,%d), want (433,0,133,100)", b.top, b.left, b.height, b.width);
    b = tb_rrc_box(300, 300, draw_const, &hi); /* square, ratio 4/3 never fits: whole image */
    TB_CHECK(b.top == 0 && b.left == 0 && b.height == 300 && b.width == 300, "fallback square: (%d,%d,%d,%d)", b.top,
             b.left, b.height, b.width);

    /* random boxes: inside the image, area and aspect within the ranges (up to rounding) */
    tb_rng r;
    tb_rng_seed(&r, 5, 5);
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        int H = 16 + (int)tb_rng_below(&r, 1500), W = 16 + (int)tb_rng_below(&r, 1500);
        tb_box q = tb_rrc_box(H, W, draw_rng, &r);
        int inside = q.top >= 0 && q.left >= 0 && q.height >= 1 && q.width >= 1 && q.top + q.height <= H &&
                     q.left + q.width <= W;
        double ar = (double)q.width / q.height, frac = (double)q.width * q.height / ((double)W * H);
        int whole = q.height == H || q.width == W; /* fallback crops may hit the limits */
        int ranges = whole || (ar > 0.75 * (1 - 2.0 / q.height) - 0.02 && ar < 4.0 / 3 * (1 + 2.0 / q.height) + 0.02 &&
                               frac > 0.08 * 0.8 && frac <= 1.0);
        if (!inside || !ranges) {
            if (bad++ < 5)
                printf("box %d: H %d W %d -> (%d,%d,%d,%d) ar %.3f frac %.3f\n", i, H, W, q.top, q.left, q.height,
                       q.width, ar, frac);
        }
    }
    TB_CHECK(bad == 0, "%d of 20000 random crop boxes outside the image or the scale/ratio ranges", bad);

    /* eval: 500x375 (W x H) at S=224 -> resize to 341x256, centre crop at
     * (round(16.0), round(58.5)) = (16, 58): Python rounds half to even */
    tb_geometry g = tb_geometry_eval(375, 500, 224);
    TB_CHECK(g.out_w == 341 && g.out_h == 256 && g.out_y0 == 16 && g.out_x0 == 58,
             "eval 500x375: got out %dx%d at (%d,%d), want 341x256 at (16,58)", g.out_w, g.out_h, g.out_y0, g.out_x0);
    g = tb_geometry_eval(256, 339, 224); /* (339-224)/2 = 57.5: Python's round gives 58 */
    TB_CHECK(g.out_w == 339 && g.out_x0 == 58, "eval 339x256: out_w %d at x %d, want 339 at 58", g.out_w, g.out_x0);
    g = tb_geometry_eval(333, 333, 224);
    TB_CHECK(g.out_w == 256 && g.out_h == 256 && g.out_x0 == 16, "eval square: %dx%d at %d", g.out_w, g.out_h,
             g.out_x0);
    g = tb_geometry_eval(500, 375, 224); /* portrait: int(256*500/375) = 341 */
    TB_CHECK(g.out_w == 256 && g.out_h == 341 && g.out_y0 == 58, "eval portrait: %dx%d at %d", g.out_w, g.out_h,
             g.out_y0);
    TB_CHECK(tb_eval_resize_size(224) == 256 && tb_eval_resize_size(160) == 183 && tb_eval_resize_size(288) == 329,
             "eval resize sizes: %d %d %d", tb_eval_resize_size(224), tb_eval_resize_size(160),
             tb_eval_resize_size(288));
}

/* ---- resampling invariants -------------------------------------------------------------- */

static void test_resample(void) {
    int W = 97, H = 61;
    uint8_t *src = malloc((size_t)W * H * 4);
    tb_rng r;
    tb_rng_seed(&r, 9, 9);
    for (int i = 0; i < W * H * 4; i++) src[i] = (uint8_t)tb_rng_below(&r, 256);
    tb_axis ax = {0}, ay = {0}, bx = {0}, by = {0};
    uint8_t *tmp = NULL;
    size_t cap = 0;

    /* a window of the outputs equals the same window of the whole output,
     * and a flipped resize is the mirror image of the plain one */
    int OW = 40, OH = 29;
    uint8_t *full = malloc((size_t)OW * OH * 4), *win = malloc((size_t)OW * OH * 4);
    uint8_t *mir = malloc((size_t)OW * OH * 4);
    tb_axis_plan(&ax, W, 0, W, OW, 0, OW);
    tb_axis_plan(&ay, H, 0, H, OH, 0, OH);
    tb_resample_rgbx(src, W * 4, 0, 0, &ax, &ay, 0, full, OW * 4, &tmp, &cap);
    tb_resample_rgbx(src, W * 4, 0, 0, &ax, &ay, 1, mir, OW * 4, &tmp, &cap);
    int mdiff = 0;
    for (int y = 0; y < OH; y++)
        for (int x = 0; x < OW; x++)
            mdiff += memcmp(mir + ((size_t)y * OW + x) * 4, full + ((size_t)y * OW + OW - 1 - x) * 4, 3) != 0;
    TB_CHECK(mdiff == 0, "flipped resize is not the mirror image (%d pixels differ)", mdiff);
    int x0 = 7, y0 = 5, nw = 20, nh = 13;
    tb_axis_plan(&bx, W, 0, W, OW, x0, nw);
    tb_axis_plan(&by, H, 0, H, OH, y0, nh);
    /* hand the resampler only the inputs the window reads */
    const uint8_t *sub = src + ((size_t)by.in_lo * W + bx.in_lo) * 4;
    tb_resample_rgbx(sub, W * 4, bx.in_lo, by.in_lo, &bx, &by, 0, win, nw * 4, &tmp, &cap);
    int diff = 0;
    for (int y = 0; y < nh; y++)
        for (int x = 0; x < nw; x++)
            diff += memcmp(win + ((size_t)y * nw + x) * 4, full + ((size_t)(y0 + y) * OW + x0 + x) * 4, 3) != 0;
    TB_CHECK(diff == 0, "window of a resize differs from the whole resize in %d pixels", diff);
    TB_CHECK(bx.in_lo > 0 && bx.in_hi < W, "window reads inputs [%d,%d) of %d: not narrowed", bx.in_lo, bx.in_hi, W);

    /* a same-size resize is a copy, and flagged as one */
    tb_axis_plan(&ax, W, 0, W, W, 0, W);
    TB_CHECK(ax.identity, "same-size plan not flagged as identity");
    uint8_t *same = malloc((size_t)W * H * 4);
    tb_axis_plan(&ay, H, 0, H, H, 0, H);
    tb_resample_rgbx(src, W * 4, 0, 0, &ax, &ay, 0, same, W * 4, &tmp, &cap);
    TB_CHECK(memcmp(same, src, (size_t)W * H * 4) == 0, "same-size resize is not a copy");

    /* a constant picture stays constant, whatever the scale */
    memset(src, 173, (size_t)W * H * 4);
    tb_axis_plan(&ax, W, 3.25, 80.5, 23, 0, 23);
    tb_axis_plan(&ay, H, 1.5, 60.0, 71, 0, 71);
    uint8_t *o = malloc((size_t)23 * 71 * 4);
    tb_resample_rgbx(src, W * 4, 0, 0, &ax, &ay, 0, o, 23 * 4, &tmp, &cap);
    int off = 0;
    for (int i = 0; i < 23 * 71 * 4; i++) off += o[i] != 173;
    TB_CHECK(off == 0, "constant picture changed in %d values", off);
    /* weights of every output sum to 1 (within the fixed-point rounding) */
    int badsum = 0;
    for (int i = 0; i < ax.nout; i++) {
        int64_t s = 0;
        for (int t = 0; t < ax.taps[i]; t++) s += ax.coef[(size_t)i * ax.ksize + t];
        if (llabs(s - (1 << TB_RESAMPLE_BITS)) > ax.taps[i]) badsum++;
    }
    TB_CHECK(badsum == 0, "%d outputs whose weights do not sum to 1", badsum);
    free(o);
    free(same);
    free(full);
    free(mir);
    free(win);
    free(src);
    free(tmp);
    tb_axis_free(&ax);
    tb_axis_free(&ay);
    tb_axis_free(&bx);
    tb_axis_free(&by);
}

/* ---- decode paths agree ------------------------------------------------------------------- */

static void test_decode_paths(void) {
    tb_sampler *sp = tb_sampler_create();
    const int S = 64;
    uint8_t *a = malloc((size_t)4 * S * S), *b = malloc((size_t)4 * S * S), *c = malloc((size_t)4 * S * S);
    const int sub[4] = {TJSAMP_420, TJSAMP_422, TJSAMP_444, TJSAMP_GRAY};
    tb_rng r;
    tb_rng_seed(&r, 3, 3);
    int mismatch = 0, cases = 0, scaled = 0;
    double worst_mean = 0;
    for (int k = 0; k < 24; k++) {
        int w = 70 + (int)tb_rng_below(&r, 300), h = 70 + (int)tb_rng_below(&r, 300);
        int flags = k % 3 == 1 ? TJFLAG_PROGRESSIVE : 0;
        unsigned long n;
        unsigned char *jpg = make_jpeg(w, h, sub[k % 4], flags, TJPF_RGB, (uint64_t)k, &n);
        for (int rep = 0; rep < 4; rep++) {
            tb_geometry g;
            if (rep == 0) {
                g = tb_geometry_eval(h, w, S);
            } else {
                tb_box bx = tb_rrc_box(h, w, draw_rng, &r);
                g = tb_geometry_from_box(bx, S, rep & 1);
            }
            char err[256];
            tb_render_info ia, ib, ic;
            int ra = tb_sample_render(sp, jpg, n, TB_DECODE_FULL, 1, S, NULL, NULL, &g, a, &ia, err, sizeof err);
            int rb = tb_sample_render(sp, jpg, n, TB_DECODE_PARTIAL, 1, S, NULL, NULL, &g, b, &ib, err, sizeof err);
            int rc = tb_sample_render(sp, jpg, n, TB_DECODE_FAST, 1, S, NULL, NULL, &g, c, &ic, err, sizeof err);
            cases++;
            TB_CHECK(ra == 0 && rb == 0 && rc == 0, "render failed (%d %d %d): %s", ra, rb, rc, err);
            /* partial decode (skip_scanlines + crop_scanline) is bit-exact */
            for (int i = 0; i < S * S; i++)
                if (memcmp(a + 4 * i, b + 4 * i, 3) != 0) {
                    mismatch++;
                    break;
                }
            TB_CHECK(ib.dec_w * ib.dec_h <= ia.dec_w * ia.dec_h, "partial decoded more than the whole image");
            double sum = 0;
            for (int i = 0; i < 4 * S * S; i++) sum += i % 4 == 3 ? 0 : abs((int)a[i] - (int)c[i]);
            double mean = sum / (3.0 * S * S);
            if (mean > worst_mean) worst_mean = mean;
            scaled += ic.scale_num < 8;
        }
        tjFree(jpg);
    }
    TB_CHECK(mismatch == 0, "partial decode differs from whole-image decode in %d of %d renders", mismatch, cases);
    TB_CHECK(scaled > 0, "no render used DCT scaling: the fast path was not exercised");
    TB_CHECK(worst_mean < 4.0, "DCT-scaled renders differ by %.2f on average (0..255) from full decode", worst_mean);
    printf("decode paths: %d renders, partial == full bitwise, %d DCT-scaled, worst mean |fast-full| %.3f\n", cases,
           scaled, worst_mean);
    free(a);
    free(b);
    free(c);
    tb_sampler_destroy(sp);
}

/* ---- loader ------------------------------------------------------------------------------- */

/* n small JPEGs listed with label = index, so that a label names its sample. */
static void make_list(const char *list, const char *sub, int n, int bad_every) {
    mkdir(path(sub), 0777);
    FILE *f = fopen(path(list), "w");
    const int ss[3] = {TJSAMP_420, TJSAMP_444, TJSAMP_422};
    for (int i = 0; i < n; i++) {
        char name[128], rel[160];
        snprintf(name, sizeof name, "%s/s%03d.jpg", sub, i);
        snprintf(rel, sizeof rel, "%s", name);
        if (bad_every && i % bad_every == bad_every - 1)
            write_bytes(path(name), "not a jpeg\n", 11);
        else
            write_jpeg(path(name), 40 + i % 17, 30 + i % 13, ss[i % 3], 0, TJPF_RGB, (uint64_t)i);
        fprintf(f, "%s %d\n", rel, i);
    }
    fclose(f);
}

static tb_last_batch g_last_batch = TB_LAST_KEEP; /* open_loader's --last-batch */

static tb_loader *open_loader(tb_dataset *ds, int threads, int batch, int world, int rank, int train,
                              tb_out_format fmt) {
    tb_loader_opts o;
    memset(&o, 0, sizeof o);
    o.ds = ds;
    o.last_batch = g_last_batch;
    o.batch = batch;
    o.image_size = 24;
    o.train = train;
    o.threads = threads;
    o.prefetch = 3;
    o.rank = rank;
    o.world = world;
    o.seed = 42;
    o.format = fmt;
    char err[256];
    tb_loader *ld = tb_loader_create(&o, err, sizeof err);
    TB_CHECK(ld != NULL, "tb_loader_create: %s", err);
    if (!ld) exit(1);
    return ld;
}

static void test_sharding(void) {
    make_list("shard.txt", "shard", 23, 0);
    tb_dataset ds;
    char err[256];
    TB_CHECK(tb_dataset_open(path("shard.txt"), &ds, err, sizeof err) == 0, "open list: %s", err);
    const int worlds[3] = {1, 2, 3}, batches[2] = {4, 5};
    for (int wi = 0; wi < 3; wi++)
        for (int bi = 0; bi < 2; bi++) {
            int world = worlds[wi], batch = batches[bi];
            int seen[23] = {0};
            int64_t steps = -1;
            int ok_counts = 1;
            for (int rank = 0; rank < world; rank++) {
                tb_loader *ld = open_loader(&ds, 2, batch, world, rank, 1, TB_OUT_U8_NHWC);
                if (steps < 0) steps = tb_loader_steps_per_epoch(ld);
                TB_CHECK(tb_loader_steps_per_epoch(ld) == (23 + world * batch - 1) / (world * batch),
                         "world %d batch %d: %lld steps", world, batch, (long long)tb_loader_steps_per_epoch(ld));
                tb_loader_start_epoch(ld, 1, 0);
                const tb_batch *b;
                int64_t got_steps = 0;
                while ((b = tb_loader_next(ld)) != NULL) {
                    int64_t left = 23 - b->step * world * batch;
                    int want = left >= world * batch ? batch
                                                     : (int)(left / world + (rank < left % world ? 1 : 0));
                    if (b->n != want) ok_counts = 0;
                    for (int i = 0; i < b->n; i++) seen[b->labels[i]]++;
                    got_steps++;
                    tb_loader_release(ld, b);
                }
                TB_CHECK(got_steps == steps, "world %d rank %d: %lld steps, others %lld", world, rank,
                         (long long)got_steps, (long long)steps);
                tb_loader_destroy(ld);
            }
            int once = 1;
            for (int i = 0; i < 23; i++) once &= seen[i] == 1;
            TB_CHECK(once, "world %d batch %d: not every sample exactly once per epoch", world, batch);
            TB_CHECK(ok_counts, "world %d batch %d: per-rank counts differ from the documented split", world, batch);
        }

    /* each epoch has its own order: a permutation, different from the last */
    int order[2][23], got = 0;
    tb_loader *lo = open_loader(&ds, 2, 4, 1, 0, 1, TB_OUT_U8_NHWC);
    for (int e = 0; e < 2; e++) {
        tb_loader_start_epoch(lo, e, 0);
        const tb_batch *b;
        int k = 0;
        while ((b = tb_loader_next(lo)) != NULL) {
            for (int i = 0; i < b->n && k < 23; i++) order[e][k++] = b->labels[i];
            tb_loader_release(lo, b);
        }
        got += k;
    }
    tb_loader_destroy(lo);
    TB_CHECK(got == 46 && memcmp(order[0], order[1], sizeof order[0]) != 0,
             "epochs 0 and 1 visit the samples in the same order");
    tb_dataset_close(&ds);

    /* a rank with nothing in the last step still gets that step (n = 0) */
    make_list("two.txt", "two", 2, 0);
    TB_CHECK(tb_dataset_open(path("two.txt"), &ds, err, sizeof err) == 0, "open list: %s", err);
    tb_loader *ld = open_loader(&ds, 1, 1, 3, 2, 1, TB_OUT_U8_NHWC);
    tb_loader_start_epoch(ld, 0, 0);
    const tb_batch *b = tb_loader_next(ld);
    TB_CHECK(b && b->n == 0 && b->step == 0, "rank 2 of 3 with 2 samples: want one batch with n=0");
    if (b) tb_loader_release(ld, b);
    TB_CHECK(tb_loader_next(ld) == NULL, "rank 2 of 3: more than one step");
    tb_loader_destroy(ld);
    tb_dataset_close(&ds);
}

/* All batches of `epochs` epochs, images and labels, concatenated. */
static uint8_t *run_epochs(tb_dataset *ds, int threads, int epochs, int train, tb_out_format fmt, size_t *len,
                           int64_t *skipped) {
    tb_loader *ld = open_loader(ds, threads, 4, 1, 0, train, fmt);
    size_t per = tb_sample_bytes(fmt, 24) + sizeof(int32_t), cap = (size_t)epochs * (size_t)(ds->n + 8) * per, n = 0;
    uint8_t *out = calloc(cap, 1);
    for (int e = 0; e < epochs; e++) {
        tb_loader_start_epoch(ld, e, 0);
        const tb_batch *b;
        while ((b = tb_loader_next(ld)) != NULL) {
            size_t img = tb_sample_bytes(fmt, 24) * (size_t)b->n;
            memcpy(out + n, b->images, img);
            n += img;
            memcpy(out + n, b->labels, sizeof(int32_t) * (size_t)b->n);
            n += sizeof(int32_t) * (size_t)b->n;
            tb_loader_release(ld, b);
        }
    }
    tb_loader_stats st;
    tb_loader_get_stats(ld, &st);
    if (skipped) *skipped = st.skipped;
    tb_loader_destroy(ld);
    *len = n;
    return out;
}

static void test_threads_and_formats(void) {
    make_list("thr.txt", "thr", 30, 7); /* every 7th file is bad */
    tb_dataset ds;
    char err[256];
    TB_CHECK(tb_dataset_open(path("thr.txt"), &ds, err, sizeof err) == 0, "open list: %s", err);
    size_t n1, n4, n1b;
    int64_t sk1, sk4;
    uint8_t *a = run_epochs(&ds, 1, 2, 1, TB_OUT_F32_NCHW, &n1, &sk1);
    uint8_t *b = run_epochs(&ds, 4, 2, 1, TB_OUT_F32_NCHW, &n4, &sk4);
    uint8_t *c = run_epochs(&ds, 1, 2, 1, TB_OUT_F32_NCHW, &n1b, NULL);
    TB_CHECK(n1 == n4 && memcmp(a, b, n1) == 0, "1 and 4 threads give different batches (%zu vs %zu bytes)", n1, n4);
    TB_CHECK(n1 == n1b && memcmp(a, c, n1) == 0, "two runs with the same seed differ");
    TB_CHECK(sk1 == sk4 && sk1 == 2 * 4, "skipped %lld (1 thread) and %lld (4 threads); want 8 (4 bad x 2 epochs)",
             (long long)sk1, (long long)sk4);
    size_t half = n1 / 2;
    TB_CHECK(memcmp(a, a + half, half) != 0, "epochs 0 and 1 are identical: no reshuffle/augmentation per epoch");
    free(a);
    free(b);
    free(c);

    /* the three layouts hold the same pixels */
    size_t nu, nc, nh;
    uint8_t *u8 = run_epochs(&ds, 2, 1, 0, TB_OUT_U8_NHWC, &nu, NULL);
    uint8_t *fc = run_epochs(&ds, 2, 1, 0, TB_OUT_F32_NCHW, &nc, NULL);
    uint8_t *fh = run_epochs(&ds, 2, 1, 0, TB_OUT_F32_NHWC, &nh, NULL);
    const int S = 24, P = S * S;
    size_t su = (size_t)3 * P, sf = su * sizeof(float);
    int samples = (int)(nu / (su + 4)), bad = 0;
    /* batches are [images of n][labels of n]; walk batch by batch (batch 4, last may be short) */
    size_t ou = 0, of = 0;
    for (int left = samples; left > 0;) {
        int n = left < 4 ? left : 4;
        for (int j = 0; j < n; j++) {
            const uint8_t *pu = u8 + ou + (size_t)j * su;
            const float *pc = (const float *)(void *)(fc + of + (size_t)j * sf);
            const float *ph = (const float *)(void *)(fh + of + (size_t)j * sf);
            for (int i = 0; i < P; i++)
                for (int ch = 0; ch < 3; ch++) {
                    float want = ((float)pu[3 * i + ch] / 255.0f - tb_imagenet_mean[ch]) / tb_imagenet_std[ch];
                    if (pc[(size_t)ch * P + i] != want || ph[3 * i + ch] != want) bad++;
                }
        }
        ou += (size_t)n * su + (size_t)n * 4;
        of += (size_t)n * sf + (size_t)n * 4;
        left -= n;
    }
    TB_CHECK(samples == 30 && bad == 0, "layouts: %d samples, %d values differ between u8/f32 NCHW/f32 NHWC", samples,
             bad);
    free(u8);
    free(fc);
    free(fh);

    /* resume at step k gives the same batches as steps k.. of a full epoch;
     * abandoning an epoch half way leaves the loader usable */
    tb_loader *ld = open_loader(&ds, 3, 4, 1, 0, 1, TB_OUT_U8_NHWC);
    tb_loader_start_epoch(ld, 5, 0);
    uint8_t full[8][24 * 24 * 3 * 4];
    int64_t steps = tb_loader_steps_per_epoch(ld), k = 0;
    const tb_batch *bt;
    while ((bt = tb_loader_next(ld)) != NULL) {
        memcpy(full[k++], bt->images, tb_sample_bytes(TB_OUT_U8_NHWC, 24) * (size_t)bt->n);
        tb_loader_release(ld, bt);
    }
    TB_CHECK(k == steps && steps == 8, "epoch of 30 at batch 4: %lld steps", (long long)k);
    tb_loader_start_epoch(ld, 9, 0); /* abandoned after one batch */
    bt = tb_loader_next(ld);
    if (bt) tb_loader_release(ld, bt);
    tb_loader_start_epoch(ld, 5, 3);
    int same = 1;
    for (k = 3; (bt = tb_loader_next(ld)) != NULL; k++) {
        same &= bt->step == k && memcmp(full[k], bt->images, tb_sample_bytes(TB_OUT_U8_NHWC, 24) * (size_t)bt->n) == 0;
        tb_loader_release(ld, bt);
    }
    TB_CHECK(same && k == steps, "resume at step 3 differs from the full epoch (ended at %lld)", (long long)k);
    tb_loader_destroy(ld);
    tb_dataset_close(&ds);
}

/* A sample used twice in one epoch (--last-batch pad's repeats, a bad
 * file's stand-in) gets its own crop and flip each time, as a DataLoader
 * draws afresh for every index: no two places hold the same pixels. */
static void test_repeats_draw_afresh(void) {
    make_list("rep.txt", "rep", 23, 7); /* files 6, 13 and 20 are bad */
    tb_dataset ds;
    char err[256];
    TB_CHECK(tb_dataset_open(path("rep.txt"), &ds, err, sizeof err) == 0, "open list: %s", err);
    g_last_batch = TB_LAST_PAD;
    tb_loader *ld = open_loader(&ds, 2, 10, 1, 0, 1, TB_OUT_U8_NHWC); /* 3 steps: 30 places for 20 good files */
    g_last_batch = TB_LAST_KEEP;
    const size_t per = tb_sample_bytes(TB_OUT_U8_NHWC, 24);
    uint8_t *img = calloc(30, per);
    int label[30], n = 0;
    tb_loader_start_epoch(ld, 2, 0);
    const tb_batch *b;
    while ((b = tb_loader_next(ld)) != NULL) {
        for (int i = 0; i < b->n && n < 30; i++, n++) {
            memcpy(img + (size_t)n * per, b->images + (size_t)i * per, per);
            label[n] = b->labels[i];
        }
        tb_loader_release(ld, b);
    }
    tb_loader_destroy(ld);
    int repeats = 0, same = 0; /* places whose sample came earlier; of them, pixel copies of an earlier place */
    for (int q = 0; q < n; q++) {
        int seen = 0, copy = 0;
        for (int p = 0; p < q; p++)
            if (label[p] == label[q]) {
                seen = 1;
                copy |= memcmp(img + (size_t)p * per, img + (size_t)q * per, per) == 0;
            }
        repeats += seen;
        same += copy;
    }
    TB_CHECK(n == 30 && repeats == 10 && same == 0,
             "pad + 3 bad files: %d places, %d repeats, %d of them the pixels of an earlier place (want 30, 10, 0)", n,
             repeats, same);
    free(img);
    tb_dataset_close(&ds);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_data /path/to/trainbench\n");
        return 2;
    }
    g_bin = argv[1];
    tb_test_tmp(g_dir, sizeof g_dir, "tb_data_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_geometry();
    test_resample();
    test_decode_paths();
    test_sharding();
    test_threads_and_formats();
    test_repeats_draw_afresh();
    test_bad_files();
    test_dataset();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) printf("warning: could not remove %s\n", g_dir);
    return tb_test_exit("test_data");
}
