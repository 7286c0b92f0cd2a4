/* fault_strike.h - the test faults that strike inside backward, once a
 * gradient bucket has gone to communication (core/faults.h lists them). */
#ifndef TB_FAULT_STRIKE_H
#define TB_FAULT_STRIKE_H

/* Carries out kill-bwd / freeze-bwd / nccl-abort if one is set for this
 * rank (tb_fault_in_backward said so for the step). */
void tb_fault_strike_in_backward(int rank);

#endif
