/* cuda_memory.c - the CUDA backend's device memory (see cuda_backend.c):
 * cudaMalloc/cudaFree with a table of live allocations (bytes in use, peak),
 * the grow-only workspaces and scratch buffers the ops share, and the SGD
 * segment table on the device. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/cuda_internal.h"

/* ---- memory accounting --------------------------------------------------------------- */

static size_t slot_of(const cu_state *st, const void *p) {
    uintptr_t h = (uintptr_t)p >> 8; /* cudaMalloc returns 256-byte aligned pointers */
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ULL;
    return (size_t)(h % st->nslots);
}

static void track_grow(cu_state *st);

static void track_add(cu_state *st, void *p, size_t bytes) {
    pthread_mutex_lock(&st->lock);
    if ((st->used_slots + 1) * 2 > st->nslots) track_grow(st);
    size_t i = slot_of(st, p);
    while (st->slots[i].p) i = (i + 1) % st->nslots;
    st->slots[i].p = p;
    st->slots[i].bytes = bytes;
    st->used_slots++;
    st->in_use += bytes;
    if (st->in_use > st->peak) st->peak = st->in_use;
    pthread_mutex_unlock(&st->lock);
}

static void track_grow(cu_state *st) { /* called with the lock held */
    size_t old_n = st->nslots;
    cu_alloc_slot *old = st->slots;
    st->nslots = old_n ? 2 * old_n : 1024;
    st->slots = calloc(st->nslots, sizeof *st->slots);
    if (!st->slots) TB_FATAL("out of host memory for the allocation table");
    for (size_t j = 0; j < old_n; j++) {
        if (!old[j].p) continue;
        size_t i = slot_of(st, old[j].p);
        while (st->slots[i].p) i = (i + 1) % st->nslots;
        st->slots[i] = old[j];
    }
    free(old);
}

/* Removes p (backward-shift deletion keeps the probe chains whole). */
static size_t track_remove(cu_state *st, void *p) {
    pthread_mutex_lock(&st->lock);
    size_t i = st->nslots ? slot_of(st, p) : 0;
    while (st->nslots && st->slots[i].p && st->slots[i].p != p) i = (i + 1) % st->nslots;
    if (!st->nslots || st->slots[i].p != p) {
        pthread_mutex_unlock(&st->lock);
        TB_FATAL("cuda release: %p was not allocated by this backend", p);
    }
    size_t bytes = st->slots[i].bytes;
    st->slots[i].p = NULL;
    size_t j = i;
    for (;;) {
        j = (j + 1) % st->nslots;
        if (!st->slots[j].p) break;
        size_t home = slot_of(st, st->slots[j].p);
        /* move j back into the hole at i unless its home lies in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            st->slots[i] = st->slots[j];
            st->slots[j].p = NULL;
            i = j;
        }
    }
    st->used_slots--;
    st->in_use -= bytes;
    pthread_mutex_unlock(&st->lock);
    return bytes;
}

void *cu_malloc(cu_state *st, size_t bytes, const char *what) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* clear it: out of memory is not sticky */
        size_t fr = 0, tot = 0;
        (void)cudaMemGetInfo(&fr, &tot);
        tb_die("cuda backend: cannot allocate %.1f MiB for %s (%s): %.1f MiB in use by "
               "trainbench, %.1f MiB free of %.1f MiB on the device; use a smaller --batch-size",
               (double)bytes / 1048576.0, what, cudaGetErrorString(e),
               (double)st->in_use / 1048576.0, (double)fr / 1048576.0, (double)tot / 1048576.0);
    }
    track_add(st, p, bytes);
    return p;
}

void cu_free(cu_state *st, void *p) {
    if (!p) return;
    track_remove(st, p);
    TB_CUDA_CHECK(cudaFree(p));
}

/* 1 while the compute stream is being captured (or its capture was invalidated). */
static int st_capturing(const cu_state *st) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    TB_CUDA_CHECK(cudaStreamIsCapturing(st->stream, &cs));
    return cs != cudaStreamCaptureStatusNone;
}

void *cu_workspace(cu_state *st, size_t bytes) {
    if (bytes <= st->ws_bytes) return st->ws;
    if (st_capturing(st))
        TB_FATAL("cuda: growing the convolution workspace to %.1f MiB inside a CUDA graph capture: run one "
                 "step eagerly at this batch size before capturing",
                 (double)bytes / 1048576.0);
    TB_CUDA_CHECK(cudaStreamSynchronize(st->stream)); /* nothing may still use the old one */
    if (st->side) TB_CUDA_CHECK(cudaStreamSynchronize(st->side));
    cu_free(st, st->ws);
    st->ws = cu_malloc(st, bytes, "the convolution workspace");
    st->ws_bytes = bytes;
    if (st->side) { /* TB_WGRAD_STREAM=on: the other stream's, as large (cuda_branch.c) */
        cu_free(st, st->side_ws);
        st->side_ws = cu_malloc(st, bytes, "the second stream's convolution workspace");
        st->side_ws_bytes = bytes;
    }
    return st->ws;
}

void *cu_find_workspace(cu_state *st, size_t *bytes) {
    if (!st->find_ws) {
        size_t fr = 0, tot = 0;
        TB_CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
        size_t want = st->ws_limit;
        if (want > fr / 2) want = fr / 2; /* leave room for what comes next */
        st->find_ws = cu_malloc(st, want, "the algorithm search workspace");
        st->find_ws_bytes = want;
    }
    *bytes = st->find_ws_bytes;
    return st->find_ws;
}

void cu_end_planning(cu_state *st) {
    if (!st->find_ws) return;
    /* A plan made in a forward pass that ran no conv after it (the last
     * conv of an evaluation at a new batch size) leaves the Find workspace
     * for the next conv call, which may be inside the next step's CUDA
     * graph capture: freeing it there would synchronize the capturing
     * stream and end the job. It waits for the next eager conv call. */
    if (st_capturing(st)) return;
    TB_CUDA_CHECK(cudaStreamSynchronize(st->stream));
    cu_free(st, st->find_ws);
    st->find_ws = NULL;
    st->find_ws_bytes = 0;
}

void *cu_scratch(tb_backend *be, size_t bytes) {
    cu_state *st = cu_state_of(be);
    if (bytes <= st->scratch_bytes) return st->scratch;
    cu_not_capturing(be, "growing the kernels' scratch");
    TB_CUDA_CHECK(cudaStreamSynchronize(st->stream));
    cu_free(st, st->scratch);
    st->scratch = cu_malloc(st, bytes, "the kernels' scratch");
    st->scratch_bytes = bytes;
    return st->scratch;
}

void *cu_loss_scratch(tb_backend *be, int N) {
    cu_state *st = cu_state_of(be);
    if ((size_t)N <= st->loss_rows) return st->loss_scratch;
    cu_not_capturing(be, "growing the loss scratch");
    TB_CUDA_CHECK(cudaStreamSynchronize(st->stream));
    cu_free(st, st->loss_scratch);
    size_t bytes = 64 + (size_t)N * sizeof(double); /* counter, then the rows */
    st->loss_scratch = cu_malloc(st, bytes, "the loss scratch");
    TB_CUDA_CHECK(cudaMemsetAsync(st->loss_scratch, 0, bytes, st->stream));
    st->loss_rows = (size_t)N;
    return st->loss_scratch;
}

const cu_sgd_seg *cu_sgd_segments(tb_backend *be, const tb_sgd_segment *segs, int nseg,
                                  size_t *total) {
    cu_state *st = cu_state_of(be);
    size_t sum = 0;
    for (int i = 0; i < nseg; i++) sum += segs[i].count;
    *total = sum;
    if (nseg == st->seg_n && nseg > 0 && memcmp(segs, st->seg_host, (size_t)nseg * sizeof *segs) == 0)
        return st->seg_dev;
    cu_not_capturing(be, "uploading a new SGD segment table");
    if (nseg > st->seg_cap) {
        TB_CUDA_CHECK(cudaStreamSynchronize(st->stream));
        free(st->seg_host);
        cu_free(st, st->seg_dev);
        st->seg_cap = nseg;
        st->seg_host = malloc((size_t)nseg * sizeof *st->seg_host);
        if (!st->seg_host) TB_FATAL("out of host memory");
        st->seg_dev = cu_malloc(st, (size_t)nseg * sizeof(cu_sgd_seg), "the SGD segment table");
    }
    cu_sgd_seg *h = malloc((size_t)(nseg ? nseg : 1) * sizeof *h);
    if (!h) TB_FATAL("out of host memory");
    size_t start = 0;
    for (int i = 0; i < nseg; i++) {
        h[i].offset = segs[i].offset;
        h[i].start = start;
        h[i].count = segs[i].count;
        h[i].weight_decay = (float)segs[i].weight_decay;
        start += segs[i].count;
    }
    /* a synchronous copy: h is freed below, and this runs once per table */
    TB_CUDA_CHECK(cudaMemcpyAsync(st->seg_dev, h, (size_t)nseg * sizeof *h,
                                  cudaMemcpyHostToDevice, st->stream));
    TB_CUDA_CHECK(cudaStreamSynchronize(st->stream));
    free(h);
    if (nseg) memcpy(st->seg_host, segs, (size_t)nseg * sizeof *segs);
    st->seg_n = nseg;
    return st->seg_dev;
}
