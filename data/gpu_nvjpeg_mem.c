/* gpu_nvjpeg_mem.c - stream-ordered device memory and a pinned block cache
 * for the nvJPEG decoder (see gpu_nvjpeg_mem.h). */
#include "data/gpu_nvjpeg_mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_check.h"
#include "core/log.h"

#define PIN_MIN_SHIFT 16 /* 64 KiB */
#define PIN_MAX_BLOCKS 256

typedef struct {
    void *p;
    size_t cap;                /* its size class */
    cudaEvent_t freed;         /* recorded on the freeing stream */
    int in_use;
} pin_block;

struct tb_nvj_mem {
    int device;
    cudaMemPool_t pool;        /* NULL: no pools on this device */
    atomic_llong dev_bytes;    /* without a pool: bytes allocated */
    atomic_llong growths, syncs;
    pthread_mutex_t mu;        /* the pinned cache (nvJPEG may call from its own threads) */
    pin_block pin[PIN_MAX_BLOCKS];
    int npin;
    atomic_llong pinned_bytes;
};

tb_nvj_mem *tb_nvj_mem_create(int device) {
    tb_nvj_mem *m = calloc(1, sizeof *m);
    if (!m) TB_FATAL("out of host memory");
    m->device = device;
    pthread_mutex_init(&m->mu, NULL);
    int pools = 0;
    TB_CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
    if (pools) {
        struct cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.handleTypes = cudaMemHandleTypeNone;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = device;
        TB_CUDA_CHECK(cudaMemPoolCreate(&m->pool, &props));
        /* keep what was freed: the next batch's buffers come from the cache */
        uint64_t never = UINT64_MAX;
        TB_CUDA_CHECK(cudaMemPoolSetAttribute(m->pool, cudaMemPoolAttrReleaseThreshold, &never));
    }
    return m;
}

void tb_nvj_mem_destroy(tb_nvj_mem *m) {
    if (!m) return;
    for (int i = 0; i < m->npin; i++) {
        if (m->pin[i].in_use) TB_FATAL("nvJPEG decoder: a pinned block of %zu bytes was not given back", m->pin[i].cap);
        TB_CUDA_CHECK(cudaEventSynchronize(m->pin[i].freed));
        TB_CUDA_CHECK(cudaEventDestroy(m->pin[i].freed));
        TB_CUDA_CHECK(cudaFreeHost(m->pin[i].p));
    }
    if (m->pool) TB_CUDA_CHECK(cudaMemPoolDestroy(m->pool));
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void *tb_nvj_dev_alloc(tb_nvj_mem *m, size_t bytes, cudaStream_t s) {
    void *p = NULL;
    cudaError_t e;
    if (bytes == 0) bytes = 1;
    if (m->pool) {
        size_t before = 0, after = 0;
        cudaMemPoolGetAttribute(m->pool, cudaMemPoolAttrReservedMemCurrent, &before);
        e = cudaMallocFromPoolAsync(&p, bytes, m->pool, s);
        cudaMemPoolGetAttribute(m->pool, cudaMemPoolAttrReservedMemCurrent, &after);
        if (after > before) atomic_fetch_add(&m->growths, 1);
    } else {
        e = cudaMalloc(&p, bytes);
        if (e == cudaSuccess) {
            atomic_fetch_add(&m->dev_bytes, (long long)bytes);
            atomic_fetch_add(&m->growths, 1);
        }
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is the caller's message */
        return NULL;
    }
    return p;
}

void tb_nvj_dev_free(tb_nvj_mem *m, void *p, size_t bytes, cudaStream_t s) {
    if (!p) return;
    if (m->pool) {
        TB_CUDA_CHECK(cudaFreeAsync(p, s));
        return;
    }
    /* no pools: the stream's work that uses p ends first, then cudaFree (which may wait for the device) */
    TB_CUDA_CHECK(cudaStreamSynchronize(s));
    TB_CUDA_CHECK(cudaFree(p));
    atomic_fetch_sub(&m->dev_bytes, (long long)(bytes ? bytes : 1));
    atomic_fetch_add(&m->syncs, 1);
}

static size_t size_class(size_t bytes) {
    size_t c = (size_t)1 << PIN_MIN_SHIFT;
    while (c < bytes) c <<= 1;
    return c;
}

void *tb_nvj_pinned_alloc(tb_nvj_mem *m, size_t bytes) {
    size_t cap = size_class(bytes);
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->npin; i++) {
        pin_block *b = &m->pin[i];
        if (!b->in_use && b->cap == cap) {
            cudaError_t q = cudaEventQuery(b->freed);
            if (q == cudaErrorNotReady) {
                (void)cudaGetLastError(); /* not an error: a later launch check must not read it */
                continue;
            }
            TB_CUDA_CHECK(q);
            b->in_use = 1;
            pthread_mutex_unlock(&m->mu);
            return b->p;
        }
    }
    if (m->npin == PIN_MAX_BLOCKS) TB_FATAL("nvJPEG decoder: more than %d pinned blocks in use", PIN_MAX_BLOCKS);
    pin_block *b = &m->pin[m->npin];
    if (cudaHostAlloc(&b->p, cap, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        pthread_mutex_unlock(&m->mu);
        return NULL;
    }
    TB_CUDA_CHECK(cudaEventCreateWithFlags(&b->freed, cudaEventDisableTiming));
    b->cap = cap;
    b->in_use = 1;
    m->npin++;
    atomic_fetch_add(&m->pinned_bytes, (long long)cap);
    atomic_fetch_add(&m->growths, 1);
    pthread_mutex_unlock(&m->mu);
    return b->p;
}

void tb_nvj_pinned_free(tb_nvj_mem *m, void *p, cudaStream_t s) {
    if (!p) return;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->npin; i++)
        if (m->pin[i].p == p) {
            if (!m->pin[i].in_use) TB_FATAL("nvJPEG decoder: a pinned block freed twice");
            /* reused once the stream's work queued so far (which may read it) is done */
            TB_CUDA_CHECK(cudaEventRecord(m->pin[i].freed, s));
            m->pin[i].in_use = 0;
            pthread_mutex_unlock(&m->mu);
            return;
        }
    pthread_mutex_unlock(&m->mu);
    TB_FATAL("nvJPEG decoder: pinned memory freed that the cache did not hand out");
}

void tb_nvj_mem_counts(const tb_nvj_mem *m, int64_t *device_bytes, int64_t *pinned_bytes, int64_t *growths,
                       int64_t *syncs) {
    tb_nvj_mem *mm = (tb_nvj_mem *)m; /* atomics and a pool attribute: nothing changes */
    int64_t dev = atomic_load(&mm->dev_bytes);
    if (m->pool) {
        size_t reserved = 0;
        if (cudaMemPoolGetAttribute(m->pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess)
            dev = (int64_t)reserved;
        else
            (void)cudaGetLastError();
    }
    if (device_bytes) *device_bytes = dev;
    if (pinned_bytes) *pinned_bytes = atomic_load(&mm->pinned_bytes);
    if (growths) *growths = atomic_load(&mm->growths);
    if (syncs) *syncs = atomic_load(&mm->syncs);
}

const char *tb_nvj_mem_describe(const tb_nvj_mem *m) {
    return m->pool ? "stream-ordered memory pool, pinned block cache"
                   : "cudaMalloc (this device has no memory pools), pinned block cache";
}

static int dev_malloc_v2(void *ctx, void **ptr, size_t size, cudaStream_t stream) {
    *ptr = tb_nvj_dev_alloc(ctx, size, stream);
    return *ptr ? 0 : 1;
}

static int dev_free_v2(void *ctx, void *ptr, size_t size, cudaStream_t stream) {
    tb_nvj_dev_free(ctx, ptr, size, stream);
    return 0;
}

static int pinned_malloc_v2(void *ctx, void **ptr, size_t size, cudaStream_t stream) {
    (void)stream;
    *ptr = tb_nvj_pinned_alloc(ctx, size);
    return *ptr ? 0 : 1;
}

static int pinned_free_v2(void *ctx, void *ptr, size_t size, cudaStream_t stream) {
    (void)size;
    tb_nvj_pinned_free(ctx, ptr, stream);
    return 0;
}

nvjpegDevAllocatorV2_t tb_nvj_dev_allocator(tb_nvj_mem *m) {
    nvjpegDevAllocatorV2_t a = {dev_malloc_v2, dev_free_v2, m};
    return a;
}

nvjpegPinnedAllocatorV2_t tb_nvj_pinned_allocator(tb_nvj_mem *m) {
    nvjpegPinnedAllocatorV2_t a = {pinned_malloc_v2, pinned_free_v2, m};
    return a;
}
