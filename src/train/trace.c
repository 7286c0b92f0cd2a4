/* trace.c - the Chrome-trace recorder behind --trace (see trace.h). */
#include "src/train/trace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/timer.h"

typedef struct {
    const char *name;
    int track;
    double ts_us, dur_us;
    int64_t step;
    int bucket;
    double bytes;
} event;

static struct {
    int on, rank;
    double t0;
    event *ev;
    size_t n, cap, dropped;
} g;

void tb_trace_start(int rank, size_t max_events) {
    g.on = 1;
    g.rank = rank;
    g.t0 = tb_now();
    g.cap = max_events;
    g.ev = malloc(max_events * sizeof *g.ev);
    if (!g.ev) tb_die("--trace: cannot hold %zu events in memory", max_events);
}

int tb_trace_on(void) { return g.on; }

void tb_trace_event(const char *name, int track, double t_start, double t_end, int64_t step,
                    int bucket, double bytes) {
    if (!g.on) return;
    if (g.n == g.cap) {
        g.dropped++;
        return;
    }
    event e = {name, track, (t_start - g.t0) * 1e6, (t_end - t_start) * 1e6, step, bucket, bytes};
    g.ev[g.n++] = e;
}

/* A growing string. */
typedef struct {
    char *s;
    size_t used, cap;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->used, b->cap - b->used, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->used) {
            b->used += (size_t)n;
            return;
        }
        b->cap = 2 * b->cap + (size_t)(n > 0 ? n : 256);
        b->s = realloc(b->s, b->cap);
        if (!b->s) TB_FATAL("out of host memory for the trace");
    }
}

/* This rank's events as JSON objects, comma-separated (no brackets). */
static char *rank_json(size_t *len, const char *host) {
    strbuf b = {malloc(4096), 0, 4096};
    if (!b.s) TB_FATAL("out of host memory for the trace");
    sb_printf(&b,
              "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d (%s)\"}},\n"
              "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}},\n"
              "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"compute\"}},\n"
              "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":"
              "\"communication\"}}",
              g.rank, g.rank, host, g.rank, g.rank, g.rank, g.rank);
    for (size_t i = 0; i < g.n; i++) {
        const event *e = &g.ev[i];
        if (e->bucket >= 0)
            sb_printf(&b,
                      ",\n{\"name\":\"%s\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                      "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%lld,\"bucket\":%d,\"bytes\":%.0f}}",
                      e->name, g.rank, e->track, e->ts_us, e->dur_us, (long long)e->step, e->bucket,
                      e->bytes);
        else
            sb_printf(&b,
                      ",\n{\"name\":\"%s\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                      "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%lld}}",
                      e->name, g.rank, e->track, e->ts_us, e->dur_us, (long long)e->step);
    }
    *len = b.used;
    return b.s;
}

void tb_trace_write(tb_comm *world, const char *path, const char *hosts) {
    int rank = tb_comm_rank(world), size = tb_comm_size(world);
    size_t len;
    char *mine = rank_json(&len, hosts + 64 * (size_t)rank);
    int64_t dropped = (int64_t)g.dropped;
    tb_comm_allreduce_sum(world, &dropped, 1, TB_INT64);
    size_t *counts = calloc((size_t)size, sizeof *counts);
    char *all = tb_comm_gather_bytes(world, mine, len, 0, counts);
    if (rank == 0) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
        FILE *f = fopen(tmp, "w");
        if (!f) tb_die("--trace: cannot write '%s': %s; check its directory", path, strerror(errno));
        errno = 0; /* a failing write below leaves its reason (ENOSPC) here */
        fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
        size_t off = 0;
        for (int r = 0; r < size; r++) {
            if (r) fputs(",\n", f);
            fwrite(all + off, 1, counts[r], f);
            off += counts[r];
        }
        fprintf(f, "\n],\"otherData\":{\"ranks\":%d,\"dropped_events\":%lld}}\n", size, (long long)dropped);
        int bad = fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0, err = errno;
        if (fclose(f) != 0 && !bad) bad = 1, err = errno;
        if (!bad && rename(tmp, path) != 0) bad = 1, err = errno;
        if (bad) {
            unlink(tmp); /* no half trace left behind, its blocks freed (a full disk) */
            tb_die("--trace: cannot write '%s': %s; free space there or choose another path", path,
                   err ? strerror(err) : "write error");
        }
        if (dropped)
            tb_warn("--trace: %lld events beyond the memory cap were dropped", (long long)dropped);
    }
    free(all);
    free(counts);
    free(mine);
    free(g.ev);
    memset(&g, 0, sizeof g);
}
