/* grad_sync_dev.h - the gradient all-reduce of a GPU backend (comm/grad_sync.h
 * is the host path of the CPU backend).
 *
 * Buckets of whole tensors over the flat float32 gradient buffer in device
 * memory (bucket_plan.h: a small first bucket, then --bucket-mb), each handed
 * to communication when an event recorded on the compute stream after its
 * last gradient has fired (recorded in the model's grad-ready hook, which
 * runs in stream order), in one fixed order on every rank. Two transports:
 *
 *   NCCL     the bucket's all-reduce is queued on a communication stream
 *            that waits for the bucket's event (cudaStreamWaitEvent): no
 *            host wait anywhere; after backward the compute stream waits
 *            for the communication stream's done event, so the optimizer
 *            runs on the summed gradients. Capturable in a CUDA graph.
 *   MPI      (--comm mpi: two ranks sharing a GPU, or a build without
 *            NCCL) staged through pinned host memory: the communication
 *            stream copies the bucket down after its event; a thread waits
 *            for that copy, all-reduces the host copy with MPI and queues
 *            the copy back on an upload stream; the compute stream waits on
 *            the last upload's event. finish() waits on the host until the
 *            thread has queued the last upload (MPI is host code).
 *
 * bf16 (--allreduce-dtype bf16), PyTorch DDP's bf16_compress_hook: the
 * bucket is cast to bfloat16, summed in bfloat16 (half the bytes on the
 * wire), and cast back to float32.
 *
 * Sums, not means: the trainer pre-scales the loss gradient by local /
 * global samples (trainer.h), so the sum is the global mean also when ranks
 * hold different sample counts (--last-batch keep). ncclAvg would weight
 * every rank equally, which is wrong there.
 *
 * Timing on the NCCL path comes from events on the communication stream (a
 * start and an end per bucket), one set per ring slot so that a step's
 * events are read after the next steps were queued; inside a CUDA graph
 * they are recorded as external event nodes, and the graph retargets them
 * per launch (tb_grad_sync_dev_timing_events). The MPI path times its MPI
 * calls on the host, as grad_sync.c does. */
#ifndef TB_GRAD_SYNC_DEV_H
#define TB_GRAD_SYNC_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "comm/grad_sync.h"
#include "comm/nccl.h"

typedef struct tb_grad_sync_dev tb_grad_sync_dev;

typedef struct {
    tb_comm *comm;               /* the ranks (MPI path: the transport) */
    tb_nccl *nccl;               /* NULL: MPI with host staging */
    int device;                  /* CUDA ordinal of grads */
    void *grads;                 /* [count] float32, device */
    size_t count;
    const size_t *tensor_offsets;/* [ntensors + 1] tensor boundaries, ascending, last = count */
    int ntensors;
    size_t cap_bytes;            /* --bucket-mb */
    size_t first_bytes;          /* the first bucket's (1 MiB, as DDP) */
    int overlap;                 /* 0: every bucket after backward (--no-overlap) */
    int bf16;                    /* bfloat16 on the wire */
    void *compute_stream;        /* cudaStream_t of the backend */
    int slots;                   /* steps in flight whose timing events are kept */
    int watch;                   /* 1: register each bucket's end event with the device watch */
} tb_grad_sync_dev_opts;

tb_grad_sync_dev *tb_grad_sync_dev_create(const tb_grad_sync_dev_opts *o);
void tb_grad_sync_dev_destroy(tb_grad_sync_dev *g);
int tb_grad_sync_dev_bucket_count(const tb_grad_sync_dev *g);
void tb_grad_sync_dev_bucket(const tb_grad_sync_dev *g, int i, size_t *offset, size_t *count);
/* 1 on the MPI staging path. */
int tb_grad_sync_dev_staged(const tb_grad_sync_dev *g);
/* Device bytes it allocated (the bf16 wire buffer), outside the backend's accounting. */
size_t tb_grad_sync_dev_device_bytes(const tb_grad_sync_dev *g);
/* The communication stream (cudaStream_t): NCCL broadcasts of the step go there too. */
void *tb_grad_sync_dev_stream(const tb_grad_sync_dev *g);

/* NCCL path: broadcasts count elements of buf (device) from root on the
 * communication stream, ordered after the compute stream's work so far;
 * the compute stream's later work waits for it (no host wait; capturable).
 * The BatchNorm statistics of every step and the start-up state. */
void tb_grad_sync_dev_bcast(tb_grad_sync_dev *g, void *buf, size_t count, tb_dev_type t, int root);

/* A step: its number (messages, the device watch) and its ring slot (< slots). */
void tb_grad_sync_dev_begin(tb_grad_sync_dev *g, int64_t step, int slot);
/* The model's tb_grad_ready_fn: [offset, offset + count) is final in the
 * compute stream's order. Main thread only. */
void tb_grad_sync_dev_ready(void *g, size_t offset, size_t count);
/* Buckets handed to communication so far in this step. */
int tb_grad_sync_dev_launched(const tb_grad_sync_dev *g);
/* After backward: launches what is left and makes the compute stream wait
 * for the sum. *host_wait_s: how long the host waited (MPI path; 0 on NCCL). */
void tb_grad_sync_dev_finish(tb_grad_sync_dev *g, double *host_wait_s);

/* The NCCL path's timing events of `slot` in a fixed order (each bucket's
 * gradients done on the compute stream, its collective's start and end on
 * the communication stream; cudaEvent_t as void *): the same index in two
 * slots is the same event's role. Returns their number (events NULL: count
 * only). */
int tb_grad_sync_dev_timing_events(tb_grad_sync_dev *g, int slot, void **events);
/* The NCCL path's buckets of the step last run in `slot` (its events
 * completed), in seconds from ref_event (cudaEvent_t, the start of
 * backward): ready[i] (gradients done), start[i] and end[i] (the
 * collective on the communication stream), i in bucket order. Returns the
 * bucket count; 0 on the MPI path (host-timed: no device timeline). */
/* (-1 when CUDA cannot time an event: the sample is dropped, not the run) */
int tb_grad_sync_dev_bucket_times(tb_grad_sync_dev *g, int slot, void *ref_event, double *ready, double *start,
                                  double *end);
/* The statistics of the step last run in `slot`, whose events must have
 * completed: busy = summed bucket all-reduce times, first_start from
 * ref_event (cudaEvent_t recorded at the start of backward; NULL: 0),
 * bytes; exposed_s is left 0 (the trainer measures it on the compute
 * stream). The MPI path's come from the host clock and ignore slot. */
void tb_grad_sync_dev_stats(tb_grad_sync_dev *g, int slot, void *ref_event, tb_grad_sync_step *st);

#endif
