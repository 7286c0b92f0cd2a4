/* op_profile.h - where a training step's time goes, op by op (train
 * --op-profile N): a pair of events on the compute stream around every
 * backend call the model's step makes (graph.c's nodes, model.c's uploads,
 * loss, conversions and optimizer, batch_upload.c's input op), each tagged
 * with the node or stage it serves, its phase and its op kind. After the
 * step the host waits for the last event and reads the time between each
 * pair; times add up per (name, phase, kind) row over the profiled steps.
 *
 * An op's time is end minus start of its own pair, so whatever the stream
 * does between two ops (a wait for the communication stream, an upload
 * queued outside the model, the device idle while the host queues) is in
 * no op: "covered" (the ops' sum against the step's measured time) says how
 * much that is.
 *
 * Cost: off, a NULL pointer test per call (tb_op_prof_begin/_end are inline
 * and return at once on NULL). On, two event records per op; the events are
 * made once (tb_op_prof_create, a pool sized from the graph), nothing is
 * allocated while a step is queued. Profiled steps must run eagerly: events
 * recorded inside a CUDA graph capture are not timing events.
 *
 * The CPU backend's events carry host timestamps (it runs every op to
 * completion), so the same code runs, and is tested, without a GPU. */
#ifndef TB_OP_PROFILE_H
#define TB_OP_PROFILE_H

#include <stdint.h>

#include "model/backend.h"
#include "model/params.h"

/* What an op does. Kinds with a direction say so; the table by kind keeps
 * them apart (relu_fwd and relu_bwd cost differently). */
typedef enum {
    TB_OPK_CONV_FWD,
    TB_OPK_CONV_DGRAD,
    TB_OPK_CONV_WGRAD,
    TB_OPK_BN_FWD,
    TB_OPK_BN_BWD,
    TB_OPK_RELU_FWD,
    TB_OPK_RELU_BWD,
    TB_OPK_ADD_FWD,
    TB_OPK_ADD_BWD,
    TB_OPK_MAXPOOL_FWD,
    TB_OPK_MAXPOOL_BWD,
    TB_OPK_AVGPOOL_FWD,
    TB_OPK_AVGPOOL_BWD,
    TB_OPK_LINEAR_FWD,
    TB_OPK_LINEAR_BWD,
    TB_OPK_LOSS,            /* softmax cross-entropy: the loss and d(loss)/d(logits) */
    TB_OPK_WEIGHT_CONVERT,  /* master weight -> op copy (bf16/fp16, NHWC) */
    TB_OPK_GRAD_CONVERT,    /* op gradient -> float32 flat gradient */
    TB_OPK_UPLOAD,          /* a host-to-device copy queued on the compute stream */
    TB_OPK_INPUT,           /* the batch into the input activation (normalise, flip, layout) */
    TB_OPK_NONFINITE_CHECK, /* the device's NaN/Inf scan of the gradients */
    TB_OPK_SGD,
    TB_OPK_LOSS_SCALE,      /* fp16 GradScaler bookkeeping */
    TB_OPK_COUNT
} tb_op_kind;

/* Where in the step. */
typedef enum {
    TB_OPP_INPUT,           /* the batch and the step's scalars going up */
    TB_OPP_FORWARD,
    TB_OPP_LOSS,
    TB_OPP_BACKWARD,        /* BN, elementwise, pool, linear backward */
    TB_OPP_BACKWARD_DATA,   /* conv input gradient */
    TB_OPP_BACKWARD_FILTER, /* conv weight gradient (and its conversion, with a grad-ready hook) */
    TB_OPP_UPDATE,          /* the check, SGD, the loss scale, the op weight refresh */
    TB_OPP_COUNT
} tb_op_phase;

/* "conv_fwd", ...; "forward", "backward-data", ... */
const char *tb_op_kind_name(tb_op_kind k);
const char *tb_op_phase_name(tb_op_phase p);

/* One row: an op (or several calls of it) of one node or stage in one phase. */
typedef struct {
    char name[TB_PARAM_NAME_MAX]; /* node ("layer1.0.conv1"), parameter ("fc.weight") or stage ("sgd") */
    tb_op_phase phase;
    tb_op_kind kind;
    double total_ms;              /* summed over the profiled steps */
    double min_ms;                /* the least one step took (steps where it ran) */
    double step_ms;               /* scratch: the step being read */
    int64_t calls;                /* over the profiled steps */
    int steps_seen;
} tb_op_row;

/* One op queued in the step: its tags (name points into the graph, the
 * parameter table or a literal: nothing is copied while queueing). */
typedef struct {
    const char *name;
    tb_op_phase phase;
    tb_op_kind kind;
} tb_op_mark;

typedef struct tb_op_prof {
    tb_backend *be;
    int cap;                  /* ops per step the event pool holds */
    tb_event **ev;            /* [2 * cap]: op i's start, end */
    tb_op_mark *ops;          /* [cap] this step's ops, in queue order */
    int nops;
    int open;                 /* an op has begun and not ended */
    int dropped;              /* ops past cap in this step (untimed) */
    int in_step;
    /* the profile so far */
    tb_op_row *rows;          /* [cap], first-seen order */
    int nrows;
    int *row_of;              /* [cap] the row op i had last step (a hint) */
    int steps;
    double ops_ms;            /* sum over steps of the ops' times */
    double span_ms;           /* sum over steps of first start to last end */
    int64_t dropped_total;
} tb_op_prof;

/* A profiler for steps of at most max_ops backend calls (see
 * tb_model_op_profile_capacity), its events made now. */
tb_op_prof *tb_op_prof_create(tb_backend *be, int max_ops);
void tb_op_prof_destroy(tb_op_prof *p);

/* Brackets one step. step_end waits for the step's last event, reads every
 * op's time into the rows and returns the number of ops timed; *ops_ms and
 * *span_ms (may be NULL) get this step's sum of op times and the time from
 * its first op's start to its last op's end. */
void tb_op_prof_step_begin(tb_op_prof *p);
int tb_op_prof_step_end(tb_op_prof *p, double *ops_ms, double *span_ms);

/* Around one backend call. The inline wrappers are the whole cost when
 * profiling is off (p == NULL). */
void tb_op_prof_begin_(tb_op_prof *p, const char *name, tb_op_phase phase, tb_op_kind kind);
void tb_op_prof_end_(tb_op_prof *p);
static inline void tb_op_prof_begin(tb_op_prof *p, const char *name, tb_op_phase phase, tb_op_kind kind) {
    if (p) tb_op_prof_begin_(p, name, phase, kind);
}
static inline void tb_op_prof_end(tb_op_prof *p) {
    if (p) tb_op_prof_end_(p);
}

#endif
