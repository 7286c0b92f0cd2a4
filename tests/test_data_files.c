/* test_data_files.c - test_data's bad files (--strict-data included) and
 * the dataset index (see test_data.c). */
#include "tests/test_data.h"

/* ---- bad files ------------------------------------------------------------------------------ */

/* With test_bad_files' loader options and corpus (12 files, 6 bad):
 * keep_bad_place; then a FIFO among JPEGs. */
static void test_bad_place_and_fifo(tb_loader_opts *o) {
    tb_dataset ds;
    char err[256];
    tb_loader_stats st;
    TB_CHECK(tb_dataset_open(path("bad"), &ds, err, sizeof err) == 0, "open: %s", err);
    o->ds = &ds;
    /* keep_bad_place (validation): a bad file is not replaced by another
     * image; it keeps its place, labelled -1, its image black */
    o->keep_bad_place = 1;
    tb_loader *ld = tb_loader_create(o, err, sizeof err);
    tb_loader_start_epoch(ld, 0, 0);
    const tb_batch *kb = tb_loader_next(ld);
    int marked = 0, black = 0;
    for (int i = 0; kb && i < kb->n; i++) {
        const uint8_t *px = (const uint8_t *)kb->images + (size_t)i * 32 * 32 * 3;
        int dark = 1;
        for (int q = 0; q < 32 * 32 * 3; q++) dark &= px[q] == 0;
        marked += kb->labels[i] == -1;
        black += kb->labels[i] == -1 && dark;
    }
    TB_CHECK(kb && kb->n == 12 && marked == 6 && black == 6,
             "keep_bad_place: %d of %d samples labelled -1 (%d black), want the 6 bad files", marked, kb ? kb->n : -1,
             black);
    if (kb) tb_loader_release(ld, kb);
    tb_loader_destroy(ld);
    tb_dataset_close(&ds);

    /* a FIFO named like a JPEG is a bad file (not a regular file), not a
     * worker blocked for ever in open() waiting for a writer */
    mkdir(path("fifo"), 0777);
    mkdir(path("fifo/a"), 0777);
    write_jpeg(path("fifo/a/good.jpg"), 40, 30, TJSAMP_420, 0, TJPF_RGB, 8);
    TB_CHECK(mkfifo(path("fifo/a/pipe.jpg"), 0666) == 0, "mkfifo failed");
    TB_CHECK(tb_dataset_open(path("fifo"), &ds, err, sizeof err) == 0 && ds.n == 2, "fifo set: %s", err);
    o->ds = &ds;
    o->batch = 2;
    o->keep_bad_place = 0;
    ld = tb_loader_create(o, err, sizeof err);
    tb_loader_start_epoch(ld, 0, 0);
    kb = tb_loader_next(ld);
    TB_CHECK(kb && kb->n == 2, "fifo set: no batch");
    if (kb) tb_loader_release(ld, kb);
    tb_loader_get_stats(ld, &st);
    TB_CHECK(st.skipped == 1 && strstr(st.first_bad[0], "pipe.jpg: not a regular file"),
             "a FIFO: %lld skipped, '%s'; want 1, 'not a regular file'", (long long)st.skipped, st.first_bad[0]);
    tb_loader_destroy(ld);
    tb_dataset_close(&ds);
}

/* A file far larger than any JPEG the loader accepts (a sparse 1 TiB file:
 * a damaged file system's size, a misnamed archive) is a bad file named
 * with its size, not read into memory whole: the worker's buffer for it
 * ended the run ("out of host memory"). */
static void test_oversize_file(tb_loader_opts *o) {
    tb_dataset ds;
    char err[256];
    tb_loader_stats st;
    mkdir(path("huge"), 0777);
    mkdir(path("huge/a"), 0777);
    write_jpeg(path("huge/a/good.jpg"), 40, 30, TJSAMP_420, 0, TJPF_RGB, 9);
    write_bytes(path("huge/a/huge.jpg"), "", 0);
    if (truncate(path("huge/a/huge.jpg"), (off_t)1 << 40) != 0) {
        printf("skip oversize file: this file system holds no sparse 1 TiB file\n");
        return;
    }
    TB_CHECK(tb_dataset_open(path("huge"), &ds, err, sizeof err) == 0 && ds.n == 2, "huge set: %s", err);
    o->ds = &ds;
    o->batch = 2;
    o->keep_bad_place = 0;
    tb_loader *ld = tb_loader_create(o, err, sizeof err);
    tb_loader_start_epoch(ld, 0, 0);
    const tb_batch *kb = tb_loader_next(ld);
    TB_CHECK(kb && kb->n == 2, "huge set: no batch");
    if (kb) tb_loader_release(ld, kb);
    tb_loader_get_stats(ld, &st);
    TB_CHECK(st.skipped == 1 && strstr(st.first_bad[0], "huge.jpg: file of 1099511627776 bytes is larger than"),
             "a 1 TiB file: %lld skipped, '%s'; want 1, 'file of 1099511627776 bytes is larger than ...'",
             (long long)st.skipped, st.first_bad[0]);
    tb_loader_destroy(ld);
    tb_dataset_close(&ds);
    unlink(path("huge/a/huge.jpg"));
}

/* The end-of-image check walks the markers: a good image with 64 KiB after
 * its EOI (a motion photo's video) decodes in every mode (it was "truncated":
 * only the last 4 KiB were searched); an image cut short whose APP1 holds a
 * whole thumbnail JPEG (its own EOI) is still truncated, for a crop of its
 * top rows too. */
static void test_end_of_image(tb_sampler *sp) {
    unsigned long n, tn;
    unsigned char *j = make_jpeg(120, 100, TJSAMP_420, 0, TJPF_RGB, 11, &n);
    unsigned char *t = make_jpeg(16, 12, TJSAMP_420, 0, TJPF_RGB, 12, &tn);
    size_t trail = 65536, app = 2 + 2 + 6 + tn;
    uint8_t *buf = malloc(n + trail + app), rgbx[32 * 32 * 4];
    memcpy(buf, j, n);
    for (size_t i = 0; i < trail; i++) buf[n + i] = (uint8_t)(i * 2654435761u >> 13); /* FF D9 among them */
    tb_geometry top = tb_geometry_from_box((tb_box){0, 0, 16, 40}, 32, 0);
    for (int mode = 0; mode < 3; mode++) {
        char err[256] = "";
        int rc = tb_sample_render(sp, buf, n + trail, (tb_decode_mode)mode, 0, 32, NULL, NULL, NULL, rgbx, NULL, err,
                                  sizeof err);
        TB_CHECK(rc == 0, "a good JPEG with 64 KiB after its EOI (mode %d): %s", mode, err);
    }
    /* SOI, APP1 "Exif\0\0" + the thumbnail, the rest of the image cut at 60 % */
    memcpy(buf, j, 2);
    buf[2] = 0xFF, buf[3] = 0xE1, buf[4] = (uint8_t)((app - 2) >> 8), buf[5] = (uint8_t)(app - 2);
    memcpy(buf + 6, "Exif\0\0", 6);
    memcpy(buf + 12, t, tn);
    memcpy(buf + 2 + app, j + 2, n - 2);
    size_t cut = 2 + app + (n - 2) * 6 / 10;
    for (int mode = 0; mode < 4; mode++) {
        char err[256] = "";
        int rc = tb_sample_render(sp, buf, cut, mode < 3 ? (tb_decode_mode)mode : TB_DECODE_PARTIAL, mode == 3, 32,
                                  NULL, NULL, mode == 3 ? &top : NULL, rgbx, NULL, err, sizeof err);
        TB_CHECK(rc != 0 && strstr(err, "truncated"), "cut short, a whole thumbnail in APP1 (mode %d): rc %d, '%s'",
                 mode, rc, err);
    }
    char err[256] = "";
    TB_CHECK(tb_sample_render(sp, buf, 2 + app + n - 2, TB_DECODE_FULL, 0, 32, NULL, NULL, NULL, rgbx, NULL, err,
                              sizeof err) == 0,
             "whole, with the thumbnail in APP1: %s", err);
    free(buf);
    tjFree(j);
    tjFree(t);
}

void test_bad_files(void) {
    mkdir(path("bad"), 0777);
    mkdir(path("bad/a"), 0777);
    /* good odd files */
    write_jpeg(path("bad/a/gray.jpg"), 90, 70, TJSAMP_GRAY, 0, TJPF_GRAY, 1);
    write_jpeg(path("bad/a/cmyk.jpg"), 90, 70, TJSAMP_444, 0, TJPF_CMYK, 2);
    write_jpeg(path("bad/a/prog.jpg"), 90, 70, TJSAMP_420, TJFLAG_PROGRESSIVE, TJPF_RGB, 3);
    setenv("TJ_RESTART", "1B", 1);
    write_jpeg(path("bad/a/restart.jpg"), 90, 70, TJSAMP_420, 0, TJPF_RGB, 4);
    unsetenv("TJ_RESTART");
    write_jpeg(path("bad/a/s444.jpg"), 90, 70, TJSAMP_444, 0, TJPF_RGB, 5);
    write_jpeg(path("bad/a/s422.jpg"), 90, 70, TJSAMP_422, 0, TJPF_RGB, 6);
    /* bad ones */
    write_bytes(path("bad/a/zero.jpg"), "", 0);
    unsigned long n;
    unsigned char *j = make_jpeg(120, 100, TJSAMP_420, 0, TJPF_RGB, 7, &n);
    write_bytes(path("bad/a/trunc.jpg"), j, n * 6 / 10);
    /* truncated, then an end-of-image marker appended: only libjpeg's
     * warning ("premature end of data segment") can tell */
    unsigned char *te = malloc(n);
    memcpy(te, j, n * 4 / 10);
    te[n * 4 / 10] = 0xFF;
    te[n * 4 / 10 + 1] = 0xD9;
    write_bytes(path("bad/a/trunc_eoi.jpg"), te, n * 4 / 10 + 2);
    /* corrupt entropy data: a restart marker where none may be, plus junk */
    memcpy(te, j, n);
    for (unsigned long i = n / 3; i < n / 3 + 40; i++) te[i] = (unsigned char)(i * 37);
    te[n / 3] = 0xFF;
    te[n / 3 + 1] = 0xD3;
    write_bytes(path("bad/a/corrupt.jpg"), te, n);
    free(te);
    tjFree(j);
    const unsigned char png[] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    write_bytes(path("bad/a/png.jpg"), png, sizeof png);
    write_bytes(path("bad/a/text.jpg"), "hello, not an image\n", 20);
    const char *badnames[6] = {"zero", "trunc.jpg", "trunc_eoi", "corrupt", "png", "text"};

    /* each file on its own: the good decode in all modes, the bad are bad */
    tb_sampler *sp = tb_sampler_create();
    uint8_t rgbx[32 * 32 * 4];
    const char *good[6] = {"gray", "cmyk", "prog", "restart", "s444", "s422"};
    const char *all[12] = {"gray", "cmyk", "prog", "restart", "s444", "s422",
                           "zero", "trunc", "trunc_eoi", "corrupt", "png", "text"};
    for (int i = 0; i < 12; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/bad/a/%s.jpg", g_dir, all[i]);
        FILE *f = fopen(p, "rb");
        uint8_t *buf = malloc(1 << 20);
        size_t len = fread(buf, 1, 1 << 20, f);
        fclose(f);
        for (int mode = 0; mode < 3; mode++) {
            char err[256] = "";
            int rc = tb_sample_render(sp, buf, len, (tb_decode_mode)mode, 0, 32, NULL, NULL, NULL, rgbx, NULL, err,
                                      sizeof err);
            if (i < 6)
                TB_CHECK(rc == 0, "%s (mode %d) should decode: %s", all[i], mode, err);
            else
                TB_CHECK(rc != 0, "%s (mode %d) decoded; it is bad", all[i], mode);
            if (mode == 0 && i >= 6 && rc != 0) printf("bad file %-10s -> %s\n", all[i], err);
        }
        /* a crop of the top rows only, which are all in the file: the
         * truncation is still caught (no end-of-image marker) although
         * libjpeg never reaches the missing data */
        if (strcmp(all[i], "trunc") == 0) {
            tb_geometry top = tb_geometry_from_box((tb_box){0, 0, 16, 40}, 32, 0);
            char err[256] = "";
            int rc = tb_sample_render(sp, buf, len, TB_DECODE_PARTIAL, 1, 32, NULL, NULL, &top, rgbx, NULL, err,
                                      sizeof err);
            TB_CHECK(rc != 0, "truncated file decoded for a crop of its top rows");
        }
        free(buf);
    }
    (void)good;
    test_end_of_image(sp);
    tb_sampler_destroy(sp);

    /* in the loader: 12 files, 6 bad; eval over 2 epochs with batch 12 */
    tb_dataset ds;
    char err[256];
    TB_CHECK(tb_dataset_open(path("bad"), &ds, err, sizeof err) == 0, "open: %s", err);
    TB_CHECK(ds.n == 12, "bad corpus indexed %lld files, want 12", (long long)ds.n);
    tb_loader_opts o;
    memset(&o, 0, sizeof o);
    o.ds = &ds;
    o.batch = 12;
    o.image_size = 32;
    o.threads = 3;
    o.prefetch = 2;
    o.world = 1;
    o.format = TB_OUT_U8_NHWC;
    tb_loader *ld = tb_loader_create(&o, err, sizeof err);
    int delivered = 0;
    for (int e = 0; e < 2; e++) {
        tb_loader_start_epoch(ld, e, 0);
        const tb_batch *b;
        while ((b = tb_loader_next(ld)) != NULL) {
            delivered += b->n;
            tb_loader_release(ld, b);
        }
    }
    tb_loader_stats st;
    tb_loader_get_stats(ld, &st);
    tb_loader_destroy(ld);
    tb_dataset_close(&ds);
    TB_CHECK(delivered == 24 && st.images == 24, "delivered %d samples (%lld decoded), want 24", delivered,
             (long long)st.images);
    TB_CHECK(st.skipped == 12, "skipped %lld, want 12 (6 bad files x 2 epochs)", (long long)st.skipped);
    int named = 0;
    for (int k = 0; k < 3; k++) {
        int known = 0;
        for (int m = 0; m < 6; m++) known |= strstr(st.first_bad[k], badnames[m]) != NULL;
        named += known;
    }
    TB_CHECK(named == 3, "first_bad does not name three bad files: '%s' '%s' '%s'", st.first_bad[0], st.first_bad[1],
             st.first_bad[2]);

    test_bad_place_and_fifo(&o);
    test_oversize_file(&o);

    /* --strict-data: the run ends with one line naming the file */
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s' loader-bench --data '%s' --threads 1 --batch-size 12 --batches 1 --warmup 0 --eval "
             "--image-size 32 --strict-data >'%s' 2>'%s'",
             g_bin, path("bad"), path("strict.out"), path("strict.err"));
    int rc = system(cmd);
    int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
    char *e = tb_test_read_text(path("strict.err"));
    int lines = 0;
    for (char *c = e; *c; c++) lines += *c == '\n';
    int names = 0;
    for (int m = 0; m < 6; m++) names |= strstr(e, badnames[m]) != NULL;
    TB_CHECK(code != 0 && lines == 1 && names && strstr(e, "strict-data") && strstr(e, "step 0 of epoch 0"),
             "--strict-data: exit %d, %d stderr lines, want non-zero and one line naming a bad file:\n%s", code, lines,
             e);
    printf("strict: exit %d: %s", code, e);
    free(e);
    /* without it the same run completes and reports the skips */
    snprintf(cmd, sizeof cmd,
             "'%s' loader-bench --data '%s' --threads 2 --batch-size 12 --batches 2 --warmup 0 --eval "
             "--image-size 32 >'%s' 2>'%s'",
             g_bin, path("bad"), path("lenient.out"), path("lenient.err"));
    rc = system(cmd);
    char *out = tb_test_read_text(path("lenient.out"));
    TB_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0 && strstr(out, "#   skipped "),
             "loader-bench without --strict-data failed or did not report skips:\n%s", out);
    free(out);
}

/* ---- dataset index ------------------------------------------------------------------------ */

void test_dataset(void) {
    mkdir(path("tree"), 0777);
    const char *dirs[] = {"tree/b", "tree/a", "tree/a/sub", "tree/a/sub-2", "tree/C", "tree/a/sub/deep"};
    for (int i = 0; i < 6; i++) mkdir(path(dirs[i]), 0777);
    const char *files[] = {"tree/b/2.jpg", "tree/b/1.JPEG", "tree/b/notes.txt", "tree/a/z.jpg", "tree/a/sub/y.jpg",
                           "tree/a/sub-2/x.jpeg", "tree/a/sub/deep/w.Jpg", "tree/C/k.png", "tree/C/m.jpg",
                           "tree/loose.jpg"};
    for (int i = 0; i < 10; i++) write_bytes(path(files[i]), "", 0);
    tb_dataset ds;
    char err[256];
    TB_CHECK(tb_dataset_open(path("tree"), &ds, err, sizeof err) == 0, "open tree: %s", err);
    /* classes by byte order: C < a < b; samples by (directory path, name):
     * a: "a" z.jpg, "a/sub" y.jpg, "a/sub-2" x.jpeg, "a/sub/deep" w.Jpg
     * ("a/sub-2" < "a/sub/deep" because '-' < '/') */
    const char *want[] = {"C/m.jpg",          "a/z.jpg",          "a/sub/y.jpg", "a/sub-2/x.jpeg",
                          "a/sub/deep/w.Jpg", "b/1.JPEG",         "b/2.jpg"};
    const int wl[] = {0, 1, 1, 1, 1, 2, 2};
    int ok = ds.n == 7 && ds.classes == 3;
    for (int i = 0; ok && i < 7; i++) ok = strcmp(tb_dataset_relpath(&ds, i), want[i]) == 0 && ds.labels[i] == wl[i];
    TB_CHECK(ok, "ImageFolder order/labels wrong (n %lld, classes %d)", (long long)ds.n, ds.classes);
    if (!ok)
        for (int64_t i = 0; i < ds.n; i++) printf("  %d %s\n", ds.labels[i], tb_dataset_relpath(&ds, i));
    TB_CHECK(ds.skipped_ext == 2 && ds.skipped_loose == 1, "skipped: %lld ext, %lld loose; want 2, 1",
             (long long)ds.skipped_ext, (long long)ds.skipped_loose);
    uint64_t h = tb_dataset_hash(&ds);
    tb_dataset_close(&ds);

    /* symbolic links back to a directory above (a loop) are not followed:
     * the same 7 samples, labels and hash, each loop skipped with a reason;
     * a link to a sibling directory is (ImageFolder follows links) */
    int linked = symlink("..", path("tree/a/sub/up")) == 0 && symlink(".", path("tree/b/self")) == 0;
    TB_CHECK(linked, "cannot make the symbolic links");
    TB_CHECK(tb_dataset_open(path("tree"), &ds, err, sizeof err) == 0, "open tree with loops: %s", err);
    int said = 0;
    for (int k = 0; k < 3; k++) said |= strstr(ds.first_skipped[k], "a/sub/up: a symbolic link back") != NULL;
    TB_CHECK(ds.n == 7 && tb_dataset_hash(&ds) == h && ds.skipped_other == 2 && said,
             "symlink loops: %lld samples (want 7), %lld other skipped (want 2), same index %d, loop named %d",
             (long long)ds.n, (long long)ds.skipped_other, tb_dataset_hash(&ds) == h, said);
    tb_dataset_close(&ds);
    TB_CHECK(symlink("../b", path("tree/a/sib")) == 0, "cannot link a sibling");
    TB_CHECK(tb_dataset_open(path("tree"), &ds, err, sizeof err) == 0 && ds.n == 9, "a link to a sibling "
             "directory: %lld samples, want 9 (b's two again under a/sib)", (long long)ds.n);
    tb_dataset_close(&ds);
    unlink(path("tree/a/sib"));
    unlink(path("tree/a/sub/up"));
    unlink(path("tree/b/self"));
    /* links out of the set: to ROOT's parent (which holds ROOT and other folders) from inside a class, and a
     * class that is a link to ROOT itself: neither followed (they indexed the other folders' files, and every
     * class's images again, under the linking class's label) */
    TB_CHECK(symlink("../..", path("tree/a/out")) == 0 && symlink(".", path("tree/c_root")) == 0,
             "cannot link out of the set");
    TB_CHECK(tb_dataset_open(path("tree"), &ds, err, sizeof err) == 0, "open tree with links out: %s", err);
    /* (the first three skipped entries named are the tree's others: the counts tell) */
    TB_CHECK(ds.n == 7 && ds.classes == 4 && ds.class_count[3] == 0 && ds.skipped_other == 2,
             "links out of the set: %lld samples (want the 7; followed, they add the other folders' and every "
             "class's again), %d classes (want 4, c_root empty), %lld other skipped (want 2)",
             (long long)ds.n, ds.classes, (long long)ds.skipped_other);
    tb_dataset_close(&ds);
    unlink(path("tree/a/out"));
    unlink(path("tree/c_root"));

    /* list files: comments, blank lines, spaces in paths; errors name the line */
    FILE *f = fopen(path("l1.txt"), "w");
    fprintf(f, "# header\n\nx y.jpg 3\n/abs/p.jpg\t0\r\n");
    fclose(f);
    TB_CHECK(tb_dataset_open(path("l1.txt"), &ds, err, sizeof err) == 0, "list: %s", err);
    TB_CHECK(ds.n == 2 && ds.classes == 4 && strcmp(tb_dataset_relpath(&ds, 0), "x y.jpg") == 0 &&
                 ds.labels[0] == 3 && strcmp(tb_dataset_relpath(&ds, 1), "/abs/p.jpg") == 0,
             "list parse: n %lld classes %d", (long long)ds.n, ds.classes);
    char full[512];
    tb_dataset_path(&ds, 0, full, sizeof full);
    TB_CHECK(strcmp(full, path("x y.jpg")) == 0, "relative list path resolves to %s", full);
    tb_dataset_close(&ds);
    f = fopen(path("bom.txt"), "w"); /* a UTF-8 byte order mark before the first PATH */
    fprintf(f, "\xEF\xBB\xBF" "a.jpg 0\nb.jpg 1\n");
    fclose(f);
    TB_CHECK(tb_dataset_open(path("bom.txt"), &ds, err, sizeof err) == 0 && ds.n == 2 &&
                 strcmp(tb_dataset_relpath(&ds, 0), "a.jpg") == 0,
             "list file with a byte order mark: first path '%s'", ds.n ? tb_dataset_relpath(&ds, 0) : err);
    tb_dataset_close(&ds);
    f = fopen(path("l2.txt"), "w");
    fprintf(f, "a.jpg 1\nb.jpg -2\n");
    fclose(f);
    TB_CHECK(tb_dataset_open(path("l2.txt"), &ds, err, sizeof err) != 0 && strstr(err, ":2:"),
             "negative label not reported with its line: '%s'", err);
    f = fopen(path("l3.txt"), "w"); /* a typo'd label: not 50 million classes */
    fprintf(f, "a.jpg 1\nb.jpg 50000000\n");
    fclose(f);
    TB_CHECK(tb_dataset_open(path("l3.txt"), &ds, err, sizeof err) != 0 && strstr(err, ":2: label 50000000 is above"),
             "a label past the class limit not reported with its line: '%s'", err);
    TB_CHECK(tb_dataset_open(path("nonexistent"), &ds, err, sizeof err) != 0, "missing path accepted");
}
