/* grad_sync_dev.c - bucketed gradient all-reduce on the GPU (see grad_sync_dev.h).
 *
 * Events per bucket b:
 *   ready[b]        compute stream, recorded in the grad-ready hook; the
 *                   communication stream waits on it (fork)
 *   start/end[s][b] communication stream, around the bucket's collective,
 *                   one set per ring slot s (timing; external nodes inside
 *                   a CUDA graph)
 *   rtime[s][b]     compute stream, next to ready[b]: when the bucket's
 *                   gradients were done (timing; ready itself must stay a
 *                   plain record: inside a capture it is what joins the
 *                   communication stream into the graph)
 *   down[b]         MPI path: the bucket's copy into pinned memory is done
 * and per step `done` (the communication or upload stream's last work),
 * which the compute stream waits on (join). */
#include "comm/grad_sync_dev.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bucket_plan.h"
#include "comm/comm_cast.h"
#include "core/cuda_check.h"
#include "core/log.h"
#include "core/thread_start.h"
#include "core/timer.h"

struct tb_grad_sync_dev {
    tb_grad_sync_dev_opts o;
    tb_bucket *b;
    int nb;
    tb_bucket_tracker tr;
    int *launch;                 /* [nb] scratch for the tracker */
    int *deferred;               /* [nb] --no-overlap: launchable, held until finish */
    int ndeferred;
    cudaStream_t compute, comm, up;
    cudaEvent_t *ready, *down, done;
    cudaEvent_t bc_fork, bc_join;   /* a broadcast's fork from and join into the compute stream */
    cudaEvent_t *start, *end, *rtime; /* [slots * nb] */
    uint16_t *wire;              /* [count] device bf16 (bf16 only) */
    void *host;                  /* [count] pinned, float32 or bf16 (MPI path) */
    int64_t step;
    int slot;
    int launched;                /* buckets launched this step */
    /* MPI path: the staging thread */
    pthread_t thread;
    int have_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int *queue, qhead, qtail;    /* buckets copied down, waiting for MPI */
    int uploaded;                /* buckets whose upload is queued, this step */
    int stop;
    double t_begin, first_start, busy;
};

static size_t wire_elem(const tb_grad_sync_dev *g) { return g->o.bf16 ? 2 : 4; }

static int capturing(cudaStream_t s) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    TB_CUDA_CHECK(cudaStreamIsCapturing(s, &cs));
    return cs != cudaStreamCaptureStatusNone;
}

/* A timing event: an external node inside a capture, so that it is really
 * recorded on every replay (a plain record inside a capture only orders). */
static void record_timing(cudaEvent_t e, cudaStream_t s, int in_capture) {
    if (in_capture) TB_CUDA_CHECK(cudaEventRecordWithFlags(e, s, cudaEventRecordExternal));
    else TB_CUDA_CHECK(cudaEventRecord(e, s));
}

/* ---- the MPI path's staging thread ------------------------------------------------ */

static void *staging_thread(void *arg) {
    tb_grad_sync_dev *g = arg;
    TB_CUDA_CHECK(cudaSetDevice(g->o.device));
    pthread_mutex_lock(&g->mu);
    for (;;) {
        while (g->qhead == g->qtail && !g->stop) pthread_cond_wait(&g->cv, &g->mu);
        if (g->qhead == g->qtail && g->stop) break;
        int i = g->queue[g->qhead++];
        pthread_mutex_unlock(&g->mu);

        const tb_bucket *bk = &g->b[i];
        char *h = (char *)g->host + bk->offset * wire_elem(g);
        TB_CUDA_CHECK(cudaEventSynchronize(g->down[i])); /* the bucket is in pinned memory */
        double t0 = tb_now();
        if (g->o.bf16) tb_comm_allreduce_sum_bf16(g->o.comm, (uint16_t *)h, bk->count);
        else tb_comm_allreduce_sum(g->o.comm, h, bk->count, TB_FLOAT32);
        double t1 = tb_now();
        if (g->o.bf16) {
            uint16_t *w = g->wire + bk->offset;
            TB_CUDA_CHECK(cudaMemcpyAsync(w, h, bk->count * 2, cudaMemcpyHostToDevice, g->up));
            tb_comm_cast_bf16_to_f32(w, (float *)g->o.grads + bk->offset, bk->count, g->up);
        } else {
            TB_CUDA_CHECK(cudaMemcpyAsync((float *)g->o.grads + bk->offset, h, bk->count * 4, cudaMemcpyHostToDevice,
                                          g->up));
        }

        pthread_mutex_lock(&g->mu);
        if (g->first_start == 0) g->first_start = t0;
        g->busy += t1 - t0;
        if (++g->uploaded == g->nb) TB_CUDA_CHECK(cudaEventRecord(g->done, g->up));
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* ---- set-up ----------------------------------------------------------------------- */

tb_grad_sync_dev *tb_grad_sync_dev_create(const tb_grad_sync_dev_opts *o) {
    TB_ASSERT(o->grads && o->count > 0 && o->ntensors >= 1 && o->slots >= 1 && o->compute_stream);
    tb_grad_sync_dev *g = calloc(1, sizeof *g);
    if (!g) TB_FATAL("out of host memory");
    g->o = *o;
    g->o.tensor_offsets = NULL; /* not kept */
    g->nb = tb_bucket_plan(o->tensor_offsets, o->ntensors, o->cap_bytes / 4, o->first_bytes / 4, &g->b);
    tb_bucket_tracker_init(&g->tr, g->b, g->nb);
    g->launch = calloc((size_t)g->nb, sizeof *g->launch);
    g->deferred = calloc((size_t)g->nb, sizeof *g->deferred);
    g->queue = calloc((size_t)g->nb, sizeof *g->queue);
    g->ready = calloc((size_t)g->nb, sizeof *g->ready);
    g->down = calloc((size_t)g->nb, sizeof *g->down);
    size_t ns = (size_t)o->slots * (size_t)g->nb;
    g->start = calloc(ns, sizeof *g->start);
    g->end = calloc(ns, sizeof *g->end);
    g->rtime = calloc(ns, sizeof *g->rtime);
    if (!g->launch || !g->deferred || !g->queue || !g->ready || !g->down || !g->start || !g->end || !g->rtime)
        TB_FATAL("out of host memory");

    TB_CUDA_CHECK(cudaSetDevice(o->device));
    g->compute = (cudaStream_t)o->compute_stream;
    TB_CUDA_CHECK(cudaStreamCreateWithFlags(&g->comm, cudaStreamNonBlocking));
    for (int i = 0; i < g->nb; i++) {
        TB_CUDA_CHECK(cudaEventCreateWithFlags(&g->ready[i], cudaEventDisableTiming));
        TB_CUDA_CHECK(cudaEventCreateWithFlags(&g->down[i], cudaEventDisableTiming));
    }
    for (size_t i = 0; i < ns; i++) {
        TB_CUDA_CHECK(cudaEventCreate(&g->start[i]));
        TB_CUDA_CHECK(cudaEventCreate(&g->end[i]));
        TB_CUDA_CHECK(cudaEventCreate(&g->rtime[i]));
    }
    TB_CUDA_CHECK(cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming));
    TB_CUDA_CHECK(cudaEventCreateWithFlags(&g->bc_fork, cudaEventDisableTiming));
    TB_CUDA_CHECK(cudaEventCreateWithFlags(&g->bc_join, cudaEventDisableTiming));
    if (o->bf16) TB_CUDA_CHECK(cudaMalloc((void **)&g->wire, o->count * 2));
    if (!o->nccl) {
        size_t bytes = o->count * wire_elem(g);
        cudaError_t e = cudaHostAlloc(&g->host, bytes, cudaHostAllocPortable);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            tb_die("cannot pin %.1f MiB of host memory for the MPI gradient staging (%s); raise the "
                   "locked-memory limit (ulimit -l)",
                   (double)bytes / 1048576.0, cudaGetErrorString(e));
        }
        TB_CUDA_CHECK(cudaStreamCreateWithFlags(&g->up, cudaStreamNonBlocking));
        pthread_mutex_init(&g->mu, NULL);
        pthread_cond_init(&g->cv, NULL);
        tb_thread_start(&g->thread, NULL, staging_thread, g, "the gradient staging thread");
        g->have_thread = 1;
    }
    return g;
}

void tb_grad_sync_dev_destroy(tb_grad_sync_dev *g) {
    if (!g) return;
    if (g->have_thread) {
        pthread_mutex_lock(&g->mu);
        g->stop = 1;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL);
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
    }
    TB_CUDA_CHECK(cudaSetDevice(g->o.device));
    TB_CUDA_CHECK(cudaStreamSynchronize(g->comm));
    if (g->up) TB_CUDA_CHECK(cudaStreamSynchronize(g->up));
    tb_dev_watch_clear(); /* its entries point at the events below */
    for (int i = 0; i < g->nb; i++) {
        TB_CUDA_CHECK(cudaEventDestroy(g->ready[i]));
        TB_CUDA_CHECK(cudaEventDestroy(g->down[i]));
    }
    for (size_t i = 0; i < (size_t)g->o.slots * (size_t)g->nb; i++) {
        TB_CUDA_CHECK(cudaEventDestroy(g->start[i]));
        TB_CUDA_CHECK(cudaEventDestroy(g->end[i]));
        TB_CUDA_CHECK(cudaEventDestroy(g->rtime[i]));
    }
    TB_CUDA_CHECK(cudaEventDestroy(g->done));
    TB_CUDA_CHECK(cudaEventDestroy(g->bc_fork));
    TB_CUDA_CHECK(cudaEventDestroy(g->bc_join));
    if (g->wire) TB_CUDA_CHECK(cudaFree(g->wire));
    if (g->host) TB_CUDA_CHECK(cudaFreeHost(g->host));
    if (g->up) TB_CUDA_CHECK(cudaStreamDestroy(g->up));
    TB_CUDA_CHECK(cudaStreamDestroy(g->comm));
    tb_bucket_tracker_free(&g->tr);
    free(g->b);
    free(g->launch);
    free(g->deferred);
    free(g->queue);
    free(g->ready);
    free(g->down);
    free(g->start);
    free(g->end);
    free(g->rtime);
    free(g);
}

int tb_grad_sync_dev_bucket_count(const tb_grad_sync_dev *g) { return g->nb; }

void tb_grad_sync_dev_bucket(const tb_grad_sync_dev *g, int i, size_t *offset, size_t *count) {
    *offset = g->b[i].offset;
    *count = g->b[i].count;
}

int tb_grad_sync_dev_staged(const tb_grad_sync_dev *g) { return g->o.nccl == NULL; }
size_t tb_grad_sync_dev_device_bytes(const tb_grad_sync_dev *g) { return g->wire ? g->o.count * 2 : 0; }
void *tb_grad_sync_dev_stream(const tb_grad_sync_dev *g) { return (void *)g->comm; }

/* ---- a step ------------------------------------------------------------------------- */

void tb_grad_sync_dev_bcast(tb_grad_sync_dev *g, void *buf, size_t count, tb_dev_type t, int root) {
    TB_ASSERT(g->o.nccl != NULL);
    TB_CUDA_CHECK(cudaEventRecord(g->bc_fork, g->compute));
    TB_CUDA_CHECK(cudaStreamWaitEvent(g->comm, g->bc_fork, 0));
    tb_nccl_bcast(g->o.nccl, buf, count, t, root, g->comm);
    TB_CUDA_CHECK(cudaEventRecord(g->bc_join, g->comm));
    TB_CUDA_CHECK(cudaStreamWaitEvent(g->compute, g->bc_join, 0));
}

void tb_grad_sync_dev_begin(tb_grad_sync_dev *g, int64_t step, int slot) {
    TB_ASSERT(slot >= 0 && slot < g->o.slots);
    tb_bucket_tracker_begin(&g->tr);
    g->step = step;
    g->slot = slot;
    g->ndeferred = 0;
    g->launched = 0;
    if (g->have_thread) {
        pthread_mutex_lock(&g->mu);
        TB_ASSERT(g->qhead == g->qtail);
        g->qhead = g->qtail = 0;
        g->uploaded = 0;
        g->busy = 0;
        g->first_start = 0;
        g->t_begin = tb_now();
        pthread_mutex_unlock(&g->mu);
    }
}

/* Bucket i goes to communication: the communication stream waits for its
 * gradients (the event recorded now on the compute stream, after the ops
 * that produced them were queued). */
static void launch(tb_grad_sync_dev *g, int i) {
    const tb_bucket *bk = &g->b[i];
    float *src = (float *)g->o.grads + bk->offset;
    uint16_t *w = g->wire ? g->wire + bk->offset : NULL;
    int cap = capturing(g->compute);
    size_t k = (size_t)g->slot * (size_t)g->nb + (size_t)i;
    if (g->o.nccl) record_timing(g->rtime[k], g->compute, cap);
    TB_CUDA_CHECK(cudaEventRecord(g->ready[i], g->compute));
    TB_CUDA_CHECK(cudaStreamWaitEvent(g->comm, g->ready[i], 0));
    g->launched++;
    if (!g->o.nccl) { /* MPI: down into pinned memory, then the staging thread */
        if (cap) TB_FATAL("the MPI gradient path cannot run inside a CUDA graph capture");
        void *h = (char *)g->host + bk->offset * wire_elem(g);
        if (w) {
            tb_comm_cast_f32_to_bf16(src, w, bk->count, g->comm);
            TB_CUDA_CHECK(cudaMemcpyAsync(h, w, bk->count * 2, cudaMemcpyDeviceToHost, g->comm));
        } else {
            TB_CUDA_CHECK(cudaMemcpyAsync(h, src, bk->count * 4, cudaMemcpyDeviceToHost, g->comm));
        }
        TB_CUDA_CHECK(cudaEventRecord(g->down[i], g->comm));
        pthread_mutex_lock(&g->mu);
        g->queue[g->qtail++] = i;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        return;
    }
    record_timing(g->start[k], g->comm, cap);
    if (w) {
        tb_comm_cast_f32_to_bf16(src, w, bk->count, g->comm);
        tb_nccl_allreduce_sum(g->o.nccl, w, w, bk->count, TB_DEV_BF16, g->comm);
        tb_comm_cast_bf16_to_f32(w, src, bk->count, g->comm);
    } else {
        tb_nccl_allreduce_sum(g->o.nccl, src, src, bk->count, TB_DEV_F32, g->comm);
    }
    record_timing(g->end[k], g->comm, cap);
    if (g->o.watch && !cap) {
        char what[48];
        snprintf(what, sizeof what, "NCCL all-reduce of bucket %d", i);
        tb_dev_watch_push(g->end[k], g->comm, g->step, what);
    }
}

void tb_grad_sync_dev_ready(void *arg, size_t offset, size_t count) {
    tb_grad_sync_dev *g = arg;
    int n = tb_bucket_tracker_ready(&g->tr, offset, count, g->launch);
    for (int j = 0; j < n; j++) {
        if (g->o.overlap) launch(g, g->launch[j]);
        else g->deferred[g->ndeferred++] = g->launch[j];
    }
}

int tb_grad_sync_dev_launched(const tb_grad_sync_dev *g) { return g->launched; }

void tb_grad_sync_dev_finish(tb_grad_sync_dev *g, double *host_wait_s) {
    size_t missing = 0;
    int bad = tb_bucket_tracker_incomplete(&g->tr, &missing);
    if (bad >= 0)
        TB_FATAL("gradient bucket %d [%zu, +%zu) was never completed by backward (%zu left)", bad,
                 g->b[bad].offset, g->b[bad].count, missing);
    for (int j = 0; j < g->ndeferred; j++) launch(g, g->deferred[j]);
    g->ndeferred = 0;
    TB_ASSERT(g->launched == g->nb && g->tr.next == -1);
    double waited = 0;
    if (g->o.nccl) {
        TB_CUDA_CHECK(cudaEventRecord(g->done, g->comm));
    } else {
        /* `done` is recorded by the staging thread after the last upload is
         * queued; a stream may wait only on an event already recorded */
        double t0 = tb_now();
        pthread_mutex_lock(&g->mu);
        while (g->uploaded < g->nb) pthread_cond_wait(&g->cv, &g->mu);
        g->qhead = g->qtail = 0;
        pthread_mutex_unlock(&g->mu);
        waited = tb_now() - t0;
    }
    TB_CUDA_CHECK(cudaStreamWaitEvent(g->compute, g->done, 0));
    if (host_wait_s) *host_wait_s = waited;
}

int tb_grad_sync_dev_timing_events(tb_grad_sync_dev *g, int slot, void **events) {
    if (!g->o.nccl) return 0;
    if (events)
        for (int i = 0; i < g->nb; i++) {
            size_t k = (size_t)slot * (size_t)g->nb + (size_t)i;
            events[3 * i] = (void *)g->rtime[k];
            events[3 * i + 1] = (void *)g->start[k];
            events[3 * i + 2] = (void *)g->end[k];
        }
    return 3 * g->nb;
}

int tb_grad_sync_dev_bucket_times(tb_grad_sync_dev *g, int slot, void *ref_event, double *ready, double *start,
                                  double *end) {
    if (!g->o.nccl) return 0;
    for (int i = 0; i < g->nb; i++) {
        size_t k = (size_t)slot * (size_t)g->nb + (size_t)i;
        float r = 0, s = 0, e = 0;
        if (cudaEventElapsedTime(&r, (cudaEvent_t)ref_event, g->rtime[k]) != cudaSuccess ||
            cudaEventElapsedTime(&s, (cudaEvent_t)ref_event, g->start[k]) != cudaSuccess ||
            cudaEventElapsedTime(&e, (cudaEvent_t)ref_event, g->end[k]) != cudaSuccess) {
            (void)cudaGetLastError(); /* a report: the caller drops the sample, the run goes on */
            return -1;
        }
        ready[i] = r * 1e-3;
        start[i] = s * 1e-3;
        end[i] = e * 1e-3;
    }
    return g->nb;
}

void tb_grad_sync_dev_stats(tb_grad_sync_dev *g, int slot, void *ref_event, tb_grad_sync_step *st) {
    memset(st, 0, sizeof *st);
    st->buckets = g->nb;
    st->bytes = (double)g->o.count * (double)wire_elem(g);
    if (!g->o.nccl) {
        pthread_mutex_lock(&g->mu);
        st->busy_s = g->busy;
        st->first_start_s = g->first_start > 0 ? g->first_start - g->t_begin : 0;
        pthread_mutex_unlock(&g->mu);
        return;
    }
    double first = -1;
    for (int i = 0; i < g->nb; i++) {
        size_t k = (size_t)slot * (size_t)g->nb + (size_t)i;
        float ms = 0;
        TB_CUDA_CHECK(cudaEventElapsedTime(&ms, g->start[k], g->end[k]));
        st->busy_s += ms * 1e-3;
        if (ref_event) {
            float f = 0;
            TB_CUDA_CHECK(cudaEventElapsedTime(&f, (cudaEvent_t)ref_event, g->start[k]));
            if (first < 0 || f < first) first = f;
        }
    }
    st->first_start_s = first > 0 ? first * 1e-3 : 0;
}
