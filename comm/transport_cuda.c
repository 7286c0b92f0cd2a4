/* transport_cuda.c - the device rows of the gradient transport table
 * (grad_transport.h), both on grad_sync_dev.c: "nccl" (collectives on a
 * communication stream, capturable) and "mpi-staged" (buckets copied to
 * pinned host memory, summed over MPI, copied back; broadcasts through the
 * host). Without CUDA, grad_sync_dev_none.c stands behind them. */
#include "comm/grad_transport.h"

#include <stdlib.h>

#include "core/log.h"

static void dev_create(tb_transport *tr, const tb_transport_opts *o, tb_nccl *nccl) {
    tb_grad_sync_dev_opts d = {
        .comm = o->comm,
        .nccl = nccl,
        .device = o->device,
        .grads = o->grads,
        .count = o->count,
        .tensor_offsets = o->tensor_offsets,
        .ntensors = o->ntensors,
        .cap_bytes = o->cap_bytes,
        .first_bytes = o->first_bytes,
        .overlap = o->overlap,
        .bf16 = o->bf16,
        .compute_stream = o->compute_stream,
        .slots = o->slots,
        .watch = nccl != NULL,
    };
    tr->impl = tb_grad_sync_dev_create(&d);
}

static void nccl_create(tb_transport *tr, const tb_transport_opts *o) {
    if (!o->nccl) TB_FATAL("the NCCL path without an NCCL communicator");
    dev_create(tr, o, o->nccl);
}
static void staged_create(tb_transport *tr, const tb_transport_opts *o) { dev_create(tr, o, NULL); }

static void dev_destroy(tb_transport *tr) { tb_grad_sync_dev_destroy(tr->impl); }

static void nccl_bcast(tb_transport *tr, void *buf, size_t count) {
    tb_grad_sync_dev_bcast(tr->impl, buf, count, TB_DEV_F32, 0);
}
static void staged_bcast(tb_transport *tr, void *buf, size_t count) { tb_transport_bcast_staged(&tr->o, buf, count); }

static void dev_begin(tb_transport *tr, int64_t step, int slot) { tb_grad_sync_dev_begin(tr->impl, step, slot); }

static int dev_launched(const tb_transport *tr) { return tb_grad_sync_dev_launched(tr->impl); }

static void nccl_finish(tb_transport *tr, int slot, tb_grad_sync_step *st) {
    (void)slot, (void)st; /* the statistics come from its events (nccl_stats) */
    double waited = 0;
    tb_grad_sync_dev_finish(tr->impl, &waited);
}

static void staged_finish(tb_transport *tr, int slot, tb_grad_sync_step *st) {
    double waited = 0;
    tb_grad_sync_dev_finish(tr->impl, &waited);
    tb_grad_sync_dev_stats(tr->impl, slot, NULL, st); /* host-timed: known now */
}

static void nccl_stats(tb_transport *tr, int slot, void *ref_event, tb_grad_sync_step *st) {
    tb_grad_sync_dev_stats(tr->impl, slot, ref_event, st);
}

static int dev_timing_events(tb_transport *tr, int slot, void **events) {
    return tb_grad_sync_dev_timing_events(tr->impl, slot, events);
}

/* the communication stream's events, from the start of backward's */
static int nccl_bucket_times(tb_transport *tr, int slot, double ref_host, void *ref_event, tb_bucket_time *b) {
    (void)ref_host;
    tb_grad_sync_dev *g = tr->impl;
    int n = ref_event ? tb_grad_sync_dev_bucket_count(g) : 0;
    if (!b || n == 0) return n;
    double *t = calloc(3 * (size_t)n, sizeof *t);
    if (!t) TB_FATAL("out of host memory");
    int got = tb_grad_sync_dev_bucket_times(g, slot, ref_event, t, t + n, t + 2 * (size_t)n);
    for (int i = 0; i < n && got > 0; i++) {
        tb_grad_sync_dev_bucket(g, i, &b[i].off, &b[i].cnt);
        b[i].ready_s = t[i];
        b[i].start_s = t[n + i];
        b[i].end_s = t[2 * n + i];
    }
    free(t);
    return got < 0 ? -1 : n;
}

const tb_transport_row tb_transport_nccl = {
    .name = "nccl",
    .on_device = 1,
    .one_rank = 1,
    .device_queued = 1,
    .graph_blocker = NULL,
    .create = nccl_create,
    .destroy = dev_destroy,
    .bcast = nccl_bcast,
    .begin = dev_begin,
    .launch = tb_grad_sync_dev_ready,
    .launched = dev_launched,
    .finish = nccl_finish,
    .event_stats = nccl_stats,
    .timing_events = dev_timing_events,
    .bucket_times = nccl_bucket_times,
};

const tb_transport_row tb_transport_mpi_staged = {
    .name = "mpi-staged",
    .on_device = 1,
    .one_rank = 1,
    .device_queued = 0,
    .graph_blocker = "the MPI path stages gradients through the host (MPI is host code)",
    .create = staged_create,
    .destroy = dev_destroy,
    .bcast = staged_bcast,
    .begin = dev_begin,
    .launch = tb_grad_sync_dev_ready,
    .launched = dev_launched,
    .finish = staged_finish,
    .event_stats = NULL,
    .timing_events = dev_timing_events,
    .bucket_times = NULL, /* host-timed MPI calls on another clock: ranges only */
};
