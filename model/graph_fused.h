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
 *     kind of fallback, naming the nodes, and one summary line.
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

#endif
