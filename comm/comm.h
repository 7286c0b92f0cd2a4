/* comm.h - process bootstrap and collectives over flat buffers.
 *
 * Built on MPI when trainbench is configured with it (comm_mpi.c), or as a
 * single-process path otherwise (comm_single.c): same interface, so src/
 * never needs an #ifdef. comm/ sees only buffers, counts and communicators;
 * it knows nothing of models or loaders.
 *
 * Every MPI call goes through MPI_CHECK (comm_mpi.c): file:line, the rank and
 * MPI's own error string, then MPI_Abort, so one failing rank ends the job. */
#ifndef TB_COMM_H
#define TB_COMM_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int rank, world;           /* in the whole job */
    int local_rank, local_size;/* among ranks on this host (shared-memory split) */
    char host[64];
    int distributed;           /* 1 when MPI is initialised */
    int thread_level;          /* MPI thread support provided (0 single-process) */
} tb_comm_info;

/* Starts MPI (MPI_Init_thread) or the single-process path, names this rank
 * in every later message and routes fatal errors to MPI_Abort. With a
 * subcommand set (tb_comm_set_command), it checks right after MPI_Init
 * that every rank runs rank 0's: an MPMD launch of train beside preflight
 * ends at once, naming both, instead of at the first --timeout. */
void tb_comm_init(int *argc, char ***argv, tb_comm_info *info);
/* The subcommand this process runs ("train", "preflight"), before tb_comm_init. */
void tb_comm_set_command(const char *name);
void tb_comm_finalize(void);
/* "Open MPI v4.1.4" or "single-process (built without MPI)" */
void tb_comm_library_version(char *buf, size_t len);
/* The MPI settings trainbench put in its own environment before MPI_Init
 * where the launch had set none (Open MPI's all-reduce algorithm and
 * shared-memory fragment size: comm_mpi.c says why), as "NAME=VALUE ..."
 * ("" for none); tb_comm_env_ours says whether one "NAME=VALUE" entry of the
 * environment is one of them. */
void tb_comm_env_defaults(char *buf, size_t len);
int tb_comm_env_ours(const char *entry);

typedef struct tb_comm tb_comm;

/* The whole job. */
tb_comm *tb_comm_world(void);
/* The ranks of `parent` with rank < n, ordered as in parent; NULL on the
 * others. Collective over parent. */
tb_comm *tb_comm_first_n(tb_comm *parent, int n);
void tb_comm_free(tb_comm *c);
int tb_comm_rank(const tb_comm *c);
int tb_comm_size(const tb_comm *c);

typedef enum { TB_FLOAT32, TB_FLOAT64, TB_INT64, TB_BYTES } tb_comm_type;

/* Blocking collectives, in place on host memory. */
void tb_comm_barrier(tb_comm *c);
/* A barrier for a rank with nothing to do until the others arrive: it
 * tests a non-blocking barrier and sleeps poll_s between tests instead of
 * spinning, so the waiting rank leaves its core to others (the scaling rows
 * of fewer ranks are measured while the rest wait here). */
void tb_comm_barrier_idle(tb_comm *c, double poll_s);
void tb_comm_bcast(tb_comm *c, void *buf, size_t count, tb_comm_type t, int root);
void tb_comm_allreduce_sum(tb_comm *c, void *buf, size_t count, tb_comm_type t);
/* The same sum for a thread that should leave its core to others while the
 * data moves: a non-blocking all-reduce, tested with sleeps of up to
 * poll_s in between instead of MPI's busy-polling wait (poll_s <= 0: the
 * blocking call). MPI progresses only inside the tests, so poll_s bounds
 * the delay added at each step of the algorithm. */
void tb_comm_allreduce_sum_idle(tb_comm *c, void *buf, size_t count, tb_comm_type t, double poll_s);
void tb_comm_allreduce_max(tb_comm *c, void *buf, size_t count, tb_comm_type t);
void tb_comm_allreduce_min(tb_comm *c, void *buf, size_t count, tb_comm_type t);
/* In-place sum of bfloat16 values (the device gradient path's bf16
 * compression over MPI): each pairwise addition in float32, rounded to
 * bfloat16 to nearest even (comm/bf16.h), as NCCL's bf16 reduction does. */
void tb_comm_allreduce_sum_bf16(tb_comm *c, uint16_t *buf, size_t count);
/* recv holds size * bytes; every rank contributes `bytes` from send. */
void tb_comm_allgather(tb_comm *c, const void *send, void *recv, size_t bytes);
/* Like allgather, but only root's recv is filled. */
void tb_comm_gather(tb_comm *c, const void *send, void *recv, size_t bytes, int root);

/* Gathers a different number of bytes from every rank to root: returns a
 * malloc'd buffer of all ranks' bytes in rank order (root; NULL elsewhere)
 * and their sizes in counts[world] (root). */
char *tb_comm_gather_bytes(tb_comm *c, const void *send, size_t bytes, int root, size_t *counts);

/* Every rank calls this together after a verdict they all reached (a launch
 * mistake): a clean collective exit with `code`, no MPI_Abort banner. */
_Noreturn void tb_comm_exit_all(tb_comm *c, int code);

/* Rank 0 collects `bytes` from every rank point to point, waiting at most
 * timeout_s: rows (size x bytes, rank 0 only) and arrived[r] (rank 0 only)
 * say who answered. Returns the number of ranks that did not (0 elsewhere).
 * Uses no collective, so a silent rank cannot hang it. */
int tb_comm_roll_call(tb_comm *c, const void *row, void *rows, size_t bytes, double timeout_s,
                      int *arrived);

/* In-place sum with a deadline: 0 when done (seconds taken in *elapsed),
 * -1 when it did not finish within timeout_s (the collective is abandoned:
 * the caller must end the job). */
int tb_comm_allreduce_sum_timeout(tb_comm *c, void *buf, size_t count, tb_comm_type t,
                                  double timeout_s, double *elapsed);
/* A barrier with a deadline (a non-blocking barrier tested without pause,
 * so the ranks leave it as close together as MPI allows): 0 when every
 * rank arrived, -1 when not within timeout_s (abandoned: the caller must
 * end the job). */
int tb_comm_barrier_timeout(tb_comm *c, double timeout_s);

#endif
