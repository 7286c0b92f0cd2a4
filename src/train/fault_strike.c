/* fault_strike.c - the TB_TEST_FAULT kinds that strike inside backward
 * (kill-bwd, freeze-bwd, nccl-abort; core/faults.h): here, above comm/,
 * because nccl-abort aborts this rank's NCCL communicators. */
#include "src/train/fault_strike.h"

#include <signal.h>
#include <time.h>

#include "comm/nccl.h"
#include "core/faults.h"
#include "core/log.h"

void tb_fault_strike_in_backward(int rank) {
    if (tb_fault("kill-bwd", rank, -1)) raise(SIGKILL);
    if (tb_fault("freeze-bwd", rank, -1)) raise(SIGSTOP);
    if (tb_fault("nccl-abort", rank, -1)) {
        tb_warn("TB_TEST_FAULT=nccl-abort: rank %d aborts its NCCL communicators inside backward and stops "
                "calling NCCL (a test)",
                rank);
        tb_nccl_abort_all();
        /* alive but silent on NCCL: the watchdog thread still answers */
        for (;;) {
            struct timespec ts = {1, 0};
            nanosleep(&ts, NULL);
        }
    }
}
