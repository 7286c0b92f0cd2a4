/* step_phases.h - what one timed step records: its phases (data, h2d,
 * forward, backward, allreduce, optimizer) and the per-step record the
 * trainer fills and the results floor (scaling rows, projections, the
 * results file) reads. Below the trainer so that results/ and project/
 * need nothing of train/. */
#ifndef TB_STEP_PHASES_H
#define TB_STEP_PHASES_H

#include <stdint.h>

#include "comm/grad_sync.h"

typedef enum { TB_PH_DATA, TB_PH_H2D, TB_PH_FWD, TB_PH_BWD, TB_PH_COMM, TB_PH_OPT, TB_PH_COUNT } tb_phase;
extern const char *const tb_phase_name[TB_PH_COUNT];

typedef struct {
    int64_t step;                /* the step's number */
    double phase[TB_PH_COUNT];   /* seconds */
    double bcast_s;              /* of phase[TB_PH_COMM], the BatchNorm statistics broadcast before forward */
    double total;                /* seconds, the whole step */
    int n;                       /* samples on this rank */
    int64_t global_n;            /* samples on all ranks */
    double lr;
    double loss;                 /* this rank's mean loss (NaN when n == 0) */
    int nonfinite;               /* the summed gradients held NaN/Inf; the update was skipped
                                    (async: the device flag; sync steps return -1 instead) */
    int skipped_steps;           /* fp16: updates skipped for overflow so far (device counter) */
    double loss_scale;           /* fp16: the loss scale after the step (1 otherwise) */
    int graph;                   /* 1: the step ran as a CUDA graph */
    double capture_s;            /* host seconds this step spent capturing (and instantiating) its graph, the
                                    device idle: left out of phase[TB_PH_H2D] and total, as the run's wall
                                    time leaves them out (trainer_graph.c) */
    tb_grad_sync_step sync;      /* bucket statistics (zeros on one rank) */
} tb_step_record;

#endif
