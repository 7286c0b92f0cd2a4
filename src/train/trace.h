/* trace.h - --trace FILE.json: a per-rank timeline of every training step
 * (data wait, h2d, forward, backward, the exposed all-reduce, optimizer, and
 * each gradient bucket's all-reduce on the communication thread) in Chrome
 * trace format, gathered to rank 0. Open it in Perfetto (ui.perfetto.dev) or
 * chrome://tracing: one process per rank, a "compute" and a "communication"
 * track in each.
 *
 * Events are kept in memory (bounded; later ones are counted and dropped)
 * with times on this rank's clock relative to a barrier at the start, so
 * ranks line up to within the barrier's skew. */
#ifndef TB_TRACE_H
#define TB_TRACE_H

#include <stdint.h>

#include "comm/comm.h"

enum { TB_TRACE_COMPUTE = 0, TB_TRACE_COMM = 1 };

/* Starts recording (call right after a barrier on every rank). */
void tb_trace_start(int rank, size_t max_events);
int tb_trace_on(void);
/* One complete event: name must outlive the trace (a string literal);
 * times from tb_now(); bucket >= 0 and bytes for all-reduce buckets. */
void tb_trace_event(const char *name, int track, double t_start, double t_end, int64_t step,
                    int bucket, double bytes);
/* Gathers every rank's events; rank 0 writes path atomically. Collective. */
void tb_trace_write(tb_comm *world, const char *path, const char *hosts);

#endif
