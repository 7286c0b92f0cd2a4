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
 * completes them; the cut and the order are bucket_plan.h's, shared with
 * the device path). A bucket completed early waits, unlaunched, until every
 * bucket after it in the buffer has been launched. Without this, a rank
 * whose ranges arrive in another order (a rank with no samples reports the
 * whole buffer at once) would pair its buckets with different buckets on
 * the other ranks: MPI_ERR_TRUNCATE, or silently wrong sums when sizes
 * match. */
#include "comm/grad_sync.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/bucket_plan.h"
#include "core/log.h"
#include "core/thread_start.h"
#include "core/timer.h"

struct tb_grad_sync {
    tb_comm *comm;
    char *grads;
    size_t count, elem;
    tb_comm_type type;
    tb_bucket *b;              /* ascending offsets (bucket_plan.h) */
    int nb;
    tb_bucket_tracker tr;      /* the fixed launch order (bucket_plan.h) */
    int *launch;               /* [nb] scratch for the tracker */
    int overlap;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int *queue;                /* FIFO of bucket indices */
    int qhead, qtail;          /* qtail - qhead queued, qhead..qtail in flight order */
    int qready;                /* queue[qtail..qready): complete, in launch order, held back (overlap off) */
    int done;                  /* buckets reduced in this step */
    int stop;

    double t_begin, first_start, busy;
    double *t_start, *t_end;   /* [nb] this step's all-reduce of each bucket */

    /* TB_GRAD_SYNC_STATS (see stats_print): per step, each bucket's
     * all-reduce wall and communication-thread CPU time, and the main
     * thread's wall, CPU and run-queue wait from begin to finish */
    double poll_s;             /* longest sleep between tests of a bucket's all-reduce */
    int stats;
    int ns, scap;              /* steps recorded */
    double *s_wall, *s_cpu;    /* [scap][nb] */
    double *m_wall, *m_cpu, *m_wait; /* [scap] main thread, begin -> finish entry */
    double m0_cpu, m0_wait;
};

/* This thread's CPU time (CLOCK_THREAD_CPUTIME_ID) and the time it spent
 * runnable but waiting for a CPU (/proc/thread-self/schedstat's second
 * field; NAN where the kernel does not keep it). */
static void thread_times(double *cpu, double *wait) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    *cpu = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    if (!wait) return;
    *wait = NAN;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (!f) return;
    unsigned long long run = 0, delay = 0;
    if (fscanf(f, "%llu %llu", &run, &delay) == 2) *wait = 1e-9 * (double)delay;
    fclose(f);
}

static void *comm_thread(void *arg) {
    tb_grad_sync *gs = arg;
    pthread_mutex_lock(&gs->mu);
    for (;;) {
        while (gs->qhead == gs->qtail && !gs->stop) pthread_cond_wait(&gs->cv, &gs->mu);
        if (gs->qhead == gs->qtail && gs->stop) break;
        int i = gs->queue[gs->qhead++];
        pthread_mutex_unlock(&gs->mu);

        double c0 = 0, c1 = 0;
        if (gs->stats) thread_times(&c0, NULL);
        double t0 = tb_now();
        tb_comm_allreduce_sum_idle(gs->comm, gs->grads + gs->b[i].offset * gs->elem, gs->b[i].count,
                                   gs->type, gs->poll_s);
        double t1 = tb_now();
        if (gs->stats) thread_times(&c1, NULL);

        pthread_mutex_lock(&gs->mu);
        if (gs->stats && gs->ns < gs->scap) {
            gs->s_wall[(size_t)gs->ns * (size_t)gs->nb + (size_t)i] = t1 - t0;
            gs->s_cpu[(size_t)gs->ns * (size_t)gs->nb + (size_t)i] = c1 - c0;
        }
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
                                  size_t bucket_bytes, size_t first_bucket_bytes, int overlap) {
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
    size_t first = first_bucket_bytes / gs->elem; /* the first bucket cut (launched first) */
    if (first_bucket_bytes == 0 || first > per) first = per;
    if (first < 1) first = 1;

    /* whole tensors from the end of the buffer, the first bucket closing
     * at `first`, the others at `per` (bucket_plan.h) */
    gs->nb = tb_bucket_plan(tensor_offsets, ntensors, per, first, &gs->b);
    tb_bucket_tracker_init(&gs->tr, gs->b, gs->nb);
    gs->launch = calloc((size_t)gs->nb, sizeof *gs->launch);
    gs->queue = calloc((size_t)gs->nb, sizeof *gs->queue);
    gs->t_start = calloc((size_t)gs->nb, sizeof *gs->t_start);
    gs->t_end = calloc((size_t)gs->nb, sizeof *gs->t_end);
    if (!gs->launch || !gs->queue || !gs->t_start || !gs->t_end) TB_FATAL("out of host memory");
    gs->poll_s = tb_grad_sync_poll_s();
    const char *st = getenv("TB_GRAD_SYNC_STATS");
    if (st && *st && strcmp(st, "0") != 0) {
        gs->stats = 1;
        gs->scap = 4096;
        gs->s_wall = calloc((size_t)gs->scap * (size_t)gs->nb, sizeof *gs->s_wall);
        gs->s_cpu = calloc((size_t)gs->scap * (size_t)gs->nb, sizeof *gs->s_cpu);
        gs->m_wall = calloc((size_t)gs->scap, sizeof *gs->m_wall);
        gs->m_cpu = calloc((size_t)gs->scap, sizeof *gs->m_cpu);
        gs->m_wait = calloc((size_t)gs->scap, sizeof *gs->m_wait);
        if (!gs->s_wall || !gs->s_cpu || !gs->m_wall || !gs->m_cpu || !gs->m_wait)
            TB_FATAL("out of host memory");
    }
    pthread_mutex_init(&gs->mu, NULL);
    pthread_cond_init(&gs->cv, NULL);
    tb_thread_start(&gs->thread, NULL, comm_thread, gs, "the gradient communication thread");
    return gs;
}

double tb_grad_sync_poll_s(void) {
    const char *e = getenv("TB_GRAD_SYNC_POLL_US");
    if (!e || !*e) return 200e-6;
    char *end = NULL;
    double us = strtod(e, &end);
    if (*end || !(us >= 0) || us > 1e6)
        tb_die("TB_GRAD_SYNC_POLL_US='%s' is not a number of microseconds from 0 to 1000000 (0: MPI's blocking "
               "all-reduce; unset: 200)", e);
    return 1e-6 * us;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[k * stride] for k = first .. n-1, in ms. */
static double median_ms(const double *v, int first, int n, int stride) {
    int k = n - first;
    if (k <= 0) return NAN;
    double *x = malloc((size_t)k * sizeof *x);
    if (!x) TB_FATAL("out of host memory");
    for (int i = 0; i < k; i++) x[i] = v[(size_t)(first + i) * (size_t)stride];
    qsort(x, (size_t)k, sizeof *x, cmp_double);
    double m = k % 2 ? x[k / 2] : 0.5 * (x[k / 2 - 1] + x[k / 2]);
    free(x);
    return 1e3 * m;
}

/* TB_GRAD_SYNC_STATS=1: one line per bucket and one for the main thread on
 * stderr when the tb_grad_sync goes away, medians over its steps (the first
 * left out as warm-up when there are more than two):
 *   bucket: the all-reduce's wall time and the communication thread's CPU
 *           time during it (near 100 %: the thread spins in MPI's progress;
 *           near 0: it sleeps while the data moves);
 *   main:   from begin (before forward) to finish (after backward) the
 *           wall time, the main thread's CPU time and its run-queue wait
 *           (runnable, but no CPU free: contention). */
static void stats_print(const tb_grad_sync *gs) {
    if (gs->ns == 0) return;
    int first = gs->ns > 2 ? 1 : 0, n = gs->ns < gs->scap ? gs->ns : gs->scap;
    int rank = tb_comm_rank(gs->comm), size = tb_comm_size(gs->comm);
    for (int b = gs->nb - 1; b >= 0; b--) {
        double w = median_ms(gs->s_wall + b, first, n, gs->nb), c = median_ms(gs->s_cpu + b, first, n, gs->nb);
        fprintf(stderr,
                "# grad_sync stats rank %d/%d bucket %d (%.2f MiB): all-reduce %.1f ms, comm thread CPU %.1f ms "
                "(%.0f %%), %d steps\n",
                rank, size, b, (double)gs->b[b].count * (double)gs->elem / 1048576.0, w, c,
                w > 0 ? 100.0 * c / w : 0.0, n - first);
    }
    fprintf(stderr,
            "# grad_sync stats rank %d/%d main thread begin->finish: wall %.1f ms, CPU %.1f ms, "
            "run-queue wait %.1f ms, %d steps\n",
            rank, size, median_ms(gs->m_wall, first, n, 1), median_ms(gs->m_cpu, first, n, 1),
            median_ms(gs->m_wait, first, n, 1), n - first);
}

void tb_grad_sync_destroy(tb_grad_sync *gs) {
    if (!gs) return;
    pthread_mutex_lock(&gs->mu);
    gs->stop = 1;
    pthread_cond_broadcast(&gs->cv);
    pthread_mutex_unlock(&gs->mu);
    pthread_join(gs->thread, NULL);
    if (gs->stats) stats_print(gs);
    free(gs->s_wall);
    free(gs->s_cpu);
    free(gs->m_wall);
    free(gs->m_cpu);
    free(gs->m_wait);
    pthread_mutex_destroy(&gs->mu);
    pthread_cond_destroy(&gs->cv);
    tb_bucket_tracker_free(&gs->tr);
    free(gs->b);
    free(gs->launch);
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
    tb_bucket_tracker_begin(&gs->tr);
    gs->qhead = gs->qtail = gs->qready = 0;
    gs->done = 0;
    gs->busy = 0;
    gs->first_start = 0;
    gs->t_begin = tb_now();
    if (gs->stats) thread_times(&gs->m0_cpu, &gs->m0_wait);
    pthread_mutex_unlock(&gs->mu);
}

/* Hands the complete buckets held back so far to the thread. Caller holds mu. */
static void launch_ready(tb_grad_sync *gs) {
    if (gs->qtail == gs->qready) return;
    gs->qtail = gs->qready;
    pthread_cond_broadcast(&gs->cv);
}

void tb_grad_sync_ready(void *arg, size_t offset, size_t count) {
    tb_grad_sync *gs = arg;
    TB_ASSERT(offset + count <= gs->count);
    pthread_mutex_lock(&gs->mu);
    /* the buckets whose turn has come, in the fixed order (bucket_plan.h) */
    int n = tb_bucket_tracker_ready(&gs->tr, offset, count, gs->launch);
    for (int k = 0; k < n; k++) gs->queue[gs->qready++] = gs->launch[k];
    if (gs->overlap) launch_ready(gs);
    pthread_mutex_unlock(&gs->mu);
}

void tb_grad_sync_finish(tb_grad_sync *gs, tb_grad_sync_step *st) {
    double t0 = tb_now();
    pthread_mutex_lock(&gs->mu);
    if (gs->stats && gs->ns < gs->scap) {
        double c, w;
        thread_times(&c, &w);
        gs->m_wall[gs->ns] = t0 - gs->t_begin;
        gs->m_cpu[gs->ns] = c - gs->m0_cpu;
        gs->m_wait[gs->ns] = w - gs->m0_wait;
    }
    size_t missing = 0;
    int i = tb_bucket_tracker_incomplete(&gs->tr, &missing);
    if (i >= 0)
        TB_FATAL("gradient bucket %d [%zu, +%zu) was never completed by backward (%zu left)", i, gs->b[i].offset,
                 gs->b[i].count, missing);
    launch_ready(gs);
    TB_ASSERT(gs->qready == gs->nb);
    while (gs->done < gs->nb) pthread_cond_wait(&gs->cv, &gs->mu);
    double t1 = tb_now();
    if (st) {
        st->buckets = gs->nb;
        st->exposed_s = t1 - t0;
        st->busy_s = gs->busy;
        st->first_start_s = gs->first_start ? gs->first_start - gs->t_begin : 0;
        st->bytes = (double)gs->count * (double)gs->elem;
    }
    gs->qhead = gs->qtail = gs->qready = 0;
    if (gs->stats) gs->ns++;
    pthread_mutex_unlock(&gs->mu);
}
