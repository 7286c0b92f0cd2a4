/* test_loader_cpu_share.c - --nvjpeg cpu=PCT on the host: a share of each
 * batch's rows decoded by the loader threads (libjpeg-turbo) beside the GPU
 * stage, as DALI's hw_decoder_load splits a batch between its hardware and
 * CUDA decoders.
 *   - the rule (tb_gpu_cpu_row): exactly floor(n * pct / 100) of a batch's
 *     n rows for every n and pct, row 0 always on the GPU, spread (no two
 *     neighbours on the CPU up to 50 %);
 *   - on the host emulation of the GPU decoder (which renders as the CPU
 *     path does) the batches of cpu=50 and cpu=90 are, byte for byte, the
 *     CPU path's (the same samples, crops, flips, labels and replacements:
 *     the split changes who decodes, never what);
 *   - the counters: every sample is counted once whoever decoded it
 *     (images = GPU + fallbacks + share, with files whose data is damaged
 *     replaced on either kind of row), the fallbacks (progressive and
 *     damaged files) only ever move into the share (a damaged file on a
 *     CPU row is the share's to replace), and the share of the samples the
 *     GPU took without it is the share of rows the rule gives at this batch
 *     size (cpu=90 of 4 rows is 3) within 0.15.
 * Usage: test_loader_cpu_share (JPEGs made here, in a temporary directory). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "data/gpu_decode.h"
#include "data/loader.h"
#include "data/transform.h"
#include "tests/tb_test.h"
#include "tests/tb_test_jpeg.h"
#include "tests/tb_test_loader.h"

enum { S = 24, BATCH = 4, EPOCHS = 2 };

/* Every batch of EPOCHS epochs: images [n][S][S][3], labels, flips; the counters. */
typedef struct {
    uint8_t *img;
    int32_t *labels;
    uint8_t *flip;
    int n;
    tb_loader_stats st;
} run_out;

static run_out run(const tb_loader_opts *o) {
    tb_loader *ld = tbl_make(o);
    size_t per = tb_sample_bytes(o->format, S), cap = (size_t)EPOCHS * (size_t)o->ds->n + BATCH;
    run_out r;
    memset(&r, 0, sizeof r);
    r.img = calloc(cap, per);
    r.labels = calloc(cap, sizeof *r.labels);
    r.flip = calloc(cap, 1);
    if (!r.img || !r.labels || !r.flip) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    for (int e = 0; e < EPOCHS; e++) {
        tb_loader_start_epoch(ld, e, 0);
        const tb_batch *b;
        while ((b = tb_loader_next(ld)) != NULL) {
            memcpy(r.img + (size_t)r.n * per, b->images, per * (size_t)b->n);
            memcpy(r.labels + r.n, b->labels, sizeof(int32_t) * (size_t)b->n);
            memcpy(r.flip + r.n, b->flip, (size_t)b->n);
            r.n += b->n;
            tb_loader_release(ld, b);
        }
    }
    tb_loader_get_stats(ld, &r.st);
    tb_loader_destroy(ld);
    return r;
}

static void run_free(run_out *r) { free(r->img), free(r->labels), free(r->flip); }

static void test_rule(void) {
    const int ns[] = {1, 2, 4, 7, 64, 256, 400}, pcts[] = {0, 1, 10, 33, 37, 50, 65, 90};
    int wrong = 0, neighbours = 0;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof pcts / sizeof pcts[0]; b++) {
            int n = ns[a], pct = pcts[b], cpu = 0, prev = 0;
            for (int j = 0; j < n; j++) {
                int c = tb_gpu_cpu_row(pct, j);
                cpu += c;
                neighbours += pct <= 50 && c && prev;
                prev = c;
            }
            if (cpu != n * pct / 100 || tb_gpu_cpu_row(pct, 0)) {
                if (wrong++ < 3) printf("  n %d, cpu=%d: %d rows on the CPU (want %d)\n", n, pct, cpu, n * pct / 100);
            }
        }
    TB_CHECK(wrong == 0, "tb_gpu_cpu_row: %d (n, pct) pairs give another count than floor(n * pct / 100), or row 0",
             wrong);
    TB_CHECK(neighbours == 0, "tb_gpu_cpu_row: %d neighbouring rows both on the CPU at a share up to 50 %%",
             neighbours);
}

/* The share on the emulated GPU path against the CPU path and against no share. */
static void test_share(const tb_dataset *ds) {
    tb_loader_opts o = tbl_opts(ds, BATCH, S, 3, 3, 7);
    o.gpu_flip = 1;
    o.decode = TB_DECODE_PARTIAL;
    run_out cpu = run(&o);
    o.decode = TB_DECODE_GPU;
    o.gpu_emulate = 1;
    run_out none = run(&o);
    const char *shares[] = {"cpu=50", "cpu=90"};
    const double want[] = {0.50, 0.90};
    for (int k = 0; k < 2; k++) {
        o.gpu_options = shares[k];
        run_out g = run(&o);
        size_t per = (size_t)S * S * 3;
        int same = g.n == cpu.n && memcmp(g.img, cpu.img, per * (size_t)cpu.n) == 0 &&
                   memcmp(g.labels, cpu.labels, sizeof(int32_t) * (size_t)cpu.n) == 0 &&
                   memcmp(g.flip, cpu.flip, (size_t)cpu.n) == 0 && g.st.skipped == cpu.st.skipped;
        TB_CHECK(same, "--nvjpeg %s: the batches differ from the CPU path's (%d against %d samples)", shares[k], g.n,
                 cpu.n);
        printf("# --nvjpeg %s: %lld decoded by the \"GPU\", %lld by the CPU's share, %lld by the CPU instead; "
               "without the share %lld, 0, %lld\n",
               shares[k], (long long)g.st.gpu_decoded, (long long)g.st.gpu_cpu_share, (long long)g.st.gpu_to_cpu,
               (long long)none.st.gpu_decoded, (long long)none.st.gpu_to_cpu);
        /* a damaged file appears 2 x 4 times in the two epochs: at most that many fallbacks become the share's */
        TB_CHECK(none.st.gpu_cpu_share == 0 && g.st.images == none.st.images && g.st.gpu_to_cpu <= none.st.gpu_to_cpu &&
                     none.st.gpu_to_cpu - g.st.gpu_to_cpu <= 2 * 4,
                 "--nvjpeg %s: images %lld against %lld; fallbacks %lld against %lld (want fewer by at most 8)",
                 shares[k], (long long)g.st.images, (long long)none.st.images, (long long)g.st.gpu_to_cpu,
                 (long long)none.st.gpu_to_cpu);
        TB_CHECK(g.st.images == g.st.gpu_decoded + g.st.gpu_to_cpu + g.st.gpu_cpu_share &&
                     none.st.images == none.st.gpu_decoded + none.st.gpu_to_cpu,
                 "--nvjpeg %s: a sample counted twice or not at all: %lld images against %lld + %lld + %lld",
                 shares[k], (long long)g.st.images, (long long)g.st.gpu_decoded, (long long)g.st.gpu_to_cpu,
                 (long long)g.st.gpu_cpu_share);
        /* batches of 4: cpu=50 puts rows 1 and 3 on the CPU, cpu=90 rows 1, 2 and 3 (floor(3.6) = 3: 75 %);
         * the share of the decodable samples follows within the set's mix of progressive files and rows */
        double got = none.st.gpu_decoded > 0 ? (double)g.st.gpu_cpu_share / (double)none.st.gpu_decoded : 0;
        double rows = (double)(BATCH * (int)(want[k] * 100) / 100) / BATCH;
        TB_CHECK(got > rows - 0.15 && got < rows + 0.15, "--nvjpeg %s: %.2f of the decodable samples on the CPU (%.2f of "
                 "the rows, want within 0.15)", shares[k], got, rows);
        run_free(&g);
    }
    run_free(&cpu);
    run_free(&none);
}

int main(void) {
    tbj_init();
    tbj_make_list("share.txt", "share", 60, 11, 5); /* bad files and progressive ones among them */
    /* and files whose headers pass and whose data is damaged: the CPU's render fails on them after the
     * routing, and the replacement on the same row must count once */
    const int damaged[4] = {13, 24, 37, 48}; /* neither "not a jpeg" (i % 11 == 10) nor progressive (i % 5 == 0) */
    for (int d = 0; d < 4; d++) {
        char name[32];
        snprintf(name, sizeof name, "share/s%03d.jpg", damaged[d]);
        tbj_write_damaged(tbj_path(name), 64, 48, 40 + (uint64_t)d);
    }
    tb_dataset ds;
    tbj_open_list("share.txt", &ds);
    test_rule();
    test_share(&ds);
    tb_dataset_close(&ds);
    tbj_cleanup();
    return tb_test_exit("test_loader_cpu_share");
}
