/* gpu_runtime.h - the CUDA runtime calls src/ makes itself (the backend
 * table covers the rest): the device count and PCI bus ids the device map
 * needs, and CUDA graphs of the training step with timing events inside
 * them. gpu_runtime.c in CUDA builds; gpu_runtime_none.c elsewhere (no
 * device, no graph). Streams and events are cudaStream_t / cudaEvent_t as
 * void *.
 *
 * Timing events inside a graph: a plain cudaEventRecord during a capture
 * only orders streams; to be recorded on every replay an event must be
 * captured as an external event-record node (tb_gpu_record_timing). A
 * step's events are read a step or more later, so each launch retargets
 * the graph's event nodes to the events of its ring slot
 * (cudaGraphExecEventRecordNodeSetEvent): capture with the events of slot
 * 0, launch with any slot's. */
#ifndef TB_GPU_RUNTIME_H
#define TB_GPU_RUNTIME_H

#include <stddef.h>

/* Visible CUDA devices; -1 with a reason when the runtime has none to give
 * (no driver), 0 without a device. */
int tb_gpu_device_count(char *why, size_t len);
/* "0000:3B:00.0" of ordinal device; -1 when unknown. */
int tb_gpu_bus_id(int device, char *buf, size_t len);

/* Device memory in use on the calling thread's current device (all
 * processes: cudaMemGetInfo's total - free) and its size, bytes; -1 without
 * a device or CUDA. */
int tb_gpu_mem_used(double *used, double *total);

/* Seconds from event `from` to event `to` (both completed) into *s; -1,
 * the runtime's error cleared, when CUDA cannot say: for reports that
 * must not end a run (the step timeline). */
int tb_gpu_event_seconds(void *from, void *to, double *s);

/* Queues a copy from device memory into pinned host memory on stream and
 * returns at once (record an event after it to know when it landed). */
void tb_gpu_copy_d2h_async(void *dst, const void *src, size_t bytes, void *stream);

/* 1 while work queued on stream is being captured. */
int tb_gpu_capturing(void *stream);
/* Records a timing event: an external node when stream is capturing. */
void tb_gpu_record_timing(void *event, void *stream);

typedef struct tb_gpu_graph tb_gpu_graph;
/* Starts capturing stream (thread-local mode: other threads' CUDA calls are
 * not affected). 0, or -1 with the runtime's reason. */
int tb_gpu_capture_begin(void *stream, char *why, size_t len);
/* Ends the capture and instantiates it. events[0..nevents) are the timing
 * events recorded inside (tb_gpu_record_timing) in a fixed order; their
 * nodes are found so that each launch can retarget them. NULL with a
 * reason when the capture or the instantiation failed (the capture is
 * ended either way). */
tb_gpu_graph *tb_gpu_capture_end(void *stream, void *const *events, int nevents, char *why, size_t len);
/* Ends a capture that a failure left open on stream (a call inside it that
 * failed or was refused: the capture may be invalidated) and throws the
 * graph away, so that the stream, and any stream the capture forked into,
 * runs eagerly again; clears the runtime's last error; one line with what
 * cudaStreamEndCapture said. Nothing when the stream is not capturing.
 * Never ends the job. */
void tb_gpu_capture_abandon(void *stream);
/* Launches on stream, event node i recording events[i] (NULL: as captured). */
void tb_gpu_graph_launch(tb_gpu_graph *g, void *stream, void *const *events);
/* Nodes in the graph (for the log line). */
int tb_gpu_graph_nodes(const tb_gpu_graph *g);
void tb_gpu_graph_destroy(tb_gpu_graph *g);

#endif
