/* transport_mpi_host.c - the "mpi-host" row of the gradient transport table
 * (grad_transport.h): host gradient buffers (the CPU backend) summed over
 * MPI by grad_sync.c's communication thread; broadcasts through the host. */
#include "comm/grad_transport.h"

#include <math.h>

static void host_create(tb_transport *tr, const tb_transport_opts *o) {
    tr->impl = tb_grad_sync_create(o->comm, o->grads, o->count, o->type, o->tensor_offsets, o->ntensors,
                                   o->cap_bytes, o->first_bytes, o->overlap);
}

static void host_destroy(tb_transport *tr) { tb_grad_sync_destroy(tr->impl); }

static void host_bcast(tb_transport *tr, void *buf, size_t count) { tb_transport_bcast_staged(&tr->o, buf, count); }

static void host_begin(tb_transport *tr, int64_t step, int slot) {
    (void)step, (void)slot;
    tb_grad_sync_begin(tr->impl);
}

/* grad_sync.c does not count its launches: 1, so that a fault waiting for a
 * launched bucket strikes at the first range, as before the table */
static int host_launched(const tb_transport *tr) {
    (void)tr;
    return 1;
}

static void host_finish(tb_transport *tr, int slot, tb_grad_sync_step *st) {
    (void)slot;
    tb_grad_sync_finish(tr->impl, st);
}

/* the communication thread's clock: any reference but an event */
static int host_bucket_times(tb_transport *tr, int slot, double ref_host, void *ref_event, tb_bucket_time *b) {
    (void)slot, (void)ref_event;
    const tb_grad_sync *gs = tr->impl;
    int n = tb_grad_sync_bucket_count(gs);
    if (!b) return n;
    const double *st, *en;
    tb_grad_sync_bucket_times(gs, &st, &en);
    for (int i = 0; i < n; i++) {
        tb_grad_sync_bucket(gs, i, &b[i].off, &b[i].cnt);
        b[i].ready_s = NAN;
        b[i].start_s = st[i] - ref_host;
        b[i].end_s = en[i] - ref_host;
    }
    return n;
}

const tb_transport_row tb_transport_mpi_host = {
    .name = "mpi-host",
    .on_device = 0,
    .one_rank = 0,
    .device_queued = 0,
    .graph_blocker = "the host all-reduce path",
    .create = host_create,
    .destroy = host_destroy,
    .bcast = host_bcast,
    .begin = host_begin,
    .launch = tb_grad_sync_ready,
    .launched = host_launched,
    .finish = host_finish,
    .event_stats = NULL,
    .timing_events = NULL,
    .bucket_times = host_bucket_times,
};
