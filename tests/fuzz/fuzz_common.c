/* fuzz_common.c - abort hook with longjmp, temporary input files, HDF5
 * clean-up between inputs (see fuzz_common.h). */
#include "tests/fuzz/fuzz_common.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

int fz_outcome = 0;

static int g_reject_on_abort = 0;
static jmp_buf *g_jump = NULL; /* set while fz_call runs a reader */
static char g_temp[4096] = "";
static FILE *g_err = NULL; /* the real stderr, for the harness's own lines */

static void on_abort(int exit_code) {
    if (g_reject_on_abort && g_jump) longjmp(*g_jump, 1);
    /* A path that must not end the process did: make it a crash libFuzzer
     * reports with a stack (an exit would be reported without one). */
    fprintf(g_err ? g_err : stderr, "fuzz: tb_abort(%d) reached where input must be rejected by return value\n",
            exit_code);
    abort();
}

static void remove_temp(void) {
    if (g_temp[0]) unlink(g_temp);
}

void fz_init(int reject_on_abort) {
    g_reject_on_abort = reject_on_abort;
    tb_set_abort_hook(on_abort);
    g_err = stderr;
    if (!getenv("TB_FUZZ_VERBOSE")) {
        /* tb_die's one-line reasons, a few per input, would drown libFuzzer's
         * own lines. Sanitizers write to file descriptor 2, not through
         * stderr, so their reports still show. */
        FILE *null = fopen("/dev/null", "w");
        if (null) stderr = null;
    }
    atexit(remove_temp);
}

int fz_call(void (*fn)(void *ctx), void *ctx) {
    jmp_buf env;
    jmp_buf *volatile outer = g_jump;
    if (setjmp(env) != 0) {
        g_jump = outer;
        return 1;
    }
    g_jump = &env;
    fn(ctx);
    g_jump = outer;
    return 0;
}

static int writable_dir(const char *d) { return d && d[0] && access(d, W_OK | X_OK) == 0; }

const char *fz_temp_path(const char *tag) {
    if (!g_temp[0]) {
        const char *dir = writable_dir("/dev/shm") ? "/dev/shm"
                          : writable_dir(getenv("TMPDIR")) ? getenv("TMPDIR")
                                                           : "/tmp";
        snprintf(g_temp, sizeof g_temp, "%s/tb_fuzz_%s_%ld.h5", dir, tag, (long)getpid());
    }
    /* a fresh inode each time: HDF5 must never see a file it may still hold */
    unlink(g_temp);
    return g_temp;
}

const char *fz_write_temp(const char *tag, const uint8_t *data, size_t size) {
    fz_temp_path(tag);
    int fd = open(g_temp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        fprintf(g_err, "fuzz: cannot create %s: %s\n", g_temp, strerror(errno));
        abort();
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            fprintf(g_err, "fuzz: cannot write %s: %s\n", g_temp, strerror(errno));
            abort();
        }
        done += (size_t)n;
    }
    close(fd);
    return g_temp;
}

void fz_h5_after(int rejected, const char *what) {
    if (rejected) {
        /* The reader died with ids open (files, datasets, dataspaces, types).
         * H5close releases every one; the next HDF5 call re-initialises the
         * library. */
        H5close();
        return;
    }
    ssize_t open_ids = H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open_ids != 0) {
        fprintf(g_err, "fuzz: %s returned with %zd HDF5 object(s) still open\n", what, open_ids);
        abort();
    }
}
