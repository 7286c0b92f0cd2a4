/* step_timeline.h - the gradient timeline of the asynchronous training
 * step (src/train/trainer_graph.c), for `trainbench project` and `report`: when
 * backward finished each gradient range and, per bucket, when its
 * gradients were done, when its all-reduce started on the communication
 * stream and when it ended, all against the start of backward.
 *
 * On a GPU every time is an event: one recorded on the compute stream in
 * the model's grad-ready hook for each range (an external event node
 * inside a CUDA graph capture, retargeted per launch like the step's
 * other events: tb_step_timeline_events), and the buckets' events of
 * comm/grad_sync_dev.h (NCCL path). On the CPU backend (--step-mode
 * async) the ops have run when the hook is called, so ranges take the host
 * clock then, and the buckets the communication thread's clock
 * (comm/grad_sync.h). A finished step is handed to bucket_profile.h
 * (tb_bprof_add) when the trainer harvests it: so /grad_ready and /buckets
 * come from the same code on the CPU (tested in CI) as on the GPU.
 *
 * Only while bucket_profile.h records (rank 0, the scaling rows): the
 * trainer creates one then. The MPI staging path (two ranks sharing a GPU
 * over MPI) gets ranges only: its buckets are host-timed MPI calls on
 * another clock. */
#ifndef TB_STEP_TIMELINE_H
#define TB_STEP_TIMELINE_H

#include <stddef.h>

#include "comm/grad_transport.h"
#include "model/backend.h"
#include "model/graph.h"

typedef struct tb_step_timeline tb_step_timeline;

/* slots: the trainer's ring; max_ranges: the most grad-ready calls a
 * backward makes (the trainable tensor count bounds it). */
tb_step_timeline *tb_step_timeline_create(tb_backend *be, int slots, int max_ranges);
void tb_step_timeline_destroy(tb_step_timeline *tl);

/* Before backward of the step in `slot`: *fn / *ctx (the hook backward
 * gets, fn may be NULL) are replaced by a recorder that notes the range
 * and calls them. On the host path (CPU), also the host time of backward's
 * start. */
void tb_step_timeline_wrap(tb_step_timeline *tl, int slot, tb_grad_ready_fn *fn, void **ctx);
/* A CUDA graph launch in `slot` of the step captured in `captured`: the
 * same ranges, recorded by the graph's event nodes (retargeted to slot's
 * events by the launch). */
void tb_step_timeline_replay(tb_step_timeline *tl, int slot, int captured);
/* A step without backward on this rank (no samples): nothing to record. */
void tb_step_timeline_skip(tb_step_timeline *tl, int slot);
/* The host path, after the transport's finish: the buckets' times of this
 * step (the communication thread's clock), kept for the harvest. */
void tb_step_timeline_host_buckets(tb_step_timeline *tl, int slot, tb_transport *tr);

/* The range events of `slot` in recording order (cudaEvent_t as void *;
 * a graph launch retargets them): fills events (max_ranges of them; NULL:
 * count only) and returns max_ranges; 0 on the CPU backend. */
int tb_step_timeline_events(const tb_step_timeline *tl, int slot, void **events);

/* The step in `slot` (`step`, as the trainer numbered it) has finished
 * (its events are complete): hands its timeline to bucket_profile.h.
 * bwd0: the event at the start of backward; backward_s, exposed_s: from
 * the step's phase events; tr: its gradient transport (or NULL; its
 * bucket_times); elem_bytes: gradient element size; bucket caps and
 * overlap as the run's. */
void tb_step_timeline_harvest(tb_step_timeline *tl, int slot, int64_t step, int ranks, tb_event *bwd0,
                              double backward_s, double exposed_s, tb_transport *tr, size_t elem_bytes,
                              size_t bucket_bytes, size_t first_bucket_bytes, int overlap);

#endif
