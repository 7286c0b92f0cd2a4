/* test_project.c - the projection's arithmetic against hand-computed cases
 * (src/project/projection.h, src/project/fabric.h): ring, tree and hierarchical all-reduce
 * costs; bucket cutting and the overlap schedule against a hand-made
 * timeline; the projected step; the alpha-beta fit on synthetic tables
 * with known alpha and beta (exact, noisy, several rank counts); fabric
 * files and presets; the model's gradient layout. The tables the fit reads:
 * test_fabric_read.c.
 *
 *   test_project TMPDIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/project/fabric.h"
#include "src/project/projection.h"
#include "src/project/projection_profile.h"
#include "tests/tb_test.h"

static const char *g_tmp = ".";

static tb_fabric fab(int rpn, double intra, double a_intra, double inter, double a_inter) {
    tb_fabric f;
    memset(&f, 0, sizeof f);
    snprintf(f.name, sizeof f.name, "test");
    f.ranks_per_node = rpn;
    f.intra_bw_GBps = intra;
    f.alpha_intra_us = a_intra;
    f.inter_bw_GBps = inter;
    f.alpha_inter_us = a_inter;
    return f;
}

/* ---- costs --------------------------------------------------------------------------------- */

static void test_costs(void) {
    char err[512];
    tb_ar_cost c;
    /* one node of 4, 100 GB/s, 5 us: ring 2*3/4*1e8/1e11 + 6*5us = 1.53 ms;
     * tree 2e8/1e11 + 2*(3*5us) = 2.03 ms; no hierarchy on one node */
    tb_fabric f1 = fab(0, 100, 5, 0, 0);
    TB_CHECK(tb_allreduce_cost(&f1, 4, 1e8, &c, err, sizeof err) == 0, "one node: %s", err);
    TB_CHECK_CLOSE(c.ring_s, 1.53e-3, 0, 1e-12, "ring, 4 ranks, one node");
    TB_CHECK_CLOSE(c.tree_s, 2.03e-3, 0, 1e-12, "tree, 4 ranks, one node");
    TB_CHECK(isnan(c.hier_s), "no hierarchical cost on one node (%g)", c.hier_s);
    TB_CHECK(c.best == TB_AR_RING && c.best_s == c.ring_s, "ring is the best on one node");
    TB_CHECK(c.nodes == 1 && c.per_node == 4, "layout %dx%d", c.nodes, c.per_node);
    /* busbw of the ring's bandwidth term = the link rate */
    TB_CHECK_CLOSE(tb_busbw_GBps(4, 1e8, 1.5e-3), 100.0, 0, 1e-12, "busbw = algbw x 2(n-1)/n");
    TB_CHECK(isnan(tb_busbw_GBps(1, 1e8, 1.0)), "no busbw on one rank");

    /* 4 nodes x 8: node links 400 GB/s 2 us, network 100 GB/s per node 10 us, 1 GB:
     * ring: B = 100 GB/s, 2*31/32*1e9/1e11 = 19.375 ms + (62-6)*2us + 6*10us = 19.547 ms
     * tree: 2e9/1e11 = 20 ms + 2*(7*2us + 2*10us) = 20.068 ms
     * hier: 2*7/8*1e9/4e11 + 2*3/4*1e9/1e11 + 2*7*2us + 2*3*10us = 19.463 ms */
    tb_fabric f2 = fab(8, 400, 2, 100, 10);
    TB_CHECK(tb_allreduce_cost(&f2, 32, 1e9, &c, err, sizeof err) == 0, "4 nodes: %s", err);
    TB_CHECK_CLOSE(c.ring_s, 0.019375 + 56 * 2e-6 + 6 * 10e-6, 0, 1e-12, "ring, 32 ranks on 4 nodes");
    TB_CHECK_CLOSE(c.tree_s, 0.02 + 2 * (7 * 2e-6 + 2 * 10e-6), 0, 1e-12, "tree, 32 ranks on 4 nodes");
    TB_CHECK_CLOSE(c.hier_s, 4.375e-3 + 0.015 + 28e-6 + 60e-6, 0, 1e-12, "hier, 32 ranks on 4 nodes");
    /* hier is cheapest here, but NCCL runs only ring or tree: auto is the ring, and hier only when asked */
    TB_CHECK(c.best == TB_AR_RING, "auto is NCCL's choice, the ring, for 1 GB on 4 nodes (got %s)",
             tb_ar_algo_name(c.best));
    TB_CHECK_CLOSE(tb_ar_cost_time(&c, TB_AR_AUTO), c.ring_s, 0, 0, "auto's time is the ring's");
    TB_CHECK_CLOSE(tb_ar_cost_time(&c, TB_AR_HIER), c.hier_s, 0, 0, "algo=hier's time is hier's");
    TB_CHECK(c.nodes == 4 && c.per_node == 8, "layout %dx%d", c.nodes, c.per_node);
    TB_CHECK_CLOSE(tb_fabric_ring_busbw_GBps(&f2, 32), 100.0, 0, 1e-12, "ring busbw on 4 nodes");
    TB_CHECK_CLOSE(tb_fabric_ring_busbw_GBps(&f2, 8), 400.0, 0, 1e-12, "ring busbw in one node");
    /* a last node holding fewer ranks has their share of the node's network (its ranks' NICs): 9 ranks = 8 + 1,
     * the last node 100/8 = 12.5 GB/s: ring 2*8/9*1e9/12.5e9 + (16-2)*2us + 2*10us (it used all 100 GB/s) */
    TB_CHECK(tb_allreduce_cost(&f2, 9, 1e9, &c, err, sizeof err) == 0, "9 ranks: %s", err);
    TB_CHECK_CLOSE(c.ring_s, 2.0 * 8 / 9 * 1e9 / 12.5e9 + 14 * 2e-6 + 2 * 10e-6, 0, 1e-12, "ring, 9 ranks on 8 + 1");
    TB_CHECK_CLOSE(tb_fabric_ring_busbw_GBps(&f2, 9), 12.5, 0, 1e-12, "ring busbw, 8 + 1 ranks");
    TB_CHECK_CLOSE(tb_fabric_ring_busbw_GBps(&f2, 12), 50.0, 0, 1e-12, "ring busbw, 8 + 4 ranks");
    TB_CHECK_CLOSE(tb_fabric_ring_busbw_GBps(&f2, 16), 100.0, 0, 1e-12, "ring busbw, 8 + 8 ranks");
    /* 8 KiB on the same: latency decides, the tree's log2(m) wins */
    TB_CHECK(tb_allreduce_cost(&f2, 32, 8192, &c, err, sizeof err) == 0, "8 KiB: %s", err);
    TB_CHECK_CLOSE(c.tree_s, 2 * 8192 / 1e11 + 2 * (7 * 2e-6 + 2 * 10e-6), 0, 1e-12, "tree, 8 KiB");
    TB_CHECK(c.best == TB_AR_TREE, "tree is the best for 8 KiB on 4 nodes (got %s)", tb_ar_algo_name(c.best));
    TB_CHECK(tb_ar_cost_time(&c, TB_AR_RING) == c.ring_s && tb_ar_cost_time(&c, TB_AR_AUTO) == c.tree_s,
             "cost by algorithm");
    /* 2 ranks, 1 per node (emulated hosts): ring = S/B + 2 alpha */
    tb_fabric f3 = fab(1, 0.125, 37, 0.125, 37);
    TB_CHECK(tb_allreduce_cost(&f3, 2, 1.25e8, &c, err, sizeof err) == 0, "2 hosts: %s", err);
    TB_CHECK_CLOSE(c.ring_s, 1.0 + 2 * 37e-6, 0, 1e-12, "ring, 2 ranks on 2 hosts");
    TB_CHECK(isnan(c.hier_s), "no hierarchy with one rank per node");
    /* broadcast, a chain: base + 3 hops x alpha + S/B */
    TB_CHECK_CLOSE(tb_bcast_cost(&f1, 4, 1e6), 3 * 5e-6 + 1e-5, 0, 1e-12, "broadcast, 4 ranks");
    /* 32 ranks on 4 nodes of 8: base 8 us + 28 x 2 us + 3 x 10 us + 1e6 / 1e11 */
    f2.base_us = 8;
    TB_CHECK_CLOSE(tb_bcast_cost(&f2, 32, 1e6), 8e-6 + 28 * 2e-6 + 3 * 10e-6 + 1e-5, 0, 1e-12,
                   "broadcast, 32 ranks on 4 nodes, with the base latency");
    f2.base_us = 0;
    TB_CHECK(tb_bcast_cost(&f1, 1, 1e6) == 0, "no broadcast on one rank");
    /* a node without a network cannot carry two nodes' ranks */
    tb_fabric f4 = fab(8, 450, 3.4, 0, 0);
    snprintf(f4.name, sizeof f4.name, "nvlink-only");
    TB_CHECK(tb_allreduce_cost(&f4, 16, 1e6, &c, err, sizeof err) == -1 && strstr(err, "no network") &&
                 strstr(err, "nvlink-only"),
             "16 ranks on a one-node fabric: '%s'", err);
    TB_CHECK(tb_allreduce_cost(&f4, 8, 1e6, &c, err, sizeof err) == 0, "8 ranks fit one node");
    /* a network and no node links: 8 ranks a node would cross links it does not describe */
    tb_fabric f5 = fab(8, 0, 0, 400, 14);
    snprintf(f5.name, sizeof f5.name, "net-only");
    TB_CHECK(tb_allreduce_cost(&f5, 16, 1e6, &c, err, sizeof err) == -1 && strstr(err, "no intra-node link"),
             "16 ranks, 8 a node, on a network-only fabric: '%s'", err);
    /* the tree's network depth is NCCL's log2i (rounded down): 3 nodes, 1 hop */
    tb_fabric f6 = fab(8, 400, 2, 100, 10);
    TB_CHECK(tb_allreduce_cost(&f6, 24, 8192, &c, err, sizeof err) == 0, "3 nodes: %s", err);
    TB_CHECK_CLOSE(c.tree_s, 2 * 8192 / 1e11 + 2 * (7 * 2e-6 + 1 * 10e-6), 0, 1e-12, "tree on 3 nodes: 1 hop");
    /* NCCL's base latency: once per collective, in every algorithm */
    f6.base_us = 8.4;
    tb_ar_cost c2;
    TB_CHECK(tb_allreduce_cost(&f6, 24, 8192, &c2, err, sizeof err) == 0, "with a base latency: %s", err);
    TB_CHECK_CLOSE(c2.tree_s - c.tree_s, 8.4e-6, 0, 1e-12, "base latency on the tree");
    TB_CHECK_CLOSE(c2.ring_s - c.ring_s, 8.4e-6, 0, 1e-12, "base latency on the ring");
}

/* ---- buckets and overlap ------------------------------------------------------------------------ */

/* Four 100-byte ranges finished at 10, 20, 30, 40 ms, from the end of the
 * buffer to its start; forward 30 ms, backward 40, optimizer 10, step 100
 * (20 ms of loop overhead), batch 8. */
static tb_proj_profile hand_profile(tb_grad_range *r) {
    tb_proj_profile p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < 4; i++) {
        r[i].offset = 300 - 100 * i;
        r[i].bytes = 100;
        r[i].ready_s = 0.010 * (i + 1);
    }
    p.ranges = r;
    p.nranges = 4;
    p.batch = 8;
    p.forward_s = 0.030;
    p.backward_s = 0.040;
    p.optimizer_s = 0.010;
    p.step_s = 0.100;
    p.grad_bytes = 400;
    p.bucket_bytes = 200;
    p.overlap = 1;
    return p;
}

static void test_buckets(void) {
    tb_grad_range r[4];
    tb_proj_profile p = hand_profile(r);
    tb_proj_knobs k = tb_proj_knobs_of(&p);
    tb_proj_bucket *b;
    int n = tb_proj_buckets(&p, &k, &b);
    TB_CHECK(n == 2, "cap 200: 2 buckets, got %d", n);
    if (n == 2) {
        TB_CHECK(b[0].offset == 200 && b[0].bytes == 200 && fabs(b[0].ready_s - 0.020) < 1e-15,
                 "first launched: [200,400) ready at 20 ms (got %g +%g at %g)", b[0].offset, b[0].bytes, b[0].ready_s);
        TB_CHECK(b[1].offset == 0 && b[1].bytes == 200 && fabs(b[1].ready_s - 0.040) < 1e-15,
                 "second: [0,200) ready at 40 ms (got %g +%g at %g)", b[1].offset, b[1].bytes, b[1].ready_s);
        /* hand timeline: costs 30 and 15 ms; overlap: 20-50, 50-65, exposed 25 */
        b[0].cost_s = 0.030;
        b[1].cost_s = 0.015;
        double e = tb_proj_schedule(b, 2, 0.040, 1);
        TB_CHECK_CLOSE(b[0].start_s, 0.020, 1e-15, 0, "bucket 0 starts when ready");
        TB_CHECK_CLOSE(b[1].start_s, 0.050, 1e-15, 0, "bucket 1 waits for bucket 0 (serial stream)");
        TB_CHECK_CLOSE(e, 0.025, 1e-15, 0, "exposed with overlap");
        /* overlap off: 40-70, 70-85, exposed 45 */
        e = tb_proj_schedule(b, 2, 0.040, 0);
        TB_CHECK_CLOSE(b[0].start_s, 0.040, 1e-15, 0, "overlap off: bucket 0 starts after backward");
        TB_CHECK_CLOSE(e, 0.045, 1e-15, 0, "exposed without overlap");
        /* a bucket done long before backward ends leaves nothing exposed but the last */
        b[0].cost_s = 0.005;
        b[1].cost_s = 0.0;
        TB_CHECK(tb_proj_schedule(b, 2, 0.040, 1) == 0, "all hidden");
    }
    free(b);
    /* one fixed launch order, last layers first: a bucket of earlier layers
     * that is ready first still waits for the one above it (ranges [300,400)
     * ready last, at 50 ms): [200,400) ready at 50 launches first, then
     * [0,200) ready at 40; costs 10: 50-60, 60-70; backward ends at 50 */
    tb_grad_range late[4];
    memcpy(late, r, sizeof late);
    late[0].ready_s = 0.050;
    tb_proj_profile pl = p;
    pl.ranges = late;
    pl.backward_s = 0.050;
    n = tb_proj_buckets(&pl, &k, &b);
    TB_CHECK(n == 2 && b[0].offset == 200 && fabs(b[0].ready_s - 0.050) < 1e-15 && b[1].offset == 0,
             "fixed order: the last layers' bucket first even when it is ready last");
    if (n == 2) {
        b[0].cost_s = b[1].cost_s = 0.010;
        double e = tb_proj_schedule(b, 2, 0.050, 1);
        TB_CHECK_CLOSE(b[1].start_s, 0.060, 1e-15, 0, "the earlier-ready bucket waits for its turn");
        TB_CHECK_CLOSE(e, 0.020, 1e-15, 0, "exposed with a late top bucket");
    }
    free(b);
    /* grad_sync's cut: whole ranges from the end until the bucket reaches the cap */
    k.bucket_bytes = 250;
    n = tb_proj_buckets(&p, &k, &b);
    TB_CHECK(n == 2 && b[0].offset == 100 && b[0].bytes == 300 && b[1].offset == 0 && b[1].bytes == 100,
             "cap 250: [100,400) then [0,100) (got %d buckets, %g +%g)", n, n ? b[0].offset : -1, n ? b[0].bytes : -1);
    free(b);
    /* the first bucket's own cap (DDP's 1 MiB first bucket, here 100 bytes):
     * [300,400) alone, ready at 10 ms, then the cap moves the later cuts:
     * [100,300) ready at 30, [0,100) at 40; at or above the cap it changes nothing */
    k.bucket_bytes = 200;
    k.first_bucket_bytes = 100;
    n = tb_proj_buckets(&p, &k, &b);
    TB_CHECK(n == 3 && b[0].offset == 300 && b[0].bytes == 100 && fabs(b[0].ready_s - 0.010) < 1e-15 &&
                 b[1].offset == 100 && b[1].bytes == 200 && fabs(b[1].ready_s - 0.030) < 1e-15 &&
                 b[2].offset == 0 && b[2].bytes == 100 && fabs(b[2].ready_s - 0.040) < 1e-15,
             "first bucket 100 of cap 200: [300,400) @10, [100,300) @30, [0,100) @40 (got %d buckets)", n);
    if (n == 3) {
        /* costs 10 ms each: 10-20, 30-40, 40-50; backward ends at 40: exposed 10
         * (without the first cap: [200,400) @20 20-40, [0,200) @40 40-60: exposed 20) */
        for (int i = 0; i < 3; i++) b[i].cost_s = 0.010;
        TB_CHECK_CLOSE(tb_proj_schedule(b, 3, 0.040, 1), 0.010, 1e-15, 0, "exposed with the small first bucket");
    }
    free(b);
    k.first_bucket_bytes = 200;
    n = tb_proj_buckets(&p, &k, &b);
    TB_CHECK(n == 2 && b[0].offset == 200 && b[1].offset == 0, "first bucket = cap: the plain cut");
    free(b);
    k.first_bucket_bytes = 0;
    /* bf16 on the wire: the buffer is cut as in fp32 (the caps hold the
     * gradients' bytes, as comm/grad_sync_dev.c cuts), half of each bucket
     * moves; twice the batch doubles ready times */
    k.bucket_bytes = 200;
    k.byte_scale = 0.5;
    k.batch_scale = 2;
    n = tb_proj_buckets(&p, &k, &b);
    TB_CHECK(n == 2 && b[0].bytes == 100 && b[1].bytes == 100 && fabs(b[0].ready_s - 0.040) < 1e-15 &&
                 fabs(b[1].ready_s - 0.080) < 1e-15,
             "bf16 + batch x2: the fp32 cut, 100 bytes each on the wire, ready at 40 and 80 ms (got %d, %g, %g)",
             n, n ? b[0].bytes : -1, n ? b[0].ready_s : -1);
    free(b);
}

static void test_step(void) {
    tb_grad_range r[4];
    tb_proj_profile p = hand_profile(r);
    /* 2 ranks on one node, alpha 0, B = 200 bytes / 30 ms: each bucket 30 ms
     * (ring on 2: 2*1/2*S/B); timeline 20-50, 50-80: exposed 40 ms; compute
     * 100 ms; step 140; efficiency 100/140 */
    tb_fabric f = fab(0, 200.0 / 0.030 * 1e-9, 0, 0, 0);
    tb_proj_knobs k = tb_proj_knobs_of(&p);
    tb_proj_result res;
    tb_proj_bucket *b;
    char err[512];
    TB_CHECK(tb_project(&p, &f, 2, &k, &res, &b, err, sizeof err) == 0, "project: %s", err);
    TB_CHECK_CLOSE(res.comm_s, 0.060, 1e-12, 0, "summed all-reduce");
    TB_CHECK_CLOSE(res.exposed_s, 0.040, 1e-12, 0, "exposed");
    TB_CHECK_CLOSE(res.compute_s, 0.100, 1e-12, 0, "compute = the 1-rank step");
    TB_CHECK_CLOSE(res.step_s, 0.140, 1e-12, 0, "step");
    TB_CHECK_CLOSE(res.efficiency, 100.0 / 140.0, 0, 1e-12, "efficiency");
    TB_CHECK_CLOSE(res.img_per_s, 16 / 0.140, 0, 1e-12, "img/s");
    TB_CHECK(res.buckets == 2 && res.algo == TB_AR_RING, "2 buckets, ring");
    TB_CHECK_CLOSE(b[1].end_s, 0.080, 1e-12, 0, "last bucket ends at 80 ms");
    free(b);
    /* batch x2: compute 2*(30+40)+10+20 = 170; ready 40 and 80; 40-70, 80-110: exposed 30 */
    k.batch_scale = 2;
    TB_CHECK(tb_project(&p, &f, 2, &k, &res, NULL, err, sizeof err) == 0, "project x2: %s", err);
    TB_CHECK_CLOSE(res.compute_s, 0.170, 1e-12, 0, "compute at batch x2");
    TB_CHECK_CLOSE(res.exposed_s, 0.030, 1e-12, 0, "exposed at batch x2");
    TB_CHECK_CLOSE(res.efficiency, 170.0 / 200.0, 0, 1e-12, "efficiency at batch x2");
    /* the BN statistics broadcast before every forward: 200 bytes on 2 ranks, a chain of one hop, alpha 0:
     * 200 bytes / B = 30 ms on top of the 140 ms step; --broadcast-buffers off (the knob): none */
    k.batch_scale = 1;
    p.state_bytes = 200;
    k.bn_broadcast = 1;
    TB_CHECK(tb_project(&p, &f, 2, &k, &res, NULL, err, sizeof err) == 0, "project, broadcast: %s", err);
    TB_CHECK_CLOSE(res.bcast_s, 0.030, 1e-12, 0, "the broadcast's time");
    TB_CHECK_CLOSE(res.step_s, 0.170, 1e-12, 0, "the step with the broadcast");
    k.bn_broadcast = 0;
    TB_CHECK(tb_project(&p, &f, 2, &k, &res, NULL, err, sizeof err) == 0 && res.bcast_s == 0,
             "no broadcast with the knob off (got %g s)", res.bcast_s);
    TB_CHECK_CLOSE(res.step_s, 0.140, 1e-12, 0, "the step without the broadcast");
    p.state_bytes = 0;
    /* one rank: no communication at all */
    TB_CHECK(tb_project(&p, &f, 1, &k, &res, NULL, err, sizeof err) == 0 && res.step_s == 0.100 &&
                 res.efficiency == 1.0 && res.comm_s == 0,
             "1 rank: step %g, eff %g", res.step_s, res.efficiency);
    /* the bandwidth that gives 80 %: the projection at that factor gives 80 % */
    double x = tb_proj_bandwidth_factor(&p, &f, 2, &k, 0.8);
    tb_fabric g = f;
    g.intra_bw_GBps *= x;
    TB_CHECK(tb_project(&p, &g, 2, &k, &res, NULL, err, sizeof err) == 0, "project at x");
    TB_CHECK_CLOSE(res.efficiency, 0.8, 1e-6, 0, "efficiency at the implied bandwidth");
    TB_CHECK(x > 1, "80 %% needs more than the fabric's bandwidth (x = %g)", x);
    TB_CHECK(isnan(tb_proj_bandwidth_factor(&p, &f, 2, &k, 1.0)), "100 %% is out of reach with a last bucket");
    /* 2 ranks time-slicing one device (share=2): 2 x 100 ms of compute, then
     * both buckets one after the other (60 ms), nothing overlapped: 260 ms */
    k.share = 2;
    TB_CHECK(tb_project(&p, &f, 2, &k, &res, NULL, err, sizeof err) == 0, "project shared: %s", err);
    TB_CHECK_CLOSE(res.exposed_s, 0.060, 1e-12, 0, "shared: every bucket exposed");
    TB_CHECK_CLOSE(res.step_s, 0.260, 1e-12, 0, "shared: step = 2 x compute + the all-reduces");
    TB_CHECK_CLOSE(res.efficiency, 100.0 / 260.0, 0, 1e-12, "shared: efficiency against the 1-rank step");
    TB_CHECK_CLOSE(res.img_per_s, 16 / 0.260, 0, 1e-12, "shared: img/s of both ranks");
    /* one rank with share=2: alone on its device */
    TB_CHECK(tb_project(&p, &f, 1, &k, &res, NULL, err, sizeof err) == 0 && res.step_s == 0.100,
             "shared, 1 rank: step %g", res.step_s);
    /* share=4 on 2 ranks: only 2 share it (min(share, ranks)) */
    k.share = 4;
    TB_CHECK(tb_project(&p, &f, 2, &k, &res, NULL, err, sizeof err) == 0, "project share=4: %s", err);
    TB_CHECK_CLOSE(res.step_s, 0.260, 1e-12, 0, "share=4 on 2 ranks: as share=2");
    /* with batch x2: 2 x 170 ms of compute + 60: 400 ms, against the 170 ms 1-rank step */
    k.share = 2;
    k.batch_scale = 2;
    TB_CHECK(tb_project(&p, &f, 2, &k, &res, NULL, err, sizeof err) == 0, "project shared x2: %s", err);
    TB_CHECK_CLOSE(res.step_s, 0.400, 1e-12, 0, "shared at batch x2: step");
    TB_CHECK_CLOSE(res.efficiency, 170.0 / 400.0, 0, 1e-12, "shared at batch x2: efficiency");
}

/* ---- the fit -------------------------------------------------------------------------------- */

static double ring_time(int n, double bytes, double alpha, double bw) {
    return 2.0 * (n - 1) * alpha + 2.0 * (n - 1) / n * bytes / bw;
}

static void test_fit(void) {
    char err[512];
    tb_ar_sample s[64];
    tb_ab_fit fit;
    int n = 0;
    /* exact: 8 ranks, alpha 5 us, 50 GB/s, 8 B .. 128 MB */
    for (double b = 8; b <= 134217728; b *= 2, n++) s[n] = (tb_ar_sample){8, b, ring_time(8, b, 5e-6, 5e10)};
    TB_CHECK(tb_ab_fit_samples(s, n, &fit, err, sizeof err) == 0, "exact fit: %s", err);
    TB_CHECK_CLOSE(fit.alpha_s, 5e-6, 0, 1e-9, "alpha, exact table");
    TB_CHECK_CLOSE(fit.bw_GBps, 50.0, 0, 1e-9, "bandwidth, exact table");
    TB_CHECK(fit.used == n && fit.max_rel < 1e-9, "exact: %d used, max residual %g", fit.used, fit.max_rel);
    TB_CHECK_CLOSE(tb_ab_fit_time(&fit, 4, 1e6), ring_time(4, 1e6, 5e-6, 5e10), 0, 1e-9, "fitted time, 4 ranks");
    /* +-3 % alternating noise: within a few per cent */
    for (int i = 0; i < n; i++) s[i].seconds *= i % 2 ? 1.03 : 0.97;
    TB_CHECK(tb_ab_fit_samples(s, n, &fit, err, sizeof err) == 0, "noisy fit: %s", err);
    TB_CHECK_CLOSE(fit.alpha_s, 5e-6, 0, 0.05, "alpha, +-3 % noise");
    TB_CHECK_CLOSE(fit.bw_GBps, 50.0, 0, 0.05, "bandwidth, +-3 % noise");
    TB_CHECK(fit.max_rel > 0.02 && fit.max_rel < 0.06, "noisy residual %g", fit.max_rel);
    /* several rank counts, one fabric */
    n = 0;
    for (int r = 2; r <= 16; r *= 2)
        for (double b = 1024; b <= 67108864; b *= 16, n++) s[n] = (tb_ar_sample){r, b, ring_time(r, b, 20e-6, 1.5e9)};
    TB_CHECK(tb_ab_fit_samples(s, n, &fit, err, sizeof err) == 0, "mixed ranks: %s", err);
    TB_CHECK_CLOSE(fit.alpha_s, 20e-6, 0, 1e-9, "alpha, 2..16 ranks");
    TB_CHECK_CLOSE(fit.bw_GBps, 1.5, 0, 1e-9, "bandwidth, 2..16 ranks");
    /* one size only: bandwidth alone (alpha 0) */
    s[0] = (tb_ar_sample){2, 1e6, 1e-3};
    s[1] = (tb_ar_sample){2, 1e6, 1e-3};
    TB_CHECK(tb_ab_fit_samples(s, 2, &fit, err, sizeof err) == 0 && fit.alpha_s == 0, "one size: alpha 0");
    TB_CHECK_CLOSE(fit.bw_GBps, 1.0, 0, 1e-12, "one size: 1 MB in 1 ms on 2 ranks = 1 GB/s busbw");
    /* two sizes: both would fit exactly; the bandwidth alone is fitted */
    s[0] = (tb_ar_sample){2, 1e6, 1e-3 + 2e-3};
    s[1] = (tb_ar_sample){2, 2e6, 2e-3 + 2e-3};
    TB_CHECK(tb_ab_fit_samples(s, 2, &fit, err, sizeof err) == 0 && fit.alpha_s == 0 && fit.used == 2,
             "two timings: alpha 0 (got %g)", fit.alpha_s);
    /* too little to fit */
    s[0] = (tb_ar_sample){1, 1e6, 1e-3};
    TB_CHECK(tb_ab_fit_samples(s, 2, &fit, err, sizeof err) == -1 && strstr(err, "at least 2"),
             "one usable sample: '%s'", err);
}

static void test_fabric_files(void) {
    char path[1024], err[1024];
    tb_fabric f;
    TB_CHECK(tb_fabric_resolve("nvlink4-h100", &f, err, sizeof err) == 0 && f.intra_bw_GBps == 450 &&
                 f.ranks_per_node == 8 && strstr(f.source, "900 GB/s"),
             "preset nvlink4-h100 (%s)", err);
    TB_CHECK(tb_fabric_resolve("nvlink4-h100+ndr400x8", &f, err, sizeof err) == 0 && f.intra_bw_GBps == 450 &&
                 f.inter_bw_GBps == 400 && f.alpha_inter_us == 14.0 && f.base_us == 8.4 &&
                 strstr(f.source, "ConnectX-7"),
             "node + network (%s)", err);
    TB_CHECK(tb_fabric_resolve("ndr400x8+nvlink4-h100", &f, err, sizeof err) == -1 && strstr(err, "node first"),
             "network first: '%s'", err);
    for (int i = 0; i < tb_fabric_npresets; i++) {
        const tb_fabric *p = &tb_fabric_presets[i].f;
        TB_CHECK(strlen(p->source) > 20 && (p->intra_bw_GBps > 0 || p->inter_bw_GBps > 0),
                 "preset %s has a source and a rate", tb_fabric_presets[i].name);
    }
    snprintf(path, sizeof path, "%s/fabric.txt", g_tmp);
    tb_test_write_text(path, "# a cluster\nname = lab\nsource = our switch's datasheet\nranks_per_node = 4\n"
                     "intra_bw_GBps = 20   # PCIe\nalpha_intra_us = 6\ninter_bw_GBps = 12.5\nalpha_inter_us = 15\n");
    TB_CHECK(tb_fabric_resolve(path, &f, err, sizeof err) == 0 && strcmp(f.name, "lab") == 0 &&
                 f.ranks_per_node == 4 && f.intra_bw_GBps == 20 && f.alpha_intra_us == 6 && f.inter_bw_GBps == 12.5 &&
                 f.alpha_inter_us == 15 && strcmp(f.source, "our switch's datasheet") == 0,
             "fabric file (%s)", err);
    tb_test_write_text(path, "intra_bw_GBps = fast\n");
    TB_CHECK(tb_fabric_resolve(path, &f, err, sizeof err) == -1 && strstr(err, ":1: intra_bw_GBps wants a number"),
             "bad number: '%s'", err);
    tb_test_write_text(path, "speed = 3\n");
    TB_CHECK(tb_fabric_resolve(path, &f, err, sizeof err) == -1 && strstr(err, "unknown key 'speed'"),
             "unknown key: '%s'", err);
    tb_test_write_text(path, "ranks_per_node = 2\n");
    TB_CHECK(tb_fabric_resolve(path, &f, err, sizeof err) == -1 && strstr(err, "needs a bandwidth"),
             "no bandwidth: '%s'", err);
    TB_CHECK(tb_fabric_resolve("no-such-fabric", &f, err, sizeof err) == -1 && strstr(err, "--list-fabrics"),
             "unknown name: '%s'", err);
    TB_CHECK(tb_fabric_count_hosts("tbh1 (1 rank), tbh2 (1 rank), tbh3 (1 rank)") == 3 &&
                 tb_fabric_count_hosts("vm (2 ranks)") == 1 && tb_fabric_count_hosts("") == 0 &&
                 tb_fabric_count_hosts("n0 (8 ranks), n1 (8 ranks), ... and 598 more") == 600,
             "hosts in a hostnames attribute");
}

/* ---- the model's gradient layout ------------------------------------------------------------- */

static void test_model_ranges(void) {
    tb_grad_range *r;
    int n;
    double n_train, n_state;
    char err[512];
    TB_CHECK(tb_proj_model_ranges("resnet18", 1000, 224, 4, &r, &n, &n_train, &n_state, err, sizeof err) == 0,
             "resnet18: %s", err);
    TB_CHECK(n_train == 11689512 && n_state == 9600, "resnet18: %g trainable, %g statistics", n_train, n_state);
    double bytes = 0, prev = 0, end = 0;
    int monotone = 1;
    for (int i = 0; i < n; i++) {
        bytes += r[i].bytes;
        monotone &= r[i].ready_s >= prev && r[i].ready_s <= 1.0;
        prev = r[i].ready_s;
        end = fmax(end, r[i].offset + r[i].bytes);
    }
    TB_CHECK(bytes == 4 * n_train && end == 4 * n_train, "ranges cover the buffer: %g bytes, end %g", bytes, end);
    TB_CHECK(monotone && r[n - 1].ready_s == 1.0, "ready fractions rise to 1");
    TB_CHECK(n == 20 + 20 + 1 && r[0].offset + r[0].bytes == 4 * n_train && r[n - 1].offset == 0,
             "backward order: fc first, conv1 last (%d ranges)", n);
    /* fc and layer4 are done early: layer4.x holds about 72 % of the bytes */
    TB_CHECK(r[0].ready_s < 0.01, "fc's gradient is ready at once (%g)", r[0].ready_s);
    free(r);
    TB_CHECK(tb_proj_model_ranges("vgg16", 1000, 224, 4, &r, &n, &n_train, &n_state, err, sizeof err) == -1 &&
                 strstr(err, "vgg16"),
             "unknown model: '%s'", err);
}

static void test_profile_file(void) {
    char path[1024], err[1024];
    tb_proj_profile p;
    tb_proj_published pub[TB_PROJ_MAX_MEASURED];
    int npub;
    snprintf(path, sizeof path, "%s/profile.txt", g_tmp);
    tb_test_write_text(path, "name = test run\nmodel = resnet50\nclasses = 1000\nimage_size = 224\nbatch_size = 128\n"
                     "step_ms = 465\nforward_ms = 140\nbackward_ms = 280\noptimizer_ms = 10\ndata_ms = 35\n"
                     "bucket_mb = 25\nmeasured = 4:0.883:NVLink on\nmeasured = 4:0.61:NVLink off\n");
    TB_CHECK(tb_proj_profile_from_file(path, &p, pub, &npub, err, sizeof err) == 0, "profile: %s", err);
    TB_CHECK(p.grad_bytes == 4.0 * 25557032 && p.nranges > 100 && fabs(p.backward_s - 0.280) < 1e-12 &&
                 p.bucket_bytes == 25 * 1048576.0 && p.batch == 128,
             "resnet50 profile: %g bytes, %d ranges", p.grad_bytes, p.nranges);
    TB_CHECK(npub == 2 && pub[0].ranks == 4 && pub[0].efficiency == 0.883 && strcmp(pub[1].label, "NVLink off") == 0,
             "published points (%d)", npub);
    TB_CHECK(fabs(p.ranges[p.nranges - 1].ready_s - 0.280) < 1e-12, "the last range is ready when backward ends");
    tb_proj_profile_free(&p);
    tb_test_write_text(path, "model = resnet50\nbatch_size = 128\nstep_ms = 465\nforward_ms = 140\n");
    TB_CHECK(tb_proj_profile_from_file(path, &p, pub, &npub, err, sizeof err) == -1 && strstr(err, "backward_ms"),
             "missing backward: '%s'", err);
    tb_test_write_text(path, "model = resnet50\nmeasured = 4\n");
    TB_CHECK(tb_proj_profile_from_file(path, &p, pub, &npub, err, sizeof err) == -1 && strstr(err, ":2: measured"),
             "bad measured line: '%s'", err);
}

/* Buckets of no bytes (tensors of size 0): NCCL returns at once, so they cost nothing. */
static void test_empty_buckets(void) {
    tb_grad_range r[4];
    tb_proj_profile p = hand_profile(r);
    for (int i = 0; i < 4; i++) r[i].bytes = 0;
    p.grad_bytes = 0;
    tb_fabric f = fab(8, 450, 3.4, 0, 0);
    f.base_us = 8.4;
    tb_proj_knobs k = tb_proj_knobs_of(&p);
    tb_proj_result res;
    char err[512];
    TB_CHECK(tb_project(&p, &f, 8, &k, &res, NULL, err, sizeof err) == 0, "project: %s", err);
    TB_CHECK(res.comm_s == 0 && res.exposed_s == 0 && isnan(res.busbw_GBps),
             "empty buckets: no all-reduce time, no bus bandwidth (comm %g s, exposed %g s, busbw %g)", res.comm_s,
             res.exposed_s, res.busbw_GBps);
}

int main(int argc, char **argv) {
    if (argc > 1) g_tmp = argv[1];
    test_costs();
    test_buckets();
    test_step();
    test_empty_buckets();
    test_fit();
    test_fabric_files();
    test_model_ranges();
    test_profile_file();
    return tb_test_exit("test_project");
}
