/* log.c - rank-aware one-line messages and the job-wide abort path. */
#include "src/log.h"

#include <stdlib.h>
#include <string.h>

static int g_rank = -1;
static int g_world = 1;
static char g_host[64] = "";
static tb_abort_hook g_abort_hook = NULL;

void tb_log_set_identity(int rank, int world, const char *host) {
    g_rank = rank;
    g_world = world;
    snprintf(g_host, sizeof g_host, "%s", host ? host : "");
}

int tb_log_rank(void) { return g_rank; }
const char *tb_log_host(void) { return g_host; }

void tb_set_abort_hook(tb_abort_hook hook) { g_abort_hook = hook; }

_Noreturn void tb_abort(int exit_code) {
    fflush(stdout);
    fflush(stderr);
    if (g_abort_hook) g_abort_hook(exit_code);
    exit(exit_code);
}

static void prefix(FILE *f) {
    if (g_rank >= 0 && g_world > 1)
        fprintf(f, "trainbench[rank %d %s]: ", g_rank, g_host);
    else
        fputs("trainbench: ", f);
}

_Noreturn void tb_die(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    prefix(stderr);
    fputs("error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    tb_abort(1);
}

_Noreturn void tb_fatal_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    prefix(stderr);
    fprintf(stderr, "%s:%d: fatal: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    tb_abort(1);
}

void tb_warn(const char *fmt, ...) {
    va_list ap;
    prefix(stderr);
    fputs("warning: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void tb_info(const char *fmt, ...) {
    if (g_rank > 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}
