/* cmd_probe.c - `trainbench probe`: is this GPU stack assembled right, and
 * what are its two ceilings?
 *
 *   trainbench probe [--device N] [--quick] [--expect-gpu] [--results FILE]
 *
 * Prints, as `#` lines, SEEDS.md section 3's self-check: the CUDA driver
 * against the runtime trainbench was built with, cuDNN, cuBLAS and NCCL
 * compiled against vs loaded (one warning line per mismatch), the GPU's
 * name, memory, SMs, clocks, PCIe link and NVLink links (NVML, loaded at
 * run time), then one table of measurements each beside its datasheet
 * ceiling: pinned host-to-device and device-to-host copies at 4 MiB and
 * 256 MiB, device-to-device bandwidth (read + write), and GEMM TFLOP/s in
 * fp32, tf32 and bf16 at 4096 and 8192; and for the CPU backend the CPU's
 * vector units, the BLAS kernels running and one SGEMM beside the CPU's
 * peak (probe_cpu.h). The same goes into the results file
 * (attributes, and a /probe table).
 *
 * Exit status: 1 when a library mismatch will make CUDA (or NCCL) fail, or with
 * --expect-gpu when no GPU can be used; 0 otherwise (a machine without a
 * GPU is described, not failed). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "comm/nccl.h"
#include "core/cli.h"
#include "core/cpu_dispatch.h"
#include "core/log.h"
#include "core/version.h"
#include "src/cmd/commands.h"
#include "src/device/device.h"
#include "src/results/results.h"

typedef struct {
    const char *check;  /* "h2d pinned" */
    const char *unit;   /* "GB/s" */
    double size;        /* bytes, or the GEMM's n */
    const char *size_s; /* "4 MiB", "4096" */
    double ms, rate, peak;
} probe_row;

/* rate from a median time: bytes/ms -> GB/s, or 2 n^3 flop/ms -> TFLOP/s */
static double gbs(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e6) : NAN; }
static double tflops(int n, double ms) { return ms > 0 ? 2.0 * n * (double)n * n / (ms * 1e9) : NAN; }

/* What probe learnt, from the version checks to the measured rows. */
typedef struct {
    char host[64], t_start[32];
    tb_probe_gpu p;
    tb_probe_cpu pc;
    int errors; /* library mismatches that will make CUDA (or NCCL: older than 2.18) fail */
    char nccl_lib[1024], nccl_slim[800];
    char err[512]; /* why no GPU can be used */
    int have_gpu;
    tb_nvml *nv;
    char nvml_err[512], drv[64];
    int nvml_cuda, have_nvml_dev;
    tb_nvml_static ns;
    tb_nvml_now now;
    const tb_gpu_peak *pk;
    probe_row rows[32];
    int nr;
} probe_state;

/* The header, the CPU vector level, the libraries built for vs loaded (one warning per mismatch)
 * and the NCCL library file. */
static void print_versions(probe_state *s) {
    tb_probe_gpu *p = &s->p;
    tb_probe_gpu_versions(p);
    printf("# trainbench probe on %s: trainbench %s (%s)\n#\n", s->host, tb_version_string, tb_git_revision);
    char cpu_level[256];
    tb_cpu_dispatch_describe(cpu_level, sizeof cpu_level);
    printf("# %-28s %s\n", "CPU vector loops", cpu_level);
    if (!p->built_with_cuda) {
        printf("# %-28s %s\n", "CUDA", "this trainbench was built without CUDA (no toolkit found at "
                                       "configure time): CPU backend only");
    } else {
        printf("# %-28s %-12s %-12s %s\n", "library", "built for", "loaded", "verdict");
        for (int i = 0; i < p->nlibs; i++) {
            const tb_lib_check *c = &p->libs[i];
            printf("# %-28s %-12s %-12s %s\n", c->what, c->compiled_s, c->loaded_s, tb_verdict_name(c->verdict));
            if (c->verdict == TB_VER_WARN || c->verdict == TB_VER_ERROR ||
                (c->verdict == TB_VER_ABSENT && i > 0)) /* i 0: the driver, said below */
                tb_warn("probe: %s: %s", c->what, c->note);
            s->errors += c->verdict == TB_VER_ERROR;
        }
    }
    if (p->cublas_path[0]) printf("# %-28s %s\n", "cuBLASLt library", p->cublas_path);
    tb_nccl_library(s->nccl_lib, sizeof s->nccl_lib, s->nccl_slim, sizeof s->nccl_slim);
    if (s->nccl_lib[0])
        printf("# %-28s %s%s%s\n", "NCCL library", s->nccl_lib, s->nccl_slim[0] ? "\n#   " : "", s->nccl_slim);
}

/* Measures the GPU (when one can be used) and reads the driver and the device from NVML. */
static void measure_gpu(probe_state *s, int device, int quick) {
    tb_probe_gpu *p = &s->p;
    s->have_gpu = p->built_with_cuda && tb_probe_gpu_measure(p, device, quick, s->err, sizeof s->err) == 0;
    if (p->built_with_cuda && !s->have_gpu && p->driver_version == 0)
        snprintf(s->err, sizeof s->err, "no NVIDIA driver on this host (libcuda.so.1 not found: "
                                        "cudaDriverGetVersion reports none)");
    s->nv = tb_nvml_open(s->nvml_err, sizeof s->nvml_err);
    if (s->nv) {
        tb_nvml_driver_version(s->nv, s->drv, sizeof s->drv, &s->nvml_cuda);
        tb_nvml_dev *d = s->have_gpu ? tb_nvml_device(s->nv, p->bus_id, s->nvml_err, sizeof s->nvml_err) : NULL;
        if (d) {
            tb_nvml_static_info(d, &s->ns);
            tb_nvml_read(d, &s->now);
            s->have_nvml_dev = 1;
        }
    }
}

/* The driver, the GPU, its clocks and NVML's reading of its links. */
static void print_gpu(const probe_state *s) {
    const tb_probe_gpu *p = &s->p;
    const tb_nvml_static *ns = &s->ns;
    const tb_nvml_now *now = &s->now;
    printf("#\n");
    if (s->drv[0])
        printf("# %-28s %s (supports CUDA %d.%d)\n", "driver", s->drv, s->nvml_cuda / 1000, s->nvml_cuda % 1000 / 10);
    if (!s->have_gpu) {
        printf("# %-28s none usable: %s\n", "GPU", p->built_with_cuda ? s->err : "built without CUDA");
        return;
    }
    printf("# %-28s %d: %s, %.1f GiB, %d SMs, compute capability %d.%d, PCI %s\n", "GPU", p->device, p->name,
           p->mem_bytes / (1 << 30), p->sms, p->cc_major, p->cc_minor, p->bus_id);
    printf("# %-28s SM max %d MHz, memory %d MHz x %d bit, L2 %.0f MiB\n", "clocks", p->sm_clock_mhz_max,
           p->mem_clock_mhz_max, p->mem_bus_bits, p->l2_bytes / (1 << 20));
    if (!s->have_nvml_dev) {
        printf("# %-28s %s\n", "NVML", s->nvml_err);
        return;
    }
    printf("# %-28s now SM %.0f MHz, memory %.0f MHz, %.0f W, %.0f C, GPU-Util %.0f %%\n", "NVML reading",
           now->sm_clock_mhz, now->mem_clock_mhz, now->power_w, now->temp_c, now->util_pct);
    printf("# %-28s Gen%d x%d (device and slot allow Gen%d x%d)%s\n", "PCIe link", ns->pcie_gen, ns->pcie_width,
           ns->pcie_gen_max, ns->pcie_width_max,
           ns->pcie_gen >= 0 && ns->pcie_gen < ns->pcie_gen_max ? " (link below its maximum: idle "
                                                                  "power saving, or a bad slot)"
                                                                : "");
    printf("# %-28s %d link%s active\n", "NVLink", ns->nvlinks_active, ns->nvlinks_active == 1 ? "" : "s");
    printf("# %-28s %s\n", "SM activity (GPM)",
           ns->gpm_supported ? "supported: training reports SM activity beside GPU-Util"
                             : "not supported: training reports GPU-Util only");
}

/* The measurements beside their datasheet ceilings: copies, then GEMMs. */
static void collect_rows(probe_state *s) {
    const tb_probe_gpu *p = &s->p;
    const tb_gpu_peak *pk = s->pk;
    probe_row *rows = s->rows;
    int nr = 0;
    static const char *const bw_s[TB_PROBE_NBW] = {"4 MiB", "256 MiB"};
    for (int i = 0; i < TB_PROBE_NBW; i++) {
        if (p->h2d_ms[i] < 0) continue;
        rows[nr++] = (probe_row){"h2d pinned", "GB/s", p->bw_bytes[i], bw_s[i], p->h2d_ms[i],
                                 gbs(p->bw_bytes[i], p->h2d_ms[i]), pk ? pk->pcie_gbs : NAN};
        rows[nr++] = (probe_row){"d2h pinned", "GB/s", p->bw_bytes[i], bw_s[i], p->d2h_ms[i],
                                 gbs(p->bw_bytes[i], p->d2h_ms[i]), pk ? pk->pcie_gbs : NAN};
    }
    rows[nr++] = (probe_row){"d2d (read+write)", "GB/s", p->d2d_bytes, p->d2d_bytes > 5e6 ? "256 MiB" : "4 MiB",
                             p->d2d_ms, gbs(2 * p->d2d_bytes, p->d2d_ms), pk ? pk->hbm_gbs : NAN};
    static const char *const prec[TB_PROBE_NPREC] = {"gemm fp32", "gemm tf32", "gemm bf16"};
    static const char *const gn[TB_PROBE_NGEMM] = {"4096", "8192"};
    for (int q = 0; q < TB_PROBE_NPREC; q++)
        for (int k = 0; k < TB_PROBE_NGEMM; k++) {
            if (p->gemm_ms[q][k] < 0) continue;
            double peak = !pk ? NAN : q == 0 ? pk->fp32_tflops : q == 1 ? pk->tf32_tflops : pk->bf16_tflops;
            rows[nr++] = (probe_row){prec[q], "TFLOP/s", p->gemm_n[k], gn[k], p->gemm_ms[q][k],
                                     tflops(p->gemm_n[k], p->gemm_ms[q][k]), peak};
        }
    s->nr = nr;
}

/* The rows as one text table, then the note on fp32. */
static void print_rows(const probe_state *s) {
    const probe_row *rows = s->rows;
    const tb_col cols[] = {{"measurement", NULL, "check", 18, 1, 0, 0},
                           {"size", NULL, NULL, 8, 0, 0, 0},
                           {"time", "ms", "time_ms", 9, 0, 0, 0},
                           {"rate", NULL, NULL, 9, 0, 0, 0},
                           {"unit", NULL, NULL, 7, 1, 0, 0},
                           {"datasheet", NULL, "peak", 9, 0, 0, 0},
                           {"of peak", "%", "pct_of_peak", 7, 0, 0, 0}};
    char title[200];
    snprintf(title, sizeof title, "medians of timed repeats; ceilings: %s",
             s->pk ? s->pk->source : "no datasheet entry for this GPU");
    tb_tab *t = tb_tab_new(TB_FMT_TEXT, title, cols, 7);
    for (int i = 0; i < s->nr; i++) {
        tb_tab_str(t, rows[i].check);
        tb_tab_str(t, rows[i].size_s);
        tb_tab_num(t, rows[i].ms, 3);
        tb_tab_num(t, rows[i].rate, 1);
        tb_tab_str(t, rows[i].unit);
        tb_tab_num(t, rows[i].peak, 1);
        tb_tab_num(t, 100 * rows[i].rate / rows[i].peak, 0);
    }
    tb_tab_print(t, stdout);
    printf("#\n# gemm fp32 is true float32 (no TF32); reports that quote fp32 matrix products above the "
           "datasheet's FP32 ceiling measured TF32\n");
}

/* The GPU's attributes in the results file (with a GPU only). */
static void gpu_attrs(const probe_state *s, tb_attrs *a) {
    const tb_probe_gpu *p = &s->p;
    char buf[64];
    tb_attrs_str(a, "pci_bus_id", p->bus_id);
    tb_attrs_num(a, "device_memory_bytes", p->mem_bytes);
    tb_attrs_int(a, "sm_count", p->sms);
    snprintf(buf, sizeof buf, "%d.%d", p->cc_major, p->cc_minor);
    tb_attrs_str(a, "compute_capability", buf);
    tb_attrs_int(a, "sm_clock_max_mhz", p->sm_clock_mhz_max);
    if (s->have_nvml_dev) {
        tb_attrs_int(a, "pcie_gen", s->ns.pcie_gen);
        tb_attrs_int(a, "pcie_width", s->ns.pcie_width);
        tb_attrs_int(a, "nvlinks_active", s->ns.nvlinks_active);
    }
    tb_attrs_str(a, "datasheet", s->pk ? s->pk->source : "none");
}

/* The self-check as attributes and a /probe table. */
static void write_results(const probe_state *s, const char *results, int argc, char **argv) {
    const tb_probe_gpu *p = &s->p;
    tb_attrs a;
    memset(&a, 0, sizeof a);
    char buf[4096];
    tb_provenance_head(&a, "probe", argc, argv, s->t_start, s->host);
    tb_attrs_str(&a, "nvidia_driver_version", s->drv[0] ? s->drv : "none");
    tb_provenance_cpu_dispatch(&a);
    for (int i = 0; i < p->nlibs; i++) {
        const tb_lib_check *c = &p->libs[i];
        static const char *const keys[] = {"cuda", "cudnn", "cudnn_cudart", "cublas", "nccl"};
        char k[64];
        snprintf(k, sizeof k, "%s_built_for", keys[i]);
        tb_attrs_str(&a, k, c->compiled_s);
        snprintf(k, sizeof k, "%s_loaded", keys[i]);
        tb_attrs_str(&a, k, c->loaded_s);
        snprintf(k, sizeof k, "%s_verdict", keys[i]);
        snprintf(buf, sizeof buf, "%s: %s", tb_verdict_name(c->verdict), c->note);
        tb_attrs_str(&a, k, buf);
    }
    tb_provenance_cpu_probe(&a, &s->pc);
    if (p->cublas_path[0]) tb_attrs_str(&a, "cublas_library", p->cublas_path);
    if (s->nccl_lib[0]) {
        snprintf(buf, sizeof buf, "%s%s%s", s->nccl_lib, s->nccl_slim[0] ? "; " : "", s->nccl_slim);
        tb_attrs_str(&a, "nccl_library", buf);
    }
    tb_attrs_str(&a, "device_names", s->have_gpu ? p->name : "none");
    if (s->have_gpu) gpu_attrs(s, &a);
    tb_table tab;
    tb_table_init(&tab, "probe", "size,time_ms,rate,peak,pct_of_peak");
    tb_table_add_string_column(&tab, "check");
    for (int i = 0; i < s->nr; i++) {
        const probe_row *r = &s->rows[i];
        double v[5] = {r->size, r->ms, r->rate, r->peak, 100 * r->rate / r->peak};
        snprintf(buf, sizeof buf, "%s (%s)", r->check, r->unit);
        tb_table_row(&tab, v, buf);
    }
    const tb_table *tabs[1] = {&tab};
    tb_results_write(results, &a, tabs, 1);
    tb_table_free(&tab);
    tb_attrs_free(&a);
    printf("# results written to %s\n", results);
}

int tb_cmd_probe(int argc, char **argv) {
    int device = 0, quick = 0, expect_gpu = 0;
    char results[TB_OPT_STR_MAX] = "";
    const tb_opt opts[] = {
        {"device", TB_OPT_INT, &device, 0, 1024, NULL, "CUDA device ordinal to measure"},
        {"quick", TB_OPT_FLAG, &quick, 0, 0, NULL, "skip the 256 MiB copies and the 8192 GEMMs"},
        {"expect-gpu", TB_OPT_FLAG, &expect_gpu, 0, 0, NULL, "exit 1 when no GPU can be used"},
        {"results", TB_OPT_STRING, results, 0, 0, NULL, "write the self-check to this HDF5 file"},
        {NULL, 0, NULL, 0, 0, NULL, NULL},
    };
    tb_cli_parse("probe", "trainbench probe [options]", argc, argv, opts);
    tb_output_path_require("probe", results, TB_OUT_RESULTS, "results file", "--results");
    static probe_state s;
    memset(&s, 0, sizeof s);
    snprintf(s.host, sizeof s.host, "localhost");
    tb_utc_now(s.t_start, sizeof s.t_start);
    gethostname(s.host, sizeof s.host - 1);

    print_versions(&s);
    tb_probe_cpu_measure(&s.pc, quick);
    printf("#\n");
    tb_probe_cpu_print(&s.pc, stdout);
    measure_gpu(&s, device, quick);
    print_gpu(&s);

    s.pk = s.have_gpu ? tb_gpu_peak_find(s.p.name) : NULL;
    if (s.have_gpu) {
        collect_rows(&s);
        print_rows(&s);
    }
    fflush(stdout);

    if (results[0]) write_results(&s, results, argc, argv);
    tb_nvml_close(s.nv);
    if (s.errors) {
        tb_say_error("probe: %d library mismatch%s will make CUDA or NCCL fail (see the warnings above)", s.errors,
                     s.errors > 1 ? "es" : "");
        return 1;
    }
    if (expect_gpu && !s.have_gpu) {
        tb_say_error("probe: --expect-gpu: %s", s.p.built_with_cuda ? s.err : "this trainbench was built without CUDA");
        return 1;
    }
    return 0;
}
