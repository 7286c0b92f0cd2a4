/* provenance.c - versions, command line and hosts for results files. */
#include "src/results/provenance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/nccl.h"
#include "core/cpu_dispatch.h"
#include "core/cpu_features.h"
#include "core/version.h"
#include "data/jpeg.h"
#include "model/cpu/cpu_blas.h"
#include "src/device/device.h"
#include "src/results/h5io.h"

extern char **environ;

/* The variables this process has whose names start with prefix,
 * "NAME=value" joined by spaces in environment order. */
static void vars_with_prefix(const char *prefix, char *set, size_t set_len) {
    size_t used = 0, n = strlen(prefix);
    set[0] = '\0';
    for (char **e = environ; *e && used < set_len; e++)
        if (strncmp(*e, prefix, n) == 0) used += (size_t)snprintf(set + used, set_len - used, "%s%s", used ? " " : "", *e);
}

/* The NCCL_* variables this process has, "NAME=value" joined by spaces in
 * environment order, and the ones that matter most that it lacks (NCCL's
 * defaults then apply): what the results file must show of NCCL's setup. */
static void nccl_environment(char *set, size_t set_len, char *unset, size_t unset_len) {
    static const char *const key[] = {"NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX",
                                      "NCCL_IB_TC", "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", "NCCL_IB_DISABLE",
                                      "NCCL_NET", "NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL", "NCCL_ALGO",
                                      "NCCL_PROTO"};
    vars_with_prefix("NCCL_", set, set_len);
    size_t used = 0;
    unset[0] = '\0';
    for (size_t i = 0; i < sizeof key / sizeof key[0] && used < unset_len; i++)
        if (!getenv(key[i])) used += (size_t)snprintf(unset + used, unset_len - used, "%s%s", used ? " " : "", key[i]);
}

/* Which libnccl file runs (a slim build of tests/gpu/slim_nccl.sh says
 * what it holds): two installs of one version are told apart. */
static void nccl_library(tb_attrs *a) {
    char path[1024], slim[800], buf[1900];
    tb_nccl_library(path, sizeof path, slim, sizeof slim);
    snprintf(buf, sizeof buf, "%s%s%s", path, slim[0] ? "; " : "", slim);
    tb_attrs_str(a, "nccl_library", buf);
}

/* The GPU libraries' versions: what runs, and what trainbench was built
 * against (probe's version checks, src/device/gpu_versions.h). */
static void gpu_versions(tb_attrs *a) {
    tb_probe_gpu p;
    memset(&p, 0, sizeof p);
    tb_probe_gpu_versions(&p);
    char buf[256];
    snprintf(buf, sizeof buf, "%d.%d", p.runtime_version / 1000, p.runtime_version % 1000 / 10);
    tb_attrs_str(a, "cuda_runtime_version", buf);
    char drv[64] = "";
    int cuda = 0;
    char err[256];
    tb_nvml *nv = tb_nvml_open(err, sizeof err);
    if (nv) tb_nvml_driver_version(nv, drv, sizeof drv, &cuda);
    tb_nvml_close(nv);
    snprintf(buf, sizeof buf, "%d.%d%s%s%s", p.driver_version / 1000, p.driver_version % 1000 / 10,
             drv[0] ? " (driver " : "", drv, drv[0] ? ")" : "");
    tb_attrs_str(a, "cuda_driver_version", p.driver_version ? buf : "none (no NVIDIA driver)");
    const char *keys[] = {NULL, "cudnn_version", NULL, "cublas_version", "nccl_version"};
    for (int i = 0; i < p.nlibs; i++) {
        const tb_lib_check *c = &p.libs[i];
        if (i >= 5 || !keys[i]) continue;
        snprintf(buf, sizeof buf, "%s (built with %s; %s)", c->loaded_s, c->compiled_s, tb_verdict_name(c->verdict));
        tb_attrs_str(a, keys[i], buf);
    }
    if (p.cublas_path[0]) tb_attrs_str(a, "cublas_library", p.cublas_path);
}

/* The CPU's vector units and the BLAS kernels running (rank 0's). */
static void cpu_attrs(tb_attrs *a) {
    const tb_cpu_features *f = tb_cpu_features_get();
    char buf[256];
    tb_cpu_features_str(f, buf, sizeof buf);
    tb_attrs_str(a, "cpu_features", buf);
    tb_attrs_str(a, "cpu_isa_level", tb_cpu_isa_name(tb_cpu_isa_best(f)));
    const tb_cpu_blas_info *b = tb_cpu_blas_info_get();
    tb_attrs_str(a, "blas_kernels", b->kernels);
    tb_cpu_blas_origin_str(b, buf, sizeof buf);
    tb_attrs_str(a, "blas_kernels_origin", buf);
    tb_attrs_int(a, "blas_threads_per_call", b->threads);
}

void tb_provenance_cpu_dispatch(tb_attrs *a) {
    char buf[256];
    tb_attrs_str(a, "cpu_dispatch_level", tb_cpu_isa_name(tb_cpu_level()));
    tb_cpu_dispatch_describe(buf, sizeof buf);
    tb_attrs_str(a, "cpu_dispatch", buf);
}

/* command_line: "trainbench <sub> args...": the arguments as the user typed them, the program path shortened
 * to its name and the subcommand written out where the default (train) was taken. */
static void command_line(tb_attrs *a, const char *subcommand, int argc, char **argv) {
    char buf[4096];
    size_t used = (size_t)snprintf(buf, sizeof buf, "trainbench %s", subcommand);
    for (int i = 0; i < argc && used < sizeof buf; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, " %s", argv[i]);
    tb_attrs_str(a, "command_line", buf);
}

void tb_provenance_head(tb_attrs *a, const char *subcommand, int argc, char **argv, const char *t_start,
                        const char *host) {
    char buf[4096], t_end[32];
    tb_utc_now(t_end, sizeof t_end);
    tb_attrs_str(a, "kind", subcommand);
    tb_attrs_str(a, "trainbench_version", tb_version_string);
    tb_attrs_str(a, "git_revision", tb_git_revision);
    command_line(a, subcommand, argc, argv);
    tb_attrs_str(a, "start_time", t_start);
    tb_attrs_str(a, "end_time", t_end);
    tb_attrs_str(a, "status", "complete");
    tb_attrs_str(a, "hostnames", host);
    tb_h5_library_version(buf, sizeof buf);
    tb_attrs_str(a, "hdf5_version", buf);
}

int tb_provenance_distinct(char *buf, size_t len, const char *names, size_t stride, int world, int counted) {
    enum { TAIL = 48 }; /* room kept for "; ... and 12345 more" while more names follow */
    size_t used = 0;
    int kinds = 0, shown = 0;
    buf[0] = '\0';
    for (int r = 0; r < world; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = strcmp(names + stride * q, names + stride * r) == 0;
        kinds += !seen;
    }
    for (int r = 0; r < world; r++) {
        const char *h = names + stride * r;
        int seen = 0, count = 0;
        for (int q = 0; q < r && !seen; q++) seen = strcmp(names + stride * q, h) == 0;
        if (seen) continue;
        for (int q = r; q < world; q++) count += strcmp(names + stride * q, h) == 0;
        const char *sep = used == 0 ? "" : counted ? ", " : "; ";
        char one[400];
        if (counted || kinds > 1)
            snprintf(one, sizeof one, "%s%.300s (%d rank%s)", sep, h, count, count > 1 ? "s" : "");
        else
            snprintf(one, sizeof one, "%.300s", h);
        size_t n = strlen(one);
        if (used + n + (shown + 1 < kinds ? TAIL : 0) >= len) { /* the rest said as a count, never cut mid-name */
            snprintf(buf + used, len - used, "%s... and %d more", sep, kinds - shown);
            break;
        }
        memcpy(buf + used, one, n + 1);
        used += n;
        shown++;
    }
    return kinds;
}

void tb_provenance_fill(tb_attrs *a, const char *subcommand, int argc, char **argv, const tb_backend *be,
                        int world, const char *hosts, const char *devices) {
    char buf[4096];
    tb_attrs_str(a, "trainbench_version", tb_version_string);
    tb_attrs_str(a, "git_revision", tb_git_revision);

    command_line(a, subcommand, argc, argv);

    tb_attrs_int(a, "world_size", world);
    tb_provenance_distinct(buf, sizeof buf, hosts, 64, world, 1);
    tb_attrs_str(a, "hostnames", buf);
    tb_attrs_str(a, "backend", be->name);
    if (devices) tb_provenance_distinct(buf, sizeof buf, devices, TB_DEVICE_NAME_MAX, world, 0);
    tb_attrs_str(a, "device_names", devices ? buf : be->device);
    tb_attrs_str(a, "compute_libraries", be->versions);
    cpu_attrs(a);
    if (strcmp(be->name, "cuda") == 0) {
        gpu_versions(a);
        if (!tb_nccl_built()) tb_attrs_str(a, "nccl_version", "none (built without NCCL: MPI staged through the host)");
        else nccl_library(a);
    } else {
        tb_attrs_str(a, "cuda_runtime_version", "none (CPU backend)");
        tb_attrs_str(a, "cuda_driver_version", "none (CPU backend)");
        tb_attrs_str(a, "cudnn_version", "none (CPU backend)");
        tb_attrs_str(a, "nccl_version", "none (MPI all-reduce on host buffers)");
    }
    char set[2048], unset[512];
    nccl_environment(set, sizeof set, unset, sizeof unset);
    tb_attrs_str(a, "nccl_environment", set[0] ? set : "(no NCCL_* variable set)");
    tb_attrs_str(a, "nccl_environment_unset", unset[0] ? unset : "(all set)");
    /* TB_*: the switches that change which kernels run (TB_CONV_API, TB_BN_KERNELS, TB_FUSED_CANDIDATES) */
    vars_with_prefix("TB_", set, sizeof set);
    tb_attrs_str(a, "trainbench_environment", set[0] ? set : "(no TB_* variable set)");
    tb_comm_library_version(buf, sizeof buf);
    tb_attrs_str(a, "mpi_version", buf);
    tb_h5_library_version(buf, sizeof buf);
    tb_attrs_str(a, "hdf5_version", buf);
    tb_attrs_str(a, "libjpeg_turbo_version", tb_jpeg_version());
    tb_provenance_cpu_dispatch(a);
}

void tb_provenance_cpu_probe(tb_attrs *a, const tb_probe_cpu *p) {
    tb_attrs_str(a, "cpu_model", p->model);
    tb_attrs_str(a, "cpu_features", p->units);
    tb_attrs_str(a, "cpu_isa_level", p->level);
    tb_attrs_str(a, "blas_kernels", p->kernels);
    tb_attrs_str(a, "blas_kernels_origin", p->kernels_origin);
    tb_attrs_str(a, "blas_config", tb_cpu_blas_info_get()->config);
    tb_attrs_int(a, "cpu_sgemm_n", p->n);
    tb_attrs_int(a, "cpu_sgemm_cores", p->cores);
    tb_attrs_num(a, "cpu_sgemm_ms", p->ms);
    tb_attrs_num(a, "cpu_sgemm_gflops", p->ms < 0 ? -1 : p->gflops);
    tb_attrs_num(a, "cpu_peak_gflops", p->peak_gflops);
    tb_attrs_num(a, "cpu_clock_ghz", p->ghz);
}
