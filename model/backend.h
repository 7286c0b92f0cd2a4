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
 *    and may return before they finish. Only copy_d2h and sync wait.
 *  - Tensors carry their dtype and layout; an op rejects a combination the
 *    backend does not support (see caps) with a clear error.
 *  - "accumulate" arguments: 0 overwrites the output, 1 adds to it. This is
 *    how gradients of a tensor with several consumers are summed.
 *  - Parameters that BatchNorm, the loss and SGD touch are tb_real (float32:
 *    master weights, running statistics); conv and linear weights handed to
 *    an op have the activation dtype and layout (the model converts).
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
 * h=w=1. */
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

/* One stretch of the flat parameter buffer sharing a weight decay. */
typedef struct {
    size_t offset, count;      /* in elements of the flat tb_real buffers */
    double weight_decay;
} tb_sgd_segment;

/* torch.optim.SGD semantics (dampening 0):
 *   g = grad * grad_scale + wd * p
 *   buf = momentum * buf + g          (buf starts at zero: same as torch)
 *   step = nesterov ? g + momentum * buf : buf
 *   p -= lr * step                                                     */
typedef struct {
    double lr, momentum;       /* host scalars; a backend rounds them to its type */
    int nesterov;
    double grad_scale;         /* 1, or 1/loss_scale under fp16 scaling */
} tb_sgd_args;

enum {
    TB_CAP_NCHW = 1u << 0,
    TB_CAP_NHWC = 1u << 1,
    TB_CAP_F32 = 1u << 2,
    TB_CAP_BF16 = 1u << 3,
    TB_CAP_F16 = 1u << 4,
    TB_CAP_F64 = 1u << 5,
};

typedef struct tb_backend tb_backend;

struct tb_backend {
    const char *name;          /* "cpu", "cuda" */
    unsigned caps;             /* TB_CAP_* */
    char device[128];          /* "AMD EPYC 7B13, 2 threads" / "NVIDIA H100 80GB HBM3" */
    char versions[256];        /* libraries behind the ops: "OpenBLAS 0.3.21 ..." */
    int threads;               /* CPU worker threads the ops run on (CPU backend: the
                                  threads asked for, at most the CPUs this process may
                                  run on); 0 for a GPU backend */
    char device_key[64];       /* what no other rank on this host may share: the GPU's
                                  PCI bus id, or the CPU set this rank is bound to
                                  ("" when not bound to a part of the machine) */
    void *priv;                /* backend state: handles, streams, workspace */
    void *compute_stream;      /* cudaStream_t for CUDA, NULL for CPU */

    /* ---- memory and ordering ------------------------------------------- */
    void *(*alloc)(tb_backend *be, size_t bytes);   /* aborts when out of memory */
    void (*release)(tb_backend *be, void *p);
    void (*zero)(tb_backend *be, void *p, size_t bytes);
    void (*copy_h2d)(tb_backend *be, void *dst, const void *src, size_t bytes);
    void (*copy_d2h)(tb_backend *be, void *dst, const void *src, size_t bytes); /* waits */
    void (*copy_d2d)(tb_backend *be, void *dst, const void *src, size_t bytes);
    void (*sync)(tb_backend *be);   /* waits for everything queued */

    /* ---- convolution ------------------------------------------------------
     * conv_plan is called once per conv node when the graph is built, with
     * the largest shapes it will see, and returns the backend's per-node
     * state (chosen algorithms, descriptors); NULL is a valid plan. */
    void *(*conv_plan)(tb_backend *be, const tb_conv_geom *g, const tb_tensor *x,
                       const tb_tensor *y);
    void (*conv_plan_free)(tb_backend *be, void *plan);
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

    /* ---- batch normalisation (+ residual add + ReLU) ---------------------- */
    void (*bn_forward_train)(tb_backend *be, const tb_bn_args *a);
    void (*bn_forward_infer)(tb_backend *be, const tb_bn_args *a);
    void (*bn_backward)(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g);

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
     * definition): loss[0] = mean_n [(1-eps) * -log p[n,y_n] + eps * mean_c
     * -log p[n,c]]; dlogits = (p - q) / N * grad_scale. labels: int32 [N]. */
    void (*softmax_xent)(tb_backend *be, const tb_tensor *logits, const int32_t *labels,
                         double smoothing, double grad_scale, tb_real *loss,
                         const tb_tensor *dlogits);

    /* ---- optimiser -----------------------------------------------------------
     * One fused update over the segments of the flat float32 buffers. */
    void (*sgd_update)(tb_backend *be, const tb_sgd_args *a, const tb_sgd_segment *segs,
                       int nseg, tb_real *params, const tb_real *grads, tb_real *momentum);

    /* ---- checks ---------------------------------------------------------------
     * Number of NaN or infinite values in x[n]; waits for the result. */
    size_t (*count_nonfinite)(tb_backend *be, const tb_real *x, size_t n);

    void (*destroy)(tb_backend *be);
};

/* Options shared by all backends. */
typedef struct {
    int threads;        /* CPU worker threads (0: all available cores) */
    int device;         /* GPU ordinal for CUDA */
    int deterministic;  /* restrict to deterministic algorithms */
} tb_backend_opts;

/* "cpu", "cuda" or "auto" (CUDA when built and a device is visible, else
 * CPU). Returns NULL with a message in err (one line) when the backend is not
 * available in this build or on this machine. */
tb_backend *tb_backend_create(const char *name, const tb_backend_opts *opts, char *err,
                              size_t errlen);

/* Checks that the backend supports dtype and layout, or dies naming both. */
void tb_backend_require(const tb_backend *be, tb_dtype dtype, tb_layout layout);

#endif
