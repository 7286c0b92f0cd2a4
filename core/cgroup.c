/* cgroup.c - this process's cgroups (see cgroup.h). */
#include "core/cgroup.h"

#include <stdio.h>
#include <string.h>

void tb_cgroup_each(const char *root, tb_cgroup_fn fn, void *ctx) {
    char file[1024], line[1024];
    snprintf(file, sizeof file, "%s/proc/self/cgroup", root ? root : "");
    FILE *f = fopen(file, "r");
    if (!f) return;
    int stop = 0;
    while (!stop && fgets(line, sizeof line, f)) { /* "0::/path" (v2), "4:memory:/path" or "4:cpu,memory:/path" */
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = '\0', *c2 = '\0';
        const char *ctl = c1 + 1, *path = c2[1] == '/' ? c2 + 1 : "/";
        if (strcmp(line, "0") == 0 && ctl[0] == '\0') stop = fn(ctx, "", path);
        else if (ctl[0]) stop = fn(ctx, ctl, path);
    }
    fclose(f);
}

int tb_cgroup_has(const char *controllers, const char *name) {
    size_t len = strlen(name);
    for (const char *t = controllers; *t;) {
        size_t n = strcspn(t, ",");
        if (n == len && strncmp(t, name, n) == 0) return 1;
        t += n + (t[n] == ',');
    }
    return 0;
}

int tb_cgroup_up(char *path) {
    char *slash = strrchr(path, '/');
    if (!slash || strcmp(path, "/") == 0) return 0;
    if (slash == path) path[1] = '\0'; /* "/a" -> "/" */
    else *slash = '\0';
    return 1;
}
