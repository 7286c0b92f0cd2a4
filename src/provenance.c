/* provenance.c - versions, command line and hosts for results files. */
#include "src/provenance.h"

#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "data/jpeg.h"
#include "src/h5io.h"
#include "src/core/version.h"

void tb_provenance_fill(tb_attrs *a, const char *subcommand, int argc, char **argv,
                        const tb_backend *be, int world, const char *hosts) {
    char buf[4096];
    tb_attrs_str(a, "trainbench_version", tb_version_string);
    tb_attrs_str(a, "git_revision", tb_git_revision);

    size_t used = (size_t)snprintf(buf, sizeof buf, "trainbench %s", subcommand);
    for (int i = 0; i < argc && used < sizeof buf; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, " %s", argv[i]);
    tb_attrs_str(a, "command_line", buf);

    tb_attrs_int(a, "world_size", world);
    /* distinct hosts in rank order, with their rank counts */
    used = 0;
    buf[0] = '\0';
    for (int r = 0; r < world; r++) {
        const char *h = hosts + 64 * r;
        int seen = 0, count = 0;
        for (int q = 0; q < r; q++) seen |= strcmp(hosts + 64 * q, h) == 0;
        if (seen) continue;
        for (int q = r; q < world; q++) count += strcmp(hosts + 64 * q, h) == 0;
        if (used < sizeof buf)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s (%d rank%s)", used ? ", " : "",
                                     h, count, count > 1 ? "s" : "");
    }
    tb_attrs_str(a, "hostnames", buf);
    tb_attrs_str(a, "backend", be->name);
    tb_attrs_str(a, "device_names", be->device);
    tb_attrs_str(a, "compute_libraries", be->versions);
    tb_attrs_str(a, "cuda_runtime_version", "none (CPU backend)");
    tb_attrs_str(a, "cuda_driver_version", "none (CPU backend)");
    tb_attrs_str(a, "cudnn_version", "none (CPU backend)");
    tb_attrs_str(a, "nccl_version", "none (MPI all-reduce on host buffers)");
    tb_comm_library_version(buf, sizeof buf);
    tb_attrs_str(a, "mpi_version", buf);
    tb_h5_library_version(buf, sizeof buf);
    tb_attrs_str(a, "hdf5_version", buf);
    tb_attrs_str(a, "libjpeg_turbo_version", tb_jpeg_version());
}
