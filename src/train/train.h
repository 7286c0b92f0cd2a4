/* train.h - the train room's public face: what the rooms above (cmd/)
 * may use of it. A training run's stages in order (train_setup.h: parse,
 * set up, loop, report, tear down), the timed data-parallel step itself
 * (trainer.h: loader-bench --feed runs real steps), and the launch checks
 * preflight and allreduce-bench run too (launch_check.h). The room's other
 * headers are for its own files. */
#ifndef TB_TRAIN_H
#define TB_TRAIN_H

#include "src/train/launch_check.h"
#include "src/train/train_setup.h"
#include "src/train/trainer.h"

#endif
