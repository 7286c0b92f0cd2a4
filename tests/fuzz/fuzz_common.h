/* fuzz_common.h - what trainbench's libFuzzer targets share (tests/fuzz/).
 *
 * trainbench ends on bad input through tb_die / TB_FATAL -> tb_abort -> the
 * abort hook -> exit(). Inside a fuzz target an exit is a crash, so
 * fz_call() runs a reader with an abort hook that longjmps back to it: the
 * input was rejected, which is the right answer to a bad file. Where no
 * rejection is allowed (the JPEG path reports bad files by return value),
 * fz_init(0) makes any tb_die / TB_FATAL an abort(), a crash with a stack.
 *
 * The same target sources build two ways: linked with libFuzzer
 * (-fsanitize=fuzzer, clang, TB_FUZZ=ON), or with replay_main.c into a
 * program that runs each file of a corpus once (any compiler; the normal and
 * sanitizer suites run it on the committed corpus). */
#ifndef TB_FUZZ_COMMON_H
#define TB_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry points, defined by each target. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the last input did: 1 accepted (every reader returned), 0 rejected.
 * Set by the targets; replay_main.c checks it against seed names
 * ("ok-*" must be accepted, "bad-*" rejected). */
extern int fz_outcome;

/* Installs the abort hook. reject_on_abort: 1 = tb_die/TB_FATAL inside
 * fz_call is a rejection, 0 = it is a bug (abort()). trainbench's own error
 * lines go to /dev/null unless TB_FUZZ_VERBOSE is set (sanitizer and
 * libFuzzer reports are written to the real stderr either way). */
void fz_init(int reject_on_abort);

/* Runs fn(ctx); 0 when it returned, 1 when it ended through the abort hook
 * (with reject_on_abort). */
int fz_call(void (*fn)(void *ctx), void *ctx);

/* Writes the input to a per-process file on a tmpfs (/dev/shm when
 * writable, else $TMPDIR or /tmp) under a fresh inode, and returns its
 * path. The file is removed at exit. */
const char *fz_write_temp(const char *tag, const uint8_t *data, size_t size);
/* The same path, with no file there yet (for a target that writes it). */
const char *fz_temp_path(const char *tag);

/* After an HDF5 reader: when it was rejected, closes what it left open
 * (H5close: every id, the library re-opens on the next call); when it
 * returned, aborts if it left a file, group, dataset, attribute or named
 * type open (a handle leak in trainbench's own reader). */
void fz_h5_after(int rejected, const char *what);

#endif
