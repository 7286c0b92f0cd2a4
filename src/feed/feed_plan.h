/* feed_plan.h - how a source's batches reach the model, decided once,
 * before any loader is made, so that the loader is built with the right
 * options and nothing is rebuilt: which decode (libjpeg-turbo on the CPU,
 * or nvJPEG into device memory), which element type (float32 normalised on
 * the host, or uint8 NHWC crops normalised and flipped on the device),
 * loader slots in the backend's pinned memory or not, and synthetic or
 * batch-file data resident in device memory or not. The --decode flag's
 * one parser (train and loader-bench) lives here too. */
#ifndef TB_FEED_PLAN_H
#define TB_FEED_PLAN_H

#include "data/loader.h"
#include "model/model.h"

/* --decode's choices and their parser: 0, or -1 for a name not in the list. */
#define TB_DECODE_CHOICES "fast|fast-all|partial|full|gpu"
int tb_decode_parse(const char *name, tb_decode_mode *out);

/* The feed decided. */
typedef struct {
    tb_decode_mode decode; /* the loader's decode; TB_DECODE_GPU: nvJPEG into device memory (needs u8) */
    int u8;                /* uint8 NHWC crops + flip flags, normalised and flipped on the device */
    int pinned;            /* loader slots in the backend's pinned memory, copied asynchronously
                              on a copy stream, the next batch's copy overlapping this step */
    int resident;          /* synthetic and batch-file sources: their pool (or rows) uploaded once
                              into device memory and each batch gathered there (no per-step upload,
                              as DeepLearningExamples' synthetic data and a benchmark's on-device batch) */
} tb_feed_opts;

typedef enum { TB_FEED_AUTO = -1, TB_FEED_OFF = 0, TB_FEED_ON = 1 } tb_feed_choice;

/* What a caller asks for. */
typedef struct {
    tb_decode_mode decode;      /* as asked (--decode) */
    int host_read;              /* the batches are read on the host (validation): float32, the CPU
                                   decodes (gpu asked: fast), nothing pinned or resident */
    tb_feed_choice u8, pinned, resident; /* AUTO: the backend's default (CUDA: on, CPU: off) */
} tb_feed_ask;

/* The one decision: CUDA feeds uint8, pinned and resident by default, the
 * CPU backend float batches straight in; the ask's ON/OFF override. */
tb_feed_opts tb_feed_decide(const tb_backend *be, const tb_feed_ask *ask);

/* The loader options the feed implies, onto o (made for float32 NCHW):
 * decode, and with u8 the uint8 NHWC format with the flip left to the
 * device, with pinned be's host allocation for the slots. Dies with one
 * line when a GPU decode is asked without u8 (a backend without device
 * normalisation: the CPU's). */
void tb_feed_loader_opts(const tb_feed_opts *fo, tb_backend *be, tb_loader_opts *o);

#endif
