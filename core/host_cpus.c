/* host_cpus.c - the CPUs this process's job may use (see host_cpus.h). */
#include "core/host_cpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cgroup.h"

int tb_cpu_list_count(const char *list) {
    int n = 0;
    const char *s = list;
    while (*s && *s != '\n') {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0) return -1;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a) return -1;
            s = end;
        }
        n += (int)(b - a + 1);
        if (*s == ',') s++;
        else if (*s && *s != '\n') return -1;
    }
    return n > 0 ? n : -1;
}

/* The count in dir/file under root, -1 when absent or not a list. */
static int read_list(const char *root, const char *dir, const char *path, const char *file) {
    char p[1200], buf[4096];
    snprintf(p, sizeof p, "%s%s%s/%s", root, dir, strcmp(path, "/") == 0 ? "" : path, file);
    FILE *f = fopen(p, "r");
    if (!f) return -1;
    int n = fgets(buf, sizeof buf, f) ? tb_cpu_list_count(buf) : -1;
    fclose(f);
    return n;
}

/* From path up to the hierarchy's top: the first cgroup with one of files. */
static int nearest(const char *root, const char *dir, const char *path, const char *const *files) {
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    do
        for (int i = 0; files[i]; i++) {
            int n = read_list(root, dir, p, files[i]);
            if (n > 0) return n;
        }
    while (tb_cgroup_up(p));
    return -1;
}

typedef struct {
    const char *root;
    int n; /* the count found, -1 until then */
} cpus_walk;

/* One line of /proc/self/cgroup: v2's cpuset files, or v1's cpuset hierarchy. */
static int cgroup_line(void *ctx, const char *controllers, const char *path) {
    static const char *const v2[] = {"cpuset.cpus.effective", NULL};
    static const char *const v1[] = {"cpuset.effective_cpus", "cpuset.cpus", NULL};
    cpus_walk *w = ctx;
    if (!controllers[0]) {
        w->n = nearest(w->root, "/sys/fs/cgroup", path, v2);
        if (w->n < 0) w->n = nearest(w->root, "/sys/fs/cgroup/unified", path, v2); /* hybrid mounts */
    } else if (tb_cgroup_has(controllers, "cpuset")) {
        w->n = nearest(w->root, "/sys/fs/cgroup/cpuset", path, v1);
    }
    return w->n > 0;
}

int tb_host_cgroup_cpus(const char *root) {
    cpus_walk w = {root ? root : "", -1};
    tb_cgroup_each(root, cgroup_line, &w);
    return w.n;
}

int tb_host_cpus(void) {
    int n = tb_host_cgroup_cpus(NULL);
    if (n > 0) return n;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}
