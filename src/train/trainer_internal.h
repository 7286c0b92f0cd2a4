/* trainer_internal.h - the trainer's private state, shared by its files:
 *   trainer.c        creation, broadcasts, replicas, the public entry points
 *   trainer_step.c   the one step body (sync and async) and the records
 *   trainer_graph.c  the asynchronous step's queueing and CUDA graph capture */
#ifndef TB_TRAINER_INTERNAL_H
#define TB_TRAINER_INTERNAL_H

#include "comm/grad_transport.h"
#include "src/train/step_timeline.h"
#include "src/train/trainer.h"

/* The async step's events in one ring slot:
 *   E_START  step scalars, batch upload  E_H2D  [BN broadcast  E_BN  forward+loss  E_FWD
 *   backward (buckets leave from the grad-ready hook)  E_BWD  join with the
 *   communication stream  E_COMM  SGD  E_END]  readback of the step scalars */
enum { E_START, E_H2D, E_BN, E_FWD, E_BWD, E_COMM, E_END, E_COUNT };
#define E_GRAPH_FIRST E_BN /* E_BN..E_END are recorded inside a captured step */

typedef struct {
    int inflight;
    tb_step_record rec;
    tb_event *ev[E_COUNT];
    tb_step_scalars *sc_host;    /* pinned: the step scalars after the step */
    tb_event *rb;                /* the readback has landed */
    int has_prev;                /* the previous step's E_END precedes E_START (data phase) */
    int prev_slot;
} slot_t;

struct tb_trainer {
    tb_model *m;
    tb_comm *comm;
    tb_nccl *nccl;
    int rank, world;
    tb_transport *tr;            /* the gradient transport (grad_transport.h); NULL: none (one rank) */
    tb_transport_opts bc;        /* host-staged broadcasts when tr is NULL */
    tb_train_hparams hp;
    float *stage;                /* host staging for broadcasts [max(n_train, n_state)] tb_real */
    tb_monitor *mon;
    int fault_nan;               /* test only (TB_TEST_FAULT=nan): this step's gradient gets a NaN */
    int fault_mid;               /* test only: a process fault inside backward (faults.h) */
    tb_step_timeline *tl;        /* async steps while bucket_profile.h records (rank 0, scaling rows) */
    /* async steps */
    int async;
    int native;                  /* the backend hands out cudaStream_t / cudaEvent_t */
    void *stream;                /* the compute stream (native) */
    slot_t slot[TB_TRAINER_SLOTS];
    int64_t queued, harvested;
    int prev_valid;              /* a step of this trainer was queued before */
    tb_step_record *done;        /* harvested, not yet collected */
    int ndone, done_head, done_cap;
    /* CUDA graph */
    int graph_on;
    char graph_why[200];
    tb_gpu_graph *graph;
    int graph_n;
    int graph_slot;              /* the ring slot the graph was captured in */
    int eager_full;              /* eager full-batch steps since the last (re)start */
    int recapture;
    int replays;
    int pending_steps;           /* steps queued while a capture was due (tb_trainer_graph_pending) */
    double capture_s;            /* host seconds in captures and instantiations, the device idle (tb_trainer_capture_s) */
    int force_eager;             /* tb_trainer_force_eager: no replay, no capture */
    void **gev;                  /* [nev] a launch's events */
    int nev;
};

/* 1 when the transport's collectives are queued on the device (NCCL). */
static inline int tr_device_queued(const tb_trainer *t) { return t->tr && t->tr->row->device_queued; }

/* trainer.c: rank 0's n elements of dev to every rank (the transport's broadcast) */
void tb_trainer_bcast(tb_trainer *t, tb_real *dev, size_t n);

/* trainer_step.c */
/* How a step is run: the synchronous step (host clock, a host sync at
 * every phase boundary) or queued into ring slot `slot` with events. */
typedef struct {
    int sync;
    int slot;
    int capturing;               /* recorded into a CUDA graph capture */
    double t[E_COUNT];           /* sync: host times at the marks (E_*) */
    tb_step_record *rec;         /* the step's record */
} tb_step_mode;
/* The step from the BatchNorm broadcast to the optimizer, both modes.
 * Returns 0, or -1 with err set (sync: non-finite gradients). */
int tb_trainer_step_body(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr, tb_step_mode *md,
                         char *err, size_t errlen);
int tb_trainer_step_sync(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr, char *err,
                         size_t errlen);
/* A phase boundary on the compute stream: an external node inside a capture. */
void tb_trainer_rec_ev(tb_trainer *t, tb_event *e);
void tb_trainer_push_done(tb_trainer *t, const tb_step_record *r);
int tb_trainer_harvest(tb_trainer *t, int s, int wait);

/* trainer_graph.c */
void tb_trainer_graph_blocker(const tb_trainer *t, char *why, size_t len);
int tb_trainer_step_async(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr);

#endif
