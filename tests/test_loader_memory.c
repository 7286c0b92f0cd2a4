/* test_loader_memory.c - host memory stays flat over a long loader run
 * (issue 31; DALI's users report growth over time): one loader, its
 * workers persistent, runs 100 epochs of a small set; the process's
 * resident set size after the first 30 (the allocators' arenas settled,
 * every buffer grown to the largest crop and file it meets: measured here,
 * the GPU path's threads take 20-30 epochs to get there, then grow by a
 * page or so per 30 epochs) and at the end may differ by under 1 %.
 * Both paths: the CPU decode (bad files replaced, progressive files) and
 * the emulated GPU path (jobs, per-file fallbacks, fences ordered and the
 * rows held back until then). The same check on a consumer that keeps 4 KiB
 * per batch (the planted leak: 1.6 MiB in all, 4 KiB of which per batch
 * reach new pages) must fail it, so the 1 % is a bound that catches a leak
 * of that size. The data set has one image size (make_uniform_list) and
 * malloc one arena, so that what grows late is a leak and not a buffer
 * meeting its largest crop or a thread getting an arena of its own.
 *
 * Under AddressSanitizer the resident size holds its quarantine of freed
 * memory and grows by design: the check is reported, not asserted, and
 * LeakSanitizer checks what was not freed. About 2 s. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/procmem.h"
#include "core/timer.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "tests/tb_test.h"
#include "tests/tb_test_jpeg.h"
#include "tests/tb_test_loader.h"

#if defined(__SANITIZE_ADDRESS__)
#define TB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TB_ASAN 1
#endif
#endif
#ifndef TB_ASAN
#define TB_ASAN 0
#endif

#define S 32
#define BATCH 8
/* under ASan the RSS is not checked: fewer epochs, for LeakSanitizer only */
#define WARM_EPOCHS (TB_ASAN ? 5 : 30)
#define EPOCHS (TB_ASAN ? 20 : 70)
#define LEAK_BYTES 4096

typedef struct {
    long long rss0, rss1;      /* after the warm-up, at the end */
    int batches;
    double seconds;
} mem_run;

/* Runs WARM_EPOCHS then EPOCHS epochs on one loader; `leak`: the consumer
 * keeps LEAK_BYTES per batch (touched, freed only at the end). */
static mem_run run(const tb_dataset *ds, int gpu, int leak) {
    tb_loader_opts o = tbl_opts(ds, BATCH, S, 2, 3, 5);
    o.gpu_flip = 1;
    if (gpu) {
        o.decode = TB_DECODE_GPU;
        o.gpu_emulate = 1;
        o.gpu_emulate_async = 1;
        o.gpu_emulate_fail_every = 7;
    }
    tb_loader *ld = tbl_make(&o);
    mem_run r;
    memset(&r, 0, sizeof r);
    void **kept = calloc((size_t)EPOCHS * 64, sizeof *kept);
    int nkept = 0;
    uint64_t sum = 0;
    double t0 = tb_now();
    for (int e = 0; e < WARM_EPOCHS + EPOCHS; e++) {
        if (e == WARM_EPOCHS) r.rss0 = tb_rss_bytes();
        tb_loader_start_epoch(ld, e, 0);
        const tb_batch *b;
        while ((b = tb_loader_next(ld)) != NULL) {
            if (b->on_device) tb_loader_batch_order(ld, b, NULL);
            const uint8_t *px = b->images;
            for (int i = 0; i < b->n * S * S * 3; i += 97) sum += px[i];
            if (leak && e >= WARM_EPOCHS && nkept < EPOCHS * 64) {
                kept[nkept] = malloc(LEAK_BYTES);
                if (kept[nkept]) memset(kept[nkept++], 0x5a, LEAK_BYTES);
            }
            r.batches += e >= WARM_EPOCHS;
            tb_loader_release(ld, b);
        }
    }
    r.rss1 = tb_rss_bytes();
    r.seconds = tb_now() - t0;
    tb_loader_destroy(ld);
    for (int i = 0; i < nkept; i++) free(kept[i]);
    free(kept);
    if (sum == 0) printf("# (all-zero pixels?)\n");
    return r;
}

/* n JPEGs of one size (48 x 40) listed with label = index: every 16th not a
 * JPEG, every 11th progressive, the three chroma subsamplings in turn. One
 * size, so that every buffer that grows to the largest image or crop it
 * meets (libjpeg's, the resampler's, the decode buffers) gets there in the
 * warm-up: what is left to see is growth without bound. */
static void make_uniform_list(const char *list, const char *sub, int n) {
    mkdir(tbj_path(sub), 0777);
    FILE *f = fopen(tbj_path(list), "w");
    const int ss[3] = {TJSAMP_420, TJSAMP_444, TJSAMP_422};
    for (int i = 0; i < n; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s/u%03d.jpg", sub, i);
        if (i % 16 == 15)
            tbj_write_bytes(tbj_path(name), "not a jpeg\n", 11);
        else
            tbj_write(tbj_path(name), 48, 40, ss[i % 3], i % 11 == 0 ? TJFLAG_PROGRESSIVE : 0, (uint64_t)i);
        fprintf(f, "%s %d\n", name, i);
    }
    fclose(f);
}

static double growth_pct(const mem_run *r) { return 100.0 * (double)(r->rss1 - r->rss0) / (double)r->rss0; }

int main(void) {
    /* glibc makes a new malloc arena when threads contend for one (each
     * some 100-200 KiB of resident pages, at moments that depend on the
     * scheduling): one arena, so that what the RSS shows is the loader's
     * own memory */
    mallopt(M_ARENA_MAX, 1);
    tbj_init();
    (void)tbj_make_list;                      /* the shared helper's varied sizes: not here */
    make_uniform_list("mem.txt", "mem", 48); /* 3 bad files, some progressive */
    tb_dataset ds;
    tbj_open_list("mem.txt", &ds);
    TB_CHECK(tb_rss_bytes() > 0, "cannot read this process's resident set size (/proc/self/statm)");
    const char *what[2] = {"CPU decode", "GPU path (emulated, fenced)"};
    for (int gpu = 0; gpu <= 1; gpu++) {
        mem_run r = run(&ds, gpu, 0);
        double g = growth_pct(&r);
        printf("# %s: %d batches over %d epochs in %.2f s; RSS %.2f MiB after the warm-up, %.2f MiB at the end: "
               "%+.3f %%\n",
               what[gpu], r.batches, EPOCHS, r.seconds, r.rss0 / 1048576.0, r.rss1 / 1048576.0, g);
        if (TB_ASAN)
            printf("# AddressSanitizer build: the RSS growth is its quarantine; not checked (LeakSanitizer is)\n");
        else
            TB_CHECK(g < 1.0, "%s: resident memory grew %.3f %% over %d epochs (bound 1 %%)", what[gpu], g, EPOCHS);
    }
    /* the planted leak: the same bound must catch it */
    mem_run leak = run(&ds, 0, 1);
    double g = growth_pct(&leak);
    printf("# planted leak of %d bytes per batch (%d KiB in all): RSS %+.3f %%\n", LEAK_BYTES,
           leak.batches * LEAK_BYTES / 1024, g);
    if (!TB_ASAN) TB_CHECK(g >= 1.0, "a leak of %d bytes per batch grew RSS only %.3f %%: the 1 %% bound misses it",
                           LEAK_BYTES, g);
    tb_dataset_close(&ds);
    tbj_cleanup();
    return tb_test_exit("test_loader_memory");
}
