/* op_profile.c - the per-op step profile (see op_profile.h). */
#include "model/op_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

static const char *const k_kind[TB_OPK_COUNT] = {
    "conv_fwd",    "conv_dgrad",  "conv_wgrad", "bn_fwd",         "bn_bwd",          "relu_fwd",
    "relu_bwd",    "add_fwd",     "add_bwd",    "maxpool_fwd",    "maxpool_bwd",     "avgpool_fwd",
    "avgpool_bwd", "linear_fwd",  "linear_bwd", "loss",           "weight_convert",  "grad_convert",
    "upload",      "input",       "nonfinite_check", "sgd",       "loss_scale",
};

static const char *const k_phase[TB_OPP_COUNT] = {
    "input", "forward", "loss", "backward", "backward-data", "backward-filter", "update",
};

const char *tb_op_kind_name(tb_op_kind k) { return (unsigned)k < TB_OPK_COUNT ? k_kind[k] : "?"; }
const char *tb_op_phase_name(tb_op_phase p) { return (unsigned)p < TB_OPP_COUNT ? k_phase[p] : "?"; }

tb_op_prof *tb_op_prof_create(tb_backend *be, int max_ops) {
    TB_ASSERT(max_ops >= 1);
    tb_op_prof *p = calloc(1, sizeof *p);
    if (!p) TB_FATAL("out of host memory for the op profile");
    p->be = be;
    p->cap = max_ops;
    p->ev = calloc(2 * (size_t)max_ops, sizeof *p->ev);
    p->ops = calloc((size_t)max_ops, sizeof *p->ops);
    p->rows = calloc((size_t)max_ops, sizeof *p->rows);
    p->row_of = calloc((size_t)max_ops, sizeof *p->row_of);
    if (!p->ev || !p->ops || !p->rows || !p->row_of) TB_FATAL("out of host memory for the op profile");
    for (int i = 0; i < 2 * max_ops; i++) p->ev[i] = be->event_create(be, 1);
    for (int i = 0; i < max_ops; i++) p->row_of[i] = -1;
    return p;
}

void tb_op_prof_destroy(tb_op_prof *p) {
    if (!p) return;
    for (int i = 0; i < 2 * p->cap; i++) p->be->event_destroy(p->be, p->ev[i]);
    free(p->ev);
    free(p->ops);
    free(p->rows);
    free(p->row_of);
    free(p);
}

void tb_op_prof_step_begin(tb_op_prof *p) {
    TB_ASSERT(!p->in_step);
    p->in_step = 1;
    p->nops = 0;
    p->open = 0;
    p->dropped = 0;
}

void tb_op_prof_begin_(tb_op_prof *p, const char *name, tb_op_phase phase, tb_op_kind kind) {
    if (!p->in_step) return; /* ops outside a profiled step (evaluation, set-up) */
    TB_ASSERT(!p->open);      /* ops do not nest */
    p->open = 1;
    if (p->nops == p->cap) {
        p->dropped++;
        return;
    }
    tb_op_mark *m = &p->ops[p->nops];
    m->name = name;
    m->phase = phase;
    m->kind = kind;
    p->be->event_record(p->be, p->ev[2 * p->nops], NULL);
}

void tb_op_prof_end_(tb_op_prof *p) {
    if (!p->in_step) return;
    TB_ASSERT(p->open);
    p->open = 0;
    if (p->nops == p->cap) return; /* dropped at begin */
    p->be->event_record(p->be, p->ev[2 * p->nops + 1], NULL);
    p->nops++;
}

static int same_key(const tb_op_row *r, const tb_op_mark *m) {
    return r->phase == m->phase && r->kind == m->kind && strcmp(r->name, m->name) == 0;
}

/* The row of op i: last step's row when the key matches (the step queues
 * the same ops in the same order), else a search, else a new row. */
static int row_for(tb_op_prof *p, int i) {
    const tb_op_mark *m = &p->ops[i];
    int h = p->row_of[i];
    if (h >= 0 && h < p->nrows && same_key(&p->rows[h], m)) return h;
    for (int r = 0; r < p->nrows; r++)
        if (same_key(&p->rows[r], m)) return p->row_of[i] = r;
    TB_ASSERT(p->nrows < p->cap); /* at most one new row per op, and at most cap ops */
    tb_op_row *r = &p->rows[p->nrows];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", m->name);
    r->phase = m->phase;
    r->kind = m->kind;
    r->min_ms = -1;
    return p->row_of[i] = p->nrows++;
}

int tb_op_prof_step_end(tb_op_prof *p, double *ops_ms, double *span_ms) {
    TB_ASSERT(p->in_step && !p->open);
    p->in_step = 0;
    tb_backend *be = p->be;
    double sum = 0, span = 0;
    if (p->nops > 0) {
        be->event_wait(be, p->ev[2 * p->nops - 1]); /* stream order: every earlier one is done too */
        for (int r = 0; r < p->nrows; r++) p->rows[r].step_ms = -1;
        for (int i = 0; i < p->nops; i++) {
            double ms = be->event_elapsed_ms(be, p->ev[2 * i], p->ev[2 * i + 1]);
            if (ms < 0) ms = 0; /* a clock's rounding, never a real negative time */
            tb_op_row *r = &p->rows[row_for(p, i)];
            r->step_ms = (r->step_ms < 0 ? 0 : r->step_ms) + ms;
            r->calls++;
            sum += ms;
        }
        for (int r = 0; r < p->nrows; r++) {
            tb_op_row *q = &p->rows[r];
            if (q->step_ms < 0) continue; /* not run this step */
            q->total_ms += q->step_ms;
            if (q->min_ms < 0 || q->step_ms < q->min_ms) q->min_ms = q->step_ms;
            q->steps_seen++;
        }
        span = be->event_elapsed_ms(be, p->ev[0], p->ev[2 * p->nops - 1]);
    }
    p->steps++;
    p->ops_ms += sum;
    p->span_ms += span;
    p->dropped_total += p->dropped;
    if (ops_ms) *ops_ms = sum;
    if (span_ms) *span_ms = span;
    return p->nops;
}
