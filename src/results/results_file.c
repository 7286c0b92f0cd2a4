/* results_file.c - tables and provenance into the results HDF5 file. */
#include "src/results/results_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "src/results/h5io.h"

void tb_table_init(tb_table *t, const char *group, const char *names) {
    memset(t, 0, sizeof *t);
    snprintf(t->group, sizeof t->group, "%s", group);
    const char *p = names;
    while (*p) {
        TB_ASSERT(t->ncols < TB_TABLE_MAX_COLS);
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char name[40];
        TB_ASSERT(len < sizeof name);
        memcpy(name, p, len);
        name[len] = '\0';
        char *mark = strstr(name, ":i");
        if (mark) *mark = '\0';
        snprintf(t->names[t->ncols], sizeof t->names[0], "%s", name);
        t->is_int[t->ncols] = mark != NULL;
        t->ncols++;
        if (!comma) break;
        p = comma + 1;
    }
}

void tb_table_add_string_column(tb_table *t, const char *name) {
    TB_ASSERT(t->nstrs < TB_TABLE_MAX_STRS && t->rows == 0);
    snprintf(t->strnames[t->nstrs++], sizeof t->strnames[0], "%s", name);
}

void tb_table_row_strs(tb_table *t, const double *values, const char *const *s) {
    if (t->rows == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        for (int c = 0; c < t->ncols; c++) {
            t->cols[c] = realloc(t->cols[c], t->cap * sizeof(double));
            if (!t->cols[c]) TB_FATAL("out of host memory for results");
        }
        t->strs = realloc(t->strs, t->cap * TB_TABLE_MAX_STRS * sizeof *t->strs);
        if (!t->strs) TB_FATAL("out of host memory for results");
    }
    for (int c = 0; c < t->ncols; c++) t->cols[c][t->rows] = values[c];
    char **row = t->strs + t->rows * TB_TABLE_MAX_STRS;
    for (int j = 0; j < TB_TABLE_MAX_STRS; j++) {
        row[j] = j < t->nstrs ? strdup(s && s[j] ? s[j] : "") : NULL;
        if (j < t->nstrs && !row[j]) TB_FATAL("out of host memory for results");
    }
    t->rows++;
}

void tb_table_row(tb_table *t, const double *values, const char *s) {
    const char *v[TB_TABLE_MAX_STRS] = {s};
    tb_table_row_strs(t, values, v);
}

void tb_table_free(tb_table *t) {
    for (int c = 0; c < t->ncols; c++) free(t->cols[c]);
    for (size_t i = 0; i < t->rows * TB_TABLE_MAX_STRS; i++) free(t->strs[i]);
    free(t->strs);
    tb_attrs_free(&t->attrs);
    memset(t, 0, sizeof *t);
}

void tb_table_copy(tb_table *dst, const tb_table *src) {
    *dst = *src;
    size_t n = src->cap ? src->cap : 1;
    for (int c = 0; c < src->ncols; c++) {
        dst->cols[c] = malloc(n * sizeof(double));
        if (!dst->cols[c]) TB_FATAL("out of host memory for results");
        if (src->rows) memcpy(dst->cols[c], src->cols[c], src->rows * sizeof(double));
    }
    dst->strs = calloc(n * TB_TABLE_MAX_STRS, sizeof *dst->strs);
    if (!dst->strs) TB_FATAL("out of host memory for results");
    for (size_t i = 0; i < src->rows * TB_TABLE_MAX_STRS; i++)
        if (src->strs[i] && !(dst->strs[i] = strdup(src->strs[i]))) TB_FATAL("out of host memory for results");
    tb_attrs_copy(&dst->attrs, &src->attrs);
}

static int attr_slot(tb_attrs *a, const char *key) {
    for (int i = 0; i < a->nattrs; i++)
        if (strcmp(a->key[i], key) == 0) {
            free(a->sval[i]);
            a->sval[i] = NULL;
            return i;
        }
    TB_ASSERT(a->nattrs < TB_MAX_ATTRS);
    snprintf(a->key[a->nattrs], sizeof a->key[0], "%s", key);
    return a->nattrs++;
}

void tb_attrs_str(tb_attrs *a, const char *key, const char *value) {
    int i = attr_slot(a, key);
    a->sval[i] = strdup(value ? value : "");
}

void tb_attrs_int(tb_attrs *a, const char *key, int64_t value) {
    int i = attr_slot(a, key);
    a->nval[i] = (double)value;
    a->is_int[i] = 1;
}

void tb_attrs_num(tb_attrs *a, const char *key, double value) {
    int i = attr_slot(a, key);
    a->nval[i] = value;
    a->is_int[i] = 0;
}

void tb_attrs_copy(tb_attrs *dst, const tb_attrs *src) {
    *dst = *src;
    for (int i = 0; i < src->nattrs; i++)
        if (src->sval[i] && !(dst->sval[i] = strdup(src->sval[i]))) TB_FATAL("out of host memory for results");
}

const char *tb_attrs_get_str(const tb_attrs *a, const char *key) {
    for (int i = 0; i < a->nattrs; i++)
        if (strcmp(a->key[i], key) == 0) return a->sval[i];
    return NULL;
}

void tb_attrs_free(tb_attrs *a) {
    for (int i = 0; i < a->nattrs; i++) free(a->sval[i]);
    memset(a, 0, sizeof *a);
}

static void write_attrs(hid_t loc, const tb_attrs *a);

static void write_table(hid_t file, const tb_table *t) {
    hid_t g = tb_h5_group_create(file, t->group);
    int64_t dims[1] = {(int64_t)t->rows};
    size_t n = t->rows ? t->rows : 1;
    int64_t *iv = malloc(n * sizeof *iv);
    for (int c = 0; c < t->ncols; c++) {
        if (t->is_int[c]) {
            for (size_t r = 0; r < t->rows; r++) iv[r] = (int64_t)t->cols[c][r];
            tb_h5_write_i64(g, t->names[c], 1, dims, iv);
        } else {
            hsize_t hd[1] = {t->rows};
            hid_t sp = H5_CHECK(H5Screate_simple(1, hd, NULL));
            hid_t ds = H5_CHECK(H5Dcreate2(g, t->names[c], H5T_NATIVE_DOUBLE, sp, H5P_DEFAULT,
                                           H5P_DEFAULT, H5P_DEFAULT));
            if (t->rows) H5_CHECK(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->cols[c]));
            H5_CHECK(H5Dclose(ds));
            H5_CHECK(H5Sclose(sp));
        }
    }
    free(iv);
    /* the writer's column order, for readers that print tables (report) */
    char order[(TB_TABLE_MAX_COLS + TB_TABLE_MAX_STRS) * 41 + 8] = ""; /* every name fits */
    size_t used = 0;
    for (int c = 0; c < t->ncols; c++)
        used += (size_t)snprintf(order + used, sizeof order - used, "%s%s", c ? "," : "", t->names[c]);
    for (int j = 0; j < t->nstrs; j++)
        used += (size_t)snprintf(order + used, sizeof order - used, ",%s", t->strnames[j]);
    tb_h5_attr_write_str(g, "columns", order);
    const char **col = malloc(n * sizeof *col);
    if (!col) TB_FATAL("out of host memory for results");
    for (int j = 0; j < t->nstrs; j++) {
        for (size_t r = 0; r < t->rows; r++) col[r] = t->strs[r * TB_TABLE_MAX_STRS + j];
        hid_t st = H5_CHECK(H5Tcopy(H5T_C_S1));
        H5_CHECK(H5Tset_size(st, H5T_VARIABLE));
        H5_CHECK(H5Tset_cset(st, H5T_CSET_UTF8));
        hsize_t hd[1] = {t->rows};
        hid_t sp = H5_CHECK(H5Screate_simple(1, hd, NULL));
        hid_t ds = H5_CHECK(H5Dcreate2(g, t->strnames[j], st, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        if (t->rows) H5_CHECK(H5Dwrite(ds, st, H5S_ALL, H5S_ALL, H5P_DEFAULT, col));
        H5_CHECK(H5Dclose(ds));
        H5_CHECK(H5Sclose(sp));
        H5_CHECK(H5Tclose(st));
    }
    free(col);
    write_attrs(g, &t->attrs);
    H5_CHECK(H5Gclose(g));
}

static void write_attrs(hid_t loc, const tb_attrs *a) {
    for (int i = 0; i < a->nattrs; i++) {
        if (H5Aexists(loc, a->key[i]) > 0) H5_CHECK(H5Adelete(loc, a->key[i]));
        if (a->sval[i]) tb_h5_attr_write_str(loc, a->key[i], a->sval[i]);
        else if (a->is_int[i]) tb_h5_attr_write_i64(loc, a->key[i], (int64_t)a->nval[i]);
        else tb_h5_attr_write_f64(loc, a->key[i], a->nval[i]);
    }
}

static void results_write(const char *path, const tb_attrs *a, const tb_table *const *tables, int ntables,
                          int now) {
    tb_h5_writer w; /* holds the HDF5 lock from create to commit */
    tb_h5_create_atomic(&w, path, "results file");
    write_attrs(w.file, a);
    for (int i = 0; i < ntables; i++) write_table(w.file, tables[i]);
    if (now) tb_h5_commit_atomic_now(&w);
    else tb_h5_commit_atomic(&w);
}

void tb_results_write(const char *path, const tb_attrs *a, const tb_table *const *tables, int ntables) {
    results_write(path, a, tables, ntables, 0);
}

void tb_results_write_now(const char *path, const tb_attrs *a, const tb_table *const *tables, int ntables) {
    results_write(path, a, tables, ntables, 1);
}

void tb_results_copy_with_tables(const char *src, const char *dst, const tb_attrs *a,
                                 const tb_table *const *tables, int ntables) {
    tb_h5_quiet();
    tb_h5_writer w;
    if (strlen(dst) >= sizeof w.path) tb_die("results file path is too long: '%s'", dst);
    snprintf(w.path, sizeof w.path, "%s", dst);
    snprintf(w.tmp, sizeof w.tmp, "%s.tmp.%ld", dst, (long)getpid());
    FILE *in = fopen(src, "rb"), *out = in ? fopen(w.tmp, "wb") : NULL;
    if (!in || !out) {
        int err = errno;
        if (in) fclose(in);
        tb_die("cannot copy results file '%s' to '%s': %s; check both paths", src, dst, strerror(err));
    }
    char buf[1 << 16];
    size_t n;
    int bad = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) bad |= fwrite(buf, 1, n, out) != n;
    bad |= ferror(in) != 0;
    fclose(in);
    bad |= fclose(out) != 0;
    if (bad) {
        unlink(w.tmp);
        tb_die("copying results file '%s' to '%s' failed; check the disk", src, dst);
    }
    tb_h5_lock("results copy"); /* held to the rename, as tb_h5_create_atomic's writers do */
    w.file = H5Fopen(w.tmp, H5F_ACC_RDWR, H5P_DEFAULT);
    if (w.file < 0) {
        unlink(w.tmp);
        tb_h5_unlock();
        tb_die("'%s' is not an HDF5 file that can be rewritten", src);
    }
    tb_h5_track_atomic(&w, "results file");
    if (a) write_attrs(w.file, a);
    for (int i = 0; i < ntables; i++) {
        if (H5Lexists(w.file, tables[i]->group, H5P_DEFAULT) > 0)
            H5_CHECK(H5Ldelete(w.file, tables[i]->group, H5P_DEFAULT));
        write_table(w.file, tables[i]);
    }
    tb_h5_commit_atomic(&w);
}

void tb_utc_now(char *buf, size_t len) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
