/* grad_transport.h - the gradient transports, one table: each row is one way
 * of summing the flat gradient buffer across ranks in buckets (and of
 * broadcasting rank 0's buffers), behind the same few operations, as
 * nccl-tests keeps one small table per collective.
 *
 *   row          file                   gradients  what moves them
 *   mpi-host     transport_mpi_host.c   host       grad_sync.c: MPI on a communication thread
 *   mpi-staged   transport_cuda.c       device     grad_sync_dev.c: copied to pinned host memory, MPI, back
 *   nccl         transport_cuda.c       device     grad_sync_dev.c: NCCL on a communication stream
 *
 * Every row cuts the buffer with bucket_plan.h and launches the buckets in
 * its one fixed order. A new transport (Gloo, UCC) is one file holding its
 * row and one line in tb_transport_rows (grad_transport.c); the trainer
 * picks rows by name only. In builds without CUDA the device rows link
 * against grad_sync_dev_none.c (their create fails with a message). */
#ifndef TB_GRAD_TRANSPORT_H
#define TB_GRAD_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "comm/grad_sync.h"
#include "comm/grad_sync_dev.h"
#include "comm/nccl.h"

typedef struct {
    tb_comm *comm;               /* the ranks */
    tb_nccl *nccl;               /* the NCCL communicator (nccl row) */
    int device;                  /* CUDA ordinal of grads (device rows) */
    void *grads;                 /* [count] elements of type, host or device memory as the row says */
    size_t count;
    tb_comm_type type;           /* TB_FLOAT32 (device rows: only) or TB_FLOAT64 */
    const size_t *tensor_offsets;/* [ntensors + 1] tensor boundaries, ascending, last = count */
    int ntensors;
    size_t cap_bytes;            /* --bucket-mb */
    size_t first_bytes;          /* the first bucket launched (1 MiB, as DDP; 0: like the rest) */
    int overlap;                 /* 0: every bucket after backward (--no-overlap) */
    int bf16;                    /* bfloat16 on the wire (device rows) */
    void *compute_stream;        /* cudaStream_t of the backend (device rows) */
    int slots;                   /* steps in flight whose timing events are kept */
    /* broadcasts through the host: stage holds count elements (or more);
     * copy_d2h / copy_h2d move bytes between buffers and stage (copy_h2d
     * returns with the copy complete) */
    void *stage;
    void *copy_ctx;
    void (*copy_d2h)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*copy_h2d)(void *ctx, void *dst, const void *src, size_t bytes);
} tb_transport_opts;

typedef struct tb_transport tb_transport;

/* One bucket of a finished step, for the timelines (train/step_timeline.c,
 * results/bucket_profile.c, --trace): elements [off, off + cnt) of the flat
 * buffer; its gradients done (ready_s; NAN where the row does not measure
 * it), its collective's start and end, in seconds from the caller's
 * reference. */
typedef struct {
    size_t off, cnt;
    double ready_s, start_s, end_s;
} tb_bucket_time;

typedef struct {
    const char *name;            /* what --comm, the logs and the results file's comm_path say */
    int on_device;               /* 1: the gradients are in device memory (a CUDA backend) */
    int one_rank;                /* 1: kept on a single rank when asked for explicitly */
    int device_queued;           /* 1: collectives queued on the device (broadcasts too): no host
                                    wait, statistics from events (event_stats), followed by the
                                    device watch, capturable in a CUDA graph */
    const char *graph_blocker;   /* why a step using it cannot be captured (NULL: it can) */
    /* Sets tr->impl. */
    void (*create)(tb_transport *tr, const tb_transport_opts *o);
    void (*destroy)(tb_transport *tr);
    /* rank 0's count elements of buf (in the row's memory) to every rank */
    void (*bcast)(tb_transport *tr, void *buf, size_t count);
    /* a step: its number and ring slot (< slots) */
    void (*begin)(tb_transport *tr, int64_t step, int slot);
    /* the model's grad-ready hook: [offset, offset + count) is final; launches
     * the buckets whose turn has come (bucket_plan.h) */
    void (*launch)(void *impl, size_t offset, size_t count);
    /* buckets launched so far in this step */
    int (*launched)(const tb_transport *tr);
    /* after backward: launches the rest and waits for every bucket (host
     * rows) or makes the compute stream wait for them (device rows); host-
     * timed rows fill *st (buckets, busy time, bytes) of `slot` */
    void (*finish)(tb_transport *tr, int slot, tb_grad_sync_step *st);
    /* device_queued rows: *st of the step last run in slot, from its events
     * (ref_event: the start of backward); NULL for host-timed rows */
    void (*event_stats)(tb_transport *tr, int slot, void *ref_event, tb_grad_sync_step *st);
    /* the timing events of slot that a CUDA graph records (NULL events: count) */
    int (*timing_events)(tb_transport *tr, int slot, void **events);
    /* The buckets of the step last finished (host-timed rows: the last step
     * finished, whatever the slot; device rows: the one last run in slot,
     * its events complete), times from ref_host (a tb_now() time) on the
     * host clock or from ref_event (cudaEvent_t) on the device's. Fills
     * b[0..n) (NULL: count only) and returns n; 0 where the row keeps no
     * times on the clock asked for (a device row given no ref_event); -1
     * when CUDA could not time an event (the caller drops the sample, never
     * the run). NULL: a row that keeps no bucket times (mpi-staged: its
     * MPI calls are host-timed on another clock; ranges only in the
     * timelines). tb_transport_bucket_times gives them as a new list. */
    int (*bucket_times)(tb_transport *tr, int slot, double ref_host, void *ref_event, tb_bucket_time *b);
} tb_transport_row;

struct tb_transport {
    const tb_transport_row *row;
    tb_transport_opts o;         /* a copy (tensor_offsets not kept) */
    void *impl;                  /* the row's own state (a tb_grad_sync, a tb_grad_sync_dev) */
};

/* The table, NULL-terminated. */
extern const tb_transport_row *const tb_transport_rows[];
/* The row called name, or NULL. */
const tb_transport_row *tb_transport_find(const char *name);
/* A transport of row `name` (a fatal error when there is none). */
tb_transport *tb_transport_create(const char *name, const tb_transport_opts *o);
void tb_transport_destroy(tb_transport *tr);
/* The row's bucket_times as a new list (the caller frees it): *n buckets;
 * NULL with *n 0 when the row keeps none (tr NULL, bucket_times NULL or 0
 * buckets on that clock); *n -1 when CUDA could not time them. */
tb_bucket_time *tb_transport_bucket_times(tb_transport *tr, int slot, double ref_host, void *ref_event, int *n);
/* The broadcast of the host-staged rows: rank 0's buffer copied into
 * o->stage, broadcast over o->comm, copied back on the other ranks. */
void tb_transport_bcast_staged(const tb_transport_opts *o, void *buf, size_t count);

#endif
