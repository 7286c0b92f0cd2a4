/* tb_run_compare.c - test tool: two `trainbench train` runs compared, with
 * nothing but trainbench's own libraries (the GPU machine has no h5py):
 *
 *   tb_run_compare A.ckpt.h5 B.ckpt.h5 A.results.h5 B.results.h5 [--tolerance T] [--attr KEY=VALUE]...
 *
 * - the checkpoints (--save): every tensor of /params (weights, BatchNorm
 *   statistics, num_batches_tracked) and /momentum, bit for bit (T = 0) or
 *   within a relative L2 difference T of A's; the difference is printed;
 * - the results files: /steps/loss step by step (bit for bit, or within
 *   10 T relative);
 * - B's results file: every --attr holds, the phases of /steps are
 *   non-negative and sum to at most the step time, every rank of /ranks has
 *   timed steps, /devices and /conv_algorithms exist.
 * Exit 0 when all of it holds, 1 otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cpu/cpu_backend.h"
#include "model/model.h"
#include "src/checkpoint.h"
#include "src/core/log.h"
#include "src/results_read.h"
#include "tests/tb_test.h"

static tb_model *load(const char *path, tb_backend *be) {
    tb_ckpt_meta meta;
    tb_ckpt_read_meta(path, &meta);
    tb_resnet_config cfg;
    if (tb_resnet_config_init(&cfg, meta.model, (int)meta.classes) != 0)
        tb_die("unknown model '%s' in '%s'", meta.model, path);
    tb_model *m = tb_model_create(&cfg, be, 1, 32, 32, NULL);
    tb_ckpt_load(path, m);
    return m;
}

static void compare_weights(const char *pa, const char *pb, double tol) {
    tb_backend_opts bo = {.threads = 1};
    tb_backend *be = tb_cpu_backend_create(&bo);
    tb_model *a = load(pa, be), *b = load(pb, be);
    double num = 0, den = 0;
    int differ = 0;
    size_t cap = a->pt.n_train > a->pt.n_state ? a->pt.n_train : a->pt.n_state;
    float *x = malloc((cap + 1) * sizeof *x), *y = malloc((cap + 1) * sizeof *y);
    if (!x || !y) TB_FATAL("out of host memory");
    for (int i = 0; i < a->pt.count; i++) {
        const tb_param *p = &a->pt.items[i];
        for (int what = 0; what < 2; what++) {
            int train = tb_param_store_of(p->role) == TB_STORE_TRAIN;
            if (what == 1 && !train) continue;
            if (p->role == TB_ROLE_BN_COUNTER) {
                int64_t ca, cb;
                tb_model_get_tensor(a, i, &ca);
                tb_model_get_tensor(b, i, &cb);
                TB_CHECK(ca == cb, "%s: %lld vs %lld", p->name, (long long)ca, (long long)cb);
                continue;
            }
            if (what == 0) {
                tb_model_get_tensor(a, i, x);
                tb_model_get_tensor(b, i, y);
            } else {
                tb_model_get_momentum(a, i, x);
                tb_model_get_momentum(b, i, y);
            }
            int same = memcmp(x, y, p->numel * sizeof *x) == 0;
            double maxd = 0;
            for (size_t k = 0; k < p->numel; k++) {
                double d = (double)x[k] - (double)y[k];
                num += d * d;
                den += (double)x[k] * (double)x[k];
                if (fabs(d) > maxd) maxd = fabs(d);
            }
            if (!same) differ++;
            if (tol == 0)
                TB_CHECK(same, "%s%s differs: max |d| %.3g", what ? "momentum of " : "", p->name, maxd);
        }
    }
    double rel = den > 0 ? sqrt(num / den) : 0;
    printf("# weights, statistics and momentum: relative L2 difference %.3e, %d tensors not bit-identical\n", rel,
           differ);
    if (tol > 0) TB_CHECK(rel <= tol, "relative L2 difference %.3e above %g", rel, tol);
    free(x);
    free(y);
    tb_model_destroy(a);
    tb_model_destroy(b);
    be->destroy(be);
}

static void compare_results(const char *pa, const char *pb, double tol, int nattr, char **attrs) {
    tb_results ra, rb;
    char err[512];
    if (tb_results_load(pa, &ra, err, sizeof err) != 0) tb_die("%s", err);
    if (tb_results_load(pb, &rb, err, sizeof err) != 0) tb_die("%s", err);
    const tb_rtable *sa = tb_results_table(&ra, "steps"), *sb = tb_results_table(&rb, "steps");
    TB_CHECK(sa && sb && sa->rows == sb->rows && sa->rows > 0, "/steps missing or of different lengths");
    if (sa && sb && sa->rows == sb->rows) {
        printf("# losses A / B:");
        for (size_t i = 0; i < sa->rows; i++) {
            double la = tb_rtable_num(sa, "loss", i), lb = tb_rtable_num(sb, "loss", i);
            printf(" %.6f/%.6f", la, lb);
            if (tol == 0) TB_CHECK(la == lb, "step %zu: loss %.9g vs %.9g", i, la, lb);
            else TB_CHECK(fabs(la - lb) <= 10 * tol * fabs(la), "step %zu: loss %.9g vs %.9g", i, la, lb);
        }
        printf("\n");
        static const char *const ph[] = {"data_ms", "h2d_ms", "forward_ms", "backward_ms", "allreduce_ms",
                                         "optimizer_ms"};
        for (size_t i = 0; i < sb->rows; i++) {
            double sum = 0;
            for (int k = 0; k < 6; k++) {
                double v = tb_rtable_num(sb, ph[k], i);
                TB_CHECK(v >= -1e-6, "B step %zu: %s %.6f is negative", i, ph[k], v);
                sum += v;
            }
            double st = tb_rtable_num(sb, "step_ms", i);
            TB_CHECK(sum <= st * (1 + 1e-9) + 1e-6, "B step %zu: phases sum to %.6f ms, above the step's %.6f", i,
                     sum, st);
        }
    }
    const tb_rtable *rk = tb_results_table(&rb, "ranks");
    TB_CHECK(rk && rk->rows > 0, "B has no /ranks");
    for (size_t i = 0; rk && i < rk->rows; i++)
        TB_CHECK(tb_rtable_num(rk, "steps", i) > 0, "B: rank %zu has no timed step", i);
    TB_CHECK(tb_results_table(&rb, "devices") && tb_results_table(&rb, "conv_algorithms"),
             "B has no /devices or /conv_algorithms");
    for (int i = 0; i < nattr; i++) {
        char key[64];
        const char *eq = strchr(attrs[i], '=');
        if (!eq) tb_die("--attr %s: give KEY=VALUE", attrs[i]);
        snprintf(key, sizeof key, "%.*s", (int)(eq - attrs[i]), attrs[i]);
        const char *got = tb_results_str(&rb, key, "(missing)");
        printf("# B %s = %s\n", key, got);
        TB_CHECK(strncmp(got, eq + 1, strlen(eq + 1)) == 0, "B's %s is '%s', expected '%s...'", key, got, eq + 1);
    }
    tb_results_free(&ra);
    tb_results_free(&rb);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: tb_run_compare A.ckpt B.ckpt A.results B.results [--tolerance T] [--attr K=V]...\n");
        return 2;
    }
    double tol = 0;
    char *attrs[16];
    int nattr = 0;
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "--tolerance") == 0 && i + 1 < argc) tol = atof(argv[++i]);
        else if (strcmp(argv[i], "--attr") == 0 && i + 1 < argc && nattr < 16) attrs[nattr++] = argv[++i];
        else {
            fprintf(stderr, "tb_run_compare: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    compare_weights(argv[1], argv[2], tol);
    compare_results(argv[3], argv[4], tol, nattr, attrs);
    return tb_test_exit("run_compare");
}
