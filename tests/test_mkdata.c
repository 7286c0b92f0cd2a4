/* test_mkdata.c - `trainbench mkdata` makes what it promises: the right
 * number of class directories and files, sides within --min-side..--max-side,
 * 4:2:0 JPEGs, the same bytes for the same seed whatever the thread count,
 * other bytes for another seed, no temporary directory left, a refusal to
 * overwrite, and classes that a trivial classifier already tells apart on
 * random crops (so a network can learn them). --like imagenet: every file
 * coded as tb_mkdata_coding_of says (subsampling, progressive), most with
 * the long side 500 px, none past 800, a mean file size near ImageNet's
 * (60-200 KB).
 * Usage: test_mkdata /path/to/trainbench */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <turbojpeg.h>

#include "core/rng.h"
#include "data/mkdata.h"
#include "tests/tb_test.h"

enum { CLASSES = 6, PER = 8, MIN_SIDE = 96, MAX_SIDE = 160 };

static char g_dir[256];

static unsigned char *slurp(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    unsigned char *b = malloc((1 << 20) + 1);
    if (!b) {
        fclose(f);
        return NULL;
    }
    *n = fread(b, 1, 1 << 20, f);
    b[*n] = 0; /* the callers search it as a string */
    fclose(f);
    return b;
}

static int run(const char *bin, const char *args, const char *errfile) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' mkdata %s >/dev/null 2>'%s/%s'", bin, args, g_dir, errfile);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void file_path(char *buf, size_t len, const char *set, int c, int i) {
    snprintf(buf, len, "%s/%s/class_%03d/img_%06d.jpg", g_dir, set, c, i);
}

/* --like imagenet: 2 classes x 40 files against the preset (about 1 s). */
static void check_imagenet(const char *bin) {
    char args[1024];
    snprintf(args, sizeof args, "--out '%s/in' --classes 2 --per-class 40 --seed 3 --like imagenet --threads 2", g_dir);
    TB_CHECK(run(bin, args, "in.err") == 0, "mkdata --like imagenet failed");
    tb_mkdata_opts o;
    memset(&o, 0, sizeof o);
    o.classes = 2;
    o.per_class = 40;
    o.seed = 3;
    o.like = TB_MKDATA_IMAGENET;
    tjhandle tj = tjInitDecompress();
    int files = 0, coded_as_said = 0, long500 = 0, too_big = 0, kinds[6] = {0}, progressives = 0, broken = 0;
    double bytes = 0;
    char first_broken[512] = "";
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 40; i++) {
            char p[512];
            snprintf(p, sizeof p, "%s/in/class_%03d/img_%06d.jpg", g_dir, c, i);
            size_t n = 0;
            unsigned char *a = slurp(p, &n);
            int w, h, ss, cs;
            if (!a || tjDecompressHeader3(tj, a, n, &w, &h, &ss, &cs) != 0) {
                TB_CHECK(0, "%s missing or not a JPEG", p);
                free(a);
                continue;
            }
            files++;
            bytes += (double)n;
            tb_mkdata_coding cd = tb_mkdata_coding_of(&o, c, i);
            int progressive = 0; /* SOF2 marker */
            for (size_t k = 0; k + 1 < n && !progressive; k++) progressive = a[k] == 0xff && a[k + 1] == 0xc2;
            coded_as_said += ss == cd.subsamp && progressive == cd.progressive;
            progressives += progressive;
            /* the whole file decodes, strictly: a header can be right over a broken bitstream (a
             * TurboJPEG handle reused after a progressive encode once wrote optimized Huffman
             * tables over data coded with the standard ones) */
            unsigned char *px = malloc((size_t)w * h * 3);
            if (!px || tjDecompress2(tj, a, n, px, w, 0, h, TJPF_RGB, TJFLAG_STOPONWARNING) != 0) {
                if (!broken++) snprintf(first_broken, sizeof first_broken, "%.300s: %.150s", p, tjGetErrorStr2(tj));
            }
            free(px);
            if (ss >= 0 && ss < 6) kinds[ss]++;
            long500 += (w > h ? w : h) == 500;
            too_big += w > 800 || h > 800;
            free(a);
        }
    tjDestroy(tj);
    int nkinds = 0;
    for (int k = 0; k < 6; k++) nkinds += kinds[k] > 0;
    double mean_kb = files ? bytes / files / 1e3 : 0;
    printf("mkdata --like imagenet: %d files, %d with the long side 500, %d subsamplings, mean %.1f KB\n", files,
           long500, nkinds, mean_kb);
    TB_CHECK(files == 80 && coded_as_said == files, "%d of %d files coded as tb_mkdata_coding_of says", coded_as_said,
             files);
    TB_CHECK(progressives >= 1, "the set holds a progressive file (%d), whose encode must not spoil later ones",
             progressives);
    TB_CHECK(broken == 0, "every file decodes without a warning: %d of %d do not (first: %s)", broken, files,
             first_broken);
    TB_CHECK(long500 >= 40 && long500 <= 76 && too_big == 0 && nkinds >= 2,
             "%d of %d with the long side 500 (want about 3 in 4), %d past 800 px, %d subsamplings", long500, files,
             too_big, nkinds);
    TB_CHECK(mean_kb >= 60 && mean_kb <= 200, "mean file %.1f KB, not near ImageNet's ~110 KB", mean_kb);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *bin = argv[1];
    tb_test_tmp(g_dir, sizeof g_dir, "tb_mkdata_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    char args[1024];
    const char *common = "--classes 6 --per-class 8 --min-side 96 --max-side 160";
    snprintf(args, sizeof args, "--out '%s/a' %s --seed 7 --threads 2", g_dir, common);
    TB_CHECK(run(bin, args, "a.err") == 0, "mkdata a failed");
    snprintf(args, sizeof args, "--out '%s/b' %s --seed 7 --threads 1", g_dir, common);
    TB_CHECK(run(bin, args, "b.err") == 0, "mkdata b failed");
    snprintf(args, sizeof args, "--out '%s/c' %s --seed 8 --threads 2", g_dir, common);
    TB_CHECK(run(bin, args, "c.err") == 0, "mkdata c failed");

    tjhandle tj = tjInitDecompress();
    int files = 0, in_range = 0, sub420 = 0, same_ab = 0, diff_ac = 0;
    double feat[CLASSES][PER][6]; /* mean and std of R, G, B over the crop */
    tb_rng r;
    tb_rng_seed(&r, 1, 1);
    for (int c = 0; c < CLASSES; c++)
        for (int i = 0; i < PER; i++) {
            char pa[512], pb[512], pc[512];
            file_path(pa, sizeof pa, "a", c, i);
            file_path(pb, sizeof pb, "b", c, i);
            file_path(pc, sizeof pc, "c", c, i);
            size_t na = 0, nb = 0, nc = 0;
            unsigned char *a = slurp(pa, &na), *b = slurp(pb, &nb), *cc = slurp(pc, &nc);
            if (!a || !b || !cc) {
                TB_CHECK(0, "missing %s or its twin", pa);
                free(a), free(b), free(cc);
                continue;
            }
            files++;
            same_ab += na == nb && memcmp(a, b, na) == 0;
            diff_ac += na != nc || memcmp(a, cc, na) != 0;
            int w, h, ss, cs;
            if (tjDecompressHeader3(tj, a, na, &w, &h, &ss, &cs) == 0) {
                in_range += w >= MIN_SIDE && w <= MAX_SIDE && h >= MIN_SIDE && h <= MAX_SIDE;
                sub420 += ss == TJSAMP_420;
                /* mean colour of a random crop of a quarter of the area */
                unsigned char *px = malloc((size_t)w * h * 3);
                if (tjDecompress2(tj, a, na, px, w, 0, h, TJPF_RGB, 0) == 0) {
                    int cw = w / 2, ch = h / 2, x0 = (int)tb_rng_below(&r, (uint64_t)(w - cw + 1)),
                        y0 = (int)tb_rng_below(&r, (uint64_t)(h - ch + 1));
                    double s[3] = {0, 0, 0}, s2[3] = {0, 0, 0}, m = (double)cw * ch;
                    for (int y = y0; y < y0 + ch; y++)
                        for (int x = x0; x < x0 + cw; x++)
                            for (int k = 0; k < 3; k++) {
                                double v = px[((size_t)y * w + x) * 3 + k];
                                s[k] += v;
                                s2[k] += v * v;
                            }
                    for (int k = 0; k < 3; k++) {
                        feat[c][i][k] = s[k] / m;
                        feat[c][i][3 + k] = sqrt(s2[k] / m - (s[k] / m) * (s[k] / m));
                    }
                }
                free(px);
            }
            free(a), free(b), free(cc);
        }
    tjDestroy(tj);
    TB_CHECK(files == CLASSES * PER, "%d files, want %d", files, CLASSES * PER);
    TB_CHECK(in_range == files, "%d of %d images have a side outside [%d, %d]", files - in_range, files, MIN_SIDE,
             MAX_SIDE);
    TB_CHECK(sub420 == files, "%d of %d images are not 4:2:0", files - sub420, files);
    TB_CHECK(same_ab == files, "seed 7 with 2 and 1 threads: %d of %d files identical", same_ab, files);
    TB_CHECK(diff_ac == files, "seeds 7 and 8: %d of %d files differ", diff_ac, files);

    /* leave-one-out nearest class mean on the crops' colour statistics */
    int right = 0;
    for (int c = 0; c < CLASSES; c++)
        for (int i = 0; i < PER; i++) {
            int best = -1;
            double bd = 1e30;
            for (int k = 0; k < CLASSES; k++) {
                double cm[6] = {0, 0, 0, 0, 0, 0};
                int n = 0;
                for (int j = 0; j < PER; j++) {
                    if (k == c && j == i) continue;
                    for (int q = 0; q < 6; q++) cm[q] += feat[k][j][q];
                    n++;
                }
                double d = 0;
                for (int q = 0; q < 6; q++) d += (cm[q] / n - feat[c][i][q]) * (cm[q] / n - feat[c][i][q]);
                if (d < bd) bd = d, best = k;
            }
            right += best == c;
        }
    double acc = (double)right / (CLASSES * PER);
    printf("mkdata: %d files, nearest-class-mean accuracy on random crops %.2f (chance %.2f)\n", files, acc,
           1.0 / CLASSES);
    TB_CHECK(acc >= 0.6, "classes barely separable: nearest-mean accuracy %.2f on random crops", acc);

    check_imagenet(bin);

    /* atomic: no temporary left; an existing directory is refused in one line */
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/a.tmp", g_dir);
    TB_CHECK(stat(p, &st) != 0, "%s left behind", p);
    snprintf(args, sizeof args, "--out '%s/a' %s", g_dir, common);
    int code = run(bin, args, "again.err");
    snprintf(p, sizeof p, "%s/again.err", g_dir);
    size_t n = 0;
    unsigned char *e = slurp(p, &n);
    int lines = 0;
    for (size_t k = 0; k < n; k++) lines += e[k] == '\n';
    TB_CHECK(code != 0 && lines == 1 && e && strstr((char *)e, "already exists"),
             "mkdata over an existing directory: exit %d, %d lines:\n%.3000s", code, lines,
             e ? (char *)e : "(no output file)");
    free(e);
    /* --out DIR/ (a shell's completion) writes DIR, and DIR/ again is refused as existing */
    snprintf(args, sizeof args, "--out '%s/slash/' --classes 2 --per-class 1 --min-side 16 --max-side 16", g_dir);
    code = run(bin, args, "slash.err");
    snprintf(p, sizeof p, "%s/slash/class_001/img_000000.jpg", g_dir);
    TB_CHECK(code == 0 && stat(p, &st) == 0, "mkdata --out DIR/: exit %d, %s %s", code, p,
             stat(p, &st) == 0 ? "written" : "missing");
    code = run(bin, args, "slash2.err");
    snprintf(p, sizeof p, "%s/slash2.err", g_dir);
    e = slurp(p, &n);
    TB_CHECK(code != 0 && e && strstr((char *)e, "slash already exists"), "mkdata --out DIR/ twice: exit %d: %s",
             code, e ? (char *)e : "(no output file)");
    free(e);
    snprintf(args, sizeof args, "rm -rf '%s'", g_dir);
    if (system(args) != 0) printf("warning: could not remove %s\n", g_dir);
    return tb_test_exit("test_mkdata");
}
