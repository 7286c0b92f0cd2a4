/* projection_report.h - the tables of `trainbench project` (text, markdown
 * or CSV through table_print.h) and the /projection table it stores:
 *
 *   the projection per rank count, measured rows beside it
 *   what would change it (efficiency under each what-if)
 *   the buckets of chosen rank counts in launch order, predicted and
 *     measured (ms from the start of backward)
 *   where each measured row differs from the prediction, by phase: compute
 *     phases against the 1-rank profile; the exposed all-reduce against what
 *     the fabric gives with the backward measured at that rank count (so it
 *     is the all-reduce's own excess, not the slower backward's)
 *   the bandwidth each measured efficiency implies
 *
 * /projection columns: ranks, nodes, buckets, algo, comm_ms, exposed_ms
 * (bucket all-reduce left after backward + the BN statistics broadcast, as
 * the allreduce phase measures it), step_ms, img_per_s, efficiency,
 * busbw_GBps, measured_step_ms, measured_img_per_s, measured_efficiency,
 * measured_exposed_ms, then per what-if if_<key>_efficiency and
 * if_<key>_img_per_s (NaN where not measured). */
#ifndef TB_PROJECTION_REPORT_H
#define TB_PROJECTION_REPORT_H

#include <stdio.h>

#include "src/project/projection.h"
#include "src/results/results.h"

#define TB_PROJ_MAX_WHATIF 8

/* A measured (or published) row at one rank count. */
typedef struct {
    int ranks;
    double step_ms, img_per_s, efficiency, exposed_ms, busbw_GBps;  /* NaN where unknown */
    double phase_ms[TB_PH_COUNT];  /* medians over ranks; NaN unknown */
    char label[128];               /* a published point's label */
} tb_proj_measured;

typedef struct {
    char key[48];              /* column key: bucket_5MiB, bf16, no_overlap, batch_x2 */
    char label[64];            /* column head */
    tb_proj_knobs k;
} tb_proj_whatif;

typedef struct {
    const tb_proj_profile *p;
    const tb_fabric *f;
    tb_proj_knobs base;
    const int *ranks;
    int nranks;
    const tb_proj_whatif *w;
    int nw;
    const tb_proj_measured *meas;
    int nmeas;
    const tb_results *run;     /* its /buckets beside the predicted ones (may be NULL) */
    const int *bucket_ranks;   /* rank counts whose buckets are printed */
    int nbucket_ranks;
} tb_proj_request;

/* Every table on f. Returns 0, or -1 after one line on stderr when the
 * fabric cannot carry a rank count. */
int tb_proj_report(FILE *f, tb_format fmt, const tb_proj_request *q);
/* The /projection table's rows. */
void tb_proj_store(tb_table *t, const tb_proj_request *q);

#endif
