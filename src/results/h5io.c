/* h5io.c - HDF5 helpers: the process-wide lock, checked calls, typed
 * dataset reads/writes, atomic files (attributes: h5io_attr.c). */
#include "src/results/h5io.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/timer.h"

/* ---- the lock -------------------------------------------------------------------------- */

/* A recursive lock with a timed wait and a record of who holds it: g_mu
 * guards the fields and is never held while HDF5 runs. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_free;            /* signalled when depth drops to 0 */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_t g_owner;
static long g_depth = 0;                 /* 0: free */
static double g_since = 0;               /* when the outermost holder took it */
static char g_what[64] = "";             /* the outermost holder's operation */

/* At exit HDF5 closes itself (H5_term_library, registered with atexit when
 * the library starts): wait until no other thread is inside the library, and
 * keep it out afterwards. A thread stuck in HDF5 for seconds at exit leaves
 * the process without that clean-up rather than racing it. */
static void wait_at_exit(void) {
    char holder[64];
    double held = 0;
    if (tb_h5_lock_timed("exit", 10.0, holder, sizeof holder, &held) == 0) return;
    tb_warn("exiting while another thread has been inside HDF5 (%s) for %.1f s; HDF5 is not closed",
            holder, held);
    fflush(stdout);
    fflush(stderr);
    _exit(1);
}

/* ---- temporary files in flight ------------------------------------------------------- */

/* The atomic writes under way, innermost last (nested only on the lock's
 * holder: the results file marked "aborted" from inside a failed
 * checkpoint write): what each writes, its final and temporary names.
 * Changed only by the HDF5 lock's holder; the abort cleanup removes the
 * temporaries, so a job that ends mid-write leaves no NAME.tmp.PID. */
#define H5_TMP_MAX 4
static struct {
    char what[64];
    char path[4096];
    char tmp[4200];
    hid_t file;
} g_tmp[H5_TMP_MAX];
static atomic_int g_ntmp = 0;
/* held by the holder while it changes the table and by the abort cleanup
 * while it reads it (a slot popped and pushed again under a reader would
 * hand it a half-written name); never held across a call that can die */
static pthread_mutex_t g_tmp_mu = PTHREAD_MUTEX_INITIALIZER;
/* the final name of the atomic write whose failure is ending the process
 * (tb_h5_write_failed): written once, before its error line */
static char g_failed[4096];
static atomic_int g_failed_set = 0;

static void note_failed(const char *path) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g_failed_set, &expected, 2)) return;
    snprintf(g_failed, sizeof g_failed, "%s", path);
    atomic_store(&g_failed_set, 1);
}

int tb_h5_write_failed(const char *path) { return atomic_load(&g_failed_set) == 1 && strcmp(g_failed, path) == 0; }

static void tmp_push(const tb_h5_writer *w, const char *what) {
    int n = atomic_load(&g_ntmp);
    if (n >= H5_TMP_MAX) TB_FATAL("more than %d HDF5 files written at once", H5_TMP_MAX);
    pthread_mutex_lock(&g_tmp_mu);
    snprintf(g_tmp[n].what, sizeof g_tmp[n].what, "%s", what);
    snprintf(g_tmp[n].path, sizeof g_tmp[n].path, "%s", w->path);
    snprintf(g_tmp[n].tmp, sizeof g_tmp[n].tmp, "%s", w->tmp);
    g_tmp[n].file = w->file;
    atomic_store(&g_ntmp, n + 1);
    pthread_mutex_unlock(&g_tmp_mu);
}

static void tmp_pop(const tb_h5_writer *w) {
    pthread_mutex_lock(&g_tmp_mu);
    int n = atomic_load(&g_ntmp);
    if (n > 0 && strcmp(g_tmp[n - 1].tmp, w->tmp) == 0) atomic_store(&g_ntmp, n - 1);
    pthread_mutex_unlock(&g_tmp_mu);
}

static void remove_temporaries(void *ctx) {
    (void)ctx;
    pthread_mutex_lock(&g_tmp_mu);
    for (int i = atomic_load(&g_ntmp) - 1; i >= 0; i--) unlink(g_tmp[i].tmp);
    pthread_mutex_unlock(&g_tmp_mu);
}

static void lock_init(void) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&g_free, &a);
    pthread_condattr_destroy(&a);
    /* HDF5 registers its atexit clean-up when it starts; ours, registered
     * after it, runs before it */
    H5open();
    atexit(wait_at_exit);
    /* after every other cleanup: the results file's abort mark may be
     * waiting for the main thread to finish a checkpoint, and a temporary
     * removed under it would fail its rename (a SIGTERM mid-write left the
     * results file 'running') */
    tb_set_abort_last(remove_temporaries, NULL);
}

static int lock_until(const char *what, const struct timespec *deadline, char *holder, size_t holder_len,
                      double *held_s) {
    pthread_once(&g_once, lock_init);
    pthread_t self = pthread_self();
    pthread_mutex_lock(&g_mu);
    if (g_depth > 0 && pthread_equal(g_owner, self)) {
        g_depth++;
        pthread_mutex_unlock(&g_mu);
        return 0;
    }
    while (g_depth > 0) {
        if (!deadline) {
            pthread_cond_wait(&g_free, &g_mu);
        } else if (pthread_cond_timedwait(&g_free, &g_mu, deadline) == ETIMEDOUT && g_depth > 0) {
            if (holder) snprintf(holder, holder_len, "%s", g_what);
            if (held_s) *held_s = tb_now() - g_since;
            pthread_mutex_unlock(&g_mu);
            return -1;
        }
    }
    g_owner = self;
    g_depth = 1;
    g_since = tb_now();
    snprintf(g_what, sizeof g_what, "%s", what ? what : "HDF5 call");
    pthread_mutex_unlock(&g_mu);
    return 0;
}

void tb_h5_lock(const char *what) { lock_until(what, NULL, NULL, 0, NULL); }

int tb_h5_lock_timed(const char *what, double wait_s, char *holder, size_t holder_len, double *held_s) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (wait_s < 0) wait_s = 0;
    until.tv_sec += (time_t)wait_s;
    until.tv_nsec += (long)((wait_s - (double)(time_t)wait_s) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return lock_until(what, &until, holder, holder_len, held_s);
}

void tb_h5_unlock(void) {
    pthread_mutex_lock(&g_mu);
    int mine = g_depth > 0 && pthread_equal(g_owner, pthread_self());
    if (mine && --g_depth == 0) pthread_cond_broadcast(&g_free);
    pthread_mutex_unlock(&g_mu);
    if (!mine) TB_FATAL("internal check failed: the HDF5 lock was released by a thread that does not hold it");
}

/* ---- errors ---------------------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len;
} err_walk;

/* Keeps the last (innermost when walking downward) record: "func: message". */
static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
    (void)n;
    err_walk *w = data;
    char minor[160] = "";
    H5Eget_msg(e->min_num, NULL, minor, sizeof minor);
    snprintf(w->buf, w->len, "%s: %s%s%s", e->func_name ? e->func_name : "?",
             e->desc && *e->desc ? e->desc : "", e->desc && *e->desc && *minor ? " - " : "",
             minor);
    for (char *c = w->buf; *c; c++) /* one line: HDF5's write errors carry ctime()'s newline */
        if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
    return 0;
}

void tb_h5_last_error(char *buf, size_t len) {
    err_walk w = {buf, len};
    buf[0] = '\0';
    tb_h5_lock("error report");
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_cb, &w);
    tb_h5_unlock();
}

/* The system's error behind an HDF5 failure that a user can act on (a full
 * or read-only disk, a quota): HDF5's own "errno = N" in msg, else errno
 * as the call left it; 0 for any other. */
static int user_io_errno(const char *msg, int saved) {
    const char *at = strstr(msg, "errno = ");
    int e = at ? atoi(at + 8) : saved;
    return e == ENOSPC || e == EDQUOT || e == EFBIG || e == EIO || e == EROFS ? e : 0;
}

hid_t tb_h5_check(hid_t value, const char *expr, const char *file, int line) {
    if (value >= 0) return value;
    int saved = errno, n = atomic_load(&g_ntmp);
    char msg[512];
    tb_h5_last_error(msg, sizeof msg);
    int e = n > 0 ? user_io_errno(msg, saved) : 0;
    if (e) {
        /* before the line: the temporary is never left, and its blocks are
         * free at once (HDF5 still holds it open) for the results file's
         * "aborted" mark that follows */
        void *fd = NULL;
        if (H5Fget_vfd_handle(g_tmp[n - 1].file, H5P_DEFAULT, &fd) >= 0 && fd)
            (void)!ftruncate(*(int *)fd, 0); /* best effort: the unlink below removes the name anyway */
        unlink(g_tmp[n - 1].tmp);
        note_failed(g_tmp[n - 1].path);
        tb_die("cannot write %s '%s': %s; %s or choose another path (--results, --ckpt, --save)", g_tmp[n - 1].what,
               g_tmp[n - 1].path, strerror(e),
               e == EFBIG ? "raise the file-size limit (ulimit -f)" : "free space there");
    }
    char writing[4200] = ""; /* the file being written, when one is */
    if (n > 0) snprintf(writing, sizeof writing, " writing %s '%s'", g_tmp[n - 1].what, g_tmp[n - 1].path);
    tb_fatal_at(file, line, "HDF5 call failed%s: %s: %s", writing, expr, msg[0] ? msg : "no HDF5 message");
}

void tb_h5_quiet(void) {
    tb_h5_lock("setup");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    tb_h5_unlock();
}

void tb_h5_library_version(char *buf, size_t len) {
    unsigned maj = 0, min = 0, rel = 0;
    tb_h5_lock("version query");
    H5get_libversion(&maj, &min, &rel);
    tb_h5_unlock();
    snprintf(buf, len, "%u.%u.%u", maj, min, rel);
}

/* ---- files -------------------------------------------------------------------------- */

hid_t tb_h5_open_read(const char *path, const char *what, const char *hint) {
    if (access(path, R_OK) != 0)
        tb_die("cannot read %s '%s': %s; %s", what, path, strerror(errno), hint);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) tb_die("%s '%s' is a directory, not a file; %s", what, path, hint);
    char op[64];
    snprintf(op, sizeof op, "%s read", what);
    tb_h5_lock(op); /* until tb_h5_close_read */
    tb_h5_quiet();
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0) tb_die("%s '%s' is not an HDF5 file; %s", what, path, hint);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        char msg[512];
        tb_h5_last_error(msg, sizeof msg);
        tb_die("cannot open %s '%s' (%s); the file is damaged (cut short or overwritten): write it again, or give "
               "another", what, path, msg); /* it is there, readable and begins as HDF5: not a path mistake */
    }
    return f;
}

void tb_h5_close_read(hid_t file) {
    H5_CHECK(H5Fclose(file));
    tb_h5_unlock();
}

void tb_h5_create_atomic(tb_h5_writer *w, const char *path, const char *what) {
    if (strlen(path) >= sizeof w->path) tb_die("%s path is too long: '%s'", what, path);
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld", path, (long)getpid());
    char op[64];
    snprintf(op, sizeof op, "%s write", what);
    tb_h5_lock(op); /* until commit or abandon */
    tb_h5_quiet();
    errno = 0;
    w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (w->file < 0) {
        int err = errno;
        unlink(w->tmp); /* HDF5 may have made it before failing (a full disk) */
        tb_h5_unlock();
        tb_die("cannot write %s '%s': %s; %s", what, path, err ? strerror(err) : "HDF5 could not create it",
               err == ENOSPC || err == EDQUOT ? "free space there or choose another path"
                                              : "check that its directory exists and is writable");
    }
    tmp_push(w, what);
}

/* 0, or the errno of the open or the fsync. EINVAL and ENOTSUP (a file
 * system that has no fsync) count as done: nothing more can be asked of it. */
static int fsync_path(const char *path, int directory) {
    int fd = open(path, directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return errno;
    int err = fsync(fd) == 0 ? 0 : errno;
    close(fd);
    return err == EINVAL || err == ENOTSUP ? 0 : err;
}

/* The lock is held to the rename: two writers of one path (a results
 * snapshot and the final write) share the temporary name, and the one that
 * took the lock last must land last. */
static void commit(tb_h5_writer *w, int sync_first) {
    H5_CHECK(H5Fflush(w->file, H5F_SCOPE_GLOBAL));
    H5_CHECK(H5Fclose(w->file));
    w->file = -1;
    /* write-back errors (EIO, ENOSPC, EDQUOT on NFS or Lustre) often show
     * only here: the file must not replace the last good one */
    int err = sync_first ? fsync_path(w->tmp, 0) : 0;
    if (err) {
        int n = atomic_load(&g_ntmp);
        char what[64];
        snprintf(what, sizeof what, "%s", n > 0 ? g_tmp[n - 1].what : "file");
        unlink(w->tmp);
        tmp_pop(w);
        note_failed(w->path);
        tb_h5_unlock();
        tb_die("cannot write %s '%s': its data did not reach the disk (fsync: %s); the earlier file is kept; %s",
               what, w->path, strerror(err),
               err == ENOSPC || err == EDQUOT ? "free space there or choose another path"
                                              : "check the file system (dmesg, its server) or choose another path");
    }
    if (rename(w->tmp, w->path) != 0) {
        int rerr = errno;
        unlink(w->tmp);
        tmp_pop(w);
        note_failed(w->path);
        tb_h5_unlock();
        tb_die("cannot rename '%s' to '%s': %s", w->tmp, w->path, strerror(rerr));
    }
    tmp_pop(w);
    tb_h5_unlock();
    if (!sync_first) (void)fsync_path(w->path, 0); /* the abort mark: renamed first, then whatever reaches the disk */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", w->path);
    (void)fsync_path(dirname(dir), 1); /* the rename's durability: the file itself is whole either way */
}

void tb_h5_commit_atomic(tb_h5_writer *w) { commit(w, 1); }
void tb_h5_commit_atomic_now(tb_h5_writer *w) { commit(w, 0); }

void tb_h5_track_atomic(tb_h5_writer *w, const char *what) { tmp_push(w, what); }

void tb_h5_abandon_atomic(tb_h5_writer *w) {
    if (w->file >= 0) H5Fclose(w->file);
    w->file = -1;
    unlink(w->tmp);
    tmp_pop(w);
    tb_h5_unlock();
}

/* ---- datasets ------------------------------------------------------------------------ */

static void write_ds(hid_t loc, const char *name, hid_t type, int ndim, const int64_t *dims,
                     const void *data) {
    tb_h5_lock(NULL);
    hsize_t hd[8];
    for (int i = 0; i < ndim; i++) hd[i] = (hsize_t)dims[i];
    hid_t space = ndim == 0 ? H5_CHECK(H5Screate(H5S_SCALAR))
                            : H5_CHECK(H5Screate_simple(ndim, hd, NULL));
    /* one chunk with a Fletcher-32 checksum: a byte damaged on disk fails the read (read_ds) instead of
     * training on (h5py and every HDF5 reader check it too); scalars and empty or >1 GiB arrays stay plain */
    hsize_t elems = 1;
    for (int i = 0; i < ndim; i++) elems *= hd[i];
    hid_t dcpl = H5_CHECK(H5Pcreate(H5P_DATASET_CREATE));
    if (ndim > 0 && elems > 0 && elems * H5Tget_size(type) <= ((hsize_t)1 << 30)) {
        H5_CHECK(H5Pset_chunk(dcpl, ndim, hd));
        H5_CHECK(H5Pset_fletcher32(dcpl));
    }
    hid_t ds = H5_CHECK(H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5_CHECK(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
    H5_CHECK(H5Dclose(ds));
    H5_CHECK(H5Pclose(dcpl));
    H5_CHECK(H5Sclose(space));
    tb_h5_unlock();
}

void tb_h5_write_f32(hid_t loc, const char *name, int ndim, const int64_t *dims, const float *data) {
    write_ds(loc, name, H5T_NATIVE_FLOAT, ndim, dims, data);
}

void tb_h5_write_i64(hid_t loc, const char *name, int ndim, const int64_t *dims,
                     const int64_t *data) {
    write_ds(loc, name, H5T_NATIVE_INT64, ndim, dims, data);
}

hid_t tb_h5_group_create(hid_t loc, const char *name) {
    tb_h5_lock(NULL);
    hid_t gcpl = H5_CHECK(H5Pcreate(H5P_GROUP_CREATE));
    H5_CHECK(H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
    hid_t g = H5_CHECK(H5Gcreate2(loc, name, H5P_DEFAULT, gcpl, H5P_DEFAULT));
    H5_CHECK(H5Pclose(gcpl));
    tb_h5_unlock();
    return g;
}

int tb_h5_exists(hid_t loc, const char *path) {
    /* check every prefix: H5Lexists fails on a missing intermediate group */
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    int found = 1;
    tb_h5_lock(NULL);
    for (char *s = buf + 1; found; s++) {
        char c = *s;
        if (c == '/' || c == '\0') {
            *s = '\0';
            found = H5Lexists(loc, buf, H5P_DEFAULT) > 0;
            *s = c;
            if (c == '\0') break;
        }
    }
    tb_h5_unlock();
    return found;
}

int tb_h5_shape(hid_t loc, const char *name, int64_t *dims) {
    tb_h5_lock(NULL);
    hid_t ds = H5_CHECK(H5Dopen2(loc, name, H5P_DEFAULT));
    hid_t space = H5_CHECK(H5Dget_space(ds));
    /* a null dataspace has rank 0 like a scalar, but no value: reading it
     * would leave the caller's buffer as it was */
    if (H5Sget_simple_extent_type(space) == H5S_NULL)
        tb_die("dataset '%s' holds no value (HDF5 null dataspace)", name);
    int nd = (int)H5_CHECK(H5Sget_simple_extent_ndims(space));
    if (nd > 8) tb_die("dataset '%s' has %d dimensions; at most 8 are expected", name, nd);
    hsize_t hd[8];
    H5_CHECK(H5Sget_simple_extent_dims(space, hd, NULL));
    for (int i = 0; i < nd; i++) dims[i] = (int64_t)hd[i];
    H5_CHECK(H5Sclose(space));
    H5_CHECK(H5Dclose(ds));
    tb_h5_unlock();
    return nd;
}

int tb_h5_is_float(hid_t loc, const char *name) {
    tb_h5_lock(NULL);
    hid_t ds = H5_CHECK(H5Dopen2(loc, name, H5P_DEFAULT));
    hid_t t = H5_CHECK(H5Dget_type(ds));
    H5T_class_t c = H5Tget_class(t);
    H5_CHECK(H5Tclose(t));
    H5_CHECK(H5Dclose(ds));
    tb_h5_unlock();
    return c == H5T_FLOAT ? 1 : c == H5T_INTEGER ? 0 : -1;
}

static void read_ds(hid_t loc, const char *name, hid_t memtype, void *dst) {
    tb_h5_lock(NULL);
    hid_t ds = H5_CHECK(H5Dopen2(loc, name, H5P_DEFAULT));
    herr_t rc;
    H5E_BEGIN_TRY { rc = H5Dread(ds, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst); }
    H5E_END_TRY
    if (rc < 0) { /* HDF5's reason first: the calls below clear its error stack */
        char why[512], file[4096] = "?";
        tb_h5_last_error(why, sizeof why);
        if (H5Fget_name(loc, file, sizeof file) < 0) snprintf(file, sizeof file, "?");
        H5_CHECK(H5Dclose(ds));
        tb_h5_unlock();
        if (strstr(why, "checksum")) /* Fletcher-32 (write_ds): the bytes on disk changed */
            tb_die("'%s': dataset %s fails its checksum: the file is damaged; write it again, or give another", file,
                   name);
        tb_die("'%s': dataset %s cannot be read (HDF5: %s)", file, name, why);
        return;
    }
    H5_CHECK(H5Dclose(ds));
    tb_h5_unlock();
}

void tb_h5_read_f32(hid_t loc, const char *name, float *dst) {
    read_ds(loc, name, H5T_NATIVE_FLOAT, dst);
}

void tb_h5_read_i64(hid_t loc, const char *name, int64_t *dst) {
    read_ds(loc, name, H5T_NATIVE_INT64, dst);
}

typedef struct {
    char **names;
    int count, cap;
} name_list;

static herr_t list_cb(hid_t g, const char *name, const H5L_info_t *info, void *data) {
    (void)g;
    (void)info;
    name_list *l = data;
    if (l->count == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->names = realloc(l->names, (size_t)l->cap * sizeof *l->names);
        if (!l->names) TB_FATAL("out of host memory");
    }
    if (!(l->names[l->count] = strdup(name))) TB_FATAL("out of host memory");
    l->count++;
    return 0;
}

char **tb_h5_list(hid_t group, int *count) {
    name_list l = {NULL, 0, 0};
    tb_h5_lock(NULL);
    herr_t rc = H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, NULL, list_cb, &l);
    tb_h5_unlock();
    if (rc < 0) {
        /* a damaged link table fails part-way: free the names read so far,
         * then report (the fuzz targets' abort hook returns to the caller) */
        tb_h5_free_names(l.names, l.count);
        H5_CHECK(rc);
    }
    *count = l.count;
    return l.names;
}

void tb_h5_free_names(char **names, int count) {
    for (int i = 0; i < count; i++) free(names[i]);
    free(names);
}
