/* gpu_nvjpeg_mem.h - the GPU decode path's memory without implicit device
 * synchronisation (data/gpu_decode_nvjpeg.c; internal to the nvJPEG path).
 *
 * cudaMalloc, cudaFree, cudaHostAlloc and cudaFreeHost may each wait for
 * the whole device: a decoder that grows a buffer in the middle of training
 * stalls the training step's stream too. So:
 *   - device memory comes from a memory pool of the decoder's own
 *     (cudaMemPoolCreate, release threshold: never) with
 *     cudaMallocFromPoolAsync / cudaFreeAsync on the decoder's stream:
 *     ordered on that stream, no device-wide wait, freed memory cached for
 *     the next allocation; where the device has no pools, cudaMalloc and
 *     (after the stream is idle) cudaFree, counted as device syncs;
 *   - pinned host memory is cached by size class (powers of two from
 *     64 KiB): a freed block waits for an event recorded on the freeing
 *     stream and is handed out again once that completed; new blocks
 *     (cudaHostAlloc) only when no cached one fits, counted as growths.
 * nvJPEG's own buffers go through the same (nvjpegCreateExV2 with the
 * allocators below), so after the first batches a decoder allocates
 * nothing. The bytes held are counted for the memory checks. */
#ifndef TB_GPU_NVJPEG_MEM_H
#define TB_GPU_NVJPEG_MEM_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

typedef struct tb_nvj_mem tb_nvj_mem;

/* For device `device` (current on the calling thread). */
tb_nvj_mem *tb_nvj_mem_create(int device);
/* After every stream that used it is idle. */
void tb_nvj_mem_destroy(tb_nvj_mem *m);
/* Stream-ordered device memory; NULL when out of memory. */
void *tb_nvj_dev_alloc(tb_nvj_mem *m, size_t bytes, cudaStream_t s);
void tb_nvj_dev_free(tb_nvj_mem *m, void *p, size_t bytes, cudaStream_t s);
/* Pinned host memory, usable by the host at once; freed blocks are reused
 * once the work queued on s before the free has completed. */
void *tb_nvj_pinned_alloc(tb_nvj_mem *m, size_t bytes);
void tb_nvj_pinned_free(tb_nvj_mem *m, void *p, cudaStream_t s);
/* Device bytes reserved (pool) or allocated, pinned bytes held (cached
 * blocks included), allocations that reached the driver (the pool grew, a
 * new pinned block), and device-wide waits the no-pool path made. */
void tb_nvj_mem_counts(const tb_nvj_mem *m, int64_t *device_bytes, int64_t *pinned_bytes, int64_t *growths,
                       int64_t *syncs);
/* "stream-ordered pool" or "cudaMalloc (no memory pools on this device)" */
const char *tb_nvj_mem_describe(const tb_nvj_mem *m);
/* nvJPEG's allocator tables over m. */
nvjpegDevAllocatorV2_t tb_nvj_dev_allocator(tb_nvj_mem *m);
nvjpegPinnedAllocatorV2_t tb_nvj_pinned_allocator(tb_nvj_mem *m);

#endif
