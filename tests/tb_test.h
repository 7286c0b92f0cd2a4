/* tb_test.h - minimal test bookkeeping for trainbench's C tests: every check
 * prints one line and counts failures; main returns tb_test_exit(). */
#ifndef TB_TEST_H
#define TB_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A test split over several files defines TB_TEST_SHARED_COUNTS before
 * including this (in its private header) and defines the two counters in
 * the file with main; a one-file test keeps them static here. */
#ifdef TB_TEST_SHARED_COUNTS
extern int tb_test_failures;
extern int tb_test_checks;
#else
static int tb_test_failures = 0;
static int tb_test_checks = 0;
#endif

#define TB_CHECK(cond, ...)                                                   \
    do {                                                                      \
        tb_test_checks++;                                                     \
        if (!(cond)) {                                                        \
            tb_test_failures++;                                               \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                       \
            printf(__VA_ARGS__);                                              \
            printf("\n");                                                     \
        }                                                                     \
    } while (0)

/* |got - want| <= atol + rtol * |want| */
#define TB_CHECK_CLOSE(got, want, atol, rtol, what)                           \
    TB_CHECK(fabs((double)(got) - (double)(want)) <=                          \
                 (atol) + (rtol) * fabs((double)(want)),                      \
             "%s: got %.9g, want %.9g (atol %g, rtol %g)", what, (double)(got), \
             (double)(want), (double)(atol), (double)(rtol))

/* The first 64 KiB of a text file (a captured stderr, say) as a string the
 * caller frees; "" when the file is missing. */
static inline char *tb_test_read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return strdup("");
    char *s = calloc(1 << 16, 1);
    if (!s) abort();
    size_t n = fread(s, 1, (1 << 16) - 1, f);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* Writes text to path; a file that cannot be written ends the test. */
static inline void tb_test_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) {
        printf("FAIL cannot write %s\n", path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

/* A scratch path: NAME under $TMPDIR, or under /tmp without it. ctest runs
 * every test with TMPDIR set to the build's test-scratch folder, and its
 * last test (tests/scratch_left.sh) fails on anything a test left there.
 * NAME may end in XXXXXX for mkdtemp or mkstemp. A path that does not fit
 * ends the test. */
static inline void tb_test_tmp(char *buf, size_t len, const char *name) {
    const char *t = getenv("TMPDIR");
    if (!t || !*t) t = "/tmp";
    int n = snprintf(buf, len, "%s/%s", t, name);
    if (n < 0 || (size_t)n >= len) {
        printf("FAIL the scratch path %s/%s is longer than %zu bytes (set TMPDIR shorter)\n", t, name, len - 1);
        exit(1);
    }
}

static inline int tb_test_exit(const char *name) {
    printf("# %s: %d checks, %d failed\n", name, tb_test_checks, tb_test_failures);
    return tb_test_failures ? 1 : 0;
}

#endif
