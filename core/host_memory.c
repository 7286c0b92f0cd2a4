/* host_memory.c - the host memory this process may still take
 * (host_memory.h): MemAvailable, and a memory cgroup's room where it has
 * less. */
#include "core/host_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cgroup.h"
#include "core/faults.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define NO_LIMIT (1LL << 60) /* cgroup v1's "unlimited" is 2^63 rounded down to a page */

/* root + path into out; 0 when it does not fit. */
static int join(char *out, size_t len, const char *root, const char *a, const char *b) {
    int n = snprintf(out, len, "%s%s%s", root ? root : "", a, b);
    return n > 0 && (size_t)n < len;
}

/* One number from a file holding just it; "max" (cgroup v2: no limit) is
 * NO_LIMIT. 0 when the file is missing or holds something else. */
static int read_number(const char *path, long long *out) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[64] = "";
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok) return 0;
    if (strncmp(buf, "max", 3) == 0) return *out = NO_LIMIT, 1;
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (end == buf || v < 0) return 0;
    *out = v;
    return 1;
}

/* The value of "key value" (memory.stat) or "key: value kB" (meminfo) in a
 * file of such lines, times unit; 0 when absent. */
static int read_keyed(const char *path, const char *key, long long unit, long long *out) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    size_t n = strlen(key);
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n) != 0 || (line[n] != ' ' && line[n] != ':' && line[n] != '\t')) continue;
        const char *num = line + n + 1 + strspn(line + n + 1, " \t:");
        char *end;
        long long v = strtoll(num, &end, 10);
        if (end != num && v >= 0) *out = v * unit, found = 1;
    }
    fclose(f);
    return found;
}

/* The reclaimable page cache in memory.stat is the file-backed LRU lists,
 * active and inactive: not "file" (v2) or "cache" (v1), which count tmpfs
 * and shared memory too (/dev/shm, MPI's segments: not reclaimable without
 * swap), and in v1 the hierarchical total_ ones, as memory.usage_in_bytes
 * counts the child cgroups (a Slurm job's limit, the task in a child). */
typedef struct {
    const char *dir;       /* where the hierarchy is mounted, below root */
    const char *max, *cur; /* its files' names */
    const char *lru[2];    /* the file-backed LRU lists' keys in memory.stat */
} cg_files;

static const cg_files CG_V2[2] = {
    {"/sys/fs/cgroup", "memory.max", "memory.current", {"active_file", "inactive_file"}},
    {"/sys/fs/cgroup/unified", "memory.max", "memory.current", {"active_file", "inactive_file"}}};
static const cg_files CG_V1 = {"/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes",
                               {"total_active_file", "total_inactive_file"}};

/* The room of each limited cgroup from path up to the hierarchy's top; the
 * tightest replaces out's figure where it is smaller. */
static void cgroup_room(const char *root, const cg_files *fs, const char *path, tb_host_avail *out) {
    char p[512], dir[1024], file[1200];
    snprintf(p, sizeof p, "%s", path);
    do {
        long long max = 0, cur = 0, cache = 0, part = 0;
        if (join(dir, sizeof dir, root, fs->dir, strcmp(p, "/") == 0 ? "" : p) &&
            join(file, sizeof file, dir, "/", fs->max) && read_number(file, &max) && max < NO_LIMIT &&
            join(file, sizeof file, dir, "/", fs->cur) && read_number(file, &cur)) {
            if (join(file, sizeof file, dir, "/", "memory.stat"))
                for (int k = 0; k < 2; k++)
                    if (read_keyed(file, fs->lru[k], 1, &part)) cache += part;
            long long room = max - cur + (cache < cur ? cache : cur);
            if (room < 0) room = 0;
            if (out->bytes < 0 || room < out->bytes) {
                out->bytes = room;
                snprintf(out->what, sizeof out->what,
                         "the limit of the memory cgroup %.200s (%.1f GiB, %.1f GiB in use)", p, (double)max / GIB,
                         (double)cur / GIB);
            }
        }
    } while (tb_cgroup_up(p));
}

typedef struct {
    const char *root;
    tb_host_avail *out;
} room_walk;

/* One line of /proc/self/cgroup: v2's hierarchies, or v1's memory one. */
static int cgroup_line(void *ctx, const char *controllers, const char *path) {
    const room_walk *w = ctx;
    if (!controllers[0])
        for (int k = 0; k < 2; k++) cgroup_room(w->root, &CG_V2[k], path, w->out);
    else if (tb_cgroup_has(controllers, "memory"))
        cgroup_room(w->root, &CG_V1, path, w->out);
    return 0;
}

void tb_host_memory_available(const char *root, tb_host_avail *out) {
    char file[1024];
    out->bytes = -1, out->what[0] = '\0';
    long long avail = 0;
    if (join(file, sizeof file, root, "/proc/meminfo", "") && read_keyed(file, "MemAvailable", 1024, &avail))
        out->bytes = avail, snprintf(out->what, sizeof out->what, "MemAvailable");
    room_walk w = {root, out};
    tb_cgroup_each(root, cgroup_line, &w);
}

void tb_host_memory_available_here(int rank, tb_host_avail *out) {
    int64_t mib = 0;
    if (tb_fault_arg("host-mem", rank, &mib)) {
        out->bytes = (long long)mib << 20;
        snprintf(out->what, sizeof out->what, "TB_TEST_FAULT host-mem");
        return;
    }
    tb_host_memory_available(NULL, out);
}

/* "23.8 GiB", or "14.2 MiB" below a GiB, to `digits` decimals */
static const char *size_str(char *buf, size_t len, double bytes, int digits) {
    if (bytes >= GIB) snprintf(buf, len, "%.*f GiB", digits, bytes / GIB);
    else snprintf(buf, len, "%.*f MiB", digits, bytes / (1024.0 * 1024.0));
    return buf;
}

int tb_host_memory_short(long long need, int ranks, const char *for_what, const tb_host_avail *a, char *why,
                         size_t len) {
    if (a->bytes < 0 || need <= 0 || ranks < 1) return 0;
    double total = (double)need * ranks;
    if (total <= (double)a->bytes) return 0;
    char each[96] = "", s1[32], s2[32], s3[32];
    /* as many decimals as it takes for what is short to read larger than what there is */
    int d = 1;
    while (d < 4 && strcmp(size_str(s1, sizeof s1, total, d), size_str(s3, sizeof s3, (double)a->bytes, d)) == 0) d++;
    if (ranks > 1) snprintf(each, sizeof each, " each, %s for the %d ranks on this host,", s1, ranks);
    snprintf(why, len, "needs %s more host memory%s%s%s but %s is available (%s)",
             size_str(s2, sizeof s2, (double)need, d), for_what[0] ? " " : "", for_what, each, s3, a->what);
    return 1;
}

int tb_host_memory_batch_fit(long long need, int batch, int ranks, long long avail) {
    if (need <= 0 || batch < 1 || ranks < 1 || avail <= 0) return 0;
    double per_sample = (double)need / batch, room = 0.9 * (double)avail / ranks;
    double b = room / per_sample;
    return b >= batch ? batch : (int)b;
}
