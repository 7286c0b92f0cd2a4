/* test_cuda_fused.h - what the files of test_cuda_fused share:
 * test_cuda_fused.c (main; every fused op against the CPU's twins),
 * test_cuda_fused_step.c (`test_cuda_fused step`: a whole ResNet-50 step)
 * and test_cuda_fused_refused.c (`test_cuda_fused refused`).
 * The check counters live in test_cuda_fused.c. */
#ifndef TB_TEST_CUDA_FUSED_H
#define TB_TEST_CUDA_FUSED_H

#include "core/rng.h"
#include "model/backend.h"

#define TB_TEST_SHARED_COUNTS
#include "tests/tb_test.h"

/* ResNet-50's training step with --fuse graph against the unfused step on
 * gpu, fp32, bf16 and fp16 (the rules: test_cuda_fused_step.c); the batch
 * is drawn from rng. */
void test_cuda_fused_step(tb_backend *gpu, tb_rng *rng);

/* The op cases of test_cuda_fused.c: how many, and case c run in fp16 NHWC
 * on gpu (fused graphs where they plan) against the CPU twins: 1 when its
 * conv + statistics ran on a fused graph; first_path (may be NULL) gets the
 * plan's description. */
int test_cuda_fused_ncases(void);
int test_cuda_fused_case(tb_backend *gpu, int c, char *first_path, size_t len);
/* --no-autotune's trial runs with TB_TEST_FAULT=engine-refuses (test_cuda_fused_refused.c). */
void test_cuda_fused_refused(void);

#endif
