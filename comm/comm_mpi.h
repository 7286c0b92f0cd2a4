/* comm_mpi.h - MPI details shared inside comm/ only: the check macro and the
 * mapping from tb_comm to MPI handles. */
#ifndef TB_COMM_MPI_H
#define TB_COMM_MPI_H

#include <mpi.h>

#include "comm/comm.h"

/* Evaluates an MPI call; on failure prints file:line, the rank and MPI's own
 * error string, then ends the whole job (MPI_Abort). */
#define MPI_CHECK(call) tb_mpi_check((call), #call, __FILE__, __LINE__)
void tb_mpi_check(int rc, const char *expr, const char *file, int line);

MPI_Datatype tb_mpi_type(tb_comm_type t);
MPI_Comm tb_mpi_comm(const tb_comm *c);

#endif
