/* lr_schedule.c - warm-up + cosine / step / constant learning rates. */
#include "src/train/lr_schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int tb_lr_schedule_init(tb_lr_schedule *s, const char *spec, double base_lr, int global_batch,
                        int base_batch, int64_t warmup_steps, int64_t total_steps,
                        int64_t unit_steps) {
    memset(s, 0, sizeof *s);
    s->peak = base_lr * (double)global_batch / (double)(base_batch > 0 ? base_batch : 1);
    s->warmup_steps = warmup_steps;
    s->total_steps = total_steps;
    s->gamma = 0.1;
    if (strcmp(spec, "cosine") == 0) {
        s->kind = TB_LR_COSINE;
    } else if (strcmp(spec, "constant") == 0) {
        s->kind = TB_LR_CONSTANT;
    } else if (strncmp(spec, "step:", 5) == 0) {
        s->kind = TB_LR_STEP;
        const char *p = spec + 5;
        while (*p) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v <= 0 || s->nmilestones == 8) return -1;
            if (s->nmilestones > 0 && (int64_t)v * unit_steps <= s->milestones[s->nmilestones - 1]) return -1;
            s->milestones[s->nmilestones++] = (int64_t)v * unit_steps;
            if (*end == ',') end++;
            else if (*end) return -1;
            p = end;
        }
        if (s->nmilestones == 0) return -1;
    } else {
        return -1;
    }
    return 0;
}

double tb_lr_at(const tb_lr_schedule *s, int64_t step) {
    if (step < s->warmup_steps) return s->peak * (double)(step + 1) / (double)s->warmup_steps;
    switch (s->kind) {
    case TB_LR_COSINE: {
        int64_t span = s->total_steps - s->warmup_steps;
        if (span <= 0) return s->peak;
        double t = (double)(step - s->warmup_steps) / (double)span;
        if (t > 1) t = 1;
        return 0.5 * s->peak * (1.0 + cos(3.14159265358979323846 * t));
    }
    case TB_LR_STEP: {
        double lr = s->peak;
        for (int i = 0; i < s->nmilestones; i++)
            if (step >= s->milestones[i]) lr *= s->gamma;
        return lr;
    }
    default: return s->peak;
    }
}
