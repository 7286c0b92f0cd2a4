/* loader_timeline.c - the loader's stage names and its interval log, written
 * as a Chrome trace (see loader_timeline.h). */
#include "data/loader_timeline.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

static const char *const k_names[TB_STAGE_COUNT] = {
    "read",         "check",      "decode",     "resize",     "gpu_plan",   "gpu_submit",
    "gpu_wait",     "gpu_fallback", "dev_upload", "dev_decode", "dev_resize", "next_wait",
};

/* one colour per stage: host reads grey, CPU decode greens, GPU host work
 * blues, device work oranges, the consumer's wait red */
static const uint32_t k_colors[TB_STAGE_COUNT] = {
    0xff9e9e9e, 0xff80cbc4, 0xff43a047, 0xff9ccc65, 0xff42a5f5, 0xff1e88e5,
    0xffab47bc, 0xff8d6e63, 0xffffb74d, 0xfffb8c00, 0xffffd54f, 0xffe53935,
};

const char *tb_loader_stage_name(int stage) {
    return stage >= 0 && stage < TB_STAGE_COUNT ? k_names[stage] : "unknown";
}

int tb_loader_stage_on_device(int stage) {
    return stage == TB_STAGE_DEV_UPLOAD || stage == TB_STAGE_DEV_DECODE || stage == TB_STAGE_DEV_RESIZE;
}

uint32_t tb_loader_stage_color(int stage) { return stage >= 0 && stage < TB_STAGE_COUNT ? k_colors[stage] : 0; }

#define MAX_TRACKS 4096

struct tb_timeline {
    tb_timeline_event *ev;
    atomic_uchar *ready;      /* ev[i] written whole (a writer may still be filling a slot handed out) */
    size_t cap;
    atomic_size_t next;       /* slots handed out (may pass cap: those are dropped) */
    char *names[MAX_TRACKS];
};

tb_timeline *tb_timeline_create(size_t max_events) {
    tb_timeline *tl = calloc(1, sizeof *tl);
    if (!tl) TB_FATAL("out of host memory");
    tl->cap = max_events;
    tl->ev = calloc(max_events ? max_events : 1, sizeof *tl->ev);
    tl->ready = calloc(max_events ? max_events : 1, sizeof *tl->ready);
    if (!tl->ev || !tl->ready) TB_FATAL("out of host memory for a timeline of %zu intervals", max_events);
    atomic_init(&tl->next, 0);
    return tl;
}

void tb_timeline_destroy(tb_timeline *tl) {
    if (!tl) return;
    for (int k = 0; k < MAX_TRACKS; k++) free(tl->names[k]);
    free(tl->ev);
    free(tl->ready);
    free(tl);
}

void tb_timeline_name_track(tb_timeline *tl, int track, const char *name) {
    if (!tl || track < 0 || track >= MAX_TRACKS) return;
    free(tl->names[track]);
    size_t n = strlen(name) + 1;
    tl->names[track] = malloc(n);
    if (!tl->names[track]) TB_FATAL("out of host memory");
    memcpy(tl->names[track], name, n);
}

void tb_timeline_add(tb_timeline *tl, int track, int stage, int64_t step, double t0, double t1) {
    if (!tl) return;
    size_t i = atomic_fetch_add_explicit(&tl->next, 1, memory_order_relaxed);
    if (i >= tl->cap) return;
    tl->ev[i] = (tb_timeline_event){t0, t1, step, track, stage};
    atomic_store_explicit(&tl->ready[i], 1, memory_order_release); /* a reader sees it whole, or not at all */
}

int tb_timeline_ready(const tb_timeline *tl, size_t i) {
    return i < tl->cap && atomic_load_explicit(&tl->ready[i], memory_order_acquire);
}

size_t tb_timeline_kept(const tb_timeline *tl) {
    size_t n = atomic_load(&((tb_timeline *)tl)->next);
    return n < tl->cap ? n : tl->cap;
}

size_t tb_timeline_dropped(const tb_timeline *tl) {
    size_t n = atomic_load(&((tb_timeline *)tl)->next);
    return n > tl->cap ? n - tl->cap : 0;
}

tb_timeline_event tb_timeline_get(const tb_timeline *tl, size_t i) { return tl->ev[i]; }

/* A JSON string body: the names are ours, but a data path may hold anything. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int tb_timeline_write_json(const tb_timeline *tl, const char *path, const char *title, char *err, size_t errlen) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    /* written while the loader may still run: only the intervals written whole (a slot handed out but not
     * yet filled would read as zeros and move the origin to the clock's) */
    size_t n = tb_timeline_kept(tl), whole = 0;
    double origin = 0;
    for (size_t i = 0; i < n; i++)
        if (tb_timeline_ready(tl, i) && (whole++ == 0 || tl->ev[i].t0 < origin)) origin = tl->ev[i].t0;
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"kept\": %zu, \"dropped\": %zu, \"unfinished\": %zu},"
               "\n \"traceEvents\": [\n",
            whole, tb_timeline_dropped(tl), n - whole);
    fprintf(f, "  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": ");
    json_str(f, title);
    fprintf(f, "}}");
    for (int k = 0; k < MAX_TRACKS; k++)
        if (tl->names[k]) {
            fprintf(f, ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, \"args\": {\"name\": ", k);
            json_str(f, tl->names[k]);
            fprintf(f, "}},\n  {\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
                       "\"args\": {\"sort_index\": %d}}",
                    k, k);
        }
    for (size_t i = 0; i < n; i++) {
        if (!tb_timeline_ready(tl, i)) continue;
        const tb_timeline_event *e = &tl->ev[i];
        double d = e->t1 > e->t0 ? e->t1 - e->t0 : 0;
        fprintf(f, ",\n  {\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 0, \"tid\": %d, \"ts\": %.3f, "
                   "\"dur\": %.3f, \"args\": {\"step\": %lld}}",
                tb_loader_stage_name(e->stage), tb_loader_stage_on_device(e->stage) ? "device" : "host", e->track,
                (e->t0 - origin) * 1e6, d * 1e6, (long long)e->step);
    }
    fprintf(f, "\n]}\n");
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}
