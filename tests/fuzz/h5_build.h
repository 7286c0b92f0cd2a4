/* h5_build.h - structure-aware input for the HDF5 reader targets: the fuzz
 * bytes are a small program that builds a *valid* HDF5 file through the
 * HDF5 API (attributes of any type and shape, datasets of any shape, type,
 * layout and filter, groups, soft / hard / external links), which is then
 * handed to trainbench's reader.
 *
 * Raw-byte fuzzing of an HDF5 file mostly exercises libhdf5's own parser
 * (which crashes on some malformed files: tests/fuzz/crashes/); this mode
 * explores what matters for trainbench's code instead: every well-formed
 * file another tool could write, i.e. everything HDF5 can return to the
 * reader. Names, shapes and strings come from a vocabulary (the model's
 * tensor names and shapes, the attribute names the reader looks for), so
 * the fuzzer reaches the deep checks in a few bytes.
 *
 * Program: byte 0 picks the file format (earliest / latest), then ops until
 * the bytes run out; each op's operands are the next bytes (0 when past the
 * end). An op HDF5 refuses (a name that exists) is skipped. See h5_build.c
 * for the op list. */
#ifndef TB_FUZZ_H5_BUILD_H
#define TB_FUZZ_H5_BUILD_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char name[64];      /* dataset name inside its group */
    int ndim;           /* expected rank (0: scalar) */
    int64_t shape[4];   /* expected shape */
    int integer;        /* expected type is an integer (else float) */
    unsigned groups;    /* bit g: belongs in groups[g] when an op fills a group */
} fz_h5_tensor;

typedef struct {
    const char *const *attrs;   /* root attribute names the reader looks for */
    int n_attrs;
    const char *const *strings; /* string values worth offering ("resnet18") */
    int n_strings;
    const char *const *groups;  /* group names; "" is the root */
    int n_groups;
    const fz_h5_tensor *tensors;
    int n_tensors;
} fz_h5_vocab;

/* Writes the file the program describes to path (replacing it). Returns 0,
 * or -1 when HDF5 could not even create the file. Never calls tb_die. */
int fz_h5_build(const char *path, const uint8_t *prog, size_t len, const fz_h5_vocab *v);

#endif
