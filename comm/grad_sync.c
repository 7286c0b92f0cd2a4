/* grad_sync.c - bucketed, overlapped gradient all-reduce (see grad_sync.h).
 *
 * One communication thread per tb_grad_sync takes launched buckets from a
 * FIFO and all-reduces them in place. The main thread only reports ready
 * ranges and, in finish(), waits; it makes no MPI call while buckets are in
 * flight, so MPI_THREAD_SERIALIZED is enough.
 *
 * The all-reduces are blocking collectives matched by order, so every rank
 * must launch the buckets in the same order: always the last bucket of the
 * flat buffer first, down to bucket 0 (the order backward normally
 * completes them). A bucket completed early waits, unlaunched, until every
 * bucket after it in the buffer has been launched. Without this, a rank
 * whose ranges arrive in another order (a rank with no samples reports the
 * whole buffer at once) would pair its buckets with different buckets on
 * the other ranks: MPI_ERR_TRUNCATE, or silently wrong sums when sizes
 * match. */
#include "comm/grad_sync.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/log.h"
#include "src/core/timer.h"

typedef struct {
    size_t offset, count;      /* slice of the flat buffer */
    size_t remaining;          /* elements not yet reported in this backward */
} bucket;

struct tb_grad_sync {
    tb_comm *comm;
    char *grads;
    size_t count, elem;
    tb_comm_type type;
    bucket *b;                 /* ascending offsets */
    int nb;
    int overlap;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int *queue;                /* FIFO of bucket indices */
    int qhead, qtail;          /* qtail - qhead queued, qhead..qtail in flight order */
    int next_launch;           /* the next bucket to launch (nb-1 down to 0; -1: all) */
    int done;                  /* buckets reduced in this step */
    int stop;

    double t_begin, first_start, busy;
    double *t_start, *t_end;   /* [nb] this step's all-reduce of each bucket */
};

static void *comm_thread(void *arg) {
    tb_grad_sync *gs = arg;
    pthread_mutex_lock(&gs->mu);
    for (;;) {
        while (gs->qhead == gs->qtail && !gs->stop) pthread_cond_wait(&gs->cv, &gs->mu);
        if (gs->qhead == gs->qtail && gs->stop) break;
        int i = gs->queue[gs->qhead++];
        pthread_mutex_unlock(&gs->mu);

        double t0 = tb_now();
        tb_comm_allreduce_sum(gs->comm, gs->grads + gs->b[i].offset * gs->elem, gs->b[i].count,
                              gs->type);
        double t1 = tb_now();

        pthread_mutex_lock(&gs->mu);
        gs->t_start[i] = t0;
        gs->t_end[i] = t1;
        if (gs->first_start == 0) gs->first_start = t0;
        gs->busy += t1 - t0;
        gs->done++;
        pthread_cond_broadcast(&gs->cv);
    }
    pthread_mutex_unlock(&gs->mu);
    return NULL;
}

tb_grad_sync *tb_grad_sync_create(tb_comm *comm, void *grads, size_t count, tb_comm_type t,
                                  const size_t *tensor_offsets, int ntensors,
                                  size_t bucket_bytes, int overlap) {
    TB_ASSERT(ntensors >= 1 && tensor_offsets[0] == 0 && tensor_offsets[ntensors] == count);
    tb_grad_sync *gs = calloc(1, sizeof *gs);
    if (!gs) TB_FATAL("out of host memory");
    gs->comm = comm;
    gs->grads = grads;
    gs->count = count;
    gs->type = t;
    gs->elem = t == TB_FLOAT32 ? 4 : 8;
    gs->overlap = overlap;
    size_t per = bucket_bytes / gs->elem;
    if (per < 1) per = 1;

    /* whole tensors, accumulated from the end of the buffer */
    gs->b = calloc((size_t)ntensors, sizeof *gs->b);
    gs->queue = calloc((size_t)ntensors, sizeof *gs->queue);
    gs->t_start = calloc((size_t)ntensors, sizeof *gs->t_start);
    gs->t_end = calloc((size_t)ntensors, sizeof *gs->t_end);
    if (!gs->b || !gs->queue || !gs->t_start || !gs->t_end) TB_FATAL("out of host memory");
    size_t end = count;
    for (int i = ntensors - 1; i >= 0; i--) {
        size_t start = tensor_offsets[i];
        if (end - start >= per || i == 0) {
            bucket bk = {start, end - start, 0};
            gs->b[gs->nb++] = bk;
            end = start;
        }
    }
    /* built back to front: reverse to ascending offsets */
    for (int i = 0; i < gs->nb / 2; i++) {
        bucket tmp = gs->b[i];
        gs->b[i] = gs->b[gs->nb - 1 - i];
        gs->b[gs->nb - 1 - i] = tmp;
    }
    pthread_mutex_init(&gs->mu, NULL);
    pthread_cond_init(&gs->cv, NULL);
    if (pthread_create(&gs->thread, NULL, comm_thread, gs) != 0)
        TB_FATAL("cannot start the gradient communication thread");
    return gs;
}

void tb_grad_sync_destroy(tb_grad_sync *gs) {
    if (!gs) return;
    pthread_mutex_lock(&gs->mu);
    gs->stop = 1;
    pthread_cond_broadcast(&gs->cv);
    pthread_mutex_unlock(&gs->mu);
    pthread_join(gs->thread, NULL);
    pthread_mutex_destroy(&gs->mu);
    pthread_cond_destroy(&gs->cv);
    free(gs->b);
    free(gs->queue);
    free(gs->t_start);
    free(gs->t_end);
    free(gs);
}

int tb_grad_sync_bucket_count(const tb_grad_sync *gs) { return gs->nb; }

void tb_grad_sync_bucket(const tb_grad_sync *gs, int i, size_t *offset, size_t *count) {
    *offset = gs->b[i].offset;
    *count = gs->b[i].count;
}

void tb_grad_sync_bucket_times(const tb_grad_sync *gs, const double **start, const double **end) {
    *start = gs->t_start;
    *end = gs->t_end;
}

void tb_grad_sync_begin(tb_grad_sync *gs) {
    pthread_mutex_lock(&gs->mu);
    TB_ASSERT(gs->qhead == gs->qtail);
    for (int i = 0; i < gs->nb; i++) {
        gs->b[i].remaining = gs->b[i].count;
    }
    gs->qhead = gs->qtail = 0;
    gs->next_launch = gs->nb - 1;
    gs->done = 0;
    gs->busy = 0;
    gs->first_start = 0;
    gs->t_begin = tb_now();
    pthread_mutex_unlock(&gs->mu);
}

/* Launches, in the fixed order (last bucket first), every bucket whose
 * turn has come and that is complete. Caller holds mu. */
static void launch_in_order(tb_grad_sync *gs) {
    int any = 0;
    while (gs->next_launch >= 0 && gs->b[gs->next_launch].remaining == 0) {
        int i = gs->next_launch--;
        gs->queue[gs->qtail++] = i;
        any = 1;
    }
    if (any) pthread_cond_broadcast(&gs->cv);
}

void tb_grad_sync_ready(void *arg, size_t offset, size_t count) {
    tb_grad_sync *gs = arg;
    size_t end = offset + count;
    TB_ASSERT(end <= gs->count);
    /* the last bucket starting at or before offset */
    int lo = 0, hi = gs->nb - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (gs->b[mid].offset <= offset) lo = mid;
        else hi = mid - 1;
    }
    pthread_mutex_lock(&gs->mu);
    for (int i = lo; i < gs->nb && gs->b[i].offset < end; i++) {
        bucket *bk = &gs->b[i];
        size_t a = offset > bk->offset ? offset : bk->offset;
        size_t z = end < bk->offset + bk->count ? end : bk->offset + bk->count;
        TB_ASSERT(z - a <= bk->remaining);
        bk->remaining -= z - a;
    }
    if (gs->overlap) launch_in_order(gs);
    pthread_mutex_unlock(&gs->mu);
}

void tb_grad_sync_finish(tb_grad_sync *gs, tb_grad_sync_step *st) {
    double t0 = tb_now();
    pthread_mutex_lock(&gs->mu);
    for (int i = gs->nb - 1; i >= 0; i--)
        if (gs->b[i].remaining != 0)
            TB_FATAL("gradient bucket %d [%zu, +%zu) was never completed by backward (%zu left)", i,
                     gs->b[i].offset, gs->b[i].count, gs->b[i].remaining);
    launch_in_order(gs);
    TB_ASSERT(gs->next_launch == -1);
    while (gs->done < gs->nb) pthread_cond_wait(&gs->cv, &gs->mu);
    double t1 = tb_now();
    if (st) {
        st->buckets = gs->nb;
        st->exposed_s = t1 - t0;
        st->busy_s = gs->busy;
        st->first_start_s = gs->first_start ? gs->first_start - gs->t_begin : 0;
        st->bytes = (double)gs->count * (double)gs->elem;
    }
    gs->qhead = gs->qtail = 0;
    pthread_mutex_unlock(&gs->mu);
}
