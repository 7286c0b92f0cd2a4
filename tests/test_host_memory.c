/* test_host_memory.c - core/host_memory.c on made-up /proc and
 * /sys/fs/cgroup trees: MemAvailable alone; a cgroup v2 limit tighter than
 * it, found on a parent of the process's own cgroup, with its page cache
 * counted as room; cgroup v1's memory controller in a comma list, its
 * "unlimited"; unreadable or missing files; then the verdict and the batch
 * that fits. And core/host_cpus.c on such trees: a cpuset cgroup's CPUs
 * (v2, a parent's, hybrid, v1) and CPU lists. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/host_cpus.h"
#include "core/host_memory.h"
#include "tests/tb_test.h"

#define GIB (1024LL * 1024 * 1024)
#define FIRST "for its first step"

static char g_root[256];

static void put(const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s%s", g_root, rel);
    for (char *s = strchr(path + strlen(g_root) + 1, '/'); s; s = strchr(s + 1, '/')) { /* mkdir -p */
        *s = '\0';
        mkdir(path, 0755);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    TB_CHECK(f != NULL, "cannot write %s", path);
    if (f) fputs(text, f), fclose(f);
}

static void fresh_root(const char *name) {
    char leaf[128];
    snprintf(leaf, sizeof leaf, "tb_host_memory.%d.%s", (int)getpid(), name);
    tb_test_tmp(g_root, sizeof g_root, leaf);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    TB_CHECK(system(cmd) == 0, "%s", cmd);
    mkdir(g_root, 0755);
}

static void expect(long long bytes, const char *in_what) {
    tb_host_avail a;
    tb_host_memory_available(g_root, &a);
    TB_CHECK(a.bytes == bytes, "%s: %lld bytes available, want %lld (%s)", g_root, a.bytes, bytes, a.what);
    TB_CHECK(strstr(a.what, in_what) != NULL, "%s: '%s' lacks '%s'", g_root, a.what, in_what);
}

static const char *MEMINFO = "MemTotal:       24576000 kB\nMemFree:         1000000 kB\n"
                             "MemAvailable:   20971520 kB\nBuffers:           1000 kB\n";

static void test_host_cpus(void) {
    printf("# host_cpus: CPU lists and cpuset cgroups\n");
    TB_CHECK(tb_cpu_list_count("0-3,8\n") == 5 && tb_cpu_list_count("0") == 1 && tb_cpu_list_count("2,4-5") == 3,
             "lists");
    TB_CHECK(tb_cpu_list_count("") == -1 && tb_cpu_list_count("3-1") == -1 && tb_cpu_list_count("a") == -1 &&
                 tb_cpu_list_count("0-") == -1 && tb_cpu_list_count("1;2") == -1,
             "not lists");
    /* {tree, /proc/self/cgroup, the cpuset file, its list, the count} */
    static const char *const cases[][5] = {
        {"cpus_v2", "0::/docker/abc\n", "/sys/fs/cgroup/docker/abc/cpuset.cpus.effective", "0-7\n", "8"},
        {"cpus_v2_parent", "0::/docker/abc\n", "/sys/fs/cgroup/docker/cpuset.cpus.effective", "0-3,8-11\n", "8"},
        {"cpus_hybrid", "3:memory:/x\n0::/job\n", "/sys/fs/cgroup/unified/job/cpuset.cpus.effective", "4-5\n", "2"},
        {"cpus_v1", "4:memory:/m\n3:cpuset,cpu:/slurm/job1\n0::/\n",
         "/sys/fs/cgroup/cpuset/slurm/job1/cpuset.effective_cpus", "2,4-5\n", "3"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        fresh_root(cases[k][0]);
        put("/proc/self/cgroup", cases[k][1]);
        put(cases[k][2], cases[k][3]);
        TB_CHECK(tb_host_cgroup_cpus(g_root) == atoi(cases[k][4]), "%s: %d CPUs, want %s", cases[k][0],
                 tb_host_cgroup_cpus(g_root), cases[k][4]);
    }
    fresh_root("cpus_none");
    put("/proc/self/cgroup", "0::/\n");
    TB_CHECK(tb_host_cgroup_cpus(g_root) == -1, "no cpuset file: -1, got %d", tb_host_cgroup_cpus(g_root));
    put("/sys/fs/cgroup/cpuset.cpus.effective", "garbage\n");
    TB_CHECK(tb_host_cgroup_cpus(g_root) == -1, "a file that is no list: -1");
    TB_CHECK(tb_host_cpus() >= 1, "this machine: %d CPUs", tb_host_cpus());
}

int main(void) {
    /* MemAvailable alone (no cgroup file) */
    fresh_root("plain");
    put("/proc/meminfo", MEMINFO);
    expect(20 * GIB, "MemAvailable");

    /* v2: the job's cgroup has no limit, its parent 8 GiB with 7 GiB in use
     * of which 1.5 GiB reclaimable page cache (active + inactive file; the
     * "file" line, which counts tmpfs too, is not room): 2.5 GiB of room;
     * the root is unlimited */
    fresh_root("v2");
    put("/proc/meminfo", MEMINFO);
    put("/proc/self/cgroup", "0::/slurm/job_7/step_0\n");
    put("/sys/fs/cgroup/slurm/job_7/step_0/memory.max", "max\n");
    put("/sys/fs/cgroup/slurm/job_7/step_0/memory.current", "100\n");
    put("/sys/fs/cgroup/slurm/job_7/memory.max", "8589934592\n");
    put("/sys/fs/cgroup/slurm/job_7/memory.current", "7516192768\n");
    put("/sys/fs/cgroup/slurm/job_7/memory.stat", "anon 5905580032\nfile 9999999999\nfile_mapped 10\n"
                                                  "active_file 1073741824\ninactive_file 536870912\nshmem 5\n");
    put("/sys/fs/cgroup/slurm/memory.max", "max\n");
    expect(5 * GIB / 2, "/slurm/job_7 (8.0 GiB, 7.0 GiB in use)");

    /* a limit looser than MemAvailable leaves MemAvailable's figure */
    put("/sys/fs/cgroup/slurm/job_7/memory.max", "68719476736\n");
    expect(20 * GIB, "MemAvailable");

    /* usage above the limit (a cgroup being reclaimed): no room, not negative */
    put("/sys/fs/cgroup/slurm/job_7/memory.max", "1073741824\n");
    put("/sys/fs/cgroup/slurm/job_7/memory.current", "2147483648\n");
    put("/sys/fs/cgroup/slurm/job_7/memory.stat", "active_file 0\ninactive_file 0\n");
    expect(0, "/slurm/job_7");

    /* v1 (a hybrid host: the v2 tree has no memory controller): the memory
     * controller in a comma list; the hierarchical total_ LRU lists (not
     * cache, nor the cgroup's own); "unlimited" at the top */
    fresh_root("v1");
    put("/proc/meminfo", MEMINFO);
    put("/proc/self/cgroup", "4:cpu,memory:/docker/abc\n3:cpuset:/\n0::/\n");
    put("/sys/fs/cgroup/unified/cgroup.procs", "1\n");
    put("/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "4294967296\n");
    put("/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "1073741824\n");
    put("/sys/fs/cgroup/memory/docker/abc/memory.stat",
        "cache 9999999999\nactive_file 7\ntotal_cache 9999999999\ntotal_active_file 268435456\n"
        "total_inactive_file 268435456\ntotal_shmem 5\n");
    put("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put("/sys/fs/cgroup/memory/memory.usage_in_bytes", "99999999999\n");
    expect(3 * GIB + GIB / 2, "/docker/abc (4.0 GiB, 1.0 GiB in use)");

    /* nothing readable: unknown, and no verdict from it */
    fresh_root("none");
    tb_host_avail a;
    tb_host_memory_available(g_root, &a);
    TB_CHECK(a.bytes == -1, "no files: %lld bytes (%s)", a.bytes, a.what);
    char why[512] = "";
    TB_CHECK(!tb_host_memory_short(100 * GIB, 4, FIRST, &a, why, sizeof why), "unknown room refused: %s", why);
    /* a meminfo without MemAvailable (kernels before 3.14) is unknown too */
    put("/proc/meminfo", "MemTotal: 1000 kB\nMemFree: 10 kB\n");
    tb_host_memory_available(g_root, &a);
    TB_CHECK(a.bytes == -1, "no MemAvailable: %lld bytes", a.bytes);

    /* the verdict: 2 ranks x 6 GiB against 10 GiB; 1 rank fits; the line */
    snprintf(a.what, sizeof a.what, "MemAvailable");
    /* sizes that round alike get more decimals: 1.04 MiB short of 1 MiB */
    a.bytes = 1 << 20;
    TB_CHECK(tb_host_memory_short((1 << 20) + (1 << 20) / 25, 1, FIRST, &a, why, sizeof why),
             "1.04 MiB in 1 MiB passed");
    TB_CHECK(strstr(why, "needs 1.04 MiB more host memory for its first step but 1.00 MiB is available") != NULL,
             "rounding: %s", why);
    a.bytes = 10 * GIB;
    TB_CHECK(tb_host_memory_short(6 * GIB, 2, FIRST, &a, why, sizeof why), "12 GiB in 10 GiB passed");
    TB_CHECK(strstr(why, "needs 6.0 GiB more host memory for its first step each, 12.0 GiB for the 2 ranks on "
                          "this host, but 10.0 GiB is available (MemAvailable)") != NULL,
             "line: %s", why);
    TB_CHECK(!tb_host_memory_short(6 * GIB, 1, FIRST, &a, why, sizeof why), "6 GiB in 10 GiB refused: %s", why);
    TB_CHECK(!tb_host_memory_short(5 * GIB, 2, FIRST, &a, why, sizeof why), "exactly 10 GiB in 10 GiB refused: %s",
             why);
    TB_CHECK(!tb_host_memory_short(0, 8, FIRST, &a, why, sizeof why), "nothing needed (a GPU) refused: %s", why);

    /* the batch that fits in 90 %: 256 samples of 93 MiB in 21.5 GiB -> 213 */
    int b = tb_host_memory_batch_fit(256LL * 93 << 20, 256, 1, 215LL * GIB / 10);
    TB_CHECK(b == 213, "batch fit %d, want 213", b);
    TB_CHECK(tb_host_memory_batch_fit(256LL * 93 << 20, 256, 4, 215LL * GIB / 10) == 53, "4 ranks");
    TB_CHECK(tb_host_memory_batch_fit(100 * GIB, 1, 1, GIB) == 0, "not one sample");
    TB_CHECK(tb_host_memory_batch_fit(GIB, 64, 1, 100 * GIB) == 64, "fits: the batch itself");

    test_host_cpus();
    char all[512], cmd[600];
    tb_test_tmp(all, sizeof all, "");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'/tb_host_memory.%d.*", all, (int)getpid());
    TB_CHECK(system(cmd) == 0, "%s", cmd);
    return tb_test_exit("host_memory");
}
