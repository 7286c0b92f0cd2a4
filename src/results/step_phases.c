/* step_phases.c - the phases' names (step_phases.h). */
#include "src/results/step_phases.h"

const char *const tb_phase_name[TB_PH_COUNT] = {"data", "h2d", "forward", "backward", "allreduce",
                                                "optimizer"};
