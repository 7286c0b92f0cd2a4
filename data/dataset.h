/* dataset.h - the sample index: which files make up the data set and their
 * labels. Two layouts, chosen by what `path` is:
 *
 *   directory  ImageFolder layout ROOT/<class>/.../<file>, exactly as
 *              torchvision.datasets.ImageFolder builds it: classes are the
 *              sub-directories of ROOT (symlinks followed) sorted by name
 *              (byte order, like Python's sorted()), labels 0..C-1 in that
 *              order; samples are the files under each class directory,
 *              nested directories included, in the order of
 *              sorted(os.walk(class_dir)) then sorted(file names), except
 *              that a symbolic link back to a directory above it (a loop)
 *              is skipped, with a reason, not followed. Only names
 *              ending in .jpg or .jpeg (any case) are samples; other entries
 *              are counted as skipped, with a reason.
 *   file       a list file: one `PATH LABEL` per line (LABEL an integer in
 *              [0, TB_DATASET_MAX_CLASSES), the last field; PATH relative to the list file's
 *              directory unless absolute); blank lines and lines starting
 *              with '#' are ignored; classes = largest label + 1.
 *
 * Indexing a directory uses readdir's d_type (stat only for symlinks and
 * DT_UNKNOWN), never stats a sample, and scans class directories on several
 * threads. */
#ifndef TB_DATASET_H
#define TB_DATASET_H

#include <stdint.h>
#include <stdio.h>
#include <stddef.h>

/* The most classes a list file may name (labels 0 .. TB_DATASET_MAX_CLASSES - 1),
 * as many as train's --classes takes: a label past it is a typo, not a class. */
#define TB_DATASET_MAX_CLASSES (1 << 20)

typedef struct {
    char *root;              /* the directory, or the list file's directory */
    int is_list;             /* 1: built from a list file */
    char *list_path;         /* the list file as given (is_list), else NULL */
    int64_t n;               /* samples */
    int classes;
    char **class_names;      /* [classes] directory names (list file: "0", "1", ...) */
    int64_t *class_count;    /* [classes] samples per class */
    int32_t *labels;         /* [n] */
    int64_t *path_off;       /* [n] offset of sample i's path in `paths` */
    char *paths;             /* NUL-terminated; relative to root unless absolute */
    /* entries that are not samples, by reason */
    int64_t skipped_ext;     /* a file whose name does not end in .jpg/.jpeg */
    int64_t skipped_loose;   /* a file directly in ROOT, outside any class */
    int64_t skipped_other;   /* not a file or directory, unreadable directory, too deep */
    int64_t unreadable;      /* of them, directories that could not be opened or read (images left out) */
    char first_unreadable[512]; /* the first of those, "path: reason" */
    char first_skipped[3][512];
    double index_s;          /* wall time the indexing took */
} tb_dataset;

/* Indexes `path` (directory or list file) with an automatic thread count.
 * 0 on success; -1 and a one-line message in err otherwise (missing path,
 * no class, a malformed list line with its number, no sample at all). */
int tb_dataset_open(const char *path, tb_dataset *ds, char *err, size_t errlen);
/* The same with `threads` directory scanners (0: automatic). */
int tb_dataset_open_threads(const char *path, int threads, tb_dataset *ds, char *err, size_t errlen);
void tb_dataset_close(tb_dataset *ds);

/* Sample i's path as stored (relative to root unless absolute). */
static inline const char *tb_dataset_relpath(const tb_dataset *ds, int64_t i) {
    return ds->paths + ds->path_off[i];
}
/* Sample i's full path in buf; returns buf. */
const char *tb_dataset_path(const tb_dataset *ds, int64_t i, char *buf, size_t len);
/* A fingerprint of the index: FNV-1a (64 bit) over the class count, then
 * every sample in order, its path as stored (relative to root unless
 * absolute) and its label. Equal on two hosts exactly when they index the
 * same relative paths with the same labels in the same order, wherever the
 * root is; ranks compare it before training. */
uint64_t tb_dataset_hash(const tb_dataset *ds);
/* A fingerprint of the contents, cheaply: FNV-1a over the sizes of k
 * samples spread evenly over the index (-1 for one that cannot be
 * stat'ed). Two copies of a tree with the same names but other images (made
 * by another mkdata --seed, two class folders swapped) differ here. */
uint64_t tb_dataset_sizes_hash(const tb_dataset *ds, int k);
/* Total skipped entries. */
int64_t tb_dataset_skipped(const tb_dataset *ds);
/* --strict-data's rule on folders: 0 when every folder of ds (indexed from
 * `path`) could be read; else 1 with the line in why (how many could not,
 * the first, and what to do): their images were left out. */
int tb_dataset_unreadable(const tb_dataset *ds, const char *path, char *why, size_t len);
/* A few '#' lines: samples, classes, per-class counts (all of them when
 * there are at most `max_classes_listed`, else min/median/max), skipped
 * entries by reason with the first few named, index time. */
void tb_dataset_describe(const tb_dataset *ds, FILE *f, int max_classes_listed);

#endif
