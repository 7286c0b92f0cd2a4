/* results_read.c - a results file read back whole, and checked against the
 * contract (see results_read.h). */
#include "src/results/results_read.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "src/results/h5io.h"

const char *const tb_results_required_attrs[] = {
    "trainbench_version", "git_revision", "command_line", "start_time", "end_time", "status",
    "world_size", "hostnames", "backend", "device_names", "cuda_runtime_version",
    "cuda_driver_version", "cudnn_version", "nccl_version", "mpi_version", "hdf5_version",
    "libjpeg_turbo_version", "model", "precision", "batch_size", "image_size", "seed", NULL};

/* The contract's columns per table (DESIGN.md "Results file"). */
static const char *const k_scaling_cols[] = {"ranks", "global_batch", "img_per_s", "img_per_s_per_rank",
                                             "speedup", "efficiency", "epoch_time_s", "device_util_pct",
                                             "allreduce_busbw_GBps", "comm_share_pct", NULL};
static const char *const k_steps_cols[] = {"step", "loss", "lr", "img_per_s", NULL};
static const char *const k_ranks_cols[] = {"rank", "host", "step_ms", "img_per_s", NULL};
/* A loader-bench file (root attribute kind = "loader-bench"): provenance and
 * the /loader table. */
static const char *const k_loader_attrs[] = {"trainbench_version", "git_revision", "command_line",
                                             "start_time", "end_time", "status", "hostnames",
                                             "hdf5_version", "libjpeg_turbo_version", NULL};
static const char *const k_loader_cols[] = {"threads", "img_per_s", "mb_per_s", "ms_per_batch", NULL};
/* A loader-bench --feed file (kind = "loader-feed"): provenance and /feed. */
static const char *const k_feed_cols[] = {"threads", "prefetch", "pinned", "img_per_s", "ms_per_batch", "wait_pct",
                                          "gpu_idle_pct", NULL};
/* An allreduce-bench file (kind = "allreduce-bench"): provenance and /allreduce. */
static const char *const k_allreduce_attrs[] = {"trainbench_version", "git_revision", "command_line",
                                                "start_time", "end_time", "status", "world_size",
                                                "hostnames", "mpi_version", "hdf5_version", NULL};
static const char *const k_allreduce_cols[] = {"bytes", "time_us", "algbw_GBps", "busbw_GBps", NULL};
/* A `trainbench probe --results` file (kind = "probe"): provenance and /probe. */
static const char *const k_probe_attrs[] = {"trainbench_version", "git_revision", "command_line", "start_time",
                                            "end_time", "status", "hostnames", "hdf5_version", NULL};
static const char *const k_probe_cols[] = {"check", NULL};
/* A `trainbench project --profile` file (kind = "projection"): /projection. */
static const char *const k_projection_attrs[] = {"trainbench_version", "git_revision", "command_line",
                                                 "status", "projection_fabric", NULL};
static const char *const k_projection_cols[] = {"ranks", "step_ms", "img_per_s", "efficiency", NULL};

static char *xstrdup(const char *s) {
    char *d = strdup(s ? s : "");
    if (!d) TB_FATAL("out of host memory");
    return d;
}

static void problem(tb_results *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(tb_results *r, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    r->problems = realloc(r->problems, (size_t)(r->nproblems + 1) * sizeof *r->problems);
    if (!r->problems) TB_FATAL("out of host memory");
    r->problems[r->nproblems++] = xstrdup(buf);
}

/* ---- strings out of HDF5 ------------------------------------------------------------- */

/* Reads n strings (variable or fixed length) from an attribute (is_attr) or
 * dataset into out[n] (strdup'd). */
static void read_strings(hid_t obj, int is_attr, hid_t ftype, size_t n, char **out) {
    if (H5Tis_variable_str(ftype) > 0) {
        hid_t mt = H5_CHECK(H5Tcopy(H5T_C_S1));
        H5_CHECK(H5Tset_size(mt, H5T_VARIABLE));
        H5_CHECK(H5Tset_cset(mt, H5Tget_cset(ftype)));
        char **buf = calloc(n ? n : 1, sizeof *buf);
        if (!buf) TB_FATAL("out of host memory");
        if (is_attr) H5_CHECK(H5Aread(obj, mt, buf));
        else H5_CHECK(H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf));
        for (size_t i = 0; i < n; i++) {
            out[i] = xstrdup(buf[i]);
            if (buf[i]) H5free_memory(buf[i]);
        }
        free(buf);
        H5_CHECK(H5Tclose(mt));
    } else {
        size_t sz = H5Tget_size(ftype);
        char *buf = calloc(n ? n : 1, sz + 1);
        if (!buf) TB_FATAL("out of host memory");
        hid_t mt = H5_CHECK(H5Tcopy(ftype));
        if (is_attr) H5_CHECK(H5Aread(obj, mt, buf));
        else H5_CHECK(H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf));
        for (size_t i = 0; i < n; i++) {
            char *s = calloc(sz + 1, 1);
            if (!s) TB_FATAL("out of host memory");
            memcpy(s, buf + i * sz, sz);
            out[i] = s;
        }
        free(buf);
        H5_CHECK(H5Tclose(mt));
    }
}

/* ---- attributes ------------------------------------------------------------------------ */

static void read_attr(hid_t loc, const char *name, tb_rattr *out) {
    memset(out, 0, sizeof *out);
    out->key = xstrdup(name);
    hid_t a = H5_CHECK(H5Aopen(loc, name, H5P_DEFAULT));
    hid_t ft = H5_CHECK(H5Aget_type(a));
    hid_t sp = H5_CHECK(H5Aget_space(a));
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    H5T_class_t c = H5Tget_class(ft);
    if (n != 1) {
        out->kind = TB_VAL_OTHER;
        out->str = xstrdup("(an array attribute, not shown)");
    } else if (c == H5T_STRING) {
        out->kind = TB_VAL_STR;
        read_strings(a, 1, ft, 1, &out->str);
    } else if (c == H5T_INTEGER) {
        int64_t v = 0;
        H5_CHECK(H5Aread(a, H5T_NATIVE_INT64, &v));
        out->kind = TB_VAL_INT;
        out->num = (double)v;
    } else if (c == H5T_FLOAT) {
        H5_CHECK(H5Aread(a, H5T_NATIVE_DOUBLE, &out->num));
        out->kind = TB_VAL_FLOAT;
    } else {
        out->kind = TB_VAL_OTHER;
        out->str = xstrdup("(an attribute of another HDF5 type, not shown)");
    }
    H5_CHECK(H5Sclose(sp));
    H5_CHECK(H5Tclose(ft));
    H5_CHECK(H5Aclose(a));
}

typedef struct {
    char **names;
    int n;
} attr_names;

static herr_t attr_cb(hid_t loc, const char *name, const H5A_info_t *info, void *data) {
    (void)loc;
    (void)info;
    attr_names *l = data;
    l->names = realloc(l->names, (size_t)(l->n + 1) * sizeof *l->names);
    if (!l->names) TB_FATAL("out of host memory");
    l->names[l->n++] = xstrdup(name);
    return 0;
}

static int read_attrs(hid_t loc, tb_rattr **out) {
    attr_names l = {NULL, 0};
    hsize_t idx = 0;
    H5_CHECK(H5Aiterate2(loc, H5_INDEX_NAME, H5_ITER_INC, &idx, attr_cb, &l));
    *out = calloc((size_t)(l.n ? l.n : 1), sizeof **out);
    if (!*out) TB_FATAL("out of host memory");
    for (int i = 0; i < l.n; i++) {
        read_attr(loc, l.names[i], &(*out)[i]);
        free(l.names[i]);
    }
    free(l.names);
    return l.n;
}

/* ---- tables ---------------------------------------------------------------------------- */

/* Reads dataset `name` of group g as a column; 0, or -1 (not a 1-D numeric
 * or string dataset: a problem is noted). */
static int read_column(tb_results *r, hid_t g, const char *group, const char *name, tb_rcol *col) {
    memset(col, 0, sizeof *col);
    hid_t ds = H5Dopen2(g, name, H5P_DEFAULT);
    if (ds < 0) return -1; /* a sub-group: not a column; ignored */
    hid_t sp = H5_CHECK(H5Dget_space(ds));
    hid_t ft = H5_CHECK(H5Dget_type(ds));
    int nd = H5Sget_simple_extent_ndims(sp);
    hsize_t dims[8] = {0};
    int rc = -1;
    if (nd != 1) {
        problem(r, "/%s/%s is not a 1-D column (%d dimensions); left out", group, name, nd);
    } else {
        H5_CHECK(H5Sget_simple_extent_dims(sp, dims, NULL));
        size_t n = (size_t)dims[0];
        H5T_class_t c = H5Tget_class(ft);
        col->name = xstrdup(name);
        col->rows = n;
        if (c == H5T_INTEGER || c == H5T_FLOAT) {
            col->kind = c == H5T_INTEGER ? TB_VAL_INT : TB_VAL_FLOAT;
            col->num = calloc(n ? n : 1, sizeof *col->num);
            if (!col->num) TB_FATAL("out of host memory");
            if (n) H5_CHECK(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, col->num));
            rc = 0;
        } else if (c == H5T_STRING) {
            col->kind = TB_VAL_STR;
            col->str = calloc(n ? n : 1, sizeof *col->str);
            if (!col->str) TB_FATAL("out of host memory");
            if (n) read_strings(ds, 0, ft, n, col->str);
            rc = 0;
        } else {
            problem(r, "/%s/%s is neither numbers nor strings; left out", group, name);
            free(col->name);
            col->name = NULL;
        }
    }
    H5_CHECK(H5Tclose(ft));
    H5_CHECK(H5Sclose(sp));
    H5_CHECK(H5Dclose(ds));
    return rc;
}

/* Position of `name` in the comma-separated list, or a large number. */
static int order_of(const char *list, const char *name) {
    size_t n = strlen(name);
    int i = 0;
    for (const char *p = list; p && *p; i++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return i;
        if (!comma) break;
        p = comma + 1;
    }
    return 1 << 20;
}

static int rank_of(const char *order, const tb_rcol *c) {
    if (order[0]) return order_of(order, c->name);
    return c->kind == TB_VAL_INT ? 0 : c->kind == TB_VAL_STR ? 1 : 2;
}

static void read_table(tb_results *r, hid_t file, const char *name, tb_rtable *t) {
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    hid_t g = H5_CHECK(H5Gopen2(file, name, H5P_DEFAULT));
    char order[4096] = "";
    if (tb_h5_attr_read_str(g, "columns", order, sizeof order) != 0) order[0] = '\0';
    int n = 0;
    char **names = tb_h5_list(g, &n);
    t->cols = calloc((size_t)(n ? n : 1), sizeof *t->cols);
    if (!t->cols) TB_FATAL("out of host memory");
    for (int i = 0; i < n; i++)
        if (read_column(r, g, name, names[i], &t->cols[t->ncols]) == 0) t->ncols++;
    tb_h5_free_names(names, n);
    t->nattrs = read_attrs(g, &t->attrs);
    H5_CHECK(H5Gclose(g));
    /* the writer's order when it recorded one, else integer columns (keys
     * such as threads or rank), strings, then the rest (stable insertion sort) */
    for (int i = 1; i < t->ncols; i++) {
        tb_rcol c = t->cols[i];
        int k = rank_of(order, &c), j = i - 1;
        while (j >= 0 && rank_of(order, &t->cols[j]) > k) {
            t->cols[j + 1] = t->cols[j];
            j--;
        }
        t->cols[j + 1] = c;
    }
    for (int i = 0; i < t->ncols; i++) {
        if (i == 0) t->rows = t->cols[0].rows;
        else if (t->cols[i].rows != t->rows) {
            problem(r, "/%s columns differ in length (%s: %zu, %s: %zu); using the first %zu rows", name,
                    t->cols[0].name, t->cols[0].rows, t->cols[i].name, t->cols[i].rows,
                    t->cols[i].rows < t->rows ? t->cols[i].rows : t->rows);
            if (t->cols[i].rows < t->rows) t->rows = t->cols[i].rows;
        }
    }
}

int tb_results_no_scaling_asked(const tb_results *r) {
    double v = tb_results_num(r, "scaling_steps", NAN);
    if (!isnan(v)) return v == 0;
    const char *cl = tb_results_str(r, "command_line", "");
    for (const char *p = strstr(cl, " --scaling-steps"); p; p = strstr(p + 1, " --scaling-steps")) {
        p += strlen(" --scaling-steps");
        if ((*p == ' ' || *p == '=') && p[1] == '0' && (p[2] == ' ' || p[2] == '\0')) return 1;
    }
    return 0;
}

static void check_contract(tb_results *r) {
    const char *kind = tb_results_str(r, "kind", "train");
    int loader = strcmp(kind, "loader-bench") == 0, allreduce = strcmp(kind, "allreduce-bench") == 0;
    int projection = strcmp(kind, "projection") == 0, feed = strcmp(kind, "loader-feed") == 0;
    int probe = strcmp(kind, "probe") == 0;
    const char *const *attrs = loader || feed ? k_loader_attrs
                               : allreduce  ? k_allreduce_attrs
                               : projection ? k_projection_attrs
                               : probe      ? k_probe_attrs
                                            : tb_results_required_attrs;
    for (int i = 0; attrs[i]; i++)
        if (!tb_results_attr(r, attrs[i])) problem(r, "root attribute '%s' is missing", attrs[i]);
    const char *status = tb_results_str(r, "status", NULL);
    if (status && (strcmp(status, "running") == 0 || tb_results_attr(r, "updated_time"))) {
        /* a snapshot (run_report.h; 'running' in files of earlier versions):
         * the run was going when it was written */
        problem(r, "the file is a snapshot of %s (status '%s'): the run was still going then, or it was killed "
                "before it could mark the file 'complete' or 'aborted' itself",
                tb_results_str(r, "updated_time", "an unknown time"), status);
    } else if (status && strcmp(status, "complete") != 0) {
        const char *why = tb_results_str(r, "abort_reason", NULL);
        problem(r, "the run's status is '%s'%s%s", status, why ? ": " : "", why ? why : "");
    }
    static const struct {
        const char *group;
        const char *const *cols;
        const char *why_empty;
    } need[] = {
        {"steps", k_steps_cols, "no training step was recorded"},
        {"ranks", k_ranks_cols, "the run stopped before its per-rank summary"},
        {"scaling", k_scaling_cols, "no scaling measurement: the run stopped before it"},
        {"loader", k_loader_cols, "no thread count was measured"},
        {"allreduce", k_allreduce_cols, "no message size was measured"},
        {"projection", k_projection_cols, "no rank count was projected"},
        {"feed", k_feed_cols, "no loader configuration was measured"},
        {"probe", k_probe_cols, NULL}, /* no rows without a GPU: the CPU's facts are attributes */
    };
    size_t first = loader ? 3 : allreduce ? 4 : projection ? 5 : feed ? 6 : probe ? 7 : 0;
    size_t last = first == 0 ? 3 : first + 1;
    for (size_t i = first; i < last; i++) {
        const tb_rtable *t = tb_results_table(r, need[i].group);
        if (!t) {
            problem(r, "group /%s is missing", need[i].group);
            continue;
        }
        for (int c = 0; need[i].cols[c]; c++)
            if (!tb_rtable_col(t, need[i].cols[c]))
                problem(r, "/%s lacks column '%s'", need[i].group, need[i].cols[c]);
        /* a run asked for no scaling table (--scaling-steps 0) is complete without one */
        int none_asked = i == 2 && tb_results_no_scaling_asked(r);
        if (t->rows == 0 && need[i].why_empty && !none_asked)
            problem(r, "/%s has no rows (%s)", need[i].group, need[i].why_empty);
    }
}

const char *const tb_results_tables[] = {"steps", "ranks", "scaling", "loader", "allreduce", "projection", NULL};

int tb_results_load(const char *path, tb_results *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path);
    if (access(path, R_OK) != 0) {
        snprintf(err, errlen, "cannot read results file '%s': %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "'%s' is a directory; name a results file in it (a run's --results FILE)", path);
        return -1;
    }
    tb_h5_lock("results read"); /* every HDF5 call below, to the close */
    tb_h5_quiet();
    if (H5Fis_hdf5(path) <= 0) {
        tb_h5_unlock();
        snprintf(err, errlen, "'%s' is not a results file: not HDF5 at all", path);
        return -1;
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        char msg[512];
        tb_h5_last_error(msg, sizeof msg);
        tb_h5_unlock();
        snprintf(err, errlen, "cannot open results file '%s' (%s): the file is damaged (cut short or overwritten); "
                 "run again to write it, or give another",
                 path, msg);
        return -1;
    }
    r->nattrs = read_attrs(f, &r->attrs);
    int n = 0;
    char **names = tb_h5_list(f, &n);
    r->tables = calloc((size_t)(n ? n : 1), sizeof *r->tables);
    if (!r->tables) TB_FATAL("out of host memory");
    for (int i = 0; i < n; i++) {
        hid_t g = H5Gopen2(f, names[i], H5P_DEFAULT);
        if (g < 0) continue; /* a dataset at the root: not a table */
        H5_CHECK(H5Gclose(g));
        read_table(r, f, names[i], &r->tables[r->ntables++]);
    }
    tb_h5_free_names(names, n);
    H5_CHECK(H5Fclose(f));
    tb_h5_unlock();
    int marked = tb_results_attr(r, "status") != NULL;
    for (int i = 0; !marked && tb_results_tables[i]; i++) marked = tb_results_table(r, tb_results_tables[i]) != NULL;
    if (!marked) {
        if (tb_results_table(r, "params") && tb_results_attr(r, "model")) /* a checkpoint's /params, model */
            snprintf(err, errlen,
                     "'%s' is a trainbench checkpoint (--ckpt/--save), not a results file; name the file that "
                     "the run's --results wrote",
                     path);
        else
            snprintf(err, errlen,
                     "'%s' is not a trainbench results file: it has no root attribute 'status' and none of "
                     "the groups /steps, /ranks, /scaling, /loader",
                     path);
        tb_results_free(r);
        return -1;
    }
    check_contract(r);
    return 0;
}

void tb_results_free(tb_results *r) {
    for (int i = 0; i < r->nattrs; i++) {
        free(r->attrs[i].key);
        free(r->attrs[i].str);
    }
    free(r->attrs);
    for (int i = 0; i < r->ntables; i++) {
        tb_rtable *t = &r->tables[i];
        for (int c = 0; c < t->ncols; c++) {
            free(t->cols[c].name);
            free(t->cols[c].num);
            if (t->cols[c].str)
                for (size_t k = 0; k < t->cols[c].rows; k++) free(t->cols[c].str[k]);
            free(t->cols[c].str);
        }
        free(t->cols);
        free(t->name);
        for (int a = 0; a < t->nattrs; a++) {
            free(t->attrs[a].key);
            free(t->attrs[a].str);
        }
        free(t->attrs);
    }
    free(r->tables);
    for (int i = 0; i < r->nproblems; i++) free(r->problems[i]);
    free(r->problems);
    memset(r, 0, sizeof *r);
}

/* ---- look-ups ---------------------------------------------------------------------------- */

const tb_rattr *tb_results_attr(const tb_results *r, const char *key) {
    for (int i = 0; i < r->nattrs; i++)
        if (strcmp(r->attrs[i].key, key) == 0) return &r->attrs[i];
    return NULL;
}

static const tb_rattr *rtable_attr(const tb_rtable *t, const char *key) {
    for (int i = 0; i < t->nattrs; i++)
        if (strcmp(t->attrs[i].key, key) == 0) return &t->attrs[i];
    return NULL;
}

double tb_rtable_attr_num(const tb_rtable *t, const char *key, double dflt) {
    const tb_rattr *a = rtable_attr(t, key);
    return a && (a->kind == TB_VAL_INT || a->kind == TB_VAL_FLOAT) ? a->num : dflt;
}

const char *tb_rtable_attr_str(const tb_rtable *t, const char *key, const char *dflt) {
    const tb_rattr *a = rtable_attr(t, key);
    return a && a->kind == TB_VAL_STR ? a->str : dflt;
}

const char *tb_results_str(const tb_results *r, const char *key, const char *dflt) {
    const tb_rattr *a = tb_results_attr(r, key);
    return a && a->kind == TB_VAL_STR ? a->str : dflt;
}

double tb_results_num(const tb_results *r, const char *key, double dflt) {
    const tb_rattr *a = tb_results_attr(r, key);
    return a && (a->kind == TB_VAL_INT || a->kind == TB_VAL_FLOAT) ? a->num : dflt;
}

void tb_rattr_format(const tb_rattr *a, char *buf, size_t len) {
    switch (a->kind) {
    case TB_VAL_INT: snprintf(buf, len, "%lld", (long long)a->num); break;
    case TB_VAL_FLOAT: snprintf(buf, len, "%.6g", a->num); break;
    default: snprintf(buf, len, "%s", a->str ? a->str : ""); break;
    }
}

int tb_rattr_equal(const tb_rattr *a, const tb_rattr *b) {
    int na = a->kind == TB_VAL_INT || a->kind == TB_VAL_FLOAT;
    int nb = b->kind == TB_VAL_INT || b->kind == TB_VAL_FLOAT;
    if (na && nb) return a->num == b->num || (isnan(a->num) && isnan(b->num));
    if (na != nb) return 0;
    return strcmp(a->str ? a->str : "", b->str ? b->str : "") == 0;
}

const tb_rtable *tb_results_table(const tb_results *r, const char *name) {
    for (int i = 0; i < r->ntables; i++)
        if (strcmp(r->tables[i].name, name) == 0) return &r->tables[i];
    return NULL;
}

const tb_rcol *tb_rtable_col(const tb_rtable *t, const char *name) {
    if (!t) return NULL;
    for (int i = 0; i < t->ncols; i++)
        if (strcmp(t->cols[i].name, name) == 0) return &t->cols[i];
    return NULL;
}

double tb_rtable_num(const tb_rtable *t, const char *col, size_t row) {
    const tb_rcol *c = tb_rtable_col(t, col);
    if (!c || !c->num || row >= t->rows) return NAN;
    return c->num[row];
}

const char *tb_rtable_str(const tb_rtable *t, const char *col, size_t row) {
    const tb_rcol *c = tb_rtable_col(t, col);
    if (!c || !c->str || row >= t->rows) return NULL;
    return c->str[row];
}

/* ---- the live run's rows ------------------------------------------------------------------- */

static tb_spread spread_of(const tb_rtable *t, const char *stem, size_t row) {
    char a[96], b[96], c[96];
    snprintf(a, sizeof a, "%s_min", stem);
    snprintf(b, sizeof b, "%s_median", stem);
    snprintf(c, sizeof c, "%s_max", stem);
    tb_spread s = {tb_rtable_num(t, a, row), tb_rtable_num(t, b, row), tb_rtable_num(t, c, row)};
    return s;
}

int tb_results_scaling_rows(const tb_results *r, tb_scaling_row **rows) {
    const tb_rtable *t = tb_results_table(r, "scaling");
    *rows = NULL;
    if (!t || t->rows == 0 || !tb_rtable_col(t, "ranks")) return 0;
    *rows = calloc(t->rows, sizeof **rows);
    if (!*rows) TB_FATAL("out of host memory");
    for (size_t i = 0; i < t->rows; i++) {
        tb_scaling_row *s = &(*rows)[i];
        s->ranks = (int)tb_rtable_num(t, "ranks", i);
        double gb = tb_rtable_num(t, "global_batch", i);
        s->global_batch = isnan(gb) ? 0 : (int)gb;
        s->img_per_s = tb_rtable_num(t, "img_per_s", i);
        s->img_per_s_per_rank = tb_rtable_num(t, "img_per_s_per_rank", i);
        s->speedup = tb_rtable_num(t, "speedup", i);
        s->efficiency = tb_rtable_num(t, "efficiency", i);
        s->epoch_time_s = tb_rtable_num(t, "epoch_time_s", i);
        s->device_util_pct = tb_rtable_num(t, "device_util_pct", i);
        s->allreduce_busbw_GBps = tb_rtable_num(t, "allreduce_busbw_GBps", i);
        s->comm_share_pct = tb_rtable_num(t, "comm_share_pct", i);
        s->step_ms = spread_of(t, "step_ms", i);
        for (int p = 0; p < TB_PH_COUNT; p++) {
            char stem[64];
            snprintf(stem, sizeof stem, "%s_ms", tb_phase_name[p]);
            s->phase_ms[p] = spread_of(t, stem, i);
        }
    }
    return (int)t->rows;
}

int tb_results_rank_rows(const tb_results *r, tb_rank_row **rows) {
    const tb_rtable *t = tb_results_table(r, "ranks");
    *rows = NULL;
    if (!t || t->rows == 0 || !tb_rtable_col(t, "rank")) return 0;
    *rows = calloc(t->rows, sizeof **rows);
    if (!*rows) TB_FATAL("out of host memory");
    const tb_rcol *host = tb_rtable_col(t, "host");
    for (size_t i = 0; i < t->rows; i++) {
        tb_rank_row *s = &(*rows)[i];
        s->rank = (int)tb_rtable_num(t, "rank", i);
        double steps = tb_rtable_num(t, "steps", i);
        s->steps = isnan(steps) ? 1 : (int)steps; /* without the column: show every rank */
        s->samples = tb_rtable_num(t, "samples", i);
        s->img_per_s = tb_rtable_num(t, "img_per_s", i);
        s->step_ms = tb_rtable_num(t, "step_ms", i);
        for (int p = 0; p < TB_PH_COUNT; p++) {
            char col[64];
            snprintf(col, sizeof col, "%s_ms", tb_phase_name[p]);
            s->phase_ms[p] = tb_rtable_num(t, col, i);
        }
        if (host && host->str) snprintf(s->host, sizeof s->host, "%s", host->str[i]);
    }
    return (int)t->rows;
}
