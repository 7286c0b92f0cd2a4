/* trainer.h - one data-parallel training step on one rank, timed by phase:
 *
 *   data      producing or waiting for the batch (the source measures it;
 *             on an asynchronous step: the device idle before the step)
 *   h2d       uploading it to the device
 *   forward   forward pass and loss
 *   backward  backward pass; gradient buckets start all-reducing inside it
 *   allreduce exposed all-reduce: waiting for the buckets after backward,
 *             plus the BatchNorm statistics broadcast
 *   optimizer SGD update
 *
 * Gradients are summed across ranks with the loss gradient pre-scaled by
 * (local samples / global samples), so a rank with a short (or empty) last
 * batch counts exactly as much as its samples; a rank with no samples joins
 * every bucket with zeros and advances num_batches_tracked like the others.
 * BatchNorm running statistics are broadcast from rank 0 before every
 * forward, as PyTorch DDP does (hp.bn_broadcast; --broadcast-buffers off
 * skips it: training never reads them, rank 0's own are the same either
 * way, and evaluation, checkpoints and the replica check take rank 0's).
 *
 * Gradient transports: the rows of comm/grad_transport.h, picked by name
 * (hp.transport), or none (one rank, nothing to reduce):
 *   mpi-host    CPU backend: comm/grad_sync.c, MPI on host buffers
 *   mpi-staged  CUDA backend over MPI: comm/grad_sync_dev.c through pinned
 *               host memory (two ranks sharing a GPU, or no NCCL)
 *   nccl        CUDA backend over NCCL: comm/grad_sync_dev.c on a
 *               communication stream; broadcasts with ncclBroadcast
 *
 * Two ways to run a step, one body (src/train/trainer_step.c):
 *   sync    (the CPU backend) the step returns finished: its record is
 *           complete, NaN/Inf in the gradients is found before the update
 *           (tb_trainer_step returns -1). Phase times from the host clock.
 *   async   (CUDA) the step is queued on the compute stream and returns
 *           without waiting for the device: phase times come from events
 *           recorded at the phase boundaries, the loss and the step
 *           scalars (non-finite flag, fp16 skipped steps) from a pinned
 *           readback, all read when the step has finished on the device
 *           (tb_trainer_collect: at once if it has, or waiting, when the
 *           caller needs them, e.g. to print); NaN/Inf in the summed
 *           gradients is a device flag that makes SGD skip the update, and
 *           the record says so. At most TB_TRAINER_SLOTS - 1 steps are in
 *           flight. With --cuda-graph (CUDA, one rank or NCCL), after
 *           warm-up steps the step from the BatchNorm broadcast to the
 *           optimizer is captured once and replayed.
 * A step's record comes back through tb_trainer_collect in both modes. */
#ifndef TB_TRAINER_H
#define TB_TRAINER_H

#include "comm/comm.h"
#include "comm/grad_sync.h"
#include "comm/grad_sync_dev.h"
#include "comm/grad_transport.h"
#include "comm/monitor.h"
#include "comm/nccl.h"
#include "model/model.h"
#include "src/device/device.h"
#include "src/feed/feed.h"
#include "src/results/results.h"


typedef struct {
    double momentum, weight_decay, label_smoothing;
    int nesterov, no_bn_decay;
    size_t bucket_bytes;
    size_t first_bucket_bytes;   /* the first bucket launched, host and device paths (1 MiB as DDP; 0: cut like the rest) */
    int overlap;                 /* start buckets during backward */
    int bn_broadcast;            /* BN running statistics from rank 0 before every forward */
    /* the device paths */
    const char *transport;       /* the row of comm/grad_transport.h ("mpi-host", "mpi-staged", "nccl";
                                    NULL: none) for more than one rank (and on one rank when explicit) */
    int transport_on_one_rank;   /* 1: keep a device `transport` even on a single rank (--comm given) */
    int bf16_allreduce;          /* --allreduce-dtype bf16 */
    int device;                  /* CUDA ordinal of the backend */
    double timeout_s;            /* NCCL's deadlines (--timeout) */
    int async;                   /* 1: asynchronous steps (see above) */
    int cuda_graph;              /* 1: capture the step after graph_warmup eager steps */
    int graph_warmup;
} tb_train_hparams;

#define TB_TRAINER_SLOTS 4

typedef struct tb_trainer tb_trainer;

/* comm: the ranks of this trainer; nccl: their NCCL communicator (NULL
 * unless hp->transport is "nccl"). */
tb_trainer *tb_trainer_create(tb_model *m, tb_comm *comm, tb_nccl *nccl, const tb_train_hparams *hp);
void tb_trainer_destroy(tb_trainer *t);
/* The watchdog to tell what this rank does (may be NULL). */
void tb_trainer_set_monitor(tb_trainer *t, tb_monitor *mon);
/* The model it trains. */
tb_model *tb_trainer_model(const tb_trainer *t);
/* The transport the trainer took: its row, NULL for none (one rank unless
 * explicit); its name, "none" for none. */
const tb_transport_row *tb_trainer_transport(const tb_trainer *t);
const char *tb_trainer_transport_name(const tb_trainer *t);
/* Makes every rank's parameters, momentum, statistics, counters and loss scaler equal to
 * rank 0's (start of training, after a resume). */
void tb_trainer_sync_state(tb_trainer *t);
/* Makes every rank's BatchNorm running statistics rank 0's, as each
 * training step does at its start (DDP's buffer broadcast): before an
 * evaluation, so every rank scores its share with the model rank 0 saves. */
void tb_trainer_sync_bn(tb_trainer *t);
/* Queues one step (number `step`, for messages and the watchdog) and, in
 * sync mode, runs it to the end. Returns 0, or -1 with a one-line message in
 * err when (sync mode) the summed gradients hold NaN or Inf (every rank sees
 * the same sum, so every rank returns -1 together). The batch may be
 * released when it returns. */
int tb_trainer_step(tb_trainer *t, const tb_source_batch *b, int64_t step, double lr, char *err, size_t errlen);
/* The oldest step whose record is not yet collected, in step order: 1 and
 * *rec when it has finished (wait: waiting for the device if needed), 0
 * when none is pending (or, without wait, none has finished yet). */
int tb_trainer_collect(tb_trainer *t, tb_step_record *rec, int wait);
/* Steps queued and not yet collected. */
int tb_trainer_pending(const tb_trainer *t);
/* The next step runs eagerly and re-captures the graph: something outside
 * the trainer ran the model at another batch size (evaluation), which may
 * have regrown the backend's workspaces under the captured graph. */
void tb_trainer_invalidate_graph(tb_trainer *t);
/* The device does other work, or waits for something else, before the
 * next step (a new loader between two feed rows): that step's data phase
 * does not count the gap (as after tb_trainer_invalidate_graph, but the
 * graph stays). */
void tb_trainer_break_idle(tb_trainer *t);
/* on: the steps queued from now run eagerly whatever --cuda-graph says (no
 * replay, no capture; the graph is kept): --op-profile's steps, whose
 * per-op events must be recorded eagerly. off: back to the graph. */
void tb_trainer_force_eager(tb_trainer *t, int on);
/* 1 while --cuda-graph is on and the step is still to be captured (or
 * re-captured) within the next few steps: a caller that times steps keeps
 * warming up until it returns 0, so that the capture and instantiation
 * (host time, the device idle) stay out of its timed steps. The same on
 * every rank (graph decisions use only the global batch); 0 after
 * graph_warmup + 2 steps without a capture (no full batch comes). */
int tb_trainer_graph_pending(const tb_trainer *t);
/* Host seconds spent so far capturing and instantiating the step's CUDA
 * graph (the device idle meanwhile; a failed capture's included): a caller
 * timing steps across a re-capture (after --val's evaluation) leaves them
 * out, as it does the evaluation. */
double tb_trainer_capture_s(const tb_trainer *t);
/* Why --cuda-graph is off ("" when on or not asked for), and the steps
 * replayed so far. */
const char *tb_trainer_graph_status(const tb_trainer *t, int *replays);
/* Name of the first tensor of the flat buffer `buf` (params or grads) that
 * holds a NaN or Inf, and how many it holds; NULL when all are finite. */
const char *tb_trainer_first_nonfinite(tb_trainer *t, const tb_real *buf, size_t *count);
/* Takes rank 0's BN running statistics (each rank updated its own in the
 * last forward, as under DDP), then hashes parameters, momentum, statistics
 * and counters on every rank and compares them: returns 1 when all replicas are bit-identical; else
 * prints one line per differing rank (rank 0) and returns 0. Collective.
 * *hash receives rank 0's hash. */
int tb_trainer_check_replicas(tb_trainer *t, uint64_t *hash);

/* The global mean losses of n collected records (weighted by samples), in
 * one all-reduce; collective. */
void tb_trainer_global_losses(tb_trainer *t, const tb_step_record *recs, int n, double *loss);

#endif
