/* test_h5_lock.c - HDF5 from several threads (src/results/h5io.h's lock,
 * src/results/run_report.h), as a training run's rank 0 does it: the main thread
 * writes checkpoints while the watchdog (another thread) writes the results
 * file and the snapshot thread keeps a "running" copy on disk. The test
 * prints whether the linked libhdf5 is itself thread-safe: Debian 12's is,
 * so part 1 passes there even without trainbench's lock (it is the check
 * for HDF5 builds without thread safety, where unserialised calls crash or
 * corrupt files); parts 2 and 3 fail without the lock on any build.
 *
 *   1. hammer: for ~3 s three threads at once write and read back
 *      checkpoint-like files (create_atomic .. commit, open_read ..
 *      close_read), results files (tb_results_write / tb_results_load) and a
 *      run report taking rows under its snapshots; every file read back is
 *      whole and holds what its writer put there, and each thread made
 *      progress while the others ran;
 *   2. the watchdog's bounded wait: while another thread holds the HDF5 lock
 *      (a long checkpoint write), tb_run_report_write(aborted, wait 0.5 s)
 *      returns within 0.5-2.5 s without writing and says why in one line;
 *      the snapshot on disk still says "running"; once the lock is free it
 *      writes "aborted" with the reason, a second watchdog write replaces the
 *      reason, and a later "complete" write does not overwrite either;
 *   3. exit waits for HDF5: a child process exits while another thread is
 *      inside a 1 s HDF5 write; the write completes whole before the library
 *      is closed, and the child exits 0;
 *   4. before the run has begun (its settings recorded), no writer (final,
 *      watchdog, error mark) touches the file at the path.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/timer.h"
#include "src/results/h5io.h"
#include "src/results/results.h"
#include "src/results/results_read.h"
#include "src/results/run_report.h"
#include "tests/tb_test.h"

static char g_dir[256];
static atomic_int g_stop;
static const double k_hammer_s = 3.0;

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", g_dir, name); }

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ---- 1. hammer ------------------------------------------------------------------------ */

enum { NDS = 40, NVAL = 2048 };

typedef struct {
    int iters, bad;
} counts;

/* The main thread's part: checkpoint-like files, written then read back. */
static void *ckpt_thread(void *arg) {
    counts *c = arg;
    char path[300];
    path_of(path, sizeof path, "ckpt.h5");
    float *v = malloc(NVAL * sizeof *v), *back = malloc(NVAL * sizeof *back);
    int64_t dims[1] = {NVAL};
    while (!atomic_load(&g_stop)) {
        int it = c->iters;
        tb_h5_writer w;
        tb_h5_create_atomic(&w, path, "checkpoint");
        tb_h5_attr_write_i64(w.file, "step", it);
        hid_t g = H5_CHECK(H5Gcreate2(w.file, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        for (int d = 0; d < NDS; d++) {
            char name[32];
            snprintf(name, sizeof name, "t%d", d);
            for (int i = 0; i < NVAL; i++) v[i] = (float)(it * 1000 + d) + (float)i * 1e-3f;
            tb_h5_write_f32(g, name, 1, dims, v);
        }
        H5_CHECK(H5Gclose(g));
        tb_h5_commit_atomic(&w);

        hid_t f = tb_h5_open_read(path, "checkpoint", "test");
        int64_t step = -1;
        tb_h5_attr_read_i64(f, "step", &step);
        int ok = step == it;
        for (int d = 0; ok && d < NDS; d += 7) {
            char name[48];
            snprintf(name, sizeof name, "/params/t%d", d);
            tb_h5_read_f32(f, name, back);
            for (int i = 0; i < NVAL; i++) ok &= back[i] == (float)(it * 1000 + d) + (float)i * 1e-3f;
        }
        tb_h5_close_read(f);
        c->bad += !ok;
        c->iters++;
    }
    free(v);
    free(back);
    return NULL;
}

/* The watchdog's part: whole results files, written then read back. */
static void *results_thread(void *arg) {
    counts *c = arg;
    char path[300], err[512];
    path_of(path, sizeof path, "results.h5");
    while (!atomic_load(&g_stop)) {
        int it = c->iters;
        tb_attrs a;
        memset(&a, 0, sizeof a);
        tb_attrs_str(&a, "status", "aborted");
        tb_attrs_int(&a, "iteration", it);
        tb_table t;
        tb_table_init(&t, "steps", "step:i,loss");
        for (int r = 0; r < 50 + it % 50; r++) {
            double row[2] = {r, 0.5 * r};
            tb_table_row(&t, row, NULL);
        }
        const tb_table *tabs[1] = {&t};
        tb_results_write(path, &a, tabs, 1);
        tb_results rr;
        int ok = tb_results_load(path, &rr, err, sizeof err) == 0;
        if (ok) {
            const tb_rtable *st = tb_results_table(&rr, "steps");
            ok = tb_results_num(&rr, "iteration", -1) == it && st && st->rows == t.rows &&
                 tb_rtable_num(st, "loss", t.rows - 1) == 0.5 * (double)(t.rows - 1);
            tb_results_free(&rr);
        }
        tb_table_free(&t);
        tb_attrs_free(&a);
        c->bad += !ok;
        c->iters++;
    }
    return NULL;
}

/* The training loop's part: rows into a run report whose snapshot thread
 * writes "running" copies meanwhile. */
static void *report_thread(void *arg) {
    counts *c = arg;
    char path[300];
    path_of(path, sizeof path, "run.h5");
    tb_run_report r;
    tb_run_report_init(&r, path);
    tb_run_report_lock(&r);
    TB_CHECK(tb_run_report_begin(&r), "the run begins (as train's record_settings, under the lock)");
    tb_attrs_str(&r.attrs, "status", "running");
    tb_run_report_unlock(&r);
    while (!atomic_load(&g_stop)) {
        double row[14] = {(double)c->iters};
        tb_run_report_lock(&r);
        tb_table_row(&r.steps, row, NULL);
        tb_run_report_unlock(&r);
        c->iters++;
        sleep_s(0.001);
    }
    tb_run_report_write(&r, "complete", NULL, 0);
    tb_run_report_free(&r); /* joins the snapshot thread */
    c->bad += r.snapshots < 1; /* at least the first snapshot went out under the hammering */
    char err[512];
    tb_results rr;
    int ok = tb_results_load(path, &rr, err, sizeof err) == 0;
    if (ok) {
        const tb_rtable *st = tb_results_table(&rr, "steps");
        ok = strcmp(tb_results_str(&rr, "status", ""), "complete") == 0 && st && (int)st->rows == c->iters;
        tb_results_free(&rr);
    }
    c->bad += !ok;
    return NULL;
}

static void test_hammer(void) {
    counts ck = {0, 0}, rs = {0, 0}, rp = {0, 0};
    pthread_t t[3];
    atomic_store(&g_stop, 0);
    pthread_create(&t[0], NULL, ckpt_thread, &ck);
    pthread_create(&t[1], NULL, results_thread, &rs);
    pthread_create(&t[2], NULL, report_thread, &rp);
    sleep_s(k_hammer_s);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    printf("# hammer %.0f s: %d checkpoint writes+reads, %d results writes+reads, %d report rows\n",
           k_hammer_s, ck.iters, rs.iters, rp.iters);
    TB_CHECK(ck.iters >= 3 && rs.iters >= 3 && rp.iters >= 3,
             "every thread made progress while the others ran (%d, %d, %d)", ck.iters, rs.iters, rp.iters);
    TB_CHECK(ck.bad == 0, "%d of %d checkpoints read back wrong", ck.bad, ck.iters);
    TB_CHECK(rs.bad == 0, "%d of %d results files read back wrong", rs.bad, rs.iters);
    TB_CHECK(rp.bad == 0, "the run report's final file is not 'complete' with every row, or no snapshot");
}

/* ---- 2. the watchdog's bounded wait --------------------------------------------------- */

typedef struct {
    tb_run_report *r;
    const char *reason;
    double took;
} abort_call;

static void *watchdog_write(void *arg) {
    abort_call *a = arg;
    double t0 = tb_now();
    tb_run_report_write(a->r, "aborted", a->reason, 0.5);
    a->took = tb_now() - t0;
    return NULL;
}

static void status_of(const char *path, char *status, size_t slen, char *why, size_t wlen, size_t *rows) {
    char err[512];
    tb_results rr;
    status[0] = why[0] = '\0';
    *rows = 0;
    if (tb_results_load(path, &rr, err, sizeof err) != 0) {
        snprintf(status, slen, "unreadable: %s", err);
        return;
    }
    snprintf(status, slen, "%s", tb_results_str(&rr, "status", "?"));
    snprintf(why, wlen, "%s", tb_results_str(&rr, "abort_reason", ""));
    const tb_rtable *st = tb_results_table(&rr, "steps");
    *rows = st ? st->rows : 0;
    tb_results_free(&rr);
}

static void test_watchdog_wait(void) {
    char path[300], errpath[300], status[600], why[600];
    size_t rows = 0;
    path_of(path, sizeof path, "watchdog.h5");
    path_of(errpath, sizeof errpath, "watchdog.stderr");
    tb_run_report r;
    tb_run_report_init(&r, path);
    tb_run_report_lock(&r);
    TB_CHECK(tb_run_report_begin(&r), "the run begins (as train's record_settings, under the lock)");
    tb_attrs_str(&r.attrs, "status", "running");
    for (int s = 0; s < 7; s++) {
        double row[14] = {s};
        tb_table_row(&r.steps, row, NULL);
    }
    tb_run_report_unlock(&r);
    double t0 = tb_now();
    while (access(path, F_OK) != 0 && tb_now() - t0 < 5) sleep_s(0.01);
    sleep_s(0.1);
    status_of(path, status, sizeof status, why, sizeof why, &rows);
    printf("# snapshot after %.2f s: status %s, %zu steps\n", tb_now() - t0, status, rows);
    TB_CHECK(strcmp(status, "aborted") == 0 && strstr(why, "snapshot of ") && rows == 7,
             "the snapshot says aborted (never 'running' on disk), as a snapshot, with 7 steps (%s: %s, %zu)",
             status, why, rows);

    /* the main thread is inside a long checkpoint write */
    tb_h5_lock("checkpoint write");
    fflush(stderr);
    int saved = dup(2);
    FILE *cap = fopen(errpath, "w");
    dup2(fileno(cap), 2);
    abort_call a = {&r, "rank 1 (test) stopped answering", 0};
    pthread_t t;
    pthread_create(&t, NULL, watchdog_write, &a);
    pthread_join(t, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(cap);
    char *said = tb_test_read_text(errpath);
    printf("# watchdog write while HDF5 was held: returned after %.2f s, said: %s", a.took, said);
    TB_CHECK(a.took >= 0.45 && a.took < 2.5, "it waits about 0.5 s, then gives up (%.2f s)", a.took);
    TB_CHECK(strstr(said, "results file not marked aborted") && strstr(said, "(checkpoint write)") &&
                 strstr(said, "last snapshot (status 'aborted', a snapshot's reason, 7 steps)"),
             "one line names what held HDF5 and what the file keeps: '%s'", said);
    free(said);
    status_of(path, status, sizeof status, why, sizeof why, &rows);
    TB_CHECK(strcmp(status, "aborted") == 0 && strstr(why, "snapshot of "), "the file on disk is still the snapshot "
             "(%s: %s)", status, why);
    tb_h5_unlock();

    /* free again: the watchdog marks it, may replace its reason once more,
     * and nothing overwrites it afterwards */
    tb_run_report_write_provisional(&r, "the launcher is ending the job (provisional)", 0.5);
    status_of(path, status, sizeof status, why, sizeof why, &rows);
    TB_CHECK(strcmp(status, "aborted") == 0 && strstr(why, "provisional") && rows == 7,
             "with HDF5 free the watchdog writes aborted (%s: %s, %zu steps)", status, why, rows);
    tb_run_report_write(&r, "aborted", "rank 1 (test) is gone", 0.5);
    status_of(path, status, sizeof status, why, sizeof why, &rows);
    TB_CHECK(strcmp(status, "aborted") == 0 && strcmp(why, "rank 1 (test) is gone") == 0,
             "its final reason replaces the provisional one (%s: %s)", status, why);
    /* the provisional mark runs on a thread of its own and may come last */
    tb_run_report_write_provisional(&r, "the launcher is ending the job (a late provisional)", 0.5);
    status_of(path, status, sizeof status, why, sizeof why, &rows);
    TB_CHECK(strcmp(why, "rank 1 (test) is gone") == 0,
             "a provisional mark arriving after the final reason leaves it (%s: %s)", status, why);
    tb_run_report_write(&r, "complete", NULL, 0);
    status_of(path, status, sizeof status, why, sizeof why, &rows);
    TB_CHECK(strcmp(status, "aborted") == 0, "a later 'complete' write does not overwrite it (%s)", status);
    printf("# final: %s (%s)\n", status, why);
    tb_run_report_free(&r);
}

/* ---- 3. exit waits for HDF5 ------------------------------------------------------------ */

static void *slow_writer(void *arg) {
    const char *path = arg;
    tb_h5_lock("slow results write");
    atomic_store(&g_stop, 2); /* inside */
    sleep_s(1.0);
    tb_attrs a;
    memset(&a, 0, sizeof a);
    tb_attrs_str(&a, "status", "complete");
    tb_table t;
    tb_table_init(&t, "steps", "step:i");
    double row[1] = {1};
    tb_table_row(&t, row, NULL);
    const tb_table *tabs[1] = {&t};
    tb_results_write(path, &a, tabs, 1);
    tb_table_free(&t); /* before the unlock: exit (and a leak check) follows it at once */
    tb_attrs_free(&a);
    tb_h5_unlock();
    return NULL;
}

static void test_exit_waits(void) {
    char path[300], status[600], why[600];
    size_t rows = 0;
    path_of(path, sizeof path, "at_exit.h5");
    double t0 = tb_now();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        atomic_store(&g_stop, 0);
        pthread_t t;
        pthread_create(&t, NULL, slow_writer, path);
        while (atomic_load(&g_stop) != 2) sleep_s(0.001);
        exit(0); /* with the writer inside HDF5 */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    double took = tb_now() - t0;
    status_of(path, status, sizeof status, why, sizeof why, &rows);
    printf("# exit with a thread inside HDF5: exit status %d after %.2f s; its file: %s, %zu rows\n",
           WIFEXITED(st) ? WEXITSTATUS(st) : -1, took, status, rows);
    TB_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child exits 0 (status 0x%x)", st);
    TB_CHECK(took >= 0.9, "exit waited for the writer (%.2f s)", took);
    TB_CHECK(strcmp(status, "complete") == 0 && rows == 1, "the writer's file is whole (%s, %zu rows)", status,
             rows);
}

/* Before the run has begun (its settings recorded) no writer writes: an
 * earlier run's file at the path stays; a run closed in start-up (a signal's
 * line said so) never begins. */
static void test_unbegun(void) {
    char path[300];
    path_of(path, sizeof path, "unbegun.h5");
    FILE *f = fopen(path, "w");
    TB_CHECK(f && fputs("an earlier run's file\n", f) >= 0 && fclose(f) == 0, "wrote %s", path);
    tb_run_report r;
    tb_run_report_init(&r, path);
    tb_run_report_write_provisional(&r, "the watchdog's first reason", 0.5);
    tb_run_report_write(&r, "aborted", "the watchdog's reason", 0.5);
    tb_run_report_write_on_abort(&r, "an error in start-up");
    char buf[64] = "";
    f = fopen(path, "r");
    TB_CHECK(f && fgets(buf, sizeof buf, f) && strcmp(buf, "an earlier run's file\n") == 0,
             "no write before the run begins: the earlier file stays ('%s')", buf);
    if (f) fclose(f);
    TB_CHECK(tb_run_report_close_unbegun(&r) == 1 && tb_run_report_begin(&r) == 0,
             "closed in start-up, the run never begins");
    tb_run_report_free(&r);
    printf("# before the run began: no writer touched the file\n");
}

/* ---- 5. a failed write is remembered for the abort cleanups ---------------------------- */

/* A results write past the file-size limit ends the process naming the file;
 * tb_h5_write_failed then says so for that path only, so the abort mark does
 * not try the same write again (it waited 3 s for a main thread stuck on the
 * dying writer's HDF5 lock, then said a second line). In a child: the fatal
 * error is trapped there, and the limit stays there. */
static void test_write_failed(void) {
    char path[300], other[300];
    path_of(path, sizeof path, "too_big.h5");
    path_of(other, sizeof other, "other.h5");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit lim = {16384, RLIM_INFINITY};
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &lim);
        int before = tb_h5_write_failed(path);
        tb_attrs a;
        memset(&a, 0, sizeof a);
        tb_attrs_str(&a, "status", "complete");
        tb_table t;
        tb_table_init(&t, "steps", "step:i");
        for (int i = 0; i < 20000; i++) {
            double row[1] = {i};
            tb_table_row(&t, row, NULL);
        }
        const tb_table *tabs[1] = {&t};
        tb_fatal_trap trap;
        if (setjmp(trap.env) == 0) {
            tb_fatal_trap_set(&trap);
            tb_results_write(path, &a, tabs, 1);
            _exit(2); /* written whole under the limit: no failure to remember */
        }
        int ok = !before && tb_h5_write_failed(path) && !tb_h5_write_failed(other) &&
                 strstr(trap.msg, "File too large") != NULL;
        printf("# child: '%s'; failed(path) %d, failed(other) %d, before %d\n", trap.msg,
               tb_h5_write_failed(path), tb_h5_write_failed(other), before);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    TB_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
             "a results write past the file-size limit is remembered for its path alone (child status %d)", st);
    TB_CHECK(!tb_h5_write_failed(path), "and not in the parent, whose writes did not fail");
}

int main(void) {
    tb_test_tmp(g_dir, sizeof g_dir, "tb_h5_lock.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    tb_h5_quiet();
    hbool_t ts = 0;
    H5is_library_threadsafe(&ts);
    char v[32];
    tb_h5_library_version(v, sizeof v);
    printf("# libhdf5 %s, built %s its thread-safe option\n", v, ts ? "with" : "without");
    test_hammer();
    test_watchdog_wait();
    test_exit_waits();
    test_unbegun();
    test_write_failed();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) printf("# could not remove %s\n", g_dir);
    return tb_test_exit("h5_lock");
}
