/* output_guard.h - what an output path may replace, asked before any work:
 * a path trainbench can write (its directory there and writable, not a
 * directory itself), that holds nothing the write must not replace, and
 * that is not one of the command's own inputs. */
#ifndef TB_OUTPUT_GUARD_H
#define TB_OUTPUT_GUARD_H

#include <stddef.h>

/* What an output is: the file trainbench will write there. */
typedef enum {
    TB_OUT_RESULTS,    /* a results file (--results, project's --out): replaces another run's results file */
    TB_OUT_CHECKPOINT, /* a checkpoint (--save, step's --out): replaces an earlier checkpoint */
    TB_OUT_TEXT        /* a Chrome-trace JSON file (--trace, loader-bench --timeline): replaces an earlier one */
} tb_output_kind;

/* Whether an output of `kind` can later be written at `path` (by the
 * atomic writer or plainly), asked at start-up so that a run does not fail,
 * or destroy a file, after hours of work: 0 when it can; otherwise -1 with
 * one line in why naming `what` ("results file") and `flag` ("--results")
 * and what to do. Refused: an existing directory; a directory missing or
 * read-only (a probe file is created there and removed); an existing file
 * that is not a regular file (a device such as /dev/null, a FIFO, a
 * socket: the write's rename would put a file in its place); a trainbench
 * file of another kind (a checkpoint where a results file or trace goes, a
 * results file where a checkpoint goes, a batch file, a trace where an HDF5
 * file goes); any other non-empty file (another HDF5 file, text, a JPEG).
 * What an output replaces: its own kind (another run's results file, an
 * earlier checkpoint, an earlier trace) and empty files. Touches no
 * existing file. */
int tb_output_path_check(const char *path, tb_output_kind kind, const char *what, const char *flag, char *why,
                         size_t len);
/* One '#' line (tb_info) for each temporary of an earlier write to path
 * that never finished (PATH.tmp.PID whose process no longer runs on this
 * host: killed while writing, or it ran on another host), with its size,
 * so its space is not lost unseen. Called by tb_output_path_check when the
 * path passes; removes nothing (a writer elsewhere may still run). */
void tb_output_leftovers(const char *path, const char *flag);

/* The same for a one-process command, before its work rather than at the
 * rename after it: dies with "cmd: <why>" when path cannot be written;
 * an empty path (no such output asked for) passes. */
void tb_output_path_require(const char *cmd, const char *path, tb_output_kind kind, const char *what,
                            const char *flag);

/* Dies with "cmd: <flag> '<out>' is the <in flag> input '<in>', and writing
 * it would destroy the input; ..." when output `out` lands on one of the n
 * inputs (in_paths[i] given by in_flags[i]; empty paths and NULL skipped).
 * An empty out passes. */
void tb_output_not_input(const char *cmd, const char *flag, const char *out, const char *const *in_flags,
                         const char *const *in_paths, int n);

/* Dies with "cmd: <flag_a> '<a>' and <flag_b> '<b>' are the same file ..."
 * when two outputs land on one file (one would overwrite the other); an
 * empty path passes. */
void tb_output_not_same(const char *cmd, const char *flag_a, const char *a, const char *flag_b, const char *b);

/* Where `path` lands, to compare an output with another output or an input:
 * the real path of the file when it exists (symbolic links followed), else
 * the real path of its directory and its base name, so ./a.h5 and a.h5 are
 * one file; the path as given when its directory does not exist. */
void tb_output_landing(const char *path, char *out, size_t len);

#endif
