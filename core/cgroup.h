/* cgroup.h - this process's cgroups, read below root ("" or NULL: the real
 * /, so tests read made-up trees): each line of /proc/self/cgroup, and the
 * walk from a cgroup up its hierarchy. Shared by the checks of what a
 * process may take: memory (host_memory.c) and CPUs (host_cpus.c). */
#ifndef TB_CGROUP_H
#define TB_CGROUP_H

/* One line of /proc/self/cgroup: controllers "" for cgroup v2's "0::/path",
 * else v1's comma list ("cpu,cpuacct"); path starts with '/'. Return
 * nonzero to stop at this line. */
typedef int (*tb_cgroup_fn)(void *ctx, const char *controllers, const char *path);

/* fn on each line of root's /proc/self/cgroup, in order, until one returns
 * nonzero; nothing when the file cannot be read. */
void tb_cgroup_each(const char *root, tb_cgroup_fn fn, void *ctx);

/* 1 when a v1 line's controllers (a comma list) hold name. */
int tb_cgroup_has(const char *controllers, const char *name);

/* path (a cgroup under its hierarchy's top, "/a/b") to its parent in
 * place: "/a/b" -> "/a" -> "/"; 0, path unchanged, at "/". */
int tb_cgroup_up(char *path);

#endif
