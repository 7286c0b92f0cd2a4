/* probe_gpu.c - the GPU half of `trainbench probe` (see probe_gpu.h).
 *
 * Method: every timing is the median of repeated runs measured with CUDA
 * events on one stream after warm-up runs; copies use pinned host memory
 * (cudaHostAlloc); GEMMs run on random inputs (zeros run faster than real
 * data on tensor cores), through cublasGemmEx with an explicit compute
 * type: CUBLAS_COMPUTE_32F (true fp32, no TF32), CUBLAS_COMPUTE_32F_FAST_TF32,
 * and bf16 inputs/outputs with fp32 accumulation. */
#include "src/device/probe_gpu.h"

#include <cudnn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef TB_HAVE_NCCL
#include <nccl.h>
#endif

#include "core/cublas_check.h"
#include "core/cuda_check.h"
#include "core/log.h"
#include "core/rng.h"

void tb_probe_gpu_versions(tb_probe_gpu *p) {
    p->built_with_cuda = 1;
    int rt = 0, drv = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0; /* 0: no driver installed */
    p->runtime_version = rt;
    p->driver_version = drv;
    p->nlibs = 0;
    tb_version_judge(TB_LIB_DRIVER, CUDART_VERSION, drv, &p->libs[p->nlibs++]);
    tb_version_judge(TB_LIB_CUDNN, CUDNN_VERSION, (int)cudnnGetVersion(), &p->libs[p->nlibs++]);
    tb_version_judge(TB_LIB_CUDNN_CUDART, CUDART_VERSION, (int)cudnnGetCudartVersion(), &p->libs[p->nlibs++]);
    int maj = 0, min = 0, pat = 0; /* 0: cuBLAS could not be loaded, or would not say */
    char why[TB_CUBLAS_WHY_MAX] = "";
    int have = tb_cublas_load(why, sizeof why) == 0;
    if (!have || tb_cublas.cublasGetProperty(MAJOR_VERSION, &maj) != CUBLAS_STATUS_SUCCESS ||
        tb_cublas.cublasGetProperty(MINOR_VERSION, &min) != CUBLAS_STATUS_SUCCESS ||
        tb_cublas.cublasGetProperty(PATCH_LEVEL, &pat) != CUBLAS_STATUS_SUCCESS)
        maj = min = pat = 0;
    tb_lib_check *c = &p->libs[p->nlibs++];
    tb_version_judge(TB_LIB_CUBLAS, CUBLAS_VERSION, maj * 10000 + min * 100 + pat, c);
    if (!have) snprintf(c->note, sizeof c->note, "%s", why);
    snprintf(p->cublas_path, sizeof p->cublas_path, "%s", tb_cublas_path());
#ifdef TB_HAVE_NCCL
    int nv = 0;
    if (ncclGetVersion(&nv) != ncclSuccess) nv = 0;
    tb_version_judge(TB_LIB_NCCL, NCCL_VERSION_CODE, nv, &p->libs[p->nlibs++]);
#endif
}

/* ---- timing helpers ---------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define TB_PROBE_MAX_REPS 64

/* Median of `reps` timed runs of op(ctx) after `warm` untimed ones, ms. */
static double median_ms(cudaStream_t s, int warm, int reps, void (*op)(void *), void *ctx) {
    cudaEvent_t ev[TB_PROBE_MAX_REPS + 1];
    if (reps > TB_PROBE_MAX_REPS) reps = TB_PROBE_MAX_REPS;
    for (int i = 0; i <= reps; i++) TB_CUDA_CHECK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < warm; i++) op(ctx);
    TB_CUDA_CHECK(cudaEventRecord(ev[0], s));
    for (int i = 0; i < reps; i++) {
        op(ctx);
        TB_CUDA_CHECK(cudaEventRecord(ev[i + 1], s));
    }
    TB_CUDA_CHECK(cudaEventSynchronize(ev[reps]));
    double t[TB_PROBE_MAX_REPS];
    for (int i = 0; i < reps; i++) {
        float ms = 0;
        TB_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
        t[i] = ms;
    }
    for (int i = 0; i <= reps; i++) TB_CUDA_CHECK(cudaEventDestroy(ev[i]));
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
}

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
    enum cudaMemcpyKind kind;
    cudaStream_t s;
} copy_ctx;

static void do_copy(void *p) {
    copy_ctx *c = p;
    TB_CUDA_CHECK(cudaMemcpyAsync(c->dst, c->src, c->bytes, c->kind, c->s));
}

typedef struct {
    cublasHandle_t h;
    int n;
    const void *a, *b;
    void *c;
    cudaDataType_t ab_type, c_type;
    cublasComputeType_t compute;
} gemm_ctx;

static void do_gemm(void *p) {
    gemm_ctx *g = p;
    const float alpha = 1.0f, beta = 0.0f;
    TB_CUBLAS_CHECK(tb_cublas.cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &alpha, g->a, g->ab_type,
                                           g->n, g->b, g->ab_type, g->n, &beta, g->c, g->c_type, g->n, g->compute,
                                           CUBLAS_GEMM_DEFAULT));
}

/* float -> bfloat16 bits, round to nearest even (inputs are finite). */
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- the measurements ---------------------------------------------------------------- */

int tb_probe_gpu_measure(tb_probe_gpu *p, int device, int quick, char *err, size_t errlen) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        p->device_count = 0;
        snprintf(err, errlen, "no CUDA device visible: %s",
                 e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
        return -1;
    }
    p->device_count = count;
    if (device < 0 || device >= count) {
        snprintf(err, errlen, "--device %d: this host has %d CUDA device%s (0..%d)", device, count,
                 count > 1 ? "s" : "", count - 1);
        return -1;
    }
    if (tb_cublas_load(err, errlen) != 0) return -1; /* the GEMM ceilings' cuBLAS */
    p->device = device;
    TB_CUDA_CHECK(cudaSetDevice(device));
    struct cudaDeviceProp prop;
    TB_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    snprintf(p->name, sizeof p->name, "%s", prop.name);
    TB_CUDA_CHECK(cudaDeviceGetPCIBusId(p->bus_id, (int)sizeof p->bus_id, device));
    p->cc_major = prop.major;
    p->cc_minor = prop.minor;
    p->sms = prop.multiProcessorCount;
    p->mem_bytes = (double)prop.totalGlobalMem;
    p->l2_bytes = (double)prop.l2CacheSize;
    p->mem_bus_bits = prop.memoryBusWidth;
    int khz = 0;
    TB_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
    p->sm_clock_mhz_max = khz / 1000;
    TB_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device));
    p->mem_clock_mhz_max = khz / 1000;

    cudaStream_t s;
    TB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    /* pinned host <-> device, and device <-> device */
    const size_t sizes[TB_PROBE_NBW] = {(size_t)4 << 20, (size_t)256 << 20};
    size_t maxb = quick ? sizes[0] : sizes[1];
    void *host = NULL, *dev_a = NULL, *dev_b = NULL;
    TB_CUDA_CHECK(cudaHostAlloc(&host, maxb, cudaHostAllocDefault));
    TB_CUDA_CHECK(cudaMalloc(&dev_a, maxb));
    TB_CUDA_CHECK(cudaMalloc(&dev_b, maxb));
    memset(host, 0x5a, maxb);
    TB_CUDA_CHECK(cudaMemcpy(dev_b, host, maxb, cudaMemcpyHostToDevice));
    for (int i = 0; i < TB_PROBE_NBW; i++) {
        p->bw_bytes[i] = (double)sizes[i];
        p->h2d_ms[i] = p->d2h_ms[i] = -1;
        if (sizes[i] > maxb) continue;
        int reps = i == 0 ? 50 : 10;
        copy_ctx up = {dev_a, host, sizes[i], cudaMemcpyHostToDevice, s};
        copy_ctx down = {host, dev_a, sizes[i], cudaMemcpyDeviceToHost, s};
        p->h2d_ms[i] = median_ms(s, 3, reps, do_copy, &up);
        p->d2h_ms[i] = median_ms(s, 3, reps, do_copy, &down);
    }
    p->d2d_bytes = (double)maxb;
    copy_ctx dd = {dev_a, dev_b, maxb, cudaMemcpyDeviceToDevice, s};
    p->d2d_ms = median_ms(s, 3, 20, do_copy, &dd);
    TB_CUDA_CHECK(cudaFree(dev_a));
    TB_CUDA_CHECK(cudaFree(dev_b));
    TB_CUDA_CHECK(cudaFreeHost(host));

    /* GEMMs on random inputs */
    const int ns[TB_PROBE_NGEMM] = {4096, 8192};
    int nmax = quick ? ns[0] : ns[1];
    size_t elems = (size_t)nmax * (size_t)nmax;
    float *hf = malloc(elems * sizeof *hf);
    uint16_t *hb = malloc(elems * sizeof *hb);
    if (!hf || !hb) TB_FATAL("out of host memory for the probe's GEMM inputs");
    tb_rng r;
    tb_rng_seed(&r, 1234, 0);
    for (size_t i = 0; i < elems; i++) {
        hf[i] = (float)(2.0 * tb_rng_uniform(&r) - 1.0);
        hb[i] = to_bf16(hf[i]);
    }
    void *af, *bf, *cf, *ab, *bb, *cb;
    TB_CUDA_CHECK(cudaMalloc(&af, elems * 4));
    TB_CUDA_CHECK(cudaMalloc(&bf, elems * 4));
    TB_CUDA_CHECK(cudaMalloc(&cf, elems * 4));
    TB_CUDA_CHECK(cudaMalloc(&ab, elems * 2));
    TB_CUDA_CHECK(cudaMalloc(&bb, elems * 2));
    TB_CUDA_CHECK(cudaMalloc(&cb, elems * 2));
    TB_CUDA_CHECK(cudaMemcpy(af, hf, elems * 4, cudaMemcpyHostToDevice));
    TB_CUDA_CHECK(cudaMemcpy(ab, hb, elems * 2, cudaMemcpyHostToDevice));
    /* B: the same numbers in another order, so A != B */
    for (size_t i = 0; i < elems; i++) {
        hf[i] = -hf[elems - 1 - i];
        hb[i] = to_bf16(hf[i]);
    }
    TB_CUDA_CHECK(cudaMemcpy(bf, hf, elems * 4, cudaMemcpyHostToDevice));
    TB_CUDA_CHECK(cudaMemcpy(bb, hb, elems * 2, cudaMemcpyHostToDevice));
    free(hf);
    free(hb);
    cublasHandle_t h;
    TB_CUBLAS_CHECK(tb_cublas.cublasCreate(&h));
    TB_CUBLAS_CHECK(tb_cublas.cublasSetStream(h, s));
    TB_CUBLAS_CHECK(tb_cublas.cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    for (int k = 0; k < TB_PROBE_NGEMM; k++) {
        p->gemm_n[k] = ns[k];
        for (int q = 0; q < TB_PROBE_NPREC; q++) p->gemm_ms[q][k] = -1;
        if (ns[k] > nmax) continue;
        gemm_ctx g32 = {h, ns[k], af, bf, cf, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
        gemm_ctx gtf = {h, ns[k], af, bf, cf, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
        gemm_ctx gbf = {h, ns[k], ab, bb, cb, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F};
        int reps = k == 0 ? 20 : 8;
        p->gemm_ms[TB_PROBE_FP32][k] = median_ms(s, 2, reps, do_gemm, &g32);
        p->gemm_ms[TB_PROBE_TF32][k] = median_ms(s, 2, reps, do_gemm, &gtf);
        p->gemm_ms[TB_PROBE_BF16][k] = median_ms(s, 2, reps, do_gemm, &gbf);
    }
    TB_CUBLAS_CHECK(tb_cublas.cublasDestroy(h));
    void *bufs[] = {af, bf, cf, ab, bb, cb};
    for (int i = 0; i < 6; i++) TB_CUDA_CHECK(cudaFree(bufs[i]));
    TB_CUDA_CHECK(cudaStreamDestroy(s));
    return 0;
}
