/* test_comm_env.c - the Open MPI settings tb_comm_init makes for the
 * gradient all-reduce (comm/comm_mpi.c) take effect and yield to the
 * user's: the shared-memory BTL's pipeline fragment (max_send_size) is
 * 256 KiB unless the environment already names one (then that value), read
 * back through MPI_T from the library itself, not from the environment. Run
 * under mpirun with 2 ranks on one host (the BTL is loaded); with
 * TB_WANT_MAX_SEND set, that value is expected. Exits 77 when the MPI is
 * not Open MPI or does not expose the variable. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "tests/tb_test.h"

int main(int argc, char **argv) {
    tb_comm_info info;
    tb_comm_init(&argc, &argv, &info);
#ifndef OPEN_MPI
    printf("SKIP: not Open MPI\n");
    tb_comm_finalize();
    return 77;
#else
    const char *want_s = getenv("TB_WANT_MAX_SEND");
    unsigned long long want = want_s ? strtoull(want_s, NULL, 10) : 262144;
    int provided = 0, idx = -1, skip = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        printf("SKIP: MPI_T_init_thread failed: no control variables to read\n");
        tb_comm_finalize();
        return 77;
    }
    if (MPI_T_cvar_get_index("btl_vader_max_send_size", &idx) != MPI_SUCCESS &&
        MPI_T_cvar_get_index("btl_sm_max_send_size", &idx) != MPI_SUCCESS) {
        printf("SKIP: this Open MPI exposes no btl_vader_/btl_sm_max_send_size control variable\n");
        skip = 1;
    } else {
        MPI_T_cvar_handle h;
        int count = 0;
        MPI_Datatype dt;
        MPI_T_enum en;
        char name[256], desc[1024];
        int nlen = sizeof name, dlen = sizeof desc, verb = 0, bind = 0, scope = 0;
        MPI_T_cvar_get_info(idx, name, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope);
        int have = MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS;
        TB_CHECK(have && count == 1, "a handle on %s (count %d)", name, count);
        uint64_t v = 0; /* size_t or unsigned long long: 8 bytes on the hosts we build for */
        int dsize = 0;
        MPI_Type_size(dt, &dsize);
        TB_CHECK(dsize > 0 && dsize <= (int)sizeof v, "%s is %d bytes", name, dsize);
        if (have && count == 1 && dsize > 0 && dsize <= (int)sizeof v) { /* else reading would overrun v */
            TB_CHECK(MPI_T_cvar_read(h, &v) == MPI_SUCCESS, "read %s", name);
            printf("# rank %d: %s = %llu (want %llu%s)\n", info.rank, name, (unsigned long long)v, want,
                   want_s ? ", the user's" : ", trainbench's default");
            TB_CHECK(v == want, "%s = %llu, want %llu", name, (unsigned long long)v, want);
        }
        if (have) MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    int code = skip ? 77 : tb_test_exit("comm_env");
    tb_comm_finalize();
    return code;
#endif
}
