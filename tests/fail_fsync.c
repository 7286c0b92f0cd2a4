/* fail_fsync.c - LD_PRELOAD library for tests: fsync of a file whose path
 * holds $TB_FAIL_FSYNC_MATCH fails with EIO, from the $TB_FAIL_FSYNC_FROM-th
 * such call on (1, the default: the first), as a write-back error on NFS,
 * Lustre or a failing disk surfaces. Every other fsync is the real one. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fsync(int fd) {
    static int (*real)(int);
    static int seen;
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    const char *match = getenv("TB_FAIL_FSYNC_MATCH");
    if (match && *match) {
        char link[64], path[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        if (n > 0) {
            path[n] = '\0';
            const char *from = getenv("TB_FAIL_FSYNC_FROM");
            if (strstr(path, match) && __atomic_add_fetch(&seen, 1, __ATOMIC_SEQ_CST) >= (from ? atoi(from) : 1)) {
                errno = EIO;
                return -1;
            }
        }
    }
    return real ? real(fd) : -1;
}
