/* cmd_project.c - `trainbench project`: what N ranks should reach.
 *
 *   trainbench project RUN.h5 [--fabric NAME|FILE|A+B|fit|fit:BENCH] [--ranks 2,4,8,...]
 *                      [--what-if LIST] [--set LIST] [--out FILE] [--format text|md|csv]
 *   trainbench project --profile PUBLISHED.txt --fabric ...    (a run published elsewhere)
 *   trainbench project --list-fabrics
 *
 * From a results file's 1-rank step (the 1-rank /scaling row, /grad_ready's
 * ready times; projection_profile.h) and a fabric (fabric.h), the
 * projection of each rank count (projection.h) beside the measured rows of
 * the file, the what-if columns, the buckets, the differences by phase
 * (projection_report.h). --out writes a copy of RUN.h5 (or a new file) with
 * the /projection table, atomically; the input is never modified. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cli.h"
#include "core/log.h"
#include "core/version.h"
#include "src/cmd/commands.h"
#include "src/project/project.h"

static const char k_usage[] =
    "trainbench project RUN.h5 [--fabric NAME|FILE|A+B|fit|fit:BENCH] [--ranks 1,2,4,...] [--what-if LIST]\n"
    "                          [--set LIST] [--out FILE] [--format text|md|csv]\n"
    "       trainbench project --profile PUBLISHED.txt --fabric ... | --list-fabrics\n\n"
    "Predicts, for each rank count, the all-reduce time of every gradient bucket (ring, tree and\n"
    "hierarchical alpha-beta costs), what stays exposed after the backward pass, the step time, img/s\n"
    "and efficiency, from RUN.h5's 1-rank step and a fabric, beside the file's measured rows, and\n"
    "names by phase where a measured row differs. --fabric: a preset (--list-fabrics), NODE+NETWORK,\n"
    "a key = value file, 'fit' (alpha and beta fitted to the bucket all-reduces RUN.h5 timed), or\n"
    "fit:BENCH (an allreduce-bench table: its console output, nccl-tests' or --results file).\n"
    "LIST: comma-separated changes, each one what-if column (--what-if) or applied to every column\n"
    "(--set): bucket=SIZE (5M, 512K), first-bucket=SIZE (the first bucket launched; 0: as the rest),\n"
    "bf16 (half the gradient bytes), fp32, no-overlap, overlap, no-bn-broadcast (as --broadcast-buffers off),\n"
    "bn-broadcast,\n"
    "batch=X (per-rank batch x X: compute scales, gradient bytes do not), algo=ring|tree|hier|auto\n"
    "(auto: the faster of ring and tree, as NCCL chooses; hier: a two-level all-reduce NCCL does not run),\n"
    "share=N (N ranks time-slice one device, as --share-gpu runs them: each rank's step holds the\n"
    "compute of N, and the all-reduces run after it, not overlapped).\n"
    "--out FILE: RUN.h5 copied with a /projection table (atomic; FILE may be RUN.h5 itself).";

/* ---- knobs from text -------------------------------------------------------------------------- */

static int parse_size(const char *s, double *bytes) {
    char *end;
    double v = strtod(s, &end);
    double mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mult = 1048576.0, end++;
    else if (*end == 'G' || *end == 'g') mult = 1073741824.0, end++;
    if (*end == 'i' && end[1] == 'B') end += 2;
    else if (*end == 'B') end++;
    /* inf passed !(v > 0) and a size under one byte made no bucket at all */
    if (end == s || *end || !(v > 0) || !isfinite(v * mult) || v * mult < 1) return -1;
    *bytes = v * mult;
    return 0;
}

/* Applies one change ("bucket=5M") to k; key and label describe it. */
static int apply_change(const char *item, tb_proj_knobs *k, char *key, size_t keylen, char *label, size_t lablen,
                        char *err, size_t errlen) {
    const char *eq = strchr(item, '=');
    const char *val = eq ? eq + 1 : "";
    size_t nlen = eq ? (size_t)(eq - item) : strlen(item);
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(nlen < 63 ? nlen : 63), item);
    if (strcmp(name, "bucket") == 0) {
        if (parse_size(val, &k->bucket_bytes) != 0) goto bad;
        snprintf(key, keylen, "bucket_%s", val);
        snprintf(label, lablen, "bucket %s", val);
    } else if (strcmp(name, "first-bucket") == 0) {
        if (strcmp(val, "0") == 0) k->first_bucket_bytes = 0;
        else if (parse_size(val, &k->first_bucket_bytes) != 0) goto bad;
        snprintf(key, keylen, "first_bucket_%s", val);
        snprintf(label, lablen, "first %s", val);
    } else if (strcmp(name, "bf16") == 0 || strcmp(name, "fp16") == 0) {
        k->byte_scale = 0.5;
        snprintf(key, keylen, "%.8s", name);
        snprintf(label, lablen, "%.8s grads", name);
    } else if (strcmp(name, "fp32") == 0) {
        k->byte_scale = 1;
        snprintf(key, keylen, "fp32");
        snprintf(label, lablen, "fp32 grads");
    } else if (strcmp(name, "no-overlap") == 0 || strcmp(name, "overlap") == 0) {
        k->overlap = name[0] == 'o';
        snprintf(key, keylen, "%s", k->overlap ? "overlap" : "no_overlap");
        snprintf(label, lablen, "overlap %s", k->overlap ? "on" : "off");
    } else if (strcmp(name, "no-bn-broadcast") == 0 || strcmp(name, "bn-broadcast") == 0) {
        k->bn_broadcast = name[0] == 'b';
        snprintf(key, keylen, "%s", k->bn_broadcast ? "bn_broadcast" : "no_bn_broadcast");
        snprintf(label, lablen, "BN bcast %s", k->bn_broadcast ? "on" : "off");
    } else if (strcmp(name, "batch") == 0) {
        char *end;
        double v = strtod(val[0] == 'x' ? val + 1 : val, &end);
        /* batch=inf printed a step of "inf" ms and exited 0; 1e300 a step of 300 digits */
        if (*end || end == val || !(v >= 1.0 / 1024 && v <= 1024)) goto bad;
        k->batch_scale = v;
        snprintf(key, keylen, "batch_x%g", v);
        snprintf(label, lablen, "batch x%g", v);
    } else if (strcmp(name, "share") == 0) {
        char *end;
        long v = strtol(val, &end, 10);
        if (*end || !(val[0] >= '0' && val[0] <= '9') || v < 1 || v > 64) goto bad;
        k->share = (int)v;
        snprintf(key, keylen, "share_%ld", v);
        snprintf(label, lablen, "%ld ranks per device", v);
    } else if (strcmp(name, "algo") == 0) {
        if (tb_ar_algo_parse(val, &k->algo) != 0) goto bad;
        snprintf(key, keylen, "algo_%s", val);
        snprintf(label, lablen, "%s", val);
    } else {
        goto bad;
    }
    for (char *c = key; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))) *c = '_';
    return 0;
bad:
    snprintf(err, errlen,
             "'%s' is not a change: use bucket=SIZE (1 byte or more), first-bucket=SIZE, bf16, fp32, no-overlap, "
             "overlap, no-bn-broadcast, bn-broadcast, batch=X (1/1024 to 1024), share=N (1 to 64) or algo=ring|tree|hier|auto",
             item);
    return -1;
}

/* Splits a comma list; calls apply_change on each item, into one knob set
 * (set != NULL) or one what-if each (w). Returns the what-if count or -1. */
static int parse_changes(const char *list, const tb_proj_knobs *base, tb_proj_knobs *set, tb_proj_whatif *w,
                         char *err, size_t errlen) {
    char buf[TB_OPT_STR_MAX];
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char key[48], label[64];
        if (set) {
            if (apply_change(item, set, key, sizeof key, label, sizeof label, err, errlen) != 0) return -1;
            continue;
        }
        if (n == TB_PROJ_MAX_WHATIF) {
            snprintf(err, errlen, "at most %d what-if changes", TB_PROJ_MAX_WHATIF);
            return -1;
        }
        w[n].k = *base;
        if (apply_change(item, &w[n].k, w[n].key, sizeof w[n].key, w[n].label, sizeof w[n].label, err, errlen) != 0)
            return -1;
        n++;
    }
    return n;
}

static int parse_ranks(const char *list, int *out, int max) {
    int n = 0;
    for (const char *p = list; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1000000 || n == max) return -1;
        out[n++] = (int)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        p = end;
    }
    return n;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static int add_unique(int *v, int n, int x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return n;
    v[n] = x;
    return n + 1;
}

/* ---- measured rows --------------------------------------------------------------------------- */

static int measured_from_results(const tb_results *r, tb_proj_measured *m, int max) {
    tb_scaling_row *rows;
    int n = tb_results_scaling_rows(r, &rows), k = 0;
    for (int i = 0; i < n && k < max; i++) {
        tb_proj_measured *x = &m[k++];
        memset(x, 0, sizeof *x);
        x->ranks = rows[i].ranks;
        x->step_ms = rows[i].step_ms.median;
        x->img_per_s = rows[i].img_per_s;
        x->efficiency = rows[i].efficiency;
        x->exposed_ms = rows[i].phase_ms[TB_PH_COMM].median;
        x->busbw_GBps = rows[i].ranks > 1 ? rows[i].allreduce_busbw_GBps : NAN;
        for (int p = 0; p < TB_PH_COUNT; p++) x->phase_ms[p] = rows[i].phase_ms[p].median;
    }
    free(rows);
    return k;
}

/* --fabric fit: alpha and beta from the bucket all-reduces the run timed. */
static int fit_run_buckets(const tb_results *r, tb_fabric *f, char *err, size_t errlen) {
    const tb_rtable *b = tb_results_table(r, "buckets");
    tb_ar_sample *s = calloc(b && b->rows ? b->rows : 1, sizeof *s);
    if (!s) TB_FATAL("out of host memory");
    int n = 0;
    double wire = tb_proj_wire_scale(r); /* /buckets records gradient bytes; bf16 moved half */
    for (size_t i = 0; b && i < b->rows; i++) {
        int ranks = (int)tb_rtable_num(b, "ranks", i);
        if (ranks < 2) continue;
        s[n].ranks = ranks;
        s[n].bytes = wire * tb_rtable_num(b, "bytes", i);
        s[n].seconds = 1e-3 * (tb_rtable_num(b, "end_ms", i) - tb_rtable_num(b, "start_ms", i));
        n++;
    }
    tb_ab_fit fit;
    int rc = -1;
    if (n == 0)
        snprintf(err, errlen,
                 "--fabric fit needs the bucket timings of 2 or more ranks (/buckets) in %s; name a preset or "
                 "fit:BENCH instead",
                 r->path);
    else
        rc = tb_ab_fit_samples(s, n, &fit, err, errlen);
    free(s);
    if (rc != 0) return -1;
    int world = (int)tb_results_num(r, "world_size", 1);
    int hosts = tb_fabric_count_hosts(tb_results_str(r, "hostnames", ""));
    char what[4400];
    snprintf(what, sizeof what, "the training run's own bucket all-reduces (%s /buckets; they include the "
                                "contention of training beside them)",
             r->path);
    tb_fabric_from_fit(f, &fit, world, hosts > 0 ? hosts : 1, what);
    snprintf(f->name, sizeof f->name, "fit (this run's buckets)");
    return 0;
}

static void list_fabrics(void) {
    const tb_col cols[] = {
        {.head = "name", .key = "name", .left = 1},
        {.head = "node link", .unit = "GB/s", .key = "intra_bw_GBps", .width = 9},
        {.head = "alpha", .unit = "us", .key = "alpha_intra_us", .width = 6},
        {.head = "network", .unit = "GB/s/node", .key = "inter_bw_GBps", .width = 9},
        {.head = "alpha", .unit = "us", .key = "alpha_inter_us", .width = 6},
        {.head = "ranks/node", .key = "ranks_per_node", .width = 5},
        {.head = "what", .key = "what", .left = 1, .gap = 2},
    };
    tb_tab *t = tb_tab_new(TB_FMT_TEXT, "fabric presets (bandwidth per direction; join a node and a network with '+')",
                           cols, (int)(sizeof cols / sizeof cols[0]));
    for (int i = 0; i < tb_fabric_npresets; i++) {
        const tb_fabric *f = &tb_fabric_presets[i].f;
        tb_tab_str(t, tb_fabric_presets[i].name);
        tb_tab_num(t, f->intra_bw_GBps > 0 ? f->intra_bw_GBps : NAN, 4);
        tb_tab_num(t, f->intra_bw_GBps > 0 ? f->alpha_intra_us : NAN, 1);
        tb_tab_num(t, f->inter_bw_GBps > 0 ? f->inter_bw_GBps : NAN, 4);
        tb_tab_num(t, f->inter_bw_GBps > 0 ? f->alpha_inter_us : NAN, 1);
        tb_tab_int(t, f->ranks_per_node);
        tb_tab_str(t, tb_fabric_presets[i].what);
    }
    tb_tab_print(t, stdout);
    printf("#\n# sources\n");
    for (int i = 0; i < tb_fabric_npresets; i++)
        printf("#  %-13s %s\n", tb_fabric_presets[i].name, tb_fabric_presets[i].f.source);
}

/* ---- the subcommand -------------------------------------------------------------------------- */

/* What is projected from: a results file, or a published profile, and the rows measured. */
typedef struct {
    tb_results run;
    int have_run;
    tb_proj_profile prof;
    tb_proj_measured meas[64];
    int nmeas;
} project_input;

/* A directory where a file is wanted: one line naming the flag. fopen takes a directory on Linux, and
 * reading it then looked like an empty file ("a profile needs model, ...", "no intra_bw_GBps ..."). */
static void refuse_directory(const char *path, const char *flag, const char *want) {
    struct stat st;
    if (strcmp(flag, "--fabric") == 0) { /* 'fit' and a preset's name win over a file of that name (resolve_one) */
        if (strcmp(path, "fit") == 0) return;
        for (int i = 0; i < tb_fabric_npresets; i++)
            if (strcmp(path, tb_fabric_presets[i].name) == 0) return;
    }
    if (path[0] && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        tb_die("project: %s '%s' is a directory; give %s", flag, path, want);
}

static void load_input(const char *run_path, const char *profile_path, project_input *in) {
    char err[8192];
    tb_proj_published pub[TB_PROJ_MAX_MEASURED];
    int npub = 0;
    in->have_run = 0;
    in->nmeas = 0;
    if (run_path) {
        if (tb_results_load(run_path, &in->run, err, sizeof err) != 0) tb_die("project: %s", err);
        in->have_run = 1;
        if (tb_proj_profile_from_results(&in->run, &in->prof, err, sizeof err) != 0) tb_die("project: %s", err);
        in->nmeas = measured_from_results(&in->run, in->meas, 64);
        return;
    }
    if (tb_proj_profile_from_file(profile_path, &in->prof, pub, &npub, err, sizeof err) != 0)
        tb_die("project: %s", err);
    for (int i = 0; i < npub; i++) {
        tb_proj_measured *x = &in->meas[in->nmeas++];
        x->ranks = pub[i].ranks;
        x->efficiency = pub[i].efficiency;
        x->step_ms = x->img_per_s = x->exposed_ms = x->busbw_GBps = NAN;
        for (int p = 0; p < TB_PH_COUNT; p++) x->phase_ms[p] = NAN;
        snprintf(x->label, sizeof x->label, "%s", pub[i].label);
    }
}

/* The fabric from --fabric (fit by default when the run timed its buckets). */
static void choose_fabric(char *fabric_spec, size_t speclen, project_input *in, int rpn, tb_fabric *fab) {
    char err[8192];
    if (!fabric_spec[0]) {
        const tb_rtable *b = in->have_run ? tb_results_table(&in->run, "buckets") : NULL;
        if (!b || b->rows == 0)
            tb_die("project: name a fabric with --fabric (a preset from --list-fabrics, a file, or "
                   "fit:BENCH)%s",
                   in->have_run ? "; this file has no bucket timings to fit" : "");
        snprintf(fabric_spec, speclen, "fit");
    }
    if (strcmp(fabric_spec, "fit") == 0) {
        if (!in->have_run) tb_die("project: --fabric fit fits RUN.h5's bucket timings; with --profile use fit:BENCH");
        if (fit_run_buckets(&in->run, fab, err, sizeof err) != 0) tb_die("project: %s", err);
    } else if (tb_fabric_resolve(fabric_spec, fab, err, sizeof err) != 0) {
        tb_die("project: %s", err);
    }
    if (rpn > 0) fab->ranks_per_node = rpn;
}

/* The rank counts projected (--ranks, else 1, the measured ones and 2..4096, or up to one node's ranks on a
 * fabric without a network), sorted: their number. */
static int rank_counts(const char *ranks_s, const project_input *in, const tb_fabric *fab, int *ranks) {
    int nranks = 0;
    if (ranks_s[0]) {
        nranks = parse_ranks(ranks_s, ranks, 128);
        if (nranks < 1) /* said ">= 1" to --ranks 1000000000 */
            tb_die("project: --ranks wants a comma-separated list of at most 128 rank counts from 1 to 1000000, "
                   "e.g. 2,4,8; got '%s'", ranks_s);
    } else {
        nranks = add_unique(ranks, nranks, 1);
        for (int i = 0; i < in->nmeas && nranks < 100; i++) nranks = add_unique(ranks, nranks, in->meas[i].ranks);
        int most = fab->ranks_per_node > 0 && !(fab->inter_bw_GBps > 0) ? fab->ranks_per_node : 4096;
        for (int n = 2; n <= most && n <= 4096; n *= 2) nranks = add_unique(ranks, nranks, n);
    }
    qsort(ranks, (size_t)nranks, sizeof *ranks, cmp_int);
    return nranks;
}

/* The rank counts whose buckets are printed (--buckets-at, else the measured ones above 1). */
static int bucket_counts(const char *buckets_s, const project_input *in, int *branks) {
    int nb = 0;
    if (buckets_s[0]) {
        nb = parse_ranks(buckets_s, branks, 64);
        if (nb < 1)
            tb_die("project: --buckets-at wants a comma-separated list of at most 64 rank counts from 1 to 1000000; "
                   "got '%s'", buckets_s);
    } else {
        for (int i = 0; i < in->nmeas && nb < 64; i++)
            if (in->meas[i].ranks > 1) nb = add_unique(branks, nb, in->meas[i].ranks);
    }
    return nb;
}

/* --out: RUN.h5 copied with the /projection table, or a new results file of kind projection. */
static void write_projection(const char *out, const char *run_path, const tb_proj_request *q, const char *set_s,
                             int argc, char **argv) {
    tb_table t;
    tb_proj_store(&t, q);
    tb_attrs a;
    memset(&a, 0, sizeof a);
    char buf[4096];
    tb_fabric_describe(q->f, buf, sizeof buf);
    tb_attrs_str(&a, "projection_fabric", buf);
    tb_attrs_str(&a, "projection_fabric_source", q->f->source);
    tb_attrs_str(&a, "projection_profile", q->p->what);
    tb_attrs_str(&a, "projection_ready_source", q->p->ready_source);
    tb_attrs_str(&a, "projection_set", set_s);
    size_t used = (size_t)snprintf(buf, sizeof buf, "trainbench project");
    for (int i = 0; i < argc && used < sizeof buf; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, " %s", argv[i]);
    tb_attrs_str(&a, "projection_command_line", buf);
    const tb_table *tabs[1] = {&t};
    if (run_path) {
        tb_results_copy_with_tables(run_path, out, &a, tabs, 1);
    } else {
        char now[32];
        tb_utc_now(now, sizeof now);
        tb_attrs_str(&a, "kind", "projection");
        tb_attrs_str(&a, "trainbench_version", tb_version_string);
        tb_attrs_str(&a, "git_revision", tb_git_revision);
        tb_attrs_str(&a, "command_line", buf);
        tb_attrs_str(&a, "start_time", now);
        tb_attrs_str(&a, "end_time", now);
        tb_attrs_str(&a, "status", "complete");
        tb_results_write(out, &a, tabs, 1);
    }
    tb_attrs_free(&a);
    tb_table_free(&t);
    printf("# projection written to %s\n", out);
}

int tb_cmd_project(int argc, char **argv) {
    char fabric_spec[TB_OPT_STR_MAX] = "", profile_path[TB_OPT_STR_MAX] = "", ranks_s[TB_OPT_STR_MAX] = "";
    char whatif_s[TB_OPT_STR_MAX] = "bucket=5M,bf16,no-overlap,batch=2", set_s[TB_OPT_STR_MAX] = "";
    char buckets_s[TB_OPT_STR_MAX] = "", out[TB_OPT_STR_MAX] = "", format[TB_OPT_STR_MAX] = "text";
    int rpn = 0, list = 0;
    const tb_opt opts[] = {
        {"fabric", TB_OPT_STRING, fabric_spec, 0, 0, NULL,
         "preset, NODE+NETWORK, key = value file, fit, or fit:BENCH (default: fit when RUN.h5 timed buckets)"},
        {"profile", TB_OPT_STRING, profile_path, 0, 0, NULL, "a published run's step (key = value) instead of RUN.h5"},
        {"ranks", TB_OPT_STRING, ranks_s, 0, 0, NULL, "rank counts (default: 1, the measured ones, 2..4096; one node's on a fabric without a network)"},
        {"ranks-per-node", TB_OPT_INT, &rpn, 0, 1 << 20, NULL, "override the fabric's ranks per node (0: keep)"},
        {"what-if", TB_OPT_STRING, whatif_s, 0, 0, NULL, "one column per change (\"\" for none)"},
        {"set", TB_OPT_STRING, set_s, 0, 0, NULL, "changes applied to every column"},
        {"buckets-at", TB_OPT_STRING, buckets_s, 0, 0, NULL, "rank counts whose buckets are printed (default: measured)"},
        {"out", TB_OPT_STRING, out, 0, 0, NULL, "write RUN.h5 (or a new file) with the /projection table"},
        {"format", TB_OPT_CHOICE, format, 0, 0, "text|md|csv", "table rendering"},
        {"list-fabrics", TB_OPT_FLAG, &list, 0, 0, NULL, "print the presets with their sources"},
        {NULL, TB_OPT_FLAG, NULL, 0, 0, NULL, NULL},
    };
    tb_cli_args args;
    tb_cli_split(argc, argv, opts, &args);
    if (args.nwords > 1) tb_die("project: one results file at a time, got '%s' after '%s'", args.words[1], args.words[0]);
    const char *run_path = args.words[0];
    tb_cli_parse("project", k_usage, args.nflags, args.flags, opts);
    tb_cli_args_free(&args);
    if (list) {
        list_fabrics();
        return 0;
    }
    tb_format fmt = TB_FMT_TEXT;
    tb_format_parse(format, &fmt);
    if (!run_path == !profile_path[0])
        tb_die("project: name one input: a results file (trainbench project RUN.h5) or --profile FILE");
    /* --out may be RUN.h5 itself (the projection is added to the run's file); never one of the text inputs */
    const char *fit = strncmp(fabric_spec, "fit:", 4) == 0 ? fabric_spec + 4 : NULL;
    const char *in_flag[3] = {"--profile", "--fabric", "--fabric fit:"},
               *in_path[3] = {profile_path, fit ? NULL : fabric_spec, fit};
    tb_output_not_input("project", "--out", out, in_flag, in_path, 3);
    tb_output_path_require("project", out, TB_OUT_RESULTS, "projection file", "--out");

    refuse_directory(profile_path, "--profile", "a profile file of key = value lines");
    if (strncmp(fabric_spec, "fit:", 4) == 0)
        refuse_directory(fabric_spec + 4, "--fabric fit:",
                         "an allreduce-bench table (its console output or --results file)");
    else
        refuse_directory(fabric_spec, "--fabric", "a preset (--list-fabrics), NODE+NETWORK or a key = value file");
    static project_input in;
    load_input(run_path, profile_path, &in);
    tb_fabric fab;
    choose_fabric(fabric_spec, sizeof fabric_spec, &in, rpn, &fab);

    char err[8192];
    tb_proj_knobs base = tb_proj_knobs_of(&in.prof);
    if (set_s[0] && parse_changes(set_s, &base, &base, NULL, err, sizeof err) < 0) tb_die("project: --set %s", err);
    tb_proj_whatif w[TB_PROJ_MAX_WHATIF];
    int nw = whatif_s[0] ? parse_changes(whatif_s, &base, NULL, w, err, sizeof err) : 0;
    if (nw < 0) tb_die("project: --what-if %s", err);

    int ranks[128], branks[64];
    int nranks = rank_counts(ranks_s, &in, &fab, ranks);
    int nb = bucket_counts(buckets_s, &in, branks);
    for (int i = 0; i < nranks; i++) { /* a rank count the fabric cannot carry: refused before any output */
        tb_ar_cost c;
        if (tb_allreduce_cost(&fab, ranks[i], 1.0, &c, err, sizeof err) != 0) tb_die("project: %s", err);
    }

    tb_proj_request q = {&in.prof, &fab, base, ranks, nranks, w, nw, in.meas, in.nmeas,
                         in.have_run ? &in.run : NULL, branks, nb};
    int rc = tb_proj_report(stdout, fmt, &q) == 0 ? 0 : 1;
    /* an aborted run, a snapshot or a file missing a column was projected as if complete, without a word */
    for (int i = 0; rc == 0 && in.have_run && i < in.run.nproblems; i++)
        tb_note(stdout, fmt, "note: %s: %s; the projection uses what the file holds ('trainbench report %s')",
                run_path, in.run.problems[i], run_path);
    fflush(stdout);
    if (rc == 0 && out[0]) write_projection(out, in.have_run ? run_path : NULL, &q, set_s, argc, argv);
    tb_proj_profile_free(&in.prof);
    if (in.have_run) tb_results_free(&in.run);
    return rc;
}
