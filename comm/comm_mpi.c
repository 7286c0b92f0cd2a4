/* comm_mpi.c - the MPI implementation of comm.h: bootstrap (thread level,
 * local rank from the shared-memory split, host names), the job-wide abort
 * hook, sub-communicators and collectives on host buffers: blocking ones,
 * and a sum that sleeps while it waits (the gradient thread's). */
#include <mpi.h>
#include <stdio.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bf16.h"
#include "comm/comm.h"
#include "comm/comm_mpi.h"
#include "comm/monitor.h"
#include "core/log.h"
#include "core/proc_limits.h"
#include "core/timer.h"

struct tb_comm {
    MPI_Comm comm;
    int rank, size;
    int owned;                 /* created by us: free it */
};

static tb_comm g_world = {MPI_COMM_NULL, 0, 1, 0};
static int g_initialised = 0;
static char g_command[32] = ""; /* tb_comm_set_command's */

void tb_comm_set_command(const char *name) { snprintf(g_command, sizeof g_command, "%s", name ? name : ""); }

/* Every rank runs the subcommand rank 0 runs, checked before the
 * subcommands' collectives part ways (they would wait for --timeout).
 * Every rank reaches the same verdict, prints it and ends together. */
static void check_same_command(void) {
    if (g_world.size < 2) return;
    char *all = malloc((size_t)g_world.size * sizeof g_command);
    if (!all) TB_FATAL("out of memory for %d ranks' subcommand names", g_world.size);
    tb_comm_allgather(&g_world, g_command, all, sizeof g_command);
    for (int r = 1; r < g_world.size; r++) {
        const char *c = all + (size_t)r * sizeof g_command;
        if (strncmp(c, all, sizeof g_command) != 0) {
            tb_say_error("launch mistake: rank %d runs 'trainbench %.31s' but rank 0 runs 'trainbench %.31s': an "
                         "MPMD launch (A : B) started different subcommands; start every rank with the same one",
                         r, c, all);
            tb_comm_exit_all(&g_world, 1);
        }
    }
    free(all);
}

void tb_mpi_check(int rc, const char *expr, const char *file, int line) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    tb_fatal_at(file, line, "MPI call failed: %s: %s", expr, msg);
}

/* A failing rank takes the whole job down (MPI_Abort). Alone, there is no
 * one to take down: exit quietly instead of through Open MPI's banner. */
static void abort_job(int code) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (g_initialised && !fin && g_world.size > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

/* The settings set_default put in the environment (tb_comm_env_defaults). */
#define OWN_MAX 8
static char g_own[OWN_MAX][96];
static int g_own_n;

/* name=value where the environment has no name (the launch's or the user's
 * own value wins), remembered as trainbench's. */
static void set_default(const char *name, const char *value) {
    if (getenv(name) || g_own_n >= OWN_MAX) return;
    setenv(name, value, 1);
    snprintf(g_own[g_own_n++], sizeof g_own[0], "%s=%s", name, value);
}

void tb_comm_env_defaults(char *buf, size_t len) {
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < g_own_n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? " " : "", g_own[i]);
}

int tb_comm_env_ours(const char *entry) {
    for (int i = 0; i < g_own_n; i++)
        if (strcmp(entry, g_own[i]) == 0) return 1;
    return 0;
}

/* Whether MPI's ranks were started by a launcher: the variables Open MPI's
 * own start looks for (mpirun's, PMIx's, PMI's). Slurm's task variables
 * alone are no such launcher (`srun --mpi=none`, a batch script's own
 * step): MPI starts as a singleton there. */
static int mpi_launched(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMIX_NAMESPACE", "PMI_FD", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

/* Too low a limit at MPI's start ended in pages of ORTE_ERROR_LOG lines, or
 * a thread's segfault. Measured with Open MPI 4.1 here: a run without a
 * launcher (a singleton: Open MPI 4 starts a daemon for it) failed under
 * `ulimit -n` 24 and `ulimit -s` 200 KiB and ran at 28 and 256 KiB; at 200
 * KiB trainbench's own threads, whose stacks the limit sizes, overflowed
 * too (launched or not). main raised a soft limit under these toward its
 * hard one (core/proc_limits.h); where that was not enough, one line names
 * the limit and what to do, before MPI_Init. A launcher's ranks start with
 * fewer descriptors (20 did), and so does a singleton that starts no daemon
 * (ess_singleton_isolated, trainbench's default: 16 did). */
static int singleton_daemon(void) {
    if (mpi_launched()) return 0;
    const char *v = getenv("OMPI_MCA_ess_singleton_isolated");
    if (!v) return 1;
    /* read as Open MPI reads a boolean (mca_base_var_enum_bool): blanks
     * skipped, a whole integer true unless 0, else these words exactly;
     * any other value it refuses, and its default (a daemon) stands */
    v += strspn(v, " \t\n\v\f\r");
    char *end;
    long n = strtol(v, &end, 10);
    if (*end == '\0') return n == 0;
    static const char *const yes[] = {"true", "t", "enabled", "yes", "y"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        if (strcmp(v, yes[i]) == 0) return 0;
    return 1;
}

static void start_limits(void) {
    static const struct {
        int res, singleton_only;
        const char *name, *flag, *unit, *who;
        rlim_t need, usual, per_unit;
    } lims[] = {
        {RLIMIT_STACK, 0, "stack-size", "-s", "KiB", "trainbench's threads and MPI's start need",
         TB_STACK_FLOOR_BYTES, TB_STACK_USUAL_BYTES, 1024},
#if defined(OPEN_MPI) && defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
        {RLIMIT_NOFILE, 1, "open-files", "-n", "descriptors",
         "MPI's start without a launcher (Open MPI's daemon) needs", 28, TB_NOFILE_USUAL, 1},
#endif
    };
    for (size_t i = 0; i < sizeof lims / sizeof *lims; i++) {
        struct rlimit rl;
        if ((lims[i].singleton_only && !singleton_daemon()) || getrlimit(lims[i].res, &rl) != 0 ||
            rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= lims[i].need)
            continue;
        unsigned long long per = lims[i].per_unit, usual = lims[i].usual / per;
        char hard[48];
        if (rl.rlim_max == RLIM_INFINITY) snprintf(hard, sizeof hard, "unlimited");
        else snprintf(hard, sizeof hard, "%llu", (unsigned long long)(rl.rlim_max / per));
        int soft_only = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= lims[i].need;
        char advice[160];
        if (soft_only) snprintf(advice, sizeof advice, "raise it (`ulimit -S %s %llu`)", lims[i].flag, usual);
        else
            snprintf(advice, sizeof advice, "raise the hard limit (as root `ulimit -H %s %llu`, or the site's "
                     "limits.conf)", lims[i].flag, usual);
        tb_log_usage_errors(1); /* every rank of a launch has its host's limits: rank 0 says it */
        tb_die("the %s limit (ulimit %s) is %llu %s, its hard limit %s: %s %llu %s or more; %s and run again",
               lims[i].name, lims[i].flag, (unsigned long long)(rl.rlim_cur / per), lims[i].unit, hard, lims[i].who,
               (unsigned long long)(lims[i].need / per), lims[i].unit, advice);
    }
}

/* Open MPI 5's shared-memory BTL sizes its segment (btl_sm_segment_size,
 * 16 MiB) with ftruncate in MPI_Init, a singleton's too: under a file-size
 * limit (ulimit -f) below it a page of "A system call failed during shared
 * memory initialization" came first. That limit is meant for the files a
 * run writes: its soft value is lifted to the hard one across MPI_Init (1
 * returned: put *saved back after), and where the hard one is low too, a
 * singleton, which has no peer to share memory with, leaves the BTL out.
 * Open MPI 4's PMIx client maps its data store (gds ds21) into files too:
 * under a hard limit below ~5 MiB MPI_Init printed nine "PMIX ERROR ...
 * gds_ds21_lock_pthread.c" lines and aborted, under mpirun or alone; the
 * hash store keeps it in memory (PMIX_MCA_gds=hash, unless the user set
 * it), and the run reaches its own "File too large" line. */
static int lift_fsize(struct rlimit *saved) { /* "low": under 64 MiB, the default segment with room for a larger one */
    if (getrlimit(RLIMIT_FSIZE, saved) != 0 || saved->rlim_cur == RLIM_INFINITY) return 0;
    int lifted = 0;
    if (saved->rlim_cur < saved->rlim_max) {
        struct rlimit up = {saved->rlim_max, saved->rlim_max};
        lifted = setrlimit(RLIMIT_FSIZE, &up) == 0;
    }
#ifdef OPEN_MPI
    rlim_t now = lifted ? saved->rlim_max : saved->rlim_cur;
    int low = now != RLIM_INFINITY && now < ((rlim_t)64 << 20);
    if (low) set_default("PMIX_MCA_gds", "hash");
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
    if (low && !mpi_launched()) set_default("OMPI_MCA_btl", "self");
#endif
#endif
    return lifted;
}

void tb_comm_init(int *argc, char ***argv, tb_comm_info *info) {
    memset(info, 0, sizeof *info);
#ifdef OPEN_MPI
    /* A run without a launcher is a singleton: one rank, no peer. Open MPI
     * 4.1 forks a daemon for it and tries UCX's PML first; 0.38 s of every
     * such start, against 0.05 s isolated with ob1 (an MPI_Init_thread +
     * MPI_Finalize program here, Open MPI 4.1.4). Neither serves one rank:
     * its collectives are local copies. Open MPI 5 starts no daemon and
     * ignores the first; a user's own values win. */
    if (!mpi_launched()) {
        set_default("OMPI_MCA_ess_singleton_isolated", "1");
        set_default("OMPI_MCA_pml", "ob1");
    }
#endif
    start_limits();
#ifdef OPEN_MPI
    /* The gradient buckets are summed in place with MPI_Iallreduce
     * (tb_comm_allreduce_sum_idle). For an in-place sum on fewer than 4
     * ranks Open MPI's libnbc picks its binomial algorithm (reduce to rank
     * 0, then broadcast): one direction of each link at a time, twice the
     * ring's time on 2 ranks (measured: 16 MiB over a 1 Gbit/s link, 286 ms
     * binomial, 150 ms ring). Ask for the ring unless the user chose (an
     * mpirun --mca or OMPI_MCA_ variable is in the environment by now). */
    set_default("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1");
    /* Between ranks on one host, a large message goes through the shared-
     * memory BTL's single copy (CMA) where the kernel allows it, else
     * through its pipeline of max_send_size fragments (32 KiB), one moved
     * per progress call. The gradient all-reduce is tested every <= 200 us
     * while its thread sleeps (wait_idle), so without CMA (containers,
     * VMs that refuse process_vm_readv: the lent GPU machines, by their
     * numbers) it crawled: 2 ranks here with CMA turned off, 2 to 32 MiB,
     * 0.18-0.23 GB/s against 1.6-1.8 busy-polling; with 256 KiB fragments
     * 1.25-1.27 GB/s at 2-8 MiB, 0.93 at 32 MiB, and no change with CMA on
     * (bench: `allreduce-bench --comm mpi`, results/allreduce_cpu_np2.md).
     * Open MPI 4 names the BTL vader, 5 sm (vader an alias): a user's value
     * under either name leaves both alone. An environment variable outranks
     * mca-params.conf, so a site's file setting is overridden here: set
     * OMPI_MCA_btl_vader_max_send_size to keep it. */
    if (!getenv("OMPI_MCA_btl_vader_max_send_size") && !getenv("OMPI_MCA_btl_sm_max_send_size")) {
        set_default("OMPI_MCA_btl_vader_max_send_size", "262144");
        set_default("OMPI_MCA_btl_sm_max_send_size", "262144");
    }
#endif
    struct rlimit fsize;
    int fsize_lifted = lift_fsize(&fsize);
    int provided = 0;
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    if (fsize_lifted) setrlimit(RLIMIT_FSIZE, &fsize);
    g_initialised = 1;
    tb_set_abort_hook(abort_job);
    /* errors come back to us (MPI_CHECK) instead of MPI's default abort */
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    g_world.comm = MPI_COMM_WORLD;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_world.size));

    MPI_Comm node;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world.rank,
                                  MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &info->local_rank));
    MPI_CHECK(MPI_Comm_size(node, &info->local_size));
    MPI_CHECK(MPI_Comm_free(&node));

    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    snprintf(info->host, sizeof info->host, "%s", name);
    info->rank = g_world.rank;
    info->world = g_world.size;
    info->distributed = 1;
    info->thread_level = provided;
    tb_log_set_identity(info->rank, info->world, info->host);
    check_same_command(); /* MPI_Comm_split_type above is every subcommand's too */
    if (provided < MPI_THREAD_SERIALIZED)
        tb_die("the MPI library provides thread level %d, but trainbench's gradient thread needs "
               "at least MPI_THREAD_SERIALIZED; use an MPI built with thread support",
               provided);
}

void tb_comm_finalize(void) {
    int fin = 0;
    MPI_CHECK(MPI_Finalized(&fin));
    if (g_initialised && !fin) MPI_CHECK(MPI_Finalize());
}

void tb_comm_library_version(char *buf, size_t len) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int n = 0;
    MPI_CHECK(MPI_Get_library_version(v, &n));
    char *nl = strpbrk(v, ",\n");
    if (nl) *nl = '\0';
    snprintf(buf, len, "%s", v);
}

tb_comm *tb_comm_world(void) { return &g_world; }

tb_comm *tb_comm_first_n(tb_comm *parent, int n) {
    int member = parent->rank < n;
    MPI_Comm sub;
    MPI_CHECK(MPI_Comm_split(parent->comm, member ? 0 : MPI_UNDEFINED, parent->rank, &sub));
    if (!member) return NULL;
    tb_comm *c = calloc(1, sizeof *c);
    if (!c) TB_FATAL("out of host memory");
    c->comm = sub;
    c->owned = 1;
    MPI_CHECK(MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(sub, &c->rank));
    MPI_CHECK(MPI_Comm_size(sub, &c->size));
    return c;
}

void tb_comm_free(tb_comm *c) {
    if (!c || !c->owned) return;
    MPI_CHECK(MPI_Comm_free(&c->comm));
    free(c);
}

int tb_comm_rank(const tb_comm *c) { return c->rank; }
int tb_comm_size(const tb_comm *c) { return c->size; }

MPI_Datatype tb_mpi_type(tb_comm_type t) {
    switch (t) {
    case TB_FLOAT32: return MPI_FLOAT;
    case TB_FLOAT64: return MPI_DOUBLE;
    case TB_BYTES: return MPI_BYTE;
    default: return MPI_INT64_T;
    }
}

MPI_Comm tb_mpi_comm(const tb_comm *c) { return c->comm; }

/* MPI counts are int: large buffers go in chunks. */
#define CHUNK ((size_t)1 << 30)

static size_t type_size(tb_comm_type t) { return t == TB_BYTES ? 1 : t == TB_FLOAT32 ? 4 : 8; }

void tb_comm_barrier(tb_comm *c) { MPI_CHECK(MPI_Barrier(c->comm)); }

void tb_comm_barrier_idle(tb_comm *c, double poll_s) {
    MPI_Request rq;
    MPI_CHECK(MPI_Ibarrier(c->comm, &rq));
    struct timespec ts = {(time_t)poll_s, (long)((poll_s - (double)(time_t)poll_s) * 1e9)};
    for (;;) {
        int done = 0;
        MPI_CHECK(MPI_Test(&rq, &done, MPI_STATUS_IGNORE));
        if (done) return;
        nanosleep(&ts, NULL);
    }
}

void tb_comm_bcast(tb_comm *c, void *buf, size_t count, tb_comm_type t, int root) {
    for (size_t off = 0; off < count; off += CHUNK) {
        size_t n = count - off < CHUNK ? count - off : CHUNK;
        MPI_CHECK(MPI_Bcast((char *)buf + off * type_size(t), (int)n, tb_mpi_type(t), root, c->comm));
    }
}

static void allreduce(tb_comm *c, void *buf, size_t count, tb_comm_type t, MPI_Op op) {
    for (size_t off = 0; off < count; off += CHUNK) {
        size_t n = count - off < CHUNK ? count - off : CHUNK;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * type_size(t), (int)n,
                                tb_mpi_type(t), op, c->comm));
    }
}

/* Waits for n requests without holding a core: it tests them back to back
 * for the first spin_s (a short all-reduce is over by then), then sleeps
 * between tests a tenth of the time waited so far, at least 5 us and at
 * most poll_s: a step of the algorithm that ends during a sleep is taken
 * up at most ~10 % late (or poll_s), and a long transfer costs a test
 * every poll_s. The thread's timer slack is lowered to 5 us once, so that
 * a short sleep is not stretched to the default 50 us. */
static void wait_idle(MPI_Request *rq, int n, double poll_s) {
#ifdef __linux__
    static _Thread_local int slack_set = 0;
    if (!slack_set) {
        prctl(PR_SET_TIMERSLACK, 5000UL, 0UL, 0UL, 0UL);
        slack_set = 1;
    }
#endif
    double spin_s = poll_s < 200e-6 ? poll_s / 4 : 50e-6;
    double t0 = tb_now();
    for (;;) {
        int done = 0;
        MPI_CHECK(MPI_Testall(n, rq, &done, MPI_STATUSES_IGNORE));
        if (done) return;
        double waited = tb_now() - t0;
        if (waited < spin_s) continue;
        double sl = waited / 10 < 5e-6 ? 5e-6 : waited / 10 > poll_s ? poll_s : waited / 10;
        struct timespec ts = {(time_t)sl, (long)((sl - (double)(time_t)sl) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

void tb_comm_allreduce_sum_idle(tb_comm *c, void *buf, size_t count, tb_comm_type t, double poll_s) {
    if (poll_s <= 0) {
        allreduce(c, buf, count, t, MPI_SUM);
        return;
    }
    enum { MAXRQ = 16 };
    MPI_Request rq[MAXRQ];
    int n = 0;
    for (size_t off = 0; off < count; off += CHUNK) {
        size_t k = count - off < CHUNK ? count - off : CHUNK;
        if (n == MAXRQ) {
            wait_idle(rq, n, poll_s);
            n = 0;
        }
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + off * type_size(t), (int)k, tb_mpi_type(t),
                                 MPI_SUM, c->comm, &rq[n++]));
    }
    wait_idle(rq, n, poll_s);
}

void tb_comm_allreduce_sum(tb_comm *c, void *buf, size_t count, tb_comm_type t) {
    allreduce(c, buf, count, t, MPI_SUM);
}
void tb_comm_allreduce_max(tb_comm *c, void *buf, size_t count, tb_comm_type t) {
    allreduce(c, buf, count, t, MPI_MAX);
}
void tb_comm_allreduce_min(tb_comm *c, void *buf, size_t count, tb_comm_type t) {
    allreduce(c, buf, count, t, MPI_MIN);
}

/* MPI has no bfloat16: a user operation over MPI_UINT16_T that adds in
 * float32 and rounds to nearest even. Commutative: MPI may pair ranks in
 * any order, so with more than two ranks the roundings (not the result's
 * accuracy bound) depend on the library's reduction tree. */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = tb_f32_to_bf16(tb_bf16_to_f32(a[i]) + tb_bf16_to_f32(b[i]));
}

void tb_comm_allreduce_sum_bf16(tb_comm *c, uint16_t *buf, size_t count) {
    static MPI_Op op = MPI_OP_NULL; /* made once, on first use; left to MPI_Finalize */
    if (op == MPI_OP_NULL) MPI_CHECK(MPI_Op_create(bf16_sum, 1, &op));
    for (size_t off = 0; off < count; off += CHUNK) {
        size_t n = count - off < CHUNK ? count - off : CHUNK;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)n, MPI_UINT16_T, op, c->comm));
    }
}

void tb_comm_allgather(tb_comm *c, const void *send, void *recv, size_t bytes) {
    TB_ASSERT(bytes < CHUNK);
    MPI_CHECK(MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, c->comm));
}

void tb_comm_gather(tb_comm *c, const void *send, void *recv, size_t bytes, int root) {
    TB_ASSERT(bytes < CHUNK);
    MPI_CHECK(MPI_Gather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, root, c->comm));
}

_Noreturn void tb_comm_exit_all(tb_comm *c, int code) {
    fflush(NULL);
    tb_monitor_stop_running(); /* its thread is inside MPI: stopped before MPI_Finalize */
    MPI_CHECK(MPI_Barrier(c->comm));
    MPI_CHECK(MPI_Finalize());
    fflush(NULL);
    _exit(code); /* not exit: other threads (loader, OpenBLAS, snapshots) still run (core/log.h) */
}

int tb_comm_roll_call(tb_comm *c, const void *row, void *rows, size_t bytes, double timeout_s,
                      int *arrived) {
    const int tag = 0x7b01;
    TB_ASSERT(bytes < CHUNK);
    if (c->rank != 0) {
        MPI_Request rq;
        MPI_CHECK(MPI_Isend(row, (int)bytes, MPI_BYTE, 0, tag, c->comm, &rq));
        /* rank 0 may give up on someone and abort: wait without a deadline */
        MPI_CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        return 0;
    }
    memcpy(rows, row, bytes);
    arrived[0] = 1;
    MPI_Request *rq = calloc((size_t)c->size, sizeof *rq);
    if (!rq) TB_FATAL("out of host memory");
    for (int r = 1; r < c->size; r++) {
        arrived[r] = 0;
        MPI_CHECK(MPI_Irecv((char *)rows + (size_t)r * bytes, (int)bytes, MPI_BYTE, r, tag, c->comm,
                            &rq[r]));
    }
    double deadline = tb_now() + timeout_s;
    int missing = c->size - 1;
    while (missing > 0 && tb_now() < deadline) {
        for (int r = 1; r < c->size; r++) {
            if (arrived[r]) continue;
            int done = 0;
            MPI_CHECK(MPI_Test(&rq[r], &done, MPI_STATUS_IGNORE));
            if (done) {
                arrived[r] = 1;
                missing--;
            }
        }
        if (missing > 0) {
            struct timespec ts = {0, 1000000}; /* 1 ms */
            nanosleep(&ts, NULL);
        }
    }
    /* a cancelled receive completes at once (or with its message, when one
     * arrived meanwhile): wait for it, so no late message lands in rows */
    for (int r = 1; r < c->size; r++)
        if (!arrived[r]) {
            MPI_Status st;
            int cancelled = 0;
            MPI_CHECK(MPI_Cancel(&rq[r]));
            MPI_CHECK(MPI_Wait(&rq[r], &st));
            MPI_CHECK(MPI_Test_cancelled(&st, &cancelled));
            if (!cancelled) { /* its row came in as the wait ended: the rank is there after all */
                arrived[r] = 1;
                missing--;
            }
        }
    free(rq);
    return missing;
}

int tb_comm_allreduce_sum_timeout(tb_comm *c, void *buf, size_t count, tb_comm_type t,
                                  double timeout_s, double *elapsed) {
    TB_ASSERT(count < CHUNK);
    MPI_Request rq;
    double t0 = tb_now();
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, tb_mpi_type(t), MPI_SUM, c->comm, &rq));
    int done = 0;
    while (!done) {
        MPI_CHECK(MPI_Test(&rq, &done, MPI_STATUS_IGNORE));
        if (!done && tb_now() - t0 > timeout_s) return -1;
    }
    *elapsed = tb_now() - t0;
    return 0;
}

int tb_comm_barrier_timeout(tb_comm *c, double timeout_s) {
    MPI_Request rq;
    double t0 = tb_now();
    MPI_CHECK(MPI_Ibarrier(c->comm, &rq));
    int done = 0;
    while (!done) {
        MPI_CHECK(MPI_Test(&rq, &done, MPI_STATUS_IGNORE));
        if (!done && tb_now() - t0 > timeout_s) return -1;
    }
    return 0;
}

char *tb_comm_gather_bytes(tb_comm *c, const void *send, size_t bytes, int root, size_t *counts) {
    TB_ASSERT(bytes < CHUNK);
    int mine = (int)bytes;
    int *n = c->rank == root ? calloc((size_t)c->size, sizeof *n) : NULL;
    if (c->rank == root && !n) TB_FATAL("out of host memory");
    MPI_CHECK(MPI_Gather(&mine, 1, MPI_INT, n, 1, MPI_INT, root, c->comm));
    int *displ = NULL;
    char *all = NULL;
    if (c->rank == root) {
        displ = calloc((size_t)c->size, sizeof *displ);
        if (!displ) TB_FATAL("out of host memory");
        size_t total = 0;
        for (int r = 0; r < c->size; r++) {
            if (total + (size_t)n[r] >= CHUNK)
                TB_FATAL("the lists gathered to rank %d from %d ranks exceed 1 GiB, what one MPI call takes: "
                         "run with fewer ranks", root, c->size);
            displ[r] = (int)total;
            counts[r] = (size_t)n[r];
            total += (size_t)n[r];
        }
        all = malloc(total + 1);
        if (!all) TB_FATAL("out of host memory");
    }
    MPI_CHECK(MPI_Gatherv(send, mine, MPI_BYTE, all, n, displ, MPI_BYTE, root, c->comm));
    free(n);
    free(displ);
    return all;
}
