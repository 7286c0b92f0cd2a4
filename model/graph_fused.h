/* graph_fused.h - --fuse graph: the ResNet graph run as MLPerf's fused
 * convolution + BatchNorm schedule over the backend's fused ops (backend.h,
 * "fused convolution + BatchNorm").
 *
 * Host-only decisions, in three steps:
 *  1. tb_fused_candidates (before the memory plan, from the node list): a
 *     BN whose input is a conv output read by nothing else takes its
 *     statistics from that conv (APPLY at least); one with a ReLU and no
 *     residual whose output only a conv reads folds into that conv (FOLD);
 *     a shortcut's BN without ReLU whose output only a block-end BN adds
 *     folds into that BN's apply (ZFOLD). The gradient arena is planned for
 *     the candidates (a folded BN's input gradient is written at its
 *     consumer conv's backward step, earlier than the node's own).
 *  2. tb_fused_plan (after the arenas and the conv plans exist): each conv
 *     asks the backend for its fused plan; what the backend cannot run
 *     moves nodes down, FOLD -> APPLY (the conv then reads a materialised
 *     input) and any -> UNFUSED (no conv + statistics engine): one line per
 *     kind of fallback, naming the nodes, and one summary line. Under
 *     --fuse fastest, tb_fused_time then moves a BN down where that
 *     measured faster: FOLD -> APPLY, APPLY or ZFOLD -> UNFUSED
 *     (graph_fused_time.c).
 *  3. tb_fused_forward / tb_fused_backward: training steps in that
 *     schedule (inference runs the unfused nodes: every activation keeps
 *     its buffer).
 */
#ifndef TB_GRAPH_FUSED_H
#define TB_GRAPH_FUSED_H

#include "model/graph.h"

void tb_fused_candidates(tb_graph *g);
void tb_fused_plan(tb_graph *g, tb_backend *be, const tb_graph_params *p);
void tb_fused_free(tb_graph *g, tb_backend *be);
void tb_fused_forward(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n);
void tb_fused_backward(tb_graph *g, tb_backend *be, const tb_graph_params *p, int n, tb_grad_ready_fn ready,
                       void *ready_ctx);

/* BN nodes per mode (index tb_bn_fuse_mode), candidates or as planned. */
void tb_fused_count(const tb_graph *g, int planned, int counts[4]);
/* "52 of 53 BatchNorms on conv statistics: 32 folded into the next conv, 4
 * into the block end, 16 applied; 1 unfused" */
void tb_fused_summary(const tb_graph *g, char *buf, size_t len);
const char *tb_bn_fuse_mode_name(int mode);

/* --fuse fastest (model/graph_fused_time.c), from tb_fused_plan after the
 * backend said what it can run: each fold timed folded and applied (it
 * goes APPLY where that is faster), then each BN applied or folded into its
 * block end, whose conv reads no folded BN, timed fused and unfused (it
 * goes UNFUSED, on its second plan, where that is faster). */
void tb_fused_time(tb_graph *g, tb_backend *be, const tb_graph_params *p);
/* Its rule and its store (tests): 1 when the second way is kept; the
 * entry key of BN bi timed against conv ci at batch n; the value
 * "fused|unfused <ms fused> <ms unfused>", and back (-1: not such a value,
 * or a word its own times do not give). */
int tb_fused_time_pick(double ms_fused, double ms_unfused);
void tb_fused_time_key(const tb_graph *g, int bi, int ci, int n, char *out, size_t len);
void tb_fused_time_value(double ms_fused, double ms_unfused, char *out, size_t len);
int tb_fused_time_parse(const char *v, int *unfused, double *ms_fused, double *ms_unfused);

/* ---- the parts graph_fused_time.c shares ------------------------------------------------- */
/* The finalize arguments of BN node b for a batch of n. */
void tb_fused_finalize_args(tb_graph *g, const tb_graph_params *p, const tb_node *b, int n,
                            tb_bn_finalize_args *fa);
/* The buffers of conv node ci's fused op for a batch of n (pro: through
 * the BN folded into it): x, w, y, dy, dw, dx, dr, xp in t[]. */
void tb_fused_conv_args(tb_graph *g, const tb_graph_params *p, int ci, int n, int pro, tb_bn_fold *f, tb_tensor t[8],
                        tb_fconv_args *a);
/* bn_apply's arguments for applied BN node nd (x, y, z in t[]). */
void tb_fused_apply_args(const tb_graph *g, const tb_node *nd, int n, tb_tensor t[3], tb_bn_apply_args *a);

#endif
