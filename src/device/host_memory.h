/* host_memory.h - the host memory this process may still take, for the
 * start-up check of a batch that cannot fit.
 *
 * Why: on a backend whose tensors live in host memory (the CPU backend) the
 * activation and gradient arenas are allocated when the model is made but
 * first written by the first step, so Linux's overcommit lets a batch too
 * large for the host through start-up and its OOM killer ends the process
 * in the first step without a word (resnet50 at batch 256, 22 GB of
 * activations, on a 24 GiB host). Train and step compare what the first
 * step will still touch with what the host has left and refuse with one
 * line instead.
 *
 * Available: /proc/meminfo's MemAvailable, or less where a memory cgroup of
 * this process (a container's or a batch job's limit) has less room: its
 * limit minus its usage plus its page cache (reclaimable, as MemAvailable
 * counts it), the tightest on the way up from /proc/self/cgroup's path;
 * cgroup v2 (memory.max, memory.current, memory.stat's file) under
 * /sys/fs/cgroup or /sys/fs/cgroup/unified, v1 (memory.limit_in_bytes,
 * memory.usage_in_bytes, memory.stat's cache) under
 * /sys/fs/cgroup/memory. Everything is read below root ("" or NULL: the
 * real /), so tests read made-up trees. */
#ifndef TB_HOST_MEMORY_H
#define TB_HOST_MEMORY_H

#include <stddef.h>

#include "model/model.h"

typedef struct {
    long long bytes; /* available to this process; -1: nothing could be read */
    char what[320];  /* where the figure comes from, e.g. "MemAvailable" or
                        "the limit of the memory cgroup /slurm/job_7 (32.0 GiB, 30.5 GiB in use)" */
} tb_host_avail;

void tb_host_memory_available(const char *root, tb_host_avail *out);
/* The same, or TB_TEST_FAULT host-mem's size for this rank (core/faults.h). */
void tb_host_memory_available_here(int rank, tb_host_avail *out);

/* What m's first step will still touch of host memory: its graph's
 * activation and gradient arenas where the backend's memory is the host's
 * (the CPU backend), 0 on a device. */
long long tb_host_memory_step_need(const tb_model *m);

/* 1 when `ranks` ranks on one host, each still to touch `need` bytes, do
 * not fit in what a says is available (0 where nothing is known), with
 * why: "... needs N GiB ... but M GiB is available (what)", no trailing
 * advice (the caller knows the flag to change). */
int tb_host_memory_short(long long need, int ranks, const tb_host_avail *a, char *why, size_t len);

/* The largest batch per rank whose arenas would fit in 90 % of avail, on
 * the arenas' growing with the batch (need bytes at batch): 0 when not even
 * one sample fits. */
int tb_host_memory_batch_fit(long long need, int batch, int ranks, long long avail);

#endif
