/* sigkill_gap.c - how long the launcher waits between its SIGTERM and its SIGKILL when a rank dies:
 * rank 1 kills itself after 1 s; every other rank logs the SIGTERM and then a line each 10 ms
 * to /tmp/termR.log until the SIGKILL ends it (results/open_mpi5.md). */
#define _GNU_SOURCE
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <string.h>
static int fd = -1; static struct timespec t0;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9; }
static void on(int s) { char b[128]; int n = snprintf(b, sizeof b, "sig %d at %.3f\n", s, now()); write(fd, b, n);
  n = snprintf(b, sizeof b, "stderr line after SIGTERM\n"); write(2, b, n); }
int main(int c, char **v) { MPI_Init(&c, &v); int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); clock_gettime(CLOCK_MONOTONIC, &t0);
  char p[64]; snprintf(p, sizeof p, "/tmp/term%d.log", r); fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0644);
  signal(SIGTERM, on);
  if (r == 1) { sleep(1); raise(SIGKILL); }
  for (int i = 0; i < 400; i++) { usleep(10000); char b[64]; int n = snprintf(b, sizeof b, "alive %.3f\n", now()); if (i % 20 == 0 || now() > 1.0) write(fd, b, n); }
  MPI_Finalize(); return 0; }
