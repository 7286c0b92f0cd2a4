/* fuzz_ckpt.c - libFuzzer target: the checkpoint readers.
 *
 * Two builds of this file (tests/fuzz.cmake):
 *   fuzz_ckpt      the input is the file's bytes, written as they are to a
 *                  tmpfs file (corrupt files: libhdf5's parser first);
 *   fuzz_ckpt_gen  (FZ_STRUCTURED) the input is a program that builds a
 *                  valid HDF5 file (h5_build.h) from the model's own tensor
 *                  names and shapes and the attribute names the reader
 *                  looks for: every well-formed file, whatever HDF5 returns.
 * The file is then read the way `trainbench train --init/--resume` and
 * `trainbench step` read a checkpoint: tb_ckpt_read_meta, then
 * tb_ckpt_require_match against the model, then tb_ckpt_load into a
 * ResNet-18 with 2 classes (32x32, batch 1; built once). The load runs
 * whatever the metadata said, so files whose attributes are wrong reach the
 * tensor checks too. A tb_die / TB_FATAL in a reader is a rejection
 * (longjmp back, HDF5 ids closed); a crash, a sanitizer report, or an HDF5
 * object left open after a reader returned is a finding.
 *
 * Seeds: tests/fuzz/corpus/ckpt and corpus/ckpt_gen (make_corpus.py). A
 * complete ResNet-18 checkpoint whose big tensors are never written (HDF5
 * reads them as zeros) loads and is ~90 KB instead of 90 MB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cpu/cpu_backend.h"
#include "model/model.h"
#include "src/results/checkpoint.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/h5_build.h"

static tb_model *g_model;
static tb_resnet_config g_cfg;

#ifdef FZ_STRUCTURED
static const char *const k_attrs[] = {"model", "classes", "image_size", "step",
                                      "epoch", "seed", "trainbench_version", "git_revision"};
static const char *const k_strings[] = {"resnet18", "resnet50", "resnet18 ", "", "0.1.0"};
static const char *const k_groups[] = {"params", "momentum", ""};
static fz_h5_tensor *g_tensors;
static fz_h5_vocab g_vocab;

/* The model's tensors: all in /params (bit 0), trainable ones in /momentum (bit 1). */
static void init_vocab(void) {
    const tb_param_table *pt = &g_model->pt;
    g_tensors = calloc((size_t)pt->count, sizeof *g_tensors);
    if (!g_tensors) abort();
    for (int i = 0; i < pt->count; i++) {
        const tb_param *p = &pt->items[i];
        fz_h5_tensor *t = &g_tensors[i];
        snprintf(t->name, sizeof t->name, "%s", p->name);
        t->ndim = p->ndim;
        for (int d = 0; d < p->ndim; d++) t->shape[d] = p->shape[d];
        t->integer = p->role == TB_ROLE_BN_COUNTER;
        t->groups = 1u | (tb_param_store_of(p->role) == TB_STORE_TRAIN ? 2u : 0u);
    }
    g_vocab = (fz_h5_vocab){k_attrs, 8, k_strings, 5, k_groups, 3, g_tensors, pt->count};
}
#endif

typedef struct {
    const char *path;
    tb_ckpt_meta meta;
} job;

static void read_meta(void *ctx) {
    job *j = ctx;
    tb_ckpt_read_meta(j->path, &j->meta);
    tb_ckpt_require_match(j->path, &j->meta, &g_cfg);
}

static void load(void *ctx) {
    job *j = ctx;
    tb_ckpt_load(j->path, g_model);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fz_init(1);
    if (tb_resnet_config_init(&g_cfg, "resnet18", 2) != 0) abort();
    tb_backend_opts bo = {.threads = 1};
    tb_backend *be = tb_cpu_backend_create(&bo);
    g_model = tb_model_create(&g_cfg, be, 1, 32, 32, NULL);
#ifdef FZ_STRUCTURED
    init_vocab();
#endif
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    job j;
    memset(&j, 0, sizeof j);
#ifdef FZ_STRUCTURED
    j.path = fz_temp_path("ckpt_gen");
    if (fz_h5_build(j.path, data, size, &g_vocab) != 0) abort();
    fz_h5_after(0, "fz_h5_build");
#else
    j.path = fz_write_temp("ckpt", data, size);
#endif
    int bad_meta = fz_call(read_meta, &j);
    fz_h5_after(bad_meta, "tb_ckpt_read_meta");
    int bad_load = fz_call(load, &j);
    fz_h5_after(bad_load, "tb_ckpt_load");
    fz_outcome = !bad_meta && !bad_load;
    return 0;
}
