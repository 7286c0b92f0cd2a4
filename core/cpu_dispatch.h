/* cpu_dispatch.h - the vector level trainbench's own hot loops run at, chosen
 * once at start-up: the best level the CPU offers (cpu_features.h), or the
 * one TB_CPU_LEVEL forces (baseline, avx2, avx512, auto), refused with one
 * line when the CPU lacks it.
 *
 * How the loops use it: each hot-loop file (data/pixel_kern.c,
 * model/cpu/cpu_kern.c) is compiled once per level, with that level's
 * flags (cmake/TbDispatch.cmake: -mavx2 -mfma -mf16c; plus -mavx512f/bw/vl/
 * dq/cd) and TB_ISA_SUFFIX set to the level's name, so its functions and its
 * table of them are named per level (TB_ISA_FN). The caller picks the table
 * of tb_cpu_level() on each call (one load). One binary so runs on every
 * x86-64 and uses what the CPU has; a test can force every level the machine
 * has and compare the results, which an ifunc or GCC's target_clones
 * resolver (chosen by the loader, not by us) would not allow.
 *
 * Off x86-64 only the baseline tables are built, and only baseline (or
 * auto) is accepted. */
#ifndef TB_CPU_DISPATCH_H
#define TB_CPU_DISPATCH_H

#include <stddef.h>

#include "core/cpu_features.h"

/* Per-level names inside a file compiled once per level. */
#ifndef TB_ISA_SUFFIX
#define TB_ISA_SUFFIX baseline
#endif
#define TB_ISA_CAT2_(a, b) a##_##b
#define TB_ISA_CAT_(a, b) TB_ISA_CAT2_(a, b)
#define TB_ISA_FN(name) TB_ISA_CAT_(name, TB_ISA_SUFFIX)

/* The environment variable that forces a level. */
#define TB_CPU_LEVEL_ENV "TB_CPU_LEVEL"

/* Does this binary carry code for the level? (baseline always; avx2 and
 * avx512 on x86-64) */
int tb_cpu_level_built(tb_isa_level level);

/* The rule, for a value of TB_CPU_LEVEL (NULL or "" or "auto": the best
 * level of f): 0 and *out set, or -1 with the one-line reason in err
 * (an unknown name, or a level f lacks or the binary does not carry). */
int tb_cpu_level_choose(const char *value, const tb_cpu_features *f, tb_isa_level *out, char *err, size_t len);

/* Chooses the level from TB_CPU_LEVEL and this CPU; a value it refuses ends
 * the process with that one line (tb_die). Called by main before any
 * subcommand; tb_cpu_level() calls it on first use otherwise. */
void tb_cpu_dispatch_init(void);

/* The level the loops run at. */
tb_isa_level tb_cpu_level(void);

/* Tests: run the loops at `level` from now on (between runs, never while a
 * loop runs). 0, or -1 with the reason when this CPU or binary lacks it. */
int tb_cpu_level_set(tb_isa_level level, char *err, size_t len);

/* For headers and results files: "avx512 (auto: the best this CPU offers)",
 * "avx2 (forced by TB_CPU_LEVEL; the CPU offers avx512)", plus
 * "; TB_NATIVE build: all code compiled for the build machine" when built
 * with -march=native. */
void tb_cpu_dispatch_describe(char *buf, size_t len);

#endif
