/* fabric.c - fabric presets, fabric files, and the alpha-beta fit to
 * measured all-reduce times (see fabric.h). */
#include "src/project/fabric.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/keyval.h"
#include "core/log.h"

/* ---- presets ------------------------------------------------------------------------------- */

/* Bandwidths are datasheet rates per direction, so a prediction from a
 * preset is what the wires allow, not what a library reaches on them (NCCL
 * typically reports 80-95 % of these as busbw; measure and use fit: for the
 * real figure). Latencies per ring step are NCCL's own tuning constants for
 * the Simple protocol (NCCL src/graph/tuning.cc, hwLatencies, the same from
 * 2.18 to 2.30: NVLink ring 3.4 us, PCI ring 5.7 us, network ring 14.0 us),
 * and every NCCL collective pays its base latency once (baseLatencies, ring
 * and tree Simple: 8.4 us). Not modelled: NVLink SHARP (NVLS), NCCL's
 * default all-reduce on H100/H200 nodes (~480 GB/s busbw on 8 GPUs, where
 * its ring reaches ~370 of the 450 GB/s line rate: NVIDIA/nccl-tests#212):
 * these presets give the line rate, between the two. The emulated hosts are the
 * network-namespace hosts of tests/multihost/ (one rank each), with the
 * rates and round trips measured in results/multihost_scaling.md. */
const tb_fabric_preset tb_fabric_presets[] = {
    /* PCI Express Base Specification 4.0 (PCI-SIG, 2017): 16 GT/s per lane,
     * 128b/130b encoding -> 16 x 16e9 x 128/130 / 8 = 31.5 GB/s per direction.
     * Host-staged (no P2P: device -> host memory -> device): each byte still
     * crosses each GPU's link once per direction, so the link rate bounds
     * the ring; the host memory copy itself is not modelled. */
    {"pcie4", "PCIe Gen4 x16 per GPU, host-staged, 8 GPUs per node",
     {"pcie4", "PCI-SIG PCIe Base Spec 4.0: 16 GT/s x16, 128b/130b = 31.5 GB/s per direction; "
               "latency: NCCL tuning.cc PCI ring 5.7 us, base 8.4 us",
      8, 31.5, 5.7, 0, 0, 8.4}},
    /* PCI Express Base Specification 5.0 (PCI-SIG, 2019): 32 GT/s per lane. */
    {"pcie5", "PCIe Gen5 x16 per GPU, host-staged, 8 GPUs per node",
     {"pcie5", "PCI-SIG PCIe Base Spec 5.0: 32 GT/s x16, 128b/130b = 63.0 GB/s per direction; "
               "latency: NCCL tuning.cc PCI ring 5.7 us, base 8.4 us",
      8, 63.0, 5.7, 0, 0, 8.4}},
    /* NVIDIA H100 Tensor Core GPU datasheet: SXM5 NVLink 900 GB/s (18 NVLink 4
     * links, total of both directions) -> 450 GB/s per direction. */
    {"nvlink4-h100", "NVLink 4, H100 SXM5, 8 GPUs per node (NVSwitch)",
     {"nvlink4-h100", "NVIDIA H100 datasheet: NVLink 900 GB/s total = 450 GB/s per direction; "
                      "latency: NCCL tuning.cc NVLink ring 3.4 us, base 8.4 us",
      8, 450.0, 3.4, 0, 0, 8.4}},
    /* NVIDIA H800 SXM5 (the export variant of the H100): NVLink 400 GB/s
     * total -> 200 GB/s per direction. */
    {"nvlink4-h800", "NVLink 4 at the H800's reduced rate, 8 GPUs per node",
     {"nvlink4-h800", "NVIDIA H800 SXM5 specification: NVLink 400 GB/s total = 200 GB/s per "
                      "direction; latency: NCCL tuning.cc NVLink ring 3.4 us, base 8.4 us",
      8, 200.0, 3.4, 0, 0, 8.4}},
    /* NVIDIA A100 Tensor Core GPU datasheet: SXM4 NVLink 600 GB/s total. */
    {"nvlink3-a100", "NVLink 3, A100 SXM4, 8 GPUs per node (NVSwitch)",
     {"nvlink3-a100", "NVIDIA A100 datasheet: NVLink 600 GB/s total = 300 GB/s per direction; "
                      "latency: NCCL tuning.cc NVLink ring 3.4 us, base 8.4 us",
      8, 300.0, 3.4, 0, 0, 8.4}},
    /* InfiniBand NDR: 400 Gb/s per port (IBTA); DGX H100 user guide: eight
     * single-port ConnectX-7 NDR adapters for the compute fabric, one per
     * GPU -> 8 x 50 GB/s = 400 GB/s per node and direction. */
    {"ndr400x8", "InfiniBand NDR 400 Gb/s x 8 NICs per node (DGX H100 compute fabric)",
     {"ndr400x8", "IBTA NDR 400 Gb/s per port; NVIDIA DGX H100 User Guide: 8 x ConnectX-7 NDR = "
                  "400 GB/s per node and direction; latency: NCCL 2.18-2.30 tuning.cc network ring 14.0 us",
      8, 0, 0, 400.0, 14.0, 8.4}},
    /* InfiniBand HDR: 200 Gb/s per port (IBTA); DGX A100 user guide: eight
     * single-port ConnectX-6 HDR adapters for the compute fabric. */
    {"hdr200x8", "InfiniBand HDR 200 Gb/s x 8 NICs per node (DGX A100 compute fabric)",
     {"hdr200x8", "IBTA HDR 200 Gb/s per port; NVIDIA DGX A100 User Guide: 8 x ConnectX-6 HDR = "
                  "200 GB/s per node and direction; latency: NCCL 2.18-2.30 tuning.cc network ring 14.0 us",
      8, 0, 0, 200.0, 14.0, 8.4}},
    /* RoCE v2 on two 200 Gb/s Ethernet ports (IEEE 802.3bs/cd 200GbE),
     * e.g. one dual-port ConnectX-6 Dx / ConnectX-7 per node. */
    {"roce200x2", "RoCE v2, 200 Gb/s Ethernet x 2 ports per node",
     {"roce200x2", "IEEE 802.3 200GbE x 2 ports = 50 GB/s per node and direction; latency: NCCL "
                   "2.18-2.30 tuning.cc network ring 14.0 us",
      8, 0, 0, 50.0, 14.0, 8.4}},
    /* tests/multihost emulated hosts, one rank per host (results/multihost_scaling.md):
     * veth + bridge unshaped: 23,808 Mbit/s for one TCP stream, 69 us round trip. */
    {"emu-unshaped", "emulated hosts (netns, veth + bridge), unshaped, 1 rank per host",
     {"emu-unshaped", "results/multihost_scaling.md link probe: one TCP stream 23,808 Mbit/s "
                      "(2.976 GB/s), round trip 69 us (alpha = half)",
      1, 2.976, 35.0, 2.976, 35.0, 0}},
    /* tc tbf at 1gbit on each host's uplink and downlink; probe 955 Mbit/s, 74 us. */
    {"emu-1gbit", "emulated hosts, tc tbf 1 Gbit/s per host and direction, 1 rank per host",
     {"emu-1gbit", "tests/multihost/hosts.sh --rate 1gbit (tc tbf, both directions); "
                   "results/multihost_scaling.md: probe 955 Mbit/s, round trip 74 us",
      1, 0.125, 37.0, 0.125, 37.0, 0}},
    {"emu-100mbit", "emulated hosts, tc tbf 100 Mbit/s per host and direction, 1 rank per host",
     {"emu-100mbit", "tests/multihost/hosts.sh --rate 100mbit (tc tbf, both directions); "
                     "results/multihost_scaling.md: probe 97 Mbit/s, round trip 74 us",
      1, 0.0125, 37.0, 0.0125, 37.0, 0}},
    /* hosts.sh --delay 2ms: netem on each host's uplink, +2 ms per one-way trip. */
    {"emu-delay2ms", "emulated hosts, unshaped rate, netem 2 ms on each uplink, 1 rank per host",
     {"emu-delay2ms", "tests/multihost/hosts.sh --delay 2ms (netem, +2 ms one way); rate as "
                      "emu-unshaped (2.976 GB/s)",
      1, 2.976, 2035.0, 2.976, 2035.0, 0}},
};
const int tb_fabric_npresets = (int)(sizeof tb_fabric_presets / sizeof tb_fabric_presets[0]);

static const tb_fabric *find_preset(const char *name) {
    for (int i = 0; i < tb_fabric_npresets; i++)
        if (strcmp(tb_fabric_presets[i].name, name) == 0) return &tb_fabric_presets[i].f;
    return NULL;
}

/* ---- the fit ------------------------------------------------------------------------------- */

int tb_ab_fit_samples(const tb_ar_sample *s, int n, tb_ab_fit *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    /* t = x1 alpha + x2 beta, x1 = 2(n-1), x2 = 2(n-1)/n S; weights 1/t^2 */
    double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
    int used = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].ranks < 2 || !(s[i].bytes > 0) || !(s[i].seconds > 0)) continue;
        double x1 = 2.0 * (s[i].ranks - 1), x2 = x1 / s[i].ranks * s[i].bytes;
        double w = 1.0 / (s[i].seconds * s[i].seconds);
        a11 += w * x1 * x1;
        a12 += w * x1 * x2;
        a22 += w * x2 * x2;
        b1 += w * x1 * s[i].seconds;
        b2 += w * x2 * s[i].seconds;
        used++;
    }
    if (used < 2) {
        snprintf(err, errlen, "the fit needs at least 2 all-reduce timings on 2 or more ranks, got %d", used);
        return -1;
    }
    double det = a11 * a22 - a12 * a12;
    double alpha = 0, beta = 0;
    if (fabs(det) > 1e-12 * a11 * a22) {
        alpha = (b1 * a22 - b2 * a12) / det;
        beta = (a11 * b2 - a12 * b1) / det;
    }
    /* one message size only, noise, or two timings (which any alpha/beta pair
     * fits exactly, however absurd): the bandwidth alone */
    if (used <= 2 || !(alpha > 0) || !(beta > 0)) {
        alpha = 0;
        beta = b2 / a22;
    }
    if (!(beta > 0)) {
        snprintf(err, errlen, "the all-reduce timings do not grow with the message size; no bandwidth fits");
        return -1;
    }
    out->alpha_s = alpha;
    out->beta_s_per_byte = beta;
    out->bw_GBps = 1e-9 / beta;
    out->used = used;
    double ss = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].ranks < 2 || !(s[i].bytes > 0) || !(s[i].seconds > 0)) continue;
        double r = (tb_ab_fit_time(out, s[i].ranks, s[i].bytes) - s[i].seconds) / s[i].seconds;
        ss += r * r;
        if (fabs(r) > out->max_rel) out->max_rel = fabs(r);
    }
    out->rms_rel = sqrt(ss / used);
    return 0;
}

double tb_ab_fit_time(const tb_ab_fit *fit, int ranks, double bytes) {
    if (ranks < 2) return 0;
    double steps = 2.0 * (ranks - 1);
    return steps * fit->alpha_s + steps / ranks * bytes * fit->beta_s_per_byte;
}

void tb_fabric_from_fit(tb_fabric *f, const tb_ab_fit *fit, int ranks, int hosts, const char *what) {
    memset(f, 0, sizeof *f);
    double bw = fit->bw_GBps, lat = 1e6 * fit->alpha_s;
    snprintf(f->name, sizeof f->name, "fit");
    if (hosts <= 1) { /* every rank on one host: the node's links, as far as they were measured; no network */
        f->ranks_per_node = ranks;
        f->intra_bw_GBps = bw;
        f->alpha_intra_us = lat;
    } else {
        f->ranks_per_node = ranks / hosts > 0 ? ranks / hosts : 1;
        f->inter_bw_GBps = bw;
        f->alpha_inter_us = lat;
        /* with one rank per host there is no intra-node link to describe */
        f->intra_bw_GBps = bw;
        f->alpha_intra_us = lat;
    }
    snprintf(f->source, sizeof f->source,
             "least-squares fit of t = 2(n-1) alpha + 2(n-1)/n S / B to %d all-reduce timing%s of %s "
             "(%d rank%s on %d host%s): alpha %.2f us, B %.4g GB/s, residual rms %.1f %% max %.1f %%%s",
             fit->used, fit->used == 1 ? "" : "s", what, ranks, ranks == 1 ? "" : "s", hosts,
             hosts == 1 ? "" : "s", lat, bw, 100 * fit->rms_rel, 100 * fit->max_rel,
             fit->used <= 2 ? " (two timings: bandwidth only, alpha taken as 0)" : "");
}

/* ---- files and names ---------------------------------------------------------------------- */


/* Why a fabric file's number cannot describe a real link (NULL: it can). Any
 * finite value >= 0 used to pass: 'intra_bw_GBps = 1e-30' printed step times
 * of 30 digits, 'ranks_per_node = 1e30' overflowed the int it is stored in and
 * 'ranks_per_node = 0.5' quietly meant "every rank in one node". */
static const char *fabric_value_check(const char *key, double v) {
    if (strcmp(key, "ranks_per_node") == 0)
        return v != floor(v) || v > 1048576 ? "a whole number of ranks from 0 (unknown) to 1048576" : NULL;
    if (strstr(key, "_bw_GBps"))
        return v != 0 && (v < 1e-4 || v > 1e5) ? "0 (none) or 1e-4 to 1e5 GB/s (100 kB/s to 100 TB/s)" : NULL;
    if (strstr(key, "_us")) return v > 1e6 ? "0 to 1e6 us (1 s) of latency" : NULL;
    return NULL;
}

static int read_fabric_file(const char *path, tb_fabric *f, char *err, size_t errlen) {
    FILE *in = fopen(path, "r");
    if (!in) {
        snprintf(err, errlen,
                 "--fabric '%s' is neither a preset nor a readable file (%s); presets: see "
                 "'trainbench project --list-fabrics'",
                 path, strerror(errno));
        return -1;
    }
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", path);
    snprintf(f->source, sizeof f->source, "fabric file %s", path);
    char line[1024];
    int lineno = 0, have_bw = 0;
    while (fgets(line, sizeof line, in)) {
        lineno++;
        char *key, *val;
        int got = tb_keyval_line(line, path, lineno, &key, &val, err, errlen);
        if (got == 0) continue;
        if (got < 0) {
            fclose(in);
            return -1;
        }
        if (strcmp(key, "name") == 0) {
            snprintf(f->name, sizeof f->name, "%s", val);
            continue;
        }
        if (strcmp(key, "source") == 0) {
            snprintf(f->source, sizeof f->source, "%s", val);
            continue;
        }
        double v;
        if (tb_keyval_number(val, &v) != 0) {
            snprintf(err, errlen, "%s:%d: %s wants a number >= 0, got '%s'", path, lineno, key, val);
            fclose(in);
            return -1;
        }
        const char *bad = fabric_value_check(key, v);
        if (bad) {
            snprintf(err, errlen, "%s:%d: %s = %s is out of range: %s", path, lineno, key, val, bad);
            fclose(in);
            return -1;
        }
        if (strcmp(key, "ranks_per_node") == 0) f->ranks_per_node = (int)v;
        else if (strcmp(key, "intra_bw_GBps") == 0) f->intra_bw_GBps = v, have_bw |= v > 0;
        else if (strcmp(key, "alpha_intra_us") == 0) f->alpha_intra_us = v;
        else if (strcmp(key, "inter_bw_GBps") == 0) f->inter_bw_GBps = v, have_bw |= v > 0;
        else if (strcmp(key, "alpha_inter_us") == 0) f->alpha_inter_us = v;
        else if (strcmp(key, "base_us") == 0) f->base_us = v;
        else {
            snprintf(err, errlen,
                     "%s:%d: unknown key '%s' (known: name, source, ranks_per_node, intra_bw_GBps, "
                     "alpha_intra_us, inter_bw_GBps, alpha_inter_us, base_us)",
                     path, lineno, key);
            fclose(in);
            return -1;
        }
    }
    fclose(in);
    if (!have_bw) {
        snprintf(err, errlen, "%s: no intra_bw_GBps or inter_bw_GBps above 0: the fabric needs a bandwidth", path);
        return -1;
    }
    return 0;
}

static int resolve_one(const char *spec, tb_fabric *f, char *err, size_t errlen) {
    const tb_fabric *p = find_preset(spec);
    if (p) {
        *f = *p;
        return 0;
    }
    if (strncmp(spec, "fit:", 4) == 0) {
        tb_ar_sample *s;
        int ranks, hosts;
        int n = tb_fabric_read_bench(spec + 4, &s, &ranks, &hosts, err, errlen);
        if (n < 0) return -1;
        if (ranks < 2) { /* said "the fit needs at least 2 all-reduce timings ..., got 0", naming no file */
            free(s);
            snprintf(err, errlen,
                     "--fabric %s: '%s' was measured on %d rank, where an all-reduce moves nothing; fit a run "
                     "of 2 or more ('mpirun -np N trainbench allreduce-bench --results FILE')",
                     spec, spec + 4, ranks);
            return -1;
        }
        tb_ab_fit fit;
        int rc = tb_ab_fit_samples(s, n, &fit, err, errlen);
        free(s);
        if (rc != 0) return -1;
        tb_fabric_from_fit(f, &fit, ranks, hosts, spec + 4);
        snprintf(f->name, sizeof f->name, "%.90s", spec);
        return 0;
    }
    return read_fabric_file(spec, f, err, errlen);
}

int tb_fabric_resolve(const char *spec, tb_fabric *f, char *err, size_t errlen) {
    const char *plus = strchr(spec, '+');
    if (!plus || strncmp(spec, "fit:", 4) == 0) return resolve_one(spec, f, err, errlen);
    char a[4096];
    snprintf(a, sizeof a, "%.*s", (int)(plus - spec), spec);
    tb_fabric node, net;
    if (resolve_one(a, &node, err, errlen) != 0 || resolve_one(plus + 1, &net, err, errlen) != 0) return -1;
    if (!(node.intra_bw_GBps > 0)) {
        snprintf(err, errlen, "--fabric %s: '%s' describes no intra-node link (put the node first)", spec, a);
        return -1;
    }
    if (!(net.inter_bw_GBps > 0)) {
        snprintf(err, errlen, "--fabric %s: '%s' describes no network (put the network second)", spec, plus + 1);
        return -1;
    }
    *f = node;
    f->inter_bw_GBps = net.inter_bw_GBps;
    f->alpha_inter_us = net.alpha_inter_us;
    f->base_us = fmax(node.base_us, net.base_us);
    if (f->ranks_per_node <= 0) f->ranks_per_node = net.ranks_per_node;
    snprintf(f->name, sizeof f->name, "%.90s", spec);
    snprintf(f->source, sizeof f->source, "node: %.240s; network: %.240s", node.source, net.source);
    return 0;
}

void tb_fabric_describe(const tb_fabric *f, char *buf, size_t len) {
    char rpn[32] = "all ranks in one node";
    if (f->ranks_per_node > 0) snprintf(rpn, sizeof rpn, "%d rank%s per node", f->ranks_per_node,
                                        f->ranks_per_node == 1 ? "" : "s");
    char intra[96] = "", inter[96] = "no network described";
    if (f->intra_bw_GBps > 0 && f->ranks_per_node != 1)
        snprintf(intra, sizeof intra, "node links %.4g GB/s, %.3g us per step; ", f->intra_bw_GBps,
                 f->alpha_intra_us);
    if (f->inter_bw_GBps > 0)
        snprintf(inter, sizeof inter, "network %.4g GB/s per node, %.3g us per step", f->inter_bw_GBps,
                 f->alpha_inter_us);
    char base[48] = "";
    if (f->base_us > 0) snprintf(base, sizeof base, "; %.3g us per collective", f->base_us);
    snprintf(buf, len, "%s: %s%s%s; %s", f->name, intra, inter, base, rpn);
}
