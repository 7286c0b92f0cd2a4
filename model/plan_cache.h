/* plan_cache.h - the plan cache on disk (--plan-cache DIR|off): what a
 * backend chose after measuring (conv algorithms, graph-API engines and
 * their knobs, serialized plans), so the next launch starts in seconds
 * instead of timing every candidate again.
 *
 * One file per key: the key is one line naming everything a choice
 * depends on besides the problem itself (the GPU model, its SM count and
 * compute capability, the driver, the cuDNN version, the options that
 * filter choices); the problem (direction, shapes, dtype, layout, batch,
 * alignment) is each entry's own key. The file's name is a readable prefix
 * and a 64-bit hash of the key line, and its first line must equal the key:
 * a file of another machine, driver or cuDNN is never read as this one's.
 *
 * Format (text, one entry a line):
 *   trainbench-plan-cache 1
 *   key <key line>
 *   e <entry key>\t<value>
 *   ...
 *   end <entries> <FNV-1a 64 of every line before this one, hex>
 * A file that does not parse, is cut short, or fails its checksum is
 * corrupt: one line says so and it is rebuilt (rewritten at the next
 * commit). Entries that no longer rebuild on the machine (an engine gone
 * after an update the key does not show) are dropped by their user
 * (tb_pc_drop) and re-planned, again with one line.
 *
 * Writing is atomic: a temporary file in the same directory, fsync,
 * rename, fsync of the directory; readers never see half a file, so
 * tb_pc_open reads without locking. Sharing between the processes of a
 * node (the ranks on one machine, and any other run): a planning session
 * (a model's graph, from its first plan to its commit, before any
 * collective the ranks make together) takes an exclusive lock named after
 * what it plans (flock on <file>.<session>.lock) with tb_pc_lock and holds
 * it until tb_pc_commit; processes planning the same block in tb_pc_lock,
 * saying so in one line, and then read what the holder wrote, so one rank
 * plans and the rest load, while processes planning other graphs go on.
 * Every write merges under a brief lock of the file (<file>.lock): the
 * entries this process made win, the rest follow the file (what another
 * process re-planned or dropped since is not written back). A lock held
 * longer than the wait limit (TB_PLAN_CACHE_WAIT_S, default 900 s) is
 * given up on with one line: that process plans alone and writes nothing.
 * On a file system without flock (Lustre without -o flock, NFS without
 * lockd), one line says so and every process plans what it misses; the
 * renames still keep the file whole. Temporary files are named
 * <file>.tmp.<host>.<pid>.
 * Entries made outside a session (a smaller last batch planned lazily, a
 * test calling the ops directly) are merged into the file under a brief
 * lock at the next commit (at the latest tb_pc_close).
 *
 * Within one process, opening the same file twice gives the same cache
 * (reference counted): flock locks of one process on two descriptors
 * would deadlock.
 */
#ifndef TB_PLAN_CACHE_H
#define TB_PLAN_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tb_plan_cache tb_plan_cache;

/* The directory --plan-cache gives: "off" -> NULL (no cache), NULL or ""
 * -> $TB_PLAN_CACHE, else $XDG_CACHE_HOME/trainbench/plans, else
 * $HOME/.cache/trainbench/plans; out gets the path. */
const char *tb_pc_dir(const char *flag, char *out, size_t len);

/* Opens dir's file for key (creating dir) and reads it; NULL (with one
 * line in msg, which is also set on success when something was said: a
 * corrupt file) when the directory cannot be made or written. A read-only
 * directory holding the file (a cache a site ships in a container image)
 * is used as it is: one line, no locks, nothing written. */
tb_plan_cache *tb_pc_open(const char *dir, const char *key, char *msg, size_t len);
/* A planning session begins: takes the lock of session (a short name for
 * what is planned: a model's graph; waiting, with a line on stdout from
 * whichever rank waits, while another process plans the same) and reads
 * what was written since open. A session committed under its lock leaves
 * the entry "session <name>" in the file: a process that finds it (at
 * open, or once the lock is its) loads without holding the lock, so the
 * ranks of a node rebuild their plans side by side, not one after the
 * other. A process that waited and then finds no mark (the holder's write
 * failed, or it ended) lets the lock go at once, with one line, so the
 * ones still waiting plan side by side too. msg: a line to say (every
 * rank), or "". */
void tb_pc_lock(tb_plan_cache *c, const char *session, char *msg, size_t len);
/* 1 while this process holds a session's lock (it plans for the others). */
int tb_pc_session_locked(const tb_plan_cache *c);
/* The value of entry `entry`, or NULL. */
const char *tb_pc_get(tb_plan_cache *c, const char *entry);
/* Sets (or replaces) an entry; neither string may hold a newline or a tab
 * in entry. Written at the next commit. Putting back the value an entry
 * already holds changes nothing (not counted by tb_pc_puts, and the entry
 * still follows the file in a merge). */
void tb_pc_put(tb_plan_cache *c, const char *entry, const char *value);
/* Forgets an entry that did not rebuild (written at the next commit), and
 * the open session's mark with it: the next launch re-plans under the lock,
 * one process for the node. */
void tb_pc_drop(tb_plan_cache *c, const char *entry);
/* Writes the file if anything changed (outside a session: merging what
 * other processes wrote, under a brief lock) and releases the lock; 0, or
 * -1 with msg set. */
int tb_pc_commit(tb_plan_cache *c, char *msg, size_t len);
/* Commits and drops this reference; the last one frees the cache. */
void tb_pc_close(tb_plan_cache *c);

/* The file this cache reads and writes. */
const char *tb_pc_path(const tb_plan_cache *c);
/* Entries, and what this process found / missed / put since it opened;
 * 0 from tb_pc_writes when a lock was given up on or the directory is
 * read-only (nothing is written). */
int tb_pc_count(const tb_plan_cache *c);
int tb_pc_hits(const tb_plan_cache *c);
int tb_pc_misses(const tb_plan_cache *c);
int tb_pc_puts(const tb_plan_cache *c);
int tb_pc_writes(const tb_plan_cache *c);

/* Pure helpers (tests): the FNV-1a 64 hash, and the file name of a key. */
uint64_t tb_pc_fnv1a(const void *data, size_t n, uint64_t h);
void tb_pc_file_name(const char *key, char *out, size_t len);

/* Lowercase hex of n bytes into out (2n + 1 chars), and back (-1 for text
 * that is not whole bytes of hex): serialized plans as entry values. */
void tb_pc_hex(const unsigned char *in, size_t n, char *out);
long tb_pc_unhex(const char *in, unsigned char *out, size_t cap);

#endif
