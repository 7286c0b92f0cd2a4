/* memory_check.c - train's start-up check that every rank's first step fits
 * in its host's memory (core/host_memory.h says why): on the CPU backend
 * each rank's activation and gradient arenas, and on any backend the data
 * source's host batches not yet written (the loader's malloc'd ring of
 * --prefetch batches, and --val's), times the ranks on its host, against what that host
 * has available. A batch that cannot fit ends every rank together with one
 * line naming the host and the largest batch that would fit, before the
 * results file is written, where the kernel's OOM killer used to end a rank
 * in the first step without a word. --val's loader, made at each evaluation
 * while the training source's ring and the arenas stand, is counted here
 * too; each loader checks its own ring again as it makes it (data/loader.c),
 * on its own process. */
#include <stdint.h>
#include <stdio.h>

#include "core/host_memory.h"
#include "data/loader.h"
#include "src/train/train_setup.h"

#define WHY_MAX 1024

void tb_train_check_host_memory(tb_train_run *r) {
    long long train_ring = (long long)tb_source_host_bytes_unwritten(r->src), ring = train_ring;
    /* --val's loader, made at each evaluation beside the training source: its batches are read on the host
     * (feed_plan.h's host_read: float32, malloc'd on any backend), a ring of --prefetch of them */
    int val = r->d.have_val_ds;
    if (val) ring += (long long)tb_loader_ring_bytes(TB_OUT_F32_NCHW, r->image, r->fl.batch, r->fl.prefetch, 0);
    long long need = (long long)tb_graph_host_bytes_unwritten(&r->m->g, r->be) + ring;
    int ranks = r->info.local_size > 0 ? r->info.local_size : 1;
    tb_host_avail a;
    tb_host_memory_available_here(r->info.rank, &a);
    char why[WHY_MAX] = "", part[WHY_MAX / 2];
    if (tb_host_memory_short(need, ranks, val ? "for its first step and --val's evaluation" : "for its first step",
                             &a, part, sizeof part)) {
        int fit = tb_host_memory_batch_fit(need, r->fl.batch, ranks, a.bytes);
        int loader_heavy = r->fl.data[0] && ring > need / 4; /* a synthetic source's batch is no ring */
        /* which rings are counted: the training ring is not where it is pinned (committed as it was made) */
        const char *rings = !val ? "the loader's ring of batches is"
                            : train_ring > 0 ? "the loaders' rings of batches, training's and --val's, are"
                                             : "--val's loader's ring of batches is";
        char advice[256];
        if (fit > 0)
            snprintf(advice, sizeof advice, "use --batch-size %d or less%s%s%s%s", fit,
                     loader_heavy ? ", or a lower --prefetch (" : "", loader_heavy ? rings : "",
                     loader_heavy ? " a quarter or more of it)" : "", ranks > 1 ? ", or fewer ranks on that host" : "");
        else
            snprintf(advice, sizeof advice, "not one sample fits: %s", ranks > 1 ? "fewer ranks on that host" :
                                                                                 "a host with more memory");
        snprintf(why, sizeof why, "host %s: batch %d per rank of %s at %d px %s; %s", r->info.host, r->fl.batch,
                 r->cfg.name, r->image, part, advice);
    }
    int64_t first = why[0] ? r->info.rank : r->info.world; /* the lowest rank that is short says it */
    tb_comm_allreduce_min(r->world, &first, 1, TB_INT64);
    if (first >= r->info.world) return;
    tb_comm_bcast(r->world, why, sizeof why, TB_BYTES, (int)first);
    tb_train_die_together(r, "%s", why);
}
