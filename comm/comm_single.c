/* comm_single.c - comm.h for builds without MPI: one process is the whole
 * job, every collective is an identity on its own buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/log.h"

struct tb_comm {
    int unused;
};

static tb_comm g_world;

void tb_comm_init(int *argc, char ***argv, tb_comm_info *info) {
    (void)argc;
    (void)argv;
    memset(info, 0, sizeof *info);
    info->world = 1;
    info->local_size = 1;
    if (gethostname(info->host, sizeof info->host - 1) != 0) snprintf(info->host, sizeof info->host, "localhost");
    /* a launcher started several copies of a binary that cannot talk to each other */
    const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
    if (!ws) ws = getenv("PMI_SIZE");
    if (ws && atoi(ws) > 1)
        tb_die("the launcher started %s ranks, but this trainbench was built without MPI: each "
               "would train alone; rebuild with MPI (libopenmpi-dev, -DTB_MPI=ON)",
               ws);
}

void tb_comm_set_command(const char *name) { (void)name; }

void tb_comm_finalize(void) {}

void tb_comm_library_version(char *buf, size_t len) {
    snprintf(buf, len, "single-process (built without MPI)");
}

void tb_comm_env_defaults(char *buf, size_t len) {
    if (len) buf[0] = '\0';
}

int tb_comm_env_ours(const char *entry) {
    (void)entry;
    return 0;
}

tb_comm *tb_comm_world(void) { return &g_world; }

tb_comm *tb_comm_first_n(tb_comm *parent, int n) { return n >= 1 ? parent : NULL; }
void tb_comm_free(tb_comm *c) { (void)c; }
int tb_comm_rank(const tb_comm *c) {
    (void)c;
    return 0;
}
int tb_comm_size(const tb_comm *c) {
    (void)c;
    return 1;
}

void tb_comm_barrier(tb_comm *c) { (void)c; }
void tb_comm_barrier_idle(tb_comm *c, double poll_s) {
    (void)c;
    (void)poll_s;
}
void tb_comm_bcast(tb_comm *c, void *buf, size_t count, tb_comm_type t, int root) {
    (void)c, (void)buf, (void)count, (void)t;
    TB_ASSERT(root == 0);
}
void tb_comm_allreduce_sum(tb_comm *c, void *buf, size_t count, tb_comm_type t) {
    (void)c, (void)buf, (void)count, (void)t;
}
void tb_comm_allreduce_sum_idle(tb_comm *c, void *buf, size_t count, tb_comm_type t, double poll_s) {
    (void)poll_s;
    tb_comm_allreduce_sum(c, buf, count, t);
}
void tb_comm_allreduce_max(tb_comm *c, void *buf, size_t count, tb_comm_type t) {
    (void)c, (void)buf, (void)count, (void)t;
}
void tb_comm_allreduce_min(tb_comm *c, void *buf, size_t count, tb_comm_type t) {
    (void)c, (void)buf, (void)count, (void)t;
}
void tb_comm_allreduce_sum_bf16(tb_comm *c, uint16_t *buf, size_t count) { (void)c, (void)buf, (void)count; }
void tb_comm_allgather(tb_comm *c, const void *send, void *recv, size_t bytes) {
    (void)c;
    memmove(recv, send, bytes);
}
void tb_comm_gather(tb_comm *c, const void *send, void *recv, size_t bytes, int root) {
    (void)c;
    TB_ASSERT(root == 0);
    memmove(recv, send, bytes);
}

_Noreturn void tb_comm_exit_all(tb_comm *c, int code) {
    (void)c;
    fflush(NULL);
    _exit(code); /* not exit: other threads (loader, OpenBLAS, snapshots) still run (core/log.h) */
}

int tb_comm_roll_call(tb_comm *c, const void *row, void *rows, size_t bytes, double timeout_s,
                      int *arrived) {
    (void)c, (void)timeout_s;
    memmove(rows, row, bytes);
    arrived[0] = 1;
    return 0;
}

int tb_comm_allreduce_sum_timeout(tb_comm *c, void *buf, size_t count, tb_comm_type t,
                                  double timeout_s, double *elapsed) {
    (void)c, (void)buf, (void)count, (void)t, (void)timeout_s;
    *elapsed = 0;
    return 0;
}

int tb_comm_barrier_timeout(tb_comm *c, double timeout_s) {
    (void)c, (void)timeout_s;
    return 0;
}

char *tb_comm_gather_bytes(tb_comm *c, const void *send, size_t bytes, int root, size_t *counts) {
    (void)c;
    TB_ASSERT(root == 0);
    char *all = malloc(bytes + 1);
    if (!all) TB_FATAL("out of host memory");
    memcpy(all, send, bytes);
    counts[0] = bytes;
    return all;
}
