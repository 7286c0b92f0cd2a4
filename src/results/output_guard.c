/* output_guard.c - see output_guard.h. */
#define _DEFAULT_SOURCE /* realpath */
#include "src/results/output_guard.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/log.h"
#include "src/results/checkpoint.h"
#include "src/results/h5io.h"
#include "src/results/results_read.h"

/* The directory path's file lands in ("/" for "/a.h5", "." for "a.h5"); returns its base name. */
static const char *dir_of(const char *path, char *dir, size_t len) {
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(dir, len, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    else snprintf(dir, len, ".");
    return slash ? slash + 1 : path;
}

typedef enum {
    FOUND_EMPTY, FOUND_CHECKPOINT, FOUND_RESULTS, FOUND_BATCH, FOUND_HDF5, FOUND_TRACE, FOUND_FILE
} found_kind;

/* Whether the file at path begins as trainbench's Chrome-trace JSON does
 * (--trace, loader-bench --timeline). */
static int trace_json(const char *path) {
    static const char head[] = "{\"displayTimeUnit\":";
    char buf[64] = "", *o = buf;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    for (int ch; o < buf + sizeof buf - 1 && (ch = fgetc(f)) != EOF;)
        if (ch != ' ') *o++ = (char)ch;
    fclose(f);
    *o = '\0';
    return strncmp(buf, head, sizeof head - 1) == 0;
}

/* What an existing regular file is: a checkpoint ('model' and /params, as
 * tb_ckpt_peek_step reads it), a results file (root attribute 'status', or
 * one of tb_results_tables: tb_results_load's test), a batch file (/images
 * and /labels), another HDF5 file, a trace, anything else, or empty. */
static found_kind found_at(const char *path, off_t size, int64_t *step) {
    if (size == 0) return FOUND_EMPTY;
    if (tb_ckpt_peek_step(path, step)) return FOUND_CHECKPOINT;
    tb_h5_lock("output check");
    tb_h5_quiet();
    hid_t f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    int results = f >= 0 && H5Aexists(f, "status") > 0;
    for (int i = 0; f >= 0 && !results && tb_results_tables[i]; i++)
        results = H5Lexists(f, tb_results_tables[i], H5P_DEFAULT) > 0;
    int batch = f >= 0 && !results && H5Lexists(f, "images", H5P_DEFAULT) > 0 &&
                H5Lexists(f, "labels", H5P_DEFAULT) > 0;
    if (f >= 0) H5Fclose(f);
    tb_h5_unlock();
    return results ? FOUND_RESULTS : batch ? FOUND_BATCH : f >= 0 ? FOUND_HDF5 : trace_json(path) ? FOUND_TRACE
                                                                                              : FOUND_FILE;
}

/* An existing path this output must not replace: one line in why, -1. */
static int in_the_way(const char *path, tb_output_kind kind, const char *what, const char *flag, char *why,
                      size_t len) {
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) {
        snprintf(why, len, "%s '%s' is a directory, not a %s; give %s a file path (a new file inside it, or another "
                 "path)", flag, path, what, flag);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, len, "%s '%s' is not a regular file (%s), and writing the %s would put a file in its place; "
                 "give %s a file path",
                 flag, path, S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISFIFO(st.st_mode) ? "a FIFO"
                 : S_ISSOCK(st.st_mode) ? "a socket" : "not a file", what, flag);
        return -1;
    }
    int64_t step = -1;
    found_kind found = found_at(path, st.st_size, &step);
    if (found == FOUND_CHECKPOINT && kind != TB_OUT_CHECKPOINT) {
        snprintf(why, len, "%s '%s' holds a trainbench checkpoint (step %lld), which the %s would replace; give "
                 "%s another path, or remove the checkpoint if it is not wanted",
                 flag, path, (long long)step, what, flag);
        return -1;
    }
    if (found == FOUND_RESULTS && kind != TB_OUT_RESULTS) {
        snprintf(why, len, "%s '%s' holds a trainbench results file, which the %s would replace; give %s another "
                 "path, or remove the results file if it is not wanted",
                 flag, path, what, flag);
        return -1;
    }
    /* what this output replaces: its own kind, an empty file; never another kind of file */
    if (found == FOUND_BATCH || found == FOUND_HDF5 || found == FOUND_FILE ||
        (found == FOUND_TRACE && kind != TB_OUT_TEXT)) {
        snprintf(why, len, "%s '%s' holds %s, not a trainbench %s, and writing the %s would replace it; give %s "
                 "another path, or remove the file if it is not wanted",
                 flag, path, found == FOUND_BATCH ? "a trainbench batch file" : found == FOUND_HDF5 ? "an HDF5 file"
                 : found == FOUND_TRACE ? "a trainbench trace" : "another file (not HDF5, not a trainbench trace)",
                 kind == TB_OUT_TEXT ? "trace" : what, what, flag);
        return -1;
    }
    return 0;
}

int tb_output_path_check(const char *path, tb_output_kind kind, const char *what, const char *flag, char *why,
                         size_t len) {
    if (in_the_way(path, kind, what, flag, why, len) != 0) return -1;
    char probe[4200];
    snprintf(probe, sizeof probe, "%s.probe.%ld", path, (long)getpid());
    FILE *f = fopen(probe, "w");
    if (!f) {
        snprintf(why, len, "cannot write %s '%s' (its directory is missing or read-only); choose another path", what,
                 path);
        return -1;
    }
    fclose(f);
    unlink(probe);
    tb_output_leftovers(path, flag);
    return 0;
}

void tb_output_leftovers(const char *path, const char *flag) {
    char dir[4200], full[8400], pre[4200];
    snprintf(pre, sizeof pre, "%s.tmp.", dir_of(path, dir, sizeof dir));
    DIR *d = opendir(dir);
    if (!d) return;
    size_t np = strlen(pre);
    int said = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && said < 3;) {
        const char *pid = e->d_name + np;
        if (strncmp(e->d_name, pre, np) != 0 || !*pid || strspn(pid, "0123456789") != strlen(pid)) continue;
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        long p = strtol(pid, NULL, 10);
        if (p > 0 && p <= INT_MAX && (kill((pid_t)p, 0) == 0 || errno == EPERM)) continue; /* still writing here */
        tb_info("# %s: '%s' (%.1f MB) is an unfinished write of '%s' by process %s, which no longer runs on this "
                "host (killed while writing, or it ran on another host)%s: if no run is writing it, remove it to free "
                "the space",
                flag, full, (double)st.st_size / 1e6, path, pid,
                access(path, F_OK) == 0 ? "; the file itself is whole" : "");
        said++;
    }
    closedir(d);
}

void tb_output_path_require(const char *cmd, const char *path, tb_output_kind kind, const char *what,
                            const char *flag) {
    char why[8400];
    if (path[0] && tb_output_path_check(path, kind, what, flag, why, sizeof why) != 0) tb_die("%s: %s", cmd, why);
}

void tb_output_landing(const char *path, char *out, size_t len) {
    char dir[TB_OPT_STR_MAX], real[4096];
    if (realpath(path, real)) {
        snprintf(out, len, "%s", real);
        return;
    }
    const char *base = dir_of(path, dir, sizeof dir);
    if (realpath(dir, real)) snprintf(out, len, "%s/%s", real, base);
    else snprintf(out, len, "%s", path);
}

void tb_output_not_same(const char *cmd, const char *flag_a, const char *a, const char *flag_b, const char *b) {
    if (!a[0] || !b[0]) return;
    char la[4200], lb[4200];
    tb_output_landing(a, la, sizeof la);
    tb_output_landing(b, lb, sizeof lb);
    if (strcmp(la, lb) == 0)
        tb_die("%s: %s '%s' and %s '%s' are the same file, and one would overwrite the other; give them different "
               "paths",
               cmd, flag_a, a, flag_b, b);
}

void tb_output_not_input(const char *cmd, const char *flag, const char *out, const char *const *in_flags,
                         const char *const *in_paths, int n) {
    if (!out[0]) return;
    char o[4200], in[4200];
    tb_output_landing(out, o, sizeof o);
    for (int i = 0; i < n; i++) {
        if (!in_paths[i] || !in_paths[i][0]) continue;
        tb_output_landing(in_paths[i], in, sizeof in);
        if (strcmp(o, in) == 0)
            tb_die("%s: %s '%s' is the %s input '%s', and writing it would destroy the input; give %s another path",
                   cmd, flag, out, in_flags[i], in_paths[i], flag);
    }
}
