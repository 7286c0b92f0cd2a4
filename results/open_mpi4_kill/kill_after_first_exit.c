/* kill_after_first_exit.c - Open MPI 4.1 mpirun: when rank 1 exits without MPI_Finalize, how long the
 * others live after the SIGTERM if one of them (rank 2) exits 0.1 s after it: each survivor logs the
 * seconds since its SIGTERM every 10 ms into /tmp/gap/rR.log until it is killed. KEEP=1: rank 2
 * does not exit (the control: the launcher's own SIGKILL). */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static volatile sig_atomic_t term = 0;
static void on(int s) { (void)s; term = 1; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int c, char **v) {
    int r; MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r);
    signal(SIGTERM, on);
    if (r == 1) { sleep(1); _exit(0); }
    while (!term) usleep(1000);
    double t0 = now();
    char p[64]; snprintf(p, sizeof p, "/tmp/gap/r%d.log", r);
    FILE *f = fopen(p, "w");
    for (;;) { fprintf(f, "%.3f\n", now() - t0); fflush(f); if (r == 2 && !getenv("KEEP") && now() - t0 > 0.1) _exit(1); usleep(10000); }
}
