/* probe_cpu.h - what `trainbench probe` says about the CPU backend: the
 * CPU's vector units, the BLAS kernels running (and who chose them), and
 * one timed SGEMM beside the CPU's peak (cores x FLOP per cycle x clock),
 * as the GPU rows stand beside their datasheet. */
#ifndef TB_PROBE_CPU_H
#define TB_PROBE_CPU_H

#include <stdio.h>

typedef struct {
    char model[96];      /* /proc/cpuinfo "model name" */
    char units[192];     /* "AVX2 FMA AVX-512 (F BW VL DQ CD) ..." */
    char level[16];      /* "avx512" */
    char blas[256];      /* "OpenBLAS 0.3.21 SkylakeX kernels (detected by OpenBLAS)" */
    char kernels[32];    /* "SkylakeX" */
    char kernels_origin[96];
    char blas_note[768]; /* what trainbench did about the kernels, or a user's choice below the CPU's ("": nothing) */
    int cores;           /* cores this process may use (the SGEMM's workers) */
    double ghz;          /* clock the peak is taken at */
    char clock_source[64];
    double peak_gflops;  /* cores x FLOP/cycle at the level x ghz */
    int n;               /* the SGEMM's size */
    double ms, gflops;   /* median time and rate; ms < 0: not measured */
    char err[512];       /* why not, or the wrong element */
} tb_probe_cpu;

/* Fills p; times an n x n SGEMM (n 2048, 1024 with quick) on every allowed core. */
void tb_probe_cpu_measure(tb_probe_cpu *p, int quick);
/* The "#" lines of probe's CPU section. */
void tb_probe_cpu_print(const tb_probe_cpu *p, FILE *out);

#endif
