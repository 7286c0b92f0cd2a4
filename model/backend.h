/* backend.h - the table of operations every compute backend provides.
 *
 * The ResNet graph (model/graph.c) is written once against this table; the
 * CPU backend (model/cpu/) and the CUDA backend (model/cuda/) fill it in,
 * op for op, in the same order, so one file can be read against the other.
 * model/README.md documents the contract in prose; the short version:
 *
 *  - Every pointer handed to an op is device memory from be->alloc (on the
 *    CPU backend that is ordinary host memory).
 *  - Ops are asynchronous: they are queued on the backend's compute stream
 *    and may return before they finish. Only copy_d2h, sync, event_wait and
 *    the counting check wait. Ordering between streams is by events.
 *  - Values that change from step to step (learning rate, loss-gradient
 *    scale, fp16 loss scale, the overflow flag, the loss) live in device
 *    memory (tb_step_scalars) and ops read them through a pointer, so a step
 *    has no host value baked into it and can be captured and replayed.
 *  - Tensors carry their dtype and layout; an op rejects a combination the
 *    backend does not support (see caps) with a clear error.
 *  - "accumulate" arguments: 0 overwrites the output, 1 adds to it. This is
 *    how gradients of a tensor with several consumers are summed.
 *  - Parameters that BatchNorm, the loss and SGD touch are tb_real (float32:
 *    master weights, running statistics); conv and linear weights handed to
 *    an op have the activation dtype and layout (the model converts).
 *
 * This header is also read by nvcc (the .cu files of model/cuda): plain C only.
 */
#ifndef TB_BACKEND_H
#define TB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef enum { TB_F32 = 0, TB_BF16 = 1, TB_F16 = 2, TB_F64 = 3 } tb_dtype;
typedef enum { TB_NCHW = 0, TB_NHWC = 1 } tb_layout;

/* tb_real: the scalar of parameters, gradients, statistics and the loss.
 * float in every normal build. The fp64 verification build (-DTB_REAL_DOUBLE,
 * target trainbench_fp64, tests only) compiles the same model and CPU
 * sources with double, so the golden tests can prove the semantics against
 * PyTorch float64 without float32 rounding in the way (llm.c's floatX idea). */
#ifdef TB_REAL_DOUBLE
typedef double tb_real;
#define TB_REAL_DTYPE TB_F64
#else
typedef float tb_real;
#define TB_REAL_DTYPE TB_F32
#endif

/* A dense 4-D tensor in device memory. Activations are [N,C,H,W] in the
 * order `layout` says; conv weights are [Cout,Cin,KH,KW] (n=Cout, c=Cin),
 * stored OIHW for TB_NCHW and OHWI for TB_NHWC; a matrix [R,K] is n=R, c=K,
 * h=w=1 (the same bytes in either layout). */
typedef struct {
    void *data;
    int n, c, h, w;
    tb_dtype dtype;
    tb_layout layout;
} tb_tensor;

static inline size_t tb_tensor_numel(const tb_tensor *t) {
    return (size_t)t->n * (size_t)t->c * (size_t)t->h * (size_t)t->w;
}
static inline size_t tb_dtype_size(tb_dtype d) { return d == TB_F64 ? 8 : d == TB_F32 ? 4 : 2; }
static inline const char *tb_dtype_name(tb_dtype d) {
    return d == TB_F64 ? "float64" : d == TB_F32 ? "float32" : d == TB_BF16 ? "bfloat16" : "float16";
}
static inline const char *tb_layout_name(tb_layout l) { return l == TB_NCHW ? "NCHW" : "NHWC"; }

/* Convolution geometry: groups 1, dilation 1, square kernel and stride,
 * symmetric zero padding (all ResNet needs). */
typedef struct {
    int cin, cout, k, stride, pad;
} tb_conv_geom;

/* Max pooling window. */
typedef struct {
    int k, stride, pad;
} tb_pool_geom;

/* ---- per-step scalars (device memory) ------------------------------------------
 * One block per model, written and read by ops through a device pointer.
 * "host-set" fields are uploaded by the model before the ops that read them
 * (an asynchronous copy queued on the compute stream); the others are only
 * ever written by ops on the device. Field order is part of the contract
 * (host-set first, so one copy covers them). */
typedef struct {
    tb_real lr;              /* host-set: learning rate of this step's update */
    tb_real grad_scale;      /* host-set: local samples / global samples of this step */
    tb_real loss_scale;      /* device: fp16 dynamic loss scale; 1 when not scaling */
    tb_real loss;            /* device: mean loss of the last softmax_xent (unscaled) */
    int32_t found_inf;       /* device: 1 when check_nonfinite saw NaN/Inf this step */
    int32_t good_steps;      /* device: steps since the last overflow or growth */
    int32_t skipped_steps;   /* device: updates skipped for overflow, cumulative */
    int32_t pad_;
} tb_step_scalars;

/* Dynamic loss scaling as torch.cuda.amp.GradScaler: on overflow the step
 * is skipped and the scale halved; after growth_interval overflow-free
 * steps it doubles. */
typedef struct {
    double init_scale;       /* 65536 (2^16) as GradScaler */
    int growth_interval;     /* 2000 as GradScaler */
} tb_loss_scaling;

/* BatchNorm, optionally followed by a residual add and a ReLU:
 *   y = act(gamma * (x - mean) * invstd + beta + z)
 * Training uses batch statistics (biased variance) and updates the running
 * statistics as PyTorch does (running_var with the unbiased variance);
 * inference uses the running statistics. */
typedef struct {
    const tb_tensor *x;        /* [N,C,H,W] input (a conv output) */
    const tb_tensor *z;        /* [N,C,H,W] residual added before act; NULL: none */
    const tb_tensor *y;        /* [N,C,H,W] output */
    int relu;                  /* 1: y = max(0, ...) */
    const tb_real *gamma;        /* [C] scale */
    const tb_real *beta;         /* [C] shift */
    tb_real *running_mean;       /* [C] updated in training */
    tb_real *running_var;        /* [C] updated in training */
    tb_real *save_mean;          /* [C] training: batch mean, kept for backward */
    tb_real *save_invstd;        /* [C] training: 1/sqrt(batch var + eps) */
    double momentum;           /* 0.1 as torch.nn.BatchNorm2d */
    double eps;                /* 1e-5 */
    void *plan;                /* the node's bn_plan (NULL on the CPU) */
    void *reserve;             /* bytes the plan asked for, kept from forward to backward */
    size_t reserve_bytes;
    int stats_elsewhere;       /* --fuse graph: this node's forward may run as a conv's
                                  statistics + bn_finalize + bn_apply instead of
                                  bn_forward_train, so bn_backward must work from x, y and
                                  the saved statistics (and what bn_apply, given this node's
                                  plan and reserve, left there) */
    int y_in_consumer;         /* --fuse graph: the next conv's prologue is to make y (a
                                  fold candidate), so the plan asks no reserve for a
                                  ReLU mask; if the fold fails, bn_apply writes y and
                                  the backward reads y's ReLU from y */
} tb_bn_args;

/* Gradients of the op above, from the saved batch statistics. */
typedef struct {
    const tb_tensor *dy;       /* [N,C,H,W] gradient of y */
    const tb_tensor *dx;       /* [N,C,H,W] gradient of x (written or added) */
    const tb_tensor *dz;       /* [N,C,H,W] gradient of z; NULL when z was NULL */
    int accumulate_dx, accumulate_dz;
    tb_real *dgamma;             /* [C] written */
    tb_real *dbeta;              /* [C] written */
} tb_bn_grads;

/* ---- fused convolution + BatchNorm (--fuse graph, model/graph_fused.c) --------
 * The MLPerf recipe in the backend's terms: a conv's epilogue makes the
 * per-channel sum and sum of squares of its output; bn_finalize turns them
 * into the BatchNorm's batch statistics, its running statistics' update and
 * the affine y = x * scale + bias it amounts to; the next conv reads
 * relu(x * scale + bias) in its prologue (the BN "folded" into it: no BN
 * pass over the activations); bn_apply materialises a BN output where one
 * is needed (a block's end, with its residual, itself possibly a folded BN
 * of the shortcut conv; the stem before max pooling). Backward: the folded
 * BN's conv runs its data gradient, the ReLU's mask and the BN's weight
 * gradients as one op and its filter gradient with the same prologue. */

/* A BatchNorm (with ReLU) folded into the conv that reads its output. */
typedef struct {
    const tb_real *scale, *bias;   /* [C] gamma * invstd, beta - mean * gamma * invstd */
    const tb_real *mean, *invstd;  /* [C] its saved batch statistics */
    const tb_real *gamma, *beta;   /* [C] */
} tb_bn_fold;

/* A fused conv node's buffers. With pro, the conv reads relu(x * scale +
 * bias) per channel of x, x being the folded BN's input (the previous
 * conv's raw output); without, x itself. */
typedef struct {
    const tb_conv_geom *g;
    const tb_tensor *x;        /* [N,Cin,H,W] */
    const tb_bn_fold *pro;     /* NULL: no prologue */
    const tb_tensor *w;        /* [Cout,Cin,K,K] */
    const tb_tensor *y;        /* [N,Cout,Ho,Wo] */
    tb_real *sum, *sqsum;      /* [Cout]: sum and sum of squares of y over N, Ho, Wo */
    const tb_tensor *dy;       /* [N,Cout,Ho,Wo] (backward) */
    const tb_tensor *dw;       /* [Cout,Cin,K,K], overwritten */
    const tb_tensor *dx;       /* [N,Cin,H,W] gradient of x */
    int accumulate_dx;
    const tb_tensor *dr;       /* [N,Cin,H,W] the gradient of the folded BN's output before its
                                  ReLU: the backend's to write (scratch the graph owns) */
    tb_real *dgamma, *dbeta;   /* [Cin] the folded BN's parameter gradients, written */
    /* for a backend that runs some of it as the unfused ops (a batch size
     * its engines refuse): where pro(x) may be written (the folded BN's
     * output activation, [N,Cin,H,W]) and the node's conv_plan, made on it */
    const tb_tensor *xp;
    void *conv_plan;
    /* fconv_plan only: the finalize of the BN these statistics feed, at the
     * planned batch (a backend may plan its bn_finalize now); NULL: none */
    const struct tb_bn_finalize_args *fin;
} tb_fconv_args;

/* What a fused conv plan can run: conv + statistics (with the prologue
 * when pro is given), and with pro the filter and data gradients. */
enum { TB_FCONV_FWD = 1, TB_FCONV_WGRAD = 2, TB_FCONV_DGRAD = 4 };

/* BatchNorm statistics from a conv's sums (count values per channel):
 * mean = sum / count, var = sqsum / count - mean^2 (biased, to normalise),
 * save_invstd = 1 / sqrt(var + eps), running_mean and running_var updated
 * with momentum (the unbiased variance, var * count / (count - 1)), and
 * scale = gamma * invstd, bias = beta - mean * scale. */
typedef struct tb_bn_finalize_args {
    int C;
    double count;
    const tb_real *sum, *sqsum;
    const tb_real *gamma, *beta;
    tb_real *running_mean, *running_var;
    tb_real *save_mean, *save_invstd;
    tb_real *scale, *bias;
    double momentum, eps;
} tb_bn_finalize_args;

/* y = act(x * scale + bias + r), r = 0 (z NULL), z, or z * zscale + zbias
 * (a folded BatchNorm on the shortcut: MLPerf's "dual" block end). */
typedef struct {
    const tb_tensor *x;        /* [N,C,H,W] */
    const tb_real *scale, *bias; /* [C] */
    const tb_tensor *z;        /* [N,C,H,W] or NULL */
    const tb_real *zscale, *zbias; /* [C] or NULL: z as it is */
    int relu;
    const tb_tensor *y;        /* [N,C,H,W] */
    /* the BatchNorm node whose output this is (its bn_plan and reserve
     * space: a backend may keep there what that node's bn_backward reads,
     * as after bn_forward_train); NULL: none */
    void *bn_plan;
    void *reserve;
    size_t reserve_bytes;
} tb_bn_apply_args;

/* One stretch of the flat parameter buffer sharing a weight decay. */
typedef struct {
    size_t offset, count;      /* in elements of the flat tb_real buffers */
    double weight_decay;
} tb_sgd_segment;

/* tb_model_sgd_step's arguments (host values; the model puts lr into the
 * step scalars). grad_scale must be 1: unscaling is the loss scaler's job. */
typedef struct {
    double lr, momentum;
    int nesterov;
    double grad_scale;
} tb_sgd_args;

/* The sgd_update op, torch.optim.SGD semantics (dampening 0):
 *   g = grad / sc->loss_scale + wd * p
 *   buf = momentum * buf + g          (buf starts at zero: same as torch)
 *   step = nesterov ? g + momentum * buf : buf
 *   p -= sc->lr * step
 * and nothing at all when skip_nonfinite and sc->found_inf. momentum and
 * nesterov are fixed for a run, so they are plain values. */
typedef struct {
    double momentum;
    int nesterov;
    int skip_nonfinite;
    tb_step_scalars *sc;       /* device */
} tb_sgd_op;

/* Input normalisation: v in [0,255] -> ((float)v / 255 - mean[c]) / std[c]
 * in float32, as torchvision's ToTensor + Normalize (data/transform.c). */
typedef struct {
    float mean[3], std[3];
} tb_input_norm;

/* Device memory accounting (bytes). */
typedef struct {
    size_t in_use, peak;       /* through be->alloc, now and at most */
    size_t device_total;       /* the device's memory (0 on the CPU) */
    size_t device_free_start;  /* free when the backend started (cudaMemGetInfo) */
    size_t device_free_now;
} tb_mem_info;

enum {
    TB_CAP_NCHW = 1u << 0,
    TB_CAP_NHWC = 1u << 1,
    TB_CAP_F32 = 1u << 2,
    TB_CAP_BF16 = 1u << 3,
    TB_CAP_F16 = 1u << 4,
    TB_CAP_F64 = 1u << 5,
};

/* Opaque ordering objects: cudaStream_t / cudaEvent_t on CUDA, an
 * emulation on the CPU. A NULL tb_stream means the compute stream. */
typedef struct tb_stream tb_stream;
typedef struct tb_event tb_event;

typedef struct tb_backend tb_backend;

#define TB_DEVICE_NAME_MAX 128 /* tb_backend.device, and each rank's row where they are gathered */

struct tb_backend {
    const char *name;          /* "cpu", "cuda" */
    unsigned caps;             /* TB_CAP_* */
    char device[TB_DEVICE_NAME_MAX]; /* "AMD EPYC 7B13, 2 threads" / "NVIDIA H100 80GB HBM3" */
    char versions[256];        /* libraries behind the ops: "OpenBLAS 0.3.21 ..." */
    int threads;               /* CPU worker threads the ops run on (CPU backend: the
                                  threads asked for, at most the CPUs this process may
                                  run on); 0 for a GPU backend */
    char device_key[64];       /* what no other rank on this host may share: the GPU's
                                  PCI bus id, or the CPU set this rank is bound to
                                  ("" when not bound to a part of the machine) */
    char choice[400];          /* why this backend: "--backend auto: cuda (1 device visible)" */
    void *priv;                /* backend state: handles, streams, workspace */
    void *compute_stream;      /* cudaStream_t for CUDA, NULL for CPU */

    /* ---- memory and ordering ------------------------------------------- */
    void *(*alloc)(tb_backend *be, size_t bytes);   /* aborts when out of memory */
    void (*release)(tb_backend *be, void *p);
    void (*zero)(tb_backend *be, void *p, size_t bytes);
    /* returns when src may be reused (queued before later ops either way) */
    void (*copy_h2d)(tb_backend *be, void *dst, const void *src, size_t bytes);
    void (*copy_d2h)(tb_backend *be, void *dst, const void *src, size_t bytes); /* waits */
    void (*copy_d2d)(tb_backend *be, void *dst, const void *src, size_t bytes);
    void (*sync)(tb_backend *be);   /* waits for everything queued on the compute stream */
    void (*memory)(tb_backend *be, tb_mem_info *out);

    /* Pinned (page-locked) host memory, and an asynchronous upload from it
     * queued on stream s (NULL: compute). src must stay untouched until an
     * event recorded on s after the copy has completed. */
    void *(*host_alloc)(tb_backend *be, size_t bytes);
    void (*host_free)(tb_backend *be, void *p);
    void (*copy_h2d_async)(tb_backend *be, void *dst, const void *src, size_t bytes,
                           tb_stream *s);

    /* Streams and events. record: the event completes when everything queued
     * on s before it has. stream_wait: work queued on s after this waits for
     * e (no host wait). event_wait: the host waits. event_done: 1 when
     * complete, 0 when pending (never waits). elapsed: milliseconds between
     * two completed events made with timing = 1. The CPU runs every op to
     * completion, so its events complete when recorded and carry a host
     * timestamp (tb_cpu_event_hold can keep them pending in tests). */
    tb_stream *(*stream_create)(tb_backend *be);
    void (*stream_destroy)(tb_backend *be, tb_stream *s);
    tb_event *(*event_create)(tb_backend *be, int timing);
    void (*event_destroy)(tb_backend *be, tb_event *e);
    void (*event_record)(tb_backend *be, tb_event *e, tb_stream *s);
    void (*stream_wait)(tb_backend *be, tb_stream *s, tb_event *e);
    void (*event_wait)(tb_backend *be, tb_event *e);
    int (*event_done)(tb_backend *be, tb_event *e);
    double (*event_elapsed_ms)(tb_backend *be, tb_event *start, tb_event *end);
    /* Queues a wait of ms on s (NULL: compute; the device spins, the host
     * does not wait): what the host queues behind it in that time starts
     * back to back, so events around it time the device, not the host's
     * calls (allreduce-bench's NCCL loop). The CPU runs each op as it is
     * called: nothing to hold. */
    void (*stream_hold)(tb_backend *be, tb_stream *s, double ms);
    /* The raw cudaStream_t / cudaEvent_t, for comm/ (NCCL) which must not
     * include model/: NULL on the CPU. */
    void *(*native_stream)(tb_backend *be, tb_stream *s);
    void *(*native_event)(tb_backend *be, tb_event *e);

    /* ---- convolution ------------------------------------------------------
     * conv_plan is called once per conv node after every buffer the node
     * touches exists (so a backend may measure algorithms on the real
     * buffers), with the largest batch it will run: x, w, y and dy are real;
     * dx is NULL when no input gradient is needed; dw is the weight-gradient
     * buffer. The plan serves every batch size up to that one (a backend may
     * prepare other sizes lazily, on the first forward at that size, when
     * overwriting y, dy, dx and dw is harmless). NULL is a valid plan. */
    void *(*conv_plan)(tb_backend *be, const tb_conv_geom *g, const tb_tensor *x,
                       const tb_tensor *w, const tb_tensor *y, const tb_tensor *dx,
                       const tb_tensor *dw, const tb_tensor *dy);
    void (*conv_plan_free)(tb_backend *be, void *plan);
    /* One line per batch size prepared: the algorithms chosen and why. */
    void (*conv_plan_describe)(tb_backend *be, void *plan, char *buf, size_t len);
    /* y[N,Cout,Ho,Wo] = conv(x[N,Cin,H,W], w[Cout,Cin,K,K]) */
    void (*conv_forward)(tb_backend *be, void *plan, const tb_conv_geom *g,
                         const tb_tensor *x, const tb_tensor *w, const tb_tensor *y);
    /* dx (+)= conv_transpose(dy, w) */
    void (*conv_backward_data)(tb_backend *be, void *plan, const tb_conv_geom *g,
                               const tb_tensor *dy, const tb_tensor *w,
                               const tb_tensor *dx, int accumulate);
    /* dw (+)= correlation of x and dy */
    void (*conv_backward_filter)(tb_backend *be, void *plan, const tb_conv_geom *g,
                                 const tb_tensor *x, const tb_tensor *dy,
                                 const tb_tensor *dw, int accumulate);

    /* ---- the weight gradient beside the data gradient ---------------------
     * branch_begin: 1 when the ops queued from here to branch_end go to a
     * second queue, which starts after everything queued before it (CUDA
     * with TB_WGRAD_STREAM=on: a second stream with its own cuDNN
     * workspace); 0 when every op stays in order on the one queue (the CPU;
     * CUDA otherwise), and then the caller calls neither of the others.
     * Between branch_end and branch_join the caller queues only ops that
     * neither read what the branch writes nor write what it reads (the
     * conv's data gradient and, with a folded BN, the BN's input gradient);
     * everything queued after branch_join waits for the branch.
     * model/graph.c: tb_graph_wgrad_begin/_end/_join, for conv_backward and
     * graph_fused.c's conv_backward_fused. */
    int (*branch_begin)(tb_backend *be);
    void (*branch_end)(tb_backend *be);
    void (*branch_join)(tb_backend *be);
    /* A CUDA graph capture abandoned by a failure inside it (the trainer's
     * trap): whatever the backend forked off the compute stream and has not
     * joined (a branch left open) is joined back into it, queued, errors
     * ignored, so that ending the capture on the compute stream ends it on
     * every stream; nothing to do where branch_begin gives 0. */
    void (*capture_unwind)(tb_backend *be);

    /* ---- batch normalisation (+ residual add + ReLU) ----------------------
     * bn_plan: per-node state (descriptors), from the args of the largest
     * batch (data pointers may be NULL); *reserve_bytes: memory the node
     * needs kept from forward to backward (the graph allocates it and passes
     * it in tb_bn_args.reserve). NULL with 0 bytes is a valid plan. */
    void *(*bn_plan)(tb_backend *be, const tb_bn_args *a, size_t *reserve_bytes);
    void (*bn_plan_free)(tb_backend *be, void *plan);
    /* which kernels the node runs on, and what they measured if bn_tune
     * timed them (one line, no newline: the results file's /batchnorms) */
    void (*bn_plan_describe)(tb_backend *be, void *plan, char *buf, size_t len);
    void (*bn_forward_train)(tb_backend *be, const tb_bn_args *a);
    void (*bn_forward_infer)(tb_backend *be, const tb_bn_args *a);
    void (*bn_backward)(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g);
    /* bn_tune: per node, after every buffer exists, with the args of a
     * training step at the largest batch: a backend with more than one way
     * to run the node may time them here on its buffers (x, z read; y, dx,
     * dz, the saved statistics and the reserve written) and keep the
     * fastest. The running statistics and dgamma, dbeta are not touched. */
    void (*bn_tune)(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g);

    /* ---- fused convolution + BatchNorm (--fuse graph) ---------------------------
     * fconv_plan: per conv node, after every buffer exists, at the largest
     * batch (a backend may time its engines on the real buffers, and make
     * smaller batch sizes lazily on their first forward); want: TB_FCONV_*
     * bits, *got: those it can run (the rest fall back to the unfused ops:
     * the graph decides, model/graph_fused.c). NULL is a valid plan. */
    void *(*fconv_plan)(tb_backend *be, const tb_fconv_args *a, unsigned want, unsigned *got);
    void (*fconv_plan_free)(tb_backend *be, void *plan);
    void (*fconv_plan_describe)(tb_backend *be, void *plan, char *buf, size_t len);
    /* y = conv(pro(x), w); sum, sqsum of y per output channel */
    void (*fconv_forward)(tb_backend *be, void *plan, const tb_fconv_args *a);
    /* the statistics of the sums fconv_forward made with this plan */
    void (*bn_finalize)(tb_backend *be, void *plan, const tb_bn_finalize_args *a);
    void (*bn_apply)(tb_backend *be, const tb_bn_apply_args *a);
    /* dw = corr(pro(x), dy); pro required */
    void (*fconv_backward_filter)(tb_backend *be, void *plan, const tb_fconv_args *a);
    /* pro required: dr = convT(dy, w) * (x * scale + bias > 0); dgamma = sum
     * dr * xhat, dbeta = sum dr (xhat = (x - mean) * invstd) */
    void (*fconv_backward_data)(tb_backend *be, void *plan, const tb_fconv_args *a);
    /* then the folded BN's input gradient: dx (+)= gamma * invstd * (dr -
     * (dbeta + xhat dgamma) / count), count = N*H*W (a separate op, so
     * the op profile counts it as BatchNorm work) */
    void (*bn_input_grad)(tb_backend *be, const tb_fconv_args *a);
    /* A graph's planning begins (session: a name for what is planned, at
     * tb_graph_allocate's start) or is over (NULL: its end). A backend that
     * caches its choices on disk takes the lock of that name at the
     * beginning (waiting while another process of the node plans the same,
     * then reading what it wrote) and writes its new choices and lets the
     * others go on at the end. */
    void (*plan_session)(tb_backend *be, const char *session);
    /* A choice the graph made by measuring (--fuse fastest,
     * model/graph_fused_time.c), kept with the backend's own: the CUDA
     * backend's plan cache (its entry keys prefixed with what the backend
     * adds to the choice: its BatchNorm kernels, its fused candidates); the
     * CPU keeps none. get copies entry key's value into out and gives 1, or
     * 0 for none; put sets it (written at the planning session's end). */
    int (*choice_get)(tb_backend *be, const char *key, char *out, size_t len);
    void (*choice_put)(tb_backend *be, const char *key, const char *value);

    /* ---- elementwise ---------------------------------------------------------- */
    /* y = max(x, 0) */
    void (*relu_forward)(tb_backend *be, const tb_tensor *x, const tb_tensor *y);
    /* dx (+)= dy * (y > 0) */
    void (*relu_backward)(tb_backend *be, const tb_tensor *y, const tb_tensor *dy,
                          const tb_tensor *dx, int accumulate);
    /* y = a + b */
    void (*add_forward)(tb_backend *be, const tb_tensor *a, const tb_tensor *b,
                        const tb_tensor *y);
    /* da (+)= dy; db (+)= dy */
    void (*add_backward)(tb_backend *be, const tb_tensor *dy, const tb_tensor *da,
                         int accumulate_a, const tb_tensor *db, int accumulate_b);

    /* ---- pooling -------------------------------------------------------------- */
    void (*maxpool_forward)(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                            const tb_tensor *y);
    /* dx (+)= dy routed to the first maximum of each window (PyTorch's rule) */
    void (*maxpool_backward)(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                             const tb_tensor *y, const tb_tensor *dy,
                             const tb_tensor *dx, int accumulate);
    /* y[N,C,1,1] = mean over H,W of x[N,C,H,W] */
    void (*avgpool_forward)(tb_backend *be, const tb_tensor *x, const tb_tensor *y);
    void (*avgpool_backward)(tb_backend *be, const tb_tensor *dy, const tb_tensor *dx,
                             int accumulate);

    /* ---- fully connected -----------------------------------------------------
     * x viewed as [N,K] (K = c*h*w), w [M,K], b [M] tb_real, y [N,M] */
    void (*linear_forward)(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                           const tb_real *b, const tb_tensor *y);
    /* dx (+)= dy w; dw = dy^T x; db = sum_n dy. dx may be NULL. */
    void (*linear_backward)(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                            const tb_tensor *dy, const tb_tensor *dx, int accumulate_dx,
                            const tb_tensor *dw, tb_real *db);

    /* ---- loss ----------------------------------------------------------------
     * Mean softmax cross-entropy with label smoothing eps (PyTorch's
     * definition): sc->loss = mean_n [(1-eps) * -log p[n,y_n] + eps * mean_c
     * -log p[n,c]]; dlogits = (p - q) / N * sc->grad_scale * sc->loss_scale.
     * labels: int32 [N] (device). */
    void (*softmax_xent)(tb_backend *be, const tb_tensor *logits, const int32_t *labels,
                         double smoothing, tb_step_scalars *sc, const tb_tensor *dlogits);

    /* ---- optimiser -----------------------------------------------------------
     * One fused update over the segments of the flat float32 buffers. */
    void (*sgd_update)(tb_backend *be, const tb_sgd_op *a, const tb_sgd_segment *segs,
                       int nseg, tb_real *params, const tb_real *grads, tb_real *momentum);
    /* Loss-scale bookkeeping after the update, on the device: found_inf ->
     * scale / 2, good_steps 0, skipped_steps + 1; else good_steps + 1 and,
     * at growth_interval, scale * 2 and good_steps 0. Clears found_inf. */
    void (*loss_scale_update)(tb_backend *be, tb_step_scalars *sc, int growth_interval);

    /* ---- conversions ---------------------------------------------------------
     * dst (+)= src, element (n,c,h,w) to element (n,c,h,w), across dtypes
     * (round to nearest even) and layouts: fp32 OIHW master weights to
     * bf16/fp16 OHWI op copies, their gradients back. */
    void (*convert)(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int accumulate);
    /* convert for each pair k < n of src[k], dst[k] (in one pass where the
     * backend can: the op weights' refresh after each step); no pair's dst
     * may overlap another pair's src or dst */
    void (*convert_many)(tb_backend *be, const tb_tensor *src, const tb_tensor *dst, int n, int accumulate);
    /* The batch as the loader gives it, uint8 [N,H,W,3] (RGB) and flip[N]
     * (1: mirror left-right; NULL: none), to the input activation dst
     * [N,3,H,W] in its dtype and layout, normalised (tb_input_norm). */
    void (*input_u8)(tb_backend *be, const uint8_t *src, const uint8_t *flip,
                     const tb_input_norm *norm, const tb_tensor *dst);
    /* Resident data (--resident): sample i of dst [N,C,H,W] (its dtype and
     * layout) is row rows[i] of pool [rows,C,H,W] float32 NCHW, already
     * normalised; rows int32 [N]; pool and rows in device memory. One pass
     * (gather and convert), the same values as copying the rows into a
     * float32 NCHW tensor and then `convert` (one rounding). The caller
     * checks the rows against the pool's size. */
    void (*input_rows)(tb_backend *be, const float *pool, const int32_t *rows,
                       const tb_tensor *dst);

    /* ---- checks ---------------------------------------------------------------
     * Number of NaN or infinite values in x[n]; waits for the result. */
    size_t (*count_nonfinite)(tb_backend *be, const tb_real *x, size_t n);
    /* Sets sc->found_inf to 1 when x[n] holds a NaN or Inf; never clears it;
     * does not wait. */
    void (*check_nonfinite)(tb_backend *be, const tb_real *x, size_t n, tb_step_scalars *sc);

    void (*destroy)(tb_backend *be);
};

/* Options shared by all backends. Zero is the default for every field. */
typedef struct {
    int threads;            /* CPU worker threads (0: all available cores) */
    int threads_over_cpus;  /* CPU: run `threads` even where this process may run on fewer
                               CPUs (tests: a many-core machine's work split, on 2 cores);
                               0: at most the CPUs, with a line when that is fewer */
    int device;             /* GPU ordinal for CUDA */
    int local_rank;         /* the rank among its host's (0 alone): lines once per host */
    int deterministic;      /* restrict to deterministic algorithms */
    int tf32;               /* CUDA: TF32 tensor-core math for float32 convs and GEMMs */
    int no_autotune;        /* CUDA: cuDNN's heuristic choice instead of measuring */
    size_t workspace_limit; /* CUDA: most bytes a conv algorithm may use (0: 1 GiB,
                               at most 1/8 of the device) */
    const char *plan_cache; /* CUDA: directory of the plan cache, "off" for none, NULL or
                               "" for the default (model/plan_cache.h) */
} tb_backend_opts;

/* How long to hold a stream (stream_hold) in front of work the host takes
 * queue_ms to queue, so that the work starts back to back: 1.5 times that,
 * at most 200 ms. */
static inline double tb_stream_hold_ms(double queue_ms) {
    const double h = 1.5 * (queue_ms > 0.0 ? queue_ms : 0.0);
    return h < 200.0 ? h : 200.0;
}

/* "cpu", "cuda" or "auto" (CUDA when built and a device is visible, else
 * CPU; be->choice says which and why, printed for "auto"). Returns NULL
 * with a message in err (one line) when the backend is not available in
 * this build or on this machine. */
tb_backend *tb_backend_create(const char *name, const tb_backend_opts *opts, char *err,
                              size_t errlen);

/* Checks that the backend supports dtype and layout, or dies naming both. */
void tb_backend_require(const tb_backend *be, tb_dtype dtype, tb_layout layout);

#endif
