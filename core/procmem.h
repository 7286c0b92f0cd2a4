/* procmem.h - this process's resident host memory, for the memory checks
 * of long runs (loader-bench --memory-every, tests/test_loader_memory.c):
 * the resident set size from /proc/self/statm (Linux), in bytes; -1 where
 * it cannot be read; and its mapped address space (VmSize, the first field),
 * which an address-space limit (ulimit -v) bounds. */
#ifndef TB_PROCMEM_H
#define TB_PROCMEM_H

#include <stdio.h>
#include <unistd.h>

static inline long long tb_rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long long size = 0, resident = -1;
    int got = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    if (got != 2 || resident < 0 || page <= 0) return -1;
    return resident * (long long)page;
}

static inline long long tb_vm_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long long size = -1;
    int got = fscanf(f, "%lld", &size);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    if (got != 1 || size < 0 || page <= 0) return -1;
    return size * (long long)page;
}

#endif
