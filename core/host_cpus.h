/* host_cpus.h - the CPUs this process's job may use on its host: its
 * cpuset cgroup's CPUs (a container's --cpuset-cpus, a Slurm job's
 * allocation), else the online CPUs. Against it, a rank's own affinity
 * mask says whether a launcher bound the rank to fewer (mpirun binds each
 * of one or two ranks to one core by default), where advice to launch with
 * more CPUs a rank helps; inside a container's or job's set it does not.
 *
 * cgroup v2: cpuset.cpus.effective of this process's cgroup (from
 * /proc/self/cgroup's "0::/path"), or of the nearest parent that has one,
 * under /sys/fs/cgroup; v1: cpuset.effective_cpus (or cpuset.cpus) under
 * /sys/fs/cgroup/cpuset. Read below root ("" or NULL: the real /), so tests
 * read made-up trees. */
#ifndef TB_HOST_CPUS_H
#define TB_HOST_CPUS_H

/* CPUs in a list such as "0-7,16,18-19"; -1 when it is not one. */
int tb_cpu_list_count(const char *list);

/* The cpuset cgroup's CPU count, or -1 when there is none to read. */
int tb_host_cgroup_cpus(const char *root);

/* tb_host_cgroup_cpus(NULL), or the online CPUs where that is -1. */
int tb_host_cpus(void);

#endif
