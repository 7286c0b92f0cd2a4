/* grad_transport.c - the table of gradient transports and what its rows
 * share (see grad_transport.h). Adding a transport: its row in its own
 * file, one line here. */
#include "comm/grad_transport.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"

extern const tb_transport_row tb_transport_mpi_host;   /* transport_mpi_host.c */
extern const tb_transport_row tb_transport_mpi_staged; /* transport_cuda.c */
extern const tb_transport_row tb_transport_nccl;       /* transport_cuda.c */

const tb_transport_row *const tb_transport_rows[] = {
    &tb_transport_mpi_host,
    &tb_transport_mpi_staged,
    &tb_transport_nccl,
    NULL,
};

const tb_transport_row *tb_transport_find(const char *name) {
    for (int i = 0; name && tb_transport_rows[i]; i++)
        if (strcmp(tb_transport_rows[i]->name, name) == 0) return tb_transport_rows[i];
    return NULL;
}

tb_transport *tb_transport_create(const char *name, const tb_transport_opts *o) {
    const tb_transport_row *row = tb_transport_find(name);
    if (!row) TB_FATAL("no gradient transport called '%s'", name ? name : "(null)");
    tb_transport *tr = calloc(1, sizeof *tr);
    if (!tr) TB_FATAL("out of host memory");
    tr->row = row;
    tr->o = *o;
    tr->o.tensor_offsets = NULL;
    row->create(tr, o);
    return tr;
}

void tb_transport_destroy(tb_transport *tr) {
    if (!tr) return;
    tr->row->destroy(tr);
    free(tr);
}

tb_bucket_time *tb_transport_bucket_times(tb_transport *tr, int slot, double ref_host, void *ref_event, int *n) {
    *n = tr && tr->row->bucket_times ? tr->row->bucket_times(tr, slot, ref_host, ref_event, NULL) : 0;
    if (*n <= 0) return NULL;
    tb_bucket_time *b = calloc((size_t)*n, sizeof *b);
    if (!b) TB_FATAL("out of host memory");
    if (tr->row->bucket_times(tr, slot, ref_host, ref_event, b) != *n) *n = -1;
    return b;
}

void tb_transport_bcast_staged(const tb_transport_opts *o, void *buf, size_t count) {
    size_t bytes = count * (o->type == TB_FLOAT32 ? 4 : 8);
    int rank = tb_comm_rank(o->comm);
    if (rank == 0) o->copy_d2h(o->copy_ctx, o->stage, buf, bytes);
    tb_comm_bcast(o->comm, o->stage, count, o->type, 0);
    if (rank != 0) o->copy_h2d(o->copy_ctx, buf, o->stage, bytes);
}
