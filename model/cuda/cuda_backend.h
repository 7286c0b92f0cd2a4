/* cuda_backend.h - constructor of the CUDA backend (cuDNN, cuBLASLt, own
 * kernels; float32 / bfloat16 / float16, NCHW and NHWC), device discovery,
 * and its test switches. */
#ifndef TB_CUDA_BACKEND_H
#define TB_CUDA_BACKEND_H

#include <stddef.h>

#include "model/backend.h"

/* Devices visible to this process (cudaGetDeviceCount); -1 with the
 * runtime's reason in why when it cannot tell (no driver, a driver older
 * than the runtime, ...). Never aborts. */
int tb_cuda_device_count(char *why, size_t len);

/* The backend on device opts->device; NULL with one line in err when there
 * is no such device. */
tb_backend *tb_cuda_backend_create(const tb_backend_opts *opts, char *err, size_t errlen);

/* Test switch: BatchNorm on cuDNN's fused kernels where they apply (NHWC,
 * 16-bit, C % 4 == 0; 1), the same with each such node timed against the
 * own kernels by bn_tune where autotune is on (2: TB_BN_KERNELS=auto, the
 * default), or always on the own kernels (0). */
void tb_cuda_bn_use_cudnn(tb_backend *be, int on);
/* Test query: 1 while the node of this bn_plan is yet to be timed
 * (bn_tune has not run on it). */
int tb_cuda_bn_plan_to_measure(const void *plan);
/* Test query: 1 while the node of this bn_plan runs on cuDNN's fused
 * kernels (0: the own kernels, chosen at plan time or after cuDNN refused
 * a call). */
int tb_cuda_bn_plan_on_cudnn(const void *plan);
/* Test switch: the own BatchNorm kernels keep the ReLU's mask from forward
 * to backward where they can (1, the default) or the backward reads y
 * (0; read at each forward and backward). */
void tb_cuda_bn_relu_mask(tb_backend *be, int on);
/* Test query: convert_many's kernel launches so far (0 for a list it
 * converted pair by pair). */
long tb_cuda_convert_many_launches(tb_backend *be);
/* Test query: the batch whose ReLU mask the node's last forward wrote (0:
 * none, and its backward reads y). */
int tb_cuda_bn_plan_masked(const void *plan);

/* Which cuDNN API runs the convolutions (chosen per node, batch size and
 * direction at plan time): AUTO (the default) the graph (backend) API's
 * engine when it measured faster than the legacy algorithm, GRAPH its
 * engine whenever it has one, LEGACY never. The environment variable
 * TB_CONV_API=auto|graph|legacy sets it when the backend is made; this
 * test switch sets it for plans made afterwards. */
enum { TB_CUDA_CONV_AUTO = 0, TB_CUDA_CONV_GRAPH = 1, TB_CUDA_CONV_LEGACY = 2 };
void tb_cuda_conv_api(tb_backend *be, int api);
/* Test query: how many (batch size, direction, beta) choices of this
 * conv_plan run on the graph API. */
int tb_cuda_conv_plan_on_graph(const void *plan);

/* A conv with few input channels and no input gradient (ResNet's 3-channel
 * stem, bf16/fp16 NHWC) on copies of its input and filter padded with
 * zeros: 0 never (the default), -1 auto (4 or 8 channels when measured
 * faster), 4 or 8 always. TB_STEM_PAD=off|auto|4|8 sets it when the backend
 * is made; this test switch sets it for plans made afterwards. */
void tb_cuda_conv_pad(tb_backend *be, int mode);
/* Test switch (a planted error): the value the added channels get (0). */
void tb_cuda_conv_pad_fill(tb_backend *be, float v);
/* Test query: the channel count this conv_plan pads its input to, or 0. */
int tb_cuda_conv_plan_padded(const void *plan);

/* Test switch (--fuse graph): the fused conv plans made afterwards run the
 * graphs of these kinds (bits 1 << fd_kind, model/fused_desc.h: 1 conv +
 * statistics, 2 BN finalize, 4 wgrad with the prologue, 8 dgrad + dReLU +
 * BN weights) as the unfused ops instead, reporting them as present so the
 * fused schedule keeps them: the fallback composition under test. 0 (the
 * default): every graph that plans. */
void tb_cuda_fused_force(tb_backend *be, unsigned kinds);

/* Test switch: the max-pool kernels a call would not take by itself:
 * TB_CUDA_POOL_WIDE 64-bit indices (taken for 2^31 elements or more),
 * TB_CUDA_POOL_SCALAR one channel per thread where 16-byte accesses apply;
 * 0 (the default) chooses by the tensors. */
#define TB_CUDA_POOL_WIDE 1
#define TB_CUDA_POOL_SCALAR 2
void tb_cuda_pool_force(tb_backend *be, int flags);

#endif
