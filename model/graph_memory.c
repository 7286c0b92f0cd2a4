/* graph_memory.c - the graph's memory plan (see graph.h,
 * tb_graph_plan_memory): the gradient arena, slots shared by gradients
 * whose lives do not overlap, and the activation arena, every activation
 * then each BatchNorm's saved statistics and reserve space. */
#include "model/graph.h"

#include "model/graph_fused.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#define TB_ARENA_ALIGN 256

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ---- gradient arena planning ---------------------------------------------------
 * Backward visits nodes last to first; step s = nnodes-1-i runs node i (or,
 * for a BatchNorm that --fuse graph may fold into the next conv, that
 * conv's step: tb_graph_bwd_node). The
 * gradient of activation a is first written by the earliest-running of its
 * consumers (the logits' gradient by the loss, before step 0) and last read
 * by its producer. Buffers whose [first write, last read] intervals overlap
 * must not share bytes; the rest may. Greedy first-fit, largest first. */
typedef struct {
    int act;
    int first, last;
    size_t bytes, offset;
} grad_slot;

static int cmp_slot_size(const void *a, const void *b) {
    const grad_slot *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->act - y->act;
}

static size_t plan_grad_arena(tb_graph *g) {
    int last_step = g->nnodes - 1;
    grad_slot *slots = calloc((size_t)g->nacts, sizeof *slots);
    int ns = 0;
    g->grad_bytes_unplanned = 0;
    for (int a = 0; a < g->nacts; a++) {
        tb_act *act = &g->acts[a];
        if (!act->need_grad) continue;
        grad_slot s = {a, a == g->output ? -1 : g->nnodes, last_step - act->producer,
                       align_up(act->bytes_per_sample * (size_t)g->max_batch, TB_ARENA_ALIGN), 0};
        for (int i = 0; i < g->nnodes; i++) {
            const tb_node *nd = &g->nodes[i];
            if (nd->in == a || nd->in2 == a) {
                int step = last_step - tb_graph_bwd_node(g, i);
                if (step < s.first) s.first = step;
            }
        }
        TB_ASSERT(s.first <= s.last);
        g->grad_bytes_unplanned += s.bytes;
        slots[ns++] = s;
    }
    qsort(slots, (size_t)ns, sizeof *slots, cmp_slot_size);
    size_t total = 0;
    for (int i = 0; i < ns; i++) {
        size_t off = 0;
        int moved = 1;
        while (moved) { /* bump past every placed, time-overlapping slot we hit */
            moved = 0;
            for (int j = 0; j < i; j++) {
                if (slots[j].last < slots[i].first || slots[i].last < slots[j].first) continue;
                if (off < slots[j].offset + slots[j].bytes && slots[j].offset < off + slots[i].bytes) {
                    off = slots[j].offset + slots[j].bytes;
                    moved = 1;
                }
            }
        }
        slots[i].offset = off;
        if (off + slots[i].bytes > total) total = off + slots[i].bytes;
        g->acts[slots[i].act].grad_offset = off;
    }
    free(slots);
    return total;
}

/* ---- the activation side ------------------------------------------------------
 * One arena: every activation at the largest batch (all of them live from
 * forward to backward in training), then per BN node its saved mean and
 * 1/std (tb_real [C] each; with --fuse graph also the conv's sum and sum of
 * squares and the scale and bias of bn_finalize) and the reserve space its
 * plan asked for. */
static size_t plan_act_arena(tb_graph *g, const tb_param_table *pt) {
    size_t off = 0;
    for (int a = 0; a < g->nacts; a++) {
        g->acts[a].data_offset = off;
        off += align_up(g->acts[a].bytes_per_sample * (size_t)g->max_batch, TB_ARENA_ALIGN);
    }
    g->act_bytes = off;
    g->bn_state_bytes = g->bn_reserve_bytes = 0;
    for (int i = 0; i < g->nnodes; i++) {
        tb_node *nd = &g->nodes[i];
        if (nd->kind != TB_NODE_BN) continue;
        size_t state = align_up(tb_graph_bn_state_count(g) * pt->items[nd->param].numel * sizeof(tb_real),
                                TB_ARENA_ALIGN);
        size_t reserve = align_up(nd->reserve_bytes, TB_ARENA_ALIGN);
        nd->state_offset = off;
        nd->reserve_offset = off + state;
        off += state + reserve;
        g->bn_state_bytes += state;
        g->bn_reserve_bytes += reserve;
    }
    return off;
}

void tb_graph_plan_memory(tb_graph *g, const tb_param_table *pt) {
    size_t es = tb_dtype_size(g->dtype);
    for (int a = 0; a < g->nacts; a++) {
        tb_act *act = &g->acts[a];
        act->bytes_per_sample = (size_t)act->c * act->h * act->w * es;
    }
    g->acts[g->input].need_grad = 0;
    if (g->fuse_graph) tb_fused_candidates(g);
    g->act_arena_bytes = plan_act_arena(g, pt);
    g->grad_arena_bytes = plan_grad_arena(g);
}

size_t tb_graph_host_bytes_unwritten(const tb_graph *g, tb_backend *be) {
    tb_mem_info mi;
    be->memory(be, &mi);
    return mi.device_total > 0 ? 0 : g->act_arena_bytes + g->grad_arena_bytes;
}
