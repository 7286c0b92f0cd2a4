/* host_memory.h - the host memory this process may still take, for the
 * checks of what a run allocates before it writes it.
 *
 * Why: Linux's overcommit lets a large malloc succeed and the OOM killer
 * end the process later, when the pages are first written, without a word:
 * on the CPU backend the model's activation and gradient arenas are written
 * by the first step (resnet50 at batch 256, 23.8 GiB, on a 24 GiB host),
 * the loader's batch slots by its threads. Train and step (the model's
 * arenas, model/model.h tb_model_host_bytes_unwritten) and the loader (its
 * slots) compare what they will write with what the host has left and
 * refuse with one line instead.
 *
 * Available: /proc/meminfo's MemAvailable, or less where a memory cgroup of
 * this process (a container's or a batch job's limit) has less room: its
 * limit minus its usage plus its reclaimable page cache (the file-backed
 * LRU lists, as MemAvailable counts them), the tightest on the way up from
 * /proc/self/cgroup's path; cgroup v2 (memory.max, memory.current,
 * memory.stat's active_file + inactive_file) under /sys/fs/cgroup or
 * /sys/fs/cgroup/unified, v1 (memory.limit_in_bytes, memory.usage_in_bytes,
 * memory.stat's total_active_file + total_inactive_file) under
 * /sys/fs/cgroup/memory. Everything is read below root ("" or NULL: the
 * real /), so tests read made-up trees. */
#ifndef TB_HOST_MEMORY_H
#define TB_HOST_MEMORY_H

#include <stddef.h>

typedef struct {
    long long bytes; /* available to this process; -1: nothing could be read */
    char what[320];  /* where the figure comes from, e.g. "MemAvailable" or
                        "the limit of the memory cgroup /slurm/job_7 (32.0 GiB, 30.5 GiB in use)" */
} tb_host_avail;

void tb_host_memory_available(const char *root, tb_host_avail *out);
/* The same, or TB_TEST_FAULT host-mem's size for this rank (core/faults.h). */
void tb_host_memory_available_here(int rank, tb_host_avail *out);

/* 1 when `ranks` ranks on one host, each still to write `need` bytes, do
 * not fit in what a says is available (0 where nothing is known), with
 * why: "needs N GiB more host memory FOR but M GiB is available (what)"
 * (for_what may be ""),
 * no trailing advice (the caller knows the flag to change). */
int tb_host_memory_short(long long need, int ranks, const char *for_what, const tb_host_avail *a, char *why,
                         size_t len);

/* The largest batch per rank whose memory would fit in 90 % of avail, on
 * its growing with the batch (need bytes at batch): 0 when not even one
 * sample fits. */
int tb_host_memory_batch_fit(long long need, int batch, int ranks, long long avail);

#endif
