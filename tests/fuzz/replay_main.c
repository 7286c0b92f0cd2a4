/* replay_main.c - runs a fuzz target once on each file of a corpus, without
 * libFuzzer, so that any compiler (gcc included) and any build (Release,
 * address/undefined sanitizers) check the committed corpus.
 *
 * Usage: fuzz_<target>_replay FILE|DIR...
 * Directories are read in name order (dot files skipped). A seed whose name
 * starts with "ok-" must be accepted and one starting with "bad-" rejected
 * (fz_outcome); other names (inputs libFuzzer found) only must not crash.
 * Exits 1 on an unmet expectation or when no input was run; a crash ends
 * the process as it would under libFuzzer. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz_common.h"

static int g_runs, g_failures;

static void run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("FAIL cannot open %s\n", path);
        g_failures++;
        return;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc(n > 0 ? (size_t)n : 1);
    if (!data || (n > 0 && fread(data, 1, (size_t)n, f) != (size_t)n)) {
        printf("FAIL cannot read %s\n", path);
        g_failures++;
        fclose(f);
        free(data);
        return;
    }
    fclose(f);
    fflush(stdout);
    fz_outcome = -1;
    LLVMFuzzerTestOneInput(data, (size_t)n);
    free(data);
    g_runs++;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    int want = strncmp(base, "ok-", 3) == 0 ? 1 : strncmp(base, "bad-", 4) == 0 ? 0 : -1;
    const char *got = fz_outcome == 1 ? "accepted" : fz_outcome == 0 ? "rejected" : "no outcome";
    if (fz_outcome < 0 || (want >= 0 && fz_outcome != want)) {
        printf("FAIL %s: %s, expected %s\n", path, got, want == 1 ? "accepted" : "rejected");
        g_failures++;
    } else {
        printf("ok   %s: %s\n", path, got);
    }
    fflush(stdout);
}

static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

static void run_path(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        printf("FAIL no such file or directory: %s\n", path);
        g_failures++;
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        run_file(path);
        return;
    }
    struct dirent **list = NULL;
    int n = scandir(path, &list, NULL, by_name);
    for (int i = 0; i < n; i++) {
        if (list[i]->d_name[0] != '.') {
            char full[4096];
            snprintf(full, sizeof full, "%s/%s", path, list[i]->d_name);
            run_path(full);
        }
        free(list[i]);
    }
    free(list);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    /* the readers' one-line reasons are the useful part of a replay log */
    setenv("TB_FUZZ_VERBOSE", "1", 0);
    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) run_path(argv[i]);
    printf("# %s: %d inputs, %d failed\n", argv[0], g_runs, g_failures);
    return g_failures || g_runs == 0 ? 1 : 0;
}
