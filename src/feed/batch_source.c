/* batch_source.c - synthetic, loader and batch-file sources (batch_source.h). */
#include "src/feed/batch_source.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/shard.h"
#include "data/synthetic.h"
#include "src/results/results.h"

typedef enum { SRC_SYNTHETIC, SRC_BATCHFILE, SRC_LOADER } src_kind;

struct tb_source {
    src_kind kind;
    tb_feed_opts feed;         /* decided before the source was made (feed_plan.h) */
    int batch, rank, world, image;
    tb_last_batch last;        /* the epoch's remainder (data/shard.h) */
    int64_t n;                 /* samples in an epoch's order (all ranks) */
    int64_t epoch, step;       /* position */
    /* synthetic */
    tb_synthetic syn;
    /* batch file */
    tb_batchfile bf;
    /* synthetic + batch file: this rank's current batch */
    float *images;             /* [batch,3,S,S] */
    int32_t *labels;           /* [batch] */
    /* synthetic + batch file, resident (feed.resident): the pool or
     * the file's rows in device memory, batches named by row */
    tb_backend *dbe;           /* the backend that holds dpool */
    float *dpool;              /* [dpool_rows,3,S,S] device */
    int64_t dpool_rows;
    size_t dpool_bytes;
    int32_t *rows;             /* [batch] host: this batch's rows of dpool */
    /* loader */
    const tb_dataset *ds;      /* its data set (the run's: outlives the source) */
    tb_loader *ld;             /* NULL once an upload owns it */
    tb_upload *up;             /* tb_source_feed of a uint8 feed: batches through staging buffers */
    const tb_batch *held;
    int started;               /* an epoch was started */
};

static tb_source *alloc_source(src_kind kind, int batch, int rank, int world, tb_last_batch last,
                               const tb_feed_opts *fo) {
    tb_source *s = calloc(1, sizeof *s);
    if (!s) TB_FATAL("out of host memory");
    s->kind = kind;
    if (fo) s->feed = *fo; /* else float32 on the host: all zeros */
    s->batch = batch;
    s->rank = rank;
    s->world = world;
    s->last = last;
    return s;
}

static void alloc_batch(tb_source *s) {
    size_t per = (size_t)3 * s->image * s->image;
    s->images = malloc((size_t)s->batch * per * sizeof *s->images);
    s->labels = malloc((size_t)s->batch * sizeof *s->labels);
    if (!s->images || !s->labels)
        tb_die("cannot allocate a batch of %d images of %dx%d; lower --batch-size", s->batch,
               s->image, s->image);
}

tb_source *tb_source_synthetic(int classes, int image, int batch, int64_t epoch_size, uint64_t seed, int rank,
                               int world, tb_last_batch last, const tb_feed_opts *fo) {
    tb_source *s = alloc_source(SRC_SYNTHETIC, batch, rank, world, last, fo);
    s->image = image;
    s->n = epoch_size;
    /* a pool of distinct samples, about 1 GB at most */
    size_t sample_bytes = (size_t)3 * image * image * sizeof(float);
    int64_t pool = (int64_t)batch * 16 < 256 ? 256 : (int64_t)batch * 16;
    if (pool > epoch_size) pool = epoch_size;
    if ((size_t)pool * sample_bytes > ((size_t)1 << 30)) pool = (int64_t)(((size_t)1 << 30) / sample_bytes);
    if (pool < 1) pool = 1;
    tb_synthetic_init(&s->syn, classes, image, image, (int)pool, seed);
    alloc_batch(s);
    return s;
}

tb_source *tb_source_batchfile(const char *path, int classes, int min_side, int batch, int rank, int world,
                               tb_last_batch last, const tb_feed_opts *fo) {
    tb_source *s = alloc_source(SRC_BATCHFILE, batch, rank, world, last, fo);
    tb_batchfile_read(path, classes, min_side, &s->bf);
    if (s->bf.h != s->bf.w)
        tb_die("batch file '%s' holds %dx%d images; training needs square ones", path, s->bf.h,
               s->bf.w);
    s->image = s->bf.h;
    s->n = s->bf.n;
    alloc_batch(s);
    return s;
}

tb_source *tb_source_loader(const tb_loader_opts *o, const tb_feed_opts *fo, tb_backend *be) {
    TB_ASSERT(fo); /* the loader's decode and format come from the feed */
    tb_source *s = alloc_source(SRC_LOADER, o->batch, o->rank, o->world, o->last_batch, fo);
    s->image = o->image_size;
    s->n = o->ds->n;
    s->ds = o->ds;
    tb_loader_opts lo = *o;
    tb_feed_loader_opts(&s->feed, be, &lo); /* the loader made once, as the feed needs it */
    char err[512];
    s->ld = tb_loader_create(&lo, err, sizeof err);
    if (!s->ld) tb_die("%s", err);
    return s;
}

/* tb_source_feed's preconditions, for every kind of source. */
static void check_feed_target(const tb_source *s, const tb_model *m) {
    if (s->started || s->up || s->dpool) TB_FATAL("tb_source_feed after the source started");
    if (m->height != s->image || m->width != s->image || m->max_batch < s->batch)
        TB_FATAL("tb_source_feed: the model takes %dx%d batches of %d, the source makes %dx%d of %d", m->height,
                 m->width, m->max_batch, s->image, s->image, s->batch);
}

/* Synthetic pool or batch-file rows, once, into the model's device memory. */
static void make_resident(tb_source *s, tb_model *m) {
    check_feed_target(s, m);
    const float *host = s->kind == SRC_SYNTHETIC ? s->syn.images : s->bf.images;
    int64_t rows = s->kind == SRC_SYNTHETIC ? s->syn.pool : s->bf.n;
    s->dpool_rows = rows;
    s->dpool_bytes = (size_t)rows * 3 * s->image * s->image * sizeof(float);
    s->dbe = m->be;
    s->dpool = m->be->alloc(m->be, s->dpool_bytes);
    m->be->copy_h2d(m->be, s->dpool, host, s->dpool_bytes);
    s->rows = malloc((size_t)s->batch * sizeof *s->rows);
    if (!s->rows) TB_FATAL("out of host memory");
    free(s->images); /* batches are rows now */
    s->images = NULL;
}

int64_t tb_source_resident_bytes(const tb_source *s) {
    return (int64_t)s->dpool_bytes;
}

void tb_source_feed(tb_source *s, tb_model *m) {
    if (s->kind != SRC_LOADER) {
        if (s->feed.resident) make_resident(s, m);
        return;
    }
    if (!s->feed.u8) return;
    check_feed_target(s, m);
    tb_upload_opts uo = {s->feed.pinned, s->feed.pinned};
    s->up = tb_upload_create(m, s->ld, &uo); /* owns the loader from now on */
    s->ld = NULL;
}

tb_upload *tb_source_upload(tb_source *s) { return s->up; }

static tb_loader *loader_of(const tb_source *s) {
    return s->up ? tb_upload_loader(s->up) : s->ld;
}

size_t tb_source_host_bytes_unwritten(const tb_source *s) {
    if (s->kind == SRC_LOADER) return tb_loader_host_bytes_unwritten(loader_of(s));
    if (!s->images) return 0; /* resident: batches are rows of the device's pool */
    return (size_t)s->batch * ((size_t)3 * s->image * s->image * sizeof *s->images + sizeof *s->labels);
}

int64_t tb_source_epoch_size(const tb_source *s) { return s->n; }
/* Made when asked (a checkpoint, a resume), not with every source. */
uint64_t tb_source_fingerprint(const tb_source *s) {
    if (s->kind == SRC_LOADER) return tb_dataset_hash(s->ds);
    if (s->kind == SRC_BATCHFILE) {
        uint64_t h = tb_fnv1a(TB_FNV1A_INIT, s->bf.labels, (size_t)s->n * sizeof *s->bf.labels);
        return tb_fnv1a(h, s->bf.images, (size_t)s->n * 3 * s->image * s->image * sizeof(float));
    }
    const tb_synthetic *y = &s->syn; /* its pool is a function of these */
    int64_t made_of[5] = {0x53594e, y->classes, y->h, y->pool, (int64_t)y->seed};
    return tb_fnv1a(TB_FNV1A_INIT, made_of, sizeof made_of);
}
int64_t tb_source_epoch_trained(const tb_source *s) {
    return tb_shard_epoch_trained(s->n, s->world, s->batch, s->last);
}
tb_last_batch tb_source_last_batch(const tb_source *s) { return s->last; }
int64_t tb_source_steps(const tb_source *s) {
    return tb_shard_steps(s->n, s->world, s->batch, s->last); /* the loader's rule too (data/shard.h) */
}
int tb_source_image_size(const tb_source *s) { return s->image; }

void tb_source_start_epoch(tb_source *s, int64_t epoch, int64_t first_step) {
    s->epoch = epoch;
    s->step = first_step;
    s->started = 1;
    if (s->up)
        tb_upload_start_epoch(s->up, epoch, first_step);
    else if (s->kind == SRC_LOADER)
        tb_loader_start_epoch(loader_of(s), epoch, first_step);
}

/* Positions [p, p + run) of the epoch's order into batch rows [at, at + run). */
static void fetch(tb_source *s, int64_t p, int run, int at) {
    size_t per = (size_t)3 * s->image * s->image;
    if (s->dpool) { /* resident: only which rows */
        if (s->kind == SRC_SYNTHETIC) {
            tb_synthetic_rows(&s->syn, s->epoch, p, run, s->rows + at, s->labels + at);
        } else {
            for (int i = 0; i < run; i++) s->rows[at + i] = (int32_t)(p + i);
            memcpy(s->labels + at, s->bf.labels + p, (size_t)run * sizeof(int32_t));
        }
    } else if (s->kind == SRC_SYNTHETIC) {
        tb_synthetic_samples(&s->syn, s->epoch, p, run, s->images + (size_t)at * per, s->labels + at);
    } else {
        memcpy(s->images + (size_t)at * per, s->bf.images + (size_t)p * per, (size_t)run * per * sizeof(float));
        memcpy(s->labels + at, s->bf.labels + p, (size_t)run * sizeof(int32_t));
    }
}

int tb_source_next(tb_source *s, tb_source_batch *b) {
    memset(b, 0, sizeof *b);
    if (s->step >= tb_source_steps(s)) return 0;
    b->step = s->step;
    b->global_n = tb_shard_global_count(s->n, s->world, s->batch, s->last, s->step);
    if (s->up) {
        int64_t global_n = b->global_n;
        if (!tb_upload_next(s->up, b)) return 0;
        b->global_n = global_n;
        s->step++;
        return 1;
    }
    if (s->kind == SRC_LOADER) {
        if (s->feed.u8) TB_FATAL("a uint8 loader source used before tb_source_feed gave it a model");
        const tb_batch *lb = tb_loader_next(s->ld);
        if (!lb) return 0;
        s->held = lb;
        b->in.kind = TB_INPUT_F32;
        b->in.f32 = lb->images;
        b->labels = lb->labels;
        b->n = lb->n;
        b->wait_s = lb->wait_s;
        s->step++;
        return 1;
    }
    double t0 = tb_now();
    int64_t start;
    int count;
    tb_shard_range(s->n, s->world, s->batch, s->last, s->step, s->rank, &start, &count);
    /* positions past n (--last-batch pad) wrap to the start of the order */
    for (int done = 0; done < count;) {
        int64_t p = (start + done) % s->n;
        int run = count - done < s->n - p ? count - done : (int)(s->n - p);
        fetch(s, p, run, done);
        done += run;
    }
    if (s->dpool) {
        b->in.kind = TB_INPUT_ROWS;
        b->in.rows.pool = s->dpool;
        b->in.rows.pool_rows = s->dpool_rows;
        b->in.rows.rows = s->rows;
    } else {
        b->in.kind = TB_INPUT_F32;
        b->in.f32 = s->images;
    }
    b->labels = s->labels;
    b->n = count;
    b->wait_s = tb_now() - t0;
    s->step++;
    return 1;
}

void tb_source_release(tb_source *s) {
    if (s->up) {
        tb_upload_release(s->up);
        return;
    }
    if (s->kind == SRC_LOADER && s->held) {
        tb_loader_release(s->ld, s->held);
        s->held = NULL;
    }
}

void tb_source_stats(const tb_source *s, tb_loader_stats *st) {
    memset(st, 0, sizeof *st);
    if (s->kind == SRC_LOADER) tb_loader_get_stats(loader_of(s), st);
}

int64_t tb_source_bad_samples(const tb_source *s, int64_t *out, int64_t cap) {
    return s->kind == SRC_LOADER ? tb_loader_bad_samples(loader_of(s), out, cap) : 0;
}

void tb_source_destroy(tb_source *s) {
    if (!s) return;
    if (s->kind == SRC_LOADER) {
        tb_source_release(s);
        if (s->up)
            tb_upload_destroy(s->up); /* waits for its copies, destroys the loader */
        else if (s->ld)
            tb_loader_destroy(s->ld);
    }
    if (s->dpool) { /* the last batches' copies read it: let them finish */
        s->dbe->sync(s->dbe);
        s->dbe->release(s->dbe, s->dpool);
    }
    free(s->rows);
    if (s->kind == SRC_SYNTHETIC) tb_synthetic_free(&s->syn);
    if (s->kind == SRC_BATCHFILE) tb_batchfile_free(&s->bf);
    free(s->images);
    free(s->labels);
    free(s);
}
