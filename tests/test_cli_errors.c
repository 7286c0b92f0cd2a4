/* test_cli_errors.c - bad input gets one clear line and a non-zero exit.
 *
 * Builds a valid checkpoint and batch file, derives broken variants (missing
 * or extra parameter, another model or class count, wrong shapes and types,
 * bad labels, files that are not HDF5), runs the real trainbench binary on
 * each, and checks: exit status non-zero, stderr exactly one line, and that
 * line names the problem. A valid run must still succeed and leave no
 * temporary file. Usage: test_cli_errors /path/to/trainbench */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "model/cpu/cpu_backend.h"
#include "model/model.h"
#include "src/results/checkpoint.h"
#include "src/results/h5io.h"
#include "tests/tb_test.h"

static char g_dir[128];
static const char *g_bin;

static char *path(const char *name) {
    static char buf[8][256];
    static int k = 0;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* Runs trainbench with args; expects failure with one stderr line that
 * contains `want`. */
static void expect_error(const char *args, const char *want) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", g_bin, args, path("stdout"), path("stderr"));
    int st = system(cmd);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    char *err = tb_test_read_text(path("stderr"));
    int lines = 0;
    for (char *c = err; *c; c++) lines += *c == '\n';
    TB_CHECK(code != 0, "'%s' exited 0, expected an error", args);
    TB_CHECK(lines == 1, "'%s': %d stderr lines, expected 1:\n%s", args, lines, err);
    TB_CHECK(strstr(err, want) != NULL, "'%s': stderr lacks \"%s\":\n%s", args, want, err);
    if (code != 0 && lines == 1 && strstr(err, want)) printf("ok   %-60.60s -> %s", args, err);
    free(err);
}

/* expect_error, and stdout lacks `absent` (work that should not have run). */
static void expect_error_before(const char *args, const char *want, const char *absent) {
    expect_error(args, want);
    char *out = tb_test_read_text(path("stdout"));
    TB_CHECK(strstr(out, absent) == NULL, "'%s' failed only after its work: stdout has \"%s\"", args, absent);
    free(out);
}

/* 1 when the two files hold the same bytes. */
static int same_bytes(const char *a, const char *b) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

static void copy_file(const char *from, const char *to) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    TB_ASSERT(system(cmd) == 0);
}

static hid_t open_rw(const char *p) { return H5_CHECK(H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT)); }

static void write_batch(const char *p, int n, int c, int h, int w, int nlabels, int64_t label) {
    tb_h5_writer wr;
    tb_h5_create_atomic(&wr, p, "batch");
    size_t count = (size_t)n * c * h * w;
    float *x = calloc(count, sizeof *x);
    for (size_t i = 0; i < count; i++) x[i] = (float)((i * 7919) % 13) / 13.0f - 0.5f;
    int64_t *y = calloc((size_t)nlabels, sizeof *y);
    for (int i = 0; i < nlabels; i++) y[i] = i == nlabels - 1 ? label : i % 10;
    int64_t d[4] = {n, c, h, w}, ld[1] = {nlabels};
    tb_h5_write_f32(wr.file, "images", 4, d, x);
    tb_h5_write_i64(wr.file, "labels", 1, ld, y);
    tb_h5_commit_atomic(&wr);
    free(x);
    free(y);
}

static void make_fixtures(void) {
    tb_backend_opts bo = {.threads = 1};
    tb_backend *be = tb_cpu_backend_create(&bo);
    tb_resnet_config cfg;
    tb_resnet_config_init(&cfg, "resnet18", 10);
    tb_model *m = tb_model_create(&cfg, be, 1, 32, 32, NULL);
    tb_model_init(m, 1);
    tb_ckpt_meta meta;
    tb_ckpt_meta_for(&meta, m, 32, 0, 0, 1);
    tb_ckpt_save(path("ok.h5"), m, &meta);
    tb_model_destroy(m);
    be->destroy(be);

    write_batch(path("batch.h5"), 2, 3, 32, 32, 2, 3);
    write_batch(path("b_channels.h5"), 2, 1, 32, 32, 2, 3);
    write_batch(path("b_labels.h5"), 2, 3, 32, 32, 3, 3);
    write_batch(path("b_range.h5"), 2, 3, 32, 32, 2, 10);
    write_batch(path("b_small.h5"), 2, 3, 16, 16, 2, 3);
    write_batch(path("b_one.h5"), 1, 3, 32, 32, 1, 3);

    hid_t f;
    copy_file(path("ok.h5"), path("missing.h5"));
    f = open_rw(path("missing.h5"));
    H5_CHECK(H5Ldelete(f, "/params/layer1.0.conv1.weight", H5P_DEFAULT));
    H5_CHECK(H5Fclose(f));

    copy_file(path("ok.h5"), path("extra.h5"));
    f = open_rw(path("extra.h5"));
    float v[4] = {0};
    int64_t d1[1] = {4};
    tb_h5_write_f32(f, "/params/extra.weight", 1, d1, v);
    H5_CHECK(H5Fclose(f));

    copy_file(path("ok.h5"), path("model34.h5"));
    f = open_rw(path("model34.h5"));
    tb_h5_attr_write_str(f, "model", "resnet34");
    H5_CHECK(H5Fclose(f));

    copy_file(path("ok.h5"), path("model99.h5"));
    f = open_rw(path("model99.h5"));
    tb_h5_attr_write_str(f, "model", "resnet99");
    H5_CHECK(H5Fclose(f));

    copy_file(path("ok.h5"), path("classes7.h5"));
    f = open_rw(path("classes7.h5"));
    tb_h5_attr_write_i64(f, "classes", 7);
    H5_CHECK(H5Fclose(f));

    copy_file(path("ok.h5"), path("inttype.h5"));
    f = open_rw(path("inttype.h5"));
    H5_CHECK(H5Ldelete(f, "/params/fc.bias", H5P_DEFAULT));
    int64_t ib[10] = {0}, d10[1] = {10};
    tb_h5_write_i64(f, "/params/fc.bias", 1, d10, ib);
    H5_CHECK(H5Fclose(f));

    copy_file(path("ok.h5"), path("momshape.h5"));
    f = open_rw(path("momshape.h5"));
    H5_CHECK(H5Ldelete(f, "/momentum/fc.bias", H5P_DEFAULT));
    float fb[9] = {0};
    int64_t d9[1] = {9};
    tb_h5_write_f32(f, "/momentum/fc.bias", 1, d9, fb);
    H5_CHECK(H5Fclose(f));

    copy_file(path("ok.h5"), path("noattr.h5"));
    f = open_rw(path("noattr.h5")); /* no model attribute, and /params no ResNet's (a block gone) */
    H5_CHECK(H5Adelete(f, "model"));
    H5_CHECK(H5Ldelete(f, "/params/layer4.1.conv1.weight", H5P_DEFAULT));
    H5_CHECK(H5Fclose(f));

    copy_file(path("ok.h5"), path("wide.h5"));
    f = open_rw(path("wide.h5")); /* no model attribute, the first 3x3 conv twice as wide (wide_resnet's) */
    H5_CHECK(H5Adelete(f, "model"));
    H5_CHECK(H5Ldelete(f, "/params/layer1.0.conv2.weight", H5P_DEFAULT));
    float *ww = calloc((size_t)128 * 64 * 9, sizeof *ww);
    int64_t dw[4] = {128, 64, 3, 3};
    tb_h5_write_f32(f, "/params/layer1.0.conv2.weight", 4, dw, ww);
    free(ww);
    H5_CHECK(H5Fclose(f));

    /* a checkpoint cut short (a copy interrupted, a full disk elsewhere) */
    char cut[1024];
    snprintf(cut, sizeof cut, "head -c 5000 '%s' > '%s'", path("ok.h5"), path("cut.h5"));
    TB_ASSERT(system(cut) == 0);

    FILE *t = fopen(path("text.h5"), "w");
    fputs("this is not HDF5\n", t);
    fclose(t);
}

/* `train`'s output files, refused at start-up (before any step: no
 * "step " progress line) with one line, every file left as it was: a path
 * that is a directory, two outputs on one file, a checkpoint at --ckpt
 * without --resume; and --resume from a checkpoint of another image size
 * or one already at --steps. allreduce-bench checks --results before its
 * sweep. */
static void output_errors(void) {
    char a[2048], d[300];
    const char *q = "train --steps 2 --image-size 32 --batch-size 4 --threads 1 --scaling-steps 0";
    snprintf(d, sizeof d, "%s", path("adir"));
    TB_ASSERT(mkdir(d, 0755) == 0);
    const char *dir_flags[4] = {"--results", "--ckpt", "--save", "--trace"};
    for (int i = 0; i < 4; i++) {
        char want[400];
        snprintf(a, sizeof a, "%s %s '%s'%s", q, dir_flags[i], d,
                 i == 0 ? "" : i == 1 ? " --ckpt-every 1 --results ''" : " --results ''");
        snprintf(want, sizeof want, "%s '%s' is a directory", dir_flags[i], d);
        expect_error_before(a, want, "step ");
    }
    /* two outputs on one file, named as given */
    const char *pairs[3][2] = {{"--ckpt", "%s/./same.h5"}, {"--save", "%s/same.h5"}, {"--trace", "%s/../%s/same.h5"}};
    for (int i = 0; i < 3; i++) {
        char other[300], want[400];
        snprintf(other, sizeof other, pairs[i][1], g_dir, strrchr(g_dir, '/') + 1);
        snprintf(a, sizeof a, "%s --results '%s' %s '%s'%s", q, path("same.h5"), pairs[i][0], other,
                 i == 0 ? " --ckpt-every 2" : "");
        snprintf(want, sizeof want, "--results '%s' and %s '%s' are the same file", path("same.h5"), pairs[i][0],
                 other);
        expect_error_before(a, want, "step ");
    }
    TB_CHECK(access(path("same.h5"), F_OK) != 0, "a refused run wrote a file");
    /* an output on an input file: the batch file, the --init weights */
    copy_file(path("batch.h5"), path("in_batch.h5"));
    copy_file(path("ok.h5"), path("in_init.h5"));
    const char *ins[2][3] = {{"--batch-file", "in_batch.h5", "--results"}, {"--init", "in_init.h5", "--save"}};
    for (int i = 0; i < 2; i++) {
        char want[600], given[320];
        snprintf(given, sizeof given, "%s/./%s", g_dir, ins[i][1]);
        snprintf(a, sizeof a, "%s %s '%s' %s '%s'%s", q, ins[i][0], path(ins[i][1]), ins[i][2], given,
                 i == 1 ? " --results ''" : "");
        snprintf(want, sizeof want, "%s '%s' is the %s input '%s', and writing it would destroy the input", ins[i][2],
                 given, ins[i][0], path(ins[i][1]));
        expect_error_before(a, want, "step ");
    }
    TB_CHECK(same_bytes(path("in_batch.h5"), path("batch.h5")), "a refused run changed the batch file");
    TB_CHECK(same_bytes(path("in_init.h5"), path("ok.h5")), "a refused run changed the --init file");

    /* a checkpoint at step 20 (ok.h5 is at step 0, 32 px, seed 1) */
    copy_file(path("ok.h5"), path("c20.h5"));
    hid_t f = open_rw(path("c20.h5"));
    tb_h5_attr_write_i64(f, "step", 20);
    H5_CHECK(H5Fclose(f));
    copy_file(path("c20.h5"), path("c20_orig.h5"));
    snprintf(a, sizeof a, "%s --ckpt '%s' --ckpt-every 1 --results ''", q, path("c20.h5"));
    expect_error_before(a, "already holds a checkpoint (step 20); add --resume to continue from it", "step ");
    snprintf(a, sizeof a, "%s --ckpt '%s' --results ''", q, path("text.h5"));
    expect_error_before(a, "--ckpt '", "step ");
    expect_error_before(a, "holds another file (not HDF5, not a trainbench trace), not a trainbench checkpoint",
                        "step ");
    /* an earlier results file that a refused --resume must not touch (a root 'status' attribute marks one; a
     * checkpoint there is refused as one, output_guard) */
    hid_t rf = H5Fcreate(path("res.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(rf);
    tb_h5_attr_write_str(rf, "status", "complete");
    H5_CHECK(H5Fclose(rf));
    copy_file(path("res.h5"), path("res_orig.h5"));
    snprintf(a, sizeof a, "train --steps 21 --batch-size 4 --threads 1 --scaling-steps 0 --ckpt '%s' --resume "
             "--image-size 64 --results '%s'", path("c20.h5"), path("res.h5"));
    expect_error_before(a, "was trained at image size 32, but this run trains at 64; resume with --image-size 32",
                        "step ");
    snprintf(a, sizeof a, "train --steps 5 --image-size 32 --batch-size 4 --threads 1 --ckpt '%s' --resume --results '%s'",
             path("c20.h5"), path("res.h5"));
    expect_error_before(a, "is at step 20, which already reaches --steps 5; raise --steps (or --epochs)", "step ");
    TB_CHECK(same_bytes(path("c20.h5"), path("c20_orig.h5")), "a refused run changed the checkpoint");
    TB_CHECK(same_bytes(path("res.h5"), path("res_orig.h5")), "a refused --resume changed the earlier results file");
    TB_CHECK(access(path("res.before_resume_step20.h5"), F_OK) != 0, "a refused --resume renamed the results file");

    expect_error_before("allreduce-bench -b 4 -e 1M --results /nonexistent/dir/ar.h5",
                        "cannot write results file '/nonexistent/dir/ar.h5'", "Out of bounds");
    snprintf(a, sizeof a, "allreduce-bench -b 4 -e 1M --results '%s'", d);
    expect_error_before(a, "is a directory", "Out of bounds");
    /* step, probe and project: a directory as the output is refused before the work, not at the rename after it */
    char want[400];
    snprintf(a, sizeof a, "step --ckpt '%s' --batch '%s' --out '%s'", path("ok.h5"), path("batch.h5"), d);
    snprintf(want, sizeof want, "step: --out '%s' is a directory, not a step output; give --out a file path", d);
    expect_error_before(a, want, "loss");
    snprintf(a, sizeof a, "probe --quick --results '%s'", d);
    snprintf(want, sizeof want, "probe: --results '%s' is a directory, not a results file", d);
    expect_error_before(a, want, "sgemm");
    snprintf(a, sizeof a, "project /nonexistent/run.h5 --fabric pcie5 --out '%s'", d);
    snprintf(want, sizeof want, "project: --out '%s' is a directory, not a projection file", d);
    expect_error(a, want);
    /* project's other files: a directory was read as an empty file ("a profile needs model, ...") */
    snprintf(a, sizeof a, "project --profile '%s' --fabric pcie5", d);
    snprintf(want, sizeof want, "project: --profile '%s' is a directory; give a profile file", d);
    expect_error(a, want);
    snprintf(a, sizeof a, "project /nonexistent/run.h5 --fabric '%s'", d);
    snprintf(want, sizeof want, "project: --fabric '%s' is a directory; give a preset", d);
    expect_error(a, want);
    /* ... but 'fit' and a preset's name are not files: a directory of that name where project runs is not read */
    char here[4096];
    TB_ASSERT(getcwd(here, sizeof here) && chdir(d) == 0 && mkdir("fit", 0755) == 0 && mkdir("pcie5", 0755) == 0);
    expect_error("project /nonexistent/run.h5 --fabric pcie5", "cannot read results file '/nonexistent/run.h5'");
    expect_error("project /nonexistent/run.h5 --fabric fit", "cannot read results file '/nonexistent/run.h5'");
    TB_ASSERT(chdir(here) == 0);
    snprintf(a, sizeof a, "project /nonexistent/run.h5 --fabric 'fit:%s'", d);
    snprintf(want, sizeof want, "project: --fabric fit: '%s' is a directory; give an allreduce-bench table", d);
    expect_error(a, want);
    snprintf(a, sizeof a, "train --steps 1 --batch-file '%s' --results ''", d);
    snprintf(want, sizeof want, "batch file '%s' is a directory, not a file", d);
    expect_error(a, want);
}

/* --strict-data and a folder of the set that cannot be read (mode 000; the run without CAP_DAC_OVERRIDE and
 * CAP_DAC_READ_SEARCH, through setpriv, so that root too is refused): one line, exit 1 (its images were left out
 * without a word). Skipped, and said so, where setpriv cannot drop them. */
static void strict_unreadable(void) {
    char cmd[4096];
    const char *drop = "setpriv --bounding-set=-dac_override,-dac_read_search";
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s' && chmod 000 '%s' && %s true 2>/dev/null",
             path("tiny/class_000/locked"), path("tiny/class_000/img_000000.jpg"), path("tiny/class_000/locked/"),
             path("tiny/class_000/locked"), drop);
    if (system(cmd) != 0) {
        printf("skip strict-unreadable: setpriv cannot drop CAP_DAC_OVERRIDE here\n");
    } else {
        for (int k = 0; k < 2; k++) {
            snprintf(cmd, sizeof cmd, "%s '%s' %s --data '%s' --strict-data --batch-size 1 --image-size 32 %s "
                     ">'%s' 2>'%s'", drop, g_bin, k ? "loader-bench" : "train --steps 1 --results=", path("tiny"),
                     k ? "--batches 1" : "", path("stdout"), path("stderr"));
            int st = system(cmd);
            char *err = tb_test_read_text(path("stderr"));
            int lines = 0;
            for (char *c = err; *c; c++) lines += *c == '\n';
            TB_CHECK(st != 0 && lines == 1 && strstr(err, "1 folder of") &&
                         strstr(err, "class_000/locked: cannot open directory: Permission denied") &&
                         strstr(err, "--strict-data needs the whole set"),
                     "%s --strict-data on an unreadable folder: exit %d, %d lines:\n%s", k ? "loader-bench" : "train",
                     st, lines, err);
            free(err);
        }
    }
    snprintf(cmd, sizeof cmd, "chmod 755 '%s' 2>/dev/null; rm -rf '%s'", path("tiny/class_000/locked"),
             path("tiny/class_000/locked"));
    TB_CHECK(system(cmd) == 0, "cleaning up the unreadable folder");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_cli_errors TRAINBENCH\n");
        return 2;
    }
    g_bin = argv[1];
    tb_test_tmp(g_dir, sizeof g_dir, "tb_cli_XXXXXX");
    TB_ASSERT(mkdtemp(g_dir) != NULL);
    tb_h5_quiet();
    make_fixtures();
    char a[2048], want[600];
#define STEP(ck, bt, extra) \
    (snprintf(a, sizeof a, "step --ckpt '%s' --batch '%s' --out '%s' %s", ck, bt, path("out.h5"), extra), a)

    /* the valid case first: it must work, and chain */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s > /dev/null", g_bin, STEP(path("ok.h5"), path("batch.h5"), "--threads 1"));
    TB_CHECK(system(cmd) == 0, "valid step failed: %s", cmd);
    snprintf(cmd, sizeof cmd, "'%s' step --ckpt '%s' --batch '%s' --out '%s' > /dev/null", g_bin,
             path("out.h5"), path("batch.h5"), path("out2.h5"));
    TB_CHECK(system(cmd) == 0, "chained step from a step output failed: %s", cmd);

    /* files */
    expect_error(STEP("/nonexistent/ckpt.h5", path("batch.h5"), ""), "cannot read checkpoint '/nonexistent/ckpt.h5'");
    snprintf(want, sizeof want, "checkpoint '%s' is a directory, not a file", g_dir);
    expect_error(STEP(g_dir, path("batch.h5"), ""), want);
    snprintf(want, sizeof want, "batch file '%s' is a directory, not a file", g_dir);
    expect_error(STEP(path("ok.h5"), g_dir, ""), want);
    expect_error(STEP(path("text.h5"), path("batch.h5"), ""), "is not an HDF5 file");
    expect_error(STEP(path("cut.h5"), path("batch.h5"), ""),
                 "truncated); the file is damaged (cut short or overwritten): write it again, or give another");
    expect_error(STEP(path("noattr.h5"), path("batch.h5"), ""), "is not a trainbench checkpoint");
    expect_error(STEP(path("wide.h5"), path("batch.h5"), ""),
                 "is the state_dict of a wide or grouped ResNet (wide_resnet50_2, resnext50_32x4d");
    expect_error(STEP(path("ok.h5"), "/nonexistent/b.h5", ""), "cannot read batch file");
    /* checkpoint contents */
    expect_error(STEP(path("missing.h5"), path("batch.h5"), ""), "lacks /params/layer1.0.conv1.weight");
    expect_error(STEP(path("extra.h5"), path("batch.h5"), ""), "has /params/extra.weight, which resnet18");
    expect_error(STEP(path("model34.h5"), path("batch.h5"), ""), "lacks /params/layer1.2.conv1.weight");
    expect_error(STEP(path("model99.h5"), path("batch.h5"), ""), "names model 'resnet99'; known models");
    expect_error(STEP(path("classes7.h5"), path("batch.h5"), ""), "/params/fc.weight has shape [10, 512] but resnet18 with 7 classes expects [7, 512]");
    expect_error(STEP(path("inttype.h5"), path("batch.h5"), ""), "/params/fc.bias should be floating point");
    expect_error(STEP(path("momshape.h5"), path("batch.h5"), ""), "/momentum/fc.bias has shape [9]");
    expect_error(STEP(path("ok.h5"), path("batch.h5"), "--model resnet50"), "holds resnet18, not the --model resnet50");
    /* batch contents */
    expect_error(STEP(path("ok.h5"), path("b_channels.h5"), ""), "/images must be [N,3,H,W]");
    expect_error(STEP(path("ok.h5"), path("b_labels.h5"), ""), "/labels must be [N] with N = 2");
    expect_error(STEP(path("ok.h5"), path("b_range.h5"), ""), "label 10 of sample 1");
    expect_error(STEP(path("ok.h5"), path("b_small.h5"), ""), "too small for a ResNet");
    expect_error(STEP(path("ok.h5"), path("b_one.h5"), ""), "one value per channel in layer4");
    /* flags */
    expect_error(STEP(path("ok.h5"), path("batch.h5"), "--foo 1"), "unknown option '--foo'");
    expect_error(STEP(path("ok.h5"), path("batch.h5"), "--lr abc"), "--lr expects a number");
    expect_error(STEP(path("ok.h5"), path("batch.h5"), "--backend tpu"), "--backend expects one of cpu|cuda|auto");
    expect_error(STEP(path("ok.h5"), path("batch.h5"), "--lr"), "--lr needs a value");
    snprintf(a, sizeof a, "step --ckpt '%s' --batch '%s'", path("ok.h5"), path("batch.h5"));
    expect_error(a, "--out is required");
    snprintf(a, sizeof a, "step --ckpt '%s' --batch '%s' --out /nonexistent/dir/out.h5", path("ok.h5"), path("batch.h5"));
    expect_error(a, "cannot write step output '/nonexistent/dir/out.h5'");
    expect_error("frobnicate", "unknown subcommand 'frobnicate'");
    expect_error("train --model resnet99", "unknown --model 'resnet99'");
    expect_error("train --batch-size 0", "--batch-size expects an integer in [1,");
    expect_error("train --image-size 16", "--image-size expects an integer in [32,");
    expect_error("train --steps 0", "--steps 0 without --epochs trains nothing; give --steps 1 or more, or --epochs N");
    expect_error("train --lr-schedule linear", "--lr-schedule 'linear' is not cosine, constant or step");
    expect_error("train --lr-schedule step:5,2", "--lr-schedule 'step:5,2' is not cosine, constant or step:E1,E2,... "
                 "(at most 8 epochs, each after the one before)");
    expect_error("train --fuse conv", "--fuse");
    expect_error("train --no-fuse --fuse graph", "--no-fuse is --fuse off; give one of --no-fuse and --fuse graph");
    expect_error("train --ckpt-every 5", "--ckpt-every needs --ckpt FILE");
    /* values in the flag's range that cannot mean what they say */
    expect_error("train --loss-scale 1e-300 --steps 1", "--loss-scale 1e-300 is below the smallest normal float");
    expect_error(STEP(path("ok.h5"), path("batch.h5"), "--loss-scale 1e-40"),
                 "--loss-scale 1e-40 is below the smallest normal float");
    expect_error("train --scaling-min-seconds -0.5", "--scaling-min-seconds -0.5 is negative; give 0 or more seconds");
    expect_error("train --lr 1e-400", "--lr '1e-400' is too small for a double (it underflows to 0)");
    expect_error("loader-bench --data /tmp --nvjpeg sort=on", "--nvjpeg 'sort=on' sets the GPU decoder, which only "
                 "--decode gpu uses");
    expect_error("loader-bench --data /tmp --decode gpu --nvjpeg foo=1", "--nvjpeg: 'foo=1' is not one of");
    expect_error("train --val /tmp", "--val needs --data");
    /* an empty value where the default is empty is the flag left out: refused (--data "" trained on synthetic
     * data); where the default is a file name (train's --results), empty means none */
    expect_error("train --data '' --steps 1",
                 "train: --data is given an empty value; give it one, or leave --data out");
    expect_error("train --val= --steps 1", "train: --val is given an empty value");
    expect_error("train --ckpt '' --steps 1", "train: --ckpt is given an empty value");
    expect_error("train --init '' --steps 1", "train: --init is given an empty value");
    expect_error("train --batch-file '' --steps 1", "train: --batch-file is given an empty value");
    snprintf(a, sizeof a, "train --steps 1 --batch-size 2 --batch-file '%s' --image-size 200 --results ''",
             path("batch.h5"));
    expect_error(a, "--image-size 200 does not apply to --batch-file");
    expect_error("step --ckpt '' --batch b.h5 --out o.h5", "step: --ckpt is given an empty value");
    expect_error("loader-bench --data ''", "loader-bench: --data is given an empty value");
    expect_error("train --data /tmp --data '' --steps 1", "train: --data is given an empty value"); /* the default */
    expect_error("train --data /tmp --synthetic --steps 1", "give --synthetic or --data, not both");
    expect_error("mkdata --out /nonexistent/set --like imagenet --max-side 64",
                 "--like imagenet draws its own sizes and qualities");
    /* an unwritable --results is refused before the benchmark, not after it (the data is read later) */
    expect_error("loader-bench --data /nonexistent/imagenet --threads 1,2,",
                 "loader-bench: --threads expects a list like 1,2,4 (each 1..1024), got '1,2,'");
    expect_error("loader-bench --data /nonexistent/imagenet --results /nonexistent/dir/lb.h5",
                 "loader-bench: cannot write results file '/nonexistent/dir/lb.h5'");
    expect_error("loader-bench --data /nonexistent/imagenet --index-only --results lb.h5",
                 "--index-only measures no loader row, so it writes no --results file");
    expect_error("loader-bench --feed --data /nonexistent/imagenet --results /nonexistent/dir/feed.h5",
                 "loader-bench --feed: cannot write results file '/nonexistent/dir/feed.h5'");
    expect_error("train --data /nonexistent/imagenet --steps 1", "/nonexistent/imagenet");
    expect_error("train --batch-size 1 --image-size 32 --steps 1",
                 "one value per channel in layer4.0.bn1, which BatchNorm in training cannot normalise; "
                 "raise --batch-size or --image-size");
    expect_error("train --steps 1 --results /nonexistent/dir/run.h5", "cannot write results file '/nonexistent/dir/run.h5'");
    expect_error("train --steps 1 --ckpt /nonexistent/dir/c.h5 --ckpt-every 1", "cannot write checkpoint '/nonexistent/dir/c.h5'");
    expect_error("train --steps 1 --resume", "--resume needs --ckpt FILE");
    expect_error("train --steps 1 --timeout -1", "--timeout expects a number in [0,");
    expect_error("train --steps 1 --timeout 0.05", "--timeout 0.05 s is under 0.1 s");
    snprintf(cmd, sizeof cmd, "'%s' mkdata --out '%s' --classes 2 --per-class 1 --min-side 64 --max-side 80 > /dev/null",
             g_bin, path("tiny"));
    TB_CHECK(system(cmd) == 0, "mkdata for the tiny data set: %s", cmd);
    snprintf(a, sizeof a, "train --steps 1 --data '%s' --batch-size 4 --image-size 32", path("tiny"));
    expect_error(a, "--data has 2 images, fewer than ranks x batch = 1 x 4");
    strict_unreadable();
    snprintf(a, sizeof a, "loader-bench --feed --data '%s' --model resnet18 --batch-size 1 --image-size 32 "
             "--rows 0:2:off --steps 1 --warmup 0", path("tiny"));
    expect_error(a, "one value per channel in layer4.0.bn1, which BatchNorm in training cannot normalise; "
                    "raise --batch-size or --image-size");
    output_errors();
    /* a JPEG given as --data is not read as a list file */
    snprintf(a, sizeof a, "train --steps 1 --data '%s'", path("tiny/class_000/img_000000.jpg"));
    expect_error(a, "img_000000.jpg is a JPEG image, not a data set: give a directory of class folders");
    /* a set with no valid file: every file tried is counted */
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' '%s' && for i in 1 2 3; do echo junk > '%s'/$i.jpg; done && "
             "echo junk > '%s'/4.jpg", path("allbad/a"), path("allbad/b"), path("allbad/a"), path("allbad/b"));
    TB_CHECK(system(cmd) == 0, "the all-bad data set: %s", cmd);
    snprintf(a, sizeof a, "train --steps 1 --data '%s' --batch-size 2 --image-size 32 --scaling-steps 0 --results=",
             path("allbad"));
    expect_error(a, "decodes: all 4 files tried are bad (the whole data set; first: ");
    /* one class: nothing to classify (it trained, loss 0) */
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s'", path("one/only"), path("tiny/class_000/img_000000.jpg"),
             path("one/only/"));
    TB_CHECK(system(cmd) == 0, "the one-class data set: %s", cmd);
    snprintf(a, sizeof a, "train --steps 1 --data '%s' --batch-size 1 --image-size 32 --scaling-steps 0 --results=",
             path("one"));
    expect_error(a, "has 1 class: a classifier needs 2 or more");
    snprintf(a, sizeof a, "train --steps 1 --data '%s' --classes 1000 --batch-size 1 --image-size 32 --results=",
             path("allbad"));
    expect_error(a, "--classes 1000 does not apply to --data");
    /* a list file of which no file decodes: named as given (it said "no sample of ."); as --val, every file bad
     * stops the run (it reported a top-1 of nan % and exited 0) */
    snprintf(cmd, sizeof cmd, "printf '/nonexistent/a.jpg 0\\n/nonexistent/b.jpg 1\\n' > '%s'", path("gone.txt"));
    TB_CHECK(system(cmd) == 0, "the list of missing files: %s", cmd);
    snprintf(a, sizeof a, "train --steps 1 --data '%s' --batch-size 2 --image-size 32 --scaling-steps 0 --results=",
             path("gone.txt"));
    snprintf(want, sizeof want, "no sample of %s decodes: all 2 files tried are bad", path("gone.txt"));
    expect_error(a, want);
    snprintf(a, sizeof a, "train --steps 1 --data '%s' --val '%s' --batch-size 2 --image-size 32 --scaling-steps 0 "
             "--results= --ckpt '%s'", path("tiny"), path("gone.txt"), path("vck.h5"));
    snprintf(want, sizeof want, "--val '%s': no image decodes: all 2 files are bad (the first: /nonexistent/a.jpg",
             path("gone.txt"));
    expect_error(a, want);
    /* the trained state is sound: its checkpoint is written before the stop (it was lost) */
    int64_t vstep = -1;
    TB_CHECK(tb_ckpt_peek_step(path("vck.h5"), &vstep) && vstep == 1, "the --val stop left no checkpoint of step 1 "
             "(step %lld)", (long long)vstep);
    /* a file name with a newline: the error stays one line, the newline written as \n */
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && printf junk > '%s/class_000/bad\nname.jpg'", path("tiny"),
             path("nl"), path("nl"));
    TB_CHECK(system(cmd) == 0, "the set with a newline in a name: %s", cmd);
    snprintf(a, sizeof a, "train --steps 4 --data '%s' --strict-data --batch-size 3 --image-size 32 "
             "--scaling-steps 0 --results=", path("nl"));
    expect_error(a, "class_000/bad\\nname.jpg: not a JPEG file");
    /* -f is a multiplier, not a byte count */
    expect_error("allreduce-bench -f 1", "--stepfactor expects a multiplier, a whole number in [2, 1024]");
    /* a value attached to a one-letter flag, as getopt (and nccl-tests) take it: -b8 is -b 8, read and checked
     * (the sizes reach the -b/-e check, which runs before any MPI); a flag of no value takes none attached */
    expect_error("allreduce-bench -b8K -e4K", "-b 8192 is larger than -e 4096");
    expect_error("allreduce-bench -f1", "--stepfactor expects a multiplier, a whole number in [2, 1024]");
    expect_error("allreduce-bench -bx", "--minbytes expects a byte count");
    expect_error("allreduce-bench -z8", "unexpected argument '-z8'; flags start with --");
    /* nccl-tests' spellings where allreduce-bench means the same: --warmup_iters is --warmup (checked as it), -g 1
     * (one GPU per rank) is a no-op, other -g values are refused with one line */
    expect_error("allreduce-bench --warmup_iters -1", "--warmup expects an integer in [0, 1000000], got '-1'");
    expect_error("allreduce-bench --warmup_iters=2 --iters 1 -g 1 -g1 --ngpus 1 -b 8 -e 4", "-b 8 is larger than -e 4");
    expect_error("allreduce-bench -g 2", "allreduce-bench: -g 2: one GPU per rank only");
    expect_error("allreduce-bench --ngpus=4", "start 4 times the ranks instead (mpirun -np)");
    expect_error("allreduce-bench --warmup_iterations 2", "unknown option '--warmup_iterations'");
    /* nccl-tests' --datatype and -o: sum, the one reduction here, taken; others refused by name */
    expect_error("allreduce-bench --datatype double -o sum -osum --op=sum -b 8 -e 4", "-b 8 is larger than -e 4");
    expect_error("allreduce-bench --datatype half", "--dtype expects one of float|double|bf16, got 'half'");
    expect_error("allreduce-bench -o max", "--op expects one of sum, got 'max'");

    /* no temporary files left next to the outputs */
    char ls[512];
    snprintf(ls, sizeof ls, "ls '%s' | grep -c '\\.tmp\\.' > '%s'", g_dir, path("tmpcount"));
    (void)system(ls);
    char *cnt = tb_test_read_text(path("tmpcount"));
    TB_CHECK(atoi(cnt) == 0, "%d temporary files left in %s", atoi(cnt), g_dir);
    free(cnt);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (tb_test_failures == 0) (void)system(cmd);
    return tb_test_exit("test_cli_errors");
}
