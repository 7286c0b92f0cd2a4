/* train_resume.c - where --resume picks the run up (rank 0): the checks of
 * the checkpoint against this run, the earlier results file kept, one
 * "# --resume:" line for each way this run differs from the one that wrote
 * it (ranks and global batch, the data), and the fp16 loss scaler put back
 * as GradScaler's load_state_dict does. train_setup.c's init_model calls
 * them; tb_trainer_sync_state then gives every rank rank 0's state. */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "src/train/train_setup.h"

/* The steps this run trains to: --steps, or --epochs whole epochs. */
int64_t tb_train_planned_steps(const tb_train_run *r) {
    return r->fl.steps > 0 ? r->fl.steps : (int64_t)r->fl.epochs * tb_source_steps(r->src);
}

/* A loss scale the device's scalars can hold: finite and above 0 as tb_real. */
static int scale_fits(double s) {
    if (!(isfinite(s) && s > 0) || (sizeof(tb_real) == sizeof(float) && s > FLT_MAX)) return 0;
    return (tb_real)s > 0;
}

/* Rank 0: the checkpoint `from` fits this run (model, classes; resuming:
 * image size, seed, and a step still to train), or why not. */
void tb_train_check_checkpoint(const tb_train_run *r, const char *from, const tb_ckpt_meta *meta, char *why,
                               size_t len) {
    const tb_train_flags *f = &r->fl;
    if (tb_ckpt_mismatch(from, meta, &r->cfg, f->resume ? r->image : 0, why, len) != 0 || !f->resume) return;
    int64_t total = tb_train_planned_steps(r);
    if (meta->step < 0 || meta->epoch < 0 || meta->epoch_step < 0)
        snprintf(why, len, "'%s' records a position before the start (step %lld, epoch %lld, step %lld of it): not a "
                 "checkpoint trainbench wrote, or a damaged one; resume from another, or start from its weights with "
                 "--init", from, (long long)meta->step, (long long)meta->epoch, (long long)meta->epoch_step);
    else if (meta->has_loss_scale && (!scale_fits(meta->loss_scale) || meta->loss_scale_good_steps < 0 ||
                                      meta->loss_scale_good_steps >= INT32_MAX || meta->skipped_steps < 0 ||
                                      meta->skipped_steps >= INT32_MAX || meta->loss_scale_growth < 0))
        snprintf(why, len, "'%s' records a loss scaler of %g (%lld steps since its last change, %lld skipped): not "
                 "one trainbench wrote, or a damaged one; resume from another, or start from its weights with --init",
                 from, meta->loss_scale, (long long)meta->loss_scale_good_steps, (long long)meta->skipped_steps);
    else if (!meta->has_seed)
        snprintf(why, len, "'%s' records no seed, so it is not the checkpoint of a run to resume; start from its "
                 "weights with --init instead", from);
    else if (meta->seed != f->seed)
        snprintf(why, len,
                 "'%s' was written with --seed %lld; resume with the same seed (the data order and augmentation "
                 "follow it)",
                 from, (long long)meta->seed);
    else if (meta->step >= total && f->steps > 0)
        snprintf(why, len, "checkpoint '%s' is at step %lld, which already reaches --steps %d; raise --steps (or "
                 "--epochs) to train on", from, (long long)meta->step, f->steps);
    else if (meta->step >= total)
        snprintf(why, len, "checkpoint '%s' is at step %lld, which already reaches --epochs %d (%lld steps); raise "
                 "--epochs (or give --steps) to train on", from, (long long)meta->step, f->epochs, (long long)total);
}

/* Rank 0, resuming at step k: an earlier file at --results (the interrupted
 * run's steps) is renamed to <name>.before_resume_step<k>[.N].h5 before
 * this run writes its own; the new name in kept ("" when there was none),
 * or why the rename failed. */
void tb_train_keep_earlier_results(const tb_train_run *r, int64_t k, char *kept, size_t klen, char *why,
                                   size_t len) {
    const char *res = r->fl.results;
    kept[0] = 0;
    if (!res[0] || access(res, F_OK) != 0) return;
    size_t n = strlen(res);
    int stem = (int)(n > 3 && strcmp(res + n - 3, ".h5") == 0 ? n - 3 : n);
    for (int i = 0; i == 0 || access(kept, F_OK) == 0; i++) {
        if (i == 0) snprintf(kept, klen, "%.*s.before_resume_step%lld.h5", stem, res, (long long)k);
        else snprintf(kept, klen, "%.*s.before_resume_step%lld.%d.h5", stem, res, (long long)k, i);
    }
    if (rename(res, kept) != 0)
        snprintf(why, len, "--resume: cannot keep the earlier results file '%s' as '%s' (%s); move it away or give "
                 "another --results", res, kept, strerror(errno));
}

/* Appends one line to buf (a note of len bytes in all). */
static void add_note(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_note(char *buf, size_t len, const char *fmt, ...) {
    size_t at = strlen(buf);
    if (at + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + at, len - at, fmt, ap);
    va_end(ap);
}

void tb_train_resume_notes(const tb_train_run *r, const tb_ckpt_meta *meta, char *notes, size_t len) {
    int64_t gb = (int64_t)r->fl.batch * r->info.world; /* r->global_batch is set later */
    if (meta->world_size > 0 && (meta->world_size != r->info.world || meta->global_batch != gb))
        add_note(notes, len, "# --resume: the checkpoint was written by %lld rank(s), global batch %lld; this run has "
                 "%d, global batch %lld: it goes on from step %lld, but not as the interrupted run would have "
                 "(resuming is exact with the same ranks and batch)\n", (long long)meta->world_size,
                 (long long)meta->global_batch, r->info.world, (long long)gb, (long long)meta->step);
    int64_t n = tb_source_epoch_size(r->src);
    char mine[24];
    snprintf(mine, sizeof mine, "%016" PRIx64, tb_source_fingerprint(r->src));
    if (meta->dataset_size > 0 && meta->dataset_size != n)
        add_note(notes, len, "# --resume: the checkpoint was written over data of %lld samples; this run's data has "
                 "%lld: it goes on from step %lld, but its epochs and sample order are not the interrupted run's "
                 "(resuming is exact with the same data)\n", (long long)meta->dataset_size, (long long)n,
                 (long long)meta->step);
    else if (meta->data_hash[0] && strcmp(meta->data_hash, mine) != 0)
        add_note(notes, len, "# --resume: the checkpoint was written over other data of the same size (fingerprint "
                 "%s; this run's %s: other samples, labels or order): it goes on from step %lld, but its epochs are "
                 "not the interrupted run's samples (resuming is exact with the same data)\n", meta->data_hash, mine,
                 (long long)meta->step);
}

void tb_train_resume_scaler(tb_train_run *r, const tb_ckpt_meta *meta, char *notes, size_t len) {
    if (!r->m->loss_scaling) {
        if (meta->has_loss_scale)
            add_note(notes, len, "# --resume: the checkpoint's run scaled its loss (scale %g); this run does not "
                     "(another --precision or --loss-scale): its scaler is left behind\n", meta->loss_scale);
        return;
    }
    tb_step_scalars sc;
    tb_model_read_scalars(r->m, &sc);
    if (!meta->has_loss_scale) {
        add_note(notes, len, "# --resume: the checkpoint records no loss scale (its run did not scale its loss, or "
                 "came before checkpoints kept one): the scale starts again at %g\n", (double)sc.loss_scale);
        return;
    }
    sc.loss_scale = (tb_real)meta->loss_scale;
    sc.good_steps = (int32_t)meta->loss_scale_good_steps; /* below INT32_MAX: tb_train_check_checkpoint */
    sc.skipped_steps = (int32_t)meta->skipped_steps;
    tb_model_write_scalars(r->m, &sc);
    add_note(notes, len, "# --resume: loss scale %g, %lld overflow-free steps since its last change, %lld updates "
             "skipped before\n", meta->loss_scale, (long long)meta->loss_scale_good_steps,
             (long long)meta->skipped_steps);
    if (meta->loss_scale_growth > 0 && meta->loss_scale_growth != r->m->growth_interval)
        add_note(notes, len, "# --resume: the checkpoint's loss scale doubled after %lld clean steps; this run's after "
                 "%d (--loss-scale-growth): it goes on, but not as the interrupted run would have\n",
                 (long long)meta->loss_scale_growth, r->m->growth_interval);
}
