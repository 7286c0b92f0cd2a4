/* count_bcast.c - preloaded into trainbench (LD_PRELOAD, the MPI profiling
 * interface): counts the MPI_Bcast calls and bytes of each rank and prints
 * them at MPI_Finalize, one line per rank on stderr:
 *   count_bcast: rank R calls C bytes B
 * tests/broadcast_buffers.sh compares two runs' counts. */
#include <mpi.h>
#include <stdio.h>

static long long g_calls, g_bytes;

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    int size = 0;
    PMPI_Type_size(type, &size);
    g_calls++;
    g_bytes += (long long)count * size;
    return PMPI_Bcast(buf, count, type, root, comm);
}

int MPI_Finalize(void) {
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "count_bcast: rank %d calls %lld bytes %lld\n", rank, g_calls, g_bytes);
    return PMPI_Finalize();
}
