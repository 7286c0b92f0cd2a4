/* loader_sample.c - one sample of the loader (see loader.h, loader.c):
 * read the file, check it and draw its crop, decode and resize it on the
 * CPU, or make it a job for the GPU stage (--decode gpu); bad files
 * replaced by the next candidate of the epoch's order. Each part is timed
 * as a stage (data/loader_timeline.h) into the worker's counters, which
 * tb_loader_merge_stats adds to the loader's under its mutex, with the
 * worker thread's CPU time. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/faults.h"
#include "core/log.h"
#include "core/nvtx.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/jpeg.h"
#include "data/loader_internal.h"

/* ---- stages --------------------------------------------------------------------------- */

double tb_loader_stage_begin(int stage) {
    tb_nvtx_push(tb_loader_stage_name(stage), tb_loader_stage_color(stage));
    return tb_now();
}

void tb_loader_stage_add(worker *w, int track, int stage, int64_t step, double t0, double t1) {
    if (stage < 0 || stage >= TB_STAGE_COUNT) return;
    w->acc.stage_s[stage] += t1 > t0 ? t1 - t0 : 0;
    w->acc.stage_n[stage]++;
    if (w->ld->tl) tb_timeline_add(w->ld->tl, track, stage, step, t0, t1);
}

void tb_loader_stage_end(worker *w, int stage, double t0) {
    tb_nvtx_pop();
    tb_loader_stage_add(w, w->track, stage, w->step, t0, tb_now());
}

worker *tb_loader_worker_new(struct tb_loader *ld, int track) {
    worker *w = calloc(1, sizeof *w);
    if (!w) TB_FATAL("out of host memory");
    w->ld = ld;
    w->track = track;
    w->sp = tb_sampler_create();
    tb_sampler_defer_flip(w->sp, ld->o.gpu_flip);
    w->rgbx = malloc((size_t)4 * ld->o.image_size * ld->o.image_size);
    w->jobs = calloc((size_t)ld->o.batch, sizeof *w->jobs);
    w->rows = calloc((size_t)ld->o.batch, sizeof *w->rows);
    if (!w->rgbx || !w->jobs || !w->rows) TB_FATAL("out of host memory");
    return w;
}

void tb_loader_worker_free(worker *w) {
    if (!w) return;
    tb_sampler_destroy(w->sp);
    free(w->file);
    free(w->rgbx);
    free(w->jobs);
    free(w->rows);
    free(w);
}

void tb_loader_merge_stats(tb_loader_stats *into, tb_loader_stats *from) {
    into->images += from->images;
    into->bytes_read += from->bytes_read;
    into->skipped += from->skipped;
    into->gpu_decoded += from->gpu_decoded;
    into->gpu_to_cpu += from->gpu_to_cpu;
    into->gpu_cpu_share += from->gpu_cpu_share;
    into->decode_s += from->decode_s;
    into->resize_s += from->resize_s;
    into->gpu_batches += from->gpu_batches;
    into->gpu_stage_s += from->gpu_stage_s;
    into->cpu_s += from->cpu_s;
    for (int k = 0; k < TB_STAGE_COUNT; k++) {
        into->stage_s[k] += from->stage_s[k];
        into->stage_n[k] += from->stage_n[k];
    }
    for (int k = 0; k < 3 && from->first_bad[k][0]; k++)
        for (int m = 0; m < 3; m++)
            if (into->first_bad[m][0] == '\0') {
                memcpy(into->first_bad[m], from->first_bad[k], sizeof into->first_bad[m]);
                break;
            }
    memset(from, 0, sizeof *from);
}

/* ---- one sample ------------------------------------------------------------------------- */

static double rng_uniform(void *ctx) { return tb_rng_uniform((tb_rng *)ctx); }

/* Reads a whole file into w->file; 0, or -1 with the reason in err. */
static int read_file(worker *w, const char *path, size_t *len, char *err, size_t errlen) {
    static atomic_int opens; /* this process's opens, for the test fault */
    int fd = tb_fault_nth("emfile", &opens) ? (errno = EMFILE, -1)
                                            : open(path, O_RDONLY | O_NONBLOCK); /* a FIFO must not block here */
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        /* out of descriptors or memory: the process's fault, not the file's; skipping would mark good files
         * bad for the rest of the run */
        if (e == EMFILE || e == ENFILE || e == ENOMEM)
            tb_die("cannot open %s: %s; the data is not at fault: raise the open-file limit (ulimit -n), free "
                   "memory, or run fewer loader threads", path, strerror(e));
        snprintf(err, errlen, "cannot open: %s", strerror(e));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "not a regular file");
        close(fd);
        return -1;
    }
    if ((int64_t)st.st_size > TB_JPEG_MAX_FILE_BYTES) {
        snprintf(err, errlen, "file of %lld bytes is larger than the %lld a JPEG of the largest image accepted "
                 "needs", (long long)st.st_size, (long long)TB_JPEG_MAX_FILE_BYTES);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    if (size + 1 > w->file_cap) {
        free(w->file);
        w->file_cap = size + size / 4 + 1;
        w->file = malloc(w->file_cap);
        if (!w->file) TB_FATAL("out of host memory (%zu bytes) reading %s", w->file_cap, path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t k = read(fd, w->file + got, size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            snprintf(err, errlen, "read error: %s", k < 0 ? strerror(errno) : "file shrank");
            close(fd);
            return -1;
        }
        got += (size_t)k;
    }
    close(fd);
    *len = size;
    return 0;
}

/* The first three bad files, each named once (a file met again in a later epoch is not named again). */
static void note_bad(tb_loader_stats *st, const char *path, const char *why) {
    char shown[400], name[384]; /* its one line in '# bad files' and in the results file */
    snprintf(name, sizeof name, "%.380s: ", tb_escape_controls(path, shown, sizeof shown));
    for (int k = 0; k < 3; k++) {
        if (strncmp(st->first_bad[k], name, strlen(name)) == 0) return;
        if (st->first_bad[k][0] == '\0') {
            snprintf(st->first_bad[k], sizeof st->first_bad[k], "%.383s%.120s", name, why);
            return;
        }
    }
}

/* Keeps the file bytes of sample j's GPU job in the slot: in its arena
 * (claimed lock-free: the workers fill a slot's samples at once), or, when
 * the arena is full this time, in a spill of its own. */
static const uint8_t *keep_file(slot *s, int j, const uint8_t *file, size_t len) {
    size_t need = (len + 63) & ~(size_t)63;
    size_t off = atomic_fetch_add_explicit(&s->arena_used, need, memory_order_relaxed);
    if (off + need <= s->arena_cap) {
        memcpy(s->arena + off, file, len);
        return s->arena + off;
    }
    free(s->spill[j]);
    s->spill[j] = malloc(len);
    if (!s->spill[j]) TB_FATAL("out of host memory (%zu bytes) keeping a JPEG for the GPU", len);
    memcpy(s->spill[j], file, len);
    return s->spill[j];
}

void tb_loader_slot_refill(slot *s, int batch) {
    if (!s->spill) return; /* CPU decode: no files kept */
    size_t used = atomic_load(&s->arena_used);
    if (used > s->arena_cap) {
        size_t cap = used + used / 2; /* room: a new largest batch rarely needs a new arena */
        free(s->arena);
        s->arena = malloc(cap);
        if (!s->arena) TB_FATAL("out of host memory (%zu bytes) for a batch's JPEG files", cap);
        s->arena_cap = cap;
    }
    for (int j = 0; j < batch; j++) {
        free(s->spill[j]);
        s->spill[j] = NULL;
    }
    atomic_store(&s->arena_used, 0);
}

/* keep_bad_place: sample j, whose file is bad, keeps its place: a black
 * image with label -1, rendered on the host. */
static void store_bad_place(worker *w, slot *s, int j) {
    const int S = w->ld->o.image_size;
    memset(w->rgbx, 0, (size_t)4 * S * S);
    tb_sample_store(w->rgbx, S, w->ld->o.format, s->host_images ? s->host_images : s->b.images, j);
    if (s->kind) s->kind[j] = KIND_HOST;
    if (s->b.flip) s->b.flip[j] = 0;
    s->b.labels[j] = -1;
}

/* Produces sample j of a step that starts at global position `start`:
 * decodes order[(start + j + k) mod n] for k = k0, k0 + 1, ... until one
 * decodes (k = 0: the sample itself; positions past n are --last-batch
 * pad's repeats from the start of the order). Writes the image and label
 * into the slot. A replaced sample counts once in `skipped` (when k = 0 is
 * bad), however many bad candidates follow it; with keep_bad_place a bad
 * k = 0 is not replaced (store_bad_place). With --decode gpu and
 * allow_gpu, a candidate whose checks pass and whose coding the GPU takes
 * becomes a GPU job instead of being rendered here (the GPU stage decodes
 * it, or calls this again with allow_gpu = 0 from that candidate), unless
 * its row is the CPU's share (--nvjpeg cpu=PCT, tb_gpu_cpu_row). */
void tb_loader_make_sample(worker *w, int64_t epoch, slot *s, int j, int64_t k0, int allow_gpu) {
    tb_loader *ld = w->ld;
    const tb_dataset *ds = ld->o.ds;
    const int S = ld->o.image_size;
    const tb_decode_mode cpu_mode = ld->gpu ? TB_DECODE_PARTIAL : ld->o.decode;
    char path[4096], err[600];
    for (int64_t k = k0; k < ld->n; k++) {
        int64_t sample = ld->order[(s->start + j + k) % ld->n];
        if (atomic_load_explicit(&ld->known_bad[sample], memory_order_relaxed) & 1) { /* named when first found */
            w->acc.skipped += k == 0;
            if (k == 0 && ld->o.keep_bad_place) {
                store_bad_place(w, s, j);
                return;
            }
            continue;
        }
        tb_dataset_path(ds, sample, path, sizeof path);
        double t0 = tb_loader_stage_begin(TB_STAGE_READ);
        size_t len = 0;
        int rc = TB_RENDER_BAD_FILE;
        tb_render_info info;
        memset(&info, 0, sizeof info);
        int read_rc = read_file(w, path, &len, err, sizeof err);
        tb_loader_stage_end(w, TB_STAGE_READ, t0);
        double tr = tb_now();
        int rendered = 0; /* a render ran (its NVTX range is open) */
        int routed = 0;   /* rendered here though --decode gpu: 1 the CPU's share, 2 a coding the GPU does not take */
        if (read_rc == 0) {
            /* a sample at its own place draws from (seed, epoch, sample); a
             * repeat of it in the same epoch (--last-batch pad's positions past
             * n, or a bad file's stand-in, k > 0) also keys on the position
             * it fills, so that it gets its own crop and flip, as a
             * DataLoader draws afresh for every index it yields */
            const int64_t place = s->start + j;
            uint64_t key = tb_hash2((uint64_t)epoch, (uint64_t)sample);
            if (k > 0 || place >= ld->n) key = tb_hash2(key ^ 0x5ea7000000000000ULL, (uint64_t)place);
            tb_rng r;
            tb_rng_seed(&r, ld->o.seed, key);
            if (ld->gpu && allow_gpu) {
                /* the CPU path's checks and draws; the GPU decodes what it takes */
                tb_sample_plan_info pi;
                tb_loader_stage_begin(TB_STAGE_CHECK);
                rc = tb_sample_plan(w->sp, w->file, len, ld->o.train, S, rng_uniform, &r, NULL, &pi, err, sizeof err);
                int decodable = rc == 0 && tb_gpu_decodable(&pi.fmt, NULL, 0);
                int share = decodable && tb_gpu_cpu_row(ld->gpu_cpu_share, j); /* --nvjpeg cpu=PCT */
                if (decodable && !share) {
                    tb_gpu_job *job = &s->jobs[j];
                    memset(job, 0, sizeof *job);
                    job->jpeg = keep_file(s, j, w->file, len);
                    job->len = len;
                    job->width = pi.width;
                    job->height = pi.height;
                    job->g = pi.g;
                    job->g.flip = 0;
                    job->row = j;
                    s->b.flip[j] = (uint8_t)pi.g.flip;
                    s->kind[j] = KIND_GPU;
                    s->cand[j] = k;
                    s->b.labels[j] = ds->labels[sample];
                    w->acc.images++;
                    w->acc.bytes_read += (int64_t)len;
                    tb_loader_stage_end(w, TB_STAGE_CHECK, tr);
                    w->acc.decode_s += tb_now() - t0;
                    return;
                }
                tb_loader_stage_end(w, TB_STAGE_CHECK, tr);
                if (rc == 0) { /* the CPU's share, or a coding the GPU path does not take: rendered here,
                                  same geometry */
                    routed = share ? 1 : 2;
                    tr = tb_loader_stage_begin(TB_STAGE_DECODE);
                    rendered = 1;
                    rc = tb_sample_render(w->sp, w->file, len, cpu_mode, ld->o.train, S, NULL, NULL, &pi.g, w->rgbx,
                                          &info, err, sizeof err);
                }
            } else {
                tr = tb_loader_stage_begin(TB_STAGE_DECODE);
                rendered = 1;
                rc = tb_sample_render(w->sp, w->file, len, cpu_mode, ld->o.train, S, rng_uniform, &r, NULL, w->rgbx,
                                      &info, err, sizeof err);
            }
        }
        if (rendered) { /* the render resamples too: its own resize time is the `resize` stage's */
            tb_nvtx_pop();
            double t1r = tb_now();
            tb_loader_stage_add(w, w->track, TB_STAGE_DECODE, w->step, tr, t1r - info.resize_s);
            if (info.resize_s > 0)
                tb_loader_stage_add(w, w->track, TB_STAGE_RESIZE, w->step, t1r - info.resize_s, t1r);
        }
        if (rc != 0) {
            if (ld->o.strict)
                tb_die("bad sample %s: %s, met preparing step %lld of epoch %lld (--strict-data makes bad files "
                       "fatal: replace or remove the file, or run without it)",
                       path, err, (long long)s->b.step, (long long)epoch);
            atomic_fetch_or_explicit(&ld->known_bad[sample], rc == TB_RENDER_BAD_FILE ? 3 : 2, memory_order_relaxed);
            w->acc.skipped += k == 0;
            note_bad(&w->acc, path, err);
            if (k == 0 && ld->o.keep_bad_place) {
                store_bad_place(w, s, j);
                return;
            }
            continue;
        }
        double t1 = tb_loader_stage_begin(TB_STAGE_RESIZE);
        tb_sample_store(w->rgbx, S, ld->o.format, s->host_images ? s->host_images : s->b.images, j);
        tb_loader_stage_end(w, TB_STAGE_RESIZE, t1);
        if (s->kind) s->kind[j] = KIND_HOST;
        if (s->b.flip) s->b.flip[j] = (uint8_t)info.flip;
        s->b.labels[j] = ds->labels[sample];
        w->acc.images++;
        w->acc.gpu_cpu_share += routed == 1; /* samples, not attempts: a bad file's replacement counts once */
        w->acc.gpu_to_cpu += routed == 2;
        w->acc.bytes_read += (int64_t)len;
        w->acc.decode_s += (t1 - t0) - info.resize_s;
        w->acc.resize_s += info.resize_s + (tb_now() - t1);
        return;
    }
    /* every candidate from k0 on was tried (or known bad) and failed; the loader's first bad file is
     * copied under its lock (other workers merge into it) */
    char first[sizeof ld->stats.first_bad[0]];
    if (w->acc.first_bad[0][0]) {
        snprintf(first, sizeof first, "%s", w->acc.first_bad[0]);
    } else {
        pthread_mutex_lock(&ld->mu);
        snprintf(first, sizeof first, "%s", ld->stats.first_bad[0]);
        pthread_mutex_unlock(&ld->mu);
    }
    tb_die("no sample of %s decodes: all %lld files tried are bad (%s%s); the data set needs readable, valid JPEGs",
           ds->is_list ? ds->list_path : ds->root,
           (long long)(ld->n - k0), k0 == 0 ? "the whole data set; first: " : "first: ", first);
}

