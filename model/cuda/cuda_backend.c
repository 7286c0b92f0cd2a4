/* cuda_backend.c - the CUDA backend's table: device, memory, streams and
 * events, workspaces, handles (the counterpart of cpu/cpu_backend.c).
 *
 * One device per backend (opts->device), one non-blocking compute stream on
 * which every op is queued, a cuDNN and a cuBLASLt handle bound to it (and,
 * with TB_WGRAD_STREAM=on, a second stream for the convolutions' weight
 * gradients: cuda_branch.c).
 * Memory comes from cudaMalloc at set-up (the model and graph allocate
 * everything before the first step: no allocation inside a step); a table
 * of live allocations gives the bytes in use and the peak, beside
 * cudaMemGetInfo as a cross-check. The ops live in one file per family
 * (cuda_conv.c, cuda_bn.c, cuda_eltwise.cu, ...), declared in
 * cuda_internal.h. The allocation table, workspaces and scratch buffers are
 * in cuda_memory.c.
 */
#include "model/cuda/cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/cuda/cuda_internal.h"

/* cuBLASLt's workspace: 32 MiB, what NVIDIA recommends for Hopper. */
#define CU_LT_WS_BYTES ((size_t)32 << 20)
/* Default conv workspace limit: 1 GiB, at most an eighth of the device. */
#define CU_WS_LIMIT_DEFAULT ((size_t)1 << 30)

/* ---- helpers shared by the op files ------------------------------------------------ */

static int dtype_ok(tb_dtype d) { return d == TB_F32 || d == TB_BF16 || d == TB_F16; }

void cu_check(const tb_tensor *t, const char *op, const char *name) {
    if (!t) TB_FATAL("cuda %s: tensor %s is NULL", op, name);
    if (!dtype_ok(t->dtype) || (t->layout != TB_NCHW && t->layout != TB_NHWC))
        tb_die("cuda backend: %s: tensor %s is %s %s; the CUDA backend computes in float32, "
               "bfloat16 or float16, NCHW or NHWC",
               op, name, tb_dtype_name(t->dtype), tb_layout_name(t->layout));
    if (t->n < 0 || t->c < 0 || t->h < 0 || t->w < 0)
        TB_FATAL("cuda %s: tensor %s has a negative dimension [%d,%d,%d,%d]", op, name, t->n,
                 t->c, t->h, t->w);
    if (!t->data && tb_tensor_numel(t) > 0) TB_FATAL("cuda %s: tensor %s has no data", op, name);
}

void cu_check_same(const tb_tensor *a, const tb_tensor *b, const char *op, const char *na,
                   const char *nb) {
    if (a->n != b->n || a->c != b->c || a->h != b->h || a->w != b->w)
        TB_FATAL("cuda %s: %s is [%d,%d,%d,%d] but %s is [%d,%d,%d,%d]", op, na, a->n, a->c,
                 a->h, a->w, nb, b->n, b->c, b->h, b->w);
    if (a->dtype != b->dtype || a->layout != b->layout)
        TB_FATAL("cuda %s: %s is %s %s but %s is %s %s", op, na, tb_dtype_name(a->dtype),
                 tb_layout_name(a->layout), nb, tb_dtype_name(b->dtype),
                 tb_layout_name(b->layout));
}

cudnnDataType_t cu_cudnn_dtype(tb_dtype d) {
    return d == TB_F32 ? CUDNN_DATA_FLOAT : d == TB_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

cudaDataType_t cu_cuda_dtype(tb_dtype d) {
    return d == TB_F32 ? CUDA_R_32F : d == TB_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

void cu_not_capturing(tb_backend *be, const char *what) {
    enum cudaStreamCaptureStatus cs;
    TB_CUDA_CHECK(cudaStreamIsCapturing(cu_stream(be), &cs));
    if (cs != cudaStreamCaptureStatusNone)
        TB_FATAL("cuda: %s inside a CUDA graph capture: run one step eagerly at this batch size "
                 "before capturing",
                 what);
}

/* ---- memory and ordering ------------------------------------------------------------ */

static void *cuda_alloc(tb_backend *be, size_t bytes) {
    return cu_malloc(cu_state_of(be), bytes, "a tensor");
}

static void cuda_release(tb_backend *be, void *p) {
    cu_state *st = cu_state_of(be);
    if (!p) return;
    /* cudaFree waits for the device; the stream sync keeps that explicit */
    TB_CUDA_CHECK(cudaStreamSynchronize(st->stream));
    cu_free(st, p);
}

static void cuda_zero(tb_backend *be, void *p, size_t bytes) {
    if (bytes) TB_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cu_stream(be)));
}

/* Returns when src may be reused: a pageable source is staged by the
 * runtime before cudaMemcpyAsync returns; a pinned one is read later, so
 * then the copy is waited for. */
static void cuda_copy_h2d(tb_backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    TB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu_stream(be)));
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, src) != cudaSuccess) {
        (void)cudaGetLastError();
        at.type = cudaMemoryTypeUnregistered;
    }
    if (at.type == cudaMemoryTypeHost) TB_CUDA_CHECK(cudaStreamSynchronize(cu_stream(be)));
}

static void cuda_copy_d2h(tb_backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    TB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu_stream(be)));
    TB_CUDA_CHECK(cudaStreamSynchronize(cu_stream(be)));
}

static void cuda_copy_d2d(tb_backend *be, void *dst, const void *src, size_t bytes) {
    if (bytes)
        TB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu_stream(be)));
}

/* Everything queued on the compute stream (other streams order themselves
 * with events; a weight-gradient branch left open by an abandoned capture
 * is closed first: cuda_branch.c). The device being idle, a Find workspace left over from a
 * plan made in the last forward pass goes now (the trainer syncs before it
 * captures a CUDA graph: the replays would otherwise keep it for good). */
static void cuda_sync(tb_backend *be) {
    if (cu_state_of(be)->side) cu_branch_close(be);
    TB_CUDA_CHECK(cudaStreamSynchronize(cu_stream(be)));
    cu_end_planning(cu_state_of(be));
}

static void cuda_memory(tb_backend *be, tb_mem_info *out) {
    cu_state *st = cu_state_of(be);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&st->lock);
    out->in_use = st->in_use;
    out->peak = st->peak;
    pthread_mutex_unlock(&st->lock);
    out->device_total = st->total;
    out->device_free_start = st->free_start;
    size_t fr = 0, tot = 0;
    TB_CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    out->device_free_now = fr;
}

static void *cuda_host_alloc(tb_backend *be, size_t bytes) {
    TB_CUDA_CHECK(cudaSetDevice(cu_state_of(be)->device)); /* from any thread: no context made on device 0 */
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        tb_die("cuda backend: cannot pin %.1f MiB of host memory (%s); lower --prefetch or the "
               "batch size, or raise the locked-memory limit (ulimit -l)",
               (double)bytes / 1048576.0, cudaGetErrorString(e));
    }
    return p;
}

static void cuda_host_free(tb_backend *be, void *p) {
    TB_CUDA_CHECK(cudaSetDevice(cu_state_of(be)->device));
    if (p) TB_CUDA_CHECK(cudaFreeHost(p));
}

static cudaStream_t stream_of(tb_backend *be, tb_stream *s) {
    return s ? (cudaStream_t)s : cu_stream(be);
}

static void cuda_copy_h2d_async(tb_backend *be, void *dst, const void *src, size_t bytes,
                                tb_stream *s) {
    if (bytes)
        TB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_of(be, s)));
}

/* ---- streams and events ------------------------------------------------------------- */

static tb_stream *cuda_stream_create(tb_backend *be) {
    cu_state *st = cu_state_of(be);
    TB_CUDA_CHECK(cudaSetDevice(st->device));
    cudaStream_t s;
    TB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return (tb_stream *)s;
}

static void cuda_stream_destroy(tb_backend *be, tb_stream *s) {
    TB_CUDA_CHECK(cudaSetDevice(cu_state_of(be)->device));
    if (s) TB_CUDA_CHECK(cudaStreamDestroy((cudaStream_t)s));
}

static tb_event *cuda_event_create(tb_backend *be, int timing) {
    /* an event belongs to the calling thread's current device: make it ours
     * (comm/ may create events from its own thread) */
    TB_CUDA_CHECK(cudaSetDevice(cu_state_of(be)->device));
    cudaEvent_t e;
    TB_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    return (tb_event *)e;
}

static void cuda_event_destroy(tb_backend *be, tb_event *e) {
    TB_CUDA_CHECK(cudaSetDevice(cu_state_of(be)->device));
    if (e) TB_CUDA_CHECK(cudaEventDestroy((cudaEvent_t)e));
}

static void cuda_event_record(tb_backend *be, tb_event *e, tb_stream *s) {
    TB_CUDA_CHECK(cudaEventRecord((cudaEvent_t)e, stream_of(be, s)));
}

static void cuda_stream_wait(tb_backend *be, tb_stream *s, tb_event *e) {
    TB_CUDA_CHECK(cudaStreamWaitEvent(stream_of(be, s), (cudaEvent_t)e, 0));
}

static void cuda_event_wait(tb_backend *be, tb_event *e) {
    (void)be;
    TB_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)e));
}

static int cuda_event_done(tb_backend *be, tb_event *e) {
    (void)be;
    cudaError_t r = cudaEventQuery((cudaEvent_t)e);
    if (r == cudaSuccess) return 1;
    if (r == cudaErrorNotReady) {
        (void)cudaGetLastError(); /* not an error: clear it */
        return 0;
    }
    TB_CUDA_CHECK(r);
    return 0;
}

static double cuda_event_elapsed_ms(tb_backend *be, tb_event *a, tb_event *b) {
    (void)be;
    float ms = 0;
    TB_CUDA_CHECK(cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b));
    return ms;
}

static void cuda_stream_hold(tb_backend *be, tb_stream *s, double ms) { cu_hold_stream(stream_of(be, s), (float)ms); }

static void *cuda_native_stream(tb_backend *be, tb_stream *s) { return (void *)stream_of(be, s); }
static void *cuda_native_event(tb_backend *be, tb_event *e) {
    (void)be;
    return (void *)e;
}

static void cuda_destroy(tb_backend *be) {
    if (!be) return;
    cu_state *st = cu_state_of(be);
    if (st) {
        TB_CUDA_CHECK(cudaSetDevice(st->device));
        TB_CUDA_CHECK(cudaStreamSynchronize(st->stream));
        cu_end_planning(st);
        cu_branch_free(st);
        cu_fused_free(st); /* the fused plans (before the cuDNN handle goes), the plan cache */
        cu_linear_free(st);
        cu_bn_tune_free(st);
        cu_free(st, st->ws);
        cu_free(st, st->lt_ws);
        cu_free(st, st->scratch);
        cu_free(st, st->loss_scratch);
        cu_free(st, st->seg_dev);
        free(st->seg_host);
        if (st->used_slots)
            tb_warn("cuda backend: %zu allocations (%.1f MiB) still live at destroy",
                    st->used_slots, (double)st->in_use / 1048576.0);
        TB_CUBLAS_CHECK(tb_cublas.cublasLtDestroy(st->lt));
        TB_CUDNN_CHECK(cudnnDestroy(st->cudnn));
        TB_CUDA_CHECK(cudaStreamDestroy(st->stream));
        pthread_mutex_destroy(&st->lock);
        free(st->slots);
        free(st);
    }
    free(be);
}

/* ---- the constructor (device discovery: cuda_device.c) ------------------------------ */

void tb_cuda_bn_use_cudnn(tb_backend *be, int on) {
    cu_state_of(be)->bn_cudnn = on == 2 ? CU_BN_AUTO : on ? CU_BN_CUDNN : CU_BN_OWN;
}
void tb_cuda_pool_force(tb_backend *be, int flags) { cu_state_of(be)->pool_force = flags; }
int cu_pool_force_flags(tb_backend *be) { return cu_state_of(be)->pool_force; }

void tb_cuda_conv_api(tb_backend *be, int api) { cu_state_of(be)->conv_api = api; }
void tb_cuda_conv_pad(tb_backend *be, int mode) { cu_state_of(be)->conv_pad = mode; }
void tb_cuda_conv_pad_fill(tb_backend *be, float v) { cu_state_of(be)->conv_pad_fill = v; }

int cu_env_on_off(const char *name, int dflt, const char *what) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    if (strcmp(v, "on") == 0) return 1;
    if (strcmp(v, "off") == 0) return 0;
    tb_die("%s=%s: expected on or off (%s)", name, v, what);
}

/* TB_CONV_API: auto (unset or empty), graph or legacy. */
static int conv_api_from_env(void) {
    const char *v = getenv("TB_CONV_API");
    if (!v || !*v || strcmp(v, "auto") == 0) return TB_CUDA_CONV_AUTO;
    if (strcmp(v, "graph") == 0) return TB_CUDA_CONV_GRAPH;
    if (strcmp(v, "legacy") == 0) return TB_CUDA_CONV_LEGACY;
    tb_die("TB_CONV_API=%s: expected auto, graph or legacy (which cuDNN API runs the convolutions)", v);
}

/* TB_BN_KERNELS: auto (unset or empty: cuDNN's fused BatchNorm where it
 * takes the node, the own kernels elsewhere, and with autotune each node
 * cuDNN takes timed on both, cuda_bn_tune.c), cudnn (cuDNN's where it
 * takes the node, untimed) or own (the own kernels for every node): the
 * bench's A/B of the two. */
int cu_bn_kernels_from_env(void) {
    const char *v = getenv("TB_BN_KERNELS");
    if (!v || !*v || strcmp(v, "auto") == 0) return CU_BN_AUTO;
    if (strcmp(v, "cudnn") == 0) return CU_BN_CUDNN;
    if (strcmp(v, "own") == 0) return CU_BN_OWN;
    tb_die("TB_BN_KERNELS=%s: expected auto, cudnn or own (which kernels run the BatchNorms)", v);
}

static void version_str(char *buf, size_t len) {
    int rt = 0, drv = 0;
    (void)cudaRuntimeGetVersion(&rt);
    (void)cudaDriverGetVersion(&drv);
    size_t dn = cudnnGetVersion();
    size_t lt = tb_cublas.cublasLtGetVersion();
    snprintf(buf, len,
             "CUDA runtime %d.%d (driver supports %d.%d); cuDNN %zu.%zu.%zu (built with "
             "%d.%d.%d); cuBLASLt %zu.%zu.%zu (built with %d.%d.%d)",
             rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10, dn / 10000, dn % 10000 / 100,
             dn % 100, CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL, lt / 10000, lt % 10000 / 100,
             lt % 100, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
}

tb_backend *tb_cuda_backend_create(const tb_backend_opts *opts, char *err, size_t errlen) {
    char why[256];
    int count = tb_cuda_device_count(why, sizeof why);
    if (count <= 0) {
        snprintf(err, errlen, "--backend cuda: no usable CUDA device: %s", why);
        return NULL;
    }
    int dev = opts ? opts->device : 0;
    if (dev < 0 || dev >= count) {
        snprintf(err, errlen,
                 "--backend cuda: device %d asked for, but %d device%s visible (CUDA_VISIBLE_DEVICES "
                 "and ranks per node must agree)",
                 dev, count, count == 1 ? " is" : "s are");
        return NULL;
    }
    TB_CUDA_CHECK(cudaSetDevice(dev));
    struct cudaDeviceProp prop;
    TB_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    if (prop.major < 8) { /* the kernels are built for sm_80 and sm_90 */
        snprintf(err, errlen, "--backend cuda: %s is compute capability %d.%d; trainbench needs 8.0 "
                 "or newer (A100, H100, ...)", prop.name, prop.major, prop.minor);
        return NULL;
    }

    char lib[TB_CUBLAS_WHY_MAX];
    if (tb_cublas_load(lib, sizeof lib) != 0) { /* the linear layer's cuBLASLt, loaded here, not at start */
        snprintf(err, errlen, "the CUDA backend: %s", lib);
        return NULL;
    }

    cu_state *st = calloc(1, sizeof *st);
    tb_backend *be = calloc(1, sizeof *be);
    if (!st || !be) TB_FATAL("out of host memory");
    pthread_mutex_init(&st->lock, NULL);
    st->device = dev;
    st->tf32 = opts && opts->tf32;
    st->deterministic = opts && opts->deterministic;
    st->autotune = !(opts && opts->no_autotune);
    st->bn_cudnn = cu_bn_kernels_from_env();
    st->bn_mask = cu_bn_mask_from_env();
    st->convert_many = cu_convert_many_from_env();
    st->conv_api = conv_api_from_env();
    st->conv_pad = cu_conv_pad_from_env();
    st->sm_count = prop.multiProcessorCount;
    TB_CUDA_CHECK(cudaMemGetInfo(&st->free_start, &st->total));
    st->ws_limit = opts && opts->workspace_limit ? opts->workspace_limit : CU_WS_LIMIT_DEFAULT;
    if (!(opts && opts->workspace_limit) && st->ws_limit > st->total / 8) st->ws_limit = st->total / 8;
    TB_CUDA_CHECK(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
    cu_hold_load(); /* stream_hold's kernel: not loaded at a first hold after a barrier */
    TB_CUDNN_CHECK(cudnnCreate(&st->cudnn));
    TB_CUDNN_CHECK(cudnnSetStream(st->cudnn, st->stream));
    /* cuDNN 9 loads libcudnn_ops / libcudnn_cnn on first use: check them now,
     * so a missing or mismatched one is one line here, not a failure deep
     * inside the first convolution's plan */
    cudnnStatus_t vs = cudnnOpsVersionCheck();
    if (vs == CUDNN_STATUS_SUCCESS) vs = cudnnCnnVersionCheck();
    if (vs != CUDNN_STATUS_SUCCESS)
        tb_die("cuda backend: cuDNN %zu cannot use its sub-libraries (%s); put libcudnn_ops.so.9 "
               "and libcudnn_cnn.so.9 of the same cuDNN release as libcudnn.so.9 on "
               "LD_LIBRARY_PATH",
               cudnnGetVersion(), cudnnGetErrorString(vs));
    cu_branch_init(st, cu_branch_from_env());
    TB_CUBLAS_CHECK(tb_cublas.cublasLtCreate(&st->lt));
    st->lt_ws = cu_malloc(st, CU_LT_WS_BYTES, "the cuBLASLt workspace");
    st->lt_ws_bytes = CU_LT_WS_BYTES;

    be->name = "cuda";
    be->caps = TB_CAP_NCHW | TB_CAP_NHWC | TB_CAP_F32 | TB_CAP_BF16 | TB_CAP_F16;
    be->priv = st;
    be->compute_stream = st->stream;
    snprintf(be->device, sizeof be->device, "%.120s", prop.name);
    char bus[32] = "";
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, dev) != cudaSuccess) (void)cudaGetLastError();
    snprintf(be->device_key, sizeof be->device_key, "gpu:%s", bus);
    version_str(be->versions, sizeof be->versions);

    be->alloc = cuda_alloc;
    be->release = cuda_release;
    be->zero = cuda_zero;
    be->copy_h2d = cuda_copy_h2d;
    be->copy_d2h = cuda_copy_d2h;
    be->copy_d2d = cuda_copy_d2d;
    be->sync = cuda_sync;
    be->memory = cuda_memory;
    be->host_alloc = cuda_host_alloc;
    be->host_free = cuda_host_free;
    be->copy_h2d_async = cuda_copy_h2d_async;
    be->stream_create = cuda_stream_create;
    be->stream_destroy = cuda_stream_destroy;
    be->event_create = cuda_event_create;
    be->event_destroy = cuda_event_destroy;
    be->event_record = cuda_event_record;
    be->stream_wait = cuda_stream_wait;
    be->event_wait = cuda_event_wait;
    be->event_done = cuda_event_done;
    be->event_elapsed_ms = cuda_event_elapsed_ms;
    be->stream_hold = cuda_stream_hold;
    be->native_stream = cuda_native_stream;
    be->native_event = cuda_native_event;

    be->conv_plan = cu_conv_plan;
    be->conv_plan_free = cu_conv_plan_free;
    be->conv_plan_describe = cu_conv_plan_describe;
    be->conv_forward = cu_conv_forward;
    be->conv_backward_data = cu_conv_backward_data;
    be->conv_backward_filter = cu_conv_backward_filter;
    be->branch_begin = cu_branch_begin;
    be->branch_end = cu_branch_end;
    be->branch_join = cu_branch_join;
    be->capture_unwind = cu_branch_unwind;

    be->bn_plan = cu_bn_plan;
    be->bn_plan_free = cu_bn_plan_free;
    be->bn_plan_describe = cu_bn_plan_describe;
    be->bn_forward_train = cu_bn_forward_train;
    be->bn_forward_infer = cu_bn_forward_infer;
    be->bn_backward = cu_bn_backward;
    be->bn_tune = cu_bn_tune;
    cu_fused_table(be, opts); /* fconv_* .. plan_session (fused_ops.c), in backend.h's order */
    be->relu_forward = cu_relu_forward;
    be->relu_backward = cu_relu_backward;
    be->add_forward = cu_add_forward;
    be->add_backward = cu_add_backward;

    be->maxpool_forward = cu_maxpool_forward;
    be->maxpool_backward = cu_maxpool_backward;
    be->avgpool_forward = cu_avgpool_forward;
    be->avgpool_backward = cu_avgpool_backward;
    be->linear_forward = cu_linear_forward;
    be->linear_backward = cu_linear_backward;

    be->softmax_xent = cu_softmax_xent;
    be->sgd_update = cu_sgd_update;
    be->loss_scale_update = cu_loss_scale_update;
    be->convert = cu_convert;
    be->convert_many = cu_convert_many;
    be->input_u8 = cu_input_u8;
    be->input_rows = cu_input_rows;
    be->count_nonfinite = cu_count_nonfinite;
    be->check_nonfinite = cu_check_nonfinite;

    be->destroy = cuda_destroy;
    return be;
}
