/* projection_profile.c - the projection's one-rank step from a results file
 * or a profile file (see projection_profile.h). */
#include "src/project/projection_profile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/keyval.h"
#include "core/log.h"
#include "model/graph.h"
#include "model/resnet.h"

/* ---- the model's gradient layout and work per layer ------------------------------------------- */

static double elems(const tb_act *a) { return (double)a->c * a->h * a->w; }

int tb_proj_model_ranges(const char *model, int classes, int image, double elem_bytes, tb_grad_range **ranges,
                         int *n, double *n_train, double *n_state, char *err, size_t errlen) {
    tb_resnet_config cfg;
    if (tb_resnet_config_init(&cfg, model, classes) != 0) {
        snprintf(err, errlen, "model '%s' is not one trainbench knows (%s)", model, tb_resnet_known_names());
        return -1;
    }
    if (image < TB_RESNET_MIN_IMAGE || classes < 1) {
        snprintf(err, errlen, "model %s needs an image size >= %d and classes >= 1 (got %d, %d)", model,
                 TB_RESNET_MIN_IMAGE, image, classes);
        return -1;
    }
    tb_param_table pt = {0};
    tb_graph g = {0};
    tb_resnet_build(&cfg, image, image, 1, &pt, &g);
    tb_grad_range *r = calloc((size_t)g.nnodes, sizeof *r);
    if (!r) TB_FATAL("out of host memory");
    int nr = 0;
    double work = 0;
    const tb_param *it = pt.items;
    for (int i = g.nnodes - 1; i >= 0; i--) { /* backward order, as tb_graph_backward */
        const tb_node *nd = &g.nodes[i];
        const tb_act *y = &g.acts[nd->out];
        size_t off = 0, cnt = 0;
        switch (nd->kind) {
        case TB_NODE_CONV:
            work += (double)it[nd->param].numel * y->h * y->w * (nd->in == g.input ? 1 : 2);
            off = it[nd->param].offset;
            cnt = it[nd->param].numel;
            break;
        case TB_NODE_LINEAR:
            work += 2.0 * (double)it[nd->param].numel;
            off = it[nd->param].offset;
            cnt = it[nd->param].numel + it[nd->param + 1].numel;
            break;
        case TB_NODE_BN:
            work += 4 * elems(y);
            off = it[nd->param].offset;
            cnt = 2 * it[nd->param].numel;
            break;
        default: work += 4 * elems(y); break;
        }
        if (cnt) {
            r[nr].offset = elem_bytes * (double)off;
            r[nr].bytes = elem_bytes * (double)cnt;
            r[nr].ready_s = work; /* normalised below */
            nr++;
        }
    }
    for (int i = 0; i < nr; i++) r[i].ready_s /= work;
    *ranges = r;
    *n = nr;
    *n_train = (double)pt.n_train;
    *n_state = (double)pt.n_state;
    tb_params_free(&pt);
    free(g.nodes);
    free(g.acts);
    return 0;
}

/* ---- from a results file --------------------------------------------------------------------- */

/* --bucket-mb X and --no-overlap from the recorded command line. */
static void settings_from_command_line(const char *cmd, double *bucket_bytes, int *overlap) {
    *bucket_bytes = 25.0 * 1048576.0;
    *overlap = 1;
    if (!cmd) return;
    const char *p = strstr(cmd, "--bucket-mb");
    if (p) {
        p += strlen("--bucket-mb");
        while (*p == ' ' || *p == '=') p++;
        double v = strtod(p, NULL);
        if (v > 0) *bucket_bytes = v * 1048576.0;
    }
    if (strstr(cmd, "--no-overlap")) *overlap = 0;
}

static double ms(double v) { return isnan(v) ? 0 : 1e-3 * v; }

/* A 1-rank training run without scaling rows (--scaling-steps 0): the
 * means of its timed steps (/ranks), not medians. 0, or -1 when the file is
 * not one. */
static int step_from_ranks(const tb_results *r, tb_proj_profile *p, char *row_what, size_t len) {
    const tb_rtable *rk = tb_results_table(r, "ranks");
    if (tb_results_num(r, "world_size", 0) != 1 || !rk || rk->rows != 1 || !(tb_rtable_num(rk, "steps", 0) > 0))
        return -1;
    p->step_s = ms(tb_rtable_num(rk, "step_ms", 0));
    p->data_s = ms(tb_rtable_num(rk, "data_ms", 0));
    p->h2d_s = ms(tb_rtable_num(rk, "h2d_ms", 0));
    p->forward_s = ms(tb_rtable_num(rk, "forward_ms", 0));
    p->backward_s = ms(tb_rtable_num(rk, "backward_ms", 0));
    p->optimizer_s = ms(tb_rtable_num(rk, "optimizer_ms", 0));
    snprintf(row_what, len, "/ranks of a 1-rank run without scaling rows: means over its %.0f timed steps",
             tb_rtable_num(rk, "steps", 0));
    return 0;
}

double tb_proj_wire_scale(const tb_results *r) {
    return strcmp(tb_results_str(r, "allreduce_dtype", "fp32"), "bf16") == 0 ? 0.5 : 1.0;
}

int tb_proj_profile_from_results(const tb_results *r, tb_proj_profile *p, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    const tb_rtable *sc = tb_results_table(r, "scaling");
    size_t row = (size_t)-1;
    for (size_t i = 0; sc && i < sc->rows; i++)
        if (tb_rtable_num(sc, "ranks", i) == 1) row = i;
    /* an allreduce-bench, loader-bench or probe file said only "has no batch_size attribute" */
    const char *kind = tb_results_str(r, "kind", "train");
    if (strcmp(kind, "train") != 0 && strcmp(kind, "projection") != 0) {
        snprintf(err, errlen,
                 "%s is a trainbench %s file, not a training run's: project starts from a run of 'trainbench "
                 "train --results FILE'%s",
                 r->path, kind,
                 strcmp(kind, "allreduce-bench") == 0 ? " (an allreduce-bench file gives the fabric: --fabric fit:FILE)"
                                                      : "");
        return -1;
    }
    p->batch = tb_results_num(r, "batch_size", NAN);
    if (!(p->batch > 0)) {
        snprintf(err, errlen, "%s has no batch_size attribute", r->path);
        return -1;
    }
    char row_what[160] = "1-rank row of /scaling";
    if (row == (size_t)-1) {
        if (step_from_ranks(r, p, row_what, sizeof row_what) != 0) {
            const char *status = tb_results_str(r, "status", "complete");
            snprintf(err, errlen,
                     "%s has no 1-rank row in /scaling (and is not a 1-rank run with timed steps)%s%s%s: the "
                     "projection starts from one rank's measured step (run 'trainbench train' with "
                     "--scaling-steps > 0%s)",
                     r->path, strcmp(status, "complete") ? ": the run's status is '" : "",
                     strcmp(status, "complete") ? status : "", strcmp(status, "complete") ? "'" : "",
                     strcmp(status, "complete") ? " to the end" : "");
            return -1;
        }
    } else {
        p->step_s = ms(tb_rtable_num(sc, "step_ms_median", row));
        p->data_s = ms(tb_rtable_num(sc, "data_ms_median", row));
        p->h2d_s = ms(tb_rtable_num(sc, "h2d_ms_median", row));
        p->forward_s = ms(tb_rtable_num(sc, "forward_ms_median", row));
        p->backward_s = ms(tb_rtable_num(sc, "backward_ms_median", row));
        p->optimizer_s = ms(tb_rtable_num(sc, "optimizer_ms_median", row));
    }
    if (!(p->step_s > 0) && row != (size_t)-1) { /* a file without per-phase columns: the row's img/s */
        double ips = tb_rtable_num(sc, "img_per_s", row);
        p->step_s = ips > 0 ? p->batch / ips : 0;
    }
    if (!(p->backward_s > 0) || !(p->step_s > 0)) {
        snprintf(err, errlen,
                 "%s's 1-rank /scaling row has no backward_ms_median or step time: the file predates "
                 "the per-phase columns; re-run the measurement",
                 r->path);
        return -1;
    }
    const char *model = tb_results_str(r, "model", "?");
    int classes = (int)tb_results_num(r, "classes", 1000), image = (int)tb_results_num(r, "image_size", 224);
    double elem = strcmp(tb_results_str(r, "precision", "fp32"), "fp64") == 0 ? 8 : 4;
    tb_grad_range *est = NULL;
    int nest = 0;
    double n_train = 0, n_state = 0;
    int have_model = tb_proj_model_ranges(model, classes, image, elem, &est, &nest, &n_train, &n_state, err,
                                          errlen) == 0;
    /* measured ready times of the 1-rank steps */
    const tb_rtable *gr = tb_results_table(r, "grad_ready");
    int nmeas = 0;
    for (size_t i = 0; gr && i < gr->rows; i++) nmeas += tb_rtable_num(gr, "ranks", i) == 1;
    settings_from_command_line(tb_results_str(r, "command_line", NULL), &p->bucket_bytes, &p->overlap);
    /* the run's own settings where it recorded them (its defaults are not the command line's) */
    double bucket_mb = tb_results_num(r, "bucket_mb", NAN), first_mb = tb_results_num(r, "first_bucket_mb", NAN);
    if (bucket_mb > 0) p->bucket_bytes = bucket_mb * 1048576.0;
    if (first_mb >= 0) p->first_bucket_bytes = first_mb * 1048576.0;
    p->bn_broadcast = tb_results_num(r, "broadcast_buffers", 1) != 0; /* recorded since --broadcast-buffers */
    p->wire_scale = tb_proj_wire_scale(r);
    if (nmeas > 0) {
        p->ranges = calloc((size_t)nmeas, sizeof *p->ranges);
        if (!p->ranges) TB_FATAL("out of host memory");
        for (size_t i = 0; i < gr->rows; i++) {
            if (tb_rtable_num(gr, "ranks", i) != 1) continue;
            tb_grad_range *g = &p->ranges[p->nranges++];
            g->offset = tb_rtable_num(gr, "offset", i);
            g->bytes = tb_rtable_num(gr, "bytes", i);
            g->ready_s = 1e-3 * tb_rtable_num(gr, "ready_ms", i);
            p->grad_bytes += g->bytes;
            double bb = tb_rtable_num(gr, "bucket_bytes", i), ov = tb_rtable_num(gr, "overlap", i);
            double fb = tb_rtable_num(gr, "first_bucket_bytes", i); /* NAN in files from before it */
            if (bb > 0) p->bucket_bytes = bb;
            if (fb >= 0) p->first_bucket_bytes = fb;
            if (!isnan(ov)) p->overlap = ov != 0;
        }
        snprintf(p->ready_source, sizeof p->ready_source,
                 "measured on 1 rank (/grad_ready, %d gradient ranges, median over the timed steps; %.64s)", nmeas,
                 tb_rtable_attr_str(gr, "clock", "host clock"));
        free(est);
        if (have_model && n_train > 0) p->state_bytes = n_state * p->grad_bytes / n_train;
    } else {
        if (!have_model) return -1;
        p->ranges = est;
        p->nranges = nest;
        for (int i = 0; i < nest; i++) {
            p->ranges[i].ready_s *= p->backward_s;
            p->grad_bytes += p->ranges[i].bytes;
        }
        p->state_bytes = n_state * elem;
        snprintf(p->ready_source, sizeof p->ready_source,
                 "ESTIMATED from %s's per-layer work over the measured backward (the file has no "
                 "/grad_ready: no measured gradient-ready times)",
                 model);
    }
    snprintf(p->what, sizeof p->what, "%.200s: %s, %d px, batch %.0f per rank, %.100s (%.100s)", r->path, model,
             image, p->batch, row_what, tb_results_str(r, "device_names", "?"));
    return 0;
}

/* ---- from a profile file --------------------------------------------------------------------- */


/* Why a profile file's number describes no run (NULL: it can). Any finite
 * value >= 0 passed: batch_size = 1e300 printed img/s of 300 digits, and
 * classes or image_size beyond an int overflowed the cast to one. */
static const char *profile_value_check(const char *key, double v) {
    if (strcmp(key, "batch_size") == 0)
        return v != floor(v) || v < 1 || v > 1048576 ? "a whole number of samples from 1 to 1048576" : NULL;
    if (strcmp(key, "classes") == 0) return v != floor(v) || v < 1 || v > 1e6 ? "a whole number from 1 to 1e6" : NULL;
    if (strcmp(key, "image_size") == 0)
        return v != floor(v) || v < 32 || v > 16384 ? "a whole number of pixels from 32 to 16384" : NULL;
    if (strcmp(key, "grad_bytes_per_param") == 0) return v < 0.5 || v > 8 ? "0.5 to 8 bytes" : NULL;
    if (strcmp(key, "bucket_mb") == 0 || strcmp(key, "first_bucket_mb") == 0)
        return (v != 0 || key[0] == 'b') && (v < 1.0 / 1048576 || v > 1e6) ? "1 byte (1/1048576) to 1e6 MiB" : NULL;
    if (strcmp(key, "overlap") == 0 || strcmp(key, "broadcast_buffers") == 0) return v != 0 && v != 1 ? "0 or 1" : NULL;
    if (strstr(key, "_ms")) return v > 1e7 ? "0 to 1e7 ms" : NULL;
    return NULL;
}

int tb_proj_profile_from_file(const char *path, tb_proj_profile *p, tb_proj_published *pub, int *npub,
                              char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    *npub = 0;
    FILE *in = fopen(path, "r");
    if (!in) {
        snprintf(err, errlen, "cannot read profile file '%s': %s", path, strerror(errno));
        return -1;
    }
    char model[64] = "", name[256] = "", source[256] = "", line[1024];
    double classes = 1000, image = 224, bpp = 4, bucket_mb = 25, first_bucket_mb = 0, overlap = 1, bcast = 1;
    double step = NAN, data = 0, h2d = 0, fwd = NAN, bwd = NAN, opt = 0;
    struct {
        const char *key;
        double *dst;
    } nums[] = {{"classes", &classes},   {"image_size", &image},    {"batch_size", &p->batch},
                {"grad_bytes_per_param", &bpp}, {"bucket_mb", &bucket_mb}, {"first_bucket_mb", &first_bucket_mb},
                {"overlap", &overlap},   {"broadcast_buffers", &bcast},
                {"step_ms", &step},      {"data_ms", &data},        {"h2d_ms", &h2d},
                {"forward_ms", &fwd},    {"backward_ms", &bwd},     {"optimizer_ms", &opt}};
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, in)) {
        lineno++;
        char *key, *val;
        int got = tb_keyval_line(line, path, lineno, &key, &val, err, errlen);
        if (got == 0) continue;
        if (got < 0) {
            rc = -1;
            break;
        }
        if (strcmp(key, "model") == 0) snprintf(model, sizeof model, "%s", val);
        else if (strcmp(key, "name") == 0) snprintf(name, sizeof name, "%s", val);
        else if (strcmp(key, "source") == 0) snprintf(source, sizeof source, "%s", val);
        else if (strcmp(key, "measured") == 0) {
            tb_proj_published m = {0};
            char *end;
            m.ranks = (int)strtol(val, &end, 10);
            if (*end == ':') m.efficiency = strtod(end + 1, &end);
            if (m.ranks < 2 || !(m.efficiency > 0 && m.efficiency <= 1.5) || (*end && *end != ':')) {
                snprintf(err, errlen, "%s:%d: measured wants RANKS:EFFICIENCY[:label] (e.g. 4:0.883), got '%s'",
                         path, lineno, val);
                rc = -1;
                break;
            }
            if (*end == ':') snprintf(m.label, sizeof m.label, "%s", tb_keyval_trim(end + 1));
            if (*npub < TB_PROJ_MAX_MEASURED) pub[(*npub)++] = m;
        } else {
            size_t k;
            for (k = 0; k < sizeof nums / sizeof nums[0]; k++)
                if (strcmp(key, nums[k].key) == 0) break;
            double v = NAN;
            const char *bad = NULL;
            if (k == sizeof nums / sizeof nums[0]) {
                snprintf(err, errlen,
                         "%s:%d: unknown key '%s' (known: name, source, model, classes, image_size, "
                         "batch_size, grad_bytes_per_param, step_ms, data_ms, h2d_ms, forward_ms, "
                         "backward_ms, optimizer_ms, bucket_mb, first_bucket_mb, overlap, broadcast_buffers, measured)",
                         path, lineno, key);
                rc = -1;
            } else if (tb_keyval_number(val, &v) != 0) {
                snprintf(err, errlen, "%s:%d: %s wants a number >= 0, got '%s'", path, lineno, key, val);
                rc = -1;
            } else if ((bad = profile_value_check(key, v)) != NULL) {
                snprintf(err, errlen, "%s:%d: %s = %s is out of range: %s", path, lineno, key, val, bad);
                rc = -1;
            } else {
                *nums[k].dst = v;
            }
        }
    }
    fclose(in);
    if (rc != 0) return -1;
    if (!model[0] || !(p->batch > 0) || !(step > 0) || !(fwd >= 0) || !(bwd > 0)) {
        snprintf(err, errlen, "%s: a profile needs model, batch_size, step_ms, forward_ms and backward_ms", path);
        return -1;
    }
    if (data + h2d + fwd + bwd + opt > 1.01 * step) { /* backward_ms = 1e300 printed a 300-digit step */
        snprintf(err, errlen,
                 "%s: the phases (data %g + h2d %g + forward %g + backward %g + optimizer %g ms) exceed step_ms %g: "
                 "a step holds its phases",
                 path, data, h2d, fwd, bwd, opt, step);
        return -1;
    }
    double n_train, n_state;
    if (tb_proj_model_ranges(model, (int)classes, (int)image, bpp, &p->ranges, &p->nranges, &n_train, &n_state,
                             err, errlen) != 0)
        return -1;
    p->step_s = 1e-3 * step;
    p->data_s = 1e-3 * data;
    p->h2d_s = 1e-3 * h2d;
    p->forward_s = 1e-3 * fwd;
    p->backward_s = 1e-3 * bwd;
    p->optimizer_s = 1e-3 * opt;
    for (int i = 0; i < p->nranges; i++) {
        p->ranges[i].ready_s *= p->backward_s;
        p->grad_bytes += p->ranges[i].bytes;
    }
    p->state_bytes = n_state * bpp;
    p->bucket_bytes = bucket_mb * 1048576.0;
    p->first_bucket_bytes = first_bucket_mb * 1048576.0;
    p->overlap = overlap != 0;
    p->bn_broadcast = bcast != 0;
    snprintf(p->ready_source, sizeof p->ready_source,
             "estimated from %s's per-layer work over the stated backward", model);
    snprintf(p->what, sizeof p->what, "%.100s: %.150s%s%.200s", path, name[0] ? name : model,
             source[0] ? "; " : "", source);
    return 0;
}
