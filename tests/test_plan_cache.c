/* test_plan_cache.c - the plan cache on disk (model/plan_cache.h) on the
 * host: keys and file names, the directory rule, round trips, the atomic
 * write (a write failing at fsync leaves the file as it was), corruption of
 * every kind rebuilt with one line naming its reason (a flipped byte, a
 * truncated file, bytes after the end, another key's whole file under this
 * name, a file that is not a cache), dropped entries staying dropped
 * through a merge, a second process's entries merged, an entry another
 * process re-planned not overwritten by a stale copy, the lock wait giving
 * up after TB_PLAN_CACHE_WAIT_S, a holder whose write fails (the waiter
 * lets go at once), a file system without flock, a read-only cache used
 * as it is, and hex for serialized plans.
 *
 *   test_plan_cache                  the host checks above
 *   test_plan_cache rank DIR N       one rank of `mpirun -np R`: opens, takes
 *                                    the session's lock, asks for N entries,
 *                                    plans (20 ms each) the ones it misses,
 *                                    commits, writes DIR/report.RANK
 *   test_plan_cache check DIR R N    after the ranks: exactly one rank planned,
 *                                    and only it held the session's lock
 *                                    (the others load side by side), every
 *                                    rank saw the same values, the file is
 *                                    whole
 * (mpirun is only the launcher: the ranks meet through the file system.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/plan_cache.h"
#include "tests/tb_test.h"

/* flock as a file system without it answers (Lustre without -o flock):
 * this definition stands in for libc's while g_no_flock is set */
static int g_no_flock;
int flock(int fd, int op) {
    static int (*real)(int, int);
    if (g_no_flock) {
        errno = ENOLCK;
        return -1;
    }
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "flock");
    return real(fd, op);
}

/* open as a read-only file system answers for the cache's lock files
 * (a site's cache in a container image), while g_read_only is set */
static int g_read_only;
int open(const char *path, int flags, ...) {
    static int (*real)(const char *, int, ...);
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    if (g_read_only && strstr(path, ".lock")) {
        errno = EROFS;
        return -1;
    }
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "open");
    return real(path, flags, mode);
}

/* fsync as a full or failing disk answers, while g_fail_fsync is set: a
 * commit whose write cannot be made durable */
static int g_fail_fsync;
int fsync(int fd) {
    static int (*real)(int);
    if (g_fail_fsync) {
        errno = ENOSPC;
        return -1;
    }
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}

static const char *k_key = "gpu NVIDIA H200; sm 132; cc 9.0; driver 13000/580.95.05; cudnn 91900; opts tf32 0 det 0";

static void tmp_dir(char *out, size_t len, const char *tag) {
    char name[64];
    snprintf(name, sizeof name, "tb_plan_cache_%s_%ld", tag, (long)getpid());
    tb_test_tmp(out, len, name);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    if (system(cmd) != 0) printf("# could not clear %s\n", out);
}

static void rm_dir(const char *d) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd) != 0) printf("# could not remove %s\n", d);
}

static void fill(tb_plan_cache *c, int n, const char *tag) {
    for (int i = 0; i < n; i++) {
        char k[64], v[96];
        snprintf(k, sizeof k, "conv fwd %d->%d k3 bf16 NHWC n256", i, 2 * i);
        snprintf(v, sizeof v, "%s engine %d knobs k1=%d,k3=0 ws %d ms 0.%03d", tag, i % 7, i, 1024 * i, i);
        tb_pc_put(c, k, v);
    }
}

static int count_ok(tb_plan_cache *c, int n, const char *tag) {
    int ok = 0;
    for (int i = 0; i < n; i++) {
        char k[64], v[96];
        snprintf(k, sizeof k, "conv fwd %d->%d k3 bf16 NHWC n256", i, 2 * i);
        snprintf(v, sizeof v, "%s engine %d knobs k1=%d,k3=0 ws %d ms 0.%03d", tag, i % 7, i, 1024 * i, i);
        const char *got = tb_pc_get(c, k);
        ok += got && strcmp(got, v) == 0;
    }
    return ok;
}

static void test_names(void) {
    char a[128], b[128], c[128];
    tb_pc_file_name(k_key, a, sizeof a);
    tb_pc_file_name(k_key, b, sizeof b);
    char other[256];
    snprintf(other, sizeof other, "%s", k_key);
    other[strlen(other) - 1] = '1'; /* det 1: another file */
    tb_pc_file_name(other, c, sizeof c);
    TB_CHECK(strcmp(a, b) == 0 && strcmp(a, c) != 0, "file names: a key has one name, another key another (%s, %s)", a,
             c);
    TB_CHECK(strncmp(a, "NVIDIA_H200-", 12) == 0 && strstr(a, ".plans"), "file name %s: GPU prefix, .plans", a);
    char d[256];
    TB_CHECK(tb_pc_dir("off", d, sizeof d) == NULL, "--plan-cache off: no cache");
    TB_CHECK(tb_pc_dir("/x/y", d, sizeof d) && strcmp(d, "/x/y") == 0, "--plan-cache DIR: DIR");
    setenv("TB_PLAN_CACHE", "/env/dir", 1);
    TB_CHECK(tb_pc_dir("", d, sizeof d) && strcmp(d, "/env/dir") == 0, "default: $TB_PLAN_CACHE (%s)", d);
    setenv("TB_PLAN_CACHE", "off", 1);
    TB_CHECK(tb_pc_dir(NULL, d, sizeof d) == NULL, "TB_PLAN_CACHE=off: no cache");
    unsetenv("TB_PLAN_CACHE");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    TB_CHECK(tb_pc_dir(NULL, d, sizeof d) && strcmp(d, "/xdg/trainbench/plans") == 0, "default: XDG (%s)", d);
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    TB_CHECK(tb_pc_dir(NULL, d, sizeof d) && strcmp(d, "/home/u/.cache/trainbench/plans") == 0, "default: HOME (%s)",
             d);
    unsigned char bytes[5] = {0, 1, 0xab, 0x7f, 0xff}, back[8];
    char hex[16];
    tb_pc_hex(bytes, 5, hex);
    TB_CHECK(strcmp(hex, "0001ab7fff") == 0 && tb_pc_unhex(hex, back, sizeof back) == 5 && memcmp(back, bytes, 5) == 0,
             "hex round trip (%s)", hex);
    TB_CHECK(tb_pc_unhex("0g", back, 8) < 0 && tb_pc_unhex("abc", back, 8) < 0 && tb_pc_unhex("aabb", back, 1) < 0,
             "hex: bad digits, odd length, too long refused");
}

static tb_plan_cache *open_say(const char *dir, char *msg, size_t len) {
    tb_plan_cache *c = tb_pc_open(dir, k_key, msg, len);
    if (msg[0]) printf("#   said: %s\n", msg);
    return c;
}

/* Writes the file with fn applied to its text, reopens, expects "corrupt"
 * for the reason `reason`. */
static void corrupt_case(const char *dir, const char *what, void (*fn)(char *buf, size_t *n, void *ctx), void *ctx,
                         const char *reason) {
    char msg[512];
    tb_plan_cache *c = open_say(dir, msg, sizeof msg);
    fill(c, 30, "v");
    tb_pc_close(c);
    char path[1024];
    c = open_say(dir, msg, sizeof msg);
    snprintf(path, sizeof path, "%s", tb_pc_path(c));
    tb_pc_close(c);
    FILE *f = fopen(path, "rb");
    char *buf = calloc(1 << 20, 1);
    size_t n = fread(buf, 1, (1 << 20) - 64, f);
    fclose(f);
    fn(buf, &n, ctx);
    f = fopen(path, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    c = open_say(dir, msg, sizeof msg);
    TB_CHECK(strstr(msg, "is corrupt") && strstr(msg, "rebuilding") && strstr(msg, reason),
             "%s: one line says corrupt (%s), rebuilding (%s)", what, reason, msg);
    TB_CHECK(tb_pc_count(c) == 0, "%s: nothing of it is trusted (%d entries)", what, tb_pc_count(c));
    fill(c, 30, "w");
    tb_pc_close(c);
    c = open_say(dir, msg, sizeof msg);
    TB_CHECK(msg[0] == '\0' && count_ok(c, 30, "w") == 30, "%s: rebuilt whole at the next commit", what);
    tb_pc_close(c);
    free(buf);
}

static void flip_byte(char *buf, size_t *n, void *ctx) {
    (void)ctx;
    buf[*n / 2] ^= 0x04; /* one bit in an entry */
}
static void truncate_half(char *buf, size_t *n, void *ctx) {
    (void)buf, (void)ctx;
    *n /= 2;
}
static void drop_end_line(char *buf, size_t *n, void *ctx) {
    (void)ctx;
    char *e = strstr(buf, "\nend ");
    *n = (size_t)(e - buf) + 1;
}
static void append_junk(char *buf, size_t *n, void *ctx) {
    (void)ctx;
    memcpy(buf + *n, "e x\ty\n", 6);
    *n += 6;
}
static void other_key(char *buf, size_t *n, void *ctx) {
    (void)ctx;
    char *k = strstr(buf, "cudnn 91900");
    k[10] = '1'; /* the same file name, another cuDNN: a stale copy, whole (its checksum made again) */
    char *e = strstr(buf, "\nend ") + 1;
    int count = atoi(e + 4);
    uint64_t h = tb_pc_fnv1a(buf, (size_t)(e - buf), 0);
    *n = (size_t)(e - buf) + (size_t)sprintf(e, "end %d %016llx\n", count, (unsigned long long)h);
}
static void not_a_cache(char *buf, size_t *n, void *ctx) {
    (void)ctx;
    *n = (size_t)sprintf(buf, "hello\n");
}

static void test_round_trip_and_corruption(void) {
    char top[400], dir[512], msg[512];
    tmp_dir(top, sizeof top, "rt");
    snprintf(dir, sizeof dir, "%s/a/b", top); /* made with its parents */
    tb_plan_cache *c = open_say(dir, msg, sizeof msg);
    TB_CHECK(c && msg[0] == '\0' && tb_pc_count(c) == 0, "a new cache opens empty, silently");
    fill(c, 200, "v");
    TB_CHECK(tb_pc_commit(c, msg, sizeof msg) == 0, "commit (%s)", msg);
    tb_plan_cache *c2 = tb_pc_open(dir, k_key, msg, sizeof msg);
    TB_CHECK(c2 == c, "opened twice in one process: the same cache (no self-deadlock on the lock)");
    tb_pc_close(c2);
    tb_pc_close(c);
    c = open_say(dir, msg, sizeof msg);
    TB_CHECK(count_ok(c, 200, "v") == 200 && tb_pc_hits(c) == 200 && tb_pc_misses(c) == 0,
             "round trip: 200 entries read back");
    TB_CHECK(tb_pc_get(c, "conv fwd 999") == NULL && tb_pc_misses(c) == 1, "a missing entry is a miss");
    /* atomic write: no temporary file is left, and one left by a writer that died is not read */
    char tmp[1100], cmd[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp.999999", tb_pc_path(c));
    FILE *f = fopen(tmp, "w");
    fputs("garbage", f);
    fclose(f);
    tb_pc_drop(c, "conv fwd 5->10 k3 bf16 NHWC n256");
    tb_pc_close(c);
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '\\.tmp\\.' | grep -qx 1", dir);
    TB_CHECK(system(cmd) == 0, "after a commit only the dead writer's temporary file is there");
    c = open_say(dir, msg, sizeof msg);
    TB_CHECK(msg[0] == '\0' && tb_pc_count(c) == 199 && !tb_pc_get(c, "conv fwd 5->10 k3 bf16 NHWC n256"),
             "a dropped entry is gone after the commit (%d entries)", tb_pc_count(c));
    tb_pc_close(c);
    corrupt_case(dir, "a flipped bit", flip_byte, NULL, "checksum mismatch");
    corrupt_case(dir, "a file cut in half", truncate_half, NULL, "cut short");
    corrupt_case(dir, "no end line", drop_end_line, NULL, "cut short");
    corrupt_case(dir, "bytes after the end line", append_junk, NULL, "bytes after the end line");
    corrupt_case(dir, "another key's file under this name", other_key, NULL, "written for another key");
    corrupt_case(dir, "not a cache at all", not_a_cache, NULL, "not a trainbench plan cache");
    /* a commit whose write fails (the disk full at fsync) leaves the file as it was, whole */
    c = open_say(dir, msg, sizeof msg);
    int before = tb_pc_count(c);
    tb_pc_put(c, "after the disk filled", "x");
    g_fail_fsync = 1;
    int rc = tb_pc_commit(c, msg, sizeof msg);
    g_fail_fsync = 0;
    TB_CHECK(rc != 0 && strstr(msg, "plan cache: cannot write") && strstr(msg, "No space left") &&
                 strstr(msg, "--plan-cache"),
             "a failed write: one line naming the file, the error and what to do (%s)", msg);
    snprintf(cmd, sizeof cmd, "grep -q '^end %d ' '%s'", before, tb_pc_path(c));
    TB_CHECK(system(cmd) == 0, "the file still holds the %d entries of before, whole (nothing written in place)",
             before);
    snprintf(cmd, sizeof cmd, "! grep -q 'after the disk filled' '%s'", tb_pc_path(c));
    TB_CHECK(system(cmd) == 0, "the failed commit's entry is not in the file");
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '\\.tmp\\.' | grep -qx 1", dir);
    TB_CHECK(system(cmd) == 0, "and its temporary file is gone");
    tb_pc_drop(c, "after the disk filled");
    tb_pc_close(c);
    rm_dir(top);
}

/* A second process adds entries while we hold none of the lock; a dropped
 * entry of ours is not brought back by the merge. */
static void test_merge(void) {
    char dir[256], msg[512];
    tmp_dir(dir, sizeof dir, "merge");
    tb_plan_cache *c = open_say(dir, msg, sizeof msg);
    fill(c, 10, "v");
    tb_pc_commit(c, msg, sizeof msg); /* the lock goes; c stays open */
    pid_t pid = fork();
    if (pid == 0) {
        char d2[300]; /* another spelling of dir: not the parent's cache object inherited through fork */
        snprintf(d2, sizeof d2, "%s/.", dir);
        tb_plan_cache *o = tb_pc_open(d2, k_key, msg, sizeof msg);
        if (!o || tb_pc_count(o) != 10) _exit(2); /* the file as the parent committed it */
        tb_pc_put(o, "from the child", "child value");
        tb_pc_close(o);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    TB_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child opened its own view of the file (status %d)", st);
    tb_pc_put(c, "from the parent", "parent value");
    tb_pc_drop(c, "conv fwd 0->0 k3 bf16 NHWC n256");
    TB_CHECK(tb_pc_commit(c, msg, sizeof msg) == 0, "a later commit re-takes the lock and merges (%s)", msg);
    tb_pc_close(c);
    c = open_say(dir, msg, sizeof msg);
    const char *a = tb_pc_get(c, "from the child"), *b = tb_pc_get(c, "from the parent");
    TB_CHECK(a && b && strcmp(a, "child value") == 0 && strcmp(b, "parent value") == 0,
             "both processes' entries are in the file");
    TB_CHECK(!tb_pc_get(c, "conv fwd 0->0 k3 bf16 NHWC n256") && tb_pc_count(c) == 11,
             "the dropped entry stayed dropped through the merge (%d entries)", tb_pc_count(c));
    tb_pc_close(c);
    rm_dir(dir);
}

/* Forks a process that opens dir's cache and takes session's lock; returns
 * once it holds it. The child keeps it 2 s (the parent reaches the lock well
 * within that, even on a loaded machine), then exits with then(o)'s status
 * (then NULL: it dies without committing). */
static pid_t fork_holder(const char *dir, const char *session, int (*then)(tb_plan_cache *o)) {
    int pipefd[2];
    if (pipe(pipefd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char msg[512];
        close(pipefd[0]);
        tb_plan_cache *o = tb_pc_open(dir, k_key, msg, sizeof msg);
        tb_pc_lock(o, session, msg, sizeof msg);
        if (write(pipefd[1], "x", 1) != 1) _exit(1);
        sleep(2);
        _exit(then ? then(o) : 0);
    }
    close(pipefd[1]);
    char x;
    if (read(pipefd[0], &x, 1) != 1) printf("# the child did not start\n");
    close(pipefd[0]);
    return pid;
}

/* A lock held past TB_PLAN_CACHE_WAIT_S: plan alone, write nothing. */
static void test_lock_timeout(void) {
    char dir[256], msg[512];
    tmp_dir(dir, sizeof dir, "lock");
    pid_t pid = fork_holder(dir, "graph-a", NULL);
    if (pid < 0) return;
    setenv("TB_PLAN_CACHE_WAIT_S", "0.3", 1);
    tb_plan_cache *c = open_say(dir, msg, sizeof msg);
    TB_CHECK(c && msg[0] == '\0', "opening reads without the lock (%s)", msg);
    tb_pc_lock(c, "graph-b", msg, sizeof msg);
    TB_CHECK(msg[0] == '\0', "another graph's session is not held up by it (%s)", msg);
    fill(c, 2, "b");
    TB_CHECK(tb_pc_commit(c, msg, sizeof msg) == 0, "and commits its entries (%s)", msg);
    tb_pc_lock(c, "graph-a", msg, sizeof msg);
    TB_CHECK(strstr(msg, "stayed locked") && strstr(msg, "writes nothing"),
             "a lock held past the wait limit: one line, plan alone (%s)", msg);
    fill(c, 3, "v");
    tb_pc_close(c);
    unsetenv("TB_PLAN_CACHE_WAIT_S");
    int st = 0;
    waitpid(pid, &st, 0); /* its lock goes with it */
    c = open_say(dir, msg, sizeof msg);
    TB_CHECK(tb_pc_count(c) == 3 && tb_pc_get(c, "session graph-b") && !tb_pc_get(c, "session graph-a"),
             "the session that gave up wrote nothing, the other its 2 entries and its mark (%d entries)",
             tb_pc_count(c));
    tb_pc_close(c);
    rm_dir(dir);
}

/* Two processes opened the file holding X; the second finds X stale,
 * re-plans it and commits first. The first then merges: it must see the new
 * X and not write its old copy back; and, finding the session's mark, it
 * loads without holding the session's lock. */
static void test_merge_stale(void) {
    char dir[256], msg[512];
    tmp_dir(dir, sizeof dir, "stale");
    tb_plan_cache *c = open_say(dir, msg, sizeof msg);
    tb_pc_put(c, "X", "old");
    tb_pc_close(c);
    tb_plan_cache *a = open_say(dir, msg, sizeof msg);
    TB_CHECK(a && tb_pc_get(a, "X") && strcmp(tb_pc_get(a, "X"), "old") == 0, "both processes read X=old");
    tb_pc_put(a, "X", "old"); /* found and kept as it was (the legacy conv path puts back what it found) */
    TB_CHECK(tb_pc_puts(a) == 0, "putting back an unchanged value makes nothing (%d made)", tb_pc_puts(a));
    pid_t pid = fork();
    if (pid == 0) {
        char d2[300]; /* another spelling of dir: not a's object inherited through fork */
        snprintf(d2, sizeof d2, "%s/.", dir);
        tb_plan_cache *b = tb_pc_open(d2, k_key, msg, sizeof msg);
        if (!b || b == a) _exit(2);
        tb_pc_lock(b, "graph-a", msg, sizeof msg);
        tb_pc_drop(b, "X");
        tb_pc_put(b, "X", "new");
        tb_pc_close(b);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    TB_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child re-planned X in its own view (status %d)", st);
    tb_pc_lock(a, "graph-a", msg, sizeof msg);
    const char *x = tb_pc_get(a, "X");
    TB_CHECK(x && strcmp(x, "new") == 0, "the merge at the session's start reads the re-planned X (%s)", x ? x : "none");
    TB_CHECK(!tb_pc_session_locked(a), "a session planned before is loaded without its lock");
    tb_pc_put(a, "Y", "y");
    TB_CHECK(tb_pc_commit(a, msg, sizeof msg) == 0, "commit (%s)", msg);
    tb_pc_close(a);
    c = open_say(dir, msg, sizeof msg);
    x = tb_pc_get(c, "X");
    TB_CHECK(x && strcmp(x, "new") == 0 && tb_pc_get(c, "Y"), "the file keeps the new X and gains Y (X=%s)",
             x ? x : "none");
    tb_pc_close(c);
    /* a later launch finds an entry stale inside the marked session: the mark goes with it */
    c = open_say(dir, msg, sizeof msg);
    TB_CHECK(c && tb_pc_get(c, "session graph-a"), "the session's mark is in the file");
    tb_pc_lock(c, "graph-a", msg, sizeof msg);
    tb_pc_drop(c, "Y");
    tb_pc_close(c);
    c = open_say(dir, msg, sizeof msg);
    TB_CHECK(c && !tb_pc_get(c, "session graph-a") && !tb_pc_get(c, "Y") && tb_pc_get(c, "X"),
             "a drop inside it takes the session's mark out: the next launch plans under the lock");
    tb_pc_close(c);
    rm_dir(dir);
}

/* The session's holder fails to write (a full disk): the process that
 * waited for it finds no mark and lets the lock go at once with one line,
 * so the others still waiting plan side by side, not one after another;
 * what it plans is still written (without the mark). */
static int commit_on_full_disk(tb_plan_cache *o) {
    char msg[512];
    fill(o, 4, "child");
    g_fail_fsync = 1;
    return tb_pc_commit(o, msg, sizeof msg) != 0 ? 0 : 3; /* fails: the lock goes, no mark on disk */
}

static void test_holder_write_fails(void) {
    char dir[256], msg[512];
    tmp_dir(dir, sizeof dir, "holderfail");
    pid_t pid = fork_holder(dir, "graph-a", commit_on_full_disk);
    if (pid < 0) return;
    tb_plan_cache *c = open_say(dir, msg, sizeof msg);
    tb_pc_lock(c, "graph-a", msg, sizeof msg); /* waits for the child */
    int st = 0;
    waitpid(pid, &st, 0);
    TB_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the holder's commit failed (status %d)", st);
    TB_CHECK(strstr(msg, "wrote no complete session") && strstr(msg, "without waiting") && !tb_pc_session_locked(c),
             "the waiter lets the lock go at once, with one line (%s)", msg);
    fill(c, 4, "parent");
    TB_CHECK(tb_pc_commit(c, msg, sizeof msg) == 0, "and still writes what it planned (%s)", msg);
    tb_pc_close(c);
    c = open_say(dir, msg, sizeof msg);
    TB_CHECK(c && count_ok(c, 4, "parent") == 4 && !tb_pc_get(c, "session graph-a"),
             "its entries are in the file, without the session's mark (the next launch plans it under the lock)");
    tb_pc_close(c);
    rm_dir(dir);
}

/* A file system without flock: one line, and the cache is still written. */
static void test_no_flock(void) {
    char dir[256], msg[512];
    tmp_dir(dir, sizeof dir, "noflock");
    g_no_flock = 1;
    tb_plan_cache *c = open_say(dir, msg, sizeof msg);
    tb_pc_lock(c, "graph-a", msg, sizeof msg);
    TB_CHECK(strstr(msg, "does not lock files") != NULL, "one line says the file system does not lock (%s)", msg);
    fill(c, 5, "v");
    TB_CHECK(tb_pc_commit(c, msg, sizeof msg) == 0, "and the entries are written all the same (%s)", msg);
    tb_pc_close(c);
    g_no_flock = 0;
    c = open_say(dir, msg, sizeof msg);
    TB_CHECK(c && count_ok(c, 5, "v") == 5, "the next launch finds them");
    tb_pc_close(c);
    rm_dir(dir);
}

/* A read-only cache directory: its entries used, one line, nothing written. */
static void test_read_only(void) {
    char dir[256], msg[512];
    tmp_dir(dir, sizeof dir, "ro");
    tb_plan_cache *c = open_say(dir, msg, sizeof msg);
    fill(c, 4, "v");
    tb_pc_close(c);
    g_read_only = 1;
    c = tb_pc_open(dir, k_key, msg, sizeof msg);
    TB_CHECK(c && strstr(msg, "read-only") && strstr(msg, "4 entries are used"), "one line says so (%s)", msg);
    if (c) {
        TB_CHECK(count_ok(c, 4, "v") == 4 && !tb_pc_writes(c), "its entries are found; nothing will be written");
        tb_pc_lock(c, "graph-a", msg, sizeof msg);
        TB_CHECK(msg[0] == '\0' && !tb_pc_session_locked(c), "no lock is taken (%s)", msg);
        tb_pc_put(c, "new", "choice");
        TB_CHECK(tb_pc_commit(c, msg, sizeof msg) == 0, "commit writes nothing and says nothing (%s)", msg);
        tb_pc_close(c);
    }
    g_read_only = 0;
    c = open_say(dir, msg, sizeof msg);
    TB_CHECK(c && tb_pc_count(c) == 4 && !tb_pc_get(c, "new"), "the file is as it was (%d entries)",
             c ? tb_pc_count(c) : -1);
    tb_pc_close(c);
    rm_dir(dir);
}

static int env_rank(void) {
    const char *v[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (int i = 0; i < 4; i++)
        if (getenv(v[i])) return atoi(getenv(v[i]));
    return 0;
}

static int run_rank(const char *dir, int n) {
    int rank = env_rank(), planned = 0, held;
    char msg[512], path[1100];
    tb_plan_cache *c = tb_pc_open(dir, k_key, msg, sizeof msg);
    if (!c) return 1;
    tb_pc_lock(c, "graph-a", msg, sizeof msg); /* the session: the first rank plans, the others wait for it */
    held = tb_pc_session_locked(c);
    snprintf(path, sizeof path, "%s/report.%d", dir, rank);
    FILE *r = fopen(path, "w");
    for (int i = 0; i < n; i++) {
        char k[32], v[64];
        snprintf(k, sizeof k, "entry %d", i);
        const char *got = tb_pc_get(c, k);
        if (!got) {
            usleep(20000); /* "timing the candidates" */
            snprintf(v, sizeof v, "planned by rank %d", rank);
            tb_pc_put(c, k, v);
            got = tb_pc_get(c, k);
            planned++;
        } else {
            usleep(5000); /* "rebuilding the plan": with the lock's holder done, without the lock */
        }
        fprintf(r, "%s=%s\n", k, got);
    }
    tb_pc_close(c);
    fprintf(r, "#held %d\n#count %d\n", held, planned);
    fclose(r);
    return 0;
}

static int check_ranks(const char *dir, int ranks, int n) {
    int planners = 0, total = 0, holders = 0, planner_held = 0;
    char *first = NULL;
    for (int r = 0; r < ranks; r++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/report.%d", dir, r);
        char *s = tb_test_read_text(path);
        char *pl = strstr(s, "#count ");
        int k = pl ? atoi(pl + 7) : -1;
        TB_CHECK(k >= 0, "rank %d reported", r);
        char *hd = strstr(s, "#held ");
        int held = hd ? atoi(hd + 6) : -1;
        holders += held == 1;
        if (k > 0) planners++, planner_held = held == 1;
        if (hd) *hd = '\0';
        total += k;
        if (pl) *pl = '\0';
        if (!first)
            first = strdup(s);
        else
            TB_CHECK(strcmp(first, s) == 0, "rank %d saw the same values as rank 0", r);
        free(s);
    }
    TB_CHECK(planners == 1 && total == n, "%d ranks: one planned (%d planners, %d entries planned of %d)", ranks,
             planners, total, n);
    TB_CHECK(holders == 1 && planner_held, "only the planner held the session's lock; the others loaded side by side "
             "(%d holders)", holders);
    char msg[512];
    tb_plan_cache *c = tb_pc_open(dir, k_key, msg, sizeof msg);
    TB_CHECK(c && msg[0] == '\0' && tb_pc_count(c) == n + 1 && tb_pc_get(c, "session graph-a"),
             "the shared file is whole (%d entries and the session's mark; %s)", c ? tb_pc_count(c) - 1 : -1, msg);
    tb_pc_close(c);
    free(first);
    return tb_test_exit("plan_cache_ranks");
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "rank") == 0) return run_rank(argv[2], atoi(argv[3]));
    if (argc == 5 && strcmp(argv[1], "check") == 0) return check_ranks(argv[2], atoi(argv[3]), atoi(argv[4]));
    test_names();
    test_round_trip_and_corruption();
    test_merge();
    test_lock_timeout();
    test_merge_stale();
    test_holder_write_fails();
    test_no_flock();
    test_read_only();
    return tb_test_exit("plan_cache");
}
