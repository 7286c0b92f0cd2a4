/* main.c - trainbench's entry point: picks the subcommand (train when none
 * is named) and hands it the remaining flags. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/cpu_dispatch.h"
#include "core/log.h"
#include "core/proc_limits.h"
#include "core/version.h"
#include "model/cpu/cpu_blas.h"
#include "src/cmd/commands.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *what;
} subcommand;

static const subcommand k_commands[] = {
    {"train", tb_cmd_train, "train the ResNet and time it (the default)"},
    {"step", tb_cmd_step, "one training step from a checkpoint and a batch file (golden checks)"},
    {"mkdata", tb_cmd_mkdata, "write an ImageNet-like synthetic JPEG data set"},
    {"loader-bench", tb_cmd_loader_bench, "measure the JPEG loader: img/s per thread count"},
    {"allreduce-bench", tb_cmd_allreduce_bench, "all-reduce sweep (nccl-tests style) on the training path"},
    {"preflight", tb_cmd_preflight, "per-rank check of hosts, devices, versions, environment; one timed all-reduce"},
    {"probe", tb_cmd_probe, "is the GPU stack assembled right: versions built for vs loaded, device, copy and GEMM ceilings"},
    {"report", tb_cmd_report, "a results file's provenance and tables; two files side by side (--format md|csv)"},
    {"project", tb_cmd_project, "predict N-rank efficiency from one rank's step and a fabric, beside the measured rows"},
};
static const int k_ncommands = (int)(sizeof k_commands / sizeof k_commands[0]);

static void usage(void) {
    printf("trainbench %s (%s): trains a ResNet on CPU or GPU and measures it\n\n", tb_version_string,
           tb_git_revision);
    printf("usage: trainbench [SUBCOMMAND] [options]    ('trainbench SUBCOMMAND --help')\n\n");
    for (int i = 0; i < k_ncommands; i++)
        printf("  %-16s %s\n", k_commands[i].name, k_commands[i].what);
    printf("\nenvironment:\n  %-16s vector level of trainbench's own loops: baseline, avx2, avx512 or auto (the "
           "default: the best this CPU offers); see docs/cpu_dispatch.md\n",
           TB_CPU_LEVEL_ENV);
}

/* A standard descriptor the caller closed (trainbench >&-) is the first a
 * later open gets: mkdata's JPEGs took descriptor 1, and a print that
 * flushed while one was open would have gone into the image. /dev/null,
 * read-only, holds its place: a write fails there as on the closed one
 * (EBADF, which output_checked reports). */
static void hold_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
        int n = open("/dev/null", O_RDONLY);
        if (n >= 0 && n != fd) {
            dup2(n, fd);
            close(n);
        }
    }
}

/* The command's output lost (a redirection to a full disk, a closed
 * descriptor): stdio failed quietly and the exit status said 0, the log
 * the user kept cut short without a word. One line, and exit status 1. */
static int output_checked(int rc) {
    errno = 0;
    int bad = fflush(stdout) != 0, err = errno;
    if (!bad && !ferror(stdout)) return rc;
    /* an earlier flush may have taken the error (errno then unset here):
     * what stdout is says which advice fits */
    struct stat st;
    int fl = fcntl(STDOUT_FILENO, F_GETFL);
    int closed = fstat(STDOUT_FILENO, &st) != 0 || err == EBADF ||
                 (S_ISCHR(st.st_mode) && fl >= 0 && (fl & O_ACCMODE) == O_RDONLY); /* hold_std_fds' /dev/null */
    int pipe = !closed && (err == EPIPE || tb_stdout_is_pipe());
    tb_say_error("standard output: %s; what trainbench printed there is incomplete (the files it wrote are whole): "
                 "%s", bad && err ? strerror(err) : closed ? "closed" : pipe ? strerror(EPIPE) : "a write failed",
                 pipe     ? "its reader stopped reading ('| head'); send it to a file to keep all of it"
                 : closed ? "it was closed (>&-); send it to a file or /dev/null"
                 : err == EFBIG ? "raise the file-size limit (ulimit -f) or send it elsewhere"
                                : "free space there or send it elsewhere");
    return rc ? rc : 1;
}

int main(int argc, char **argv) {
    hold_std_fds();
    /* a soft stack or descriptor limit under what the threads and MPI's start need: raised (the stack by
     * re-running the program, before any thread has started) */
    tb_limits_raise(argv);
    /* before anything else: may re-run the program with OPENBLAS_CORETYPE
     * set, when the BLAS fell back to kernels below the CPU's */
    tb_cpu_blas_kernels_ensure(argv);
    /* a write past the file-size limit (ulimit -f) fails with EFBIG, and
     * its writer says which file in one line and removes its temporary;
     * SIGXFSZ's default ended the process there without a line, leaving
     * NAME.tmp.PID and the results file's snapshot */
    signal(SIGXFSZ, SIG_IGN);
    /* standard output piped to a reader that has gone ('| head'): the
     * writes fail with EPIPE, the command finishes and writes its files,
     * and output_checked says so, where SIGPIPE's default ended it without
     * a line (loader-bench's results file never written). train's own
     * handler stops a run instead (train_signals.c) */
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "help") == 0)) {
        usage();
        return output_checked(0);
    }
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        printf("trainbench %s (%s)\n", tb_version_string, tb_git_revision);
        return output_checked(0);
    }
    tb_cpu_dispatch_init(); /* the vector level; a TB_CPU_LEVEL this CPU lacks ends here, in one line */
    if (argc < 2 || argv[1][0] == '-') {
        tb_comm_set_command("train");
        return output_checked(tb_cmd_train(argc - 1, argv + 1));
    }
    for (int i = 0; i < k_ncommands; i++)
        if (strcmp(argv[1], k_commands[i].name) == 0) {
            tb_comm_set_command(k_commands[i].name);
            return output_checked(k_commands[i].run(argc - 2, argv + 2));
        }
    tb_log_usage_errors(1); /* the same on every rank: rank 0 says it */
    tb_die("unknown subcommand '%s'; run 'trainbench --help' for the list", argv[1]);
}
