/* cmd_report.c - `trainbench report RUN.h5 [B.h5] [--format text|md|csv]`:
 * a results file's provenance and tables, from the file alone, printed by
 * the same code that prints them at the end of a run (scaling.h); two files
 * go to cmd_report_compare.c, side by side. Groups other than /steps,
 * /ranks and /scaling (a later writer's /loader or /probe) are printed as
 * they are, one column per dataset. Exit status 0 when every file is a
 * complete results file; 1 when a file is missing, unreadable or not a
 * results file (one line), or when it is partial or from an aborted run
 * (what is there is printed, then one line per missing part). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cli.h"
#include "core/log.h"
#include "src/cmd/cmd_report.h"
#include "src/cmd/commands.h"
#include "src/results/results.h"

static const char k_usage[] =
    "trainbench report RUN.h5 [B.h5] [--format text|md|csv]\n\n"
    "Prints a results file's provenance, its scaling tables (the published shape and the full one),\n"
    "the step-time breakdown by rank, a summary of the steps and every other table in the file, then\n"
    "the ranks that ran a convolution or BatchNorm another way than rank 0.\n"
    "With two files: one line per root attribute whose value differs, then each table both have, rows\n"
    "matched on their keys with B/A: scaling rows and step phases of two training runs, /allreduce by\n"
    "size, /loader by threads, /feed by loader configuration, /projection by ranks; the rows only one\n"
    "file has are named under each table; then the convolutions (/conv_algorithms) and BatchNorms\n"
    "(/batchnorms) that ran another way in B.\n"
    "md: markdown tables to paste into the .md files of results/; csv: each table as '# title', a\n"
    "header line, its rows, a blank line.\n"
    "Exit status 1 when a file is missing, not a results file, partial or from an aborted run.";

/* Root attributes shown first, in this order; the others follow by name. */
static const char *const k_prov_order[] = {
    "trainbench_version", "git_revision", "command_line", "status", "abort_reason", "start_time",
    "end_time", "world_size", "hostnames", "backend", "device_names", "compute_libraries",
    "cuda_runtime_version", "cuda_driver_version", "cudnn_version", "nccl_version", "mpi_version",
    "hdf5_version", "libjpeg_turbo_version", "model", "precision", "batch_size", "global_batch",
    "image_size", "seed", "data", "dataset_size", "classes", NULL};

static int prov_rank(const char *key) {
    for (int i = 0; k_prov_order[i]; i++)
        if (strcmp(k_prov_order[i], key) == 0) return i;
    return 1000;
}

/* Attribute indices in display order. */
int *tb_report_display_order(const tb_results *r) {
    int *idx = malloc((size_t)(r->nattrs ? r->nattrs : 1) * sizeof *idx);
    if (!idx) TB_FATAL("out of host memory");
    int n = 0;
    for (int k = 0; k_prov_order[k]; k++)
        for (int i = 0; i < r->nattrs; i++)
            if (strcmp(r->attrs[i].key, k_prov_order[k]) == 0) idx[n++] = i;
    for (int i = 0; i < r->nattrs; i++)
        if (prov_rank(r->attrs[i].key) == 1000) idx[n++] = i;
    return idx;
}

double tb_report_ratio(double b, double a) { return a != 0 && isfinite(a) && isfinite(b) ? b / a : NAN; }

/* ---- one file ------------------------------------------------------------------------------ */

/* Files of the commands that train (train, loader-bench --feed, project's
 * copy of a run) have a model, batch and ranks to name; the others
 * (loader-bench, allreduce-bench, probe, a --profile projection without a
 * model) are named by their command. */
static int has_model(const tb_results *r) {
    const char *kind = tb_results_str(r, "kind", "train");
    return tb_results_attr(r, "model") &&
           (strcmp(kind, "train") == 0 || strcmp(kind, "loader-feed") == 0 || strcmp(kind, "projection") == 0);
}

/* A root attribute's whole number, "?" when the file lacks it (it printed "batch nan per rank"). */
typedef struct {
    char s[32];
} num_text;
static num_text attr_count(const tb_results *r, const char *key) {
    num_text t = {"?"};
    double v = tb_results_num(r, key, NAN);
    if (isfinite(v)) snprintf(t.s, sizeof t.s, "%.0f", v);
    return t;
}

void tb_report_run_line(FILE *f, tb_format fmt, const char *label, const tb_results *r) {
    const char *status = tb_results_str(r, "status", "unknown");
    const char *why = tb_results_str(r, "abort_reason", NULL);
    if (has_model(r))
        tb_note(f, fmt, "%s%s: %s, %s, batch %s per rank, %s px, %s rank%s on %s; backend %s (%s)", label,
                r->path, tb_results_str(r, "model", "?"), tb_results_str(r, "precision", "?"),
                attr_count(r, "batch_size").s, attr_count(r, "image_size").s,
                attr_count(r, "world_size").s, tb_results_num(r, "world_size", 0) > 1 ? "s" : "",
                tb_results_str(r, "hostnames", "?"), tb_results_str(r, "backend", "?"),
                tb_results_str(r, "device_names", "?"));
    else if (tb_results_attr(r, "world_size")) /* a multi-rank command of another kind: allreduce-bench */
        tb_note(f, fmt, "%s%s: %s, %s rank%s on %s; backend %s (%s)", label, r->path,
                tb_results_str(r, "kind", "?"), attr_count(r, "world_size").s,
                tb_results_num(r, "world_size", 0) > 1 ? "s" : "", tb_results_str(r, "hostnames", "?"),
                tb_results_str(r, "backend", "?"), tb_results_str(r, "device_names", "?"));
    else
        tb_note(f, fmt, "%s%s: trainbench %s%s%s", label, r->path, tb_results_str(r, "kind", "train"),
                tb_results_attr(r, "hostnames") ? " on " : "", tb_results_str(r, "hostnames", ""));
    const char *indent = label[0] ? "    " : "";
    tb_note(f, fmt, "%sstatus %s; %s to %s; trainbench %s (%s)", indent, status,
            tb_results_str(r, "start_time", "?"), tb_results_str(r, "end_time", "?"),
            tb_results_str(r, "trainbench_version", "?"), tb_results_str(r, "git_revision", "?"));
    if (why) tb_note(f, fmt, "%sabort reason: %s", indent, why);
}

static void print_provenance(FILE *f, tb_format fmt, const tb_results *r) {
    const tb_col cols[] = {
        {.head = "attribute", .key = "attribute", .left = 1},
        {.head = "value", .key = "value", .left = 1, .gap = 2},
    };
    tb_tab *t = tb_tab_new(fmt, "provenance and settings (root attributes)", cols, 2);
    int *idx = tb_report_display_order(r);
    for (int i = 0; i < r->nattrs; i++) {
        char v[8192];
        tb_rattr_format(&r->attrs[idx[i]], v, sizeof v);
        tb_tab_str(t, r->attrs[idx[i]].key);
        tb_tab_str(t, v);
    }
    free(idx);
    tb_tab_print(t, f);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Timed steps of /steps (all steps when the file has no `timed` column):
 * rank 0's step time, and img/s = every rank's samples / the slowest
 * rank's timed seconds, from /ranks (train's '# training:' figure), or
 * where it has none all samples / the summed step times of the slowest
 * rank (samples / img_per_s of each step). */
tb_report_steps tb_report_steps_of(const tb_results *r) {
    tb_report_steps s = {0, 0, NAN, NAN, NAN, NAN, NAN};
    const tb_rtable *t = tb_results_table(r, "steps");
    if (!t || t->rows == 0) return s;
    s.steps = (int)t->rows;
    s.loss_first = tb_rtable_num(t, "loss", 0);
    s.loss_last = tb_rtable_num(t, "loss", t->rows - 1);
    double *ms = malloc(t->rows * sizeof *ms);
    if (!ms) TB_FATAL("out of host memory");
    double sum = 0, samples = 0, seconds = 0;
    for (size_t i = 0; i < t->rows; i++) {
        double timed = tb_rtable_num(t, "timed", i);
        if (!isnan(timed) && timed == 0) continue;
        double v = tb_rtable_num(t, "step_ms", i), n = tb_rtable_num(t, "samples", i);
        double ips = tb_rtable_num(t, "img_per_s", i);
        if (!isnan(v)) {
            ms[s.timed++] = v;
            sum += v;
        }
        if (!isnan(n) && ips > 0) {
            samples += n;
            seconds += n / ips;
        }
    }
    if (s.timed > 0) {
        qsort(ms, (size_t)s.timed, sizeof *ms, cmp_double);
        s.step_ms_mean = sum / s.timed;
        s.step_ms_median = s.timed % 2 ? ms[s.timed / 2] : 0.5 * (ms[s.timed / 2 - 1] + ms[s.timed / 2]);
    }
    if (seconds > 0) s.img_per_s = samples / seconds;
    /* the run's own figure where /ranks has it, as train's '# training:' line gives it: every rank's timed
     * samples over the slowest rank's timed seconds (its gaps between steps included) */
    const tb_rtable *rk = tb_results_table(r, "ranks");
    double all = 0, slow = 0;
    for (size_t q = 0; rk && q < rk->rows; q++) {
        double n = tb_rtable_num(rk, "samples", q), ips = tb_rtable_num(rk, "img_per_s", q);
        if (isnan(n) || !(ips > 0)) continue;
        all += n;
        if (n / ips > slow) slow = n / ips;
    }
    if (slow > 0) s.img_per_s = all / slow;
    free(ms);
    return s;
}

static void print_steps(FILE *f, tb_format fmt, const tb_results *r) {
    tb_report_steps s = tb_report_steps_of(r);
    const tb_col cols[] = {
        {.head = "steps", .key = "steps", .width = 5},
        {.head = "timed", .key = "timed_steps", .width = 5},
        {.head = "step mean", .unit = "ms", .key = "step_ms_mean", .width = 9},
        {.head = "step median", .unit = "ms", .key = "step_ms_median", .width = 11},
        {.head = "img/s", .key = "img_per_s", .width = 9},
        {.head = "loss first", .key = "loss_first", .width = 10},
        {.head = "loss last", .key = "loss_last", .width = 10},
    };
    tb_tab *t = tb_tab_new(fmt,
                           "training steps (/steps): timed steps' step time on rank 0, img/s of the "
                           "timed steps (slowest rank), loss of the first and last step",
                           cols, 7);
    tb_tab_int(t, s.steps);
    tb_tab_int(t, s.timed);
    tb_tab_num(t, s.step_ms_mean, 2);
    tb_tab_num(t, s.step_ms_median, 2);
    tb_tab_num(t, s.img_per_s, 2);
    tb_tab_gnum(t, s.loss_first);
    tb_tab_gnum(t, s.loss_last);
    tb_tab_print(t, f);
}

static int is_known_table(const char *name) {
    return strcmp(name, "steps") == 0 || strcmp(name, "ranks") == 0 || strcmp(name, "scaling") == 0 ||
           strcmp(name, "grad_ready") == 0 || strcmp(name, "buckets") == 0 || strcmp(name, "op_profile") == 0 ||
           strcmp(name, "op_profile_kinds") == 0;
}

/* /op_profile and /op_profile_kinds (train --op-profile) as the run printed them. */
static void print_op_profile(FILE *f, tb_format fmt, const tb_results *r) {
    const tb_rtable *rt = tb_results_table(r, "op_profile"), *kt = tb_results_table(r, "op_profile_kinds");
    if (!rt || !kt) return;
    tb_opp_summary s = {
        .steps = (int)tb_rtable_attr_num(rt, "steps", 0),
        .ranks = (int)tb_rtable_attr_num(rt, "ranks", 1),
        .batch = (int)tb_rtable_attr_num(rt, "batch", 0),
        .precision = tb_rtable_attr_str(rt, "precision", "?"),
        .layout = tb_rtable_attr_str(rt, "layout", "?"),
        .backend = tb_rtable_attr_str(rt, "backend", "?"),
        .step_ms = tb_rtable_attr_num(rt, "step_ms", NAN),
        .step_ms_max_rank = tb_rtable_attr_num(rt, "step_ms_max_rank", NAN),
        .ops_ms = tb_rtable_attr_num(rt, "ops_ms", NAN),
        .span_ms = tb_rtable_attr_num(rt, "span_ms", NAN),
        .timed_step_ms = tb_rtable_attr_num(rt, "timed_step_ms", NAN),
        .timed_steps = (int)tb_rtable_attr_num(rt, "timed_steps", 0),
        .timed_graph_steps = (int)tb_rtable_attr_num(rt, "timed_graph_steps", 0),
    };
    tb_opp_row *rows = calloc(rt->rows + 1, sizeof *rows);
    tb_opp_kind *kinds = calloc(kt->rows + 1, sizeof *kinds);
    if (!rows || !kinds) TB_FATAL("out of host memory");
    double steps = s.steps > 0 ? s.steps : NAN;
    for (size_t i = 0; i < rt->rows; i++) {
        const char *name = tb_rtable_str(rt, "name", i), *phase = tb_rtable_str(rt, "phase", i),
                   *kind = tb_rtable_str(rt, "kind", i);
        rows[i] = (tb_opp_row){name ? name : "?", phase ? phase : "?", kind ? kind : "?",
                               tb_rtable_num(rt, "mean_ms", i), tb_rtable_num(rt, "min_ms", i),
                               tb_rtable_num(rt, "max_rank_mean_ms", i), tb_rtable_num(rt, "calls", i) / steps};
    }
    for (size_t i = 0; i < kt->rows; i++) {
        const char *kind = tb_rtable_str(kt, "kind", i);
        kinds[i] = (tb_opp_kind){kind ? kind : "?", tb_rtable_num(kt, "mean_ms", i), tb_rtable_num(kt, "max_rank_ms", i),
                                 tb_rtable_num(kt, "calls_per_step", i)};
    }
    tb_opp_print(f, fmt, &s, kinds, (int)kt->rows, rows, (int)rt->rows);
    free(rows);
    free(kinds);
}

/* Any other group: every column as stored (integers exactly, numbers with 6
 * significant digits), rows in file order. */
static void print_generic(FILE *f, tb_format fmt, const tb_rtable *rt) {
    if (rt->ncols == 0) return;
    tb_col *cols = calloc((size_t)rt->ncols, sizeof *cols);
    if (!cols) TB_FATAL("out of host memory");
    for (int c = 0; c < rt->ncols; c++)
        cols[c] = (tb_col){.head = rt->cols[c].name, .key = rt->cols[c].name,
                           .left = rt->cols[c].kind == TB_VAL_STR, .gap = rt->cols[c].kind == TB_VAL_STR ? 2 : 0};
    char title[256];
    snprintf(title, sizeof title, "/%s (%zu row%s)", rt->name, rt->rows, rt->rows == 1 ? "" : "s");
    tb_tab *t = tb_tab_new(fmt, title, cols, rt->ncols);
    free(cols);
    for (size_t i = 0; i < rt->rows; i++)
        for (int c = 0; c < rt->ncols; c++) {
            const tb_rcol *col = &rt->cols[c];
            if (col->kind == TB_VAL_STR) tb_tab_str(t, col->str[i]);
            else if (col->kind == TB_VAL_INT) tb_tab_int(t, (long long)col->num[i]);
            else tb_tab_gnum(t, col->num[i]);
        }
    tb_tab_print(t, f);
}

static void print_scaling(FILE *f, tb_format fmt, const tb_results *r) {
    tb_scaling_row *rows;
    int n = tb_results_scaling_rows(r, &rows);
    if (n > 0) {
        const char *label = tb_results_str(r, "device_util_source", NULL);
        if (!label) label = tb_scaling_util_label(tb_results_str(r, "backend", ""));
        tb_scaling_write_seed(f, fmt, rows, n, tb_results_num(r, "dataset_size", NAN), label);
        tb_scaling_write_full(f, fmt, rows, n);
    } else if (has_model(r) && tb_results_no_scaling_asked(r)) {
        tb_note(f, fmt, "no scaling table: the run was asked for none (--scaling-steps 0)");
    }
    free(rows);
}

void tb_report_problems(const tb_results *r) {
    fflush(stdout);
    for (int i = 0; i < r->nproblems; i++) tb_say_error("report: %s: %s", r->path, r->problems[i]);
}

static int report_one(const char *path, tb_format fmt) {
    tb_results r;
    char err[8192];
    if (tb_results_load(path, &r, err, sizeof err) != 0) tb_die("report: %s", err);
    FILE *f = stdout;
    tb_note(f, fmt, "trainbench report");
    tb_report_run_line(f, fmt, "", &r);
    print_provenance(f, fmt, &r);
    print_scaling(f, fmt, &r);
    tb_rank_row *ranks;
    int nr = tb_results_rank_rows(&r, &ranks), timed_ranks = 0;
    for (int i = 0; i < nr; i++) timed_ranks += ranks[i].steps > 0;
    if (timed_ranks > 0) tb_rank_rows_write(f, fmt, ranks, nr); /* else a header alone; the note below says why */
    free(ranks);
    const tb_rtable *steps = tb_results_table(&r, "steps");
    if (steps && steps->rows > 0) print_steps(f, fmt, &r);
    if (steps && steps->rows > 0 && !tb_rtable_col(steps, "step_ms")) /* not the warm-up's doing */
        tb_note(f, fmt, "no timed step: /steps has no step_ms column, so the file gives no step time");
    else if (steps && steps->rows > 0 && tb_report_steps_of(&r).timed == 0) /* the tables above have no timed figure */
        tb_note(f, fmt, "no timed step: all %zu steps fell within --warmup-steps %s, so the run has no step time, "
                        "img/s or per-rank row; run more steps than --warmup-steps",
                steps->rows, attr_count(&r, "warmup_steps").s);
    print_op_profile(f, fmt, &r);
    for (int i = 0; i < r.ntables; i++)
        if (!is_known_table(r.tables[i].name)) print_generic(f, fmt, &r.tables[i]);
    tb_report_rank_choices(f, fmt, &r); /* the ranks that ran a conv or BatchNorm unlike rank 0 */
    tb_overlap_report(f, fmt, &r); /* /buckets per rank count */
    const tb_rtable *gr = tb_results_table(&r, "grad_ready"), *bk = tb_results_table(&r, "buckets");
    if (gr || bk) /* one row per gradient range: summarised, not printed */
        tb_note(f, fmt, "/grad_ready (%zu rows) and /buckets (%zu rows): the gradient timeline of the scaling rows, "
                        "which 'trainbench project %s' reads",
                gr ? gr->rows : 0, bk ? bk->rows : 0, path);
    fflush(f);
    tb_report_problems(&r);
    int rc = r.nproblems ? 1 : 0;
    tb_results_free(&r);
    return rc;
}

/* ---- the subcommand -------------------------------------------------------------------------- */

int tb_cmd_report(int argc, char **argv) {
    char format[TB_OPT_STR_MAX] = "text";
    const tb_opt opts[] = {
        {"format", TB_OPT_CHOICE, format, 0, 0, "text|md|csv",
         "text: # tables; md: markdown tables; csv: comma-separated, a header line per table"},
        {NULL, TB_OPT_FLAG, NULL, 0, 0, NULL, NULL},
    };
    /* file names are positional; the flags (and their values) go to the parser */
    tb_cli_args args;
    tb_cli_split(argc, argv, opts, &args);
    if (args.nwords > 2)
        tb_die("report: at most two results files (A and B), got '%s' as a third; see 'trainbench report "
               "--help'",
               args.words[2]);
    const char *files[2] = {args.words[0], args.words[1]};
    int nfiles = args.nwords;
    tb_cli_parse("report", k_usage, args.nflags, args.flags, opts);
    tb_cli_args_free(&args);
    if (nfiles == 0) tb_die("report: name a results file: trainbench report RUN.h5 [B.h5] [--format text|md|csv]");
    tb_format fmt = TB_FMT_TEXT;
    if (tb_format_parse(format, &fmt) != 0) tb_die("report: --format expects text, md or csv");
    return nfiles == 1 ? report_one(files[0], fmt) : tb_report_two(files[0], files[1], fmt);
}
