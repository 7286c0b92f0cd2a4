/* dataset.c - the sample index (see dataset.h): ImageFolder directories
 * scanned by several threads with readdir's d_type, or a `PATH LABEL` list. */
#define _DEFAULT_SOURCE /* DT_* constants of readdir's d_type */
#include "data/dataset.h"
#include "data/dataset_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/hash.h"
#include "core/log.h"
#include "core/timer.h"

#define MAX_DEPTH 64 /* nested directories below a class (symlink loops end here) */
#define MAX_ABOVE 64 /* ROOT's own ancestors kept on the walk's chain */

static int is_jpeg_name(const char *name) {
    size_t n = strlen(name);
    const char *ext[2] = {".jpg", ".jpeg"};
    for (int e = 0; e < 2; e++) {
        size_t k = strlen(ext[e]);
        if (n < k) continue;
        int same = 1;
        for (size_t i = 0; i < k && same; i++) {
            char c = name[n - k + i];
            if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
            same = c == ext[e][i];
        }
        if (same) return 1;
    }
    return 0;
}

/* ---- one class directory, walked by one thread ------------------------------ */

typedef struct {
    int64_t off;  /* relative path "class/sub/name" in the class arena */
    int dlen;     /* length of its directory part "class/sub" */
} entry;

/* A directory's identity, to know it again through a symbolic link. */
typedef struct {
    dev_t dev;
    ino_t ino;
} dir_id;

typedef struct {
    const char *name;            /* class directory name */
    char *arena;                 /* relative paths */
    size_t arena_len, arena_cap;
    entry *ents;
    int64_t n, cap;
    int64_t skipped_ext, skipped_other;
    int64_t unreadable;          /* directories that could not be opened or read */
    char first_unreadable[512];
    char first_skipped[3][512];
    int nfirst;
    dir_id anc[MAX_ABOVE + MAX_DEPTH + 2]; /* the walk's directories from / through ROOT down to the current one */
    int nanc;
} class_scan;

/* Pushes directory fd onto the walk's chain; 0 when it is already on it (a
 * symbolic link back to a directory that contains it: descending would
 * list the same files again and again, under other names and labels). */
static int enter_dir(class_scan *c, int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return 1; /* cannot tell: readdir will say what is wrong */
    for (int i = 0; i < c->nanc; i++)
        if (c->anc[i].dev == st.st_dev && c->anc[i].ino == st.st_ino) return 0;
    if (c->nanc < MAX_ABOVE + MAX_DEPTH + 2) c->anc[c->nanc++] = (dir_id){st.st_dev, st.st_ino};
    return 1;
}

/* "rel/name: why", its control characters escaped: a skipped entry's line. */
static void skip_text(const char *rel, const char *name, const char *why, char *out, size_t len) {
    char both[1024], shown[512];
    snprintf(both, sizeof both, "%s/%s", rel, name);
    snprintf(out, len, "%s: %s", tb_escape_controls(both, shown, sizeof shown), why);
}

static void note_skip(class_scan *c, const char *rel, const char *name, const char *why) {
    if (c->nfirst >= 3) return;
    skip_text(rel, name, why, c->first_skipped[c->nfirst++], sizeof c->first_skipped[0]);
}

/* note_skip for a directory the scan could not open or read (its images left out, counted in unreadable):
 * what failed, and errno's reason. */
static void note_skip_errno(class_scan *c, const char *rel, const char *name, const char *what) {
    char why[160];
    snprintf(why, sizeof why, "%s: %s", what, strerror(errno));
    if (c->unreadable++ == 0) skip_text(rel, name, why, c->first_unreadable, sizeof c->first_unreadable);
    note_skip(c, rel, name, why);
}

static void add_sample(class_scan *c, const char *rel, size_t rlen, const char *name) {
    size_t nlen = strlen(name), need = rlen + 1 + nlen + 1;
    if (c->arena_len + need > c->arena_cap) {
        c->arena_cap = (c->arena_len + need) * 2 + 4096;
        c->arena = tb_ds_xrealloc(c->arena, c->arena_cap);
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 256;
        c->ents = tb_ds_xrealloc(c->ents, (size_t)c->cap * sizeof *c->ents);
    }
    char *p = c->arena + c->arena_len;
    memcpy(p, rel, rlen);
    p[rlen] = '/';
    memcpy(p + rlen + 1, name, nlen + 1);
    c->ents[c->n].off = (int64_t)c->arena_len;
    c->ents[c->n].dlen = (int)rlen;
    c->n++;
    c->arena_len += need;
}

/* "." or "..". */
static int is_dot_entry(const char *name) {
    return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/* Whether entry e of directory d is a directory, following links (d_type
 * when the file system fills it in, else one fstatat). */
static int entry_is_dir(DIR *d, const struct dirent *e) {
    if (e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) return e->d_type == DT_DIR;
    struct stat st;
    return fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

/* Walks directory `fd` (relative path rel, rlen bytes) like os.walk with
 * followlinks=True: entries that are directories (after following links)
 * are descended into, every other entry is a file judged by its name. */
static void walk(class_scan *c, int fd, char *rel, size_t rlen, int depth) {
    DIR *d = fdopendir(fd);
    if (!d) {
        note_skip_errno(c, rel, ".", "cannot read directory");
        close(fd);
        c->skipped_other++;
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (is_dot_entry(name)) continue;
        int is_dir = entry_is_dir(d, e);
        if (!is_dir) {
            if (is_jpeg_name(name)) {
                add_sample(c, rel, rlen, name);
            } else {
                c->skipped_ext++;
                note_skip(c, rel, name, "not a .jpg/.jpeg name");
            }
            continue;
        }
        size_t nlen = strlen(name);
        if (depth >= MAX_DEPTH || rlen + 1 + nlen >= 4096) {
            c->skipped_other++;
            note_skip(c, rel, name, "directory nested too deep (a symlink loop?)");
            continue;
        }
        int sub = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY);
        int chain = c->nanc; /* the walk's chain as it was, restored after the subdirectory */
        rel[rlen] = '/';
        memcpy(rel + rlen + 1, name, nlen + 1);
        if (sub < 0) {
            c->skipped_other++;
            rel[rlen] = '\0';
            note_skip_errno(c, rel, name, "cannot open directory");
        } else if (!enter_dir(c, sub)) {
            close(sub);
            c->skipped_other++;
            rel[rlen] = '\0';
            note_skip(c, rel, name, "a symbolic link back to a directory that contains it (a loop), not followed");
        } else {
            walk(c, sub, rel, rlen + 1 + nlen, depth + 1);
        }
        c->nanc = chain;
        rel[rlen] = '\0';
    }
    closedir(d);
}

/* Python's sorted(os.walk()): by directory path, then by file name. */
static _Thread_local const char *t_sort_arena; /* C11 qsort has no context argument */

static int cmp_entry(const void *pa, const void *pb) {
    const entry *a = pa, *b = pb;
    const char *s = t_sort_arena;
    int m = a->dlen < b->dlen ? a->dlen : b->dlen;
    int c = memcmp(s + a->off, s + b->off, (size_t)m);
    if (c) return c;
    if (a->dlen != b->dlen) {
        /* one directory path is a prefix of the other: compare the next byte
         * of the longer one with the shorter one's terminator, as strcmp */
        return a->dlen < b->dlen ? -1 : 1;
    }
    return strcmp(s + a->off + a->dlen + 1, s + b->off + b->dlen + 1);
}

typedef struct {
    int rootfd;
    dir_id above[MAX_ABOVE]; /* ROOT's parent, its parent, ... up to / */
    int nabove;
    class_scan *cls;
    int ncls;
    int next; /* next class to scan, under mu */
    pthread_mutex_t mu;
} scan_job;

/* ROOT's parent, its parent, ... up to / (its own parent), at most max: their count. */
static int above_root(int rootfd, dir_id *above, int max) {
    int n = 0, fd = openat(rootfd, "..", O_RDONLY | O_DIRECTORY);
    while (fd >= 0 && n < max) {
        struct stat st;
        if (fstat(fd, &st) != 0 || (n > 0 && above[n - 1].dev == st.st_dev && above[n - 1].ino == st.st_ino)) break;
        above[n++] = (dir_id){st.st_dev, st.st_ino};
        int up = openat(fd, "..", O_RDONLY | O_DIRECTORY);
        close(fd);
        fd = up;
    }
    if (fd >= 0) close(fd);
    return n;
}

static void *scan_worker(void *arg) {
    scan_job *job = arg;
    char *rel = tb_ds_xmalloc(4096 + 256);
    for (;;) {
        pthread_mutex_lock(&job->mu);
        int k = job->next++;
        pthread_mutex_unlock(&job->mu);
        if (k >= job->ncls) break;
        class_scan *c = &job->cls[k];
        int fd = openat(job->rootfd, c->name, O_RDONLY | O_DIRECTORY);
        snprintf(rel, 4096, "%s", c->name);
        if (fd < 0) {
            c->skipped_other++;
            note_skip_errno(c, rel, ".", "cannot open class directory");
            continue;
        }
        /* ROOT's ancestors, ROOT, then the class directory head the chain: a link to any of them is a loop, or
         * leads out of the data set (a link to ROOT's parent indexed other folders under this class) */
        memcpy(c->anc, job->above, (size_t)job->nabove * sizeof *c->anc);
        c->nanc = job->nabove;
        enter_dir(c, job->rootfd);
        if (enter_dir(c, fd)) {
            walk(c, fd, rel, strlen(rel), 0); /* closes fd */
        } else {
            close(fd);
            c->skipped_other++;
            note_skip(c, rel, ".", "a symbolic link to ROOT or a directory above it, not followed");
        }
        t_sort_arena = c->arena;
        if (c->n > 1) qsort(c->ents, (size_t)c->n, sizeof *c->ents, cmp_entry); /* none: no array to sort */
    }
    free(rel);
    return NULL;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int auto_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    n *= 2; /* directory reads wait on the file system; overlap them */
    return n > 16 ? 16 : (int)n;
}

static int open_directory(const char *root, int threads, tb_dataset *ds, char *err, size_t errlen) {
    int rootfd = open(root, O_RDONLY | O_DIRECTORY);
    DIR *d = rootfd >= 0 ? fdopendir(rootfd) : NULL;
    if (!d) {
        tb_ds_set_err(err, errlen, "cannot read data directory %s: %s", root, strerror(errno));
        if (rootfd >= 0) close(rootfd);
        return -1;
    }
    char **names = NULL;
    int nnames = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (is_dot_entry(name)) continue;
        int is_dir = entry_is_dir(d, e);
        if (!is_dir) {
            if (ds->skipped_loose < 3) {
                char shown[400];
                snprintf(ds->first_skipped[ds->skipped_loose], sizeof ds->first_skipped[0],
                         "%s: a file outside any class directory", tb_escape_controls(name, shown, sizeof shown));
            }
            ds->skipped_loose++;
            continue;
        }
        if (nnames == cap) {
            cap = cap ? cap * 2 : 64;
            names = tb_ds_xrealloc(names, (size_t)cap * sizeof *names);
        }
        names[nnames++] = strdup(name);
        if (!names[nnames - 1]) TB_FATAL("out of host memory while indexing the data set");
    }
    if (nnames == 0) {
        closedir(d);
        free(names);
        tb_ds_set_err(err, errlen,
                      "no class directories in %s: expected ROOT/<class>/<image>.jpg (ImageFolder layout)",
                      root);
        return -1;
    }
    qsort(names, (size_t)nnames, sizeof *names, cmp_str);

    scan_job job;
    memset(&job, 0, sizeof job);
    job.rootfd = dirfd(d);
    job.nabove = above_root(job.rootfd, job.above, MAX_ABOVE);
    job.ncls = nnames;
    job.cls = tb_ds_xmalloc((size_t)nnames * sizeof *job.cls);
    memset(job.cls, 0, (size_t)nnames * sizeof *job.cls);
    for (int i = 0; i < nnames; i++) job.cls[i].name = names[i];
    pthread_mutex_init(&job.mu, NULL);
    if (threads <= 0) threads = auto_threads();
    if (threads > nnames) threads = nnames;
    pthread_t *tid = tb_ds_xmalloc((size_t)threads * sizeof *tid);
    int started = 0;
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&tid[t], NULL, scan_worker, &job) != 0) break;
        started = t;
    }
    scan_worker(&job); /* this thread scans too */
    for (int t = 1; t <= started; t++) pthread_join(tid[t], NULL);
    free(tid);
    pthread_mutex_destroy(&job.mu);
    closedir(d);

    /* concatenate in class order */
    int64_t n = 0;
    size_t bytes = 0;
    for (int i = 0; i < nnames; i++) {
        n += job.cls[i].n;
        bytes += job.cls[i].arena_len;
    }
    ds->classes = nnames;
    ds->class_names = names;
    ds->class_count = tb_ds_xmalloc((size_t)nnames * sizeof *ds->class_count);
    ds->n = n;
    ds->labels = tb_ds_xmalloc((size_t)n * sizeof *ds->labels);
    ds->path_off = tb_ds_xmalloc((size_t)n * sizeof *ds->path_off);
    ds->paths = tb_ds_xmalloc(bytes);
    int64_t k = 0;
    size_t at = 0;
    for (int i = 0; i < nnames; i++) {
        class_scan *c = &job.cls[i];
        ds->class_count[i] = c->n;
        for (int64_t j = 0; j < c->n; j++, k++) {
            const char *p = c->arena + c->ents[j].off;
            size_t len = strlen(p) + 1;
            memcpy(ds->paths + at, p, len);
            ds->path_off[k] = (int64_t)at;
            ds->labels[k] = i;
            at += len;
        }
        ds->skipped_ext += c->skipped_ext;
        ds->skipped_other += c->skipped_other;
        if (c->unreadable && !ds->unreadable)
            memcpy(ds->first_unreadable, c->first_unreadable, sizeof c->first_unreadable);
        ds->unreadable += c->unreadable;
        for (int f = 0; f < c->nfirst; f++) {
            int slot = 0;
            while (slot < 3 && ds->first_skipped[slot][0]) slot++;
            if (slot < 3) memcpy(ds->first_skipped[slot], c->first_skipped[f], sizeof ds->first_skipped[0]);
        }
        free(c->arena);
        free(c->ents);
    }
    free(job.cls);
    if (n == 0) { /* what was skipped, a folder that could not be read first (a stray README is no news) */
        int j = 0;
        for (int f = 2; f >= 0; f--)
            if (strstr(ds->first_skipped[f], ": cannot ")) j = f;
        const char *said = ds->first_skipped[j];
        tb_ds_set_err(err, errlen, "no .jpg/.jpeg files under the %d class directories of %s%s%s%s", nnames, root,
                      said[0] ? " (skipped: " : "", said, said[0] ? ")" : "");
        return -1;
    }
    return 0;
}

/* ---- public --------------------------------------------------------------------- */

int tb_dataset_open_threads(const char *path, int threads, tb_dataset *ds, char *err, size_t errlen) {
    memset(ds, 0, sizeof *ds);
    double t0 = tb_now();
    struct stat st;
    if (stat(path, &st) != 0) {
        tb_ds_set_err(err, errlen,
                      "data path %s: %s; pass an ImageFolder directory or a list file (or make one "
                      "with trainbench mkdata)",
                      path, strerror(errno));
        return -1;
    }
    int rc;
    if (S_ISDIR(st.st_mode)) {
        ds->root = strdup(path);
        size_t l = strlen(ds->root);
        while (l > 1 && ds->root[l - 1] == '/') ds->root[--l] = '\0';
        rc = open_directory(ds->root, threads, ds, err, errlen);
    } else {
        ds->is_list = 1;
        ds->list_path = strdup(path);
        const char *slash = strrchr(path, '/');
        ds->root = slash ? strndup(path, (size_t)(slash == path ? 1 : slash - path)) : strdup(".");
        rc = tb_ds_open_list(path, ds, err, errlen);
    }
    if (rc != 0) {
        tb_dataset_close(ds);
        return -1;
    }
    ds->index_s = tb_now() - t0;
    return 0;
}

int tb_dataset_open(const char *path, tb_dataset *ds, char *err, size_t errlen) {
    return tb_dataset_open_threads(path, 0, ds, err, errlen);
}

void tb_dataset_close(tb_dataset *ds) {
    if (ds->class_names)
        for (int c = 0; c < ds->classes; c++) free(ds->class_names[c]);
    free(ds->class_names);
    free(ds->class_count);
    free(ds->labels);
    free(ds->path_off);
    free(ds->paths);
    free(ds->root);
    free(ds->list_path);
    memset(ds, 0, sizeof *ds);
}

const char *tb_dataset_path(const tb_dataset *ds, int64_t i, char *buf, size_t len) {
    const char *rel = tb_dataset_relpath(ds, i);
    if (rel[0] == '/')
        snprintf(buf, len, "%s", rel);
    else
        snprintf(buf, len, "%s/%s", ds->root, rel);
    return buf;
}

uint64_t tb_dataset_hash(const tb_dataset *ds) {
    uint64_t h = TB_FNV1A_INIT;
    unsigned char c[4] = {(unsigned char)ds->classes, (unsigned char)(ds->classes >> 8),
                          (unsigned char)(ds->classes >> 16), (unsigned char)(ds->classes >> 24)};
    h = tb_fnv1a(h, c, 4);
    for (int64_t i = 0; i < ds->n; i++) {
        const char *rel = tb_dataset_relpath(ds, i);
        h = tb_fnv1a(h, rel, strlen(rel) + 1); /* with its NUL: "a" + "bc" differs from "ab" + "c" */
        uint32_t l = (uint32_t)ds->labels[i];
        unsigned char b[4] = {(unsigned char)l, (unsigned char)(l >> 8), (unsigned char)(l >> 16),
                              (unsigned char)(l >> 24)};
        h = tb_fnv1a(h, b, 4);
    }
    return h;
}

uint64_t tb_dataset_sizes_hash(const tb_dataset *ds, int k) {
    uint64_t h = TB_FNV1A_INIT;
    int64_t m = ds->n < k ? ds->n : k;
    char p[4200];
    for (int64_t j = 0; j < m; j++) {
        struct stat st;
        int64_t size = stat(tb_dataset_path(ds, j * ds->n / m, p, sizeof p), &st) == 0 ? (int64_t)st.st_size : -1;
        h = tb_fnv1a(h, &size, sizeof size);
    }
    return h;
}

int tb_dataset_unreadable(const tb_dataset *ds, const char *path, char *why, size_t len) {
    if (ds->unreadable <= 0) return 0;
    snprintf(why, len, "%lld folder%s of '%s' could not be read, leaving their images out (first: %s); "
             "--strict-data needs the whole set: make them readable, or run without it",
             (long long)ds->unreadable, ds->unreadable == 1 ? "" : "s", path, ds->first_unreadable);
    return 1;
}

int64_t tb_dataset_skipped(const tb_dataset *ds) {
    return ds->skipped_ext + ds->skipped_loose + ds->skipped_other;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void tb_dataset_describe(const tb_dataset *ds, FILE *f, int max_classes_listed) {
    fprintf(f, "# dataset %s (%s): %lld samples in %d classes, indexed in %.3f s\n",
            ds->is_list && ds->list_path ? ds->list_path : ds->root, ds->is_list ? "list file" : "directory",
            (long long)ds->n, ds->classes, ds->index_s);
    if (ds->classes <= max_classes_listed) {
        fprintf(f, "# per class:");
        for (int c = 0; c < ds->classes; c++)
            fprintf(f, " %s=%lld", ds->class_names[c], (long long)ds->class_count[c]);
        fprintf(f, "\n");
    } else {
        int64_t *s = tb_ds_xmalloc((size_t)ds->classes * sizeof *s);
        memcpy(s, ds->class_count, (size_t)ds->classes * sizeof *s);
        qsort(s, (size_t)ds->classes, sizeof *s, cmp_i64);
        fprintf(f, "# per class: min %lld, median %lld, max %lld\n", (long long)s[0],
                (long long)s[ds->classes / 2], (long long)s[ds->classes - 1]);
        free(s);
    }
    int empty = 0;
    for (int c = 0; c < ds->classes; c++) empty += ds->class_count[c] == 0;
    if (empty) fprintf(f, "# %d classes have no sample (they keep their label)\n", empty);
    int64_t sk = tb_dataset_skipped(ds);
    if (sk) {
        fprintf(f, "# skipped %lld entries: %lld not .jpg/.jpeg, %lld outside a class directory, %lld other\n",
                (long long)sk, (long long)ds->skipped_ext, (long long)ds->skipped_loose,
                (long long)ds->skipped_other);
        for (int k = 0; k < 3 && ds->first_skipped[k][0]; k++) fprintf(f, "#   %s\n", ds->first_skipped[k]);
    }
}
