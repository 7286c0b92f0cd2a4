/* provenance.h - what a results file must record about the run's software
 * and machines (docs/SEEDS.md section 5): versions of trainbench and of every
 * library on the path, the command line, hosts, backend and devices. */
#ifndef TB_PROVENANCE_H
#define TB_PROVENANCE_H

#include "model/backend.h"
#include "src/device/device.h"
#include "src/results/results_file.h"

/* Adds version, git revision, command line ("trainbench <sub> args..."),
 * world size, host names (hosts: world x 64 chars), backend, device names
 * (devices: world x TB_DEVICE_NAME_MAX chars, every rank's be->device; NULL:
 * be->device alone) and library versions (CUDA runtime/driver, cuDNN, NCCL,
 * MPI, HDF5, libjpeg-turbo, BLAS) and the CPU dispatch level to a. */
void tb_provenance_fill(tb_attrs *a, const char *subcommand, int argc, char **argv, const tb_backend *be,
                        int world, const char *hosts, const char *devices);

/* names: world rows of stride chars. Writes the distinct ones in rank
 * order, each with its rank count ("a (2 ranks), b (1 rank)"), and returns
 * how many there are. Where len cannot hold them all, the list ends with
 * "... and K more" (len >= 64), never with a name cut off. counted 0 (device names, which may hold a comma:
 * "AMD EPYC 7B13, 2 threads"): a single name stays bare ("a"), as the
 * device_names of a job on one model always read, and several are
 * separated by "; ". */
int tb_provenance_distinct(char *buf, size_t len, const char *names, size_t stride, int world, int counted);

/* The head of a one-host tool's results file (probe, loader-bench): kind
 * (= subcommand), version, git revision, command line, start_time t_start,
 * end_time now, status "complete", hostnames host and the HDF5 version. */
void tb_provenance_head(tb_attrs *a, const char *subcommand, int argc, char **argv, const char *t_start,
                        const char *host);

/* The vector level trainbench's own loops ran at (core/cpu_dispatch.h):
 * cpu_dispatch_level ("baseline", "avx2", "avx512") and cpu_dispatch (how
 * it was chosen). Part of tb_provenance_fill; probe adds it alone. */
void tb_provenance_cpu_dispatch(tb_attrs *a);

/* probe's CPU section as attributes: cpu_model, cpu_features, cpu_isa_level,
 * blas_kernels, blas_kernels_origin, blas_config, cpu_sgemm_*, cpu_peak_gflops,
 * cpu_clock_ghz. */
void tb_provenance_cpu_probe(tb_attrs *a, const tb_probe_cpu *p);

#endif
