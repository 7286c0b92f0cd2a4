/* procmem.h - this process's resident host memory, for the memory checks
 * of long runs (loader-bench --memory-every, tests/test_loader_memory.c):
 * the resident set size from /proc/self/statm (Linux), in bytes; -1 where
 * it cannot be read. */
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

#endif
