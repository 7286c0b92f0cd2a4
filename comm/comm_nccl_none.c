/* comm_nccl_none.c - nccl.h in builds without NCCL: nothing is built, and
 * asking for a communicator says so in one line. */
#include <string.h>

#include "comm/nccl.h"
#include "core/log.h"

size_t tb_dev_type_size(tb_dev_type t) { return t == TB_DEV_BF16 ? 2 : t == TB_DEV_F32 ? 4 : 8; }

int tb_nccl_built(void) { return 0; }

void tb_nccl_versions(int *compiled, int *loaded) {
    *compiled = 0;
    *loaded = 0;
}

void tb_nccl_library(char *path, size_t len, char *slim, size_t slen) {
    if (len) path[0] = '\0';
    if (slen) slim[0] = '\0';
}

tb_nccl *tb_nccl_create(tb_comm *c, int device, double timeout_s) {
    (void)c, (void)device, (void)timeout_s;
    tb_die("--comm nccl: this trainbench was built without NCCL (configure with the CUDA toolkit and NCCL, "
           "or set NCCL_ROOT); use --comm mpi");
}

tb_nccl *tb_nccl_first_n(tb_nccl *parent, int n, double timeout_s) {
    (void)parent, (void)n, (void)timeout_s;
    TB_FATAL("tb_nccl_first_n without NCCL");
}

void tb_nccl_destroy(tb_nccl *n) { (void)n; }
int tb_nccl_rank(const tb_nccl *n) {
    (void)n;
    return 0;
}
int tb_nccl_size(const tb_nccl *n) {
    (void)n;
    return 1;
}

void tb_nccl_allreduce_sum(tb_nccl *n, const void *send, void *recv, size_t count, tb_dev_type t,
                           void *stream) {
    (void)n, (void)send, (void)recv, (void)count, (void)t, (void)stream;
    TB_FATAL("tb_nccl_allreduce_sum without NCCL");
}

void tb_nccl_bcast(tb_nccl *n, void *buf, size_t count, tb_dev_type t, int root, void *stream) {
    (void)n, (void)buf, (void)count, (void)t, (void)root, (void)stream;
    TB_FATAL("tb_nccl_bcast without NCCL");
}

void tb_nccl_check_async(tb_nccl *n, const char *what) { (void)n, (void)what; }
int tb_nccl_abort_all(void) { return 0; }

void tb_dev_watch_push(void *event, void *stream, int64_t step, const char *what) {
    (void)event, (void)stream, (void)step, (void)what;
}
void tb_dev_watch_clear(void) {}
void tb_dev_watch_capturing(int on) { (void)on; }
void tb_dev_watch_poll(tb_dev_watch_state *st) { memset(st, 0, sizeof *st); }
