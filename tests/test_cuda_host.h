/* test_cuda_host.h - what the three files of test_cuda_host share (see
 * test_cuda_host.c): its random numbers and, in a CUDA build, the walk
 * over ResNet-50's conv nodes. */
#ifndef TB_TEST_CUDA_HOST_H
#define TB_TEST_CUDA_HOST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/rng.h"
#include "data/loader.h"
#include "data/transform.h"
#include "model/cpu/cpu_backend.h"
#include "model/layout.h"
#include "model/model.h"
#define TB_TEST_SHARED_COUNTS /* test_cuda_host.c defines them */
#include "tests/tb_test.h"
#ifdef TB_HAVE_CUDA
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_index.h"
#include "model/cuda/cuda_internal.h"
#endif

extern tb_rng g_rng;

#ifdef TB_HAVE_CUDA
/* Calls visit for every conv node of resnet50 built at 224x224 (sz 0) and
 * 64x48 (sz 1), in NCHW then NHWC, with its input and output activations. */
typedef void (*conv_visit)(void *ctx, int sz, tb_layout l, const tb_node *nd, const tb_act *in, const tb_act *out);
static inline void each_resnet50_conv(conv_visit visit, void *ctx) {
    const int sizes[2][2] = {{224, 224}, {64, 48}};
    for (int sz = 0; sz < 2; sz++) {
        tb_resnet_config cfg;
        tb_resnet_config_init(&cfg, "resnet50", 10);
        tb_param_table pt = {0};
        tb_graph g = {0};
        tb_resnet_build(&cfg, sizes[sz][0], sizes[sz][1], 1, &pt, &g);
        for (int i = 0; i < g.nnodes; i++) {
            const tb_node *nd = &g.nodes[i];
            if (nd->kind != TB_NODE_CONV) continue;
            for (int l = 0; l < 2; l++) visit(ctx, sz, (tb_layout)l, nd, &g.acts[nd->in], &g.acts[nd->out]);
        }
        tb_params_free(&pt);
        free(g.nodes);
        free(g.acts);
    }
}
#endif

#ifdef TB_HAVE_CUDA
/* fn(), a backend's reading of environment variable name, with name set
 * to v (NULL: unset), then unset again; *died = 1 with its one-line message
 * in msg when it refused the value (a trapped tb_die). */
static inline int env_read(const char *name, const char *v, int (*fn)(void), int *died, char *msg, size_t len) {
    if (v) setenv(name, v, 1);
    else unsetenv(name);
    static tb_fatal_trap trap;
    volatile int r = 99;
    *died = 0;
    if (setjmp(trap.env) == 0) {
        tb_fatal_trap_set(&trap);
        r = fn();
        tb_fatal_trap_set(NULL);
    } else {
        *died = 1;
        snprintf(msg, len, "%s", trap.msg);
    }
    unsetenv(name);
    return r;
}

/* A variable fn reads: each of the n values in ok (NULL: unset) gives its
 * want (what: the values, for the message), and bad_value is refused with
 * one line holding "NAME=BAD_VALUE: expected " + expect, never a silent
 * default; msg gets that line. */
typedef struct {
    const char *v;
    int want;
} env_case;
static inline void check_env_values(const char *name, int (*fn)(void), const env_case *ok, size_t n, const char *what,
                                    const char *bad_value, const char *expect, char *msg, size_t len) {
    int bad = 0, died;
    char want[160];
    msg[0] = 0;
    for (size_t k = 0; k < n; k++) bad += env_read(name, ok[k].v, fn, &died, msg, len) != ok[k].want;
    TB_CHECK(bad == 0, "%s %s: %d read wrong", name, what, bad);
    (void)env_read(name, bad_value, fn, &died, msg, len);
    if (!died) snprintf(msg, len, "accepted");
    snprintf(want, sizeof want, "%s=%s: expected %s", name, bad_value, expect);
    TB_CHECK(died && strstr(msg, want) && !strchr(msg, '\n'), "%s=%s: one line: %s", name, bad_value, msg);
}

/* in test_cuda_host_descs.c */
void test_cudnn_descs(void);
void test_linear_gemm_shapes(void);
void test_conv_pick(void);
void test_conv_pick_checked(void);
void test_conv_pad_rules(void);
void test_kernel_index_math(void);

/* in test_cuda_host_kernels.c */
void test_pool_tiling(void);
void test_pool_tiled_backward(tb_backend *be);
void test_bn_descs(void);
void test_bn_fallback_status(void);
void test_cgraph_tensors(void);
void test_cgraph_notes(void);
void test_take_graph(void);
void test_cuda_discovery(void);
void test_branch_env(void);
void test_convert_many_lists(void);
void test_bn_tune_rules(void);
#endif

#endif
