/* probe_cpu.c - probe's CPU section (see probe_cpu.h). */
#include "src/device/probe_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_features.h"
#include "core/timer.h"
#include "model/cpu/cpu_blas.h"

/* The clock this thread runs at, in GHz: a chain of dependent register
 * adds (one cycle each on every x86-64 core) timed, the fastest of 5 runs
 * of 2^24 adds (about 30 ms in all); 0 where it cannot be measured. A VM's
 * /proc/cpuinfo shows the host's nominal rate, and its cores boost past
 * it: an AMD EPYC VM said 2.60 GHz and its SGEMM ran at 117 % of that
 * peak. Above 7 GHz the chain was not timed right: 0. */
static double running_ghz(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    double best = 0;
    for (int r = 0; r < 5; r++) {
        unsigned long x = 1;
        double t0 = tb_now();
        for (int i = 0; i < (1 << 18); i++) __asm__ volatile(".rept 64\n\tadd %0, %0\n\t.endr" : "+r"(x));
        double s = tb_now() - t0;
        if (s > 0 && (double)(1 << 24) / s / 1e9 > best) best = (double)(1 << 24) / s / 1e9;
    }
    return best < 7.0 ? best : 0;
#else
    return 0;
#endif
}

/* The model name and the clock the peak is taken at: the highest of
 * cpufreq's maximum (where the kernel has one), /proc/cpuinfo's "cpu MHz"
 * (in a VM, the host's TSC rate) and the running clock measured here (a
 * boost the other two do not show), so that the peak bounds what the
 * SGEMM can reach. */
static void cpu_model_clock(tb_probe_cpu *p) {
    char line[512];
    double mhz = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *v = strchr(line, ':');
        if (!v) continue;
        if (strncmp(line, "cpu MHz", 7) == 0 && mhz <= 0) {
            mhz = atof(v + 1);
        } else if (strncmp(line, "model name", 10) == 0 && !p->model[0]) {
            v += 1 + strspn(v + 1, " \t");
            snprintf(p->model, sizeof p->model, "%.*s", (int)strcspn(v, "\n"), v);
        }
        if (mhz > 0 && p->model[0]) break;
    }
    if (f) fclose(f);
    if (!p->model[0]) snprintf(p->model, sizeof p->model, "unknown");
    long khz = 0;
    f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    if (f) {
        if (fscanf(f, "%ld", &khz) != 1) khz = 0;
        fclose(f);
    }
    p->ghz = khz > 0 ? khz / 1e6 : mhz / 1e3;
    snprintf(p->clock_source, sizeof p->clock_source, "%s",
             khz > 0 ? "cpufreq maximum" : mhz > 0 ? "/proc/cpuinfo cpu MHz" : "unknown");
    double run = running_ghz();
    if (run > p->ghz) {
        snprintf(p->clock_source, sizeof p->clock_source, "measured running clock; %s says %.2f",
                 khz > 0 ? "cpufreq maximum" : mhz > 0 ? "/proc/cpuinfo" : "nothing", p->ghz);
        p->ghz = run;
    }
}

void tb_probe_cpu_measure(tb_probe_cpu *p, int quick) {
    memset(p, 0, sizeof *p);
    const tb_cpu_features *f = tb_cpu_features_get();
    tb_isa_level lvl = tb_cpu_isa_best(f);
    tb_cpu_features_str(f, p->units, sizeof p->units);
    snprintf(p->level, sizeof p->level, "%s", tb_cpu_isa_name(lvl));
    const tb_cpu_blas_info *b = tb_cpu_blas_info_get();
    tb_cpu_blas_summary(p->blas, sizeof p->blas);
    snprintf(p->kernels, sizeof p->kernels, "%s", b->kernels);
    tb_cpu_blas_origin_str(b, p->kernels_origin, sizeof p->kernels_origin);
    snprintf(p->blas_note, sizeof p->blas_note, "%s", b->note);
    cpu_model_clock(p);
    p->cores = tb_cpu_allowed_cores();
    p->peak_gflops = p->ghz > 0 ? p->cores * tb_cpu_isa_flops_per_cycle(lvl) * p->ghz : -1;
    p->n = quick ? 1024 : 2048;
    int blas_threads = 1;
    tb_cpu_blas_threads(p->cores, &blas_threads, NULL, 0);
    if (tb_cpu_blas_address_short(p->cores, p->err, sizeof p->err)) { /* its workers would wait for ever */
        p->ms = -1;
        return;
    }
    p->ms = tb_cpu_blas_time_sgemm(p->n, p->cores, quick ? 3 : 5, &p->gflops, p->err, sizeof p->err);
}

void tb_probe_cpu_print(const tb_probe_cpu *p, FILE *out) {
    fprintf(out, "# %-28s %s\n", "CPU", p->model);
    fprintf(out, "# %-28s %s (level %s)\n", "vector units", p->units, p->level);
    fprintf(out, "# %-28s %s\n", "BLAS", p->blas);
    if (p->blas_note[0]) fprintf(out, "# %-28s %s\n", "BLAS choice", p->blas_note);
    if (p->ms < 0) {
        fprintf(out, "# %-28s not measured: %s\n", "sgemm", p->err);
        return;
    }
    char peak[160];
    if (p->peak_gflops > 0)
        snprintf(peak, sizeof peak, "%.0f %% of %.0f GFLOP/s peak (%d core%s x %d FLOP/cycle at %s x %.2f GHz, %s)",
                 100 * p->gflops / p->peak_gflops, p->peak_gflops, p->cores, p->cores > 1 ? "s" : "",
                 tb_cpu_isa_flops_per_cycle((tb_isa_level)tb_cpu_isa_parse(p->level)), p->level, p->ghz,
                 p->clock_source);
    else
        snprintf(peak, sizeof peak, "no peak: the clock is unknown");
    fprintf(out, "# %-28s %d x %d x %d on %d core%s: %.1f ms, %.1f GFLOP/s, %s\n", "sgemm (CPU backend's split)",
            p->n, p->n, p->n, p->cores, p->cores > 1 ? "s" : "", p->ms, p->gflops, peak);
}
