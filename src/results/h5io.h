/* h5io.h - HDF5 access for trainbench files: the process-wide HDF5 lock,
 * the H5_CHECK macro, typed dataset and attribute helpers, and atomic file
 * creation (write under a temporary name, flush, fsync, rename), so that a
 * crash never leaves a half-written checkpoint or results file behind.
 *
 * Threads: the watchdog (rank 0's monitor thread) and the results snapshot
 * thread write the results file while the main thread may be writing a
 * checkpoint. An HDF5 built without its thread-safe option (the default of
 * HDF5's own build, and of every parallel HDF5) allows no two threads inside
 * the library at once; Debian 12's serial libhdf5 1.10 has it on, but even
 * there two writers of one file must land in order and HDF5's atexit
 * clean-up must not close the library under a thread still writing. So
 * every HDF5 call of the process runs under one recursive lock:
 *   - every helper below takes it for its own calls;
 *   - a file opened with tb_h5_open_read holds it until tb_h5_close_read, and
 *     a file created with tb_h5_create_atomic until tb_h5_commit_atomic or
 *     tb_h5_abandon_atomic, so the raw H5* calls a reader or writer makes on
 *     it (groups, datasets) are inside the lock too;
 *   - other raw H5* calls are made between tb_h5_lock and tb_h5_unlock;
 *   - at exit, HDF5's own clean-up (registered with atexit) waits for the
 *     lock, so a thread still inside the library is never pulled from under.
 * A thread that must not wait long (the watchdog, with SIGKILL a second
 * away) uses tb_h5_lock_timed and gives up with a line saying why. */
#ifndef TB_H5IO_H
#define TB_H5IO_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the lock ------------------------------------------------------------------------ */
/* Takes the process-wide HDF5 lock (recursive: the holder may take it
 * again). `what` names the operation for a thread that has to wait
 * ("checkpoint write"); the outermost holder's name is kept. */
void tb_h5_lock(const char *what);
void tb_h5_unlock(void);
/* As tb_h5_lock, waiting at most wait_s seconds: 0 when taken; -1 when
 * another thread still holds it, with its operation and how long it has held
 * the lock in holder/held_s (either may be NULL). */
int tb_h5_lock_timed(const char *what, double wait_s, char *holder, size_t holder_len, double *held_s);

/* Evaluates an HDF5 call; on a negative result prints file:line, the rank
 * and HDF5's own error message, then ends the job. Yields the call's value. */
#define H5_CHECK(expr) ((hid_t)tb_h5_check((hid_t)(expr), #expr, __FILE__, __LINE__))
hid_t tb_h5_check(hid_t value, const char *expr, const char *file, int line);

/* Turns off HDF5's own stack printing (we print one line instead). */
void tb_h5_quiet(void);
/* The innermost message of HDF5's current error stack ("" when none). */
void tb_h5_last_error(char *buf, size_t len);
/* "1.10.8" */
void tb_h5_library_version(char *buf, size_t len);

/* Opens an existing file read-only, holding the HDF5 lock until
 * tb_h5_close_read; on failure dies with one line naming `what` (e.g.
 * "checkpoint"), the path, the reason and `hint`. */
hid_t tb_h5_open_read(const char *path, const char *what, const char *hint);
void tb_h5_close_read(hid_t file);

/* A file being written atomically. */
typedef struct {
    char path[4096];  /* final name */
    char tmp[4200];   /* temporary name in the same directory */
    hid_t file;
} tb_h5_writer;

/* Creates the temporary file and takes the HDF5 lock (held until commit or
 * abandon); dies naming path if it cannot be written. */
void tb_h5_create_atomic(tb_h5_writer *w, const char *path, const char *what);
/* Flushes, closes, fsyncs and renames to the final name; releases the lock
 * after the rename (so atomic writes of one path land in lock order). */
void tb_h5_commit_atomic(tb_h5_writer *w);
/* As commit, but renames before the fsync: for a write racing the
 * launcher's SIGKILL (abort paths), where a whole file in place soon matters
 * more than its surviving a power cut in the next seconds. */
void tb_h5_commit_atomic_now(tb_h5_writer *w);
/* Closes and removes the temporary file (error paths); releases the lock. */
void tb_h5_abandon_atomic(tb_h5_writer *w);
/* A writer whose temporary the caller made and opened itself, the lock
 * held (a copy of a file rewritten in place): tracked as
 * tb_h5_create_atomic's are, so a failure before the commit removes it. */
void tb_h5_track_atomic(tb_h5_writer *w, const char *what);
/* 1 when an atomic write of `path` has failed in this process and its
 * error is ending it (a full disk, the file-size limit): a mark written to
 * the same path from the abort cleanups would fail the same way, or wait
 * for a thread that waits for the dying writer's HDF5 lock. */
int tb_h5_write_failed(const char *path);

/* ---- datasets ------------------------------------------------------------------ */
/* rank 0 (scalar) when ndim == 0 */
void tb_h5_write_f32(hid_t loc, const char *name, int ndim, const int64_t *dims, const float *data);
void tb_h5_write_i64(hid_t loc, const char *name, int ndim, const int64_t *dims, const int64_t *data);

/* A group whose members list in the order they were written (creation
 * order tracked and indexed): h5py and h5dump iterate a checkpoint's /params
 * in torchvision's state_dict order, a table's columns in its order. */
hid_t tb_h5_group_create(hid_t loc, const char *name);

int tb_h5_exists(hid_t loc, const char *path);
/* Shape of a dataset: returns rank, fills dims (up to 8); dies on failure. */
int tb_h5_shape(hid_t loc, const char *name, int64_t *dims);
/* 1 if the dataset's type is floating point, 0 if integer, -1 otherwise. */
int tb_h5_is_float(hid_t loc, const char *name);
/* Reads (with HDF5's numeric conversion) into native float / int64. */
void tb_h5_read_f32(hid_t loc, const char *name, float *dst);
void tb_h5_read_i64(hid_t loc, const char *name, int64_t *dst);

/* Names of the links in a group, in creation/name order; free with
 * tb_h5_free_names. */
char **tb_h5_list(hid_t group, int *count);
void tb_h5_free_names(char **names, int count);

/* ---- attributes ----------------------------------------------------------------- */
void tb_h5_attr_write_str(hid_t loc, const char *name, const char *value);
void tb_h5_attr_write_i64(hid_t loc, const char *name, int64_t value);
void tb_h5_attr_write_f64(hid_t loc, const char *name, double value);
/* Return 0 on success, -1 when the attribute is missing or of another kind. */
int tb_h5_attr_read_str(hid_t loc, const char *name, char *buf, size_t len);
int tb_h5_attr_read_i64(hid_t loc, const char *name, int64_t *value);
int tb_h5_attr_read_f64(hid_t loc, const char *name, double *value); /* a float or an integer attribute */

#endif
