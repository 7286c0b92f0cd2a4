/* train_data.c - the data side of `trainbench train`: the data sets, opened
 * and compared on every rank, the batch source for training, validation or a
 * scaling row, and the --last-batch rule's start-up checks and header line.
 * Every check here is decided alike on every rank, so all fail together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "data/shard.h"
#include "model/cpu/cpu_blas.h"
#include "src/train/train_setup.h"

tb_feed_opts tb_train_feed(const tb_train_flags *f, const tb_backend *be, tb_source_use use) {
    tb_feed_ask ask = {TB_DECODE_FAST, use == TB_USE_VAL, TB_FEED_AUTO, TB_FEED_AUTO, TB_FEED_AUTO};
    if (tb_decode_parse(f->decode, &ask.decode) != 0) /* the flag table took only its choices */
        tb_die("train: --decode '%s' is not one of " TB_DECODE_CHOICES, f->decode);
    if (strcmp(f->resident, "on") == 0) ask.resident = TB_FEED_ON;
    if (strcmp(f->resident, "off") == 0) ask.resident = TB_FEED_OFF;
    return tb_feed_decide(be, &ask);
}

tb_source *tb_train_source(const tb_train_flags *f, tb_train_data *d, int classes, int rank, int world,
                           tb_source_use use, tb_backend *be) {
    tb_last_batch last = use == TB_USE_VAL ? TB_LAST_KEEP : TB_LAST_PAD;
    if (use == TB_USE_TRAIN && tb_last_batch_parse(f->last_batch, &last) != 0)
        tb_die("train: --last-batch '%s' is not drop, pad or keep", f->last_batch);
    int train = use != TB_USE_VAL;
    tb_feed_opts fo = tb_train_feed(f, be, use); /* before anything is made for the source */
    if (f->batch_file[0])
        return tb_source_batchfile(f->batch_file, classes, TB_RESNET_MIN_IMAGE, f->batch, rank, world, last, &fo);
    if (!f->data[0])
        return tb_source_synthetic(classes, f->image, f->batch, f->synthetic_size, (uint64_t)f->seed, rank, world,
                                   last, &fo);
    tb_loader_opts o;
    memset(&o, 0, sizeof o);
    o.ds = train ? &d->train_ds : &d->val_ds;
    o.batch = f->batch;
    o.image_size = f->image;
    o.train = train;
    o.threads = f->loader_threads;
    o.prefetch = f->prefetch;
    o.rank = rank;
    o.world = world;
    o.last_batch = last;
    o.seed = (uint64_t)f->seed;
    o.strict = f->strict_data;
    o.keep_bad_place = use == TB_USE_VAL; /* a bad --val file is left out of the accuracy, not replaced */
    o.format = TB_OUT_F32_NCHW; /* the feed's uint8, if so, set by tb_source_loader */
    o.gpu_device = -1;          /* the device the CUDA backend made current */
    return tb_source_loader(&o, &fo, be);
}

void tb_train_warn_loader_cpus(const tb_train_run *r) {
    const tb_train_flags *f = &r->fl;
    int host = r->host_cpus, cpus = tb_cpu_allowed_cores(), n = f->loader_threads;
    /* bound below the job's CPUs on the host: a launcher's binding, which a launch can widen (inside a
     * container's or job's own set it cannot); --decode gpu's threads read files, nvJPEG decodes */
    if (!f->data[0] || strcmp(f->decode, "gpu") == 0 || r->info.local_rank > 0 || cpus >= host || n <= cpus) return;
    tb_warn("--loader-threads %d on a rank bound to %d of the %d CPUs this job has on the host: its decoders share "
            "%s with the rank's other threads, so the feed gets %d CPU%s at most; launch with more CPUs a rank "
            "(`mpirun --map-by slot:PE=N --bind-to core`, `mpirun --bind-to none`; Slurm: --cpus-per-task=N) or "
            "lower --loader-threads",
            n, cpus, host, cpus > 1 ? "them" : "it", cpus, cpus > 1 ? "s" : "");
}

/* ---- every rank sees the same data set ---------------------------------------------- */

/* Appends "rank R (host)" to a list of at most 4 ranks, then counts the rest. */
static void name_rank(char *list, size_t len, int *named, int rank, const char *hosts, const char *extra) {
    size_t used = strlen(list);
    if (*named < 4)
        snprintf(list + used, len - used, "%srank %d (%s)%s", *named ? ", " : "", rank, hosts + 64 * (size_t)rank,
                 extra);
    ++*named;
}

#define TB_DATA_SIZES_SAMPLED 256 /* files whose sizes ranks compare (a stat each, at start-up) */

/* Indexes `path` on every rank and makes sure that every rank sees the same
 * data set: its count, classes and tb_dataset_hash (relative paths and
 * labels, in order) are compared with rank 0's, then the sizes of a sample
 * of its files (tb_dataset_sizes_hash). A rank that cannot index it,
 * or indexes another tree, ends the run on every rank together, with one
 * line naming the ranks and hosts. */
static void open_same_dataset(tb_train_run *r, const char *flag, const char *path, tb_dataset *ds) {
    char err[512] = "";
    int ok = tb_dataset_open(path, ds, err, sizeof err) == 0;
    int nranks = r->info.world;
    int64_t mine[5] = {ok, ok ? ds->n : 0, ok ? ds->classes : 0, ok ? (int64_t)tb_dataset_hash(ds) : 0,
                       ok ? (int64_t)tb_dataset_sizes_hash(ds, TB_DATA_SIZES_SAMPLED) : 0};
    int64_t *all = malloc((size_t)nranks * sizeof mine);
    if (!all) TB_FATAL("out of host memory");
    tb_comm_allgather(r->world, mine, all, sizeof mine);
    char list[1024] = "";
    int named = 0;
    for (int q = 0; q < nranks; q++)
        if (!all[5 * q]) name_rank(list, sizeof list, &named, q, r->hosts, "");
    if (named) {
        if (!ok) tb_train_die_together(r, "%s: %s", flag, err);
        tb_train_die_together(r, "%s '%s' cannot be indexed on %s%s (see %s error line); every rank needs the "
                              "same data set",
                              flag, path, list, named > 4 ? " and more" : "", named > 1 ? "their" : "its");
    }
    for (int q = 1; q < nranks; q++) {
        const int64_t *o = all + 5 * q;
        if (o[1] == all[1] && o[2] == all[2] && o[3] == all[3]) continue;
        char extra[160];
        snprintf(extra, sizeof extra, ": %lld images in %lld classes, hash %016llx", (long long)o[1],
                 (long long)o[2], (unsigned long long)o[3]);
        name_rank(list, sizeof list, &named, q, r->hosts, extra);
    }
    if (named)
        tb_train_die_together(r,
                              "%s '%s' is not the same data set on every rank: rank 0 (%s) indexes %lld images "
                              "in %lld classes (hash %016llx) but %s%s; give every rank the same tree (one path "
                              "on a shared file system, or identical copies: same files, same class folders)",
                              flag, path, r->hosts, (long long)all[1], (long long)all[2],
                              (unsigned long long)all[3], list, named > 4 ? " and more" : "");
    for (int q = 1; q < nranks; q++)
        if (all[5 * q + 4] != all[4]) name_rank(list, sizeof list, &named, q, r->hosts, "");
    if (named)
        tb_train_die_together(r,
                              "%s '%s' holds other files on %s%s than on rank 0 (%s): the same paths and labels, "
                              "but the sizes of the %lld files sampled differ (a copy made by another mkdata "
                              "--seed, class folders swapped or files replaced); give every rank identical copies",
                              flag, path, list, named > 4 ? " and more" : "", r->hosts,
                              (long long)(all[1] < TB_DATA_SIZES_SAMPLED ? all[1] : TB_DATA_SIZES_SAMPLED));
    free(all);
}

/* --last-batch drop trains full global steps only: refuses, on every rank
 * alike, data smaller than one (pad and keep train it). */
static void require_a_step(tb_train_run *r, int64_t n) {
    const tb_train_flags *f = &r->fl;
    if (strcmp(f->last_batch, "drop") != 0 || n >= (int64_t)r->info.world * f->batch) return;
    tb_train_die_together(r,
                          "%s has %lld %s, fewer than ranks x batch = %d x %d, so --last-batch drop (the "
                          "default) leaves no step to train; use a smaller --batch-size, more data, or "
                          "--last-batch pad (repeats samples to fill the step)",
                          f->data[0] ? "--data" : "the data", (long long)n, f->data[0] ? "images" : "samples",
                          r->info.world, f->batch);
}

/* --val's labels must mean what --data's mean. Two folders: the same class
 * names (ImageFolder numbers classes by sorted name, so a folder renamed,
 * missing or added in one shifts every label after it, silently); a --val
 * list file: labels below --data's class count; otherwise the same count.
 * Every rank indexed the same trees (open_same_dataset): all decide alike. */
static void require_same_classes(tb_train_run *r, const tb_dataset *tr, const tb_dataset *va) {
    if (!tr->is_list && !va->is_list) {
        for (int c = 0; c < tr->classes && c < va->classes; c++)
            if (strcmp(tr->class_names[c], va->class_names[c]) != 0)
                tb_train_die_together(r,
                                      "--val's class %d is '%.200s' but --data's is '%.200s': the two folders must "
                                      "hold the same class folders (labels follow the sorted names)",
                                      c, va->class_names[c], tr->class_names[c]);
        if (va->classes != tr->classes)
            tb_train_die_together(r, "--val has %d class folders but --data has %d ('%.200s' is in one only); they "
                                  "must hold the same class folders",
                                  va->classes, tr->classes,
                                  va->classes > tr->classes ? va->class_names[tr->classes]
                                                            : tr->class_names[va->classes]);
    } else if (va->is_list ? va->classes > tr->classes : va->classes != tr->classes) {
        tb_train_die_together(r, "--val has %d classes but --data has %d; they must match", va->classes,
                              tr->classes);
    }
}

/* --strict-data: a folder of the set that could not be read leaves its images out: the run stops, as for a bad
 * file (every rank indexed the same tree). */
static void require_readable(tb_train_run *r, const char *flag, const char *path, const tb_dataset *ds) {
    char why[1024];
    if (r->fl.strict_data && tb_dataset_unreadable(ds, path, why, sizeof why))
        tb_train_die_together(r, "%s: %s", flag, why);
}

void tb_train_open_data(tb_train_run *r) {
    tb_train_data *d = &r->d;
    memset(d, 0, sizeof *d);
    r->classes = r->fl.classes;
    if (!r->fl.data[0]) return;
    open_same_dataset(r, "--data", r->fl.data, &d->train_ds);
    d->have_train_ds = 1;
    require_readable(r, "--data", r->fl.data, &d->train_ds);
    r->classes = d->train_ds.classes;
    if (r->classes < 2) /* every rank reads the same set: each says it */
        tb_train_die_together(r, "--data '%s' has 1 class: a classifier needs 2 or more (a folder per class, or 2 or "
                              "more labels in a list file)",
                              r->fl.data);
    if (r->fl.classes != TB_TRAIN_CLASSES_DEFAULT && r->fl.classes != r->classes) /* given, and not the data's */
        tb_train_die_together(r, "--classes %d does not apply to --data '%s', whose %d classes (its folders, or its "
                              "labels) make the model's head; drop --classes",
                              r->fl.classes, r->fl.data, r->classes);
    require_a_step(r, d->train_ds.n); /* before the loader is made for it */
    if (r->fl.val[0]) {
        open_same_dataset(r, "--val", r->fl.val, &d->val_ds);
        d->have_val_ds = 1;
        require_readable(r, "--val", r->fl.val, &d->val_ds);
        require_same_classes(r, &d->train_ds, &d->val_ds);
    }
    if (r->info.rank == 0) tb_dataset_describe(&d->train_ds, stdout, 20);
    if (r->info.rank == 0 && d->have_val_ds) /* what --val holds and what of it is not a sample (a .png) */
        tb_dataset_describe(&d->val_ds, stdout, 20);
}

/* ---- the --last-batch rule ------------------------------------------------------------ */

/* --last-batch keep: refuses, on every rank alike (each computes the same
 * plan), a last step that gives some rank a count of samples with which a
 * BatchNorm would normalise a single value per channel. */
static void require_trainable_last_step(tb_train_run *r) {
    if (tb_source_last_batch(r->src) != TB_LAST_KEEP) return;
    int nranks = r->info.world, batch = r->fl.batch;
    int64_t n = tb_source_epoch_size(r->src), last = tb_source_steps(r->src) - 1;
    for (int q = 0; q < nranks; q++) {
        int64_t first;
        int count;
        tb_shard_range(n, nranks, batch, TB_LAST_KEEP, last, q, &first, &count);
        const char *bn = count > 0 ? tb_model_degenerate_bn(r->m, count) : NULL;
        if (bn)
            tb_train_die_together(r,
                                  "--last-batch keep: the epoch's last step gives rank %d %d sample%s (%lld "
                                  "samples over %d rank%s x batch %d), so %s would normalise a single value "
                                  "per channel; use --last-batch %s, or another --batch-size",
                                  q, count, count == 1 ? "" : "s", (long long)n, nranks, nranks > 1 ? "s" : "",
                                  batch, bn, n >= (int64_t)nranks * batch ? "drop (the default) or pad" : "pad");
    }
}

void tb_train_check_epoch_plan(tb_train_run *r) {
    require_a_step(r, tb_source_epoch_size(r->src));
    const char *bad = tb_model_degenerate_bn(r->m, r->fl.batch);
    if (bad)
        tb_train_die_together(r,
                              "--batch-size %d at %dx%d leaves one value per channel in %s, which BatchNorm in "
                              "training cannot normalise; raise --batch-size or --image-size",
                              r->fl.batch, r->image, r->image, bad);
    require_trainable_last_step(r);
}

void tb_train_print_epoch_plan(const tb_train_run *r) {
    const tb_source *src = r->src;
    int64_t n = tb_source_epoch_size(src), trained = tb_source_epoch_trained(src);
    int gb = r->global_batch;
    tb_last_batch l = tb_source_last_batch(src);
    if (n % gb == 0)
        printf("# last batch: %s; nothing to drop or pad: the global batch %d divides the %lld samples\n",
               tb_last_batch_name(l), gb, (long long)n);
    else if (l == TB_LAST_DROP)
        printf("# last batch: drop: an epoch trains %lld of its %lld samples, full steps only; %lld left out "
               "(--last-batch pad or keep to use %s)\n",
               (long long)trained, (long long)n, (long long)(n - trained), n - trained > 1 ? "them" : "it");
    else if (l == TB_LAST_PAD)
        printf("# last batch: pad: an epoch trains %lld samples, its %lld plus %lld repeated from the start of "
               "its order to fill the last step\n",
               (long long)trained, (long long)n, (long long)(trained - n));
    else
        printf("# last batch: keep: an epoch trains each of its %lld samples once; its last step holds %lld "
               "of %d (uneven shards: a rank may get none)\n",
               (long long)n, (long long)(n % gb), gb);
}

/* ---- bad files met while training ------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* What one rank's loader met: samples replaced, the first three "path: reason". */
typedef struct {
    int64_t replaced;
    char first[3][512];
} bad_note;

/* Rank 0's line(s) and attributes from every rank's notes and bad sample
 * indices (all, in rank order: the same file met on two ranks counts once). */
static void print_bad_files(tb_train_run *r, const bad_note *notes, int64_t *idx, int64_t nidx) {
    qsort(idx, (size_t)nidx, sizeof *idx, cmp_i64);
    int64_t files = 0, replaced = 0;
    for (int64_t i = 0; i < nidx; i++) files += i == 0 || idx[i] != idx[i - 1];
    const char *named[3] = {NULL, NULL, NULL};
    int nn = 0;
    for (int q = 0; q < r->info.world; q++) {
        replaced += notes[q].replaced;
        for (int k = 0; k < 3 && nn < 3 && notes[q].first[k][0]; k++) {
            int dup = 0;
            for (int m = 0; m < nn; m++) dup |= strcmp(named[m], notes[q].first[k]) == 0;
            if (!dup) named[nn++] = notes[q].first[k];
        }
    }
    const char *all = r->info.world > 1 ? ", all ranks" : "";
    if (files == 0)
        printf("# bad files: none met in --data (%lld samples replaced%s)\n", (long long)replaced, all);
    else
        printf("# bad files: %lld file%s of --data could not be used (%lld sample%s replaced by the next that "
               "decodes%s); the first %d:\n",
               (long long)files, files == 1 ? "" : "s", (long long)replaced, replaced == 1 ? "" : "s", all, nn);
    char first[3 * 512 + 8] = "";
    for (int m = 0; m < nn; m++) {
        printf("#   %s\n", named[m]);
        size_t used = strlen(first);
        snprintf(first + used, sizeof first - used, "%s%s", m ? "\n" : "", named[m]);
    }
    tb_run_report_lock(&r->report);
    tb_attrs_int(&r->report.attrs, "data_bad_files", files);
    tb_attrs_int(&r->report.attrs, "data_samples_replaced", replaced);
    tb_attrs_str(&r->report.attrs, "data_bad_files_first", first);
    tb_run_report_unlock(&r->report);
}

void tb_train_report_bad_files(tb_train_run *r, int64_t step) {
    if (!r->fl.data[0] || !r->src) return;
    bad_note mine;
    memset(&mine, 0, sizeof mine);
    tb_loader_stats st;
    tb_source_stats(r->src, &st);
    mine.replaced = st.skipped;
    memcpy(mine.first, st.first_bad, sizeof mine.first);
    int64_t cap = tb_source_bad_samples(r->src, NULL, 0), n;
    int64_t *idx = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *idx);
    bad_note *notes = r->info.rank == 0 ? calloc((size_t)r->info.world, sizeof *notes) : NULL;
    size_t *counts = r->info.rank == 0 ? calloc((size_t)r->info.world, sizeof *counts) : NULL;
    if (!idx || (r->info.rank == 0 && (!notes || !counts))) TB_FATAL("out of host memory");
    n = tb_source_bad_samples(r->src, idx, cap);
    if (n > cap) n = cap; /* the loader, still decoding ahead, met another since the count */
    tb_monitor_progress(r->mon, step, "bad-file gather", 1);
    tb_comm_gather(r->world, &mine, notes, sizeof mine, 0);
    char *every = tb_comm_gather_bytes(r->world, idx, (size_t)n * sizeof *idx, 0, counts);
    if (r->info.rank == 0) {
        size_t bytes = 0;
        for (int q = 0; q < r->info.world; q++) bytes += counts[q];
        print_bad_files(r, notes, (int64_t *)(void *)every, (int64_t)(bytes / sizeof *idx));
        fflush(stdout);
    }
    free(every);
    free(counts);
    free(notes);
    free(idx);
}
