/* fuzz_batchfile.c - libFuzzer target: the golden-step / --batch-file reader.
 *
 * Two builds of this file (tests/fuzz.cmake), as fuzz_ckpt.c:
 *   fuzz_batchfile      the input is the file's bytes;
 *   fuzz_batchfile_gen  (FZ_STRUCTURED) the input builds a valid HDF5 file
 *                       (h5_build.h) around /images [2,3,32,32] and
 *                       /labels [2] of any shape, type, layout and link.
 * The file is read with tb_batchfile_read as `trainbench step` reads it (10
 * classes, sides of at least TB_RESNET_MIN_IMAGE). Every image value and
 * label of an accepted file is then touched, so a short buffer shows as a
 * sanitizer report. A tb_die / TB_FATAL is a rejection (longjmp back; what
 * the reader had put in the tb_batchfile is freed, HDF5 ids closed).
 *
 * Seeds: tests/fuzz/corpus/batchfile and corpus/batchfile_gen
 * (make_corpus.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/resnet.h"
#include "src/results/batchfile.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/h5_build.h"

#define FZ_CLASSES 10

#ifdef FZ_STRUCTURED
static const char *const k_groups[] = {""};
static const fz_h5_tensor k_tensors[] = {
    {"images", 4, {2, 3, 32, 32}, 0, 1},
    {"labels", 1, {2, 0, 0, 0}, 1, 1},
};
static const fz_h5_vocab k_vocab = {NULL, 0, NULL, 0, k_groups, 1, k_tensors, 2};
#endif

typedef struct {
    const char *path;
    tb_batchfile b;
} job;

static void read_batch(void *ctx) {
    job *j = ctx;
    tb_batchfile_read(j->path, FZ_CLASSES, TB_RESNET_MIN_IMAGE, &j->b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fz_init(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    job j;
    memset(&j, 0, sizeof j);
#ifdef FZ_STRUCTURED
    j.path = fz_temp_path("batch_gen");
    if (fz_h5_build(j.path, data, size, &k_vocab) != 0) abort();
    fz_h5_after(0, "fz_h5_build");
#else
    j.path = fz_write_temp("batch", data, size);
#endif
    int bad = fz_call(read_batch, &j);
    fz_h5_after(bad, "tb_batchfile_read");
    if (!bad) {
        /* the contract of an accepted file */
        if (j.b.n < 1 || j.b.h < TB_RESNET_MIN_IMAGE || j.b.w < TB_RESNET_MIN_IMAGE) abort();
        size_t count = (size_t)j.b.n * 3 * (size_t)j.b.h * (size_t)j.b.w;
        volatile float sink = 0.0f;
        for (size_t i = 0; i < count; i++) sink += j.b.images[i];
        for (int i = 0; i < j.b.n; i++)
            if (j.b.labels[i] < 0 || j.b.labels[i] >= FZ_CLASSES) abort();
        (void)sink;
    }
    tb_batchfile_free(&j.b);
    fz_outcome = !bad;
    return 0;
}
