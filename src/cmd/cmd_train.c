/* cmd_train.c - `trainbench train`, the default subcommand.
 *
 *   mpirun -np N trainbench [train] [options]
 *
 * 1. the flags (train_flags.c);
 * 2. bootstrap on every rank: comm/, launch checks, the watchdog, the data
 *    (train_data.c), backend, model, rank 0's state broadcast so every rank
 *    starts identical, the header (train_setup.c);
 * 3. the training steps (train_loop.c);
 * 4. the per-rank table, the replica check, the scaling measurement
 *    (train_scaling.c) and, from rank 0, the results file (train_report.c) —
 *    also written, marked "aborted", when the run fails (run_report.h). */
#include <stdlib.h>

#include "core/log.h"
#include "src/cmd/commands.h"
#include "src/train/train.h"

int tb_cmd_train(int argc, char **argv) {
    tb_train_run *r = calloc(1, sizeof *r); /* the flags' strings make it large for the stack */
    if (!r) TB_FATAL("out of host memory");
    tb_train_parse(r, argc, argv);
    tb_train_setup(r);
    tb_train_outcome o;
    tb_train_loop(r, &o);
    tb_train_report(r, &o);
    tb_train_teardown(r);
    free(r);
    return 0;
}
