/* lr_schedule.h - learning rate per step: linear warm-up, then cosine or
 * step decay (or constant), on a base rate scaled linearly with the global
 * batch (Goyal et al.: lr = base_lr * global_batch / base_batch). */
#ifndef TB_LR_SCHEDULE_H
#define TB_LR_SCHEDULE_H

#include <stdint.h>

typedef enum { TB_LR_CONSTANT, TB_LR_COSINE, TB_LR_STEP } tb_lr_kind;

typedef struct {
    tb_lr_kind kind;
    double peak;             /* base_lr * global_batch / base_batch */
    int64_t warmup_steps;    /* linear from peak/warmup to peak */
    int64_t total_steps;     /* cosine reaches 0 here */
    int64_t milestones[8];   /* step decay: multiply by gamma at each */
    int nmilestones;
    double gamma;
} tb_lr_schedule;

/* Parses "cosine", "constant" or "step:30,60,80" (milestones in units of
 * `unit_steps`, e.g. steps per epoch; each after the one before). Returns -1
 * on a malformed string. */
int tb_lr_schedule_init(tb_lr_schedule *s, const char *spec, double base_lr, int global_batch,
                        int base_batch, int64_t warmup_steps, int64_t total_steps,
                        int64_t unit_steps);
/* Learning rate for step (0-based). */
double tb_lr_at(const tb_lr_schedule *s, int64_t step);

#endif
