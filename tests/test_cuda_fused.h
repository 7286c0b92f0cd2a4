/* test_cuda_fused.h - what the two files of test_cuda_fused share:
 * test_cuda_fused.c (main; every fused op against the CPU's twins) and
 * test_cuda_fused_step.c (`test_cuda_fused step`: a whole ResNet-50 step).
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

#endif
