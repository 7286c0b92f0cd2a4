/* results.h - the results room's public face: what a run leaves behind.
 *
 *   h5io.h              HDF5 access: the lock, H5_CHECK, atomic files
 *   results_file.h      the results file: provenance attributes, column tables
 *   results_read.h      a results file read back whole
 *   run_report.h        a training run's results file, writable at any moment
 *   provenance.h        versions, command line, hosts, CPU and BLAS facts
 *   step_phases.h       a step's phases and per-step record
 *   scaling.h           per-rank summaries and the 1-vs-N scaling table
 *   bucket_profile.h    the gradient-ready and bucket timeline (/grad_ready, /buckets)
 *   overlap_report.h    report's bucket overlap tables
 *   op_profile_report.h --op-profile's tables and groups
 *   table_print.h       one table layout as text, markdown or CSV
 *   checkpoint.h        checkpoint files <-> model parameters
 *   batchfile.h         the golden-step batch file */
#ifndef TB_RESULTS_H
#define TB_RESULTS_H

#include "src/results/batchfile.h"
#include "src/results/bucket_profile.h"
#include "src/results/checkpoint.h"
#include "src/results/h5io.h"
#include "src/results/op_profile_report.h"
#include "src/results/output_guard.h"
#include "src/results/overlap_report.h"
#include "src/results/provenance.h"
#include "src/results/results_file.h"
#include "src/results/results_read.h"
#include "src/results/run_report.h"
#include "src/results/scaling.h"
#include "src/results/step_phases.h"
#include "src/results/table_print.h"

#endif
