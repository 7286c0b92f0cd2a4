/* plan_cache.c - the plan cache's file, lock and entries (see plan_cache.h). */
#define _GNU_SOURCE
#include "model/plan_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

#define PC_MAGIC "trainbench-plan-cache 1"
#define PC_PATH 1024

typedef struct {
    char *k, *v;
    uint64_t h;
    int mine; /* put by this process: kept in a merge; others' entries follow the file */
} pc_entry;

struct tb_plan_cache {
    char dir[PC_PATH], path[PC_PATH + 128], lock_path[PC_PATH + 140], session_path[PC_PATH + 220];
    char *key;
    char session[80]; /* the planning session's name while one is open */
    int session_fd; /* the planning session's lock while held, else -1 */
    int no_write;   /* the lock was given up on, or the directory is read-only: write nothing */
    int no_lock;    /* the file system has no flock: atomic renames only */
    int dirty, refs, hits, misses, puts;
    pc_entry *e;
    int n, cap;
    char **dropped; /* entries this process found stale: not merged back */
    int ndropped;
    tb_plan_cache *next;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static tb_plan_cache *g_open; /* this process's open caches */

uint64_t tb_pc_fnv1a(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = data;
    if (!h) h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

void tb_pc_file_name(const char *key, char *out, size_t len) {
    /* a readable prefix from the key's "gpu" field, then the hash */
    char pre[48] = "";
    const char *g = strstr(key, "gpu ");
    size_t k = 0;
    for (const char *s = g ? g + 4 : key; *s && *s != ';' && k + 1 < sizeof pre; s++)
        pre[k++] = (char)((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ? *s : '_');
    pre[k] = '\0';
    snprintf(out, len, "%s-%016llx.plans", pre[0] ? pre : "plans",
             (unsigned long long)tb_pc_fnv1a(key, strlen(key), 0));
}

void tb_pc_hex(const unsigned char *in, size_t n, char *out) {
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) out[2 * i] = d[in[i] >> 4], out[2 * i + 1] = d[in[i] & 15];
    out[2 * n] = '\0';
}

static int nibble(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

long tb_pc_unhex(const char *in, unsigned char *out, size_t cap) {
    size_t n = strlen(in);
    if (n % 2 || n / 2 > cap) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int a = nibble(in[2 * i]), b = nibble(in[2 * i + 1]);
        if (a < 0 || b < 0) return -1;
        out[i] = (unsigned char)(a << 4 | b);
    }
    return (long)(n / 2);
}

const char *tb_pc_dir(const char *flag, char *out, size_t len) {
    if (flag && strcmp(flag, "off") == 0) return NULL;
    const char *env = getenv("TB_PLAN_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (flag && flag[0])
        snprintf(out, len, "%s", flag);
    else if (env && env[0])
        snprintf(out, len, "%s", env);
    else if (xdg && xdg[0])
        snprintf(out, len, "%s/trainbench/plans", xdg);
    else if (home && home[0])
        snprintf(out, len, "%s/.cache/trainbench/plans", home);
    else
        return NULL;
    return strcmp(out, "off") == 0 ? NULL : out;
}

/* ---- entries ---------------------------------------------------------------------------- */

static pc_entry *find(tb_plan_cache *c, const char *k) {
    uint64_t h = tb_pc_fnv1a(k, strlen(k), 0);
    for (int i = 0; i < c->n; i++)
        if (c->e[i].h == h && strcmp(c->e[i].k, k) == 0) return &c->e[i];
    return NULL;
}

static char *dup_str(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) TB_FATAL("out of host memory for the plan cache");
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* Sets k = v (n bytes of v), mine when this process made it; returns 1
 * when something changed. */
static int set(tb_plan_cache *c, const char *k, const char *v, size_t vn, int mine) {
    pc_entry *e = find(c, k);
    if (e) {
        if (strlen(e->v) == vn && memcmp(e->v, v, vn) == 0) return 0; /* the same: still the file's */
        e->mine |= mine;
        free(e->v);
        e->v = dup_str(v, vn);
        return 1;
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->e = realloc(c->e, (size_t)c->cap * sizeof *c->e);
        if (!c->e) TB_FATAL("out of host memory for the plan cache");
    }
    e = &c->e[c->n++];
    e->k = dup_str(k, strlen(k));
    e->v = dup_str(v, vn);
    e->h = tb_pc_fnv1a(k, strlen(k), 0);
    e->mine = mine;
    return 1;
}

/* Forgets the entries read from the file (a merge reads them again: what
 * another process replaced or dropped since must not come back). */
static void forget_theirs(tb_plan_cache *c) {
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->e[i].mine)
            c->e[k++] = c->e[i];
        else
            free(c->e[i].k), free(c->e[i].v);
    }
    c->n = k;
}

static int was_dropped(const tb_plan_cache *c, const char *k) {
    for (int i = 0; i < c->ndropped; i++)
        if (strcmp(c->dropped[i], k) == 0) return 1;
    return 0;
}

/* ---- the file ------------------------------------------------------------------------------ */

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
    }
    fclose(f);
    if (!buf) TB_FATAL("out of host memory for the plan cache");
    buf[len] = '\0';
    *n = len;
    return buf;
}

/* Reads the file's entries into c (when merge: the file's replace those c
 * read before; those c made, and those it dropped, are kept as they are).
 * 1: no file; 0: read; -1: corrupt (why). */
static int read_file(tb_plan_cache *c, int merge, char *why, size_t len) {
    size_t n = 0;
    char *buf = slurp(c->path, &n);
    if (!buf) return 1;
    int rc = -1, count = 0;
    char *line = buf, *end = buf + n, *body_end = NULL;
    size_t magic = strlen(PC_MAGIC);
    if (n < magic + 1 || memcmp(buf, PC_MAGIC "\n", magic + 1) != 0) {
        snprintf(why, len, "not a trainbench plan cache (first line)");
        goto out;
    }
    for (line = buf + magic + 1; line < end;) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        if (!nl) {
            snprintf(why, len, "cut short (no end line)");
            goto out;
        }
        *nl = '\0';
        if (line == buf + magic + 1) { /* the key line */
            if (strncmp(line, "key ", 4) != 0 || strcmp(line + 4, c->key) != 0) {
                snprintf(why, len, "written for another key (%.80s)", line);
                goto out;
            }
        } else if (strncmp(line, "e ", 2) == 0) {
            char *tab = strchr(line + 2, '\t');
            if (!tab) {
                snprintf(why, len, "an entry without a value");
                goto out;
            }
            count++;
        } else if (strncmp(line, "end ", 4) == 0) {
            body_end = line;
            if (nl + 1 != end) {
                snprintf(why, len, "bytes after the end line");
                goto out;
            }
            break;
        } else {
            snprintf(why, len, "a line that is no entry (%.40s)", line);
            goto out;
        }
        line = nl + 1;
    }
    int want = -1;
    unsigned long long sum = 0;
    if (!body_end || sscanf(body_end, "end %d %llx", &want, &sum) != 2 || want != count) {
        snprintf(why, len, "cut short or miscounted (%d entries, end line says %d)", count, want);
        goto out;
    }
    /* the checksum over the bytes before the end line, with their newlines */
    for (char *p = buf; p < body_end; p++)
        if (*p == '\0') *p = '\n';
    if (tb_pc_fnv1a(buf, (size_t)(body_end - buf), 0) != sum) {
        snprintf(why, len, "checksum mismatch");
        goto out;
    }
    if (merge) forget_theirs(c);
    for (line = buf + magic + 1; line < body_end;) {
        char *nl = memchr(line, '\n', (size_t)(body_end - line));
        *nl = '\0';
        if (strncmp(line, "e ", 2) == 0) {
            char *tab = strchr(line + 2, '\t');
            *tab = '\0';
            if (!(merge && (find(c, line + 2) || was_dropped(c, line + 2))))
                set(c, line + 2, tab + 1, strlen(tab + 1), 0);
        }
        line = nl + 1;
    }
    rc = 0;
out:
    free(buf);
    return rc;
}

static int write_file(tb_plan_cache *c, char *msg, size_t len) {
    char tmp[PC_PATH + 200], host[64] = "";
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0'; /* pids repeat across the nodes of a shared file system */
    host[strcspn(host, "/")] = '\0';
    snprintf(tmp, sizeof tmp, "%s.tmp.%s.%ld", c->path, host, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(msg, len, "plan cache: cannot write %s (%s); new choices are not kept: free space there, or give "
                 "--plan-cache another DIR (or off)", tmp, strerror(errno));
        return -1;
    }
    uint64_t h = 0;
    char head[PC_PATH + 64];
    int k = snprintf(head, sizeof head, PC_MAGIC "\nkey %s\n", c->key);
    h = tb_pc_fnv1a(head, (size_t)k, h);
    int ok = fputs(head, f) >= 0;
    for (int i = 0; i < c->n && ok; i++) {
        ok = fprintf(f, "e %s\t%s\n", c->e[i].k, c->e[i].v) >= 0;
        h = tb_pc_fnv1a("e ", 2, h);
        h = tb_pc_fnv1a(c->e[i].k, strlen(c->e[i].k), h);
        h = tb_pc_fnv1a("\t", 1, h);
        h = tb_pc_fnv1a(c->e[i].v, strlen(c->e[i].v), h);
        h = tb_pc_fnv1a("\n", 1, h);
    }
    ok = ok && fprintf(f, "end %d %016llx\n", c->n, (unsigned long long)h) >= 0;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, c->path) != 0) {
        snprintf(msg, len, "plan cache: cannot write %s (%s); new choices are not kept: free space there, or give "
                 "--plan-cache another DIR (or off)", c->path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    int dfd = open(c->dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd); /* the rename itself on disk */
        close(dfd);
    }
    return 0;
}

/* ---- locking -------------------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Takes the exclusive lock of lock_path into *fd: 0 (3 when it had to
 * wait for another holder first), 1 when the wait limit passed, 2 when the file system has no flock (Lustre without
 * -o flock, NFS without lockd: *fd stays -1), -1 on an error. say: one
 * line when it has to wait. */
static int take_lock(const char *lock_path, const char *file, int say, int *fd_out) {
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == ENOLCK || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL) {
            close(fd);
            return 2;
        }
        if (errno != EWOULDBLOCK) {
            close(fd);
            return -1;
        }
        const char *env = getenv("TB_PLAN_CACHE_WAIT_S");
        double limit = env && atof(env) > 0 ? atof(env) : 900.0, t0 = now_s();
        if (say) { /* every rank says it: the waiting one is rarely rank 0 */
            printf("# plan cache: another process is planning into %s; rank %d waits for it\n", file,
                   tb_log_rank() < 0 ? 0 : tb_log_rank());
            fflush(stdout);
        }
        for (;;) {
            usleep(20000);
            if (flock(fd, LOCK_EX | LOCK_NB) == 0) break;
            if (now_s() - t0 > limit) {
                close(fd);
                return 1;
            }
        }
        *fd_out = fd;
        return 3;
    }
    *fd_out = fd;
    return 0;
}

static void release_lock(int *fd) {
    if (*fd < 0) return;
    flock(*fd, LOCK_UN);
    close(*fd);
    *fd = -1;
}

static int make_dirs(const char *dir) {
    char p[PC_PATH];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
            *s = '/';
        }
    return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* ---- the interface ---------------------------------------------------------------------------- */

tb_plan_cache *tb_pc_open(const char *dir, const char *key, char *msg, size_t len) {
    msg[0] = '\0';
    if (strlen(dir) >= PC_PATH - 1) {
        snprintf(msg, len, "plan cache: the directory %.40s... has %zu characters, more than %d; planning without "
                 "a cache: give --plan-cache a shorter path", dir, strlen(dir), PC_PATH - 2);
        return NULL;
    }
    char name[128];
    tb_pc_file_name(key, name, sizeof name);
    pthread_mutex_lock(&g_lock);
    for (tb_plan_cache *o = g_open; o; o = o->next)
        if (strcmp(o->dir, dir) == 0 && strcmp(o->key, key) == 0) {
            o->refs++;
            pthread_mutex_unlock(&g_lock);
            return o;
        }
    pthread_mutex_unlock(&g_lock);
    if (make_dirs(dir) != 0) {
        snprintf(msg, len, "plan cache: cannot make %s (%s); planning without a cache", dir, strerror(errno));
        return NULL;
    }
    tb_plan_cache *c = calloc(1, sizeof *c);
    if (!c) TB_FATAL("out of host memory");
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    snprintf(c->path, sizeof c->path, "%s/%s", dir, name);
    snprintf(c->lock_path, sizeof c->lock_path, "%s.lock", c->path);
    c->key = dup_str(key, strlen(key));
    c->session_fd = -1;
    c->refs = 1;
    int fd = open(c->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644); /* writable here: checked now */
    int err = errno;
    if (fd < 0 && !((err == EROFS || err == EACCES || err == EPERM) && access(c->path, R_OK) == 0)) {
        snprintf(msg, len, "plan cache: cannot write %s (%s); planning without a cache", c->lock_path, strerror(err));
        free(c->key);
        free(c);
        return NULL;
    }
    if (fd >= 0) close(fd);
    c->no_write = fd < 0; /* a read-only cache a site provides: used as it is, nothing written */
    char why[160]; /* the file is replaced by rename only: read whole without the lock */
    if (read_file(c, 0, why, sizeof why) < 0) {
        snprintf(msg, len, "plan cache: %s is corrupt (%s): %s", c->path, why,
                 c->no_write ? "not used (it is read-only)" : "rebuilding it");
        c->dirty = 1;
    } else if (c->no_write) {
        snprintf(msg, len, "plan cache: %s is read-only (%s): its %d entries are used, new choices are not kept",
                 c->dir, strerror(err), c->n);
    }
    pthread_mutex_lock(&g_lock);
    c->next = g_open;
    g_open = c;
    pthread_mutex_unlock(&g_lock);
    return c;
}

const char *tb_pc_get(tb_plan_cache *c, const char *entry) {
    pc_entry *e = find(c, entry);
    if (e)
        c->hits++;
    else
        c->misses++;
    return e ? e->v : NULL;
}

/* The entry that says a session's planning was committed to the file: the
 * processes that come later load it without taking the session's lock. */
static void session_mark(const tb_plan_cache *c, char *out, size_t len) { snprintf(out, len, "session %s", c->session); }

void tb_pc_lock(tb_plan_cache *c, const char *session, char *msg, size_t len) {
    msg[0] = '\0';
    if (c->session[0] || c->no_write) return;
    snprintf(c->session, sizeof c->session, "%.64s", session);
    char mark[96];
    session_mark(c, mark, sizeof mark);
    if (find(c, mark)) return; /* planned into the file before this process opened it */
    snprintf(c->session_path, sizeof c->session_path, "%s.%s.lock", c->path, c->session);
    int lk = c->no_lock ? 2 : take_lock(c->session_path, c->path, 1, &c->session_fd); /* 3: after a wait */
    if (lk == 2 && !c->no_lock) {
        c->no_lock = 1;
        snprintf(msg, len, "plan cache: the file system of %s does not lock files (flock); every process plans what "
                 "it misses and replaces the file whole", c->dir);
    } else if (lk == 1 || lk < 0) {
        c->no_write = 1;
        snprintf(msg, len, "plan cache: %s %s; this process plans alone and writes nothing", c->session_path,
                 lk > 0 ? "stayed locked past TB_PLAN_CACHE_WAIT_S" : "cannot be locked");
        return;
    }
    char why[160];
    if (read_file(c, 1, why, sizeof why) < 0) { /* what the session before ours wrote */
        snprintf(msg, len, "plan cache: %s is corrupt (%s): rebuilding it", c->path, why);
        c->dirty = 1;
    }
    if (c->session_fd >= 0 && find(c, mark)) {
        release_lock(&c->session_fd); /* the holder before planned it all */
    } else if (lk == 3 && !msg[0]) {
        /* the holder let go without committing the session (its write failed, or it ended): the processes
         * still waiting would each plan it alone in turn; they plan side by side instead */
        release_lock(&c->session_fd);
        snprintf(msg, len, "plan cache: the process that planned %s before this one wrote no complete session into "
                 "%s (a failed write, or it ended); this process plans what it misses without waiting",
                 c->session, c->path);
    }
}

int tb_pc_session_locked(const tb_plan_cache *c) { return c->session_fd >= 0; }

void tb_pc_put(tb_plan_cache *c, const char *entry, const char *value) {
    if (strpbrk(entry, "\t\n") || strchr(value, '\n')) TB_FATAL("plan cache: entry '%s' holds a tab or newline", entry);
    int changed = set(c, entry, value, strlen(value), 1);
    c->dirty |= changed;
    c->puts += changed; /* a choice found and put back unchanged was not made here */
}

void tb_pc_drop(tb_plan_cache *c, const char *entry) {
    pc_entry *e = find(c, entry);
    if (e) {
        free(e->k);
        free(e->v);
        *e = c->e[--c->n];
        c->dirty = 1;
    }
    c->dropped = realloc(c->dropped, (size_t)(c->ndropped + 1) * sizeof *c->dropped);
    if (!c->dropped) TB_FATAL("out of host memory");
    c->dropped[c->ndropped++] = dup_str(entry, strlen(entry));
    char mark[96];
    if (c->session[0] && strncmp(entry, "session ", 8) != 0) {
        session_mark(c, mark, sizeof mark); /* the session is no longer whole in the file: the next */
        if (!was_dropped(c, mark)) tb_pc_drop(c, mark); /* launch plans it under the lock again */
    }
}

int tb_pc_commit(tb_plan_cache *c, char *msg, size_t len) {
    msg[0] = '\0';
    int rc = 0;
    if (c->session_fd >= 0) { /* planned under the session's lock: the next processes need not wait */
        char mark[96];
        session_mark(c, mark, sizeof mark);
        c->dirty |= set(c, mark, "planned", 7, 1);
    }
    if (c->dirty && !c->no_write) { /* merge what other sessions wrote since, under the file's lock */
        int fd = -1, lk = c->no_lock ? 2 : take_lock(c->lock_path, c->path, 0, &fd);
        if (lk == 1 || lk < 0) {
            snprintf(msg, len, "plan cache: cannot lock %s to add entries; they are not kept", c->lock_path);
            rc = -1;
        } else {
            char why[160];
            (void)read_file(c, 1, why, sizeof why); /* a corrupt file is replaced by ours */
            rc = write_file(c, msg, len);
            if (rc == 0) c->dirty = 0;
            release_lock(&fd);
        }
    }
    release_lock(&c->session_fd);
    c->session[0] = '\0';
    return rc;
}

void tb_pc_close(tb_plan_cache *c) {
    if (!c) return;
    char msg[256];
    if (tb_pc_commit(c, msg, sizeof msg) != 0) tb_warn("%s", msg);
    pthread_mutex_lock(&g_lock);
    int last = --c->refs == 0;
    if (last)
        for (tb_plan_cache **pp = &g_open; *pp; pp = &(*pp)->next)
            if (*pp == c) {
                *pp = c->next;
                break;
            }
    pthread_mutex_unlock(&g_lock);
    if (!last) return;
    for (int i = 0; i < c->n; i++) free(c->e[i].k), free(c->e[i].v);
    for (int i = 0; i < c->ndropped; i++) free(c->dropped[i]);
    free(c->dropped);
    free(c->e);
    free(c->key);
    free(c);
}

const char *tb_pc_path(const tb_plan_cache *c) { return c->path; }
int tb_pc_count(const tb_plan_cache *c) { return c->n; }
int tb_pc_hits(const tb_plan_cache *c) { return c->hits; }
int tb_pc_misses(const tb_plan_cache *c) { return c->misses; }
int tb_pc_puts(const tb_plan_cache *c) { return c->puts; }
int tb_pc_writes(const tb_plan_cache *c) { return !c->no_write; }
