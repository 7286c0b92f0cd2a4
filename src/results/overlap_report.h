/* overlap_report.h - `trainbench report`'s view of the gradient all-reduce
 * overlap: for each rank count of /buckets (the scaling rows' bucket
 * timeline, bucket_profile.h; on a GPU from events on the compute and
 * communication streams), every bucket's gradients-done, start and end
 * times against the start of backward, how long it waited for the
 * communication stream (or thread) after its gradients were done, and
 * a line with the exposed all-reduce per step and the share hidden behind
 * backward. */
#ifndef TB_OVERLAP_REPORT_H
#define TB_OVERLAP_REPORT_H

#include <stdio.h>

#include "src/results/results_read.h"
#include "src/results/table_print.h"

/* Prints nothing when the file has no /buckets rows. Returns the rank
 * counts printed. */
int tb_overlap_report(FILE *f, tb_format fmt, const tb_results *r);

#endif
